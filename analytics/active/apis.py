"""The active selection API of a campaign (its project's admins and researchers; annotators
403, non-members 404): read the plan with its batches, make it, change it for later batches,
and draw the next batch naming its number (a retried request returns the batch drawn, never
a second one). The same services as the page (analytics/active/views.py)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from analytics.active import selectors, services
from analytics.active.selectors import SelectionState
from analytics.models import SelectionSource
from annotation.access import campaign_get_for_staff
from annotation.api_parsers import StrictJSONParser
from annotation.models import Campaign, CampaignSelection, CampaignStatus
from flaskweb.api_errors import ErrorSerializer, service_error, state_conflict

MAX_INT = 2**31 - 1


class _RunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    judge = serializers.CharField(source="judge.name")
    status = serializers.CharField()

    class Meta:
        ref_name = "SelectionRun"


class PlanSerializer(serializers.Serializer):
    source = serializers.ChoiceField(choices=SelectionSource.choices)  # type: ignore[assignment]  # a field, not Field.source
    budget = serializers.IntegerField(help_text="responses for people, in expectation, in all")
    batch_size = serializers.IntegerField(help_text="responses decided per batch")
    uniform_share = serializers.FloatField()
    seed = serializers.IntegerField()
    frame_size = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "SelectionPlan"

    def get_frame_size(self, plan) -> int:
        return len(plan.frame)


class BatchSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    size = serializers.IntegerField(help_text="responses decided")
    budget = serializers.FloatField(help_text="the expected draws: the sum of the probabilities")
    drawn = serializers.IntegerField(help_text="responses drawn for people")
    p_min = serializers.FloatField()
    p_max = serializers.FloatField()
    source = serializers.ChoiceField(  # type: ignore[assignment]  # a field, not Field.source
        choices=SelectionSource.choices, help_text="asked"
    )
    source_used = serializers.CharField(help_text="spread, judges, calibration or uniform")
    note = serializers.CharField(help_text="why the source used is not the one asked; or empty")
    labels = serializers.IntegerField(help_text="labeled frame responses when it was drawn")
    plan_budget = serializers.IntegerField()
    batch_size = serializers.IntegerField()
    uniform_share = serializers.FloatField()
    fit = serializers.DictField(
        child=serializers.DictField(),
        help_text="the calibration model per skill: lambda, labels, rms per score level",
    )
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "SelectionBatch"


class SelectionSerializer(serializers.Serializer):
    campaign = serializers.IntegerField(source="campaign.pk")
    selection = serializers.ChoiceField(
        source="campaign.selection", choices=CampaignSelection.choices
    )
    status = serializers.ChoiceField(source="campaign.status", choices=CampaignStatus.choices)
    plan = PlanSerializer(allow_null=True)
    runs = _RunSerializer(many=True)
    frame_size = serializers.IntegerField()
    decided = serializers.IntegerField()
    drawn = serializers.IntegerField()
    labeled = serializers.IntegerField(help_text="drawn responses with an accepted score")
    spent = serializers.FloatField(help_text="expected draws of the batches drawn (sum of p)")
    remaining_budget = serializers.FloatField(help_text="the budget less what was spent")
    next_batch = serializers.IntegerField(help_text="the number the next draw names")
    next_size = serializers.IntegerField()
    blocked = serializers.CharField(help_text="why no batch can be drawn now; empty if one can")
    batches = BatchSerializer(many=True)

    class Meta:
        ref_name = "ActiveSelection"


def _data(campaign: Campaign) -> dict[str, Any]:
    state: SelectionState = selectors.selection_state(campaign=campaign)
    return SelectionSerializer(state).data


class PlanSettingsInput(serializers.Serializer):
    source = serializers.ChoiceField(choices=SelectionSource.choices)  # type: ignore[assignment]  # a field, not Field.source
    budget = serializers.IntegerField(min_value=1, max_value=MAX_INT)
    batch_size = serializers.IntegerField(min_value=1, max_value=MAX_INT)
    uniform_share = serializers.FloatField(
        min_value=0.001, max_value=1, required=False, help_text="default 0.2"
    )

    class Meta:
        ref_name = "SelectionPlanSettings"


class PlanCreateInput(PlanSettingsInput):
    runs = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1),
        min_length=1,
        max_length=50,
        help_text="ids of finished pointwise judge runs over the campaign's dataset",
    )
    seed = serializers.IntegerField(
        min_value=0, max_value=2**62, required=False, help_text="default: drawn at random"
    )

    class Meta:
        ref_name = "SelectionPlanInput"


class DrawInput(serializers.Serializer):
    batch = serializers.IntegerField(
        min_value=1, max_value=MAX_INT, help_text="the batch expected next (next_batch)"
    )

    class Meta:
        ref_name = "SelectionDrawInput"


class DrawOutput(serializers.Serializer):
    created = serializers.BooleanField(help_text="false: the batch was drawn before")
    batch = BatchSerializer()
    selection = SelectionSerializer()

    class Meta:
        ref_name = "SelectionDrawn"


BAD = OpenApiResponse(ErrorSerializer, description="refused: the reason in detail")


class ActiveSelectionApi(APIView):
    """GET: the campaign's plan, its batches and what they add up to (plan null: none yet).
    POST: make the plan. PATCH: change its source, budget, batch size or uniform share for
    the batches still to draw."""

    parser_classes = [StrictJSONParser]

    @extend_schema(responses=SelectionSerializer)
    def get(self, request, pk: int):
        campaign = campaign_get_for_staff(request.user, pk)
        return ApiResponse(_data(campaign))

    @extend_schema(request=PlanCreateInput, responses={201: SelectionSerializer, 400: BAD})
    def post(self, request, pk: int):
        campaign = campaign_get_for_staff(request.user, pk)
        body = PlanCreateInput(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        try:
            services.selection_plan_create(
                campaign=campaign,
                run_ids=data.pop("runs"),
                created_by=request.user,
                **data,
            )
        except ValidationError as exc:
            raise service_error(exc) from None
        return ApiResponse(_data(campaign), status=status.HTTP_201_CREATED)

    @extend_schema(
        request=PlanSettingsInput(partial=True), responses={200: SelectionSerializer, 400: BAD}
    )
    def patch(self, request, pk: int):
        campaign = campaign_get_for_staff(request.user, pk)
        body = PlanSettingsInput(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        plan = selectors.plan_get(campaign=campaign)
        if plan is None:
            raise serializers.ValidationError({"non_field_errors": ["this campaign has no plan"]})
        try:
            services.selection_plan_update(plan=plan, **body.validated_data)
        except ValidationError as exc:
            raise service_error(exc) from None
        return ApiResponse(_data(campaign))


class ActiveSelectionDrawApi(APIView):
    """Draw the next batch: `batch` names the number expected (GET's next_batch). 201 with
    the batch drawn; 200 with the same batch when it was drawn before (a retry); 409 when
    another number is next (code batch_stale, status: the campaign's status)."""

    parser_classes = [StrictJSONParser]

    @extend_schema(
        request=DrawInput,
        responses={
            200: DrawOutput,
            201: DrawOutput,
            400: BAD,
            409: OpenApiResponse(ErrorSerializer, description="another batch is next"),
        },
    )
    def post(self, request, pk: int):
        campaign = campaign_get_for_staff(request.user, pk)
        body = DrawInput(data=request.data)
        body.is_valid(raise_exception=True)
        plan = selectors.plan_get(campaign=campaign)
        if plan is None:
            raise serializers.ValidationError({"non_field_errors": ["this campaign has no plan"]})
        try:
            batch, created = services.selection_batch_draw(
                plan=plan, number=body.validated_data["batch"], created_by=request.user
            )
        except services.BatchStale as exc:
            return state_conflict(" ".join(exc.messages), "batch_stale", campaign.status)
        except ValidationError as exc:
            raise service_error(exc) from None
        out = {
            "created": created,
            "batch": BatchSerializer(batch).data,
            "selection": _data(campaign),
        }
        return ApiResponse(out, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)
