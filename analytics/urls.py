"""Analytics URLs. Each feature package keeps its own urls.py; this file only mounts them.

Pages (namespace `analytics`) are included at the site root; `api_urlpatterns` are mounted
under /api/v1/ by flaskweb/urls.py (namespace `analytics-api`)."""

from django.urls import include, path

from analytics.active import urls as active_urls
from analytics.cards import urls as cards_urls
from analytics.explorer import urls as explorer_urls
from analytics.exports import urls as exports_urls
from analytics.imports import urls as imports_urls
from analytics.items import urls as items_urls
from analytics.judge_compare import urls as judge_compare_urls
from analytics.metadata import urls as metadata_urls
from analytics.planning import urls as planning_urls
from analytics.report import urls as report_urls

app_name = "analytics"

urlpatterns = [
    path("", include(report_urls.urlpatterns)),
    path("", include(exports_urls.urlpatterns)),
    path("", include(explorer_urls.urlpatterns)),
    path("", include(imports_urls.urlpatterns)),
    path("", include(cards_urls.urlpatterns)),
    path("", include(judge_compare_urls.urlpatterns)),
    path("", include(metadata_urls.urlpatterns)),
    path("", include(active_urls.urlpatterns)),
    path("", include(planning_urls.urlpatterns)),
    path("", include(items_urls.urlpatterns)),
]

api_urlpatterns = [
    path("", include(report_urls.api_urlpatterns)),
    path("", include(exports_urls.api_urlpatterns)),
    path("", include(explorer_urls.api_urlpatterns)),
    path("", include(imports_urls.api_urlpatterns)),
    path("", include(cards_urls.api_urlpatterns)),
    path("", include(judge_compare_urls.api_urlpatterns)),
    path("", include(metadata_urls.api_urlpatterns)),
    path("", include(active_urls.api_urlpatterns)),
    path("", include(planning_urls.api_urlpatterns)),
    path("", include(items_urls.api_urlpatterns)),
]
