"""The annotator workflow: claim the next task, submit scores, skip, flag, edit, expire.

See annotation/ASSIGNMENT.md for the selection policy and annotation/locks.py for the lock
order. Every function here is one short transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from annotation import locks
from annotation.annotator_selectors import IN_POOL_SQL
from annotation.models import (
    AnnotatorExpertise,
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    Campaign,
    CampaignStatus,
    HumanScore,
    HumanScoreRevision,
    ItemDomain,
    Response,
    Task,
    TaskKind,
)
from annotation.parsers import ScoreRefused, score_read
from annotation.selectors import (
    TaskSkill,
    item_skills_sql,
    pins_cache_clear,
    skills_for_item,
    task_skills,
)
from flaskweb.db import (
    aware,
    db_datetime,
    execute,
    fetch_one,
    for_update,
    instance_from,
    is_postgres,
)

MAX_RATIONALE = 2000
REPEAT_MIN_GAP = 5


class AssignmentError(Exception):
    """A request the workflow refuses, with a message for the annotator."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


# --- pool ---------------------------------------------------------------------------------------


# --- claim ----------------------------------------------------------------------------------------


_A = Assignment._meta.db_table
_T = Task._meta.db_table
_C = Campaign._meta.db_table

# The campaign's claim settings, whether the annotator is in its pool (directly or through a
# group) and the annotator's current lease, in one statement. Params: user, user, campaign,
# user, now, campaign.
_CLAIM_STATE = f"""
SELECT c.status, c.quota_per_annotator, c.lease_seconds, c.gold_rate, c.repeat_rate,
       c.overlap, c.route_by_domain, {IN_POOL_SQL}, a.id, a.expires_at
FROM {_C} c
LEFT JOIN {_A} a ON a.campaign_id = c.id AND a.annotator_id = %s AND a.status = 'active'
WHERE c.id = %s
"""
_ASSIGNMENT_FIELDS = ("id", "task_id", "kind", "status", "expires_at")
_ASSIGNMENT_GET = f"SELECT {', '.join(_ASSIGNMENT_FIELDS)} FROM {_A} WHERE id = %s"
_SUBMITTED_NORMAL = f"""
SELECT COUNT(*) FROM {_A} a JOIN {_T} t ON t.id = a.task_id
WHERE a.campaign_id = %s AND a.annotator_id = %s AND a.status = 'submitted'
  AND a.kind = 'normal' AND t.kind = 'normal'
"""
_SERVED = f"SELECT COUNT(*) FROM {_A} WHERE campaign_id = %s AND annotator_id = %s"
_ROUTING = f"""
  AND (NOT EXISTS (SELECT 1 FROM {AnnotatorExpertise._meta.db_table} e WHERE e.user_id = %s)
       OR EXISTS (SELECT 1 FROM {Response._meta.db_table} r
                  JOIN {ItemDomain._meta.db_table} d ON d.item_id = r.item_id
                  JOIN {AnnotatorExpertise._meta.db_table} e
                    ON e.domain_id = d.domain_id AND e.user_id = %s
                  WHERE r.id = t.response_id))"""
# Take a slot of the open normal task to fill first (most covered, then oldest) that this
# annotator never had, skipping rows other claims hold. `t.assigned < %s` repeats
# `assigned < overlap` with the campaign's K (no task's overlap exceeds it: activation sets
# both, and re-annotation raises K with any task it raises above it) so
# that the scan of the task_claim_order index starts below K instead of walking every
# complete task first: with 9,000 of 10,000 tasks complete, 0.64 ms -> 0.015 ms per claim.
# `OFFSET 0` (PostgreSQL) keeps NOT EXISTS a per-row probe of the (task, annotator, kind)
# index: pulled up into an anti-join, the planner may materialise all of the annotator's
# assignments and compare each candidate with each (seen: 49 ms instead of 2.8 ms when the
# statistics predated the annotator's work).
_PICK_NORMAL = f"""
  SELECT t.id FROM {_T} t
  WHERE t.campaign_id = %s AND t.kind = 'normal' AND t.assigned < t.overlap AND t.assigned < %s
    AND NOT EXISTS (SELECT 1 FROM {_A} u
                    WHERE u.task_id = t.id AND u.annotator_id = %s AND u.kind = 'normal'{{fence}})
    {{routing}}
  ORDER BY t.assigned DESC, t.id LIMIT 1{{lock}}"""
