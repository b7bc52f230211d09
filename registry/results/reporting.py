"""Adding a reported result (figures measured elsewhere): one function for the pair page, the API and
``import_speed_bench``, so every way in applies the same permission and the same validation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms

from inspector.spec_flags import known_method
from inspector.speculative import SPEC_TYPES
from registry.models import Pair, ReportedResult
from registry.results.figures import refresh_best


class ReportedResultForm(forms.ModelForm):
    class Meta:
        model = ReportedResult
        fields = [
            "k",
            "acceptance",
            "speedup",
            "content_type",
            "hardware",
            "llama_cpp_build",
            "citation",
            "source_url",
            "notes",
        ]
        widgets = {"notes": forms.Textarea(attrs={"rows": 2})}

    source_url = forms.URLField(max_length=500, required=False, assume_scheme="https")

    def clean_acceptance(self) -> float | None:
        v = self.cleaned_data["acceptance"]
        if v is not None and not 0 <= v <= 1:
            raise forms.ValidationError("a fraction between 0 and 1 (0.708 for 70.8%)")
        return v

    def clean_speedup(self) -> float | None:
        v = self.cleaned_data["speedup"]
        if v is not None and v <= 0:
            raise forms.ValidationError("speculative ÷ plain tokens per second: above 0")
        return v


class ReportNotAllowed(PermissionError):
    """The user may not add reported results; one line."""


class ReportInvalid(ValueError):
    """The figures do not pass the form's checks; the bound form carries the errors per field."""

    def __init__(self, form: forms.BaseForm) -> None:
        self.form = form
        super().__init__("; ".join(f"{field}: {' '.join(map(str, errs))}" for field, errs in form.errors.items()))


def may_report(user) -> bool:
    """Reported figures come from staff or users granted the permission, never from any account."""
    return user.is_authenticated and (user.is_staff or user.has_perm("registry.add_reportedresult"))


class FullReportedResultForm(ReportedResultForm):
    """The pair page's form plus what tools know and a person typing rarely does: the speculation
    method and the two speeds (the API and import_speed_bench send them)."""

    class Meta(ReportedResultForm.Meta):
        fields = [*ReportedResultForm.Meta.fields, "method", "tokens_per_second", "baseline_tokens_per_second"]

    method = forms.CharField(max_length=32, required=False)  # left out: draft-simple, the model's default

    def clean_method(self) -> str:
        method = (self.cleaned_data.get("method") or "draft-simple").strip()
        if not known_method(method):
            raise forms.ValidationError(
                f"expected one of {', '.join(SPEC_TYPES)}, or a chain such as ngram-mod+draft-simple"
            )
        return method

    def _positive(self, name: str) -> float | None:
        v = self.cleaned_data[name]
        if v is not None and not v > 0:
            raise forms.ValidationError("tokens per second: above 0")
        return v

    def clean_tokens_per_second(self) -> float | None:
        return self._positive("tokens_per_second")

    def clean_baseline_tokens_per_second(self) -> float | None:
        return self._positive("baseline_tokens_per_second")


def add_reported(
    pair: Pair, data: Mapping[str, Any], user=None, form_class: type[ReportedResultForm] = FullReportedResultForm
) -> ReportedResult:
    """Validate ``data`` with ``form_class`` and store it as a reported result of ``pair``.

    ``user`` None means the command line (trusted, no author); a web or API user needs staff status or
    the 'add reported result' permission. Raises ReportNotAllowed or ReportInvalid.
    """
    if user is not None and not may_report(user):
        raise ReportNotAllowed("Adding reported results needs staff status or the 'add reported result' permission.")
    form = form_class(data)
    if not form.is_valid():
        raise ReportInvalid(form)
    result = form.save(commit=False)
    result.pair, result.reported_by = pair, user
    if not result.method:
        result.method = "draft-simple"  # the model's default, when a form leaves the field out
    result.save()
    refresh_best(pair)  # the table shows the pair's best figure
    return result
