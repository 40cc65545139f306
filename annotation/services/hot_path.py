"""The claim and the submission as the database runs them: the SQL both backends share and
the seam each backend implements (`HotPath`).

annotation/services/assignments.py holds the policy (annotation/ASSIGNMENT.md) and calls one
backend, chosen by the connection's vendor: `hot_path_postgres` (data-modifying CTEs, so the
common claim and a submission are one statement each, with no BEGIN/COMMIT round trips) or
`hot_path_sqlite` (the same steps as one short transaction each; SQLite serialises writers,
so it needs no row locks). Both run fixed SQL through flaskweb/db.py: building the same
queries with the ORM cost more than the rest of a request (see flaskweb/db.py).

Contracts both backends keep:
- `claim` reads the claim state and, when `may_claim` holds, takes one slot of the normal
  task to fill first and writes the lease, in one transaction (or one statement). It
  answers "no lease" only when no such task exists once the writers that held candidate
  rows have finished: a row skipped because another request held it is waited for before
  that answer (tests/annotation/test_claim_concurrency.py).
- `submission_record` writes nothing unless the assignment still has the status the caller
  read (and, for a live lease, has not lapsed): the gate that makes a lock-free read safe.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from django.db import connection, transaction

from annotation.access import IN_POOL_SQL
from annotation.models import (
    AnnotatorExpertise,
    Assignment,
    Campaign,
    HumanPreference,
    HumanScore,
    ItemDomain,
    Response,
    Task,
)
from annotation.selectors import item_skills_sql
from flaskweb.db import aware

A = Assignment._meta.db_table
T = Task._meta.db_table
C = Campaign._meta.db_table

# The campaign's claim settings, whether the annotator is in its pool (directly or through a
# group), the annotator's active lease here, and `may_claim`: whether the claim goes on to a
# normal task now. Without `decided` that is only the plain case (no quota, gold, repeats,
# routing or screening, which the policy in Python decides first); with it, whenever the
# annotator is in the pool, holds no lease and the campaign is active. (`LIMIT 1`, on a
# query of one row, keeps PostgreSQL from pulling the inner query up, which would copy the
# pool check into may_claim and run it twice: measured 0.1 ms per claim.)
# Without `decided` it also brings the counts the policy reads, for a campaign whose settings
# ask for them (NULL otherwise): the annotator's submitted normal tasks for a quota, and every
# task served to them here for the gold and repeat cadence. Read apart, each was one round
# trip more per claim, and the first was planned afresh on every run: PostgreSQL's plan cache
# kept choosing custom plans for it, whose estimates for the given campaign and annotator
# cost less than the generic plan's (0.3 ms of planning for 0.07 ms of execution). Here the
# counts name the annotator through `me`, a one-row subquery behind a fence (`OFFSET 0` on
# PostgreSQL), so their estimates are the same in a custom plan as in the generic one, and
# `decided` is written into the statement (two statements, each always run the same way),
# so no custom plan drops the counts: the generic plan costs no more and is kept.
# Params (claim_state_params): user, user, user, user, campaign.
_CLAIM_STATE = f"""
SELECT s.*, (s.in_pool AND s.lease_id IS NULL AND s.status = 'active'
             AND ({{decided}} OR (s.quota_per_annotator IS NULL AND s.gold_rate <= 0
                                 AND s.repeat_rate <= 0 AND NOT s.route_by_domain
                                 AND NOT s.screening))) AS may_claim
