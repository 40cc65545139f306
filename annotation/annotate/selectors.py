"""Reads for the annotator's own pages: the dashboard, the scoring card, gold feedback.

Blindness is a property of these reads, not only of the templates: nothing returned here
carries a model name, a judge score, another annotator's score, or (outside the feedback
that a campaign explicitly enables) whether a task is gold, an attention check or a repeat.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from django.core.cache import cache
from django.db.models import (
    Case,
    Count,
    Exists,
    Expression,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    When,
)
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext, gettext_noop
from django.utils.translation import gettext_lazy as _

from annotation.access import campaign_pool_for_user
from annotation.cadence import checks_ahead
from annotation.gold import answer_correct, preference_correct
from annotation.models import (
    AnnotatorExpertise,
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    Campaign,
    CampaignStatus,
    GoldPreference,
    GoldScore,
    HumanPreference,
    HumanScore,
    Item,
    ItemDomain,
    PairChoice,
    Response,
    Screening,
    ScreeningPhase,
    Task,
    TaskKind,
    accepted_assignment_q,
)
from annotation.screening.selectors import screening_failed
from annotation.selectors import (
    PairQuestions,
    TaskSkill,
    item_skills_sql,
    open_normal_tasks,
    pair_questions,
    skills_for_item,
    task_skills,
)
from annotation.services.preferences import choice_to_shown
from flaskweb.db import ModelRow, aware, fetch_one, instance_from, is_postgres

VISIBLE_STATUSES = (CampaignStatus.ACTIVE, CampaignStatus.PAUSED)


@dataclass(frozen=True)
class PairCard:
    """A pair task as shown: the two responses by side (the stored order applied, so no A
    or B and no model name), the questions, and the choices by side (SHOWN_CHOICES)."""

    left: str
    right: str
    questions: PairQuestions
    choices: list[str]  # "left", "right", "tie", "both_bad", in the campaign's order


@dataclass(frozen=True)
class TaskCard:
    """What the annotator is shown for an assignment: no model name, task kind or other
    people's scores."""

    assignment_id: int
    expires_at: datetime
    instruction: str
    reference: str | None  # None when the campaign hides references
    response: str  # a pair task: "" (see `pair`)
    skills: list[TaskSkill]  # ranked; a pair task: the skills compared (pair.questions)
    pair: PairCard | None = None
    #: the annotator's own assignments in the campaign, counted (annotator_progress's `mine`)
    #: when the card was read with `progress_of`
    mine: tuple | None = None


_CARD = f"""
SELECT a.expires_at, c.id, c.updated_at, c.skill_mode, c.show_reference,
       r.item_id, r.text, i.instruction, i.reference_answer, {{skills}},
       rb.text, t.b_left, c.pair_ask, c.pair_choices, c.pair_strength,
       c.pair_rationale{{mine_columns}}
FROM {Assignment._meta.db_table} a
JOIN {Campaign._meta.db_table} c ON c.id = a.campaign_id
JOIN {Task._meta.db_table} t ON t.id = a.task_id
JOIN {Response._meta.db_table} r ON r.id = t.response_id
JOIN {Item._meta.db_table} i ON i.id = r.item_id
LEFT JOIN {Response._meta.db_table} rb ON rb.id = t.response_b_id{{mine}}
WHERE a.id = %s AND a.annotator_id = %s
"""

#: A pair's choices by side, from PairChoice values (A is on the left unless b_left; the
#: page and the API speak only of sides).
_SIDE = {"a": "left", "b": "right"}


