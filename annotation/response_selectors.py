"""Reads about single responses for the researchers' pages (the disagreement explorer and
the response page in analytics): a response with its item, every human score of it, short
excerpts of many responses' instructions, and which campaigns score which responses.
Plain rows (dataclasses, dicts), never lazy model relations, except the one Response the
response page shows."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet
from django.db.models.functions import Substr

from annotation.models import (
    Campaign,
    CampaignStatus,
    HumanScore,
    Project,
    Response,
    Task,
    TaskKind,
)

#: Characters of an instruction shown in a list (the database cuts it: instructions can
#: be long, and a page lists fifty).
EXCERPT_CHARS = 160


def response_get_for_project(*, project: Project, response_id: int) -> Response:
    """The response with its item and dataset, if it belongs to one of the project's
    datasets; raises Response.DoesNotExist otherwise."""
    return Response.objects.select_related("item__dataset").get(
        pk=response_id, item__dataset__project=project
    )


@dataclass(frozen=True)
class HumanScoreRow:
    annotator: str
    skill: str
    score: int | None  # None: N/A
    rationale: str
    time_ms: int | None  # time on this skill, as the scoring page measured it
    active_ms: int | None  # focused time on the whole task (all its skills)
    campaign_id: int
    campaign: str
    task_kind: str  # normal, gold, attention
    assignment_kind: str  # normal, repeat
    status: str  # of the assignment: submitted (or expired/skipped for a late edit)
    submitted_at: datetime | None
    created_at: datetime

    @property
    def active_seconds(self) -> float | None:
        return None if self.active_ms is None else self.active_ms / 1000

    @property
    def time_seconds(self) -> float | None:
        return None if self.time_ms is None else self.time_ms / 1000

    @property
    def counted(self) -> bool:
        """Whether analytics counts it (normal task, normal submitted assignment)."""
        return (
            self.task_kind == TaskKind.NORMAL
            and self.assignment_kind == "normal"
            and self.status == "submitted"
        )


def human_score_list_for_response(*, response_id: int) -> list[HumanScoreRow]:
    """Every human score of the response, in every campaign (gold, attention checks and
    hidden repeats included, marked), by skill order, then time. One query."""
    rows = (
        HumanScore.objects.filter(response_id=response_id)
        .order_by("skill__order", "skill__name", "created_at", "pk")
        .values_list(
            "annotator__username",
            "skill__name",
            "score",
            "rationale",
            "time_ms",
            "assignment__active_ms",
            "campaign_id",
            "campaign__name",
            "assignment__task__kind",
            "assignment__kind",
            "assignment__status",
            "assignment__submitted_at",
            "created_at",
        )
    )
    return [HumanScoreRow(*row) for row in rows]


def response_excerpts(*, response_ids: Iterable[int]) -> dict[int, dict]:
    """response id -> {"item_external_id", "instruction"} (the first EXCERPT_CHARS
    characters of the item's instruction, and whether it was cut). One query."""
    rows = (
        Response.objects.filter(pk__in=list(response_ids))
        .annotate(excerpt=Substr("item__instruction", 1, EXCERPT_CHARS + 1))
        .values_list("pk", "item__external_id", "excerpt")
    )
    return {
        pk: {
            "item_external_id": external_id,
            "instruction": excerpt[:EXCERPT_CHARS],
            "cut": len(excerpt) > EXCERPT_CHARS,
        }
        for pk, external_id, excerpt in rows
    }


def campaigns_for_responses(
    *, project: Project, response_ids: Iterable[int]
) -> dict[int, list[tuple[int, str]]]:
    """response id -> [(campaign id, name)] of the project's started campaigns (not drafts)
    that have a normal task for it, by campaign name. One query."""
    rows = (
        Task.objects.filter(
            campaign__project=project,
            kind=TaskKind.NORMAL,
            response_id__in=list(response_ids),
        )
        .exclude(campaign__status=CampaignStatus.DRAFT)
        .order_by("campaign__name", "campaign_id")
        .values_list("response_id", "campaign_id", "campaign__name")
    )
    found: dict[int, list[tuple[int, str]]] = {}
    for response_id, campaign_id, name in rows:
        found.setdefault(response_id, []).append((campaign_id, name))
    return found


def campaign_list_for_reannotation(*, project: Project) -> QuerySet[Campaign]:
    """The project's campaigns that have tasks (every status but draft), by name."""
    return (
        Campaign.objects.filter(project=project)
        .exclude(status=CampaignStatus.DRAFT)
        .order_by("name", "pk")
    )


def project_system_names(*, project: Project) -> list[str]:
    """The systems (model names) that answered items of the project's datasets, by name."""
    return list(
        Response.objects.filter(item__dataset__project=project)
        .order_by("model_name")
        .values_list("model_name", flat=True)
        .distinct()
    )
