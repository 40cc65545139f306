"""Analytics exports URLs (included by analytics/urls.py)."""

from django.urls import path

from analytics import export_apis, export_views

urlpatterns = [
    path("projects/<slug:slug>/analytics/exports/", export_views.exports, name="exports"),
    path("exports/<int:pk>/download/", export_views.export_download, name="export-download"),
]

api_urlpatterns = [
    path(
        "projects/<slug:slug>/exports/",
        export_apis.ExportListCreateApi.as_view(),
        name="export-list",
    ),
    path("exports/<int:pk>/", export_apis.ExportDetailApi.as_view(), name="export-detail"),
    path(
        "exports/<int:pk>/download/",
        export_apis.ExportDownloadApi.as_view(),
        name="export-download",
    ),
]
