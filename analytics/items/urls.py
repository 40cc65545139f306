"""Drill-down URLs (mounted by analytics/urls.py): the responses behind a figure, the
actions on them, and the API (docs/DRILL_DOWN.md)."""

from django.urls import path

from analytics.items import apis, views

urlpatterns = [
    path("projects/<slug:slug>/analytics/items/", views.items, name="items"),
    path(
        "projects/<slug:slug>/analytics/items/reannotate/",
        views.items_reannotate,
        name="items-reannotate",
    ),
    path("projects/<slug:slug>/analytics/items/gold/", views.items_gold, name="items-gold"),
]
api_urlpatterns = [
    path("projects/<slug:slug>/analytics/items", apis.ItemListApi.as_view(), name="items"),
]
