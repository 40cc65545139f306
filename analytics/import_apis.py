"""REST API of long-format score imports (the same service as `manage.py import_scores`;
docs/IMPORT_FORMATS.md). Project researchers and admins may import into their project;
creating a missing project (`create_project`) is for site admins. Every 400 has the shape
of flaskweb.api_errors: {"detail", "code", "problems": [...], "problem_count"}."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404
from django.utils.text import slugify
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from analytics.imports import DEFAULT_DATASET, ScoreImportRejected, scores_import
from analytics.models import ScoreImport
from analytics.selectors import score_import_list
from annotation.access import is_site_admin, project_exists
from flaskweb.api_errors import ProblemsErrorSerializer, field_problems, problems_response
from judging.access import project_get_for_staff


class ScoreImportSerializer(serializers.ModelSerializer):
    dataset = serializers.CharField(source="dataset.name")
    created_by = serializers.CharField(source="created_by.username", default=None, allow_null=True)

    class Meta:
        model = ScoreImport
        fields = [
            "id", "dataset", "files", "input_sha256", "rows_read", "scores_created",
            "scores_unchanged", "items_created", "responses_created", "scales", "summary",
            "created_by", "created_at",
        ]  # fmt: skip
        ref_name = "AnalyticsScoreImport"


class ScoreImportListApi(APIView):
    """The project's latest score imports (newest first, at most 50; not paged)."""

    @extend_schema(responses=ScoreImportSerializer(many=True))
    def get(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        return ApiResponse(
            ScoreImportSerializer(score_import_list(project=project), many=True).data
        )


class ScoreImportApi(APIView):
    """Import long-format score files (multipart: one or more `files`, optional `dataset`,
    `scale` (repeatable SKILL=MIN:MAX[:continuous]), `judge_scale` skill|raw,
    `create_project`). 201 with the import; 200 when these bytes were imported into the
    project before (nothing written); 400 with every problem, nothing written."""

    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer):
        files = serializers.ListField(child=serializers.FileField(), allow_empty=False)
        dataset = serializers.CharField(max_length=200, required=False, default=DEFAULT_DATASET)
        scale = serializers.ListField(
            child=serializers.CharField(max_length=300), required=False, default=list
        )
        judge_scale = serializers.ChoiceField(
            choices=["skill", "raw"], required=False, default="skill"
        )
        create_project = serializers.BooleanField(required=False, default=False)

        class Meta:
            ref_name = "AnalyticsScoreImportInput"

    class OutputSerializer(serializers.Serializer):
        already_imported = serializers.BooleanField()
        project_created = serializers.BooleanField()
        dataset_created = serializers.BooleanField()
        skills_created = serializers.ListField(child=serializers.CharField())
        batch = ScoreImportSerializer()

        class Meta:
            ref_name = "AnalyticsScoreImportResult"

    @extend_schema(
        request={"multipart/form-data": InputSerializer},
        responses={201: OutputSerializer, 200: OutputSerializer, 400: ProblemsErrorSerializer},
    )
    def post(self, request, slug: str):
        # who may import comes before what was sent: a non-member learns nothing (404)
        slug = slugify(slug)
        exists = project_exists(slug)
        if exists:
            project_get_for_staff(request.user, slug)
        elif not is_site_admin(request.user):
            raise Http404("no such project")
        data = {
            "files": request.FILES.getlist("files"),
            "scale": request.data.getlist("scale") if hasattr(request.data, "getlist") else [],
        }
        for key in ("dataset", "judge_scale", "create_project"):
            if key in request.data:
                data[key] = request.data[key]
        serializer = self.InputSerializer(data=data)
        if not serializer.is_valid():
            return problems_response(
                "the request is not valid", "invalid", field_problems(serializer.errors)
            )
        v = serializer.validated_data
        if not exists and not v["create_project"]:
            raise Http404("no such project (a site admin may ask to create it)")
        limit = settings.FLASKWEB_MAX_UPLOAD_BYTES
        if sum(f.size or 0 for f in v["files"]) > limit:
            return problems_response(
                f"the files are larger than {limit:,} bytes together: use the import_scores "
                "command",
                "too_large",
                [],
            )
        try:
            result = scores_import(
                project_slug=slug,
                files=[(f.name, f) for f in v["files"]],
                dataset_name=v["dataset"],
                scales=v["scale"],
                judge_scale_raw=v["judge_scale"] == "raw",
                create_project=v["create_project"],
                created_by=request.user,
            )
        except ScoreImportRejected as exc:
            return problems_response(str(exc), "rejected", [p.as_dict() for p in exc.problems])
        body = self.OutputSerializer(result).data
        code = status.HTTP_200_OK if result.already_imported else status.HTTP_201_CREATED
        return ApiResponse(body, status=code)
