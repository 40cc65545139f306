"""Disagreement explorer URLs (mounted by analytics/urls.py): the ranked list with the
send-back for re-annotation, and one response's scores (docs/DISAGREEMENTS.md)."""

from django.urls import path

from analytics.explorer import apis, views

urlpatterns = [
    path(
        "projects/<slug:slug>/analytics/disagreements/",
        views.disagreements,
        name="disagreements",
    ),
    path(
        "projects/<slug:slug>/analytics/disagreements/reannotate/",
        views.disagreements_reannotate,
        name="disagreements-reannotate",
    ),
    path(
        "projects/<slug:slug>/analytics/responses/<int:pk>/",
        views.response_scores,
        name="response-scores",
    ),
]
api_urlpatterns = [
    path(
        "projects/<slug:slug>/analytics/disagreements",
        apis.DisagreementListApi.as_view(),
        name="disagreements",
    ),
    path(
        "projects/<slug:slug>/reannotation",
        apis.ReannotationCreateApi.as_view(),
        name="reannotation",
    ),
]
