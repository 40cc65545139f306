"""Label planning URLs (mounted by analytics/urls.py)."""

from django.urls import path

from analytics.planning import apis, views

urlpatterns: list = [
    path(
        "projects/<slug:slug>/analytics/label-planning/",
        views.label_planning,
        name="label-planning",
    ),
]
api_urlpatterns: list = [
    path(
        "projects/<slug:slug>/label-planning",
        apis.LabelPlanningApi.as_view(),
        name="label-planning",
    ),
]