def task_card_for_annotator(
    *, user, assignment_id: int, progress_of: Campaign | None = None
) -> TaskCard | None:
    """The user's own assignment as a card; None for anyone else's. One raw statement on
    PostgreSQL (two on SQLite) once the campaign's pinned rubrics are cached. A pair task's
    card has `pair` (both responses in the order shown, the questions). With `progress_of`
    (the assignment's campaign), the same statement counts the user's assignments there
    for annotator_progress (`mine`) on PostgreSQL: the scoring page shows both."""
    skills_sql = item_skills_sql("r.item_id", "c.id")
    with_mine = progress_of is not None and is_postgres()  # SQLite has no LATERAL
    if with_mine:
        mine_join = f"\nCROSS JOIN LATERAL ({_MINE_OF_CARD}) m"
        sql = _CARD.format(skills=skills_sql, mine_columns=", m.*", mine=mine_join)
    else:
        sql = _CARD.format(skills=skills_sql, mine_columns="", mine="")
    row = fetch_one(sql, [assignment_id, user.pk])
    mine = tuple(row[-MINE_COLUMNS:]) if with_mine and row is not None else None
    if row is None:
        return None
    expires_at, campaign_id, updated_at, skill_mode, show_reference = row[:5]
    item_id, text, instruction, reference, item_skills = row[5:10]
    text_b, b_left, pair_ask, pair_choices, pair_strength, pair_rationale = row[10:16]
    campaign = instance_from(
        Campaign,
        {
            "id": campaign_id,
            "updated_at": aware(updated_at),
            "skill_mode": skill_mode,
            "pair_ask": pair_ask,
            "pair_choices": pair_choices,
            "pair_strength": pair_strength,
            "pair_rationale": pair_rationale,
        },
    )
    pair = None
    if text_b is not None:
        questions = pair_questions(campaign=campaign, item_id=item_id, item_skills=item_skills)
        pair = PairCard(
            left=text_b if b_left else text,
            right=text if b_left else text_b,
            questions=questions,
            # A and B become sides the same way for every task: the choice "a" is offered
            # as "left" (the response shown on the left), whatever the stored order.
            choices=[_SIDE.get(c, c) for c in questions.choices],
        )
        skills = questions.skills
    else:
        skills = skills_for_item(item_id=item_id, campaign=campaign, item_skills=item_skills)
    return TaskCard(
        assignment_id=assignment_id,
        expires_at=aware(expires_at),
        instruction=instruction,
        reference=reference if show_reference else None,
        response="" if pair else text,
        skills=skills,
        pair=pair,
        mine=mine,
    )


@dataclass(frozen=True)
class AnnotatorCampaignRow:
    id: int
    name: str
    project_name: str
    status: str
    status_label: str
    done: int  # every task this annotator submitted here, whatever its (hidden) kind
    quota: int | None
    available: int  # tasks this annotator could still be given now (normal ones)
    has_open_task: bool
    active_ms: int = 0  # focused time of their submitted tasks here
    checks: int = 0  # submitted tasks that fill no quota (gold, repeats, screening)
    screened_out: bool = False  # failed the campaign's qualification test
    planned_total: int | None = None  # AnnotatorProgress.total, for a campaign with checks

    @property
    def can_start(self) -> bool:
        if self.screened_out:
            return False
        return self.has_open_task or (self.status == CampaignStatus.ACTIVE and self.available > 0)

    @property
    def total(self) -> int:
        """As AnnotatorProgress.total (which a campaign with screening or checks reads):
        the quota and the checks done, else done + held + open to them now."""
        if self.planned_total is not None:
            return self.planned_total
        if self.quota is not None:
            return max(self.quota + self.checks, self.done)
        return self.done + int(self.has_open_task) + self.available

    @property
    def percent(self) -> int:
        if self.total <= 0:
            return 100 if self.done else 0
        return max(0, min(100, round(100 * self.done / self.total)))

    @property
    def spent(self) -> str:
        return spent_label(self.active_ms)


