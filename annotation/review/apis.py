"""REST API of review (docs/REVIEW.md): a campaign's review queue, and adjudicating one
response on one skill. Reviewers, researchers and admins of the project (404 for
non-members, 403 for annotators)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation import access
from annotation.api_parsers import StrictJSONParser
from annotation.models import Skill
from annotation.review import selectors as rs
from annotation.review import services
from flaskweb.api_errors import ApiPagination


class QueueReasonSerializer(serializers.Serializer):
    kind = serializers.CharField()
    skill = serializers.CharField()
    scores = serializers.IntegerField()
    low = serializers.IntegerField(allow_null=True)
    high = serializers.IntegerField(allow_null=True)
    na = serializers.IntegerField()
    misses = serializers.IntegerField()
    adjudicated = serializers.BooleanField()
    text = serializers.CharField()

    class Meta:
        ref_name = "ReviewQueueReason"


class QueueEntrySerializer(serializers.Serializer):
    response = serializers.IntegerField(source="response_id")
    item = serializers.CharField(source="item_external_id")
    pending = serializers.BooleanField()
    reasons = QueueReasonSerializer(many=True)

    class Meta:
        ref_name = "ReviewQueueEntry"


class ReviewQueueApi(APIView):
    """The campaign's review queue, pending entries first (paginated)."""

    pagination_class = ApiPagination

    @extend_schema(responses=QueueEntrySerializer(many=True))
    def get(self, request, pk: int):
        campaign, _ = access.campaign_get_for_reviewer(request.user, pk)
        paginator = self.pagination_class()
        queue: Any = rs.review_queue(campaign=campaign)  # a list paginates like a queryset
        page: list[rs.QueueEntry] = paginator.paginate_queryset(queue, request, view=self) or []
        rs.queue_entries_describe(page)
        return paginator.get_paginated_response(QueueEntrySerializer(page, many=True).data)


class AdjudicationApi(APIView):
    """Record the adjudicated score of the response on one skill (idempotent: the same
    value and note again change nothing and answer `changed: false`)."""

    parser_classes = [StrictJSONParser]

    class InputSerializer(serializers.Serializer):
        skill_id = serializers.IntegerField(min_value=1)
        value = serializers.CharField(max_length=3, help_text='1-5, or "na"')
        note = serializers.CharField(max_length=services.MAX_NOTE, required=False, default="")

        class Meta:
            ref_name = "AdjudicationInput"

    class OutputSerializer(serializers.Serializer):
        response = serializers.IntegerField(source="score.response_id")
        skill_id = serializers.IntegerField(source="score.skill_id")
        score = serializers.IntegerField(source="score.score", allow_null=True)
        is_na = serializers.BooleanField(source="score.is_na")
        note = serializers.CharField(source="score.note")
        changed = serializers.BooleanField()

        class Meta:
            ref_name = "AdjudicationOutput"

    @extend_schema(request=InputSerializer, responses=OutputSerializer)
    def post(self, request, pk: int, response_id: int):
        campaign, _ = access.campaign_get_for_reviewer(request.user, pk)
        response = rs.response_for_review(campaign=campaign, response_id=response_id)
        if response is None:
            raise Http404("no such response in this campaign")
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        skill = Skill.objects.filter(pk=data.validated_data["skill_id"]).first()
        if skill is None:
            raise serializers.ValidationError({"skill_id": ["no such skill"]})
        try:
            result = services.adjudicated_score_set(
                campaign=campaign,
                response=response,
                skill=skill,
                value=data.validated_data["value"],
                note=data.validated_data["note"],
                reviewer=request.user,
            )
        except ValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from exc
        return ApiResponse(self.OutputSerializer(result).data)
