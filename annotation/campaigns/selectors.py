"""Reads for the campaign pages (admins, researchers): progress, throughput, live leases,
quality control, gold tasks, expertise.

Every function returns plain rows (dataclasses or tuples) from a fixed number of aggregate
queries, so the campaign page costs the same number of queries for ten tasks or a million.
Definitions (also in docs/CAMPAIGNS.md):

- a *slot* is one of the K annotations a normal task needs; only normal assignments of
  normal tasks fill slots (gold, attention and hidden repeats never do);
- *recent rate* is the number of submissions in the last hour (RATE_WINDOW), so it reads
  directly as tasks per hour; the ETA is the open slots divided by the campaign's rate;
- *gold accuracy* is the share of an annotator's scores on gold and attention tasks that are
  within the task's tolerance of the known score (N/A must meet N/A), over the skills that
  have a known score; an *attention check* passes when all its known skills match;
- *test-retest* pairs a hidden repeat's score with the annotator's first score of the same
  task and skill: the exact-agreement share (N/A = N/A) and the mean absolute difference
  (pairs where both are numbers).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import (
    Aggregate,
    Case,
    Count,
    Exists,
    F,
    FloatField,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Abs, Coalesce

from annotation.access import campaign_pool_list
from annotation.gold import gold_correct_annotations, gold_preference_correct_annotations
from annotation.models import (
    AnnotatorExpertise,
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    Campaign,
    CampaignItemPin,
    CampaignMode,
    CampaignRubric,
    CampaignStatus,
    Dataset,
    GoldPreference,
    GoldScore,
    HumanPreference,
    HumanScore,
    ItemSkill,
    PairAsk,
    Participant,
    ParticipantState,
    Project,
    ProjectRole,
    Response,
    Skill,
    SkillMode,
    Task,
    TaskKind,
    accepted_assignment_q,
    rubric_label,
)
from annotation.selectors import (
    PARTICIPANTS_EXCLUDE,
    PARTICIPANTS_INCLUDE,
    campaign_item_skill_ids,
    domain_list_for_project,
    participants_narrowed,
)
from flaskweb.db import is_postgres

RATE_WINDOW = timedelta(hours=1)
KNOWN_KINDS = (TaskKind.GOLD, TaskKind.ATTENTION)


class Median(Aggregate):
    """PostgreSQL's percentile_cont(0.5). SQLite has no ordered-set aggregates; callers
    check `is_postgres` and fall back to Python (see _median_active_ms)."""

    function = "percentile_cont"
    name = "median"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


# --- lists, settings ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CampaignRow:
    pk: int
    name: str
    status: str
    status_label: str
    dataset_id: int
    dataset_name: str
    overlap: int
    tasks: int
    slots_done: int
    slots_needed: int
    created_at: datetime

    @property
    def percent(self) -> int:
        return _percent(self.slots_done, self.slots_needed)


def _percent(done: int, needed: int) -> int:
    return round(100 * done / needed) if needed else 0


def campaign_list_for_project(*, project: Project) -> list[CampaignRow]:
    """The project's campaigns, newest first, with their slot progress (one query)."""
    normal = Q(tasks__kind=TaskKind.NORMAL)
    rows = (
        Campaign.objects.filter(project=project)
        .annotate(
            task_count=Count("tasks", filter=normal),
            done=Coalesce(Sum("tasks__submitted", filter=normal), 0),
            needed=Coalesce(Sum("tasks__overlap", filter=normal), 0),
        )
        .order_by("-created_at", "-pk")
        .values(
            "pk",
            "name",
            "status",
            "dataset_id",
            "dataset__name",
            "overlap",
            "created_at",
            "task_count",
            "done",
            "needed",
        )
    )
    labels = dict(CampaignStatus.choices)
    return [
        CampaignRow(
            pk=r["pk"],
            name=r["name"],
            status=r["status"],
            status_label=labels.get(r["status"], r["status"]),
            dataset_id=r["dataset_id"],
            dataset_name=r["dataset__name"],
            overlap=r["overlap"],
            tasks=r["task_count"],
            slots_done=r["done"],
            slots_needed=r["needed"],
            created_at=r["created_at"],
        )
        for r in rows
    ]


