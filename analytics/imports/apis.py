"""REST API of long-format score imports and of preference-label imports (the same services
as `manage.py import_scores` and `manage.py import_preferences`; docs/IMPORT_FORMATS.md).
The request stores the files and answers 202 with a job; the import runs in the background
(analytics.imports.jobs) and the job's URL tells its status, problems and result. Project
researchers and admins may import into their project; creating a missing project
(`create_project`, scores only) is for site admins. Every 400 has the shape of
flaskweb.api_errors: {"detail", "code", "problems": [...], "problem_count"}."""

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

from analytics.imports.forms import preference_upload_limit
from analytics.imports.jobs import (
    import_job_progress,
    preference_import_job_create,
    score_import_job_create,
)
from analytics.imports.selectors import preference_import_list, score_import_list
from analytics.imports.services import DEFAULT_DATASET
from analytics.models import PreferenceImport, PreferenceImportJob, ScoreImport, ScoreImportJob
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


def _job_fields(*own: str) -> list[str]:
    """An import job's fields in the API's order; `own` come after "project"."""
    return [
        "id",
        "url",
        "project",
        *own,
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


# What a score and a preference import job share; a subclass names its job's detail route
# (`job_route`) and declares `project`, `batch` and the schema of `result`. (A comment, not a
# docstring: the schema would show a docstring as both jobs' description.)
class _ImportJobSerializer(serializers.ModelSerializer):
    job_route = ""
    status = serializers.ChoiceField(choices=JobStatus.choices)
    files = ImportFileSerializer(many=True)
    problems = ProblemSerializer(many=True, help_text="The first 1,000, in file order.")
    progress = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()
    result = serializers.SerializerMethodField()

    @extend_schema_field(ImportProgressSerializer)
    def get_progress(self, job) -> dict:
        return import_job_progress(job)

    @extend_schema_field(serializers.CharField(help_text="The job's path on this site."))
    def get_url(self, job) -> str:
        return reverse(self.job_route, args=[job.pk])

    def get_result(self, job) -> dict | None:
        return job.result if job.status == JobStatus.SUCCEEDED and job.result else None


class ScoreImportJobSerializer(_ImportJobSerializer):
    job_route = "analytics-api:score-import-job"
    project = serializers.CharField(source="options.project")
    dataset = serializers.CharField(source="options.dataset")
    batch = ScoreImportSerializer(allow_null=True, help_text="Succeeded: the score import.")

    class Meta:
        model = ScoreImportJob
        fields = _job_fields("dataset")
        ref_name = "AnalyticsScoreImportJob"

    @extend_schema_field(ImportOutcomeSerializer(allow_null=True))
    def get_result(self, job) -> dict | None:
        return super().get_result(job)


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
        too_large = _too_large(
            v["files"], settings.FLASKWEB_MAX_UPLOAD_BYTES, "use the import_scores command"
        )
        if too_large is not None:
            return too_large
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


def _too_large(files, limit: int, advice: str):
    """The 400 of files larger than `limit` bytes together, or None."""
    if sum(f.size or 0 for f in files) <= limit:
        return None
    what = "the file is" if len(files) == 1 else "the files are"
    return problems_response(
        f"{what} larger than {limit:,} bytes together: {advice}", "too_large", []
    )


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


# --- preference labels ---------------------------------------------------------------------


class PreferenceImportSerializer(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", default=None, allow_null=True)

    class Meta:
        model = PreferenceImport
        fields = [
            "id",
            "name",
            "input_sha256",
            "rows_read",
            "labels_created",
            "labels_unchanged",
            "created_by",
            "created_at",
        ]
        ref_name = "AnalyticsPreferenceImport"


class PreferenceImportListApi(APIView):
    """The project's latest preference-label imports (newest first, at most 50; not paged)."""

    @extend_schema(responses=PreferenceImportSerializer(many=True))
    def get(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        return ApiResponse(
            PreferenceImportSerializer(preference_import_list(project=project), many=True).data
        )


class PreferenceImportOutcomeSerializer(serializers.Serializer):
    already_imported = serializers.BooleanField(
        help_text="These bytes were imported into the project before: nothing was written."
    )
    raters = serializers.IntegerField(required=False, help_text="Raters of the new labels.")
    pairs = serializers.IntegerField(required=False, help_text="Response pairs in the file.")

    class Meta:
        ref_name = "AnalyticsPreferenceImportOutcome"


class PreferenceImportJobSerializer(_ImportJobSerializer):
    job_route = "analytics-api:preference-import-job"
    project = serializers.CharField(source="project.slug")
    batch = PreferenceImportSerializer(
        allow_null=True, help_text="Succeeded: the preference import."
    )

    class Meta:
        model = PreferenceImportJob
        fields = _job_fields()
        ref_name = "AnalyticsPreferenceImportJob"

    @extend_schema_field(PreferenceImportOutcomeSerializer(allow_null=True))
    def get_result(self, job) -> dict | None:
        return super().get_result(job)


class PreferenceImportApi(APIView):
    """Start an import of one file of preference labels (multipart: `file`, optional
    `dataset` for rows without a dataset column, `format` csv|jsonl, default from the file's
    name). 202 with the job (pending): the file is read by a worker, and GET on the job's
    `url` tells its status, its problems (rejected: nothing written) or the preference
    import (succeeded; `result.already_imported` when these bytes were imported into the
    project before). 400 for a request that cannot be run at all (no file, a file over the
    limit)."""

    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer):
        file = serializers.FileField()
        dataset = serializers.CharField(
            max_length=200, required=False, default="", allow_blank=True
        )
        format = serializers.ChoiceField(
            choices=["", "csv", "jsonl"], required=False, default="", allow_blank=True
        )

        class Meta:
            ref_name = "AnalyticsPreferenceImportInput"

    @extend_schema(
        request={"multipart/form-data": InputSerializer},
        responses={202: PreferenceImportJobSerializer, 400: ProblemsErrorSerializer},
    )
    def post(self, request, slug: str):
        # who may import comes before what was sent: a non-member learns nothing (404)
        project = project_get_for_staff(request.user, slug)
        data = {"file": request.FILES.get("file")}
        for key in ("dataset", "format"):
            if key in request.data:
                data[key] = request.data[key]
        serializer = self.InputSerializer(data=data)
        if not serializer.is_valid():
            return problems_response(
                "the request is not valid", "invalid", field_problems(serializer.errors)
            )
        v = serializer.validated_data
        too_large = _too_large([v["file"]], preference_upload_limit(), "split the file")
        if too_large is not None:
            return too_large
        job = preference_import_job_create(
            project=project,
            file=v["file"],
            dataset_name=v["dataset"],
            fmt=v["format"],
            created_by=request.user,
        )
        body = PreferenceImportJobSerializer(job).data
        return ApiResponse(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})


class PreferenceImportJobApi(APIView):
    """A preference import job: status (pending, running, succeeded, rejected, failed),
    progress, problems (rejected), the preference import (succeeded) or the error
    (failed)."""

    @extend_schema(responses=PreferenceImportJobSerializer)
    def get(self, request, pk: int):
        job = get_object_or_404(
            PreferenceImportJob.objects.select_related("project", "batch__created_by"), pk=pk
        )
        project_get_for_staff(request.user, job.project.slug)
        return ApiResponse(PreferenceImportJobSerializer(job).data)
