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


class CampaignParticipantListApi(APIView):
    """A campaign's study participants, newest first: account, platform ids, state, link,
    tasks submitted and times (docs/CROWD.md)."""

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
        link_id = serializers.IntegerField()
        tasks_done = serializers.IntegerField()
        consented_at = serializers.DateTimeField(allow_null=True)
        finished_at = serializers.DateTimeField(allow_null=True)
        created_at = serializers.DateTimeField()

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
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)