def project_annotator_list(
    *, project: Project, participants: str = PARTICIPANTS_INCLUDE, study_id: int | None = None
) -> QuerySet:
    """Users with the annotator role in the project (the pool a campaign is drawn from).
    `participants`: include (everyone), exclude (no account a study link made: what the
    staff pick from) or only; `study_id`: only the participants of that campaign's study."""
    users = get_user_model().objects.filter(
        memberships__project=project, memberships__role=ProjectRole.ANNOTATOR
    )
    users = participants_narrowed(
        users, project=project, participants=participants, study_id=study_id
    )
    return users.order_by("username")


def study_participant_ids(*, project: Project, study_ids) -> list[int]:
    """User ids of the participants of the given campaigns' studies who are annotators of
    the project and did not decline consent: whom "include this study's participants"
    puts in a pool."""
    if not study_ids:
        return []
    return list(
        Participant.objects.filter(
            campaign__project_id=project.pk,
            campaign_id__in=list(study_ids),
            user__memberships__project_id=project.pk,
            user__memberships__role=ProjectRole.ANNOTATOR,
        )
        .exclude(state=ParticipantState.DECLINED)
        .values_list("user_id", flat=True)
    )


def campaign_pool_study_ids(*, campaign: Campaign) -> list[int]:
    """The campaigns, other than this one, whose study participants are in its direct
    pool (ids): the studies its form shows as included."""
    return list(
        Participant.objects.filter(
            campaign__project_id=campaign.project_id, user__campaigns=campaign
        )
        .exclude(campaign_id=campaign.pk)
        .order_by()
        .values_list("campaign_id", flat=True)
        .distinct()
    )


def campaign_own_participant_count(*, campaign: Campaign) -> int:
    """How many of the campaign's own study participants are in its pool."""
    return Participant.objects.filter(campaign=campaign, user__campaigns=campaign).count()


def group_list_for_project(*, project: Project, keep=()) -> QuerySet[Group]:
    """The groups a campaign of the project may take into its pool: those with a member
    who holds a role in the project (a group admits only such members), and the groups in
    `keep` (ids: the campaign's own, so an edit keeps them). Other groups' names stay
    hidden from the project's staff."""
    with_member = Group.objects.filter(user__memberships__project=project).values("pk")
    return Group.objects.filter(Q(pk__in=with_member) | Q(pk__in=list(keep))).order_by("name")


def dataset_model_names(*, dataset: Dataset) -> list[str]:
    """The systems that answered the dataset's items, by name."""
    return list(
        Response.objects.filter(item__dataset=dataset)
        .order_by("model_name")
        .values_list("model_name", flat=True)
        .distinct()
    )


@dataclass(frozen=True)
class PinnedRubric:
    skill_id: int
    skill_name: str
    rubric_id: int
    version: int
    project_scoped: bool
    label: str = ""  # annotation.models.rubric_label: "built-in v1" or "project:demo v1"


def campaign_rubric_pins(*, campaign: Campaign) -> list[PinnedRubric]:
    """The rubric version each skill is scored under (pinned at activation)."""
    rows = (
        CampaignRubric.objects.filter(campaign=campaign)
        .order_by("skill__order", "skill__name")
        .values(
            "skill_id",
            "skill__name",
            "rubric_id",
            "rubric__version",
            "rubric__project_id",
            "rubric__project__slug",
        )
    )
    return [
        PinnedRubric(
            skill_id=r["skill_id"],
            skill_name=r["skill__name"],
            rubric_id=r["rubric_id"],
            version=r["rubric__version"],
            project_scoped=r["rubric__project_id"] is not None,
            label=rubric_label(
                project_slug=r["rubric__project__slug"], version=r["rubric__version"]
            ),
        )
        for r in rows
    ]


