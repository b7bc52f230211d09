"""Routes for notes and deployments (included by registry.urls)."""

from __future__ import annotations

from django.urls import path

from registry.team import api, views

urlpatterns = [
    path("notes/add/<str:kind>/<int:pk>", views.note_add, name="note_add"),
    path("notes/<int:pk>/", views.note, name="note"),
    path("notes/<int:pk>/hide", views.note_hide, name="note_hide"),
    path("deployments/new", views.deployment_new, name="deployment_new"),
    path("deployments/<int:pk>/", views.deployment, name="deployment"),
    path("deployments/<int:pk>/retire", views.deployment_retire, name="deployment_retire"),
    path("deployments/<int:pk>/scrape", views.deployment_scrape, name="deployment_scrape"),
    path("api/deployments", api.DeploymentsView.as_view(), name="api_deployments"),
    path("api/deployments/<int:pk>", api.DeploymentView.as_view(), name="api_deployment"),
    path("api/notes", api.NotesView.as_view(), name="api_notes"),
    path("api/notes/<int:pk>", api.NoteView.as_view(), name="api_note"),
]
