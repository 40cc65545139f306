"""REST API of a project's members: the staff (admins, researchers) read the list; project
admins and site admins add members, change roles and remove members. Users themselves are
made by site admins (the Django admin); a project admin adds existing users by username.

Nobody but a site admin changes or removes their own membership
(annotation/services/projects.py): a 409, as is adding someone who is already a member.

The list takes `?participants=include|exclude|only` (default include, everyone, as before
the filter existed) and `?study=<campaign id>`: a crowd study's accounts (annotation/study/)
can be thousands.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation import access
from annotation import selectors as shared
from annotation.api_parsers import StrictJSONParser
from annotation.members import selectors
from annotation.models import Project, ProjectMembership, ProjectRole
from annotation.services import projects as services
from flaskweb.api_errors import ApiPagination, ErrorSerializer

CONFLICT = OpenApiResponse(
    ErrorSerializer,
    description="already a member, or your own membership",
)


def _conflict(exc: ValidationError) -> ApiResponse:
    return ApiResponse(
        {"detail": " ".join(exc.messages), "code": "membership_conflict"},
        status=status.HTTP_409_CONFLICT,
    )


class MemberSerializer(serializers.Serializer):
    username = serializers.CharField(source="user.username")
    role = serializers.ChoiceField(choices=ProjectRole.choices)
    since = serializers.DateTimeField(source="created_at")

    class Meta:
        ref_name = "ProjectMember"


class RoleField(serializers.ChoiceField):
    def __init__(self, **kwargs) -> None:
        super().__init__(choices=ProjectRole.choices, **kwargs)


class MemberFilter(serializers.Serializer):
    participants = serializers.ChoiceField(
        choices=shared.PARTICIPANT_FILTERS,
        default=shared.PARTICIPANTS_INCLUDE,
        help_text="the accounts study links made for crowd workers: include (default), "
        "exclude, or only them",
    )
    study = serializers.IntegerField(
        min_value=1,
        max_value=2**63 - 1,
        required=False,
        help_text="a campaign's id: only the participants of its study links",
    )

    class Meta:
        ref_name = "ProjectMemberFilters"


def _member(project: Project, username: str) -> ProjectMembership:
    membership = selectors.membership_get(project=project, username=username)
    if membership is None:
        raise Http404("no member of this project has that username")
    return membership


class MemberListApi(APIView):
    """GET: the project's members and their roles, by username (`?participants=`,
    `?study=` narrow them). POST: add a user."""

    pagination_class = ApiPagination
    parser_classes = [StrictJSONParser]

    class InputSerializer(serializers.Serializer):
        username = serializers.CharField(max_length=150)
        role = RoleField()

        class Meta:
            ref_name = "ProjectMemberInput"

    @extend_schema(parameters=[MemberFilter], responses=MemberSerializer(many=True))
    def get(self, request, slug: str):
        project, _ = access.project_get_for_user(request.user, slug)
        params = MemberFilter(data=request.query_params)
        params.is_valid(raise_exception=True)
        paginator = self.pagination_class()
        members = selectors.member_list_for_project(
            project=project,
            participants=params.validated_data["participants"],
            study_id=params.validated_data.get("study"),
        )
        page = paginator.paginate_queryset(members, request, view=self)
        return paginator.get_paginated_response(MemberSerializer(page, many=True).data)

    @extend_schema(request=InputSerializer, responses={201: MemberSerializer, 409: CONFLICT})
    def post(self, request, slug: str):
        project = access.project_get_for_admin(request.user, slug)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            membership = services.membership_add_by_username(
                project=project,
                username=serializer.validated_data["username"],
                role=serializer.validated_data["role"],
                actor=request.user,
            )
        except services.MemberNotAddable as exc:
            raise serializers.ValidationError({"username": exc.messages}) from None
        except services.MembershipConflict as exc:
            return _conflict(exc)
        return ApiResponse(MemberSerializer(membership).data, status=status.HTTP_201_CREATED)


class MemberDetailApi(APIView):
    """GET: one member. PATCH: change the role. DELETE: remove from the project (and from
    its campaigns' annotator lists; open leases end, scores stay)."""

    parser_classes = [StrictJSONParser]

    class InputSerializer(serializers.Serializer):
        role = RoleField()

        class Meta:
            ref_name = "ProjectMemberRole"

    @extend_schema(responses=MemberSerializer)
    def get(self, request, slug: str, username: str):
        project, _ = access.project_get_for_user(request.user, slug)
        return ApiResponse(MemberSerializer(_member(project, username)).data)

    @extend_schema(request=InputSerializer, responses={200: MemberSerializer, 409: CONFLICT})
    def patch(self, request, slug: str, username: str):
        project = access.project_get_for_admin(request.user, slug)
        membership = _member(project, username)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            membership = services.membership_update(
                membership=membership,
                role=serializer.validated_data["role"],
                actor=request.user,
            )
        except services.MembershipConflict as exc:
            return _conflict(exc)
        return ApiResponse(MemberSerializer(membership).data)

    @extend_schema(request=None, responses={204: None, 409: CONFLICT})
    def delete(self, request, slug: str, username: str):
        project = access.project_get_for_admin(request.user, slug)
        membership = _member(project, username)
        try:
            services.membership_remove(membership=membership, actor=request.user)
        except services.MembershipConflict as exc:
            return _conflict(exc)
        return ApiResponse(status=status.HTTP_204_NO_CONTENT)