def campaign_skill_list(
    *, campaign: Campaign, pins: list[PinnedRubric] | None = None
) -> list[tuple[int, str]]:
    """(skill id, name) scored in the campaign: the pinned skills once it was activated,
    otherwise the skills it will ask (the fixed set, or the dataset's item skills)."""
    if pins:
        return [(p.skill_id, p.skill_name) for p in pins]
    if campaign.pk and CampaignRubric.objects.filter(campaign=campaign).exists():
        return [(p.skill_id, p.skill_name) for p in campaign_rubric_pins(campaign=campaign)]
    if campaign.skill_mode == SkillMode.FIXED:
        skills = campaign.fixed_skills.all()
    else:
        skills = Skill.objects.filter(
            pk__in=ItemSkill.objects.filter(item__dataset_id=campaign.dataset_id).values("skill_id")
        )
    return list(skills.order_by("order", "name").values_list("pk", "name"))


# --- progress -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SkillProgress:
    skill_id: int
    name: str
    collected: int
    needed: int

    @property
    def percent(self) -> int:
        return _percent(self.collected, self.needed)


def campaign_skill_progress(*, campaign: Campaign, pins: list[PinnedRubric]) -> list[SkillProgress]:
    """Scores collected / needed per pinned skill, where needed = Σ over the normal tasks
    that ask the skill of their overlap (tasks × K). Two queries. A pairwise campaign
    counts its preferences per skill (none when it asks only the overall question)."""
    pairwise = campaign.mode == CampaignMode.PAIRWISE
    if pairwise and campaign.pair_ask == PairAsk.OVERALL:
        return []
    normal_tasks = Task.objects.filter(campaign=campaign, kind=TaskKind.NORMAL)
    if campaign.skill_mode == SkillMode.FIXED:
        total = normal_tasks.aggregate(n=Coalesce(Sum("overlap"), 0))["n"]
        needed = {p.skill_id: total for p in pins}
    else:
        # The overlaps summed per item, then per skill each item's tasks ask (its pin, the
        # item's own skills while a draft): tasks × K per skill.
        pin = CampaignItemPin.objects.filter(
            campaign_id=campaign.pk, item_id=OuterRef("response__item_id")
        ).values("skills")[:1]
        per_item = {
            item_id: (overlap, skills)
            for item_id, overlap, skills in normal_tasks.order_by()
            .values("response__item_id")
            .annotate(n=Sum("overlap"), skills=Subquery(pin))
            .values_list("response__item_id", "n", "skills")
        }
        unpinned = [item_id for item_id, (_, skills) in per_item.items() if skills is None]
        own = campaign_item_skill_ids(campaign=campaign, item_ids=unpinned) if unpinned else {}
        needed = defaultdict(int)
        for item_id, (overlap, skills) in per_item.items():
            for skill_id in own[item_id] if skills is None else [pair[0] for pair in skills]:
                needed[skill_id] += overlap
    answers = (
        HumanPreference.objects.filter(skill__isnull=False) if pairwise else HumanScore.objects
    )
    collected = dict(
        answers.filter(
            campaign=campaign,
            assignment__kind=AssignmentKind.NORMAL,
            assignment__task__kind=TaskKind.NORMAL,
        )
        .order_by()
        .values_list("skill_id")
        .annotate(n=Count("pk"))
    )
    return [
        SkillProgress(
            skill_id=p.skill_id,
            name=p.skill_name,
            collected=collected.get(p.skill_id, 0),
            needed=needed.get(p.skill_id) or 0,
        )
        for p in pins
    ]


@dataclass(frozen=True)
class CampaignProgress:
    tasks: int
    tasks_complete: int
    slots_done: int
    slots_needed: int
    recent_per_hour: int  # slots filled in the last RATE_WINDOW
    now: datetime

    @property
    def percent(self) -> int:
        return _percent(self.slots_done, self.slots_needed)

    @property
    def slots_open(self) -> int:
        return max(0, self.slots_needed - self.slots_done)

    @property
    def eta_seconds(self) -> float | None:
        """Seconds until every slot is filled at the recent rate; None without a rate."""
        if self.slots_open == 0:
            return 0.0
        if not self.recent_per_hour:
            return None
        return self.slots_open / self.recent_per_hour * 3600

    @property
    def eta_at(self) -> datetime | None:
        seconds = self.eta_seconds
        return None if seconds is None else self.now + timedelta(seconds=seconds)


