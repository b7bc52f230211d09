"""URL routes of the whole site."""
from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from . import api, views, views_tools

urlpatterns = [
    path("", views.home, name="home"),
    path("pairs.csv", views.pairs_csv, name="pairs_csv"),
    path("pairs/<int:pk>/", views.pair, name="pair"),
    path("pairs/<int:pk>/reported", views.add_reported, name="add_reported"),
    path("models/<int:pk>/", views.model, name="model"),
    path("files/<int:pk>/", views_tools.model_for_file, name="file"),
    path("check/", views_tools.check, name="check"),
    path("local/", views_tools.local, name="local"),
    path("local/inspect", views_tools.local_inspect, name="local_inspect"),
    path("api/pairs", api.pairs, name="api_pairs"),
    path("api/pairs/<int:pk>", api.pair, name="api_pair"),
    path("api/models/<int:pk>", api.model, name="api_model"),
    path("api/files/<int:pk>", api.file, name="api_file"),
    path("api/check", api.check, name="api_check"),
    path("api/examples", api.examples, name="api_examples"),
    path("", include("runner.urls")),
    path("", include("registry.team.urls")),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
]
