"""Report snapshots: the analytics report computed by a worker and stored, so that pages and
the API answer at once and no web request computes a report.

A report is asked for by its params (project + filters + resamples + compared judge pairs,
`snapshot_params`), hashed into a key. `snapshot_request` adds a pending snapshot and
enqueues `report_snapshot_compute_task` on the `analytics` queue, or returns the one already
pending or running for that key (a partial unique constraint makes two requests at once find
one row). The task claims the row pending -> running by a conditional update, reads the
rows, computes `project_report` exactly as `manage.py analytics_report` does (with the
breakdowns), writes the report and the dashboard's parts (analytics/report/parts.py) as
compressed JSON, and marks it done with its duration and size; a failure is recorded on the
row.

Freshness pulls, nothing pushes (STYLE.md 13): `snapshot_changes` asks the upstream
selectors what changed since the snapshot's `as_of` (human scores written, edited or
deleted, judge runs finished, scores imported); a page view that sees a change marks the
snapshot stale, and the beat task (`report_snapshots_refresh_task`, every minute) does the
same for every project and enqueues a refresh of stale default snapshots, at most one per
project per FLASKWEB_REPORT_REFRESH_MIN_SECONDS and FLASKWEB_REPORT_REFRESH_PER_TICK per
tick.

The first report is computed when the data arrives, not when someone first looks: the same
beat task asks the upstream selectors whether a project without a default snapshot has
data yet (responses, from a dataset or a score import) and queues its default snapshot then
(`report_snapshots_request_first`), so the first visit to the dashboard finds it done (or
computing) instead of starting it; what arrives after (submissions, judge runs, imports)
makes it stale and beat refreshes it as above.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q, Sum
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from analytics import tasks
from analytics.models import (
    IN_FLIGHT,
    PreferenceImport,
    ReportSnapshot,
    ScoreImport,
    SnapshotPart,
    SnapshotStatus,
)
from analytics.report import parts
from analytics.report.selectors import DEFAULT_RESAMPLES, MAX_RESAMPLES, project_report
from analytics.selectors import report_rows
from annotation.models import Project
from annotation.selectors import (
    adjudicated_scores_changed_since,
    human_preferences_changed_since,
    human_scores_changed_since,
    project_system_names,
)
from flaskweb.infra import is_infra_error
from judging.selectors import judge_runs_finished_since

logger = logging.getLogger(__name__)

FILTER_KEYS = ("skills", "judges", "systems", "domains", "difficulties")
#: Which human scores a report uses (docs/ANALYTICS.md "Adjudicated scores"): the people's
#: own ("raw", the default) or, where a reviewer settled a (response, skill), that score.
HUMAN_SCORES = ("raw", "adjudicated")
#: Progress is written at most this often (seconds) while a snapshot computes.
PROGRESS_EVERY = 0.5
#: `ReportSnapshot.reason` of a project's first report, queued when its data arrived.
FIRST_REPORT_REASON = "data arrived"


class SnapshotRefused(Exception):
    """A request for a snapshot that cannot be queued now (too many computing)."""


# --- params -------------------------------------------------------------------------------


def snapshot_params(
    *,
    skills: list[str] | None = None,
    judges: list[str] | None = None,
    systems: list[str] | None = None,
    domains: list[str] | None = None,
    difficulties: list[int] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    compare: list[tuple[str, str]] | list[list[str]] | None = None,
    compare_all: bool = False,
    human_scores: str = "raw",
) -> dict[str, Any]:
    """The canonical params of a report: every list sorted and deduplicated, each compared
    pair in name order, so that equal requests have equal keys. `human_scores` is a key only
    when it is "adjudicated", so every raw report keeps the key it always had."""
    if not 0 <= resamples <= MAX_RESAMPLES:
        raise ValueError(f"resamples must be 0 to {MAX_RESAMPLES}")
    if human_scores not in HUMAN_SCORES:
        raise ValueError(f"human_scores must be one of {', '.join(HUMAN_SCORES)}")
    pairs = sorted({tuple(sorted((a, b))) for a, b in (compare or []) if a != b})
    adjudicated = {"human_scores": human_scores} if human_scores != "raw" else {}
    return {
        "skills": sorted(set(skills or [])),
        "judges": sorted(set(judges or [])),
        "systems": sorted(set(systems or [])),
        "domains": sorted(set(domains or [])),
        "difficulties": sorted(set(difficulties or [])),
        "resamples": int(resamples),
        "compare": [list(pair) for pair in pairs],
        "compare_all": bool(compare_all),
        **adjudicated,
    }


def snapshot_key(params: dict[str, Any]) -> str:
    return hashlib.sha256(
        json.dumps(params, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def params_are_default(params: dict[str, Any]) -> bool:
    return params == snapshot_params()


def report_kwargs(params: dict[str, Any]) -> dict[str, Any]:
    """The params as `project_report` keyword arguments (None for an empty filter)."""
    return {
        **{name: params[name] or None for name in FILTER_KEYS},
        "resamples": params["resamples"],
        "compare": [tuple(pair) for pair in params["compare"]],
        "compare_all": params["compare_all"],
        "human_scores": params.get("human_scores", "raw"),
    }


# --- stored parts ---------------------------------------------------------------------------


def _pack(value: Any) -> tuple[bytes, int]:
    text = json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
    return zlib.compress(text, 6), len(text)


def snapshot_part(snapshot: ReportSnapshot, name: str) -> Any:
    """A stored part of a done snapshot, as JSON values; None if it has no such part."""
    text = snapshot_part_text(snapshot, name)
    return None if text is None else json.loads(text)


def snapshot_part_text(snapshot: ReportSnapshot, name: str) -> bytes | None:
    """A stored part as its JSON bytes (served as they are, without parsing)."""
    data = (
        SnapshotPart.objects.filter(snapshot=snapshot, name=name)
        .values_list("data", flat=True)
        .first()
    )
    return None if data is None else zlib.decompress(bytes(data))


# --- reads ----------------------------------------------------------------------------------


#: Everything but the parts: status pages and polling read only these columns.
STATUS_FIELDS = (
    "id",
    "project_id",
    "key",
    "params",
    "is_default",
    "status",
    "stale",
    "progress",
    "phase",
    "watermark",
    "reason",
    "created_at",
    "started_at",
    "finished_at",
    "duration_seconds",
    "size_bytes",
    "error",
)


def snapshot_latest_done(*, project: Project, key: str) -> ReportSnapshot | None:
    return (
        ReportSnapshot.objects.filter(project=project, key=key, status=SnapshotStatus.DONE)
        .only(*STATUS_FIELDS)
        .order_by("-finished_at", "-pk")
        .first()
    )


def snapshot_in_flight(*, project: Project, key: str) -> ReportSnapshot | None:
    return (
        ReportSnapshot.objects.filter(project=project, key=key, status__in=IN_FLIGHT)
        .only(*STATUS_FIELDS)
        .first()
    )


def snapshot_last_failed(*, project: Project, key: str) -> ReportSnapshot | None:
    """The latest snapshot of the key if it failed (after the latest done one)."""
    latest = (
        ReportSnapshot.objects.filter(project=project, key=key)
        .exclude(status__in=IN_FLIGHT)
        .only(*STATUS_FIELDS)
        .order_by("-created_at", "-pk")
        .first()
    )
    return latest if latest is not None and latest.status == SnapshotStatus.FAILED else None


def snapshot_get(*, project: Project, snapshot_id: int) -> ReportSnapshot | None:
    return (
        ReportSnapshot.objects.filter(project=project, pk=snapshot_id).only(*STATUS_FIELDS).first()
    )


@dataclass(frozen=True)
class Changes:
    """What changed in the project's scores since a snapshot's inputs were read."""

    human_scores: int = 0
    judge_runs: tuple[tuple[str, int], ...] = ()  # pointwise runs: (judge, judgments)
    pairwise_runs: tuple[tuple[str, int], ...] = ()  # the preference and trust figures
    probe_runs: tuple[tuple[str, int], ...] = ()  # bias probes: the trust report
    imported_scores: int = 0
    adjudicated_scores: int = 0  # counted for adjudicated reports only
    preferences: int = 0  # campaign preferences written and preference labels imported

    @property
    def any(self) -> bool:
        return bool(
            self.human_scores
            or self.judge_runs
            or self.pairwise_runs
            or self.probe_runs
            or self.imported_scores
            or self.adjudicated_scores
            or self.preferences
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "human_scores": self.human_scores,
            "judge_runs": _runs(self.judge_runs),
            "pairwise_runs": _runs(self.pairwise_runs),
            "probe_runs": _runs(self.probe_runs),
            "imported_scores": self.imported_scores,
            "adjudicated_scores": self.adjudicated_scores,
            "preferences": self.preferences,
        }

    def summary(self) -> str:
        """ "3 new or changed human scores, 1 judge run finished, 1 pairwise judge run
        finished" (empty: nothing)."""
        said = []
        if self.human_scores:
            n = self.human_scores
            said.append(f"{n:,} new or changed human score{'s' if n != 1 else ''}")
        if self.judge_runs:
            n = len(self.judge_runs)
            said.append(f"{n} judge run{'s' if n != 1 else ''} finished")
        if self.pairwise_runs:
            n = len(self.pairwise_runs)
            said.append(f"{n} pairwise judge run{'s' if n != 1 else ''} finished")
        if self.probe_runs:
            n = len(self.probe_runs)
            said.append(f"{n} bias probe run{'s' if n != 1 else ''} finished")
        if self.imported_scores:
            n = self.imported_scores
            said.append(f"{n:,} imported score{'s' if n != 1 else ''}")
        if self.adjudicated_scores:
            n = self.adjudicated_scores
            said.append(f"{n:,} new or changed adjudicated score{'s' if n != 1 else ''}")
        if self.preferences:
            n = self.preferences
            said.append(f"{n:,} new or changed preference{'s' if n != 1 else ''}")
        return ", ".join(said)


