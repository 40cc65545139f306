"""URLs of the annotator's pages (dashboard, scoring) and of the annotation workflow's JSON
API (api_urlpatterns, mounted under /api/v1/annotation/). Included by annotation/urls.py."""

from django.urls import path

from annotation.annotate import apis, views

urlpatterns = [
    path("tasks/", views.my_campaigns, name="my-campaigns"),
    path("campaigns/<int:pk>/annotate/", views.annotate, name="annotate"),
    path("assignments/<int:pk>/submit/", views.annotate_submit, name="annotate-submit"),
    path("assignments/<int:pk>/skip/", views.annotate_skip, name="annotate-skip"),
]

api_urlpatterns = [
    path(
        "campaigns/",
        apis.AnnotatorCampaignListApi.as_view(),
        name="api-annotator-campaign-list",
    ),
    path(
        "campaigns/<int:campaign_id>/progress/",
        apis.AnnotatorProgressApi.as_view(),
        name="api-annotator-progress",
    ),
    path(
        "campaigns/<int:campaign_id>/next/",
        apis.AssignmentNextApi.as_view(),
        name="api-assignment-next",
    ),
    path(
        "assignments/<int:assignment_id>/submit/",
        apis.AssignmentSubmitApi.as_view(),
        name="api-assignment-submit",
    ),
    path(
        "assignments/<int:assignment_id>/skip/",
        apis.AssignmentSkipApi.as_view(),
        name="api-assignment-skip",
    ),
]
