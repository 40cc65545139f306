"""Reads about a single response's judge scores for the researchers' response page (in
analytics): every score any of the project's judges gave it, in any run, as plain rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from annotation.models import Project
from judging.models import JudgeScore


@dataclass(frozen=True)
class JudgeScoreRow:
    judge: str
    run_id: int
    run_status: str
    judgment_id: int
    sample_index: int
    skill: str
    score: int | None  # None: N/A (or a baseline that gave no score)
    raw_value: float | None  # a baseline metric's own value
    feedback: str  # the judge's rationale
    created_at: datetime


def judge_score_list_for_response(*, project: Project, response_id: int) -> list[JudgeScoreRow]:
    """Every judge score of the response by the project's judges: by judge, newest run
    first, then sample and skill order. One query."""
    rows = (
        JudgeScore.objects.filter(response_id=response_id, run__judge__project=project)
        .order_by(
            "run__judge__name",
            "-run_id",
            "judgment__sample_index",
            "skill__order",
            "skill__name",
        )
        .values_list(
            "run__judge__name",
            "run_id",
            "run__status",
            "judgment_id",
            "judgment__sample_index",
            "skill__name",
            "score",
            "raw_value",
            "feedback",
            "judgment__created_at",
        )
    )
    return [JudgeScoreRow(*row) for row in rows]
