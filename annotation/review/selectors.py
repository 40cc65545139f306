"""Reads of the review pages (docs/REVIEW.md): the review queue of a campaign, one
response's scores for the adjudication page, and the adaptive overlap summary.

**The queue.** A (response, skill) of a campaign is in the queue when
- *disagreement*: its accepted scores (annotation.models.accepted_assignment_q) spread by at
  least `campaign.review_spread` (max - min over the numbers), or some say N/A and others
  give a number; or
- *gold miss*: an annotator's score of a gold or attention task is outside the known score's
  tolerance (N/A must meet N/A; the rule of the campaign page's gold accuracy).

Both are aggregated in the database (GROUP BY response, skill with MIN/MAX/COUNT and a
HAVING clause, the same statement on PostgreSQL and SQLite), so the queue reads one row per
flagged (response, skill), never every score. Entries are responses (with the reasons of
each flagged skill), those with a flagged skill not yet adjudicated first, the widest
spread first among them, then by response id; the page reads the texts of its own entries
only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.db.models import (
    Count,
    F,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
)
from django.db.models.functions import Left

from annotation.gold import gold_correct_annotations
from annotation.models import (
    AdjudicatedScore,
    AssignmentKind,
    AssignmentStatus,
    Campaign,
    CampaignStatus,
    HumanScore,
    ProjectMembership,
    ProjectRole,
    Response,
    Skill,
    Task,
    TaskKind,
)
from annotation.selectors import TaskSkill, skills_for_response

#: Task kinds whose misses bring a response into the queue (training and qualification
#: answers are the screening's business, not data to settle).
GOLD_KINDS = (TaskKind.GOLD, TaskKind.ATTENTION)

SPREAD = "spread"
GOLD_MISS = "gold_miss"


@dataclass(frozen=True)
class QueueReason:
    """Why one skill of a response is in the queue."""

    kind: str  # SPREAD or GOLD_MISS
    skill_id: int
    skill: str
    scores: int  # scores counted (SPREAD) or answers to the known score (GOLD_MISS)
    low: int | None = None  # SPREAD: the lowest and highest number given
    high: int | None = None
    na: int = 0  # SPREAD: how many said N/A
    misses: int = 0  # GOLD_MISS: answers outside the tolerance
    adjudicated: bool = False

    @property
    def spread(self) -> int:
        """max - min of the numbers; N/A beside a number counts as 4 (the widest)."""
        if self.kind != SPREAD:
            return 0
        if self.na and self.na < self.scores:
            return 4
        return (self.high or 0) - (self.low or 0)

    @property
    def text(self) -> str:
        if self.kind == GOLD_MISS:
            return f"{self.misses} of {self.scores} answers miss the known score"
        given = f"{self.low}–{self.high}" if self.low is not None else "no number"
        na = f", {self.na} N/A" if self.na else ""
        return f"scores {given}{na} ({self.scores} annotators)"


@dataclass
class QueueEntry:
    response_id: int
    reasons: list[QueueReason] = field(default_factory=list)
    # filled for the entries of one page (queue_page)
    item_external_id: str = ""
    excerpt: str = ""

    @property
    def pending(self) -> bool:
        """Some flagged skill has no adjudicated score yet."""
        return any(not r.adjudicated for r in self.reasons)

    @property
    def widest(self) -> int:
        return max((r.spread for r in self.reasons), default=0)

    @property
    def gold_miss(self) -> bool:
        return any(r.kind == GOLD_MISS for r in self.reasons)


def _spread_rows(campaign: Campaign, spread: int, response_ids=None):
    """(response id, skill id, low, high, count, N/A count) of the campaign's accepted
    scores whose (response, skill) disagrees by `spread` or more, or mixes N/A and numbers:
    one aggregate statement."""
    qs = HumanScore.objects.filter(campaign=campaign).accepted()
    if response_ids is not None:
        qs = qs.filter(response_id__in=response_ids)
    return (
        qs.order_by()
        .values("response_id", "skill_id")
        .annotate(
            low=Min("score"),
            high=Max("score"),
            n=Count("pk"),
            na=Count("pk", filter=Q(is_na=True)),
        )
        .filter(Q(high__gte=F("low") + spread) | (Q(na__gt=0) & Q(na__lt=F("n"))))
        .values_list("response_id", "skill_id", "low", "high", "n", "na")
    )


def disagreeing_response_ids(
    *, campaign: Campaign, spread: int, response_ids: Sequence[int] | QuerySet | None = None
) -> set[int]:
    """Responses of the campaign whose accepted scores disagree by `spread` or more on some
    skill (N/A beside a number counts), among `response_ids` when given."""
    return {row[0] for row in _spread_rows(campaign, spread, response_ids)}


def _gold_miss_rows(campaign: Campaign):
    """(response id, skill id, answers, misses) of the campaign's gold and attention tasks
    with at least one submitted answer outside the known score's tolerance."""
    gold = "assignment__task__gold_scores"
    return (
        HumanScore.objects.filter(
            campaign=campaign,
            assignment__status=AssignmentStatus.SUBMITTED,
            assignment__kind=AssignmentKind.NORMAL,
            assignment__task__kind__in=GOLD_KINDS,
            **{f"{gold}__skill_id": F("skill_id")},
        )
        .annotate(**gold_correct_annotations(gold))
        .order_by()
        .values("response_id", "skill_id")
        .annotate(n=Count("pk"), ok=Sum("correct"))
        .filter(ok__lt=F("n"))
        .values_list("response_id", "skill_id", "n", "ok")
    )