def campaign_progress(*, campaign: Campaign, now: datetime) -> CampaignProgress:
    """Overall slot progress and the recent submission rate (two queries)."""
    totals = Task.objects.filter(campaign=campaign, kind=TaskKind.NORMAL).aggregate(
        tasks=Count("pk"),
        complete=Count("pk", filter=Q(submitted__gte=F("overlap"))),
        done=Coalesce(Sum("submitted"), 0),
        needed=Coalesce(Sum("overlap"), 0),
    )
    recent = (
        Assignment.objects.filter(campaign=campaign, submitted_at__gt=now - RATE_WINDOW)
        .accepted()
        .count()
    )
    return CampaignProgress(
        tasks=totals["tasks"],
        tasks_complete=totals["complete"],
        slots_done=totals["done"],
        slots_needed=totals["needed"],
        recent_per_hour=recent,
        now=now,
    )


@dataclass(frozen=True)
class AnnotatorProgress:
    user_id: int
    username: str
    in_pool: bool
    done: int  # normal submissions (they fill slots)
    submitted: int  # every submission: normal, gold, attention, repeats
    per_hour: int  # submissions in the last RATE_WINDOW
    median_active_ms: float | None
    skips: int
    flags: int
    open_leases: int
    last_submitted_at: datetime | None
    participant: bool = False  # an account a study link made (annotation/study/)


def campaign_annotator_progress(*, campaign: Campaign, now: datetime) -> list[AnnotatorProgress]:
    """Per annotator throughput: everyone in the pool plus anyone who ever held a lease;
    study participants only once they have held a task (a crowd study puts thousands in
    the pool, counted per study on the campaign page instead). Three queries on PostgreSQL
    (median in SQL), four on SQLite (median in Python)."""
    submitted = Q(status=AssignmentStatus.SUBMITTED)
    rows = (
        Assignment.objects.filter(campaign=campaign)
        .order_by()
        .values("annotator_id", "annotator__username")
        .annotate(
            done=Count("pk", filter=accepted_assignment_q()),
            submitted=Count("pk", filter=submitted),
            per_hour=Count("pk", filter=submitted & Q(submitted_at__gt=now - RATE_WINDOW)),
            skips=Count("pk", filter=Q(status=AssignmentStatus.SKIPPED)),
            flags=Count("pk", filter=Q(flagged=True)),
            open_leases=Count("pk", filter=Q(status=AssignmentStatus.ACTIVE)),
            last_submitted_at=Max("submitted_at"),
        )
    )
    if is_postgres(connection):
        rows = rows.annotate(
            median_ms=Median("active_ms", filter=submitted & Q(active_ms__isnull=False))
        )
        medians = None
    else:
        medians = _median_active_ms(campaign)
    pool = campaign_pool_list(campaign=campaign)
    pool_ids = {pk for pk, _ in pool}
    participants = _participant_ids_around(campaign)
    result = {}
    for r in rows:
        uid = r["annotator_id"]
        median = r.get("median_ms") if medians is None else medians.get(uid)
        result[uid] = AnnotatorProgress(
            user_id=uid,
            username=r["annotator__username"],
            in_pool=uid in pool_ids,
            done=r["done"],
            submitted=r["submitted"],
            per_hour=r["per_hour"],
            median_active_ms=median,
            skips=r["skips"],
            flags=r["flags"],
            open_leases=r["open_leases"],
            last_submitted_at=r["last_submitted_at"],
            participant=uid in participants,
        )
    for uid, username in pool:
        if uid not in result and uid not in participants:
            result[uid] = AnnotatorProgress(uid, username, True, 0, 0, 0, None, 0, 0, 0, None)
    return sorted(result.values(), key=lambda a: a.username)


