"""The analytics REST API: the same report as `manage.py analytics_report`."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from analytics.report.selectors import DEFAULT_RESAMPLES, MAX_RESAMPLES, project_report
from annotation.access import project_get_for_staff


class AnalyticsReportApi(APIView):
    """Agreement among annotators and human-judge correlation, per skill and judge
    (docs/ANALYTICS.md describes every key). Project researchers and admins only."""

    class FilterSerializer(serializers.Serializer):
        skill = serializers.ListField(
            child=serializers.CharField(), required=False, default=list, help_text="skill names"
        )
        judge = serializers.ListField(
            child=serializers.CharField(), required=False, default=list, help_text="judge names"
        )
        system = serializers.ListField(
            child=serializers.CharField(), required=False, default=list, help_text="models"
        )
        domain = serializers.ListField(
            child=serializers.CharField(), required=False, default=list, help_text="domains"
        )
        difficulty = serializers.ListField(
            child=serializers.IntegerField(min_value=1, max_value=5),
            required=False,
            default=list,
            help_text="difficulty levels, 1 to 5",
        )
        resamples = serializers.IntegerField(
            min_value=0,
            max_value=MAX_RESAMPLES,
            required=False,
            default=DEFAULT_RESAMPLES,
            help_text="bootstrap resamples (0: no intervals)",
        )
        breakdowns = serializers.CharField(
            required=False,
            allow_blank=True,
            default="1",
            help_text="0 or false: leave the per-domain, difficulty and system breakdowns out",
        )

        class Meta:
            ref_name = "AnalyticsReportFilters"

    @extend_schema(parameters=[FilterSerializer], responses=OpenApiTypes.OBJECT)
    def get(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        params = self.FilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        report = project_report(
            resamples=data["resamples"],
            systems=data["system"] or None,
            domains=data["domain"] or None,
            difficulties=data["difficulty"] or None,
            with_breakdowns=data["breakdowns"] not in ("0", "false"),
            project=project,
            skills=data["skill"] or None,
            judges=data["judge"] or None,
        )
        return ApiResponse(report)
