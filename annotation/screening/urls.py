"""URLs of screening (training and qualification): the campaign's screening page and its
forms, and the API (api_urlpatterns, mounted under /api/v1/annotation/). Included by
annotation/urls.py."""

from django.urls import path

from annotation.screening import apis, views

urlpatterns = [
    path("campaigns/<int:pk>/screening/", views.screening, name="screening"),
    path(
        "campaigns/<int:pk>/screening/settings/",
        views.screening_settings,
        name="screening-settings",
    ),
    path(
        "campaigns/<int:pk>/screening/tasks/", views.screening_task_set, name="screening-task-set"
    ),
    path(
        "campaigns/<int:pk>/screening/tasks/remove/",
        views.screening_task_remove,
        name="screening-task-remove",
    ),
    path(
        "campaigns/<int:pk>/screening/results.csv",
        views.screening_results_csv,
        name="screening-results-csv",
    ),
]

api_urlpatterns = [
    path(
        "campaigns/<int:pk>/screening/",
        apis.ScreeningDetailApi.as_view(),
        name="api-screening",
    ),
    path(
        "campaigns/<int:pk>/screening/results/",
        apis.ScreeningResultListApi.as_view(),
        name="api-screening-results",
    ),
]