_TAKE_SLOT = f"UPDATE {_T} SET assigned = assigned + 1 WHERE id = ({_PICK_NORMAL}) RETURNING id"
_LEASE_COLUMNS = """task_id, campaign_id, annotator_id, kind, status, expires_at, submitted_at,
                    active_ms, skip_reason, flagged, flag_reason, created_at, updated_at"""
_LEASE_VALUES = "%s, %s, 'normal', 'active', %s, NULL, NULL, '', %s, '', %s, %s"
_INSERT_ASSIGNMENT = (
    f"INSERT INTO {_A} ({_LEASE_COLUMNS}) VALUES (%s, {_LEASE_VALUES}) RETURNING id, task_id"
)
# PostgreSQL: slot and lease in one statement (a data-modifying CTE; SQLite has none).
_CLAIM_NORMAL_PG = f"""
WITH picked AS ({_TAKE_SLOT})
INSERT INTO {_A} ({_LEASE_COLUMNS}) SELECT picked.id, {_LEASE_VALUES} FROM picked
RETURNING id, task_id
"""

# PostgreSQL, the common case in ONE statement run on its own (no BEGIN/COMMIT round trips):
# read the claim state and, when nothing special applies (in the pool, no lease held,
# campaign active, no quota, gold, repeats or routing), take a slot and write the lease.
# Otherwise it writes nothing and returns the state, and the transactional path takes over.
# Params: user, user, user, campaign, campaign, user, campaign, user, now, now, now.
_CLAIM_ONE_STATEMENT = f"""
WITH st AS (
  SELECT c.status, c.quota_per_annotator, c.lease_seconds, c.gold_rate, c.repeat_rate,
         c.overlap, c.route_by_domain, {IN_POOL_SQL} AS in_pool, a.id AS lease_id,
         a.expires_at AS lease_expires_at
  FROM {_C} c
  LEFT JOIN {_A} a ON a.campaign_id = c.id AND a.annotator_id = %s AND a.status = 'active'
  WHERE c.id = %s
), go AS (
  SELECT overlap, lease_seconds FROM st
  WHERE in_pool AND lease_id IS NULL AND status = 'active' AND quota_per_annotator IS NULL
    AND gold_rate <= 0 AND repeat_rate <= 0 AND NOT route_by_domain
), picked AS (
  UPDATE {_T} SET assigned = assigned + 1
  WHERE id = ({_PICK_NORMAL.replace("t.assigned < %s", "t.assigned < (SELECT overlap FROM go)")})
  RETURNING id
), lease AS (
  INSERT INTO {_A} ({_LEASE_COLUMNS})
  SELECT picked.id, %s, %s, 'normal', 'active',
         %s::timestamptz + make_interval(secs => go.lease_seconds),
         NULL, NULL, '', false, '', %s::timestamptz, %s::timestamptz
  FROM picked, go
  RETURNING id, task_id, expires_at
)
SELECT st.*, lease.id, lease.task_id, lease.expires_at FROM st LEFT JOIN lease ON true
""".format(routing="", fence=" OFFSET 0", lock=" FOR UPDATE OF t SKIP LOCKED")


@dataclass(frozen=True)
class _ClaimState:
    status: str
    quota: int | None
    lease_seconds: int
    gold_rate: float
    repeat_rate: float
    overlap: int
    route_by_domain: bool
    in_pool: bool
    lease_id: int | None  # the annotator's active lease here, if any (at most one)
    lease_expires_at: object


def assignment_claim_next(*, campaign: Campaign, annotator) -> Assignment | None:
    """The annotator's current or next task as an active lease; None when there is none.

    Policy: annotation/ASSIGNMENT.md. Concurrency: the normal-task pick locks one Task row
    with SKIP LOCKED; the slot and the lease are written in the same transaction. The
    campaign's status and pool are read here, inside the claim, whatever `campaign` holds.

    An annotator holds at most one active lease per campaign (a partial UNIQUE index).
    Two tabs claiming at the same instant both find none and both claim; the second one's
    lease waits on the index for the first to commit, then fails, and that claim is run
    again: it resumes the first tab's task. No lock is taken for the common case.

    On PostgreSQL the common case is one statement (`_CLAIM_ONE_STATEMENT`); resuming a
    lease, gold, repeats, quotas, routing and SQLite take the transactional path.
    """
    if is_postgres():
        try:
            done, claimed = _claim_in_one_statement(campaign, annotator)
        except IntegrityError:
            done, claimed = False, None  # another tab's lease won: resume it below
        if done:
            return claimed
    try:
        return _claim(campaign, annotator)
    except IntegrityError:
        return _claim(campaign, annotator)


