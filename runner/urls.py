"""Routes for benchmark runs and Hub jobs."""

from __future__ import annotations

from django.urls import path, re_path

from . import views

urlpatterns = [
    path("pairs/<int:pk>/benchmark", views.benchmark, name="pair_benchmark"),
    path("runs/<int:pk>/", views.run, name="run"),
    path("runs/<int:pk>/cancel", views.cancel, name="run_cancel"),
    path("api/runs/<int:pk>", views.run_json, name="api_run"),
    re_path(r"^runs/(?P<pk>\d+)/(?P<name>report|unit|command)$", views.artifact, name="run_artifact"),
    path("import/", views.import_view, name="import"),
    path("import/curated", views.import_curated, name="import_curated"),
    path("files/<int:pk>/find-drafts", views.find_drafts, name="find_drafts"),
    path("jobs/<int:pk>/", views.hub_job, name="hub_job"),
    path("api/jobs/<int:pk>", views.hub_job_json, name="api_hub_job"),
]