def _runs(runs: tuple[tuple[str, int], ...]) -> list[dict[str, Any]]:
    return [{"judge": name, "judgments": done} for name, done in runs]


def snapshot_as_of(snapshot: ReportSnapshot) -> datetime | None:
    value = (snapshot.watermark or {}).get("as_of")
    return parse_datetime(value) if value else None


def snapshot_changes(*, project: Project, snapshot: ReportSnapshot) -> Changes:
    """What the upstream selectors say changed after the snapshot's inputs were read (a few
    indexed queries). Scores written in a transaction that committed after the snapshot read
    its rows but stamped before `as_of` are not seen here; beat's next refresh takes them."""
    since = snapshot_as_of(snapshot)
    if since is None:
        return Changes()
    imported = ScoreImport.objects.filter(project=project, created_at__gt=since).aggregate(
        n=Sum("scores_created")
    )["n"]
    adjudicated = 0
    if (snapshot.params or {}).get("human_scores") == "adjudicated":
        adjudicated = adjudicated_scores_changed_since(project=project, since=since)
    imported_labels = PreferenceImport.objects.filter(
        project=project, created_at__gt=since
    ).aggregate(n=Sum("labels_created"))["n"]
    runs: dict[str, list[tuple[str, int]]] = {"pointwise": [], "pairwise": [], "probe": []}
    for kind, name, done in judge_runs_finished_since(project=project, since=since):
        runs[kind].append((name, done))
    return Changes(
        preferences=human_preferences_changed_since(project=project, since=since)
        + int(imported_labels or 0),
        human_scores=human_scores_changed_since(project=project, since=since),
        judge_runs=tuple(runs["pointwise"]),
        pairwise_runs=tuple(runs["pairwise"]),
        probe_runs=tuple(runs["probe"]),
        imported_scores=int(imported or 0),
        adjudicated_scores=adjudicated,
    )


