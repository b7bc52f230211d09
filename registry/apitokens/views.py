"""The signed-in user's API tokens: create one (shown once, then only its digest is kept), list, revoke."""

from __future__ import annotations

from datetime import timedelta

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from knox.models import AuthToken
from knox.settings import knox_settings

from registry.apitokens.models import TokenName

MAX_TOKENS_PER_USER = 20  # enough for every CI a team runs; a bound on rows per account
EXPIRY_CHOICES = [("30", "30 days"), ("90", "90 days"), ("365", "1 year"), ("never", "never")]


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, widget=forms.TextInput(attrs={"placeholder": "CI of team-llm/bench"}))
    expires = forms.ChoiceField(choices=EXPIRY_CHOICES, initial="90")

    def expiry(self) -> timedelta | None:
        value = self.cleaned_data["expires"]
        return None if value == "never" else timedelta(days=int(value))


def _tokens(user) -> list[AuthToken]:
    return list(AuthToken.objects.filter(user=user).select_related("name_record").order_by("-created"))


@never_cache  # the page that shows a new token must not be kept by any cache
@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST if request.method == "POST" else None)
    new_token = ""
    if request.method == "POST" and form.is_valid():
        if AuthToken.objects.filter(user=request.user).count() >= MAX_TOKENS_PER_USER:
            form.add_error(None, f"At most {MAX_TOKENS_PER_USER} tokens per account: revoke one first.")
        else:
            with transaction.atomic():
                instance, new_token = AuthToken.objects.create(
                    user=request.user, expiry=form.expiry(), prefix=knox_settings.TOKEN_PREFIX
                )
                TokenName.objects.create(token=instance, name=form.cleaned_data["name"].strip())
            form = TokenForm()  # the clear token is in this one response only, never stored or redirected with
    return render(
        request,
        "apitokens/tokens.html",
        {"form": form, "tokens": _tokens(request.user), "new_token": new_token},
        status=400 if form.errors else 200,
    )


@login_required
@require_POST
def revoke(request: HttpRequest, key: str) -> HttpResponse:
    """Delete the user's token(s) with this key; another user's key matches nothing."""
    deleted, _ = AuthToken.objects.filter(user=request.user, token_key=key).delete()
    if deleted:
        messages.success(request, f"Token {key}… revoked: requests that send it now get 401.")
    else:
        messages.error(request, "No such token of yours.")
    return redirect("api_tokens")
