"""REST API of the bias probes: start a probe run of a finished run, list a run's probe
runs, read and set a project's model families. Same services and access rules as the
pages (non-members 404, annotators 403)."""

from __future__ import annotations

from decimal import Decimal

from django.core.exceptions import ValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.access import project_get_for_staff
from flaskweb.api_errors import service_error
from judging import access
from judging.apis import RunOutputSerializer
from judging.models import ProbeKind
from judging.probes.selectors import families_for_project, probe_runs_of
from judging.services.probes import families_set, probe_run_create


class ProbeInputSerializer(serializers.Serializer):
    probe = serializers.ChoiceField(choices=ProbeKind.choices)
    params = serializers.DictField(
        required=False,
        help_text='the probe\'s parameters: "limit" (a sample of n responses) for any; '
        '"share" (truncate), "order" (rubric_order: reverse|rotate), "target" (bandwagon: '
        'unpreferred|1|2; distraction: challenger|anchor), "sentence" (distraction: 0-2)',
    )
    budget = serializers.DecimalField(
        max_digits=14,
        decimal_places=6,
        min_value=Decimal("0.000001"),
        required=False,
        allow_null=True,
    )

    class Meta:
        ref_name = "JudgingProbeCreate"


class ProbeRunApi(APIView):
    """GET: the probe runs made from this run. POST: start a probe run of this finished,
    non-probe run (pointwise probes on a pointwise run, bandwagon and distraction on a
    pairwise one)."""

    @extend_schema(responses=RunOutputSerializer(many=True))
    def get(self, request, pk: int):
        run = access.run_get_for_staff(request.user, pk)
        runs = probe_runs_of(run=run).select_related("judge")
        return ApiResponse(RunOutputSerializer(runs, many=True, context={}).data)

    @extend_schema(request=ProbeInputSerializer, responses={201: RunOutputSerializer})
    def post(self, request, pk: int):
        run = access.run_get_for_staff(request.user, pk)
        serializer = ProbeInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            probe = probe_run_create(
                base_run=run,
                probe=data["probe"],
                params=data.get("params") or {},
                budget=data.get("budget"),
                created_by=request.user,
            )
        except ValidationError as exc:
            raise service_error(exc) from None
        return ApiResponse(
            RunOutputSerializer(probe, context={}).data, status=status.HTTP_201_CREATED
        )


class FamiliesSerializer(serializers.Serializer):
    systems = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=100),
        required=False,
        help_text="system (model name) -> family; blank forgets it",
    )
    judges = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=100),
        required=False,
        help_text="judge name -> family; blank forgets it",
    )

    class Meta:
        ref_name = "JudgingModelFamilies"


class FamiliesApi(APIView):
    """The model family of each system and judge of the project (the self-preference
    figure compares a judge's scores of its own family's responses with people's).
    Family names: letters, digits, '.', '_' and '-', stored in lower case."""

    @extend_schema(responses=FamiliesSerializer)
    def get(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        systems, judges = families_for_project(project=project)
        return ApiResponse({"systems": systems, "judges": judges})

    @extend_schema(request=FamiliesSerializer, responses=FamiliesSerializer)
    def patch(self, request, slug: str):
        """Set the families named (blank: forget); the others stay as they are."""
        project = project_get_for_staff(request.user, slug)
        serializer = FamiliesSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            families_set(
                project=project,
                systems=dict(serializer.validated_data.get("systems", {})),
                judges=dict(serializer.validated_data.get("judges", {})),
            )
        except ValidationError as exc:
            raise service_error(exc) from None
        systems, judges = families_for_project(project=project)
        return ApiResponse({"systems": systems, "judges": judges})
