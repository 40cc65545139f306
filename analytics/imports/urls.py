"""Score and preference import URLs (mounted by analytics/urls.py)."""

from django.urls import path

from analytics.imports import apis, views

urlpatterns = [
    path(
        "projects/<slug:slug>/analytics/scores/import/",
        views.score_import,
        name="score-import",
    ),
    path(
        "projects/<slug:slug>/analytics/scores/import/<int:pk>/",
        views.score_import_job,
        name="score-import-job",
    ),
    path(
        "projects/<slug:slug>/analytics/preferences/import/",
        views.preference_import,
        name="preference-import",
    ),
    path(
        "projects/<slug:slug>/analytics/preferences/import/<int:pk>/",
        views.preference_import_job,
        name="preference-import-job",
    ),
]
api_urlpatterns = [
    path(
        "projects/<slug:slug>/scores/import/",
        apis.ScoreImportApi.as_view(),
        name="score-import",
    ),
    path(
        "projects/<slug:slug>/scores/imports/",
        apis.ScoreImportListApi.as_view(),
        name="score-import-list",
    ),
    path(
        "score-import-jobs/<int:pk>/",
        apis.ScoreImportJobApi.as_view(),
        name="score-import-job",
    ),
    path(
        "projects/<slug:slug>/preferences/import/",
        apis.PreferenceImportApi.as_view(),
        name="preference-import",
    ),
    path(
        "projects/<slug:slug>/preferences/imports/",
        apis.PreferenceImportListApi.as_view(),
        name="preference-import-list",
    ),
    path(
        "preference-import-jobs/<int:pk>/",
        apis.PreferenceImportJobApi.as_view(),
        name="preference-import-job",
    ),
]
