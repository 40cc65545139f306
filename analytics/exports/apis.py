"""REST API of the score exports (docs/EXPORTS.md): ask for an export, follow its job,
download its file. The same service and access rules as the exports page (admins and
researchers; annotators 403, non-members 404). A 400 names the fields:
{"skill": ["not a skill of the project: …"], …}."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from analytics.exports.selectors import export_get_for_staff, export_list_for_project
from analytics.exports.services import ExportOptionsError, export_job_create
from analytics.exports.training import TRAINING_KIND
from analytics.exports.views import export_file_response
from analytics.models import ExportFormat, ExportJob, ExportKind, ExportStatus, RaterKind
from annotation.access import project_get_for_staff
from flaskweb.api_errors import ApiPagination, state_conflict

KIND_HELP = f"One of {', '.join(ExportKind.values)}."
FORMAT_HELP = (
    f"One of {', '.join(ExportFormat.values)}. long, preferences: csv (default), jsonl or "
    "parquet; wide: csv or parquet; flask_review: jsonl or parquet; judge_training: jsonl; "
    "hf_dataset: zip."
)
TRAINING_HELP = (
    "judge_training only: {unit: skill|item, consensus: mean|median, na: skip|include, "
    "adjudicated, pairwise, name_systems: booleans} (docs/EXPORTS.md)."
)


class ExportOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.CharField(source="project.slug")
    # plain strings, not enums: "kind" and "format" are other choice sets elsewhere in the
    # API, and drf-spectacular warns on enums that share a field name
    kind = serializers.SerializerMethodField(help_text=KIND_HELP)
    format = serializers.CharField(help_text=FORMAT_HELP)
    filters = serializers.JSONField()
    status = serializers.ChoiceField(choices=ExportStatus.choices)
    rows = serializers.IntegerField(help_text="Data rows written (once done).")
    error = serializers.CharField(help_text="Why the export failed (failed only).")
    requested_by = serializers.CharField(source="requested_by.username", allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    urls = serializers.SerializerMethodField()

    class Meta:
        ref_name = "AnalyticsExportJob"

    def get_kind(self, job: ExportJob) -> str:
        return job.kind

    @extend_schema_field(
        {
            "type": "object",
            "properties": {
                "self": {"type": "string"},
                "download": {"type": "string", "nullable": True},
                "page": {"type": "string"},
            },
        }
    )
    def get_urls(self, job: ExportJob) -> dict:
        done = job.status == ExportStatus.DONE
        return {
            "self": reverse("analytics-api:export-detail", args=[job.pk]),
            "download": reverse("analytics-api:export-download", args=[job.pk]) if done else None,
            "page": reverse("analytics:exports", args=[job.project.slug]),
        }


class ExportListCreateApi(APIView):
    """GET: the project's export jobs, newest first (paginated). POST: ask for an export;
    201 with the job (pending), written in the background: follow `urls.self` until
    `status` is done, then GET `urls.download`."""

    pagination_class = ApiPagination

    class InputSerializer(serializers.Serializer):
        kind = serializers.CharField(max_length=20, help_text=KIND_HELP)
        format = serializers.CharField(
            max_length=10, required=False, allow_blank=True, default="", help_text=FORMAT_HELP
        )
        skill = serializers.ListField(
            child=serializers.CharField(max_length=100), required=False, default=list
        )
        rater_kind = serializers.ChoiceField(
            choices=RaterKind.choices, required=False, allow_blank=True, default=""
        )
        judge = serializers.ListField(
            child=serializers.CharField(max_length=200),
            required=False,
            default=list,
            help_text="Narrows the judge rows; flask_review: exactly one judge.",
        )
        campaign = serializers.CharField(max_length=200, required=False, default="")
        dataset = serializers.CharField(max_length=200, required=False, default="")
        system = serializers.ListField(
            child=serializers.CharField(max_length=200), required=False, default=list
        )
        run = serializers.IntegerField(
            required=False,
            allow_null=True,
            default=None,
            help_text="A judge run (long, flask_review). flask_review default: the judge's "
            "latest finished run.",
        )
        training = serializers.JSONField(
            required=False, allow_null=True, default=None, help_text=TRAINING_HELP
        )

        class Meta:
            ref_name = "AnalyticsExportRequest"

    @extend_schema(responses=ExportOutputSerializer(many=True))
    def get(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        jobs = export_list_for_project(project=project, limit=None)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(jobs, request, view=self)
        return paginator.get_paginated_response(ExportOutputSerializer(page, many=True).data)

    @extend_schema(
        request=InputSerializer,
        responses={201: ExportOutputSerializer},
        examples=[
            OpenApiExample(
                "Judge scores as JSON Lines",
                request_only=True,
                value={
                    "kind": "long",
                    "format": "jsonl",
                    "rater_kind": "judge",
                    "skill": ["Factuality", "Readability"],
                },
            ),
        ],
    )
    def post(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        kind, fmt = data.pop("kind"), data.pop("format")
        training = data.pop("training", None)
        if kind == TRAINING_KIND:
            data["training"] = {} if training is None else training
        elif training is not None:
            raise serializers.ValidationError({"training": [f"only for kind {TRAINING_KIND}"]})
        try:
            job = export_job_create(
                project=project, kind=kind, fmt=fmt, filters=data, requested_by=request.user
            )
        except ExportOptionsError as exc:
            raise serializers.ValidationError(exc.errors)
        return ApiResponse(ExportOutputSerializer(job).data, status=status.HTTP_201_CREATED)


class ExportDetailApi(APIView):
    """One export job: its status, row count, error and links."""

    @extend_schema(responses=ExportOutputSerializer)
    def get(self, request, pk: int):
        job = export_get_for_staff(request.user, pk)
        return ApiResponse(ExportOutputSerializer(job).data)


class _AnyAccept(BaseContentNegotiation):
    """The file is sent whatever `Accept` says (text/csv, application/x-ndjson, */*): DRF's
    negotiation would answer 406 to a client asking for the file's own type."""

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class ExportConflictSerializer(serializers.Serializer):
    detail = serializers.CharField()
    code = serializers.ChoiceField(choices=["export_state"], help_text="always export_state")
    status = serializers.ChoiceField(choices=ExportStatus.choices, help_text="the job's status")

    class Meta:
        ref_name = "AnalyticsExportConflict"


class ExportDownloadApi(APIView):
    """The finished export's file, as an attachment (CSV, JSON Lines, Parquet or a zip, as
    the job's format); 409 while the job is not done."""

    content_negotiation_class = _AnyAccept

    @extend_schema(
        responses={
            (200, "text/csv"): OpenApiTypes.BINARY,
            (200, "application/x-ndjson"): OpenApiTypes.BINARY,
            (200, "application/vnd.apache.parquet"): OpenApiTypes.BINARY,
            (200, "application/zip"): OpenApiTypes.BINARY,
            409: ExportConflictSerializer,
        }
    )
    def get(self, request, pk: int):
        job = export_get_for_staff(request.user, pk)
        response = export_file_response(job)
        if response is None:
            article = "an" if job.status == ExportStatus.EXPIRED else "a"
            detail = f"{article} {job.status} export has no file"
            return state_conflict(detail, "export_state", job.status)
        return response