def campaign_list_for_annotator(*, user) -> list[AnnotatorCampaignRow]:
    """The user's active and paused campaigns with their own progress, in two queries.

    `done` counts every submitted task, gold and repeats included: counting only the ones
    that fill the quota would let an annotator tell afterwards which tasks were gold.
    """
    never_mine = ~Exists(
        Assignment.objects.filter(
            task_id=OuterRef("pk"), annotator=user, kind=AssignmentKind.NORMAL
        )
    )
    open_tasks = Task.objects.filter(
        campaign_id=OuterRef("pk"), kind=TaskKind.NORMAL, assigned__lt=F("overlap")
    ).filter(never_mine)
    available: Expression = _count(open_tasks)
    domains = list(AnnotatorExpertise.objects.filter(user=user).values_list("domain_id", flat=True))
    if domains:
        routed = open_tasks.filter(
            Exists(
                ItemDomain.objects.filter(
                    item_id=OuterRef("response__item_id"), domain_id__in=domains
                )
            )
        )
        available = Case(
            When(route_by_domain=True, then=_count(routed)),
            default=available,
            output_field=IntegerField(),
        )
    campaigns = (
        campaign_pool_for_user(user=user)
        .filter(status__in=VISIBLE_STATUSES)
        .select_related("project")
        .annotate(
            n_done=Count(
                "assignments",
                filter=Q(
                    assignments__annotator=user,
                    assignments__status=AssignmentStatus.SUBMITTED,
                ),
            ),
            n_ms=Sum(
                "assignments__active_ms",
                filter=Q(
                    assignments__annotator=user,
                    assignments__status=AssignmentStatus.SUBMITTED,
                ),
            ),
            n_quota_done=Count(
                "assignments",
                filter=Q(assignments__annotator=user) & accepted_assignment_q(path="assignments__"),
            ),
            n_available=available,
            screened_out=Exists(
                Screening.objects.filter(
                    campaign_id=OuterRef("pk"), annotator=user, phase=ScreeningPhase.FAILED
                )
            ),
            has_open=Exists(
                Assignment.objects.filter(
                    campaign_id=OuterRef("pk"),
                    annotator=user,
                    status=AssignmentStatus.ACTIVE,
                    expires_at__gt=timezone.now(),
                )
            ),
        )
        .order_by("status", "name")  # active before paused
    )
    rows = []
    for c in campaigns:
        left = 0 if c.screened_out else c.n_available
        if c.quota_per_annotator is not None:
            left = max(0, min(left, c.quota_per_annotator - c.n_quota_done))
        rows.append(
            AnnotatorCampaignRow(
                id=c.pk,
                name=c.name,
                project_name=c.project.name,
                status=c.status,
                status_label=c.get_status_display(),
                done=c.n_done,
                quota=c.quota_per_annotator,
                available=left,
                has_open_task=c.has_open,
                active_ms=c.n_ms or 0,
                checks=max(0, c.n_done - c.n_quota_done),
                screened_out=c.screened_out,
                # checks to come (a few queries, for the campaigns that have them)
                planned_total=(
                    annotator_progress(campaign=c, user=user).total
                    if has_checks(c) and not c.screened_out
                    else None
                ),
            )
        )
    return rows


def has_checks(campaign: Campaign) -> bool:
    """Whether the campaign serves tasks that fill no quota: screening, gold, repeats."""
    return bool(campaign.screening or campaign.gold_rate > 0 or campaign.repeat_rate > 0)


def _count(queryset: QuerySet) -> Coalesce:
    counted = queryset.order_by().values("campaign_id").annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


# --- the scoring card ------------------------------------------------------------------------


_ASSIGNMENT_ROW = ModelRow(Assignment, "a")
_CAMPAIGN_ROW = ModelRow(Campaign, "c")
_TASK_ROW = ModelRow(Task, "t")
_assignment_sql: str | None = None


@dataclass(frozen=True)
class AssignmentRead:
    """An annotator's assignment with its campaign and task, and what a submission of it
    reads besides: the item of its response and the skills the campaign asks of that item
    (`item_skills_sql`'s value; None on SQLite)."""

    assignment: Assignment
    item_id: int
    item_skills: object


