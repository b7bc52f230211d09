"""Routes for benchmark runs."""
from __future__ import annotations

from django.urls import path, re_path

from . import views

urlpatterns = [
    path("pairs/<int:pk>/benchmark", views.benchmark, name="pair_benchmark"),
    path("runs/<int:pk>/", views.run, name="run"),
    path("runs/<int:pk>/cancel", views.cancel, name="run_cancel"),
    path("api/runs/<int:pk>", views.run_json, name="api_run"),
    re_path(r"^runs/(?P<pk>\d+)/(?P<name>report|unit|command)$", views.artifact, name="run_artifact"),
]
