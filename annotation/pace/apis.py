"""The campaign's cost estimate as JSON (GET /api/v1/annotation/campaigns/<id>/cost/), for
the campaign's admins and researchers; see annotation/pace/selectors.py for its terms."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation import access
from annotation.pace.selectors import campaign_cost_estimate
from flaskweb.api_errors import ErrorSerializer


class CampaignCostApi(APIView):
    """The cost per 1,000 judgments (one judgment: one response scored on its skills, one
    submitted task) and per 1,000 skill scores, from the median focused time per judgment
    and the campaign's hourly wage; the money figures are null without a wage or a timed
    judgment. Amounts are decimal strings in the campaign's currency."""

    class OutputSerializer(serializers.Serializer):
        judgments_timed = serializers.IntegerField(
            help_text="accepted submitted tasks with a measured focused time"
        )
        median_active_ms = serializers.IntegerField(allow_null=True)
        skill_scores_per_judgment = serializers.CharField(allow_null=True)
        hourly_wage = serializers.CharField(allow_null=True)
        currency = serializers.CharField()
        cost_per_1000_judgments = serializers.CharField(allow_null=True)
        cost_per_1000_skill_scores = serializers.CharField(allow_null=True)

        class Meta:
            ref_name = "CampaignCost"

    @extend_schema(responses={200: OutputSerializer, 403: ErrorSerializer, 404: ErrorSerializer})
    def get(self, request, pk: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        return ApiResponse(campaign_cost_estimate(campaign=campaign).as_json())