def snapshot_freshness(*, project: Project, snapshot: ReportSnapshot) -> Changes:
    """`snapshot_changes`, marking the snapshot stale when something changed."""
    changes = snapshot_changes(project=project, snapshot=snapshot)
    if changes.any and not snapshot.stale:
        ReportSnapshot.objects.filter(pk=snapshot.pk, stale=False).update(stale=True)
        snapshot.stale = True
    return changes


def snapshot_status(snapshot: ReportSnapshot, changes: Changes | None = None) -> dict[str, Any]:
    """The snapshot's state as the API returns it (key "snapshot")."""
    found: dict[str, Any] = {
        "id": snapshot.pk,
        "status": snapshot.status,
        "progress": round(snapshot.progress, 3),
        "phase": snapshot.phase,
        "params": snapshot.params,
        "is_default": snapshot.is_default,
        "stale": snapshot.stale,
        "requested_at": snapshot.created_at.isoformat() if snapshot.created_at else None,
        "started_at": snapshot.started_at.isoformat() if snapshot.started_at else None,
        "finished_at": snapshot.finished_at.isoformat() if snapshot.finished_at else None,
        "duration_seconds": snapshot.duration_seconds,
        "size_bytes": snapshot.size_bytes,
        "watermark": snapshot.watermark,
        "error": snapshot.error,
    }
    if changes is not None:
        found["changes_since"] = {**changes.as_dict(), "summary": changes.summary()}
    return found


# --- requests -------------------------------------------------------------------------------


