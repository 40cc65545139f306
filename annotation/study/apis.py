"""The study API for a campaign's staff (mounted under /api/v1/annotation/): its
participants with their platform ids, e.g. to approve or pay them on the platform."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.views import APIView

from annotation import access
from annotation.models import ParticipantState, Platform
from annotation.study import selectors as ss
from flaskweb.api_errors import ApiPagination


class FlagSerializer(serializers.Serializer):
    code = serializers.CharField()
    reason = serializers.CharField()


class CampaignParticipantListApi(APIView):
    """A campaign's study participants, newest first: account, platform ids, state (and why
    it ended), link, tasks submitted, times, quality figures with their n, flags and the
    suggested decision (docs/CROWD.md, docs/QUALITY.md)."""

    pagination_class = ApiPagination

    class FilterSerializer(serializers.Serializer):
        state = serializers.ChoiceField(choices=ParticipantState.choices, required=False)

    class OutputSerializer(serializers.Serializer):
        username = serializers.CharField()
        platform = serializers.ChoiceField(choices=Platform.choices)
        worker_id = serializers.CharField()
        study_id = serializers.CharField(help_text="Prolific STUDY_ID or MTurk hitId")
        session_id = serializers.CharField(help_text="Prolific SESSION_ID or MTurk assignmentId")
        state = serializers.ChoiceField(choices=ParticipantState.choices)
        end_reason = serializers.CharField(
            help_text="why the study ended: quota, no_task, qualification, quality, left, "
            "declined (empty while working)"
        )
        link_id = serializers.IntegerField()
        tasks_done = serializers.IntegerField()
        consented_at = serializers.DateTimeField(allow_null=True)
        finished_at = serializers.DateTimeField(allow_null=True)
        created_at = serializers.DateTimeField()
        decision = serializers.ChoiceField(
            choices=list(ss.DECISIONS.items()), help_text="the suggested decision"
        )
        decision_reason = serializers.CharField()
        active_seconds = serializers.FloatField()
        median_seconds = serializers.FloatField(allow_null=True)
        speed_ratio = serializers.FloatField(allow_null=True)
        gold_correct = serializers.IntegerField()
        gold_n = serializers.IntegerField()
        attention_failed = serializers.IntegerField()
        attention_n = serializers.IntegerField()
        agreement = serializers.FloatField(allow_null=True)
        agreement_n = serializers.IntegerField()
        competence = serializers.FloatField(allow_null=True)
        straightline_share = serializers.FloatField(allow_null=True)
        scores_n = serializers.IntegerField()
        flags = FlagSerializer(many=True)

    @extend_schema(
        operation_id="campaign_participants_list",
        parameters=[FilterSerializer],
        responses=OutputSerializer(many=True),
    )
    def get(self, request, pk: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        params = self.FilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        rows = ss.participant_rows(campaign=campaign, state=params.validated_data.get("state", ""))
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self) or []
        page = ss.participant_rows_with_quality(campaign=campaign, rows=list(page))
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)