FROM (
  SELECT c.status, c.quota_per_annotator, c.lease_seconds, c.gold_rate, c.repeat_rate,
         c.overlap, c.route_by_domain, c.screening, {IN_POOL_SQL} AS in_pool, a.id AS lease_id,
         a.expires_at AS lease_expires_at, {{counts}}
  FROM {C} c
  CROSS JOIN (SELECT CAST(%s AS bigint) AS id{{fence}}) me
  LEFT JOIN {A} a ON a.campaign_id = c.id AND a.annotator_id = %s AND a.status = 'active'
  WHERE c.id = %s
  LIMIT 1
) s"""
_COUNTS = f"""
         CASE WHEN c.quota_per_annotator IS NOT NULL THEN
           (SELECT COUNT(*) FROM {A} q JOIN {T} qt ON qt.id = q.task_id
            WHERE q.campaign_id = c.id AND q.annotator_id = me.id AND q.status = 'submitted'
              AND q.kind = 'normal' AND qt.kind = 'normal') END AS submitted_normal,
         CASE WHEN c.gold_rate > 0 OR c.repeat_rate > 0 THEN
           (SELECT COUNT(*) FROM {A} v WHERE v.campaign_id = c.id AND v.annotator_id = me.id)
         END AS served"""
_NO_COUNTS = "NULL AS submitted_normal, NULL AS served"
CLAIM_STATE_WIDTH = 14  # columns of CLAIM_STATE


def claim_state_sql(*, decided: bool, fence: str) -> str:
    """CLAIM_STATE for a claim with or without `decided`; `fence` keeps `me` a subquery
    (" OFFSET 0" on PostgreSQL; SQLite plans no custom plans and has no bare OFFSET)."""
    return _CLAIM_STATE.format(
        decided="TRUE" if decided else "FALSE",
        counts=_NO_COUNTS if decided else _COUNTS,
        fence=fence,
    )


def claim_state_params(*, campaign_id: int, annotator_id: int) -> list:
    """CLAIM_STATE's parameters, in order."""
    user = annotator_id
    return [user, user, user, user, campaign_id]


# The open normal task to fill first (most covered, then oldest) that this annotator never
# had. `t.assigned < {k}` repeats `assigned < overlap` with the campaign's K (no task's
# overlap exceeds it: activation sets both, and re-annotation raises K with any task it
# raises above it) so that the scan of the task_claim_order index starts below K instead of
# walking every complete task first: with 9,000 of 10,000 tasks complete, 0.64 ms -> 0.015 ms
# per claim. {fence} is `OFFSET 0` on PostgreSQL, which keeps NOT EXISTS a per-row probe of
# the (task, annotator, kind) index: pulled up into an anti-join, the planner may
# materialise all of the annotator's assignments and compare each candidate with each
# (seen: 49 ms instead of 2.8 ms when the statistics predated the annotator's work).
# Params: campaign, [K when {k} is %s,] user, then ROUTING's.
PICK_NORMAL = f"""
  SELECT t.id FROM {T} t
  WHERE t.campaign_id = %s AND t.kind = 'normal' AND t.assigned < t.overlap
    AND t.assigned < {{k}}
    AND NOT EXISTS (SELECT 1 FROM {A} u
                    WHERE u.task_id = t.id AND u.annotator_id = %s AND u.kind = 'normal'{{fence}})
    {{routing}}
  ORDER BY t.assigned DESC, t.id LIMIT 1{{lock}}"""
# Domain routing: an annotator who declared domains gets only items in one of them.
# Params: user, user.
ROUTING = f"""
  AND (NOT EXISTS (SELECT 1 FROM {AnnotatorExpertise._meta.db_table} e WHERE e.user_id = %s)
       OR EXISTS (SELECT 1 FROM {Response._meta.db_table} r
                  JOIN {ItemDomain._meta.db_table} d ON d.item_id = r.item_id
                  JOIN {AnnotatorExpertise._meta.db_table} e
                    ON e.domain_id = d.domain_id AND e.user_id = %s
                  WHERE r.id = t.response_id))"""
LEASE_COLUMNS = """task_id, campaign_id, annotator_id, kind, status, expires_at, submitted_at,
                   active_ms, skip_reason, flagged, flag_reason, created_at, updated_at"""

# What a submission needs to know, without a lock: the assignment, its campaign's skill
# settings, its task and the skills the campaign pinned for the item (PostgreSQL brings them
# along as JSON; annotation.selectors.item_skills_sql).
SUBMIT_READ = f"""
SELECT a.annotator_id, a.status, a.kind, a.expires_at, a.task_id, a.campaign_id,
       c.updated_at, c.skill_mode, t.kind, t.response_id, r.item_id, {{skills}},
       t.response_b_id, c.pair_ask, c.pair_choices, c.pair_strength, c.pair_rationale,
       t.b_left
FROM {A} a JOIN {C} c ON c.id = a.campaign_id JOIN {T} t ON t.id = a.task_id
JOIN {Response._meta.db_table} r ON r.id = t.response_id
WHERE a.id = %s
"""


