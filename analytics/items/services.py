"""Writes from the drill-down page (docs/DRILL_DOWN.md): make the selected responses gold
tasks of their campaign, their known scores the people's rounded consensus. The send-back
for more annotation is the disagreement explorer's (annotation.services.reannotation)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction

from analytics.items.selectors import level_of
from annotation.models import Campaign, Project
from annotation.selectors import (
    human_score_lists_for_responses,
    response_get_for_project,
    skill_list_for_project,
)
from annotation.services.gold import gold_task_set


@dataclass(frozen=True)
class GoldOutcome:
    response_id: int
    added: bool
    text: str


@transaction.atomic
def items_gold_add(
    *, project: Project, campaign: Campaign, response_ids: Sequence[int], skills: Sequence[str]
) -> list[GoldOutcome]:
    """Make each response a gold task of `campaign` whose known score per skill is the
    rounded consensus (half up, as the confusion matrix rounds; N/A when every score is
    N/A) of the campaign's counted human scores on it, for `skills` (every
    skill they scored when empty). Repeating it sets the same scores again (gold_task_set
    replaces a task's known scores), so it is idempotent. A response that cannot be made
    gold says why and changes nothing."""
    skill_ids = {s.name: s.pk for s in skill_list_for_project(project=project)}
    scores = human_score_lists_for_responses(response_ids=response_ids)
    out = []
    for rid in response_ids:
        values: dict[str, list[int | None]] = defaultdict(list)
        for h in scores.get(rid, []):
            if h.campaign_id == campaign.pk and h.counted and (not skills or h.skill in skills):
                values[h.skill].append(h.score)
        if not values:
            out.append(
                GoldOutcome(rid, False, f"no counted human score in {campaign.name}: not added")
            )
            continue
        known: dict[int, int | None] = {}
        for skill, given in values.items():
            scored = [v for v in given if v is not None]
            level = level_of(sum(scored) / len(scored) if scored else None)
            known[skill_ids[skill]] = None if level == "na" else int(level)
        try:
            with transaction.atomic():
                response = response_get_for_project(project=project, response_id=rid)
                gold_task_set(campaign=campaign, response=response, scores=known)
        except ValidationError as exc:
            out.append(GoldOutcome(rid, False, f"not added: {' '.join(exc.messages)}"))
            continue
        shown = ", ".join(
            f"{name} {'N/A' if known[skill_ids[name]] is None else known[skill_ids[name]]}"
            for name in sorted(values)
        )
        out.append(GoldOutcome(rid, True, f"gold in {campaign.name} with {shown}"))
    return out
