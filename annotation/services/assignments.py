"""The annotator workflow: claim the next task, submit scores, skip, flag, edit, expire.

See annotation/ASSIGNMENT.md for the selection policy and annotation/locks.py for the lock
order. The claim and the submission are policy here, in Python, written once; the SQL that
carries them out is one backend per database vendor behind one seam
(annotation/services/hot_path.py: `hot_path_postgres`, `hot_path_sqlite`).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone
from django.utils.translation import gettext

from annotation import locks
from annotation.cadence import REPEAT_MIN_GAP, every
from annotation.models import (
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    Campaign,
    CampaignStatus,
    HumanScore,
    HumanScoreRevision,
    Task,
    TaskKind,
)
from annotation.parsers import ScoreRefused, score_read
from annotation.screening.services import SCREENING_KINDS, screening_advance, screening_claim
from annotation.selectors import (
    TaskSkill,
    pins_cache_clear,
    skills_for_item,
    task_skills,
)
from annotation.services import hot_path_postgres, hot_path_sqlite
from annotation.services.hot_path import (
    A,
    ClaimState,
    HotPath,
    NewLease,
    Submission,
    T,
    submit_read_sql,
)
from flaskweb.db import aware, fetch_one, instance_from

MAX_RATIONALE = 2000


class AssignmentError(Exception):
    """A request the workflow refuses, with a message for the annotator."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


#: The claim and submit SQL of each database: one module per vendor (the seam: HotPath).
_HOT_PATHS: dict[str, HotPath] = {"postgresql": hot_path_postgres, "sqlite": hot_path_sqlite}


def _hot_path() -> HotPath:
    return _HOT_PATHS[connections[DEFAULT_DB_ALIAS].vendor]


# --- claim ----------------------------------------------------------------------------------------


_ASSIGNMENT_FIELDS = ("id", "task_id", "kind", "status", "expires_at")
_ASSIGNMENT_GET = f"SELECT {', '.join(_ASSIGNMENT_FIELDS)} FROM {A} WHERE id = %s"


def assignment_claim_next(*, campaign: Campaign, annotator) -> Assignment | None:
    """The annotator's current or next task as an active lease; None when there is none.

    Policy: annotation/ASSIGNMENT.md. The campaign's status and pool are read here, inside
    the claim, whatever `campaign` holds. None means that no task is open to this annotator
    once the requests holding candidate rows have finished: a row passed over because
    another claim or submission held it is waited for before answering None (the backend's
    contract, annotation/services/hot_path.py).

    An annotator holds at most one active lease per campaign (a partial UNIQUE index).
    Two tabs claiming at the same instant both find none and both claim; the second one's
    lease waits on the index for the first to commit, then fails, and that claim is run
    again: it resumes the first tab's task. No lock is taken for the common case.

    The common case (no quota, gold, repeats or routing; no lease held) is settled by the
    backend's claim alone: one statement on PostgreSQL. The rest is decided here first.
    """
    try:
        return _claim(campaign, annotator)
    except IntegrityError:
        return _claim(campaign, annotator)  # another tab's lease won: this resumes it


def _claim(campaign: Campaign, annotator) -> Assignment | None:
    now = timezone.now()
    state, lease = _hot_path().claim(
        campaign_id=campaign.pk, annotator_id=annotator.pk, now=now, decided=False, routing=False
    )
    if lease is not None:
        return _new_lease(lease, campaign.pk, annotator.pk, now)
    if state is None or not state.in_pool or state.may_claim:
        return None  # no such campaign; not in its pool; or nothing open for this annotator
    if state.lease_id is not None:
        assert state.lease_expires_at is not None  # the lease's row: expires_at is NOT NULL
        if state.lease_expires_at > now:
            return _assignment_stub(state.lease_id, campaign.pk, annotator.pk)
        # Lapsed but not yet swept: expire it, which frees its slot and the one-lease index,
        # then claim afresh. Its own transaction (unless the caller has one), so that the
        # claim after it holds no row lock if it has to wait for a task row.
        _expire_one(state.lease_id)
        return _claim(campaign, annotator)
    return _claim_by_policy(campaign, annotator, state, now)