def submit_read_sql() -> str:
    return SUBMIT_READ.format(skills=item_skills_sql("r.item_id", "c.id"))


SCORES_TABLE = HumanScore._meta.db_table
SCORE_COLUMNS = (
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


PREFERENCES_TABLE = HumanPreference._meta.db_table
PREFERENCE_COLUMNS = (
    "assignment_id",
    "campaign_id",
    "response_a_id",
    "response_b_id",
    "annotator_id",
    "skill_id",
    "rubric_id",
    "choice",
    "strength",
    "rationale",
    "time_ms",
    "created_at",
    "updated_at",
)


@dataclass(frozen=True)
class ClaimState:
    status: str
    quota: int | None
    lease_seconds: int
    gold_rate: float
    repeat_rate: float
    overlap: int
    route_by_domain: bool
    screening: bool  # training and qualification come first (annotation/screening/)
    in_pool: bool
    lease_id: int | None  # the annotator's active lease here, if any (at most one)
    lease_expires_at: datetime | None
    # Read without `decided` only, when the campaign's settings ask for them (else None):
    submitted_normal: int | None  # the annotator's submitted normal tasks (with a quota)
    served: int | None  # every task served to the annotator here (gold or repeat rate > 0)
    may_claim: bool  # the claim went on to a normal task (CLAIM_STATE)

    @classmethod
    def from_row(cls, row: tuple) -> ClaimState:
        """From the first CLAIM_STATE_WIDTH columns of a statement that read CLAIM_STATE."""
        (status, quota, lease_seconds, gold, repeat, overlap, routing, screening) = row[:8]
        in_pool, lease_id, lease_expires_at, submitted_normal, served = row[8:13]
        may_claim = row[13]
        return cls(
            status,
            quota,
            lease_seconds,
            gold,
            repeat,
            overlap,
            bool(routing),
            bool(screening),
            bool(in_pool),
            lease_id,
            aware(lease_expires_at),
            submitted_normal,
            served,
            bool(may_claim),
        )


@dataclass(frozen=True)
class NewLease:
    assignment_id: int
    task_id: int
    expires_at: datetime


@dataclass(frozen=True)
class Submission:
    """One submission to record, as the policy decided it from the read."""

    assignment_id: int
    annotator_id: int
    task_id: int
    status_seen: str  # written only if the assignment still has this status
    late: bool  # False: written only if the lease is still live at `now`
    counts: bool  # a normal assignment of a normal task: the task's counter moves
    retake_slot: bool  # an expired lease takes its slot back (assigned + 1, if one is free)
    active_ms: int | None
    now: datetime
    score_rows: list[tuple]  # one per asked skill, in SCORE_COLUMNS order
    # a pair task's preferences, one per asked skill and/or overall, in PREFERENCE_COLUMNS
    # order (written through the same gate as scores)
    preference_rows: list[tuple] = field(default_factory=list)
    # the language the page was shown in (Assignment.language; "" = unknown)
    language: str = ""


class HotPath(Protocol):
    """What a database backend provides to the claim and submit policy."""

    def claim(
        self, *, campaign_id: int, annotator_id: int, now: datetime, decided: bool, routing: bool
    ) -> tuple[ClaimState | None, NewLease | None]:
        """The claim state (None: no such campaign) and the lease written, if any.
        `routing`: apply ROUTING to the pick (only meaningful with `decided`)."""
        ...

    def submission_record(self, submission: Submission) -> tuple[bool, bool]:
        """(taken, counted): whether the gate let the submission through, and whether the
        task's counters moved. When `taken and counts and not counted` (no free slot to take
        back), the writes made must be rolled back by the caller's transaction."""
        ...


def on_its_own() -> AbstractContextManager:
    """For one statement run without BEGIN/COMMIT: in autocommit it is its own transaction;
    inside a caller's transaction it gets a savepoint, so a failed statement (a lost race on
    a unique index) does not spoil that transaction."""
    return transaction.atomic() if connection.in_atomic_block else nullcontext()
