"""The "benchmark this pair" form (the sweep's knobs, checked by runner.runs.params) and the "Soak test"
buttons' form."""

from __future__ import annotations

from typing import cast

from django import forms

from inspector.speculative import SPEC_TYPES
from runner.prompts import load_task_set
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


class BenchmarkForm(forms.Form):
    ks = forms.CharField(
        label="K values",
        initial="4,8,16",
        max_length=MAX_LIST_CHARS,
        help_text="extended upward while still getting faster",
    )
    content_types = forms.MultipleChoiceField(
        label="Content types", required=False, widget=forms.CheckboxSelectMultiple, help_text="none ticked: all"
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

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        types = load_task_set().content_types
        cast(forms.MultipleChoiceField, self.fields["content_types"]).choices = [(t, t) for t in types]

    def clean_ks(self):
        return _csv(int)(self.cleaned_data["ks"])

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
