"""Long-format score import URLs (included by analytics/urls.py)."""

from django.urls import path

from analytics import import_apis, import_views

urlpatterns = [
    path(
        "projects/<slug:slug>/analytics/scores/import/",
        import_views.score_import,
        name="score-import",
    ),
    path(
        "projects/<slug:slug>/analytics/scores/import/<int:pk>/",
        import_views.score_import_job,
        name="score-import-job",
    ),
]
api_urlpatterns = [
    path(
        "projects/<slug:slug>/scores/import/",
        import_apis.ScoreImportApi.as_view(),
        name="score-import",
    ),
    path(
        "projects/<slug:slug>/scores/imports/",
        import_apis.ScoreImportListApi.as_view(),
        name="score-import-list",
    ),
    path(
        "score-import-jobs/<int:pk>/",
        import_apis.ScoreImportJobApi.as_view(),
        name="score-import-job",
    ),
]
