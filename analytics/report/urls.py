"""Analytics pages URLs (mounted by analytics/urls.py)."""

from django.urls import path

from analytics.report import apis, views

urlpatterns: list = [
    path("projects/<slug:slug>/analytics/", views.dashboard, name="dashboard"),
    path("projects/<slug:slug>/analytics/refresh/", views.report_refresh, name="report-refresh"),
    path(
        "projects/<slug:slug>/analytics/section/<slug:name>/",
        views.report_section,
        name="report-section",
    ),
    path(
        "projects/<slug:slug>/analytics/snapshots/<int:snapshot_id>/",
        views.snapshot_status,
        name="snapshot-status",
    ),
]
api_urlpatterns: list = [
    path(
        "projects/<slug:slug>/analytics/report/refresh",
        apis.AnalyticsReportRefreshApi.as_view(),
        name="report-refresh",
    ),
    path(
        "projects/<slug:slug>/analytics/snapshots/<int:snapshot_id>",
        apis.ReportSnapshotApi.as_view(),
        name="report-snapshot",
    ),
]
