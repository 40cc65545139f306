"""URLs of the verification page and the metadata API (docs/METADATA.md). Included by
annotation/urls.py."""

from django.urls import path

from annotation.metadata import apis, views

urlpatterns = [
    path("datasets/<int:pk>/metadata/", views.metadata_verify_page, name="metadata-verify-page"),
    path("datasets/<int:pk>/metadata/snapshot/", views.metadata_snapshot, name="metadata-snapshot"),
    path("metadata/proposals/<int:pk>/verify/", views.metadata_verify_post, name="metadata-verify"),
    path(
        "campaigns/<int:pk>/metadata/apply/",
        views.metadata_apply_page,
        name="metadata-apply-page",
    ),
    path("campaigns/<int:pk>/metadata/apply/do/", views.metadata_apply, name="metadata-apply"),
]

api_urlpatterns = [
    path(
        "datasets/<int:pk>/metadata/proposals/",
        apis.MetadataProposalListApi.as_view(),
        name="api-metadata-proposals",
    ),
    path(
        "metadata/proposals/<int:pk>/verify/",
        apis.MetadataVerifyApi.as_view(),
        name="api-metadata-verify",
    ),
]
