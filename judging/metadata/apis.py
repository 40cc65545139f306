"""REST API of metadata runs (docs/METADATA.md): create and start one over a dataset, read
its progress, pause, resume (with a new budget) and cancel it. The project's researchers and
admins; an action the run's status does not allow is a 409."""

from __future__ import annotations

from decimal import Decimal

from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.access import dataset_get_for_user
from annotation.api_parsers import StrictJSONParser
from flaskweb.api_errors import service_error, state_conflict
from judging.apis import ConflictSerializer, RunStartInputSerializer
from judging.metadata.views import metadata_run_get_for_staff
from judging.models import JudgeConfig, MetadataRun, RunStatus
from judging.services.metadata import (
    metadata_run_create,
    metadata_run_set_status,
    metadata_run_start,
)
from judging.services.runs import KEEP_BUDGET


class MetadataRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    judge = serializers.IntegerField(source="judge_id")
    dataset = serializers.IntegerField(source="dataset_id")
    origin = serializers.SerializerMethodField()
    template = serializers.SerializerMethodField()
    status = serializers.CharField()
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    failed = serializers.IntegerField()
    parse_failed = serializers.IntegerField()
    cached = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=14, decimal_places=6)
    budget = serializers.DecimalField(max_digits=14, decimal_places=6, allow_null=True)
    estimate = serializers.DictField()
    error = serializers.CharField()

    class Meta:
        ref_name = "MetadataRun"

    def get_origin(self, run: MetadataRun) -> str:
        return f"run:{run.pk}"

    def get_template(self, run: MetadataRun) -> str:
        return f"{run.prompt_template.key} v{run.prompt_template.version}"


class MetadataRunCreateApi(APIView):
    """Create a metadata run of an LLM judge over every item of the dataset and start it
    (the fan-out is enqueued once the request commits)."""

    parser_classes = [StrictJSONParser]

    class InputSerializer(serializers.Serializer):
        judge = serializers.IntegerField(min_value=1)
        budget = serializers.DecimalField(
            max_digits=14,
            decimal_places=6,
            min_value=Decimal("0.000001"),
            required=False,
            allow_null=True,
        )

        class Meta:
            ref_name = "MetadataRunCreateInput"

    @extend_schema(request=InputSerializer, responses={201: MetadataRunSerializer})
    def post(self, request, pk: int):
        dataset, _ = dataset_get_for_user(request.user, pk)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        judge = JudgeConfig.objects.filter(
            pk=data.validated_data["judge"], project=dataset.project
        ).first()
        if judge is None:
            raise serializers.ValidationError({"judge": ["no such judge in this project"]})
        try:
            run = metadata_run_create(
                judge=judge,
                dataset=dataset,
                budget=data.validated_data.get("budget"),
                created_by=request.user,
            )
            metadata_run_start(run=run)
        except ValidationError as exc:
            raise serializers.ValidationError({"detail": exc.messages}) from exc
        run.refresh_from_db()
        return ApiResponse(MetadataRunSerializer(run).data, status=status.HTTP_201_CREATED)


class MetadataRunDetailApi(APIView):
    @extend_schema(responses=MetadataRunSerializer)
    def get(self, request, pk: int):
        return ApiResponse(MetadataRunSerializer(metadata_run_get_for_staff(request.user, pk)).data)


def _conflict(run: MetadataRun, action: str) -> ApiResponse:
    return state_conflict(f"a {run.status} run cannot be {action}", "run_state", run.status)


def _answer(run: MetadataRun) -> ApiResponse:
    run.refresh_from_db()
    return ApiResponse(MetadataRunSerializer(run).data)


class MetadataRunResumeApi(APIView):
    """paused, failed or pending -> running (proposals already made are kept). A run paused
    by its budget needs a higher one. 409 otherwise."""

    parser_classes = [StrictJSONParser]

    class InputSerializer(RunStartInputSerializer):
        class Meta:
            ref_name = "MetadataRunResume"

    @extend_schema(
        request=InputSerializer, responses={200: MetadataRunSerializer, 409: ConflictSerializer}
    )
    def post(self, request, pk: int):
        run = metadata_run_get_for_staff(request.user, pk)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            started = metadata_run_start(
                run=run, budget=data.validated_data.get("budget", KEEP_BUDGET)
            )
        except ValidationError as exc:  # e.g. the provider awaits a site admin's approval
            raise service_error(exc) from None
        return _answer(run) if started else _conflict(run, "resumed")


class MetadataRunPauseApi(APIView):
    """running -> paused: queued batches do nothing until it is resumed. 409 otherwise."""

    @extend_schema(request=None, responses={200: MetadataRunSerializer, 409: ConflictSerializer})
    def post(self, request, pk: int):
        run = metadata_run_get_for_staff(request.user, pk)
        if not metadata_run_set_status(run=run, status=RunStatus.PAUSED):
            return _conflict(run, "paused")
        return _answer(run)


class MetadataRunCancelApi(APIView):
    """pending, running or paused -> cancelled, for good. 409 otherwise."""

    @extend_schema(request=None, responses={200: MetadataRunSerializer, 409: ConflictSerializer})
    def post(self, request, pk: int):
        run = metadata_run_get_for_staff(request.user, pk)
        if not metadata_run_set_status(run=run, status=RunStatus.CANCELLED):
            return _conflict(run, "cancelled")
        return _answer(run)