def assignment_read_for_annotator(*, user, assignment_id: int) -> AssignmentRead:
    """The user's own assignment with its campaign and task loaded, and its item and asked
    skills; raises Assignment.DoesNotExist for anyone else's. Every submit and skip of the
    scoring page starts here: one fixed statement (the ORM's select_related built it in about
    three times the time PostgreSQL took to run it), which also holds everything the
    submission's first round reads (`submit_read_of_assignment`), so a scoring card's submit
    reads the assignment once. The response and item load on first use, which only a card
    redrawn with an error does."""
    global _assignment_sql
    if _assignment_sql is None:
        _assignment_sql = (
            f"SELECT {_ASSIGNMENT_ROW.columns}, {_CAMPAIGN_ROW.columns}, {_TASK_ROW.columns}, "
            f"r.item_id, {item_skills_sql('r.item_id', 'c.id')} "
            f"FROM {Assignment._meta.db_table} a "
            f"JOIN {Campaign._meta.db_table} c ON c.id = a.campaign_id "
            f"JOIN {Task._meta.db_table} t ON t.id = a.task_id "
            f"JOIN {Response._meta.db_table} r ON r.id = t.response_id "
            "WHERE a.id = %s AND a.annotator_id = %s"
        )
    row = fetch_one(_assignment_sql, [assignment_id, user.pk])
    if row is None:
        raise Assignment.DoesNotExist("no such assignment of this annotator")
    split = len(_ASSIGNMENT_ROW)
    end = split + len(_CAMPAIGN_ROW)
    last = end + len(_TASK_ROW)
    assignment = cast(Assignment, _ASSIGNMENT_ROW.instance(row[:split]))
    assignment.campaign = cast(Campaign, _CAMPAIGN_ROW.instance(row[split:end]))
    assignment.task = cast(Task, _TASK_ROW.instance(row[end:last]))
    return AssignmentRead(assignment=assignment, item_id=row[last], item_skills=row[last + 1])


def assignment_get_for_annotator(*, user, assignment_id: int) -> Assignment:
    """The user's own assignment with its campaign and task loaded (assignment_read_for_
    annotator); raises Assignment.DoesNotExist for anyone else's."""
    return assignment_read_for_annotator(user=user, assignment_id=assignment_id).assignment


def assignment_done_count(*, campaign: Campaign, user) -> int:
    return Assignment.objects.filter(
        campaign=campaign, annotator=user, status=AssignmentStatus.SUBMITTED
    ).count()


# --- progress and pace ----------------------------------------------------------------------


@dataclass(frozen=True)
class AnnotatorProgress:
    """One annotator's progress in one campaign, as the scoring page, My tasks and the
    progress API show it.

    `done` counts every task they submitted here (gold and repeats included, as My tasks
    does: counting only the ones that fill the quota would tell which were checks). `total`
    adds to `done` the task they hold, the normal tasks still to come (up to their quota
    when the campaign sets one, else the ones open to them now: that shrinks as others take
    tasks) and the screening tasks and checks the claim will serve among them. `checks`
    counts the checks done or held. `active_ms` sums the focused time of their submitted
    tasks."""

    done: int
    total: int
    by_quota: bool
    active_ms: int
    checks: int
    break_every: int | None
    break_minutes: int
    with_checks: bool = False  # the campaign serves checks (has_checks), counted in `total`
    # submitted tasks that count toward breaks: all but screening (training, qualification)
    # ones, which come before any real task and are labelled as such; gold tasks and repeats
    # count, as leaving them out would tell which tasks were checks
    paced: int = 0

    @property
    def percent(self) -> int:
        if self.total <= 0:
            return 100 if self.done else 0
        return max(0, min(100, round(100 * self.done / self.total)))

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.done)

    @property
    def spent(self) -> str:
        return spent_label(self.active_ms)

    @property
    def until_break(self) -> int | None:
        """Tasks left before the next suggested break; None without breaks. Screening tasks
        neither count nor bring a break (`paced`)."""
        if not self.break_every:
            return None
        return self.break_every - self.paced % self.break_every

    @property
    def break_due(self) -> bool:
        """A break is suggested now: the last task that counts (`paced`) completed a round
        of `break_every` tasks."""
        return bool(self.break_every) and self.paced > 0 and self.until_break == self.break_every

    def as_json(self) -> dict:
        return {
            "done": self.done,
            "total": self.total,
            "total_is_quota": self.by_quota,
            "remaining": self.remaining,
            "percent": self.percent,
            "active_ms": self.active_ms,
            "break_every": self.break_every,
            "break_minutes": self.break_minutes if self.break_every else None,
            "tasks_until_break": self.until_break,
            "break_due": self.break_due,
        }


