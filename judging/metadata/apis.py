"""REST API of metadata runs (docs/METADATA.md): create and start one over a dataset, and
read its progress. The project's researchers and admins."""

from __future__ import annotations

from decimal import Decimal

from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.access import dataset_get_for_user
from annotation.api_parsers import StrictJSONParser
from judging.metadata.views import metadata_run_get_for_staff
from judging.models import JudgeConfig, MetadataRun
from judging.services.metadata import metadata_run_create, metadata_run_start


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
