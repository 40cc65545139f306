"""The cost estimate researchers read on the campaign page and in the API.

A **judgment** is one response scored on all the skills its task asks: one submitted task
(an accepted assignment: submitted, normal, of a normal task, the rule analytics counts).
A **skill score** is one of the scores in it (a task asks one to a few skills). The cost of
a judgment is the median focused time of the campaign's judgments (`Assignment.active_ms`,
measured by the scoring page; judgments without a measured time are left out) paid at the
campaign's hourly wage. The median, not the mean: one annotator who leaves a tab focused
over lunch moves a mean by minutes and a median not at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import Count

from annotation.models import Assignment, Campaign, HumanScore

MS_PER_HOUR = Decimal(3_600_000)
CENT = Decimal("0.01")


@dataclass(frozen=True)
class CostEstimate:
    judgments: int  # accepted assignments with a measured time
    median_ms: int | None  # None without any
    skill_scores_per_judgment: Decimal | None  # mean over the accepted assignments
    hourly_wage: Decimal | None
    currency: str

    @property
    def per_judgment(self) -> Decimal | None:
        if self.median_ms is None or self.hourly_wage is None:
            return None
        return self.hourly_wage * Decimal(self.median_ms) / MS_PER_HOUR

    @property
    def per_1000_judgments(self) -> Decimal | None:
        cost = self.per_judgment
        return None if cost is None else (cost * 1000).quantize(CENT, ROUND_HALF_UP)

    @property
    def per_1000_skill_scores(self) -> Decimal | None:
        cost = self.per_judgment
        if cost is None or not self.skill_scores_per_judgment:
            return None
        return (cost * 1000 / self.skill_scores_per_judgment).quantize(CENT, ROUND_HALF_UP)

    @property
    def judgments_per_hour(self) -> Decimal | None:
        if not self.median_ms:
            return None
        return (MS_PER_HOUR / Decimal(self.median_ms)).quantize(Decimal("0.1"), ROUND_HALF_UP)

    def as_json(self) -> dict:
        def text(value: Decimal | None) -> str | None:
            return None if value is None else str(value)

        return {
            "judgments_timed": self.judgments,
            "median_active_ms": self.median_ms,
            "skill_scores_per_judgment": text(self.skill_scores_per_judgment),
            "hourly_wage": text(self.hourly_wage),
            "currency": self.currency,
            "cost_per_1000_judgments": text(self.per_1000_judgments),
            "cost_per_1000_skill_scores": text(self.per_1000_skill_scores),
        }


def median(values: list[int]) -> int | None:
    """The median of sorted `values`, rounded to the nearest integer (half up)."""
    n = len(values)
    if n == 0:
        return None
    if n % 2:
        return values[n // 2]
    return (values[n // 2 - 1] + values[n // 2] + 1) // 2


def campaign_cost_estimate(*, campaign: Campaign) -> CostEstimate:
    """The estimate from the campaign's judgments so far, in three small queries (a count,
    the one or two middle times, the skill scores' count) whatever the campaign's size."""
    timed = (
        Assignment.objects.accepted()
        .filter(campaign=campaign, active_ms__gt=0)
        .order_by("active_ms")
        .values_list("active_ms", flat=True)
    )
    n = timed.count()
    middle: int | None = None
    if n:
        lo = (n - 1) // 2
        values = list(timed[lo : n // 2 + 1])  # the middle one, or the middle two
        middle = median(values) if len(values) == 2 else values[0]
    per_judgment = None
    counts = (
        HumanScore.objects.accepted()
        .filter(campaign=campaign)
        .aggregate(scores=Count("pk"), judgments=Count("assignment_id", distinct=True))
    )
    if counts["judgments"]:
        per_judgment = (Decimal(counts["scores"]) / Decimal(counts["judgments"])).quantize(
            Decimal("0.01"), ROUND_HALF_UP
        )
    return CostEstimate(
        judgments=n,
        median_ms=middle,
        skill_scores_per_judgment=per_judgment,
        hourly_wage=campaign.hourly_wage,
        currency=campaign.wage_currency,
    )