def _claim_in_one_statement(campaign: Campaign, annotator) -> tuple[bool, Assignment | None]:
    """(True, lease or None) when the one statement settled the claim; (False, None) when
    the transactional path must decide. Run on its own in autocommit; inside a caller's
    transaction it gets a savepoint, so a lost race does not spoil that transaction."""
    now = timezone.now()
    params = [
        annotator.pk,
        annotator.pk,
        annotator.pk,
        campaign.pk,
        campaign.pk,
        annotator.pk,
        campaign.pk,
        annotator.pk,
        now,
        now,
        now,
    ]
    if connection.in_atomic_block:
        with transaction.atomic():
            row = fetch_one(_CLAIM_ONE_STATEMENT, params)
    else:
        row = fetch_one(_CLAIM_ONE_STATEMENT, params)
    if row is None:
        return True, None  # no such campaign
    state = _ClaimState(
        *row[:7], in_pool=bool(row[7]), lease_id=row[8], lease_expires_at=aware(row[9])
    )
    lease_id, task_id, expires_at = row[10:]
    if lease_id is not None:
        lease = _new_lease(lease_id, task_id, campaign.pk, annotator.pk, aware(expires_at), now)
        return True, lease
    if not state.in_pool:
        return True, None
    plain = (
        state.lease_id is None
        and state.status == CampaignStatus.ACTIVE
        and state.quota is None
        and state.gold_rate <= 0
        and state.repeat_rate <= 0
        and not state.route_by_domain
    )
    return (True, None) if plain else (False, None)  # plain: no open task for this annotator


@transaction.atomic
def _claim(campaign: Campaign, annotator) -> Assignment | None:
    now = timezone.now()
    row = fetch_one(_CLAIM_STATE, [annotator.pk, annotator.pk, annotator.pk, campaign.pk])
    if row is None:
        return None
    state = _ClaimState(
        *row[:7], in_pool=bool(row[7]), lease_id=row[8], lease_expires_at=aware(row[9])
    )
    if not state.in_pool:
        return None
    if state.lease_id is not None:
        if state.lease_expires_at > now:
            return _assignment_stub(state.lease_id, campaign.pk, annotator.pk)
        # Lapsed but not yet swept: expire it now, so it frees its slot and the new lease.
        _expire_one(state.lease_id)
    if state.status != CampaignStatus.ACTIVE:
        return None
    if state.quota is not None:
        (done,) = fetch_one(_SUBMITTED_NORMAL, [campaign.pk, annotator.pk])
        if done >= state.quota:
            return None
    lease = now + timedelta(seconds=state.lease_seconds)
    # Counted only when a rate needs it: most campaigns have neither gold nor repeats.
    served = 0
    if state.gold_rate > 0 or state.repeat_rate > 0:
        (served,) = fetch_one(_SERVED, [campaign.pk, annotator.pk])
    if _every(state.gold_rate, served):
        gold = _claim_gold(campaign, annotator, lease)
        if gold is not None:
            return gold
    if _every(state.repeat_rate, served):
        repeat = _claim_repeat(campaign, annotator, lease)
        if repeat is not None:
            return repeat
    return _claim_normal(campaign.pk, annotator.pk, state, now, lease)


def _assignment_stub(assignment_id: int, campaign_id: int, annotator_id: int) -> Assignment:
    """An assignment read with one raw statement; other fields load on first access."""
    values = fetch_one(_ASSIGNMENT_GET, [assignment_id])
    fields = dict(zip(_ASSIGNMENT_FIELDS, values, strict=True))
    fields["expires_at"] = aware(fields["expires_at"])
    fields.update(campaign_id=campaign_id, annotator_id=annotator_id)
    return _assignment(fields)


def _every(rate: float, served: int) -> bool:
    """True for every round(1/rate)-th task (deterministic, so testable and fair)."""
    if rate <= 0:
        return False
    period = max(2, round(1 / rate))
    return served % period == period - 1


def _not_mine(annotator, kind: str = AssignmentKind.NORMAL):
    return ~Exists(Assignment.objects.filter(task=OuterRef("pk"), annotator=annotator, kind=kind))


