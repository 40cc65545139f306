"""REST API of long-format score imports (the same service as `manage.py import_scores`;
docs/IMPORT_FORMATS.md). The request stores the files and answers 202 with a job; the
import runs in the background (analytics.imports.jobs) and the job's URL tells its status,
problems and result. Project researchers and admins may import into their project;
creating a missing project (`create_project`) is for site admins. Every 400 has the shape
of flaskweb.api_errors: {"detail", "code", "problems": [...], "problem_count"}."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.text import slugify
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from analytics.imports.jobs import score_import_job_create, score_import_progress_get
from analytics.imports.selectors import score_import_list
from analytics.imports.services import DEFAULT_DATASET
from analytics.models import ScoreImport, ScoreImportJob
from annotation.access import is_site_admin, project_exists, project_get_for_staff
from flaskweb.api_errors import (
    ProblemSerializer,
    ProblemsErrorSerializer,
    field_problems,
    problems_response,
)
from flaskweb.jobs import JobStatus


class ScoreImportSerializer(serializers.ModelSerializer):
    dataset = serializers.CharField(source="dataset.name")
    created_by = serializers.CharField(source="created_by.username", default=None, allow_null=True)

    class Meta:
        model = ScoreImport
        fields = [
            "id",
            "dataset",
            "files",
            "input_sha256",
            "rows_read",
            "scores_created",
            "scores_unchanged",
            "items_created",
            "responses_created",
            "scales",
            "summary",
            "created_by",
            "created_at",
        ]
        ref_name = "AnalyticsScoreImport"


class ScoreImportListApi(APIView):
    """The project's latest score imports (newest first, at most 50; not paged)."""

    @extend_schema(responses=ScoreImportSerializer(many=True))
    def get(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        return ApiResponse(
            ScoreImportSerializer(score_import_list(project=project), many=True).data
        )


class ImportProgressSerializer(serializers.Serializer):
    phase = serializers.CharField(help_text="reading, checking, writing or done")
    done = serializers.IntegerField()
    total = serializers.IntegerField()

    class Meta:
        ref_name = "AnalyticsScoreImportProgress"


class ImportFileSerializer(serializers.Serializer):
    name = serializers.CharField()
    bytes = serializers.IntegerField()

    class Meta:
        ref_name = "AnalyticsScoreImportFile"


class ImportOutcomeSerializer(serializers.Serializer):
    already_imported = serializers.BooleanField(
        help_text="These bytes were imported into the project before: nothing was written."
    )
    project_created = serializers.BooleanField()
    dataset_created = serializers.BooleanField()
    skills_created = serializers.ListField(child=serializers.CharField())

    class Meta:
        ref_name = "AnalyticsScoreImportOutcome"


class ScoreImportJobSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="options.project")
    dataset = serializers.CharField(source="options.dataset")
    status = serializers.ChoiceField(choices=JobStatus.choices)
    files = ImportFileSerializer(many=True)
    problems = ProblemSerializer(many=True, help_text="The first 1,000, in file order.")
    progress = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()
    result = serializers.SerializerMethodField()
    batch = ScoreImportSerializer(allow_null=True, help_text="Succeeded: the score import.")

    class Meta:
        model = ScoreImportJob
        fields = [
            "id",
            "url",
            "project",
            "dataset",
            "status",
            "options",
            "files",
            "bytes_total",
            "progress",
            "problem_count",
            "problems",
            "error",
            "result",
            "batch",
            "created_at",
            "started_at",
            "finished_at",
        ]
        ref_name = "AnalyticsScoreImportJob"

    @extend_schema_field(ImportProgressSerializer)
    def get_progress(self, job) -> dict:
        return {"phase": "", "done": 0, "total": 1, **score_import_progress_get(job.pk)}

    @extend_schema_field(serializers.URLField())
    def get_url(self, job) -> str:
        return reverse("analytics-api:score-import-job", args=[job.pk])

    @extend_schema_field(ImportOutcomeSerializer(allow_null=True))
    def get_result(self, job) -> dict | None:
        return job.result if job.status == JobStatus.SUCCEEDED and job.result else None


class ScoreImportApi(APIView):
    """Start an import of long-format score files (multipart: one or more `files`, optional
    `dataset`, `scale` (repeatable SKILL=MIN:MAX[:continuous]), `judge_scale` skill|raw,
    `create_project`). 202 with the job (pending): the files are read by a worker, and GET
    on the job's `url` tells its status, its problems (rejected: nothing written) or the
    score import (succeeded; `result.already_imported` when these bytes were imported into
    the project before). 400 for a request that cannot be run at all."""

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

    @extend_schema(
        request={"multipart/form-data": InputSerializer},
        responses={202: ScoreImportJobSerializer, 400: ProblemsErrorSerializer},
    )
    def post(self, request, slug: str):
        # who may import comes before what was sent: a non-member learns nothing (404)
        slug = slugify(slug)
        project = None
        if project_exists(slug):
            project = project_get_for_staff(request.user, slug)
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
        if project is None and not v["create_project"]:
            raise Http404("no such project (a site admin may ask to create it)")
        limit = settings.FLASKWEB_MAX_UPLOAD_BYTES
        if sum(f.size or 0 for f in v["files"]) > limit:
            return problems_response(
                f"the files are larger than {limit:,} bytes together: use the import_scores "
                "command",
                "too_large",
                [],
            )
        job = score_import_job_create(
            project=project,
            project_slug=slug,
            files=v["files"],
            dataset_name=v["dataset"],
            scales=v["scale"],
            judge_scale_raw=v["judge_scale"] == "raw",
            create_project=v["create_project"],
            created_by=request.user,
        )
        body = ScoreImportJobSerializer(job).data
        return ApiResponse(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})


class ScoreImportJobApi(APIView):
    """A score import job: status (pending, running, succeeded, rejected, failed),
    progress, problems (rejected), the score import (succeeded) or the error (failed)."""

    @extend_schema(responses=ScoreImportJobSerializer)
    def get(self, request, pk: int):
        job = get_object_or_404(
            ScoreImportJob.objects.select_related("project", "batch__dataset"), pk=pk
        )
        if job.project is not None:
            project_get_for_staff(request.user, job.project.slug)
        elif not is_site_admin(request.user):  # a project it is still to create
            raise Http404("no such import")
        return ApiResponse(ScoreImportJobSerializer(job).data)
