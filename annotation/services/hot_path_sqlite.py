"""The claim and the submission on SQLite, the embedded default (annotation/services/hot_path.py
states the contracts).

SQLite has no data-modifying CTEs and no row locks: each step is its own statement and a
claim or a submission is one short transaction. The database runs write transactions one at
a time (settings: `transaction_mode` IMMEDIATE takes the write lock at BEGIN), so what a
transaction reads cannot change under it, and the pick needs neither SKIP LOCKED nor a wait.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction

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
)
from flaskweb.db import db_datetime, execute, fetch_one

_PICKS = {
    routing: PICK_NORMAL.format(k="%s", fence="", routing=ROUTING if routing else "", lock="")
    for routing in (False, True)
}
_CLAIM_STATES = {decided: claim_state_sql(decided=decided, fence="") for decided in (False, True)}
_TAKE_SLOT = f"UPDATE {T} SET assigned = assigned + 1 WHERE id = ({{pick}}) RETURNING id"
_INSERT_LEASE = f"""
INSERT INTO {A} ({LEASE_COLUMNS})
VALUES (%s, %s, %s, 'normal', 'active', %s, NULL, NULL, '', %s, '', %s, %s)
RETURNING id
"""


@transaction.atomic
def claim(
    *, campaign_id: int, annotator_id: int, now: datetime, decided: bool, routing: bool
) -> tuple[ClaimState | None, NewLease | None]:
    row = fetch_one(
        _CLAIM_STATES[decided],
        claim_state_params(campaign_id=campaign_id, annotator_id=annotator_id),
    )
    if row is None:
        return None, None
    state = ClaimState.from_row(row)
    if not state.may_claim:
        return state, None
    pick = [campaign_id, state.overlap, annotator_id]
    if routing:
        pick += [annotator_id, annotator_id]
    taken = fetch_one(_TAKE_SLOT.format(pick=_PICKS[routing]), pick)
    if taken is None:
        return state, None
    expires_at = now + timedelta(seconds=state.lease_seconds)
    stamp = db_datetime(now)
    inserted = fetch_one(
        _INSERT_LEASE,
        [taken[0], campaign_id, annotator_id, db_datetime(expires_at), False, stamp, stamp],
    )
    assert inserted is not None  # INSERT … RETURNING answers the one row it inserted
    (lease_id,) = inserted
    return state, NewLease(lease_id, taken[0], expires_at)


_TAKE = f"""
UPDATE {A} SET status = 'submitted', submitted_at = %s, active_ms = %s, updated_at = %s,
  language = %s
WHERE id = %s AND annotator_id = %s AND status = %s AND (%s OR expires_at > %s)
"""
_COUNT = f"""
UPDATE {T} SET submitted = submitted + 1, assigned = assigned + %s
WHERE id = %s AND assigned + %s <= overlap
"""
_INSERT_SCORES = f"INSERT INTO {SCORES_TABLE} ({', '.join(SCORE_COLUMNS)}) VALUES "
_SCORE_ROW = "(" + ", ".join(["%s"] * len(SCORE_COLUMNS)) + ")"
_INSERT_PREFERENCES = f"INSERT INTO {PREFERENCES_TABLE} ({', '.join(PREFERENCE_COLUMNS)}) VALUES "
_PREFERENCE_ROW = "(" + ", ".join(["%s"] * len(PREFERENCE_COLUMNS)) + ")"


def submission_record(submission: Submission) -> tuple[bool, bool]:
    # Inside the caller's transaction (a late submission) no savepoint of its own: the
    # caller rolls the whole record back when no slot was free.
    with transaction.atomic(savepoint=False):
        return _record(submission)


def _record(s: Submission) -> tuple[bool, bool]:
    stamp = db_datetime(s.now)
    taken = execute(
        _TAKE,
        [
            stamp,
            s.active_ms,
            stamp,
            s.language,
            s.assignment_id,
            s.annotator_id,
            s.status_seen,
            s.late,
            stamp,
        ],
    )
    if not taken:
        return False, False
    counted = False
    if s.counts:
        retake = 1 if s.retake_slot else 0
        counted = execute(_COUNT, [retake, s.task_id, retake]) > 0
    if s.score_rows:
        values = []
        for row in s.score_rows:
            values += [db_datetime(v) if isinstance(v, datetime) else v for v in row]
        execute(_INSERT_SCORES + ", ".join([_SCORE_ROW] * len(s.score_rows)), values)
    if s.preference_rows:
        values = []
        for row in s.preference_rows:
            values += [db_datetime(v) if isinstance(v, datetime) else v for v in row]
        sql = _INSERT_PREFERENCES + ", ".join([_PREFERENCE_ROW] * len(s.preference_rows))
        execute(sql, values)
    return True, counted
