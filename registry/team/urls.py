"""Routes for notes and deployments (included by registry.urls)."""
from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("notes/add/<str:kind>/<int:pk>", views.note_add, name="note_add"),
    path("notes/<int:pk>/", views.note, name="note"),
    path("notes/<int:pk>/hide", views.note_hide, name="note_hide"),
    path("deployments/new", views.deployment_new, name="deployment_new"),
    path("deployments/<int:pk>/", views.deployment, name="deployment"),
    path("deployments/<int:pk>/retire", views.deployment_retire, name="deployment_retire"),
    path("deployments/<int:pk>/scrape", views.deployment_scrape, name="deployment_scrape"),
    path("api/deployments/<int:pk>", views.api_deployment, name="api_deployment"),
]
