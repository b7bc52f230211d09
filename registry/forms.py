"""Forms for the pages that write (import, reported results) and for checking a pair."""
from __future__ import annotations

from django import forms

from .hub_import import HubImportError, check_include, normalize_repo_id
from .models import ReportedResult


class ImportForm(forms.Form):
    repo = forms.CharField(label="Repository", max_length=200,
                           widget=forms.TextInput(attrs={"placeholder": "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"}))
    include = forms.CharField(label="Only files matching", max_length=200, required=False,
                              widget=forms.TextInput(attrs={"placeholder": "*Q4_K_M* (optional)"}))
    revision = forms.CharField(label="Revision", max_length=200, required=False,
                               widget=forms.TextInput(attrs={"placeholder": "main"}))

    def clean_repo(self) -> str:
        try:
            return normalize_repo_id(self.cleaned_data["repo"])
        except HubImportError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_include(self) -> str | None:
        try:
            return check_include(self.cleaned_data["include"].strip())
        except HubImportError as exc:
            raise forms.ValidationError(str(exc)) from None


class CheckForm(forms.Form):
    target = forms.CharField(max_length=1024, widget=forms.TextInput(
        attrs={"placeholder": "hf://OWNER/REPO/target.gguf or a registered file", "list": "registered-files"}))
    draft = forms.CharField(max_length=1024, widget=forms.TextInput(
        attrs={"placeholder": "hf://OWNER/REPO/draft.gguf or a registered file", "list": "registered-files"}))


class ReportedResultForm(forms.ModelForm):
    class Meta:
        model = ReportedResult
        fields = ["k", "acceptance", "speedup", "content_type", "hardware", "llama_cpp_build", "citation",
                  "source_url", "notes"]
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