def _claim_normal(
    campaign_id: int, annotator_id: int, state: _ClaimState, now, lease
) -> Assignment | None:
    pick = [campaign_id, state.overlap, annotator_id]
    routing = ""
    if state.route_by_domain:
        routing = _ROUTING
        pick += [annotator_id, annotator_id]
    stamp = db_datetime(now)
    lease_values = [campaign_id, annotator_id, db_datetime(lease), False, stamp, stamp]
    if is_postgres():
        sql = _CLAIM_NORMAL_PG.format(
            routing=routing, fence=" OFFSET 0", lock=" FOR UPDATE OF t SKIP LOCKED"
        )
        row = fetch_one(sql, pick + lease_values)
    else:
        taken = fetch_one(_TAKE_SLOT.format(routing=routing, fence="", lock=""), pick)
        row = None if taken is None else fetch_one(_INSERT_ASSIGNMENT, [*taken, *lease_values])
    if row is None:
        return None
    assignment_id, task_id = row
    return _new_lease(assignment_id, task_id, campaign_id, annotator_id, lease, now)


def _new_lease(assignment_id, task_id, campaign_id, annotator_id, expires_at, now) -> Assignment:
    """The Assignment a claim just wrote, without reading it back."""
    fields = {
        "id": assignment_id,
        "task_id": task_id,
        "campaign_id": campaign_id,
        "annotator_id": annotator_id,
        "kind": AssignmentKind.NORMAL,
        "status": AssignmentStatus.ACTIVE,
        "expires_at": expires_at,
        "submitted_at": None,
        "active_ms": None,
        "skip_reason": "",
        "flagged": False,
        "flag_reason": "",
        "created_at": now,
        "updated_at": now,
    }
    return _assignment(fields)


def _claim_gold(campaign: Campaign, annotator, lease) -> Assignment | None:
    task = (
        Task.objects.filter(campaign=campaign, kind__in=[TaskKind.GOLD, TaskKind.ATTENTION])
        .filter(_not_mine(annotator))
        .order_by("pk")
        .first()
    )
    if task is None:
        return None
    return Assignment.objects.create(
        task=task, campaign=campaign, annotator=annotator, expires_at=lease
    )


def _claim_repeat(campaign: Campaign, annotator, lease) -> Assignment | None:
    submitted = list(
        Assignment.objects.filter(
            campaign=campaign,
            annotator=annotator,
            kind=AssignmentKind.NORMAL,
            status=AssignmentStatus.SUBMITTED,
            task__kind=TaskKind.NORMAL,
        )
        .order_by("submitted_at", "pk")
        .values_list("task_id", flat=True)
    )
    if len(submitted) <= REPEAT_MIN_GAP:
        return None
    repeated = set(
        Assignment.objects.filter(
            campaign=campaign, annotator=annotator, kind=AssignmentKind.REPEAT
        ).values_list("task_id", flat=True)
    )
    for task_id in submitted[:-REPEAT_MIN_GAP]:
        if task_id not in repeated:
            return Assignment.objects.create(
                task_id=task_id,
                campaign=campaign,
                annotator=annotator,
                kind=AssignmentKind.REPEAT,
                expires_at=lease,
            )
    return None


#: Claims free their campaign's lapsed leases at most this often per process (beat does it
#: every minute regardless): one SELECT per claim cost ~5% of the claim at 200 claims/s.
EXPIRE_ON_CLAIM_EVERY = timedelta(seconds=2)
_last_expiry_check: dict[int, object] = {}


def process_caches_clear() -> None:
    """Forget this process's expiry throttle and cached rubric pins (for tests that count
    statements: SQLite reuses the ids of rolled-back campaigns)."""
    _last_expiry_check.clear()
    pins_cache_clear()


def assignment_next(*, campaign: Campaign, annotator) -> Assignment | None:
    """What the annotator should do now: frees this campaign's lapsed leases first (so a
    slot abandoned minutes ago is offered again without waiting for beat), then claims."""
    now = timezone.now()
    last = _last_expiry_check.get(campaign.pk)
    if last is None or now - last >= EXPIRE_ON_CLAIM_EVERY or now < last:
        _last_expiry_check[campaign.pk] = now
        assignments_expire_stale(campaign_id=campaign.pk, limit=50)
    return assignment_claim_next(campaign=campaign, annotator=annotator)


