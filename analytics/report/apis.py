"""The analytics REST API: the report `manage.py analytics_report` prints, served from the
latest stored snapshot of the same params (analytics/report/snapshots.py), never computed
inside the request.

- GET  .../analytics/report?filters: 200 with the report and a "snapshot" key (its state,
  when it was computed, what changed since); 202 with only "snapshot" while the first one
  for these params computes (poll its URL).
- POST .../analytics/report/refresh (the same params, in the query or body): 202, the
  snapshot computing (the one already computing for these params, if any).
- GET  .../analytics/snapshots/ID: a snapshot's state and progress.
"""

from __future__ import annotations

import json

from django.http import HttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, Throttled
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from analytics.models import ReportSnapshot
from analytics.report import snapshots
from analytics.report.selectors import DEFAULT_RESAMPLES, MAX_RESAMPLES
from annotation.access import project_get_for_staff


def _names(help_text: str = "") -> serializers.ListField:
    """A repeatable name parameter (skill, judge, model, domain)."""
    return serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        default=list,
        help_text=help_text,
    )


class ReportParamsSerializer(serializers.Serializer):
    skill = _names("skill names")
    judge = _names("judge names")
    system = _names("models")
    domain = _names("domains")
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
    compare_a = _names(
        "judge pairs to compare besides the default ones: compare_a[i] with compare_b[i]"
    )
    compare_b = _names()
    compare_all = serializers.BooleanField(
        required=False, default=False, help_text="compare every two judges (slow with many)"
    )
    human = serializers.ChoiceField(
        choices=snapshots.HUMAN_SCORES,
        required=False,
        default="raw",
        help_text="raw: the people's own scores; adjudicated: a reviewer's adjudicated score "
        "in place of the people's where there is one (agreement stays on the raw scores)",
    )

    class Meta:
        ref_name = "AnalyticsReportParams"

    def validate(self, attrs):
        if len(attrs["compare_a"]) != len(attrs["compare_b"]):
            raise serializers.ValidationError(
                {"compare_b": "give one compare_b for every compare_a"}
            )
        return attrs

    def snapshot_params(self) -> dict:
        data = self.validated_data
        return snapshots.snapshot_params(
            skills=data["skill"],
            judges=data["judge"],
            systems=data["system"],
            domains=data["domain"],
            difficulties=data["difficulty"],
            resamples=data["resamples"],
            compare=list(zip(data["compare_a"], data["compare_b"], strict=True)),
            compare_all=data["compare_all"],
            human_scores=data["human"],
        )


def _status(request, project, snapshot: ReportSnapshot, changes=None) -> dict:
    found = snapshots.snapshot_status(snapshot, changes)
    found["url"] = request.build_absolute_uri(
        reverse("analytics-api:report-snapshot", args=[project.slug, snapshot.pk])
    )
    return found


def _request(request, project, params) -> ReportSnapshot:
    try:
        snapshot, _created = snapshots.snapshot_request(
            project=project, params=params, user=request.user
        )
    except snapshots.SnapshotRefused as exc:
        raise Throttled(detail=str(exc)) from exc
    return snapshot


class AnalyticsReportApi(APIView):
    """Agreement among annotators and human-judge correlation, per skill and judge
    (docs/ANALYTICS.md describes every key), from the latest stored snapshot of these
    params; 202 while the first one computes. Project researchers and admins only."""

    class FilterSerializer(ReportParamsSerializer):
        breakdowns = serializers.CharField(
            required=False,
            allow_blank=True,
            default="1",
            help_text="0 or false: leave the per-domain, difficulty and system breakdowns out",
        )

        class Meta:
            ref_name = "AnalyticsReportFilters"

    @extend_schema(
        parameters=[FilterSerializer],
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="the report and its snapshot"),
            202: OpenApiResponse(OpenApiTypes.OBJECT, description="computing: the snapshot"),
            429: OpenApiResponse(OpenApiTypes.OBJECT, description="too many computing"),
        },
    )
    def get(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        params = self.FilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        wanted = params.snapshot_params()
        key = snapshots.snapshot_key(wanted)
        done = snapshots.snapshot_latest_done(project=project, key=key)
        if done is None:
            pending = snapshots.snapshot_in_flight(project=project, key=key) or _request(
                request, project, wanted
            )
            return ApiResponse({"snapshot": _status(request, project, pending)}, status=202)
        changes = snapshots.snapshot_freshness(project=project, snapshot=done)
        status_json = json.dumps(_status(request, project, done, changes)).encode()
        text = snapshots.snapshot_part_text(done, "report") or b"{}"
        if params.validated_data["breakdowns"] in ("0", "false"):
            report = json.loads(text)
            report.pop("breakdowns", None)
            text = json.dumps(report).encode()
        # the stored JSON as it is, with the snapshot's state added as its last key
        body = text[:-1] + (b',"snapshot":' if len(text) > 2 else b'"snapshot":') + status_json
        return HttpResponse(body + b"}", content_type="application/json")


class AnalyticsReportRefreshApi(APIView):
    """Compute the report of these params again (202 with the snapshot computing; the one
    already computing for them if any). 429 when the project has too many computing."""

    @extend_schema(
        request=ReportParamsSerializer,
        parameters=[ReportParamsSerializer],
        responses={
            202: OpenApiResponse(OpenApiTypes.OBJECT, description="the snapshot computing"),
            429: OpenApiResponse(OpenApiTypes.OBJECT, description="too many computing"),
        },
    )
    def post(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        source = request.data if request.data else request.query_params
        params = ReportParamsSerializer(data=source)
        params.is_valid(raise_exception=True)
        snapshot = _request(request, project, params.snapshot_params())
        return ApiResponse(
            {"snapshot": _status(request, project, snapshot)}, status=status.HTTP_202_ACCEPTED
        )


class ReportSnapshotApi(APIView):
    """One report snapshot's state and progress (the report itself: the report URL with
    the same params)."""

    @extend_schema(
        parameters=[OpenApiParameter("snapshot_id", int, OpenApiParameter.PATH)],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request, slug: str, snapshot_id: int):
        project = project_get_for_staff(request.user, slug)
        snapshot = snapshots.snapshot_get(project=project, snapshot_id=snapshot_id)
        if snapshot is None:
            raise NotFound("no such report snapshot")
        return ApiResponse({"snapshot": _status(request, project, snapshot)})
