"""Judge comparison URLs (mounted by analytics/urls.py)."""

from django.urls import path

from analytics.judge_compare import apis, views

urlpatterns: list = [
    path(
        "projects/<slug:slug>/analytics/judges/compare/",
        views.judge_compare,
        name="judge-compare",
    ),
]
api_urlpatterns: list = [
    path(
        "projects/<slug:slug>/analytics/judge-comparison",
        apis.JudgeComparisonApi.as_view(),
        name="judge-comparison",
    ),
]