def _claim_by_policy(campaign: Campaign, annotator, state: ClaimState, now) -> Assignment | None:
    """Status, screening, quota, gold and repeats decided in Python; then the backend's
    normal claim.

    No transaction around it all: each write is one on its own (the gold or repeat lease,
    or the backend's claim), so the claim's waiting round holds no lock from an earlier
    step (a row its SKIP LOCKED round rechecked and rejected stays locked until the
    transaction ends, and a waiting claim holding one could deadlock with another)."""
    if state.status != CampaignStatus.ACTIVE:
        return None
    if state.screening:  # training, then the qualification test, before any real task
        passed, screening_lease = screening_claim(
            campaign_id=campaign.pk,
            annotator_id=annotator.pk,
            lease_seconds=state.lease_seconds,
            now=now,
        )
        if not passed:
            return screening_lease  # a training or qualification task; None once screened out
    if state.quota is not None:
        assert state.submitted_normal is not None  # the claim state counts them for a quota
        if state.submitted_normal >= state.quota:
            return None
    if state.gold_rate > 0 or state.repeat_rate > 0:  # most campaigns have neither
        special = _claim_gold_or_repeat(campaign, annotator, state, now)
        if special is not None:
            return special
    _, lease = _hot_path().claim(
        campaign_id=campaign.pk,
        annotator_id=annotator.pk,
        now=now,
        decided=True,
        routing=state.route_by_domain,
    )
    return None if lease is None else _new_lease(lease, campaign.pk, annotator.pk, now)


@transaction.atomic  # a savepoint in a caller's transaction: a lost race leaves it usable
def _claim_gold_or_repeat(
    campaign: Campaign, annotator, state: ClaimState, now
) -> Assignment | None:
    """A gold or attention task, or a hidden repeat, when this claim is the one due for it
    (by the count of tasks served, which the claim state read)."""
    served = state.served
    assert served is not None  # the claim state counts them when a rate is set
    expires_at = now + timedelta(seconds=state.lease_seconds)
    if every(state.gold_rate, served):
        gold = _claim_gold(campaign, annotator, expires_at)
        if gold is not None:
            return gold
    if every(state.repeat_rate, served):
        return _claim_repeat(campaign, annotator, expires_at)
    return None


def _assignment_stub(assignment_id: int, campaign_id: int, annotator_id: int) -> Assignment:
    """An assignment read with one raw statement; other fields load on first access."""
    values = fetch_one(_ASSIGNMENT_GET, [assignment_id])
    assert values is not None  # the claim state just read this lease from its row
    fields = dict(zip(_ASSIGNMENT_FIELDS, values, strict=True))
    fields["expires_at"] = aware(fields["expires_at"])
    fields.update(campaign_id=campaign_id, annotator_id=annotator_id)
    return _assignment(fields)


def _not_mine(annotator, kind: str = AssignmentKind.NORMAL):
    return ~Exists(Assignment.objects.filter(task=OuterRef("pk"), annotator=annotator, kind=kind))


