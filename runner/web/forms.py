"""The "benchmark this pair" form (the sweep's knobs, checked by runner.runs.params) and the "Soak test"
buttons' form."""

from __future__ import annotations

import json
from typing import Any, cast

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS

from inspector.info import load_refusal
from inspector.speculative import NGRAM_METHODS, SPEC_TYPES
from registry.formatting import nbytes
from registry.models import GGUFFile, Pair
from runner.errors import BenchmarkError
from runner.methods import GRID, P_MIN_GRID, settings_for
from runner.predict.prediction import predictable
from runner.predict.runs import MEASURE_BEST
from runner.prompts import load_task_set
from runner.runs.estimate import estimate, measured_speed
from runner.runs.params import normalize_params
from runner.runs.queues import local_hardware_class
from runner.soak.targets import MAX_DURATION_CHARS

SPEC_METHODS = [m for m in SPEC_TYPES if m not in ("none", "draft-simple")]


def _csv(cast):
    def parse(text: str):
        try:
            return [cast(x) for x in text.replace(" ", "").split(",") if x]
        except ValueError:
            raise forms.ValidationError(f"expected comma-separated numbers, got {text!r}") from None

    return parse


MAX_LIST_CHARS = 200  # a comma-separated list of K values or temperatures: a few dozen numbers at most


MAX_FILES = 200  # the files a picker lists per base model (a model has a few dozen quants at most)
P_MIN_DEFAULT = ",".join(f"{p:g}" for p in P_MIN_GRID)


def model_files(pair_file: GGUFFile, base_id: int | None) -> list[dict[str, Any]]:
    """The registered files of one side of a pair: its base model's (else its model's), the pair's own first, each
    with why llama.cpp cannot load it where the header says so. Two keys of each stored inspection are read, not
    the whole of it (a header's metadata and token table stay in the database)."""
    qs = (
        GGUFFile.objects.filter(model__base_id=base_id)
        if base_id
        else GGUFFile.objects.filter(model=pair_file.model_id)
    )
    fields = ("pk", "source", "file_type", "size", "info__n_tensors", "info__data_complete")
    out = [
        {
            "pk": r["pk"],
            "label": _label(r["source"], r["file_type"], r["size"]),
            "refusal": load_refusal({"n_tensors": r["info__n_tensors"], "data_complete": r["info__data_complete"]}),
        }
        for r in qs.order_by("source").values(*fields)[:MAX_FILES]
    ]
    if not any(x["pk"] == pair_file.pk for x in out):  # beyond MAX_FILES: the pair's own is offered all the same
        label = _label(pair_file.source, pair_file.file_type, pair_file.size)
        out.append({"pk": pair_file.pk, "label": label, "refusal": load_refusal(pair_file.info)})
    out.sort(key=lambda x: x["pk"] != pair_file.pk)  # stable: the pair's own first, then the others by name
    return out


def _label(source: str, quant: str, size: int | None) -> str:
    """A picker's line: the file's name and quant first (a repository's name is long and shared by its quants)."""
    folder, _, name = source.removeprefix("hf://").rpartition("/")
    return f"{name} · {quant or 'quant unknown'} · {nbytes(size)}" + (f" · {folder}" if folder else "")


def _choices(files: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(x["pk"], x["label"] + (" — llama.cpp cannot load it" if x["refusal"] else "")) for x in files]


def _default(files: list[dict[str, Any]]) -> int:
    """The pair's own file (listed first), unless llama.cpp cannot load it and another quant of the model can."""
    return next((x["pk"] for x in files if not x["refusal"]), files[0]["pk"])


