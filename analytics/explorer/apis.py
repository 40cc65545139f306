"""REST API of the disagreement explorer (docs/DISAGREEMENTS.md): the ranked list, and the
send-back for re-annotation. Project researchers and admins only (annotators 403, others
404). Invalid input is a 400 with the problems by field, and changes nothing."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from analytics.explorer.disagreement import PAGE_SIZE, SORTS, Disagreement, DisagreementFilters
from analytics.explorer.selectors import (
    disagreement_list,
    filter_choices,
    filter_values_resolve,
)
from analytics.explorer.steps import step_url
from annotation.access import project_get_for_staff
from annotation.selectors import campaign_list_for_reannotation
from annotation.services.reannotation import (
    MAX_EXTRA,
    MAX_OVERLAP,
    MAX_RESPONSES,
    MIN_EXTRA,
    responses_reannotate,
)


class DisagreementPagination(PageNumberPagination):
    page_size = PAGE_SIZE


class DisagreementListApi(APIView):
    """The project's (response, skill) pairs with human scores, ranked by the largest gap
    between the human mean and a judge (`sort=gap`, the default) or by the spread of the
    human scores (`sort=spread`), 50 per page (`page`)."""

    pagination_class = DisagreementPagination

    class FilterSerializer(serializers.Serializer):
        skill = serializers.ListField(child=serializers.CharField(), required=False, default=list)
        judge = serializers.ListField(child=serializers.CharField(), required=False, default=list)
        system = serializers.ListField(child=serializers.CharField(), required=False, default=list)
        domain = serializers.ListField(child=serializers.CharField(), required=False, default=list)
        difficulty = serializers.ListField(
            child=serializers.IntegerField(min_value=1, max_value=5), required=False, default=list
        )
        min_human = serializers.IntegerField(
            min_value=1, max_value=MAX_OVERLAP, required=False, default=1
        )
        sort = serializers.ChoiceField(choices=SORTS, required=False, default="gap")

        class Meta:
            ref_name = "AnalyticsDisagreementFilters"

    class OutputSerializer(serializers.Serializer):
        class HumanScoreSerializer(serializers.Serializer):
            rater = serializers.CharField()
            value = serializers.FloatField(allow_null=True, help_text="null: N/A")

            class Meta:
                ref_name = "AnalyticsDisagreementHumanScore"

        class JudgeSerializer(serializers.Serializer):
            judge = serializers.CharField()
            value = serializers.FloatField(allow_null=True, help_text="null: N/A")
            gap = serializers.FloatField(allow_null=True)

            class Meta:
                ref_name = "AnalyticsDisagreementJudge"

        response = serializers.IntegerField(source="response_id")
        item = serializers.IntegerField(source="item_id")
        system = serializers.CharField()
        skill = serializers.CharField()
        human_scores = serializers.SerializerMethodField()
        n_human = serializers.IntegerField(help_text="human scores with a value")
        n_na = serializers.IntegerField()
        human_mean = serializers.FloatField()
        human_sd = serializers.FloatField(help_text="population standard deviation")
        human_range = serializers.FloatField()
        judges = JudgeSerializer(many=True)
        gap = serializers.FloatField(allow_null=True, help_text="the largest gap over judges")

        class Meta:
            ref_name = "AnalyticsDisagreement"

        @extend_schema_field(HumanScoreSerializer(many=True))
        def get_human_scores(self, row) -> list[dict]:
            return [{"rater": rater, "value": value} for rater, value in row.human_scores]

    @extend_schema(parameters=[FilterSerializer], responses=OutputSerializer(many=True))
    def get(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        params = self.FilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        named, unknown = filter_values_resolve(given=data, choices=filter_choices(project=project))
        if unknown:  # an unknown name would silently widen or empty the list
            raise serializers.ValidationError(unknown)
        filters = DisagreementFilters(
            skills=tuple(named["skill"]),
            judges=tuple(named["judge"]),
            systems=tuple(named["system"]),
            domains=tuple(named["domain"]),
            difficulties=tuple(data["difficulty"]),
            min_human=data["min_human"],
            sort=data["sort"],
        )
        rows = disagreement_list(project=project, filters=filters)
        paginator = self.pagination_class()
        # DRF pages any sequence (Django's Paginator); the stubs accept only a QuerySet
        page: list[Disagreement] | None = paginator.paginate_queryset(
            rows,  # type: ignore[arg-type]
            request,
            view=self,
        )
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


class _NextStepSerializer(serializers.Serializer):
    action = serializers.CharField(
        help_text="send_back_with_more, send_back_in_campaign, wait, add_annotators, "
        "resume_campaign or create_campaign"
    )
    text = serializers.CharField()
    responses = serializers.ListField(child=serializers.IntegerField())
    campaign = serializers.IntegerField(allow_null=True)
    dataset = serializers.IntegerField(allow_null=True)
    extra = serializers.IntegerField(
        allow_null=True, help_text="send_back_*: post again with this extra"
    )
    url = serializers.SerializerMethodField(
        help_text="the page to act on (resume_campaign: the form action); null for "
        "a send-back, made with this API"
    )

    class Meta:
        ref_name = "AnalyticsReannotationNextStep"

    def get_url(self, step) -> str | None:
        return step_url(step, project=self.context["project"])


class _ReasonSerializer(serializers.Serializer):
    code = serializers.CharField(
        help_text="already_open, no_annotator_left, reopened_partly, at_cap, "
        "not_in_campaign, quality_task, campaign_finished or campaign_paused"
    )
    responses = serializers.ListField(child=serializers.IntegerField())
    text = serializers.CharField()
    next_steps = _NextStepSerializer(many=True)

    class Meta:
        ref_name = "AnalyticsReannotationReason"


class ReannotationCreateApi(APIView):
    """Send responses of a campaign back for re-annotation: ask for at least `extra` more
    annotations (1-5) than each has submitted now. Repeating the request changes nothing
    more (docs/DISAGREEMENTS.md). 200 with the outcome per response; 400 with the problems
    by field (nothing changed)."""

    class InputSerializer(serializers.Serializer):
        campaign = serializers.IntegerField(min_value=1)
        response_ids = serializers.ListField(
            child=serializers.IntegerField(min_value=1),
            allow_empty=False,
            max_length=MAX_RESPONSES,
        )
        extra = serializers.IntegerField(min_value=MIN_EXTRA, max_value=MAX_EXTRA)

        class Meta:
            ref_name = "AnalyticsReannotationInput"

    class OutputSerializer(serializers.Serializer):
        class OutcomeSerializer(serializers.Serializer):
            response = serializers.IntegerField()
            outcome = serializers.CharField(
                help_text="reopened, reopened_partly, already_open, no_annotator_left, "
                "at_cap, not_in_campaign or campaign_finished"
            )
            task = serializers.IntegerField(allow_null=True)
            overlap_before = serializers.IntegerField(allow_null=True)
            overlap_after = serializers.IntegerField(allow_null=True)
            submitted = serializers.IntegerField(allow_null=True)
            eligible = serializers.IntegerField(
                allow_null=True, help_text="pool annotators who could still be served it"
            )

            class Meta:
                ref_name = "AnalyticsReannotationOutcome"

        request = serializers.IntegerField(source="request.pk")
        campaign = serializers.IntegerField(source="request.campaign_id")
        extra = serializers.IntegerField(source="request.extra")
        reopened = serializers.IntegerField(source="request.reopened")
        campaign_status = serializers.CharField()
        campaign_overlap = serializers.IntegerField(source="request.campaign_overlap_after")
        outcomes = OutcomeSerializer(many=True)
        reasons = _ReasonSerializer(
            many=True,
            help_text="why responses got no new annotation (or fewer), and what would work",
        )

        class Meta:
            ref_name = "AnalyticsReannotation"

    @extend_schema(request=InputSerializer, responses=OutputSerializer)
    def post(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        given = self.InputSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        campaign = (
            campaign_list_for_reannotation(project=project).filter(pk=data["campaign"]).first()
        )
        if campaign is None:
            raise serializers.ValidationError(
                {"campaign": ["no campaign of this project with tasks has this id"]}
            )
        try:
            result = responses_reannotate(
                campaign=campaign,
                response_ids=data["response_ids"],
                extra=data["extra"],
                requested_by=request.user,
            )
        except DjangoValidationError as exc:
            problems = (
                exc.message_dict
                if hasattr(exc, "error_dict")
                else {"non_field_errors": exc.messages}
            )
            raise serializers.ValidationError(problems) from None
        return ApiResponse(self.OutputSerializer(result, context={"project": project}).data)