def review_queue(*, campaign: Campaign) -> list[QueueEntry]:
    """Every entry of the campaign's review queue, in queue order (see the module
    docstring). Four queries: disagreements, gold misses, adjudicated pairs, skill names."""
    spread_rows = list(_spread_rows(campaign, campaign.review_spread))
    gold_rows = list(_gold_miss_rows(campaign))
    done = set(
        AdjudicatedScore.objects.filter(campaign=campaign).values_list("response_id", "skill_id")
    )
    skill_ids = {r[1] for r in spread_rows} | {r[1] for r in gold_rows}
    names = dict(Skill.objects.filter(pk__in=skill_ids).values_list("pk", "name"))
    entries: dict[int, QueueEntry] = {}
    for response_id, skill_id, low, high, n, na in spread_rows:
        entries.setdefault(response_id, QueueEntry(response_id)).reasons.append(
            QueueReason(
                SPREAD,
                skill_id,
                names.get(skill_id, "?"),
                n,
                low=low,
                high=high,
                na=na,
                adjudicated=(response_id, skill_id) in done,
            )
        )
    for response_id, skill_id, n, ok in gold_rows:
        entries.setdefault(response_id, QueueEntry(response_id)).reasons.append(
            QueueReason(
                GOLD_MISS,
                skill_id,
                names.get(skill_id, "?"),
                n,
                misses=n - (ok or 0),
                adjudicated=(response_id, skill_id) in done,
            )
        )
    for entry in entries.values():
        entry.reasons.sort(key=lambda r: (r.adjudicated, -r.spread, r.skill))
    return sorted(entries.values(), key=lambda e: (not e.pending, -e.widest, e.response_id))


#: Characters of an instruction shown in the queue.
EXCERPT_CHARS = 160


def queue_entries_describe(entries: Iterable[QueueEntry]) -> None:
    """Fill the item id and an instruction excerpt of `entries` (one page): one query."""
    entries = list(entries)
    rows = (
        Response.objects.filter(pk__in=[e.response_id for e in entries])
        .annotate(excerpt=Left("item__instruction", EXCERPT_CHARS))
        .values_list("pk", "item__external_id", "excerpt")
    )
    found = {pk: (external_id, excerpt) for pk, external_id, excerpt in rows}
    for entry in entries:
        entry.item_external_id, entry.excerpt = found.get(entry.response_id, ("", ""))


def queue_next(
    *, campaign: Campaign, after: int | None = None, queue: list[QueueEntry] | None = None
) -> int | None:
    """The response to review next: the first pending entry other than `after`."""
    for entry in queue if queue is not None else review_queue(campaign=campaign):
        if entry.pending and entry.response_id != after:
            return entry.response_id
    return None


@dataclass(frozen=True)
class GivenScore:
    label: str  # "Annotator 1" for reviewers; the username for the staff
    value: str  # "1".."5" or "N/A"
    rationale: str
    task_kind: str  # "normal", "gold", "attention"


@dataclass(frozen=True)
class SkillReview:
    skill: TaskSkill
    given: list[GivenScore]
    known: str | None  # a gold or attention task's known score ("N/A" or "1".."5")
    adjudicated: AdjudicatedScore | None
    flagged: bool


