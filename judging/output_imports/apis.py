"""REST API: import judge outputs made elsewhere as named judges of a project
(docs/JUDGE_OUTPUT_IMPORTS.md). The request stores the files and answers 202 with a job;
the import runs in the background (judging.output_imports.jobs) with the same service as the
`import_judge_outputs` command, and the job's URL tells its status, problems and runs. Same
access rules as the other judging APIs (admins and researchers; annotators 403, non-members
404). Every 400 has one shape: {"detail", "code", "problems": [{file, line, field, code,
message}]}."""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.access import project_get_for_staff
from annotation.selectors import dataset_list_for_project
from flaskweb.api_errors import (
    ProblemSerializer,
    ProblemsErrorSerializer,
    field_problems,
    problems_response,
)
from flaskweb.jobs import JobStatus
from judging import access
from judging.apis import RunOutputSerializer
from judging.models import JudgeOutputImportJob, JudgeRun
from judging.output_imports.jobs import judge_output_import_job_create, output_import_progress_get
from judging.output_imports.services import FORMATS


class ImportedRunSerializer(serializers.Serializer):
    already_imported = serializers.BooleanField(
        help_text="This input was imported as this judge before: nothing was written."
    )
    judgments = serializers.IntegerField()
    scores = serializers.IntegerField()
    run = RunOutputSerializer()

    class Meta:
        ref_name = "JudgingOutputImportRun"


class ImportResultSerializer(serializers.Serializer):
    format = serializers.CharField()
    input_sha256 = serializers.CharField()
    human_rows_ignored = serializers.IntegerField()
    other_rater_rows_ignored = serializers.IntegerField()
    created = serializers.BooleanField(help_text="False: every run existed already.")
    runs = ImportedRunSerializer(many=True)

    class Meta:
        ref_name = "JudgingOutputImportResult"


class ProgressSerializer(serializers.Serializer):
    phase = serializers.CharField(help_text="reading, checking, writing or done")
    done = serializers.IntegerField()
    total = serializers.IntegerField()

    class Meta:
        ref_name = "JudgingOutputImportProgress"


class JobFileSerializer(serializers.Serializer):
    name = serializers.CharField()
    bytes = serializers.IntegerField()

    class Meta:
        ref_name = "JudgingOutputImportFile"


class JudgeOutputImportJobSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="project.slug")
    dataset = serializers.CharField(source="dataset.name")
    status = serializers.ChoiceField(choices=JobStatus.choices)
    files = JobFileSerializer(many=True)
    problems = ProblemSerializer(many=True, help_text="The first 1,000, in file order.")
    progress = serializers.SerializerMethodField()
    result = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()

    class Meta:
        model = JudgeOutputImportJob
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
            "created_at",
            "started_at",
            "finished_at",
        ]
        ref_name = "JudgingOutputImportJob"

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, job) -> dict:
        return {"phase": "", "done": 0, "total": 1, **output_import_progress_get(job.pk)}

    @extend_schema_field(serializers.CharField(help_text="The job's path on this site."))
    def get_url(self, job) -> str:
        return reverse("judging-api:judge-output-import-job", args=[job.pk])

    @extend_schema_field(ImportResultSerializer(allow_null=True))
    def get_result(self, job) -> dict | None:
        """Succeeded jobs: one run per judge, each as GET runs/<id>/ shows it."""
        if job.status != JobStatus.SUCCEEDED or not job.result:
            return None
        runs = JudgeRun.objects.select_related("judge").in_bulk(
            [r["run_id"] for r in job.result["runs"]]
        )
        shown = [{**r, "run": runs[r["run_id"]]} for r in job.result["runs"] if r["run_id"] in runs]
        body = {
            **job.result,
            "runs": shown,
            "created": any(not r["already_imported"] for r in shown),
        }
        return ImportResultSerializer(body).data


class JudgeOutputImportApi(APIView):
    """Start an import of judge outputs (multipart: `dataset`, one or more `files`,
    optional `judge`, `format`, `model`). 202 with the job (pending): the files are read by
    a worker, and GET on the job's `url` tells its status, its problems (rejected: nothing
    written) or its runs (succeeded). 400 for a request that cannot be run at all."""

    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer):
        dataset = serializers.CharField(max_length=200, help_text="The dataset's name.")
        files = serializers.ListField(child=serializers.FileField(), allow_empty=False)
        judge = serializers.CharField(
            max_length=200,
            required=False,
            default="",
            help_text="flask-review: the judge's name (required). long: import only this "
            "rater's rows (default: every rater becomes a judge).",
        )
        format = serializers.ChoiceField(choices=FORMATS, required=False, default="")
        model = serializers.CharField(
            max_length=200,
            required=False,
            default="",
            help_text=(
                "flask-review: the judged model of lines without model_id "
                "(default: the file name without _review)."
            ),
        )

        class Meta:
            ref_name = "JudgingOutputImport"

    @extend_schema(
        request={"multipart/form-data": InputSerializer},
        responses={202: JudgeOutputImportJobSerializer, 400: ProblemsErrorSerializer},
    )
    def post(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        data = request.data.dict() if hasattr(request.data, "dict") else dict(request.data)
        serializer = self.InputSerializer(data={**data, "files": request.FILES.getlist("files")})
        if not serializer.is_valid():
            return problems_response(
                "the request is not valid", "invalid", field_problems(serializer.errors)
            )
        v = serializer.validated_data
        limit = settings.FLASKWEB_MAX_UPLOAD_BYTES
        if sum(f.size or 0 for f in v["files"]) > limit:
            return problems_response(
                f"the files are larger than {limit:,} bytes together: use the "
                "import_judge_outputs command",
                "too_large",
                [],
            )
        dataset = dataset_list_for_project(project=project).filter(name=v["dataset"]).first()
        if dataset is None:
            return problems_response(
                f"the project has no dataset named {v['dataset']!r}", "unknown_dataset", []
            )
        job = judge_output_import_job_create(
            project=project,
            dataset=dataset,
            files=v["files"],
            fmt=v["format"],
            judge_name=v["judge"],
            model=v["model"],
            created_by=request.user,
        )
        body = JudgeOutputImportJobSerializer(job).data
        return ApiResponse(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})


class JudgeOutputImportJobApi(APIView):
    """An import of judge outputs: status (pending, running, succeeded, rejected, failed),
    progress, problems (rejected), the runs (succeeded) or the error (failed)."""

    @extend_schema(responses=JudgeOutputImportJobSerializer)
    def get(self, request, pk: int):
        job = access.output_import_job_get_for_staff(request.user, pk)
        return ApiResponse(JudgeOutputImportJobSerializer(job).data)
