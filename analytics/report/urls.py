"""Analytics pages URLs (mounted by analytics/urls.py)."""

from django.urls import path

from analytics.report import apis, preferences, trust, views

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
    path("projects/<slug:slug>/analytics/trust/", trust.trust_page, name="trust"),
    path(
        "projects/<slug:slug>/analytics/preferences/",
        preferences.preferences_page,
        name="preferences",
    ),
    path(
        "projects/<slug:slug>/analytics/trust/calibrate/",
        trust.trust_calibrate,
        name="trust-calibrate",
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
    path(
        "projects/<slug:slug>/analytics/trust/calibrated-copy",
        trust.TrustCalibratedCopyApi.as_view(),
        name="trust-calibrated-copy",
    ),
]
