"""Analytics URLs. Each feature keeps its own module; this file only mounts them.

Pages (namespace `analytics`) are included at the site root; `api_urlpatterns` are mounted
under /api/v1/ by flaskweb/urls.py (namespace `analytics-api`)."""

from django.urls import include, path

from analytics import urls_explorer, urls_exports, urls_imports, urls_pages

app_name = "analytics"

urlpatterns = [
    path("", include(urls_pages.urlpatterns)),
    path("", include(urls_exports.urlpatterns)),
    path("", include(urls_explorer.urlpatterns)),
    path("", include(urls_imports.urlpatterns)),
]

api_urlpatterns = [
    path("", include(urls_pages.api_urlpatterns)),
    path("", include(urls_exports.api_urlpatterns)),
    path("", include(urls_explorer.api_urlpatterns)),
    path("", include(urls_imports.api_urlpatterns)),
]
