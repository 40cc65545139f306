"""The analytics REST API: the same report as `manage.py analytics_report`."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from analytics.selectors import DEFAULT_RESAMPLES, MAX_RESAMPLES, project_report
from judging.access import project_get_for_staff


class AnalyticsReportApi(APIView):
    """Agreement among annotators and human-judge correlation, per skill and judge
    (docs/ANALYTICS.md describes every key). Project researchers and admins only."""

    @extend_schema(
        parameters=[
            OpenApiParameter("skill", str, many=True, required=False, description="skill names"),
            OpenApiParameter("judge", str, many=True, required=False, description="judge names"),
            OpenApiParameter(
                "resamples",
                int,
                required=False,
                description=f"bootstrap resamples (0-{MAX_RESAMPLES}; 0: no intervals)",
            ),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        raw = request.query_params.get("resamples", str(DEFAULT_RESAMPLES))
        if not raw.isdigit() or int(raw) > MAX_RESAMPLES:
            raise serializers.ValidationError(
                {"resamples": [f"a whole number from 0 to {MAX_RESAMPLES}"]}
            )
        difficulties = request.query_params.getlist("difficulty")
        if any(d not in {"1", "2", "3", "4", "5"} for d in difficulties):
            raise serializers.ValidationError({"difficulty": ["1 to 5"]})
        report = project_report(
            resamples=int(raw),
            systems=request.query_params.getlist("system") or None,
            domains=request.query_params.getlist("domain") or None,
            difficulties=[int(d) for d in difficulties] or None,
            with_breakdowns=request.query_params.get("breakdowns", "1") not in ("0", "false"),
            project=project,
            skills=request.query_params.getlist("skill") or None,
            judges=request.query_params.getlist("judge") or None,
        )
        return ApiResponse(report)
