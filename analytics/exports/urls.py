"""Analytics exports URLs (mounted by analytics/urls.py)."""

from django.urls import path

from analytics.exports import apis, views

urlpatterns = [
    path("projects/<slug:slug>/analytics/exports/", views.exports, name="exports"),
    path("exports/<int:pk>/download/", views.export_download, name="export-download"),
]

api_urlpatterns = [
    path(
        "projects/<slug:slug>/exports/",
        apis.ExportListCreateApi.as_view(),
        name="export-list",
    ),
    path("exports/<int:pk>/", apis.ExportDetailApi.as_view(), name="export-detail"),
    path(
        "exports/<int:pk>/download/",
        apis.ExportDownloadApi.as_view(),
        name="export-download",
    ),
]
