"""URL routes of the whole site."""

from __future__ import annotations

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from registry.web import api_views, crawls, hub_jobs, model_folder, views
from registry.web import tools as views_tools

urlpatterns = [
    path("", views.home, name="home"),
    path("pairs.csv", views.pairs_csv, name="pairs_csv"),
    path("pairs/<int:pk>/", views.pair, name="pair"),
    path("pairs/<int:pk>/reported", views.add_reported, name="add_reported"),
    path("models/<int:pk>/", views.model, name="model"),
    path("files/<int:pk>/", views_tools.model_for_file, name="file"),
    path("check/", views_tools.check, name="check"),
    path("crawls/", crawls.crawl_list, name="crawls"),
    path("crawls/<int:pk>/", crawls.crawl_page, name="crawl"),
    path("crawls/<int:pk>/cancel", crawls.crawl_cancel, name="crawl_cancel"),
    path("crawls/<int:pk>/resume", crawls.crawl_resume, name="crawl_resume"),
    path("api/crawls/<int:pk>", crawls.crawl_json, name="api_crawl"),
    path("local/", views_tools.local, name="local"),
    path("import/", hub_jobs.import_view, name="import"),
    path("import/curated", hub_jobs.import_curated, name="import_curated"),
    path("files/<int:pk>/find-drafts", hub_jobs.find_drafts, name="find_drafts"),
    path("pairs/<int:pk>/adapt", hub_jobs.adapt_draft, name="adapt_draft"),
    path("jobs/<int:pk>/", hub_jobs.hub_job, name="hub_job"),
    path("api/jobs/<int:pk>", hub_jobs.hub_job_json, name="api_hub_job"),
    path("model-folder/", model_folder.files_page, name="model_folder"),
    path("model-folder/<int:pk>/remove", model_folder.remove_file, name="remove_stored_file"),
    path("local/inspect", views_tools.local_inspect, name="local_inspect"),
    # The JSON API (DRF views over registry.web.api; the same URLs, without trailing slashes, as always).
    path("api/pairs", api_views.PairsView.as_view(), name="api_pairs"),
    path("api/pairs/<int:pk>", api_views.PairView.as_view(), name="api_pair"),
    path("api/pairs/<int:pk>/reported", api_views.ReportedView.as_view(), name="api_pair_reported"),
    path("api/models/<int:pk>", api_views.ModelView.as_view(), name="api_model"),
    path("api/files/<int:pk>", api_views.FileView.as_view(), name="api_file"),
    path("api/check", api_views.CheckView.as_view(), name="api_check"),
    path("api/examples", api_views.ExamplesView.as_view(), name="api_examples"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI, its scripts from drf-spectacular-sidecar; the split view serves its start-up script as
    # a file of its own (?script), so the page needs no inline script under our CSP.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api_docs"),
    path("", include("runner.web.urls")),
    path("", include("registry.team.urls")),
    # Browsers ask for /favicon.ico on pages that name no icon (the admin's, Swagger UI's): not a 404.
    path("favicon.ico", RedirectView.as_view(url=static("registry/favicon.svg"), permanent=True)),
    path("admin/", admin.site.urls),
    path("accounts/", include("registry.apitokens.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
]
