"""Routes for benchmark runs, predictions, soaks and hardware classes."""

from __future__ import annotations

from django.urls import path, re_path

from runner.web import api, views

urlpatterns = [
    path("pairs/<int:pk>/benchmark", views.benchmark, name="pair_benchmark"),
    path("pairs/<int:pk>/predict", views.predict, name="pair_predict"),
    path("api/pairs/<int:pk>/predict", api.PredictView.as_view(), name="api_pair_predict"),
    path("pairs/<int:pk>/soak", views.soak, name="pair_soak"),
    path("deployments/<int:pk>/soak", views.soak_deployment, name="deployment_soak"),
    path("api/pairs/<int:pk>/soak", api.SoakView.as_view(), name="api_pair_soak"),
    path("runs/<int:pk>/", views.run, name="run"),
    # a hardware class as runner.runs.params.HARDWARE_CLASS accepts it
    re_path(r"^hardware/(?P<name>[a-z0-9][a-z0-9._-]{0,63})/$", views.hardware, name="hardware"),
    path("runs/<int:pk>/cancel", views.cancel, name="run_cancel"),
    path("api/runs/<int:pk>", views.run_json, name="api_run"),
    re_path(r"^runs/(?P<pk>\d+)/(?P<name>report|unit|command)$", views.artifact, name="run_artifact"),
]
