"""The claim and the submission on PostgreSQL: one statement each (annotation/services/hot_path.py
states the contracts).

A single statement is its own transaction in autocommit, so the common claim and a live
submission cost no BEGIN/COMMIT round trips. The statements bind their parameters on the
server (flaskweb/db.py, DATABASE_PREPARED_STATEMENTS), so psycopg prepares each one per
connection after its fifth run; with the setting off they run the same, unprepared.
"""

from __future__ import annotations

from datetime import datetime

from annotation.services.hot_path import (
    LEASE_COLUMNS,
    PICK_NORMAL,
    PREFERENCE_COLUMNS,
    PREFERENCES_TABLE,
    ROUTING,
    SCORE_COLUMNS,
    SCORES_TABLE,
    A,
    ClaimState,
    NewLease,
    Submission,
    T,
    claim_state_params,
    claim_state_sql,
    on_its_own,
)
from flaskweb.db import aware, fetch_one

# Claim state, slot and lease in one statement (data-modifying CTEs). `claiming` is empty
# unless CLAIM_STATE's may_claim holds; then the pick (`candidate`), the slot (assigned + 1,
# rechecked on the row as it is when the UPDATE holds it) and the lease are written together.
# Params: CLAIM_STATE's, campaign, user[, user, user], campaign, user, now, now, now.
_CLAIM = f"""
WITH st AS ({{state}}
), claiming AS (
  SELECT overlap, lease_seconds FROM st WHERE may_claim
), candidate AS ({{pick}}
), picked AS (
  UPDATE {T} SET assigned = assigned + 1
  WHERE id = (SELECT id FROM candidate)
    AND assigned < overlap AND assigned < (SELECT overlap FROM claiming)
  RETURNING id
), lease AS (
  INSERT INTO {A} ({LEASE_COLUMNS})
  SELECT picked.id, %s, %s, 'normal', 'active',
         %s::timestamptz + make_interval(secs => claiming.lease_seconds),
         NULL, NULL, '', false, '', %s::timestamptz, %s::timestamptz
  FROM picked, claiming
  RETURNING id, task_id, expires_at
)
SELECT st.*, (SELECT id FROM candidate), lease.id, lease.task_id, lease.expires_at
FROM st LEFT JOIN lease ON true
"""
# SKIP LOCKED lets concurrent claims take different rows without queueing behind each other.
# But every row it passes over is one that another claim or a submission holds for the
# length of its statement, and when those are all that is left for this annotator (the end
# of a campaign, or K as large as the crowd, where everyone chases the same most-covered
# tasks) an empty pick does not mean "no task". Then the waiting variant runs: it picks the
# first candidate without a lock and its UPDATE waits for that one row's holder, then
# rechecks the row as the holder left it (READ COMMITTED re-evaluates the WHERE on the new
# version). It waits for one row while holding none, so it cannot deadlock; a variant that
# waited inside the pick would keep the rows it had rechecked and rejected locked while
# waiting for the next, and two such claims deadlocked in the concurrency tests.
_SKIPPING = " FOR UPDATE OF t SKIP LOCKED"
_CLAIMS = {
    (decided, routing, skipping): _CLAIM.format(
        state=claim_state_sql(decided=decided, fence=" OFFSET 0"),
        pick=PICK_NORMAL.format(
            k="(SELECT overlap FROM claiming)",
            fence=" OFFSET 0",
            routing=ROUTING if routing else "",
            lock=_SKIPPING if skipping else "",
        ),
    )
    for decided in (False, True)
    for routing in (False, True)
    for skipping in (True, False)
}


def claim(
    *, campaign_id: int, annotator_id: int, now: datetime, decided: bool, routing: bool
) -> tuple[ClaimState | None, NewLease | None]:
    pick = [campaign_id, annotator_id] + ([annotator_id, annotator_id] if routing else [])
    params = [
        *claim_state_params(campaign_id=campaign_id, annotator_id=annotator_id),
        *pick,
        campaign_id,
        annotator_id,
        now,
        now,
        now,
    ]
    state, _, lease = _claim_run(_CLAIMS[decided, routing, True], params)
    # Each round that writes no lease saw a candidate fill up while it waited for it: another
    # request took that slot. Only a snapshot with no candidate at all ends it empty.
    while state is not None and state.may_claim and lease is None:
        state, candidate, lease = _claim_run(_CLAIMS[decided, routing, False], params)
        if candidate is None:
            break
    return state, lease


