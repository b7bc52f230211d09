"""Forms for notes and deployments; the checks themselves live in notes.py and deployments.py."""

from __future__ import annotations

from django import forms

from inspector.speculative import SPEC_TYPES
from registry.team.models import NOTE_MAX_CHARS


class NoteForm(forms.Form):
    body = forms.CharField(
        label="Note (Markdown)",
        max_length=NOTE_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "What did you try, what did you see?"}),
    )


class DeploymentForm(forms.Form):
    target = forms.IntegerField(widget=forms.HiddenInput)
    draft = forms.IntegerField(required=False, widget=forms.HiddenInput)
    run = forms.IntegerField(required=False, widget=forms.HiddenInput)
    method = forms.ChoiceField(choices=[(m, m) for m in SPEC_TYPES], help_text="--spec-type; none: no speculation")
    k = forms.IntegerField(label="K", required=False, min_value=1, max_value=1024, help_text="draft tokens per step")
    command = forms.CharField(
        label="llama-server command", max_length=8000, widget=forms.Textarea(attrs={"rows": 3, "class": "mono"})
    )
    flags = forms.CharField(required=False, max_length=1000, help_text="other settings worth noting")
    host = forms.CharField(required=False, max_length=255, help_text="where it runs")
    url = forms.CharField(
        label="Server URL",
        required=False,
        max_length=500,
        help_text="http://HOST:PORT of a llama-server started with --metrics (staff only)",
    )

    def __init__(self, *args, staff: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not staff:
            del self.fields["url"]  # the server fetches it: only staff may name one