def snapshot_request(
    *,
    project: Project,
    params: dict[str, Any],
    user=None,
    reason: str = "requested",
) -> tuple[ReportSnapshot, bool]:
    """A snapshot of the report of `params` computing or about to: the one already pending
    or running for the key (created False), or a new pending one whose task is enqueued on
    commit (created True). Refused (SnapshotRefused) when the project has
    FLASKWEB_REPORT_MAX_IN_FLIGHT snapshots computing already."""
    key = snapshot_key(params)
    found = snapshot_in_flight(project=project, key=key)
    if found is not None:
        return found, False
    limit = settings.FLASKWEB_REPORT_MAX_IN_FLIGHT
    if ReportSnapshot.objects.filter(project=project, status__in=IN_FLIGHT).count() >= limit:
        raise SnapshotRefused(
            f"{limit} reports of this project are being computed already; "
            "ask again when one of them is done."
        )
    try:
        with transaction.atomic():
            snapshot = ReportSnapshot.objects.create(
                project=project,
                key=key,
                params=params,
                is_default=params_are_default(params),
                reason=reason,
                requested_by=user if user is not None and user.is_authenticated else None,
                phase="waiting for a worker",
            )
            transaction.on_commit(
                lambda: tasks.report_snapshot_compute_task.delay(snapshot.pk)  # type: ignore[attr-defined]
            )
    except IntegrityError:
        # another request created it between our read and our insert
        found = snapshot_in_flight(project=project, key=key)
        if found is None:
            raise
        return found, False
    return snapshot, True


# --- computing ------------------------------------------------------------------------------


def report_snapshot_compute(
    *, snapshot_id: int, claim: datetime | None = None
) -> ReportSnapshot | None:
    """Compute pending snapshot `snapshot_id` (claimed pending -> running by a conditional
    update; None if it is gone or claimed already). Ends done, with its parts, or failed.

    `claim` (flaskweb.jobs.claim_token) is recorded as started_at, and a snapshot still
    running under it is claimed again: with a claim (the task, which retries), an
    infrastructure error (flaskweb.infra: the database lost) is raised, not recorded as a
    failure, and the retry computes it again from the start (the parts and the done state
    are written in one transaction)."""
    mine = Q(status=SnapshotStatus.PENDING)
    if claim is not None:
        mine |= Q(status=SnapshotStatus.RUNNING, started_at=claim)
    claimed = ReportSnapshot.objects.filter(mine, pk=snapshot_id).update(
        status=SnapshotStatus.RUNNING,
        started_at=claim or timezone.now(),
        progress=0.0,
        phase="reading the scores",
    )
    if not claimed:
        return None
    snapshot = ReportSnapshot.objects.select_related("project").get(pk=snapshot_id)
    started = time.perf_counter()
    last = [0.0]

    def progress(fraction: float, phase: str) -> None:
        now = time.perf_counter()
        if now - last[0] >= PROGRESS_EVERY or fraction >= 0.99:
            last[0] = now
            ReportSnapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.RUNNING).update(
                progress=fraction, phase=phase[:200]
            )

    try:
        as_of = timezone.now()
        params = snapshot.params
        kwargs = report_kwargs(params)
        filters = {name: kwargs[name] for name in FILTER_KEYS}
        rows = report_rows(project=snapshot.project, human_scores=kwargs["human_scores"], **filters)
        report = project_report(
            project=snapshot.project, rows=rows, progress=progress, with_breakdowns=True, **kwargs
        )
        progress(0.95, "charts and tables")
        stored = {"report": report, **parts.snapshot_parts(report, rows)}
        packed = {name: _pack(value) for name, value in stored.items()}
        watermark = {
            "as_of": as_of.isoformat(),
            "human": len(rows.human),
            "judge": len(rows.judge),
            "judges": sorted({row[4] for row in rows.judge}),
            "responses": len({row[0] for row in rows.human} | {row[0] for row in rows.judge}),
        }
        with transaction.atomic():
            won = ReportSnapshot.objects.filter(
                pk=snapshot_id, status=SnapshotStatus.RUNNING
            ).update(
                status=SnapshotStatus.DONE,
                progress=1.0,
                phase="done",
                finished_at=timezone.now(),
                duration_seconds=round(time.perf_counter() - started, 3),
                size_bytes=packed["report"][1],
                watermark=watermark,
                stale=False,
            )
            if not won:  # failed by the health check meanwhile: its outcome stands
                return None
            SnapshotPart.objects.bulk_create(
                SnapshotPart(snapshot_id=snapshot_id, name=name, data=data, size_bytes=size)
                for name, (data, size) in packed.items()
            )
            _forget_older(snapshot)
    except Exception as exc:
        if claim is not None and is_infra_error(exc):
            raise
        logger.exception("report snapshot %s failed", snapshot_id)
        ReportSnapshot.objects.filter(pk=snapshot_id, status=SnapshotStatus.RUNNING).update(
            status=SnapshotStatus.FAILED,
            finished_at=timezone.now(),
            duration_seconds=round(time.perf_counter() - started, 3),
            error=f"{type(exc).__name__}: {exc}"[:2000],
            phase="failed",
        )
    snapshot.refresh_from_db()
    return snapshot