def _claim_run(sql: str, params: list) -> tuple[ClaimState | None, int | None, NewLease | None]:
    """The claim state, the task picked (if any) and the lease written (if any)."""
    with on_its_own():
        row = fetch_one(sql, params)
    if row is None:
        return None, None, None
    state = ClaimState.from_row(row)
    candidate, lease_id, task_id, expires_at = row[-4:]
    if lease_id is None:
        return state, candidate, None
    return state, candidate, NewLease(lease_id, task_id, aware(expires_at))


# The three writes of a submission in one statement. Its first step takes the assignment
# (only if it still has the status the caller read and, for a live lease, has not lapsed),
# and only then does it count the task and insert the scores: a concurrent expiry, skip or
# duplicate makes it write nothing. Lock order as everywhere (annotation/locks.py):
# assignment, then task. Params: now, active_ms, now, language, assignment, user, status, late, now,
# retake, task, counts, retake, then the score rows.
_RECORD = f"""
WITH taken AS (
  UPDATE {A} SET status = 'submitted', submitted_at = %s, active_ms = %s, updated_at = %s,
                 language = %s
  WHERE id = %s AND annotator_id = %s AND status = %s AND (%s OR expires_at > %s)
  RETURNING id
), counted AS (
  UPDATE {T} SET submitted = submitted + 1, assigned = assigned + %s
  WHERE id = %s AND %s AND assigned + %s <= overlap AND EXISTS (SELECT 1 FROM taken)
  RETURNING id
){{scored}}{{preferred}}
SELECT (SELECT count(*) FROM taken), (SELECT count(*) FROM counted)
"""
_SCORED = f""", scored AS (
  INSERT INTO {SCORES_TABLE} ({", ".join(SCORE_COLUMNS)})
  SELECT v.* FROM (VALUES {{rows}}) AS v WHERE EXISTS (SELECT 1 FROM taken)
)"""
# Typed, because server-side binding leaves a VALUES list's parameters untyped.
_SCORE_ROW = (
    "(%s::bigint, %s::bigint, %s::bigint, %s::integer, %s::bigint, %s::bigint, %s::smallint,"
    " %s::boolean, %s::text, %s::integer, %s::timestamptz, %s::timestamptz)"
)
_PREFERRED = f""", preferred AS (
  INSERT INTO {PREFERENCES_TABLE} ({", ".join(PREFERENCE_COLUMNS)})
  SELECT v.* FROM (VALUES {{rows}}) AS v WHERE EXISTS (SELECT 1 FROM taken)
)"""
_PREFERENCE_ROW = (
    "(%s::bigint, %s::bigint, %s::bigint, %s::bigint, %s::integer, %s::bigint, %s::bigint,"
    " %s::varchar, %s::smallint, %s::text, %s::integer, %s::timestamptz, %s::timestamptz)"
)


def submission_record(submission: Submission) -> tuple[bool, bool]:
    s = submission
    scored = _SCORED.format(rows=", ".join([_SCORE_ROW] * len(s.score_rows)))
    preferred = _PREFERRED.format(rows=", ".join([_PREFERENCE_ROW] * len(s.preference_rows)))
    sql = _RECORD.format(
        scored=scored if s.score_rows else "",
        preferred=preferred if s.preference_rows else "",
    )
    retake = 1 if s.retake_slot else 0
    params = [
        s.now,
        s.active_ms,
        s.now,
        s.language,
        s.assignment_id,
        s.annotator_id,
        s.status_seen,
        s.late,
        s.now,
        retake,
        s.task_id,
        s.counts,
        retake,
    ]
    for row in s.score_rows:
        params += row
    for row in s.preference_rows:
        params += row
    outcome = fetch_one(sql, params)
    assert outcome is not None  # the final SELECT of two counts answers one row
    taken, counted = outcome
    return bool(taken), bool(counted)