def _participant_ids_around(campaign: Campaign) -> set[int]:
    """Ids of the project's study participants in the campaign's direct pool or with an
    assignment in it (one query)."""
    in_pool = Campaign.annotators.through.objects.filter(
        campaign_id=campaign.pk, user_id=OuterRef("user_id")
    )
    worked = Assignment.objects.filter(campaign_id=campaign.pk, annotator_id=OuterRef("user_id"))
    return set(
        Participant.objects.filter(campaign__project_id=campaign.project_id)
        .filter(Exists(in_pool) | Exists(worked))
        .values_list("user_id", flat=True)
    )


def _median_active_ms(campaign: Campaign) -> dict[int, float]:
    """The SQLite fallback of the percentile_cont median: one query, grouped in Python."""
    times: dict[int, list[int]] = defaultdict(list)
    rows = Assignment.objects.filter(
        campaign=campaign, status=AssignmentStatus.SUBMITTED, active_ms__isnull=False
    ).values_list("annotator_id", "active_ms")
    for uid, ms in rows:
        times[uid].append(ms)
    return {uid: float(statistics.median(values)) for uid, values in times.items()}


@dataclass(frozen=True)
class ActiveLease:
    assignment_id: int
    username: str
    task_id: int
    task_kind: str
    repeat: bool
    since: datetime
    expires_at: datetime
    overdue: bool


def campaign_lease_list(
    *, campaign: Campaign, now: datetime, limit: int = 200
) -> list[ActiveLease]:
    """Open leases, the soonest to expire first (overdue ones wait for the expiry job)."""
    rows = (
        Assignment.objects.filter(campaign=campaign, status=AssignmentStatus.ACTIVE)
        .order_by("expires_at", "pk")
        .values(
            "pk", "annotator__username", "task_id", "task__kind", "kind", "created_at", "expires_at"
        )[:limit]
    )
    return [
        ActiveLease(
            assignment_id=r["pk"],
            username=r["annotator__username"],
            task_id=r["task_id"],
            task_kind=r["task__kind"],
            repeat=r["kind"] == AssignmentKind.REPEAT,
            since=r["created_at"],
            expires_at=r["expires_at"],
            overdue=r["expires_at"] <= now,
        )
        for r in rows
    ]


# --- quality control ------------------------------------------------------------------------------


@dataclass
class AnnotatorQuality:
    user_id: int
    username: str
    gold_scores: int = 0  # skill scores on gold/attention tasks with a known score
    gold_correct: int = 0
    attention_passed: int = 0
    attention_failed: int = 0
    retest_pairs: int = 0
    retest_exact: int = 0
    retest_abs_diff_sum: int = 0
    retest_numeric_pairs: int = 0

    @property
    def gold_accuracy(self) -> float | None:
        return _share(self.gold_correct, self.gold_scores)

    @property
    def retest_agreement(self) -> float | None:
        return _share(self.retest_exact, self.retest_pairs)

    @property
    def retest_mad(self) -> float | None:
        return _share(self.retest_abs_diff_sum, self.retest_numeric_pairs)