def _forget_older(snapshot: ReportSnapshot) -> None:
    """Older finished snapshots of the same key go (the new one answers for them)."""
    ReportSnapshot.objects.filter(project_id=snapshot.project_id, key=snapshot.key).exclude(
        pk=snapshot.pk
    ).exclude(status__in=IN_FLIGHT).delete()


# --- beat -----------------------------------------------------------------------------------


def report_snapshots_fail_stale(*, older_than_seconds: int) -> int:
    """Fail snapshots left pending or running by a dead worker (or a lost message) longer
    than `older_than_seconds`, so the key can be asked for again."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    return ReportSnapshot.objects.filter(
        Q(status=SnapshotStatus.RUNNING, started_at__lt=cutoff)
        | Q(status=SnapshotStatus.PENDING, created_at__lt=cutoff)
    ).update(
        status=SnapshotStatus.FAILED,
        finished_at=timezone.now(),
        phase="failed",
        error="The worker computing this report stopped before it finished; ask again.",
    )


def report_snapshots_expire(*, older_than_days: int) -> int:
    """Delete filtered (non-default) snapshots and failed ones finished more than
    `older_than_days` ago: a filter combination asked for once does not keep its report
    forever. Each project's default snapshot stays (beat keeps it fresh)."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    old = ReportSnapshot.objects.filter(finished_at__lt=cutoff).filter(
        Q(is_default=False) | Q(status=SnapshotStatus.FAILED)
    )
    deleted, _ = old.exclude(status__in=IN_FLIGHT).delete()
    return deleted


def project_has_report_data(*, project: Project) -> bool:
    """Whether data a report reads has arrived in the project: responses, which a dataset
    or a score import brings and on which every score, judge run and preference hangs."""
    return bool(project_system_names(project=project))


def report_snapshots_request_first() -> list[int]:
    """Queue the first default report of each project whose data has arrived
    (`project_has_report_data`) and that has no default snapshot yet (done, computing or
    failed: a failed one is asked for again by a person, never in a loop), so that the
    first visit to its dashboard finds the report computed, or computing since the data
    came, instead of asking for it then. At most FLASKWEB_REPORT_REFRESH_PER_TICK per tick,
    oldest projects first. Idempotent: a project with a snapshot pending has a default
    snapshot, and `snapshot_request` finds a pending one rather than adding a second.
    Returns the new snapshots' ids."""
    params = snapshot_params()
    with_default = ReportSnapshot.objects.filter(key=snapshot_key(params)).values("project_id")
    queued: list[int] = []
    for project in Project.objects.exclude(pk__in=with_default).order_by("pk").iterator():
        if len(queued) >= settings.FLASKWEB_REPORT_REFRESH_PER_TICK:
            break
        if not project_has_report_data(project=project):
            continue
        try:
            snapshot, created = snapshot_request(
                project=project, params=params, reason=FIRST_REPORT_REASON
            )
        except SnapshotRefused:
            continue
        if created:
            queued.append(snapshot.pk)
    return queued


def report_snapshots_refresh_stale() -> list[int]:
    """Mark done snapshots stale whose project's scores changed since, then enqueue a new
    computation of stale default snapshots: oldest first, at most
    FLASKWEB_REPORT_REFRESH_PER_TICK, and not for a project whose default report was
    computed less than FLASKWEB_REPORT_REFRESH_MIN_SECONDS ago. Returns the new snapshots'
    ids."""
    done = ReportSnapshot.objects.filter(status=SnapshotStatus.DONE).select_related("project")
    for snapshot in done.filter(stale=False).only(*STATUS_FIELDS, "project__slug"):
        snapshot_freshness(project=snapshot.project, snapshot=snapshot)
    cutoff = timezone.now() - timedelta(seconds=settings.FLASKWEB_REPORT_REFRESH_MIN_SECONDS)
    queued: list[int] = []
    stale = done.filter(stale=True, is_default=True, finished_at__lt=cutoff).order_by("finished_at")
    for snapshot in stale[: settings.FLASKWEB_REPORT_REFRESH_PER_TICK]:
        try:
            fresh, created = snapshot_request(
                project=snapshot.project, params=snapshot.params, reason="beat"
            )
        except SnapshotRefused:
            continue
        if created:
            queued.append(fresh.pk)
    return queued
