"""REST API for reading a project's data (its admins and researchers): a dataset with its
composition, its items (filtered as on the dataset page), one item with its responses; and
imports (start one, follow it). Annotators get 403, non-members 404.

Unlike the annotators' API these reads are not blind: they carry model names and every
annotator's scores, which is what the project's staff analyse.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation import access, selectors
from annotation.datasets.selectors import (
    dataset_stats,
    item_filters_resolve,
    item_list_for_dataset,
)
from annotation.datasets.services import (
    POLICY_PRESETS,
    FileSpec,
    ImportOptionsError,
    dataset_upload_create,
    policies_parse,
    upload_progress_get,
)
from annotation.models import DatasetUpload, Difficulty, Project, UploadSource
from annotation.parsers import FORMATS
from flaskweb.api_errors import ApiPagination

# --- datasets ------------------------------------------------------------------------------------


class _CountSerializer(serializers.Serializer):
    name = serializers.CharField()
    n = serializers.IntegerField()

    class Meta:
        ref_name = "DatasetCount"


class _LevelSerializer(serializers.Serializer):
    level = serializers.IntegerField(allow_null=True)
    n = serializers.IntegerField()

    class Meta:
        ref_name = "DatasetLevelCount"


class DatasetSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    project = serializers.CharField(source="project.slug")
    description = serializers.CharField()
    items = serializers.IntegerField()
    responses = serializers.IntegerField()
    models = _CountSerializer(many=True, help_text="responses per model")
    skills = _CountSerializer(many=True, help_text="items per skill")
    domains = _CountSerializer(many=True, help_text="items per domain")
    difficulty = _LevelSerializer(many=True, help_text="items per level (null: none given)")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    class Meta:
        ref_name = "DatasetDetail"


class DatasetDetailApi(APIView):
    """A dataset and its composition: responses per model, items per skill, domain and
    difficulty level."""

    @extend_schema(responses=DatasetSerializer)
    def get(self, request, pk: int):
        dataset, _ = access.dataset_get_for_user(request.user, pk)
        stats = dataset_stats(dataset=dataset)
        data = {
            "id": dataset.pk,
            "name": dataset.name,
            "project": dataset.project,
            "description": dataset.description,
            "items": stats["items"],
            "responses": stats["responses"],
            "models": [{"name": r["model_name"], "n": r["n"]} for r in stats["models"]],
            "skills": [{"name": r["skill__name"], "n": r["n"]} for r in stats["skills"]],
            "domains": stats["domains"],
            "difficulty": [{"level": r["difficulty"], "n": r["n"]} for r in stats["difficulty"]],
            "created_at": dataset.created_at,
            "updated_at": dataset.updated_at,
        }
        return ApiResponse(DatasetSerializer(data).data)


class _ItemSkillSerializer(serializers.Serializer):
    name = serializers.CharField(source="skill.name")
    rank = serializers.IntegerField()
    checklist = serializers.ListField(child=serializers.CharField())

    class Meta:
        ref_name = "ItemSkill"


class _Names(serializers.ListField):
    def __init__(self, **kwargs) -> None:
        super().__init__(child=serializers.CharField(), read_only=True, **kwargs)

    def to_representation(self, manager) -> list[str]:
        return [o.name for o in manager.all()]


class ItemRowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    external_id = serializers.CharField(help_text="the item's id in the imported file")
    instruction = serializers.CharField()
    difficulty = serializers.IntegerField(allow_null=True)
    skills = _ItemSkillSerializer(source="item_skills", many=True)
    domains = _Names()
    response_count = serializers.IntegerField()

    class Meta:
        ref_name = "ItemRow"


class _ResponseSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    model = serializers.CharField(source="model_name")
    text = serializers.CharField()

    class Meta:
        ref_name = "ItemResponse"


class ItemSerializer(ItemRowSerializer):
    reference_answer = serializers.CharField()
    source_task = serializers.CharField()
    responses = _ResponseSerializer(many=True)
    response_count = None  # type: ignore[assignment]  # DRF's way to drop a field the base serializer declares

    class Meta:
        ref_name = "Item"


class ItemFilterSerializer(serializers.Serializer):
    skill = serializers.CharField(
        required=False, max_length=200, help_text="a skill's name (any case) or id"
    )
    domain = serializers.CharField(
        required=False, max_length=200, help_text="a domain's name (any case) or id"
    )
    difficulty = serializers.ChoiceField(choices=Difficulty.choices, required=False)
    q = serializers.CharField(
        required=False, max_length=200, help_text="words of the instruction, or an item id"
    )

    class Meta:
        ref_name = "ItemFilters"


class ItemListApi(APIView):
    """A dataset's items, in import order, with their skills, domains and level (response
    texts are on each item: GET items/{id}/)."""

    pagination_class = ApiPagination

    @extend_schema(parameters=[ItemFilterSerializer], responses=ItemRowSerializer(many=True))
    def get(self, request, pk: int):
        dataset, _ = access.dataset_get_for_user(request.user, pk)
        params = ItemFilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        v = params.validated_data
        filters = item_filters_resolve(
            project=dataset.project,
            skill=v.get("skill"),
            domain=v.get("domain"),
            difficulty=v.get("difficulty"),
            search=v.get("q", ""),
        )
        if filters.errors:
            raise serializers.ValidationError({k: [m] for k, m in filters.errors.items()})
        items = item_list_for_dataset(dataset=dataset, **filters.narrowing())
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(items, request, view=self)
        return paginator.get_paginated_response(ItemRowSerializer(page, many=True).data)


class ItemDetailApi(APIView):
    """An item with its reference answer, skills (with checklists), domains and every
    response."""

    @extend_schema(responses=ItemSerializer)
    def get(self, request, pk: int):
        item = access.item_get_for_user(request.user, pk)
        return ApiResponse(ItemSerializer(item).data)


def _project(request, slug: str, roles=access.STAFF_ROLES):
    """The project, or 404 (unknown or not a member) / 403 (a role without access); the API's
    exception handler words both as JSON."""
    return access.project_get_for_user(request.user, slug, roles=roles)[0]


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


# --- imports ---------------------------------------------------------------------------------


class UploadOutputSerializer(serializers.ModelSerializer):
    project: serializers.SlugRelatedField[Project] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
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
