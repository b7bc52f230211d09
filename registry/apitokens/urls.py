"""Routes of the token page (included by registry.urls under accounts/)."""

from __future__ import annotations

from django.urls import path

from registry.apitokens import views

urlpatterns = [
    path("tokens/", views.tokens, name="api_tokens"),
    path("tokens/<str:key>/revoke", views.revoke, name="api_token_revoke"),
]
