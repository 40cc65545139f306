"""REST API of the annotation app (machine clients): projects, datasets, catalogue, imports."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation import access, selectors
from annotation.models import DatasetUpload, UploadSource
from annotation.parsers import FORMATS
from annotation.services.imports import (
    POLICY_PRESETS,
    FileSpec,
    ImportOptionsError,
    dataset_upload_create,
    policies_parse,
    upload_progress_get,
)
from annotation.services.projects import project_create
from flaskweb.api_errors import ApiPagination


def _project(request, slug: str, roles=access.STAFF_ROLES):
    """The project, or 404 (unknown or not a member) / 403 (a role without access); the API's
    exception handler words both as JSON."""
    return access.project_get_for_user(request.user, slug, roles=roles)[0]


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


class DatasetListApi(APIView):
    pagination_class = ApiPagination

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        name = serializers.CharField()
        item_count = serializers.IntegerField()
        updated_at = serializers.DateTimeField()

        class Meta:
            ref_name = "Dataset"

    @extend_schema(responses=OutputSerializer(many=True))
    def get(self, request, slug: str):
        project = _project(request, slug)
        datasets = selectors.dataset_list_for_project(project=project)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(datasets, request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


class SkillListApi(APIView):
    """The skill catalogue: built-in skills, and a project's own with `?project=`. Not paged:
    a catalogue holds a few dozen skills."""

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        name = serializers.CharField()
        ability = serializers.CharField()
        builtin = serializers.BooleanField(source="is_builtin")
        rubric_version = serializers.IntegerField(allow_null=True)
        criterion = serializers.CharField(allow_null=True)
        anchors = serializers.ListField(child=serializers.CharField(), allow_null=True)

        class Meta:
            ref_name = "Skill"

    class FilterSerializer(serializers.Serializer):
        project = serializers.SlugField(
            required=False, allow_blank=True, help_text="a project's slug: its own skills too"
        )

        class Meta:
            ref_name = "SkillFilters"

    @extend_schema(parameters=[FilterSerializer], responses=OutputSerializer(many=True))
    def get(self, request):
        params = self.FilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        slug = params.validated_data.get("project")
        project = _project(request, slug) if slug else None
        rubrics = selectors.rubrics_current_for_project(project=project)
        rows = []
        for skill in selectors.skill_list_for_project(project=project):
            rubric = rubrics.get(skill.pk)
            skill.rubric_version = rubric.version if rubric else None
            skill.criterion = rubric.criterion if rubric else None
            skill.anchors = rubric.anchors if rubric else None
            rows.append(skill)
        return ApiResponse(self.OutputSerializer(rows, many=True).data)


class UploadOutputSerializer(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    progress = serializers.SerializerMethodField()
    problems = serializers.SerializerMethodField()

    class Meta:
        model = DatasetUpload
        fields = [
            "id",
            "project",
            "dataset_name",
            "dataset",
            "source",
            "status",
            "rows_read",
            "items_created",
            "items_unchanged",
            "responses_created",
            "responses_unchanged",
            "rows_skipped",
            "problem_count",
            "summary",
            "error",
            "created_at",
            "started_at",
            "finished_at",
            "progress",
            "problems",
        ]

    def get_progress(self, obj) -> dict:
        return upload_progress_get(obj.pk)

    def get_problems(self, obj) -> list[dict]:
        return list(
            obj.problems.values("file_name", "line", "field", "code", "action", "message")[:200]
        )


class _ShallowJSONField(serializers.JSONField):
    """A JSON form field that refuses a document nested too deeply to parse (400), instead
    of letting the parser's RecursionError through."""

    def to_internal_value(self, data):
        try:
            return super().to_internal_value(data)
        except RecursionError:
            raise serializers.ValidationError("the JSON is nested too deeply") from None


class UploadCreateApi(APIView):
    """Start an import: multipart with one or more `files`. Answers 202 with the job."""

    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "UploadCreate"

        project = serializers.SlugField()
        dataset = serializers.CharField(max_length=200)
        files = serializers.ListField(child=serializers.FileField(), allow_empty=False)
        format = serializers.ChoiceField(choices=FORMATS, required=False)
        model = serializers.CharField(max_length=200, required=False)
        preset = serializers.ChoiceField(choices=list(POLICY_PRESETS), required=False)
        policies = _ShallowJSONField(
            binary=True, required=False, help_text='{"invalid_difficulty": "accept"}'
        )

    @extend_schema(request=InputSerializer, responses={202: UploadOutputSerializer})
    def post(self, request):
        # an empty body parses to a plain dict, a form to a QueryDict (one value per key here)
        data = request.data.dict() if hasattr(request.data, "dict") else dict(request.data)
        files = request.FILES.getlist("files")
        serializer = self.InputSerializer(data={**data, "files": files})
        serializer.is_valid(raise_exception=True)
        v = serializer.validated_data
        project = _project(request, v["project"])
        limit = settings.FLASKWEB_MAX_UPLOAD_BYTES  # all files of the request together
        if sum(f.size for f in v["files"]) > limit:
            files = v["files"]
            message = (
                f"{files[0].name} is larger than {limit:,} bytes"
                if len(files) == 1
                else f"the {len(files)} files are larger than {limit:,} bytes together"
            )
            raise serializers.ValidationError({"files": [message]})
        policies = v.get("policies") or {}
        if not isinstance(policies, dict):
            raise serializers.ValidationError({"policies": ["must be an object CLASS: ACTION"]})
        try:
            policies = policies_parse(
                {str(k): str(a) for k, a in policies.items()}, preset=v.get("preset", "")
            )
        except ImportOptionsError as exc:
            raise serializers.ValidationError({"policies": [str(exc)]}) from None
        model = v.get("model", "") if len(v["files"]) == 1 else ""
        try:
            upload = dataset_upload_create(
                project=project,
                dataset_name=v["dataset"],
                source=UploadSource.API,
                files=[(FileSpec(f.name, v.get("format", ""), model), f) for f in v["files"]],
                policies=policies,
                created_by=request.user,
            )
        except (ImportOptionsError, ValidationError) as exc:
            messages = getattr(exc, "messages", None) or [str(exc)]
            raise serializers.ValidationError({"non_field_errors": messages}) from None
        return ApiResponse(UploadOutputSerializer(upload).data, status=status.HTTP_202_ACCEPTED)


class UploadDetailApi(APIView):
    @extend_schema(responses=UploadOutputSerializer)
    def get(self, request, pk: int):
        upload = get_object_or_404(DatasetUpload.objects.select_related("project"), pk=pk)
        _project(request, upload.project.slug)
        return ApiResponse(UploadOutputSerializer(upload).data)
