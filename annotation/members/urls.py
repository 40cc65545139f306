"""URLs of a project's members page and members API (api_urlpatterns, mounted under
/api/v1/annotation/). Included by annotation/urls.py."""

from django.urls import path

from annotation.members import apis, views

urlpatterns = [
    path("projects/<slug:slug>/members/", views.member_list, name="member-list"),
    path(
        "projects/<slug:slug>/members/<path:username>/",
        views.member_update,
        name="member-update",
    ),
]

api_urlpatterns = [
    path("projects/<slug:slug>/members/", apis.MemberListApi.as_view(), name="api-member-list"),
    path(
        "projects/<slug:slug>/members/<path:username>/",
        apis.MemberDetailApi.as_view(),
        name="api-member",
    ),
]