# --- what a task asks for: a read, in annotation.selectors --------------------------------------

# --- submit ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreInput:
    skill_id: int
    score: int | None  # None = N/A
    rationale: str = ""
    time_ms: int | None = None


@dataclass(frozen=True)
class SubmitResult:
    assignment: Assignment
    created: bool  # False when this was a repeated submission of the same assignment
    late: bool = False


# Lock order (annotation/locks.py): the assignment, then its task.
_LOCK_ASSIGNMENT = f"""
SELECT a.annotator_id, a.status, a.kind, a.expires_at, a.task_id, a.campaign_id,
       c.updated_at, c.skill_mode
FROM {_A} a JOIN {_C} c ON c.id = a.campaign_id
WHERE a.id = %s{{lock}}
"""
_LOCK_TASK = f"""
SELECT t.kind, t.overlap, t.assigned, t.submitted, t.response_id, r.item_id, {{skills}}
FROM {_T} t JOIN {Response._meta.db_table} r ON r.id = t.response_id
WHERE t.id = %s{{lock}}
"""
_TASK_COUNTS = f"UPDATE {_T} SET assigned = %s, submitted = %s WHERE id = %s AND %s"
_ASSIGNMENT_SUBMITTED = f"""
UPDATE {_A} SET status = 'submitted', submitted_at = %s, active_ms = %s, updated_at = %s
WHERE id = %s
"""
_SCORE_COLUMNS = (
    "assignment_id",
    "campaign_id",
    "response_id",
    "annotator_id",
    "skill_id",
    "rubric_id",
    "score",
    "is_na",
    "rationale",
    "time_ms",
    "created_at",
    "updated_at",
)
_INSERT_SCORES = f"INSERT INTO {HumanScore._meta.db_table} ({', '.join(_SCORE_COLUMNS)}) VALUES "
_SCORE_ROW = "(" + ", ".join(["%s"] * len(_SCORE_COLUMNS)) + ")"
# PostgreSQL: the three writes of a submission in one statement.
_RECORD_PG = f"""
WITH counts AS ({_TASK_COUNTS}), submitted AS ({_ASSIGNMENT_SUBMITTED})
{_INSERT_SCORES}"""


# PostgreSQL, a submission on a live lease in two statements run on their own: a plain read
# (assignment, campaign, task, item skills), then, once the scores are checked against the
# skills asked, one statement whose first step takes the lease (`status = 'active' AND
# expires_at > now`, so a concurrent expiry or duplicate makes it write nothing) and only
# then counts the task and inserts the scores. Lock order as everywhere: assignment, task.
_SUBMIT_READ = f"""
SELECT a.annotator_id, a.status, a.kind, a.expires_at, a.task_id, a.campaign_id,
       c.updated_at, c.skill_mode, t.kind, t.response_id, r.item_id, {{skills}}
FROM {_A} a JOIN {_C} c ON c.id = a.campaign_id JOIN {_T} t ON t.id = a.task_id
JOIN {Response._meta.db_table} r ON r.id = t.response_id
WHERE a.id = %s
"""
_SUBMIT_ONE_STATEMENT = f"""
WITH taken AS (
  UPDATE {_A} SET status = 'submitted', submitted_at = %s, active_ms = %s, updated_at = %s
  WHERE id = %s AND annotator_id = %s AND status = 'active' AND expires_at > %s
  RETURNING id
), counted AS (
  UPDATE {_T} SET submitted = submitted + 1
  WHERE id = %s AND %s AND EXISTS (SELECT 1 FROM taken)
), scored AS (
  INSERT INTO {{scores_table}} ({{score_columns}})
  SELECT v.* FROM (VALUES {{rows}}) AS v WHERE EXISTS (SELECT 1 FROM taken)
)
SELECT count(*) FROM taken
"""
_SCORE_ROW_TYPED = (
    "(%s::bigint, %s::bigint, %s::bigint, %s::integer, %s::bigint, %s::bigint, %s::smallint,"
    " %s::boolean, %s::text, %s::integer, %s::timestamptz, %s::timestamptz)"
)


