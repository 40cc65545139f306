"""JSON API of the annotation workflow. Mounted under /api/v1/annotation/ by flaskweb/urls.py."""

from django.urls import path

from annotation import annotate_apis

urlpatterns = [
    path(
        "campaigns/",
        annotate_apis.AnnotatorCampaignListApi.as_view(),
        name="api-annotator-campaign-list",
    ),
    path(
        "campaigns/<int:campaign_id>/next/",
        annotate_apis.AssignmentNextApi.as_view(),
        name="api-assignment-next",
    ),
    path(
        "assignments/<int:assignment_id>/submit/",
        annotate_apis.AssignmentSubmitApi.as_view(),
        name="api-assignment-submit",
    ),
    path(
        "assignments/<int:assignment_id>/skip/",
        annotate_apis.AssignmentSkipApi.as_view(),
        name="api-assignment-skip",
    ),
]
