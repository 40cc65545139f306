"""Disagreement explorer URLs (included by analytics/urls.py): the ranked list with the
send-back for re-annotation, and one response's scores (docs/DISAGREEMENTS.md)."""

from django.urls import path

from analytics import explorer_apis, explorer_views

urlpatterns = [
    path(
        "projects/<slug:slug>/analytics/disagreements/",
        explorer_views.disagreements,
        name="disagreements",
    ),
    path(
        "projects/<slug:slug>/analytics/disagreements/reannotate/",
        explorer_views.disagreements_reannotate,
        name="disagreements-reannotate",
    ),
    path(
        "projects/<slug:slug>/analytics/responses/<int:pk>/",
        explorer_views.response_scores,
        name="response-scores",
    ),
]
api_urlpatterns = [
    path(
        "projects/<slug:slug>/analytics/disagreements",
        explorer_apis.DisagreementListApi.as_view(),
        name="disagreements",
    ),
    path(
        "projects/<slug:slug>/reannotation",
        explorer_apis.ReannotationCreateApi.as_view(),
        name="reannotation",
    ),
]