def _new_lease(lease: NewLease, campaign_id: int, annotator_id: int, now) -> Assignment:
    """The Assignment a claim just wrote, without reading it back."""
    fields = {
        "id": lease.assignment_id,
        "task_id": lease.task_id,
        "campaign_id": campaign_id,
        "annotator_id": annotator_id,
        "kind": AssignmentKind.NORMAL,
        "status": AssignmentStatus.ACTIVE,
        "expires_at": lease.expires_at,
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
_last_expiry_check: dict[int, datetime] = {}


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
    task_kind: str = TaskKind.NORMAL  # screening's training answers get feedback


#: Each round of a submission reads, decides and writes only if the lease is still as read.
#: A round writes nothing only when another request moved the lease on in between, and a
#: lease moves on at most three times (live -> lapsed or cut short by a revocation ->
#: expired -> submitted by another tab), so the fourth round always settles it.
_SUBMIT_ROUNDS = 4


def human_score_submit(
    *,
    assignment_id: int,
    annotator,
    scores: list[ScoreInput],
    active_ms: int | None = None,
    language: str = "",
    first_read: SubmitRead | SubmitResult | None = None,
) -> SubmitResult:
    """Record an annotator's scores for one assignment; exactly one score per asked skill.
    `language`: the language the page was shown in, recorded on the assignment (a code of
    LANGUAGES; "" = unknown).

    Idempotent: a second submission of the same assignment changes nothing and returns
    created=False. A late submission on an expired lease is accepted only while the task
    still has a free slot. Raises AssignmentError with a clear message otherwise. Refused
    inside a caller's transaction (durable).

    A read without locks (assignment, campaign, task, item skills), the checks, then one
    gated write by the backend (one statement on PostgreSQL: a live lease needs no
    BEGIN/COMMIT); the write does nothing if a concurrent expiry, skip or duplicate moved
    the lease on since the read, and the next round reads again.
    `first_read`: the first round's read when the caller made it just now
    (`submit_read_of_assignment`: the scoring page reads the assignment to check it is the
    annotator's); a later round reads again.
    """
    language = submission_language(language)
    read = first_read
    for _ in range(_SUBMIT_ROUNDS):
        if read is None:
            read = submit_read(assignment_id, annotator, pair=False)
        result = _submit_round(read, assignment_id, annotator, scores, active_ms, language)
        if result is not None:
            return result
        read = None
    raise RuntimeError(f"assignment {assignment_id} kept changing during its submission")


def _submit_round(
    read, assignment_id, annotator, scores, active_ms, language
) -> SubmitResult | None:
    """The submission as `read` found the assignment; None when it changed before the write."""
    if isinstance(read, SubmitResult):
        return read
    campaign = instance_from(
        Campaign,
        {
            "id": read.campaign_id,
            "updated_at": read.campaign_updated_at,
            "skill_mode": read.skill_mode,
        },
    )
    asked = skills_for_item(item_id=read.item_id, campaign=campaign, item_skills=read.item_skills)
    rows = _validate_scores(asked, scores)
    now = read.now
    return submission_write(
        read,
        active_ms=active_ms,
        language=language,
        score_rows=[
            (
                assignment_id,
                read.campaign_id,
                read.response_id,
                annotator.pk,
                skill.skill_id,
                skill.rubric_id,
                value.score,
                value.score is None,
                value.rationale,
                value.time_ms,
                now,
                now,
            )
            for skill, value in rows
        ],
    )


@dataclass(frozen=True)
class SubmitRead:
    """An assignment as a submission round read it (one query, no locks): the annotator's
    own, of the right kind of task, neither submitted nor skipped. `pair` holds a pair
    task's campaign settings and side (pair_ask, pair_choices, pair_strength,
    pair_rationale, b_left)."""

    assignment_id: int
    annotator_id: int
    status: str
    kind: str
    expires_at: datetime
    task_id: int
    campaign_id: int
    campaign_updated_at: datetime
    skill_mode: str
    task_kind: str
    response_id: int
    item_id: int
    item_skills: object
    response_b_id: int | None
    pair: tuple
    now: datetime

    @property
    def late(self) -> bool:
        return self.status == AssignmentStatus.EXPIRED or self.expires_at <= self.now

    @property
    def counts(self) -> bool:
        """A normal assignment of a normal task: the task's counter moves."""
        return self.task_kind == TaskKind.NORMAL and self.kind == AssignmentKind.NORMAL

    def fields(self) -> dict:
        return {
            "id": self.assignment_id,
            "annotator_id": self.annotator_id,
            "status": self.status,
            "kind": self.kind,
            "expires_at": self.expires_at,
            "task_id": self.task_id,
            "campaign_id": self.campaign_id,
        }


def submission_language(language: str) -> str:
    """The language a submission records: a code of LANGUAGES, or "" (unknown); anything
    else is refused (AssignmentError "invalid")."""
    if language and all(language != code for code, _ in settings.LANGUAGES):
        known = ", ".join(code for code, _ in settings.LANGUAGES)
        raise AssignmentError(f"unknown language {language!r}: one of {known}", code="invalid")
    return language


def submit_read(assignment_id: int, annotator, *, pair: bool) -> SubmitRead | SubmitResult:
    """The read step of a submission round: the assignment, its task and campaign; the
    earlier result when it was already submitted (idempotent). Raises AssignmentError when
    it is not the annotator's, was skipped, or is a pair task submitted as scores (or the
    other way round)."""
    row = fetch_one(submit_read_sql(), [assignment_id])
    return _submit_read_of_row(row, assignment_id, annotator, pair=pair)


def submit_read_of_assignment(
    assignment: Assignment, annotator, *, item_id: int, item_skills: object
) -> SubmitRead | SubmitResult:
    """submit_read of a score submission from an assignment the caller read just now with its
    campaign and task, and its item and asked skills (the scoring page's
    `assignment_read_for_annotator`): the same checks, and no statement."""
    campaign, task = assignment.campaign, assignment.task
    row = (
        assignment.annotator_id,
        assignment.status,
        assignment.kind,
        assignment.expires_at,
        assignment.task_id,
        assignment.campaign_id,
        campaign.updated_at,
        campaign.skill_mode,
        task.kind,
        task.response_id,
        item_id,
        item_skills,
        task.response_b_id,
        campaign.pair_ask,
        campaign.pair_choices,
        campaign.pair_strength,
        campaign.pair_rationale,
        task.b_left,
    )
    return _submit_read_of_row(row, assignment.pk, annotator, pair=False)


def _submit_read_of_row(
    row, assignment_id: int, annotator, *, pair: bool
) -> SubmitRead | SubmitResult:
    if row is None or row[0] != annotator.pk:
        raise AssignmentError(gettext("no such task"), code="not_found")
    _, status, kind, expires_at, task_id, campaign_id, campaign_updated_at, skill_mode = row[:8]
    task_kind, response_id, item_id, item_skills, response_b_id = row[8:13]
    if pair and response_b_id is None:
        raise AssignmentError("this task scores one response: submit scores", code="invalid")
    if not pair and response_b_id is not None:
        raise AssignmentError(
            "this task compares two responses: submit a preference", code="invalid"
        )
    read = SubmitRead(
        assignment_id=assignment_id,
        annotator_id=annotator.pk,
        status=status,
        kind=kind,
        expires_at=aware(expires_at),
        task_id=task_id,
        campaign_id=campaign_id,
        campaign_updated_at=aware(campaign_updated_at),
        skill_mode=skill_mode,
        task_kind=task_kind,
        response_id=response_id,
        item_id=item_id,
        item_skills=item_skills,
        response_b_id=response_b_id,
        pair=tuple(row[13:18]),
        now=timezone.now(),
    )
    if status == AssignmentStatus.SUBMITTED:
        return SubmitResult(_assignment(read.fields()), created=False, task_kind=task_kind)
    if status == AssignmentStatus.SKIPPED:
        raise AssignmentError(
            gettext("this task was skipped; it cannot be submitted"), code="skipped"
        )
    return read


def submission_write(
    read: SubmitRead,
    *,
    active_ms: int | None,
    score_rows: list[tuple] | None = None,
    preference_rows: list[tuple] | None = None,
    language: str = "",
) -> SubmitResult | None:
    """The gated write of a checked submission (scores or a pair's preferences) and what
    follows it; None when the lease moved on since the read (the caller reads again)."""
    late, counts, now = read.late, read.counts, read.now
    submission = Submission(
        assignment_id=read.assignment_id,
        annotator_id=read.annotator_id,
        task_id=read.task_id,
        status_seen=read.status,
        late=late,
        counts=counts,
        # The slot went back to the pool at expiry; it is taken back if still free.
        retake_slot=read.status == AssignmentStatus.EXPIRED and counts,
        active_ms=active_ms,
        now=now,
        score_rows=score_rows or [],
        preference_rows=preference_rows or [],
        language=language,
    )
    # The write is durable: refused inside a caller's transaction, whose later failure would
    # undo scores the annotator was told are saved. Outside one, a live lease is recorded by
    # one statement in autocommit; a late one in a transaction, rolled back if no slot is free.
    if late:
        with transaction.atomic(durable=True):
            taken, counted = _hot_path().submission_record(submission)
            if taken and counts and not counted:
                raise AssignmentError(_lease_lost_message(read.task_id), code="lease_lost")
    else:
        with transaction.atomic(durable=True) if connection.in_atomic_block else nullcontext():
            taken, _ = _hot_path().submission_record(submission)
    if not taken:
        return None
    if read.task_kind in SCREENING_KINDS:  # after the write, and never for a real task
        screening_advance(campaign_id=read.campaign_id, annotator_id=read.annotator_id)
    fields = read.fields()
    fields.update(
        status=AssignmentStatus.SUBMITTED,
        submitted_at=now,
        active_ms=active_ms,
        updated_at=now,
        language=language,
    )
    return SubmitResult(_assignment(fields), created=True, late=late, task_kind=read.task_kind)


_TASK_FILLED = f"SELECT submitted, overlap FROM {T} WHERE id = %s"


def _lease_lost_message(task_id: int) -> str:
    """Why a late submission found no free slot: the task is complete, or (more often)
    its slot went back to the pool when the lease expired and another annotator holds it
    now, who may not have submitted yet."""
    row = fetch_one(_TASK_FILLED, [task_id])
    if row is not None and row[0] >= row[1]:
        return gettext(
            "your time on this task ran out and the task has since been completed by other "
            "annotators; this submission was not recorded"
        )
    return gettext(
        "your time on this task ran out and its place was given to another annotator; this "
        "submission was not recorded"
    )


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
        raise AssignmentError(
            gettext("please score: %(skills)s") % {"skills": ", ".join(missing)}, code="incomplete"
        )
    rows = []
    for skill in asked:
        value = by_skill[skill.skill_id]
        try:
            score_read(value.score)
        except ScoreRefused as exc:
            raise AssignmentError(f"{skill.name}: {exc}", code="invalid") from None
        if len(value.rationale) > MAX_RATIONALE:
            raise AssignmentError(
                gettext("%(skill)s: the rationale is longer than %(max)d characters")
                % {"skill": skill.name, "max": MAX_RATIONALE},
                code="invalid",
            )
        if value.time_ms is not None and not 0 <= value.time_ms <= 24 * 3600 * 1000:
            raise AssignmentError(gettext("time on task is out of range"), code="invalid")
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
        raise AssignmentError(gettext("please say why you skip this task"), code="invalid")
    try:
        assignment = locks.assignment_lock(assignment_id=assignment_id)
    except Assignment.DoesNotExist:
        raise AssignmentError(gettext("no such task"), code="not_found") from None
    if assignment.annotator_id != annotator.pk:
        raise AssignmentError(gettext("no such task"), code="not_found")
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
    if task.kind in SCREENING_KINDS:  # a skipped screening task is answered (not agreeing)
        screening_advance(campaign_id=assignment.campaign_id, annotator_id=annotator.pk)
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
