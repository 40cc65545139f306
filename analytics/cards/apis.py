"""The judge leaderboard across projects and evaluation cards, as JSON (both read stored
report snapshots only).

- GET /api/v1/analytics/judge-leaderboard?level=&skill=&configuration=&shared=: the rows
  of the projects the caller is a researcher or admin of (site admins: all); 403 with none.
- GET /api/v1/projects/SLUG/analytics/snapshots/ID/card?judge=NAME[&format=md]: the judge's
  evaluation card built from that snapshot (JSON; `format=md` for the Markdown download).
"""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from analytics.cards import selectors, views
from annotation.access import project_get_for_staff


class JudgeLeaderboardApi(APIView):
    """Each judge configuration (by fingerprint) against people, per skill, on every
    project of the caller's it ran on: from each project's latest done default snapshot."""

    @extend_schema(
        parameters=[
            OpenApiParameter("level", str, enum=list(selectors.LEVELS)),
            OpenApiParameter("skill", str, many=True),
            OpenApiParameter("configuration", str, description="a fingerprint or its prefix"),
            OpenApiParameter("shared", bool, description="only configurations on 2+ projects"),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request):
        form, board = views.leaderboard_for(request.user, request.query_params or None)
        if form.is_bound and not form.is_valid():
            raise ValidationError(form.errors.get_json_data())
        return ApiResponse(
            {
                "level": board.level,
                "configurations": [
                    {"fingerprint": c.fingerprint, "label": c.label, "projects": c.projects}
                    for c in board.configurations
                ],
                "skills": board.skills,
                "projects_without_report": board.without_snapshot,
                "rows": [row.as_dict() for row in board.rows],
            }
        )


class JudgeCardApi(APIView):
    """A judge's evaluation card built from one finished report snapshot."""

    @extend_schema(
        parameters=[
            OpenApiParameter("snapshot_id", int, OpenApiParameter.PATH),
            OpenApiParameter("judge", str, required=True),
            OpenApiParameter("format", str, enum=list(views.FORMATS)),
        ],
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            (200, "text/markdown"): OpenApiTypes.STR,
        },
    )
    def get(self, request, slug: str, snapshot_id: int) -> HttpResponse:
        project = project_get_for_staff(request.user, slug)
        judge = request.query_params.get("judge", "")
        fmt = request.query_params.get("format", "json")
        if not judge or len(judge) > 200:
            raise ValidationError({"judge": ["a judge name (at most 200 characters) is required"]})
        if fmt not in views.FORMATS:
            raise ValidationError({"format": ["md or json"]})
        snapshot = selectors.snapshot_done_get(project=project, snapshot_id=snapshot_id)
        if snapshot is None:
            raise NotFound("no such finished report snapshot")
        card = selectors.card_build(project=project, snapshot=snapshot, judge=judge)
        if card is None:
            raise NotFound("no such judge in this snapshot")
        response = HttpResponse(views.card_document(card, fmt), content_type=views.FORMATS[fmt])
        filename = views.card_filename(project, judge, snapshot.pk, fmt)
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response