def response_for_review(*, campaign: Campaign, response_id: int) -> Response | None:
    """The response with its item, if some task of the campaign scores it (any kind)."""
    if not Task.objects.filter(campaign=campaign, response_id=response_id).exists():
        return None
    return Response.objects.select_related("item").filter(pk=response_id).first()


def review_skills(
    *,
    campaign: Campaign,
    response: Response,
    names_shown: bool,
    flagged: set[int] | frozenset[int] = frozenset(),
) -> list[SkillReview]:
    """Per skill the campaign asks of the response (its pinned rubric): every submitted
    score of the campaign's normal assignments (accepted ones and gold or attention
    answers) with its rationale, the known score where there is one, and the adjudicated
    score. Annotators are named "Annotator 1, 2, ..." in the order they were assigned the
    response, unless `names_shown` (the project's staff see usernames). Four queries."""
    skills = skills_for_response(response=response, campaign=campaign)
    scores = (
        HumanScore.objects.filter(
            campaign=campaign,
            response=response,
            assignment__status=AssignmentStatus.SUBMITTED,
            assignment__kind=AssignmentKind.NORMAL,
        )
        .order_by("assignment_id", "skill_id")
        .values_list(
            "skill_id",
            "annotator_id",
            "annotator__username",
            "score",
            "is_na",
            "rationale",
            "assignment__task__kind",
        )
    )
    numbers: dict[int, int] = {}
    given: dict[int, list[GivenScore]] = defaultdict(list)
    for skill_id, annotator_id, username, score, is_na, rationale, kind in scores:
        number = numbers.setdefault(annotator_id, len(numbers) + 1)
        given[skill_id].append(
            GivenScore(
                username if names_shown else f"Annotator {number}",
                "N/A" if is_na else str(score),
                rationale,
                kind,
            )
        )
    known = {
        skill_id: "N/A" if is_na else str(score)
        for skill_id, score, is_na in Task.objects.filter(
            campaign=campaign, response=response, kind__in=GOLD_KINDS
        ).values_list("gold_scores__skill_id", "gold_scores__score", "gold_scores__is_na")
        if skill_id is not None
    }
    settled = {
        a.skill_id: a
        for a in AdjudicatedScore.objects.filter(campaign=campaign, response=response)
        .select_related("reviewer")
        .order_by()
    }
    return [
        SkillReview(
            skill=s,
            given=given.get(s.skill_id, []),
            known=known.get(s.skill_id),
            adjudicated=settled.get(s.skill_id),
            flagged=s.skill_id in flagged,
        )
        for s in skills
    ]


@dataclass(frozen=True)
class AdaptiveSummary:
    on: bool
    spread: int | None
    max_extra: int
    budget: int | None  # None: no campaign-wide cap
    used: int  # extra annotations asked for so far (sum of the tasks' adaptive_extra)
    tasks_raised: int

    @property
    def left(self) -> int | None:
        return None if self.budget is None else max(0, self.budget - self.used)


def adaptive_summary(*, campaign: Campaign) -> AdaptiveSummary:
    """What adaptive overlap has asked for in the campaign (one query)."""
    found = Task.objects.filter(campaign=campaign, kind=TaskKind.NORMAL).aggregate(
        used=Sum("adaptive_extra"), raised=Count("pk", filter=Q(adaptive_extra__gt=0))
    )
    return AdaptiveSummary(
        on=campaign.adaptive_spread is not None,
        spread=campaign.adaptive_spread,
        max_extra=campaign.adaptive_max_extra,
        budget=campaign.adaptive_budget,
        used=int(found["used"] or 0),
        tasks_raised=int(found["raised"] or 0),
    )


def review_campaign_list(*, project) -> list[tuple[Campaign, int]]:
    """The project's started campaigns with the number of pending queue entries each
    (a few queries per campaign: a project has a handful)."""
    campaigns = Campaign.objects.filter(project=project).exclude(status=CampaignStatus.DRAFT)
    return [
        (c, sum(1 for e in review_queue(campaign=c) if e.pending))
        for c in campaigns.order_by("-created_at")
    ]


def project_slugs_to_review(*, user) -> set[str]:
    """Slugs of the projects where the user is a reviewer (the home page links their review
    lists; the staff reach review from the campaign page)."""
    return set(
        ProjectMembership.objects.filter(user=user, role=ProjectRole.REVIEWER).values_list(
            "project__slug", flat=True
        )
    )
