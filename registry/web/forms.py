"""Forms for the pages that write (import, reported results) and for checking a pair."""

from __future__ import annotations

from django import forms

from registry.hub.importing import HubImportError, check_include, normalize_repo_id


class ImportForm(forms.Form):
    repo = forms.CharField(
        label="Repository",
        max_length=200,
        widget=forms.TextInput(attrs={"placeholder": "Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF"}),
    )
    include = forms.CharField(
        label="Only files matching",
        max_length=200,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "*Q4_K_M* (optional)"}),
    )
    revision = forms.CharField(
        label="Revision", max_length=200, required=False, widget=forms.TextInput(attrs={"placeholder": "main"})
    )

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
    target = forms.CharField(
        max_length=1024,
        widget=forms.TextInput(
            attrs={"placeholder": "hf://OWNER/REPO/target.gguf or a registered file", "list": "registered-files"}
        ),
    )
    draft = forms.CharField(
        max_length=1024,
        required=False,  # none: what the target can use alone (n-gram methods, its own MTP heads)
        widget=forms.TextInput(
            attrs={"placeholder": "hf://OWNER/REPO/draft.gguf or a registered file", "list": "registered-files"}
        ),
    )