def spent_label(ms: int) -> str:
    """Focused time as an annotator reads it: "under a minute", "23 min", "1 h 5 min"."""
    minutes = round(ms / 60000)
    if minutes < 1:
        return gettext("under a minute")
    if minutes < 60:
        return gettext("%(minutes)d min") % {"minutes": minutes}
    return gettext("%(hours)d h %(minutes)d min") % {
        "hours": minutes // 60,
        "minutes": minutes % 60,
    }


#: How long an annotator's total (without a quota) is reused: counting the tasks still open
#: to them scans the campaign's free tasks (14.7 ms at 10,000 tasks, measured), too much for
#: every card. Their own claims, submissions and skips do not change the total; only other
#: annotators' work does, and a minute late is soon enough for a progress bar.
TOTAL_CACHE_SECONDS = 60


def _total_key(campaign: Campaign, user_id: int) -> str:
    """Keyed by the campaign's last change as well as its id: an edit of the campaign counts
    again at once, and an id seen again (SQLite gives a rolled-back id out again; a restored
    backup gives out the ids made after it) never meets another campaign's total."""
    return f"annotate:progress-total:{campaign.pk}:{campaign.updated_at.timestamp()}:{user_id}"


#: The task kinds that are not normal: a campaign has a few such tasks (screening, gold and
#: attention checks) beside thousands of normal ones.
_CHECK_KINDS = ", ".join(f"'{kind}'" for kind in TaskKind.values if kind != TaskKind.NORMAL)


def _mine_sql(a: str, t: str, campaign: str, where: str) -> str:
    """The annotator's own assignments in a campaign, counted: done, active_ms, holding,
    checks, served, normal submitted, normal holding, repeats, paced (annotator_progress).
    A task's kind comes from the campaign's few tasks that are not normal (a hash of them),
    not from a probe of the task table per assignment: that join cost 0.4 ms per card for
    an annotator with 400 tasks done, and grew with each one."""
    kind = f"COALESCE({t}.kind, 'normal')"
    return f"""
SELECT COUNT(*) FILTER (WHERE {a}.status = 'submitted') AS done,
       COALESCE(SUM({a}.active_ms) FILTER (WHERE {a}.status = 'submitted'), 0) AS ms,
       COUNT(*) FILTER (WHERE {a}.status = 'active') AS holding,
       COUNT(*) FILTER (WHERE {a}.status IN ('submitted', 'active')
                        AND ({a}.kind <> 'normal' OR {kind} <> 'normal')) AS checks,
       COUNT(*) AS served,
       COUNT(*) FILTER (WHERE {a}.status = 'submitted' AND {a}.kind = 'normal'
                        AND {kind} = 'normal') AS normal_submitted,
       COUNT(*) FILTER (WHERE {a}.status = 'active' AND {a}.kind = 'normal'
                        AND {kind} = 'normal') AS normal_holding,
       COUNT(*) FILTER (WHERE {a}.kind = 'repeat') AS repeats,
       COUNT(*) FILTER (WHERE {a}.status = 'submitted'
                        AND {kind} NOT IN ('training', 'qualification')) AS paced
FROM {Assignment._meta.db_table} {a}
LEFT JOIN (SELECT id, kind FROM {Task._meta.db_table}
           WHERE campaign_id = {campaign} AND kind IN ({_CHECK_KINDS})) {t}
       ON {t}.id = {a}.task_id
WHERE {where}
"""


#: The annotator's own assignments in the campaign: submitted, their focused time, held, and
#: of those submitted or held the checks (gold, attention, repeats, screening tasks), which
#: count in `done` but never among the normal tasks open to them; then what the cadence of
#: checks reads (annotation/cadence.py): every assignment served, the normal tasks submitted
#: or held, and the repeats served; last the submitted ones that count toward breaks (all
#: but screening tasks).
#: Parameters: the campaign twice, the annotator.
_MINE = _mine_sql("a", "t", "%s", "a.campaign_id = %s AND a.annotator_id = %s")
#: The same for the card's assignment `a` (PostgreSQL: a LATERAL join of the card statement;
#: with the campaign and annotator as parameters instead, PostgreSQL kept planning the joined
#: statement anew on each run, twice the two statements' time).
_MINE_OF_CARD = _mine_sql(
    "ma",
    "mt",
    "a.campaign_id",
    "ma.campaign_id = a.campaign_id AND ma.annotator_id = a.annotator_id",
)
#: Columns of _MINE.
MINE_COLUMNS = 9