def human_score_submit(
    *,
    assignment_id: int,
    annotator,
    scores: list[ScoreInput],
    active_ms: int | None = None,
) -> SubmitResult:
    """Record an annotator's scores for one assignment; exactly one score per asked skill.

    Idempotent: a second submission of the same assignment changes nothing and returns
    created=False. A late submission on an expired lease is accepted only while the task
    still has a free slot. Raises AssignmentError with a clear message otherwise.

    On PostgreSQL a live lease is recorded by `_SUBMIT_ONE_STATEMENT`; everything else
    (repeats, late, skipped, SQLite) by the transactional `_submit_locked`.
    """
    if is_postgres():
        result = _submit_in_one_statement(assignment_id, annotator, scores, active_ms)
        if result is not None:
            return result
    return _submit_locked(
        assignment_id=assignment_id, annotator=annotator, scores=scores, active_ms=active_ms
    )


def _submit_in_one_statement(assignment_id, annotator, scores, active_ms) -> SubmitResult | None:
    row = fetch_one(_SUBMIT_READ.format(skills=item_skills_sql("r.item_id")), [assignment_id])
    if row is None or row[0] != annotator.pk:
        raise AssignmentError("no such task", code="not_found")
    _, status, kind, expires_at, task_id, campaign_id, updated_at, skill_mode = row[:8]
    task_kind, response_id, item_id, item_skills = row[8:]
    now = timezone.now()
    if status != AssignmentStatus.ACTIVE or aware(expires_at) <= now:
        return None
    campaign = instance_from(
        Campaign, {"id": campaign_id, "updated_at": aware(updated_at), "skill_mode": skill_mode}
    )
    asked = skills_for_item(item_id=item_id, campaign=campaign, item_skills=item_skills)
    rows = _validate_scores(asked, scores)
    if not rows:
        return None  # a task that asks nothing: the general path records it
    counts = task_kind == TaskKind.NORMAL and kind == AssignmentKind.NORMAL
    values = []
    for skill, value in rows:
        values += [
            assignment_id,
            campaign_id,
            response_id,
            annotator.pk,
            skill.skill_id,
            skill.rubric_id,
            value.score,
            value.score is None,
            value.rationale,
            value.time_ms,
            now,
            now,
        ]
    sql = _SUBMIT_ONE_STATEMENT.format(
        scores_table=HumanScore._meta.db_table,
        score_columns=", ".join(_SCORE_COLUMNS),
        rows=", ".join([_SCORE_ROW_TYPED] * len(rows)),
    )
    params = [now, active_ms, now, assignment_id, annotator.pk, now, task_id, counts, *values]
    if connection.in_atomic_block:
        with transaction.atomic(durable=True):  # refused inside a caller's transaction
            (taken,) = fetch_one(sql, params)
    else:
        (taken,) = fetch_one(sql, params)
    if not taken:
        return None  # expired, repeated or skipped meanwhile: the general path says which
    fields = {
        "id": assignment_id,
        "annotator_id": annotator.pk,
        "status": AssignmentStatus.SUBMITTED,
        "kind": kind,
        "expires_at": aware(expires_at),
        "task_id": task_id,
        "campaign_id": campaign_id,
        "submitted_at": now,
        "active_ms": active_ms,
        "updated_at": now,
    }
    return SubmitResult(_assignment(fields), created=True, late=False)