def campaign_quality(*, campaign: Campaign) -> list[AnnotatorQuality]:
    """Gold accuracy, attention checks and test-retest per annotator (three queries; gold
    and attention pairs of a pairwise campaign count as gold answers, one per question).

    Gold: each HumanScore of a gold/attention task is joined to the GoldScore of the same
    task and skill, so skills without a known score drop out. Rows come back per
    assignment (n, correct), which is what an attention check passes or fails on.
    """
    by_user: dict[int, AnnotatorQuality] = {}

    def quality(uid: int, username: str) -> AnnotatorQuality:
        if uid not in by_user:
            by_user[uid] = AnnotatorQuality(uid, username)
        return by_user[uid]

    gold = "assignment__task__gold_scores"
    # The join to gold_scores is made once, in this filter; the annotations below reuse it.
    known = (
        HumanScore.objects.filter(
            campaign=campaign,
            assignment__task__kind__in=KNOWN_KINDS,
            **{f"{gold}__skill_id": F("skill_id")},
        )
        .annotate(**gold_correct_annotations(gold))
        .order_by()
        .values("annotator_id", "annotator__username", "assignment_id", "assignment__task__kind")
        .annotate(n=Count("pk"), ok=Sum("correct"))
    )
    # A pairwise campaign's gold and attention pairs: each answer against the known choice
    # of the same question (a skill, or the overall one: both null).
    pair_gold = "assignment__task__gold_preferences"
    known_pairs = (
        HumanPreference.objects.filter(
            Q(**{f"{pair_gold}__skill_id": F("skill_id")})
            | Q(**{f"{pair_gold}__skill__isnull": True, "skill__isnull": True}),
            campaign=campaign,
            assignment__task__kind__in=KNOWN_KINDS,
        )
        .annotate(**gold_preference_correct_annotations(pair_gold))
        .order_by()
        .values("annotator_id", "annotator__username", "assignment_id", "assignment__task__kind")
        .annotate(n=Count("pk"), ok=Sum("correct"))
    )
    for r in [*known, *known_pairs]:
        q = quality(r["annotator_id"], r["annotator__username"])
        q.gold_scores += r["n"]
        q.gold_correct += r["ok"]
        if r["assignment__task__kind"] == TaskKind.ATTENTION:
            if r["ok"] == r["n"]:
                q.attention_passed += 1
            else:
                q.attention_failed += 1

    # A repeat's score against the same annotator's first score of that task and skill.
    first = HumanScore.objects.filter(
        assignment__task_id=OuterRef("assignment__task_id"),
        assignment__kind=AssignmentKind.NORMAL,
        annotator_id=OuterRef("annotator_id"),
        skill_id=OuterRef("skill_id"),
    )
    retest = (
        HumanScore.objects.filter(campaign=campaign, assignment__kind=AssignmentKind.REPEAT)
        .annotate(
            first_score=Subquery(first.values("score")[:1]),
            first_na=Subquery(first.values("is_na")[:1]),
        )
        .filter(first_na__isnull=False)
        .annotate(
            same=Case(
                When(Q(is_na=True, first_na=True), then=Value(1)),
                When(Q(is_na=False, first_na=False, score=F("first_score")), then=Value(1)),
                default=Value(0),
                output_field=IntegerField(),
            ),
            diff=Abs(F("score") - F("first_score")),
        )
        .order_by()
        .values("annotator_id", "annotator__username")
        .annotate(
            pairs=Count("pk"),
            exact=Sum("same"),
            diff_sum=Coalesce(Sum("diff"), 0),
            numeric=Count("diff"),
        )
    )
    for r in retest:
        q = quality(r["annotator_id"], r["annotator__username"])
        q.retest_pairs = r["pairs"]
        q.retest_exact = r["exact"]
        q.retest_abs_diff_sum = r["diff_sum"]
        q.retest_numeric_pairs = r["numeric"]
    if campaign.mode == CampaignMode.PAIRWISE:
        _pair_retest(campaign, quality)
    return sorted(by_user.values(), key=lambda q: q.username)


def _pair_retest(campaign: Campaign, quality) -> None:
    """A pairwise campaign's hidden repeats: each repeated answer against the same
    annotator's first answer to that pair and question (skill or overall); agreement is the
    same choice (a choice has no distance, so no mean absolute difference). Two queries."""
    fields = ("annotator_id", "annotator__username", "assignment__task_id", "skill_id", "choice")
    repeats = list(
        HumanPreference.objects.filter(
            campaign=campaign, assignment__kind=AssignmentKind.REPEAT
        ).values_list(*fields)
    )
    if not repeats:
        return
    firsts = {
        (user_id, task_id, skill_id): choice
        for user_id, _, task_id, skill_id, choice in HumanPreference.objects.filter(
            campaign=campaign,
            assignment__kind=AssignmentKind.NORMAL,
            assignment__task_id__in={r[2] for r in repeats},
        ).values_list(*fields)
    }
    for user_id, username, task_id, skill_id, choice in repeats:
        before = firsts.get((user_id, task_id, skill_id))
        if before is None:
            continue
        q = quality(user_id, username)
        q.retest_pairs += 1
        q.retest_exact += int(before == choice)


