"""URLs of review (reviewers, researchers, admins): pages, and the API (api_urlpatterns,
mounted under /api/v1/annotation/). Included by annotation/urls.py."""

from django.urls import path

from annotation.review import apis, views

urlpatterns = [
    path("projects/<slug:slug>/review/", views.review_project, name="review-project"),
    path("campaigns/<int:pk>/review/", views.review_queue, name="review-queue"),
    path(
        "campaigns/<int:pk>/review/<int:response_id>/",
        views.review_response,
        name="review-response",
    ),
    path("campaigns/<int:pk>/review/settings/", views.review_settings, name="review-settings"),
    path("campaigns/<int:pk>/review/summary/", views.review_summary, name="review-summary"),
]

api_urlpatterns = [
    path("campaigns/<int:pk>/review/", apis.ReviewQueueApi.as_view(), name="api-review-queue"),
    path(
        "campaigns/<int:pk>/review/<int:response_id>/",
        apis.AdjudicationApi.as_view(),
        name="api-review-adjudicate",
    ),
]