@transaction.atomic(durable=True)
def _submit_locked(
    *,
    assignment_id: int,
    annotator,
    scores: list[ScoreInput],
    active_ms: int | None = None,
) -> SubmitResult:
    """The general submit, in a transaction that locks the assignment, then its task:
    BEGIN, the two locks (the second brings the item's skills), one statement for the
    three writes on PostgreSQL, COMMIT."""
    row = fetch_one(_LOCK_ASSIGNMENT.format(lock=for_update(of="a")), [assignment_id])
    if row is None or row[0] != annotator.pk:
        raise AssignmentError("no such task", code="not_found")
    _, status, kind, expires_at, task_id, campaign_id, campaign_updated_at, skill_mode = row
    expires_at = aware(expires_at)
    fields = {
        "id": assignment_id,
        "annotator_id": annotator.pk,
        "status": status,
        "kind": kind,
        "expires_at": expires_at,
        "task_id": task_id,
        "campaign_id": campaign_id,
    }
    if status == AssignmentStatus.SUBMITTED:
        return SubmitResult(_assignment(fields), created=False)
    if status == AssignmentStatus.SKIPPED:
        raise AssignmentError("this task was skipped; it cannot be submitted", code="skipped")
    # Locked before the skills are read so the task row is fetched once.
    task_kind, overlap, assigned, submitted, response_id, item_id, item_skills = fetch_one(
        _LOCK_TASK.format(skills=item_skills_sql("r.item_id"), lock=for_update(of="t")), [task_id]
    )
    campaign = instance_from(
        Campaign,
        {"id": campaign_id, "updated_at": aware(campaign_updated_at), "skill_mode": skill_mode},
    )
    asked = skills_for_item(item_id=item_id, campaign=campaign, item_skills=item_skills)
    rows = _validate_scores(asked, scores)
    now = timezone.now()
    late = status == AssignmentStatus.EXPIRED or expires_at <= now
    counts = task_kind == TaskKind.NORMAL and kind == AssignmentKind.NORMAL
    if status == AssignmentStatus.EXPIRED and counts:
        # The slot went back to the pool at expiry; take it back if it is still free.
        if assigned >= overlap:
            raise AssignmentError(
                "your time on this task ran out and other annotators have completed it; "
                "this submission was not recorded",
                code="lease_lost",
            )
        assigned += 1
    stamp = db_datetime(now)
    task_update = [assigned, submitted + (1 if counts else 0), task_id, counts]
    assignment_update = [stamp, active_ms, stamp, assignment_id]
    values_sql = ", ".join([_SCORE_ROW] * len(rows))
    score_values = []
    for skill, value in rows:
        score_values += [
            assignment_id,
            campaign_id,
            response_id,
            annotator.pk,
            skill.skill_id,
            skill.rubric_id,
            value.score,
            value.score is None,
            value.rationale,
            value.time_ms,
            stamp,
            stamp,
        ]
    if rows and is_postgres():
        execute(_RECORD_PG + values_sql, task_update + assignment_update + score_values)
    else:
        execute(_TASK_COUNTS, task_update)
        execute(_ASSIGNMENT_SUBMITTED, assignment_update)
        if rows:  # a task whose item has no pinned skill asks nothing
            execute(_INSERT_SCORES + values_sql, score_values)
    fields.update(
        status=AssignmentStatus.SUBMITTED, submitted_at=now, active_ms=active_ms, updated_at=now
    )
    return SubmitResult(_assignment(fields), created=True, late=late)


def _assignment(fields: dict) -> Assignment:
    return instance_from(Assignment, fields)


def _validate_scores(asked: list[TaskSkill], scores: list[ScoreInput]):
    by_skill: dict[int, ScoreInput] = {}
    for value in scores:
        if value.skill_id in by_skill:
            raise AssignmentError("a skill was scored twice", code="invalid")
        by_skill[value.skill_id] = value
    asked_ids = {s.skill_id for s in asked}
    extra = set(by_skill) - asked_ids
    if extra:
        raise AssignmentError(
            "a score was given for a skill this task does not ask", code="invalid"
        )
    missing = [s.name for s in asked if s.skill_id not in by_skill]
    if missing:
        raise AssignmentError(f"please score: {', '.join(missing)}", code="incomplete")
    rows = []
    for skill in asked:
        value = by_skill[skill.skill_id]
        try:
            score_read(value.score)
        except ScoreRefused as exc:
            raise AssignmentError(f"{skill.name}: {exc}", code="invalid") from None
        if len(value.rationale) > MAX_RATIONALE:
            raise AssignmentError(
                f"{skill.name}: the rationale is longer than {MAX_RATIONALE} characters",
                code="invalid",
            )
        if value.time_ms is not None and not 0 <= value.time_ms <= 24 * 3600 * 1000:
            raise AssignmentError("time on task is out of range", code="invalid")
        rows.append((skill, value))
    return rows


# --- skip, flag, edit, expire ---------------------------------------------------------------------