@dataclass(frozen=True)
class FlaggedItem:
    assignment_id: int
    username: str
    task_id: int
    item_id: int
    external_id: str
    model_name: str
    reason: str
    at: datetime


def campaign_flagged_list(*, campaign: Campaign, limit: int = 200) -> list[FlaggedItem]:
    """Tasks annotators flagged as broken, newest first, with their reasons."""
    rows = (
        Assignment.objects.filter(campaign=campaign, flagged=True)
        .order_by("-updated_at", "-pk")
        .values(
            "pk",
            "annotator__username",
            "task_id",
            "task__response__item_id",
            "task__response__item__external_id",
            "task__response__model_name",
            "flag_reason",
            "updated_at",
        )[:limit]
    )
    return [
        FlaggedItem(
            assignment_id=r["pk"],
            username=r["annotator__username"],
            task_id=r["task_id"],
            item_id=r["task__response__item_id"],
            external_id=r["task__response__item__external_id"],
            model_name=r["task__response__model_name"],
            reason=r["flag_reason"],
            at=r["updated_at"],
        )
        for r in rows
    ]


# --- gold tasks, expertise ------------------------------------------------------------------------


@dataclass
class GoldTaskRow:
    """A task with known answers: one response (pointwise) with its known scores, or a pair
    (A = `response_id`, B = `response_b_id`, B shown on the left when `b_left`) with its
    known choices; how often it was served and answered, and how many of the answers (one
    per known skill or question) were correct (annotation/gold.py)."""

    task_id: int
    kind: str
    item_id: int
    external_id: str
    model_name: str
    served: int
    submitted: int
    known: list[tuple[str, str]] = field(default_factory=list)  # (skill, "4" or "N/A"; or "a")
    tolerance: int = 0
    explanation: str = ""
    response_id: int = 0
    response_b_id: int | None = None
    model_b: str = ""
    b_left: bool = False
    answers: int = 0
    correct: int = 0
    # known skills its task does not ask, and whether any known skill is asked (filled by
    # the screening page: annotation/screening/setup.py)
    unasked: list[str] = field(default_factory=list)
    compares: bool = True

    @property
    def is_pair(self) -> bool:
        return self.response_b_id is not None

    @property
    def accuracy(self) -> float | None:
        return _share(self.correct, self.answers)


#: The name of a pair's overall question in lists and the API.
OVERALL = "overall"


def campaign_gold_task_list(
    *, campaign: Campaign, kinds: tuple[str, ...] = KNOWN_KINDS
) -> list[GoldTaskRow]:
    """Gold and attention tasks (or those of `kinds`: screening's training and
    qualification tasks) with their known scores or, for pairs, known choices (skill name,
    or OVERALL: a, b, tie or both_bad), how often they were served, and the annotators'
    answers so far against the known ones. Three queries, whatever the number of tasks."""
    tasks = (
        Task.objects.filter(campaign=campaign, kind__in=kinds)
        .annotate(
            served=Count("assignments"),
            done=Count("assignments", filter=Q(assignments__status=AssignmentStatus.SUBMITTED)),
        )
        .order_by("pk")
        .values(
            "pk",
            "kind",
            "response_id",
            "response_b_id",
            "b_left",
            "response__item_id",
            "response__item__external_id",
            "response__model_name",
            "response_b__model_name",
            "served",
            "done",
        )
    )
    rows = {
        t["pk"]: GoldTaskRow(
            task_id=t["pk"],
            kind=t["kind"],
            item_id=t["response__item_id"],
            external_id=t["response__item__external_id"],
            model_name=t["response__model_name"],
            served=t["served"],
            submitted=t["done"],
            response_id=t["response_id"],
            response_b_id=t["response_b_id"],
            model_b=t["response_b__model_name"] or "",
            b_left=t["b_left"],
        )
        for t in tasks
    }
    if campaign.mode == CampaignMode.PAIRWISE:
        _known_choices(campaign, kinds, rows)
    else:
        _known_scores(campaign, kinds, rows)
    for task_id, answers, correct in _gold_answers(campaign, kinds):
        if task_id in rows:
            rows[task_id].answers, rows[task_id].correct = answers, correct
    return list(rows.values())


