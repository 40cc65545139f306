"""REST API of screening (a campaign's researchers and admins): the settings with a
summary and the screening tasks (GET, PATCH), and the results per annotator. The same
services and rules as the screening page; annotators get 403, non-members 404."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation import access
from annotation.api_parsers import StrictJSONParser
from annotation.models import Campaign, QualificationRule
from annotation.screening import selectors, services, setup
from flaskweb.api_errors import ApiPagination, service_error


class ScreeningSerializer(serializers.Serializer):
    class TaskSerializer(serializers.Serializer):
        task_id = serializers.IntegerField()
        kind = serializers.CharField(help_text="training or qualification")
        item = serializers.CharField(source="external_id")
        model = serializers.CharField(source="model_name")
        known = serializers.DictField(
            child=serializers.CharField(), help_text='{skill: "1".."5" or "N/A"}'
        )
        explanation = serializers.CharField()
        served = serializers.IntegerField()
        submitted = serializers.IntegerField()

        class Meta:
            ref_name = "ScreeningTask"

    screening = serializers.BooleanField()
    pass_mark = serializers.FloatField(help_text="share of known scores matched, per skill")
    rule = serializers.ChoiceField(choices=QualificationRule.choices)
    training_tasks = serializers.IntegerField()
    qualification_tasks = serializers.IntegerField()
    annotators = serializers.DictField(
        child=serializers.IntegerField(), help_text="annotators per phase"
    )
    tasks = TaskSerializer(many=True)

    class Meta:
        ref_name = "Screening"


class ScreeningInputSerializer(serializers.Serializer):
    screening = serializers.BooleanField(required=False)
    pass_mark = serializers.FloatField(min_value=0, max_value=1, required=False)
    rule = serializers.ChoiceField(choices=QualificationRule.choices, required=False)

    class Meta:
        ref_name = "ScreeningInput"


def _screening_data(campaign: Campaign) -> dict:
    summary = selectors.screening_summary(campaign=campaign)
    return {
        "screening": summary.enabled,
        "pass_mark": summary.pass_mark,
        "rule": summary.rule,
        "training_tasks": summary.training_tasks,
        "qualification_tasks": summary.qualification_tasks,
        "annotators": summary.phases,
        "tasks": [
            {
                "task_id": t.task_id,
                "kind": t.kind,
                "external_id": t.external_id,
                "model_name": t.model_name,
                "known": dict(t.known),
                "explanation": t.explanation,
                "served": t.served,
                "submitted": t.submitted,
            }
            for t in setup.screening_task_list(campaign=campaign)
        ],
    }


class ScreeningDetailApi(APIView):
    """GET: the campaign's screening settings, tasks and annotators per phase. PATCH:
    change the settings (any subset of screening, pass_mark, rule)."""

    parser_classes = [StrictJSONParser]

    @extend_schema(responses=ScreeningSerializer)
    def get(self, request, pk: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        return ApiResponse(ScreeningSerializer(_screening_data(campaign)).data)

    @extend_schema(request=ScreeningInputSerializer, responses=ScreeningSerializer)
    def patch(self, request, pk: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        serializer = ScreeningInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        v = serializer.validated_data
        try:
            campaign = services.screening_settings_update(
                campaign=campaign,
                screening=v.get("screening", campaign.screening),
                pass_mark=v.get("pass_mark", campaign.qualification_pass_mark),
                rule=v.get("rule", campaign.qualification_rule),
            )
        except ValidationError as exc:
            raise service_error(exc) from None
        return ApiResponse(ScreeningSerializer(_screening_data(campaign)).data)


class ScreeningResultSerializer(serializers.Serializer):
    class SkillSerializer(serializers.Serializer):
        skill = serializers.CharField()
        agreed = serializers.IntegerField()
        total = serializers.IntegerField()
        agreement = serializers.FloatField(allow_null=True)

        class Meta:
            ref_name = "ScreeningSkillAgreement"

    annotator = serializers.CharField()
    phase = serializers.CharField(help_text="training, qualification, passed or failed")
    score = serializers.FloatField(allow_null=True, help_text="the lowest per-skill agreement")
    decided_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField()
    training_answered = serializers.IntegerField()
    qualification_answered = serializers.IntegerField()
    skills = SkillSerializer(many=True)
    note = serializers.CharField(
        help_text="why the result needs a note (held in the test with nothing compared), or empty"
    )

    class Meta:
        ref_name = "ScreeningResult"


class ScreeningResultListApi(APIView):
    """The campaign's screening results per annotator, by username."""

    pagination_class = ApiPagination

    @extend_schema(responses=ScreeningResultSerializer(many=True))
    def get(self, request, pk: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        rows = [r.as_json() for r in selectors.screening_results(campaign=campaign)]
        paginator = self.pagination_class()
        page: list[dict] | None = paginator.paginate_queryset(rows, request, view=self)  # type: ignore[arg-type]  # DRF slices any sequence; the stub wants a QuerySet
        return paginator.get_paginated_response(ScreeningResultSerializer(page, many=True).data)