SCREENING_KINDS = (TaskKind.TRAINING, TaskKind.QUALIFICATION)


def _never_served(*, campaign: Campaign, user, kinds) -> int:
    """The campaign's tasks of `kinds` that `user` was never served."""
    return (
        Task.objects.filter(campaign=campaign, kind__in=kinds)
        .filter(~Exists(Assignment.objects.filter(task_id=OuterRef("pk"), annotator=user)))
        .count()
    )


def _checks_to_come(*, campaign: Campaign, user, normal_left: int, mine: tuple) -> int:
    """The screening tasks and checks `user` will still be served before `normal_left` more
    normal tasks (annotation/cadence.py): counted now in the total, so that it stays put
    as they come. A small query each, only for campaigns that have them."""
    served, normal_submitted, repeats = mine
    screening = 0
    if campaign.screening:
        phase = (
            Screening.objects.filter(campaign=campaign, annotator=user)
            .values_list("phase", flat=True)
            .first()
        )
        if phase not in (ScreeningPhase.PASSED, ScreeningPhase.FAILED):
            kinds: tuple[str, ...] = SCREENING_KINDS
            if phase == ScreeningPhase.QUALIFICATION:
                kinds = (TaskKind.QUALIFICATION,)
            screening = _never_served(campaign=campaign, user=user, kinds=kinds)
    if campaign.gold_rate <= 0 and campaign.repeat_rate <= 0:
        return screening
    gold_left = 0
    if campaign.gold_rate > 0:
        gold_left = _never_served(
            campaign=campaign, user=user, kinds=(TaskKind.GOLD, TaskKind.ATTENTION)
        )
    return screening + checks_ahead(
        normal_left=normal_left,
        # the screening tasks still to come are served before any of these
        served=served + screening,
        gold_rate=campaign.gold_rate,
        repeat_rate=campaign.repeat_rate,
        gold_left=gold_left,
        normal_submitted=normal_submitted,
        repeats=repeats,
        quota=campaign.quota_per_annotator is not None,
    )


def annotator_progress(*, campaign: Campaign, user, mine: tuple | None = None) -> AnnotatorProgress:
    """`user`'s progress in `campaign`. One fixed statement reads their own assignments (a
    range of the `assignment_mine` index: 0.05 ms). The total is what they did and hold,
    the normal tasks still to come — up to their quota when the campaign sets one, else the
    ones open to them now (a second query, cached for TOTAL_CACHE_SECONDS, as their own
    claims and submissions do not change that sum) — and the screening tasks, gold tasks
    and repeats the claim will serve among those (annotation/cadence.py), so the total
    does not grow as checks are served. `mine`: that statement's row when the caller's
    statement read it (`task_card_for_annotator` with `progress_of`)."""
    row = fetch_one(_MINE, [campaign.pk, campaign.pk, user.pk]) if mine is None else mine
    assert row is not None  # an aggregate always answers one row
    done, ms, holding, checks, served, normal_submitted, normal_holding, repeats, paced = (
        int(v or 0) for v in row
    )
    by_quota = campaign.quota_per_annotator is not None
    if campaign.quota_per_annotator is not None:
        normal_left = max(0, campaign.quota_per_annotator - normal_submitted - normal_holding)
    else:
        # all the normal tasks they did, hold or could still get: their own claims and
        # submissions move tasks between those parts and leave the sum as it is
        key = _total_key(campaign, user.pk)
        normal_total = cache.get(key)
        if normal_total is None:
            open_now = (
                Campaign.objects.filter(pk=campaign.pk)
                .annotate(n_open=_count(open_normal_tasks(user=user)))
                .values_list("n_open", flat=True)
                .get()
            )
            normal_total = normal_submitted + normal_holding + int(open_now)
            cache.set(key, normal_total, TOTAL_CACHE_SECONDS)
        normal_left = max(0, int(normal_total) - normal_submitted - normal_holding)
    to_come = _checks_to_come(
        campaign=campaign,
        user=user,
        normal_left=normal_left,
        mine=(served, normal_submitted, repeats),
    )
    total = done + holding + normal_left + to_come
    return AnnotatorProgress(
        done=done,
        total=total,
        by_quota=by_quota,
        active_ms=ms,
        checks=checks,
        with_checks=has_checks(campaign),
        break_every=campaign.break_every,
        break_minutes=campaign.break_minutes,
        paced=paced,
    )


