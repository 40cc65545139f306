"""REST API of projects: the projects you belong to; site admins create one."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation import access, selectors
from annotation.services.projects import project_create
from flaskweb.api_errors import ApiPagination


class ProjectListApi(APIView):
    """GET: the projects you belong to (site admins: all). POST (site admins): create one;
    then add its members (members API)."""

    pagination_class = ApiPagination

    class OutputSerializer(serializers.Serializer):
        slug = serializers.CharField()
        name = serializers.CharField()
        description = serializers.CharField()

        class Meta:
            ref_name = "Project"

    class InputSerializer(serializers.Serializer):
        slug = serializers.SlugField(max_length=50)
        name = serializers.CharField(max_length=200, required=False, allow_blank=True)
        description = serializers.CharField(max_length=5000, required=False, allow_blank=True)

        class Meta:
            ref_name = "ProjectInput"

        def validate_slug(self, value: str) -> str:
            if access.project_exists(value):
                raise serializers.ValidationError("a project with this slug exists")
            return value

    @extend_schema(responses=OutputSerializer(many=True))
    def get(self, request):
        projects = selectors.project_list_for_user(user=request.user)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(projects, request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer})
    def post(self, request):
        if not access.is_site_admin(request.user):
            raise PermissionDenied("only site admins create projects")
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            project = project_create(**serializer.validated_data)
        except ValidationError as exc:
            messages = getattr(exc, "messages", None) or [str(exc)]
            raise serializers.ValidationError({"non_field_errors": messages}) from None
        return ApiResponse(self.OutputSerializer(project).data, status=status.HTTP_201_CREATED)