@transaction.atomic
def assignment_skip(
    *, assignment_id: int, annotator, reason: str, flag: bool = False
) -> Assignment:
    """Give a task back (with a reason; `flag` marks the item as broken). Frees the slot;
    the annotator is not offered the same task again."""
    reason = reason.strip()[:300]
    if not reason:
        raise AssignmentError("please say why you skip this task", code="invalid")
    try:
        assignment = locks.assignment_lock(assignment_id=assignment_id)
    except Assignment.DoesNotExist:
        raise AssignmentError("no such task", code="not_found") from None
    if assignment.annotator_id != annotator.pk:
        raise AssignmentError("no such task", code="not_found")
    if assignment.status == AssignmentStatus.SKIPPED:
        return assignment
    if assignment.status != AssignmentStatus.ACTIVE:
        raise AssignmentError(
            f"this task is {assignment.status}; it cannot be skipped", code="invalid"
        )
    task = locks.task_lock(task_id=assignment.task_id)
    if task.kind == TaskKind.NORMAL and assignment.kind == AssignmentKind.NORMAL:
        Task.objects.filter(pk=task.pk).update(assigned=F("assigned") - 1)
    Assignment.objects.filter(pk=assignment.pk).update(
        status=AssignmentStatus.SKIPPED,
        skip_reason=reason,
        flagged=flag,
        flag_reason=reason if flag else "",
        updated_at=timezone.now(),
    )
    assignment.refresh_from_db()
    return assignment


@transaction.atomic
def human_score_edit(
    *, score_id: int, editor, score: int | None, rationale: str | None = None
) -> HumanScore:
    """Change a submitted score, keeping the before/after in HumanScoreRevision."""
    row = HumanScore.objects.select_for_update().get(pk=score_id)
    if row.annotator_id != editor.pk and not (editor.is_staff or editor.is_superuser):
        raise AssignmentError("no such score", code="not_found")
    try:
        score = score_read(score)
    except ScoreRefused as exc:
        raise AssignmentError(str(exc), code="invalid") from None
    before = {"score": row.score, "is_na": row.is_na, "rationale": row.rationale}
    row.score = score
    row.is_na = score is None
    if rationale is not None:
        row.rationale = rationale[:MAX_RATIONALE]
    after = {"score": row.score, "is_na": row.is_na, "rationale": row.rationale}
    if before == after:
        return row
    row.full_clean()
    row.save(update_fields=["score", "is_na", "rationale", "updated_at"])
    HumanScoreRevision.objects.create(
        score=row, score_ref=row.pk, edited_by=editor, before=before, after=after
    )
    return row


def assignments_expire_stale(*, campaign_id: int | None = None, limit: int = 1000) -> int:
    """Expire leases past their time and free their slots. Returns how many expired.

    Each lease is expired in its own short transaction (assignment, then task: the lock
    order), with a conditional update so a concurrent submit wins cleanly.
    """
    stale = Assignment.objects.filter(
        status=AssignmentStatus.ACTIVE, expires_at__lte=timezone.now()
    )
    if campaign_id is not None:
        stale = stale.filter(campaign_id=campaign_id)
    expired = 0
    for assignment_id in stale.order_by("pk").values_list("pk", flat=True)[:limit]:
        expired += _expire_one(assignment_id)
    return expired


def assignments_revoke(*, annotator_id: int, project_id: int) -> int:
    """End the annotator's open leases in the project's campaigns now (they left the
    project): each is expired as a stale one is, freeing its slot; a submit racing it
    loses with `lease_lost`. Returns how many were ended."""
    now = timezone.now()
    open_leases = Assignment.objects.filter(
        annotator_id=annotator_id, campaign__project_id=project_id, status=AssignmentStatus.ACTIVE
    )
    ids = list(open_leases.values_list("pk", flat=True))
    Assignment.objects.filter(pk__in=ids, expires_at__gt=now).update(expires_at=now)
    return sum(_expire_one(pk) for pk in ids)


@transaction.atomic
def _expire_one(assignment_id: int) -> bool:
    """Expire one lease if it is still active and past its time, freeing its slot."""
    won = Assignment.objects.filter(
        pk=assignment_id, status=AssignmentStatus.ACTIVE, expires_at__lte=timezone.now()
    ).update(status=AssignmentStatus.EXPIRED, updated_at=timezone.now())
    if not won:
        return False
    assignment = Assignment.objects.select_related("task").get(pk=assignment_id)
    if assignment.task.kind == TaskKind.NORMAL and assignment.kind == AssignmentKind.NORMAL:
        locks.task_lock(task_id=assignment.task_id)
        Task.objects.filter(pk=assignment.task_id).update(assigned=F("assigned") - 1)
    return True


__all__ = [
    "AssignmentError",
    "ScoreInput",
    "SubmitResult",
    "TaskSkill",
    "assignment_claim_next",
    "assignment_next",
    "assignment_skip",
    "assignments_expire_stale",
    "assignments_revoke",
    "human_score_edit",
    "human_score_submit",
    "task_skills",
]