#: Why a claim came back empty: the code the API sends (the No-Task-Reason header, a chained
#: submit's `next_reason`) -> the words the annotate page shows (marked for the catalogue here,
#: translated by the view that shows them).
NO_TASK_MESSAGES = {
    "campaign_draft": gettext_noop("This campaign has not started yet."),
    "campaign_paused": gettext_noop("This campaign is paused for now. Please come back later."),
    "campaign_finished": gettext_noop("This campaign is finished. Thank you for your work!"),
    "quota_reached": gettext_noop("You have reached your quota for this campaign. Thank you!"),
    "screened_out": gettext_noop(
        "Thank you for taking the qualification test. Your answers did not reach the "
        "agreement this study needs, so it has no further tasks for you. We appreciate "
        "your time."
    ),
    "no_task_available": gettext_noop(
        "There is nothing for you to score right now: every response has enough "
        "annotators, or you have scored all the ones you can. Thank you!"
    ),
}


def no_task_reason(*, campaign: Campaign, user) -> str:
    """Why `user` has no task in `campaign` now, as a key of NO_TASK_MESSAGES: the campaign
    is not active (draft, paused, finished), the user failed the campaign's screening, the
    user's quota is met (their accepted assignments, Assignment.objects.accepted), or
    nothing is left for them. Ask it right after an empty claim. It re-reads the campaign's
    status, quota and screening flag into `campaign` (one query): the caller may hold a
    stub (the API) or an instance read before the claim, and the reason must be the
    campaign's state now."""
    campaign.refresh_from_db(fields=["status", "quota_per_annotator", "screening"])
    if campaign.status != CampaignStatus.ACTIVE:
        return f"campaign_{campaign.status}"
    if campaign.screening and screening_failed(campaign=campaign, user=user):
        return "screened_out"
    if campaign.quota_per_annotator is not None:
        counted = Assignment.objects.filter(campaign=campaign, annotator=user).accepted().count()
        if counted >= campaign.quota_per_annotator:
            return "quota_reached"
    return "no_task_available"


# --- gold feedback (only when the campaign enables it) ---------------------------------------


@dataclass(frozen=True)
class GoldFeedbackRow:
    skill_name: str
    given: str  # "1".."5" or "N/A"
    known: str
    tolerance: int
    agrees: bool


@dataclass(frozen=True)
class GoldFeedback:
    rows: list[GoldFeedbackRow]
    explanations: list[str]
    pair: bool = False  # rows are choices by side (a pair task), not scores
    # known answers for questions this task did not ask: compared with nothing, so left out
    # (a known-answer task whose item's skills changed under it)
    unasked: list[str] = field(default_factory=list)

    @property
    def compared(self) -> bool:
        """Whether any of the annotator's answers was compared with a known one."""
        return bool(self.rows)

    @property
    def all_agree(self) -> bool:
        """Every compared answer matches; False when nothing was compared (an empty table
        is no match)."""
        return self.compared and all(r.agrees for r in self.rows)