class BenchmarkForm(forms.Form):
    # Not required: a request that names no file (an older form, a script) measures the pickers' defaults.
    target_file = forms.TypedChoiceField(
        label="Target file", coerce=int, required=False, empty_value=None, help_text="the quant measured"
    )
    draft_file = forms.TypedChoiceField(
        label="Draft file",
        coerce=int,
        required=False,
        empty_value=None,
        help_text="n-gram methods measure the target alone and leave it out",
    )
    ks = forms.CharField(
        label="K values",
        initial="4,8,16",
        max_length=MAX_LIST_CHARS,
        help_text="extended upward while still getting faster",
    )
    content_types = forms.MultipleChoiceField(
        label="Content types", required=False, widget=forms.CheckboxSelectMultiple, help_text="none ticked: all"
    )
    p_mins = forms.CharField(
        label="p-min values",
        required=False,
        initial=P_MIN_DEFAULT,
        max_length=MAX_LIST_CHARS,
        help_text=f"draft models and MTP heads: each K at each (--spec-draft-p-min); empty: {P_MIN_DEFAULT}",
    )
    temperatures = forms.CharField(initial="0", max_length=MAX_LIST_CHARS, help_text="comma-separated, e.g. 0,0.7")
    repeats = forms.IntegerField(initial=3, min_value=1, max_value=20)
    n_predict = forms.IntegerField(label="Tokens per run", initial=128, min_value=8, max_value=4096)
    prompts_per_type = forms.IntegerField(initial=3, min_value=1, max_value=50)
    hardware = forms.CharField(required=False, help_text="hardware class queue; empty: this server's worker class")
    method = forms.ChoiceField(
        label="Method",
        required=False,
        initial="",
        choices=[("", "the draft model (draft-simple)")] + [(m, m) for m in SPEC_METHODS],
        help_text="llama.cpp --spec-type; n-gram methods ignore the draft and sweep their own draft length",
    )

    via = forms.ChoiceField(
        label="Measured with",
        required=False,
        initial="cli",
        choices=[
            ("cli", "llama.cpp's command-line tools"),
            ("server", "llama-server, started as it would be deployed"),
        ],
        help_text="through the server, what is measured is exactly what gets deployed",
    )

    full_sweep = forms.BooleanField(
        label="Measure every setting",
        required=False,
        help_text="by default every setting is predicted first (temperature 0) and only the best two per content "
        "type are measured",
    )

    def __init__(self, *args, pair: Pair | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        types = load_task_set().content_types
        cast(forms.MultipleChoiceField, self.fields["content_types"]).choices = [(t, t) for t in types]
        if pair is None:  # the values checked alone: the pickers offer nothing
            return
        sides = [("target_file", pair.target, pair.target_base_id), ("draft_file", pair.draft, pair.draft_base_id)]
        for name, own, base in sides:
            files = model_files(own, base)
            field = cast(forms.TypedChoiceField, self.fields[name])
            field.choices = _choices(files)
            field.initial = _default(files)

    def clean_ks(self):
        return _csv(int)(self.cleaned_data["ks"])

    def clean_p_mins(self):
        return _csv(float)(self.cleaned_data["p_mins"]) or None

    def chosen_files(self) -> tuple[GGUFFile, GGUFFile]:
        """The target and draft files picked: quants of the pair's two base models, as the pickers offer them."""
        t = self.cleaned_data["target_file"] or self.fields["target_file"].initial
        d = self.cleaned_data["draft_file"] or self.fields["draft_file"].initial
        by_pk = GGUFFile.objects.in_bulk([t, d])
        return by_pk[t], by_pk[d]

    def clean_temperatures(self):
        return _csv(float)(self.cleaned_data["temperatures"])

    def params(self) -> dict:
        d = self.cleaned_data
        return {
            "ks": d["ks"],
            "content_types": d["content_types"] or None,
            "temperatures": d["temperatures"],
            "repeats": d["repeats"],
            "n_predict": d["n_predict"],
            "prompts_per_type": d["prompts_per_type"],
            "p_mins": d.get("p_mins"),
            "methods": [d["method"]] if d.get("method") else None,
            "via": d.get("via") or None,
            "full_sweep": bool(d.get("full_sweep")),
        }


class SoakForm(forms.Form):
    """The "Soak test" buttons of the pair and deployment pages: bounded here, then read by runner.soak.targets (which
    refuses a long duration too, for the API and the shell)."""

    duration = forms.CharField(
        required=False,
        max_length=MAX_DURATION_CHARS,
        error_messages={"max_length": f"a duration is at most {MAX_DURATION_CHARS} characters: write 90s, 30m or 1h"},
    )
    clients = forms.IntegerField(required=False, error_messages={"invalid": "clients must be a whole number"})

    def first_error(self) -> str:
        """One line for the page's message."""
        return next(str(e) for errors in self.errors.values() for e in errors)


def form_estimate(form: BenchmarkForm) -> dict[str, Any] | None:
    """What the benchmark form says of how long its run would take (runner.runs.estimate), for the values it shows:
    the sentence, and the figures its script recomputes the sentence from as the values change. None when the
    values cannot be queued (the form says why)."""
    # a form refused when queued (a file llama.cpp cannot load) still estimates the values it was sent
    valid = form.is_bound and (form.is_valid() or set(form.errors) == {NON_FIELD_ERRORS})
    if form.is_bound and not valid:
        return None
    target_pk = (form.cleaned_data["target_file"] if valid else None) or form.fields["target_file"].initial
    target = GGUFFile.objects.select_related("model").filter(pk=target_pk).first()
    hardware = (form.cleaned_data.get("hardware") if valid else "") or local_hardware_class()
    try:
        p = normalize_params(form.params() if valid else {})
    except BenchmarkError:
        return None
    n_all = len(load_task_set().content_types)
    n_types = len(p["content_types"] or ()) or n_all
    speed = measured_speed(target, hardware) if target is not None else None
    if speed is None:
        return {"text": f"No estimate: nothing of this target has been measured on {hardware} yet.", "json": ""}
    return {
        "text": estimate(p, n_types, speed).sentence(),
        "json": json.dumps(
            {
                "seconds_per_token": speed.seconds_per_token,
                "lower_bound": speed.lower_bound,
                "basis": speed.basis,
                "content_types": n_all,
                "grid": list(GRID),
                "measure_best": MEASURE_BEST,
                # settings of the methods whose count does not follow K and p-min (n-gram ones)
                "fixed": {m: len(settings_for(m, [1], [None])) for m in SPEC_METHODS if m in NGRAM_METHODS},
                "predictable": [m for m in ["draft-simple", *SPEC_METHODS] if predictable(m)],
            }
        ),
    }