def _known_scores(campaign: Campaign, kinds: tuple[str, ...], rows: dict) -> None:
    scores = (
        GoldScore.objects.filter(task__campaign=campaign, task__kind__in=kinds)
        .order_by("task_id", "skill__order", "skill__name")
        .values_list("task_id", "skill__name", "score", "is_na", "tolerance", "explanation")
    )
    for task_id, skill, score, is_na, tolerance, explanation in scores:
        row = rows.get(task_id)
        if row is not None:
            row.known.append((skill, "N/A" if is_na else str(score)))
            row.tolerance, row.explanation = tolerance, explanation


def _known_choices(campaign: Campaign, kinds: tuple[str, ...], rows: dict) -> None:
    choices = (
        GoldPreference.objects.filter(task__campaign=campaign, task__kind__in=kinds)
        .order_by("task_id", F("skill__order").asc(nulls_last=True), "skill__name")
        .values_list("task_id", "skill__name", "choice", "explanation")
    )
    for task_id, skill, choice, explanation in choices:
        row = rows.get(task_id)
        if row is not None:
            row.known.append((skill or OVERALL, choice))
            row.explanation = explanation


def _gold_answers(campaign: Campaign, kinds: tuple[str, ...]) -> list[tuple[int, int, int]]:
    """(task id, answers, correct) per task of `kinds`: each score against the known score
    of its skill, each choice against the known choice of its question (annotation/gold.py,
    as campaign_quality counts them). One query: pointwise or pairwise, by the mode."""
    if campaign.mode == CampaignMode.PAIRWISE:
        gold = "assignment__task__gold_preferences"
        answers = HumanPreference.objects.filter(
            Q(**{f"{gold}__skill_id": F("skill_id")})
            | Q(**{f"{gold}__skill__isnull": True, "skill__isnull": True}),
            campaign=campaign,
            assignment__task__kind__in=kinds,
        ).annotate(**gold_preference_correct_annotations(gold))
    else:
        gold = "assignment__task__gold_scores"
        answers = HumanScore.objects.filter(
            campaign=campaign,
            assignment__task__kind__in=kinds,
            **{f"{gold}__skill_id": F("skill_id")},
        ).annotate(**gold_correct_annotations(gold))
    return list(
        answers.order_by()
        .values("assignment__task_id")
        .annotate(n=Count("pk"), ok=Sum("correct"))
        .values_list("assignment__task_id", "n", "ok")
    )


def project_expertise_list(
    *, project: Project, users: list[tuple[int, str]] | None = None
) -> list[tuple[int, str, list[str]]]:
    """(user id, username, [domain names]) of the given annotators ((id, username) pairs,
    a page of a list), or of the project's annotators who are not study participants
    (study participants are one line per study: annotation.selectors.study_group_list).
    Two queries."""
    if users is None:
        users = list(
            project_annotator_list(project=project, participants=PARTICIPANTS_EXCLUDE).values_list(
                "pk", "username"
            )
        )
    found: dict[int, tuple[str, list[str]]] = {pk: (username, []) for pk, username in users}
    expertise = (
        AnnotatorExpertise.objects.filter(
            user_id__in=list(found), domain__in=domain_list_for_project(project=project)
        )
        .order_by("domain__order", "domain__name")
        .values_list("user_id", "domain__name")
    )
    for user_id, domain in expertise:
        found[user_id][1].append(domain)
    return [(pk, username, domains) for pk, (username, domains) in found.items()]