def gold_feedback_for_assignment(*, assignment: Assignment) -> GoldFeedback | None:
    """The known scores next to the annotator's own, for a submitted gold or attention
    task, or a training task of screening (always shown); for a pair task, the known
    choices next to theirs, by the sides they saw. None for any other task (the caller
    never learns more than that)."""
    if assignment.task.kind not in (TaskKind.GOLD, TaskKind.ATTENTION, TaskKind.TRAINING):
        return None
    if assignment.kind != AssignmentKind.NORMAL:
        return None
    if assignment.task.response_b_id is not None:
        return _pair_feedback(assignment)
    asked = _asked_order(assignment)
    known = {
        g.skill_id: g
        for g in sorted(
            GoldScore.objects.filter(task_id=assignment.task_id)
            .select_related("skill")
            .order_by("skill__order", "skill__name"),
            key=lambda g: asked.get(g.skill_id, len(asked)),
        )
    }
    given = {
        s.skill_id: s
        for s in HumanScore.objects.filter(assignment_id=assignment.pk).select_related("skill")
    }
    rows = []
    explanations: list[str] = []
    unasked: list[str] = []
    for skill_id, gold in known.items():
        if gold.explanation and gold.explanation not in explanations:
            explanations.append(gold.explanation)
        mine = given.get(skill_id)
        if mine is None:
            unasked.append(gold.skill.name)  # a known score for a skill this task did not ask
            continue
        rows.append(
            GoldFeedbackRow(
                skill_name=gold.skill.name,
                given="N/A" if mine.is_na else str(mine.score),
                known="N/A" if gold.is_na else str(gold.score),
                tolerance=gold.tolerance,
                agrees=_agrees(mine, gold),
            )
        )
    # an explanation of scores nobody was asked for would explain something else
    return GoldFeedback(rows=rows, explanations=explanations if rows else [], unasked=unasked)


def _asked_order(assignment: Assignment) -> dict[int | None, int]:
    """Skill id -> its place on the task's form (task_skills: the item's ranked skills or
    the campaign's fixed set), so the feedback lists skills in the order they were asked;
    a pair's overall question (no skill) comes after them, as on the pair card."""
    order: dict[int | None, int] = {
        skill.skill_id: n for n, skill in enumerate(task_skills(assignment=assignment))
    }
    order[None] = len(order)
    return order


#: A choice as the pair card showed it (its side, annotation/services/preferences.py
#: choice_to_shown): the card calls the left response A and the right one B, whatever the
#: stored order, so these labels name sides, never the pair's stored A and B.
SHOWN_CHOICE_LABELS = {
    "left": _("Left (A) is better"),
    "right": _("Right (B) is better"),
    PairChoice.TIE.value: _("Tie"),
    PairChoice.BOTH_BAD.value: _("Both are bad"),
}


def _pair_feedback(assignment: Assignment) -> GoldFeedback:
    """A gold pair's known choices next to the annotator's, per question (skill, then
    overall), each turned to the side it was shown on with the task's `b_left`."""
    b_left = assignment.task.b_left
    given = {
        p.skill_id: p.choice
        for p in HumanPreference.objects.filter(assignment_id=assignment.pk).only(
            "skill_id", "choice"
        )
    }
    asked = _asked_order(assignment)
    known = sorted(
        GoldPreference.objects.filter(task_id=assignment.task_id)
        .order_by(F("skill__order").asc(nulls_last=True), "skill__name")
        .values("skill_id", "skill__name", "choice", "explanation"),
        key=lambda gold: asked.get(gold["skill_id"], len(asked)),
    )
    rows = []
    explanations: list[str] = []
    unasked: list[str] = []
    for gold in known:
        if gold["explanation"] and gold["explanation"] not in explanations:
            explanations.append(gold["explanation"])
        mine = given.get(gold["skill_id"])
        if mine is None:
            # a known choice for a question this task did not ask
            unasked.append(gold["skill__name"] or gettext("Overall"))
            continue
        rows.append(
            GoldFeedbackRow(
                skill_name=gold["skill__name"] or gettext("Overall"),
                given=str(SHOWN_CHOICE_LABELS[choice_to_shown(mine, b_left=b_left)]),
                known=str(SHOWN_CHOICE_LABELS[choice_to_shown(gold["choice"], b_left=b_left)]),
                tolerance=0,
                agrees=preference_correct(given=mine, known=gold["choice"]),
            )
        )
    return GoldFeedback(
        rows=rows, explanations=explanations if rows else [], pair=True, unasked=unasked
    )


def _agrees(mine: HumanScore, gold: GoldScore) -> bool:
    """The one gold rule (annotation/gold.py) on a score and its known score."""
    return answer_correct(
        given=None if mine.is_na else mine.score,
        known=None if gold.is_na else gold.score,
        tolerance=gold.tolerance,
    )
