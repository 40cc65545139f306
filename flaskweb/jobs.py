"""Leaf helpers for import jobs that run in the background (imports no app).

An import that a web request starts stores its files (media), creates a job row (a model
deriving from ImportJob) and answers at once; a Celery task claims the row and runs the
import from the stored files, streaming them row by row into temporary staging tables.
The pieces every such import shares live here:

- ImportJob: the abstract job row with its guarded state machine
  (pending -> running -> succeeded | rejected | failed), counts, problems and error;
- job_claim / job_finish / jobs_fail_stale: the transitions, each a conditional UPDATE, so
  a redelivered message, a late worker or the stale-job check never overwrite each other;
  a claim token (claim_token, recorded as started_at) lets the task that claimed a job
  claim it again after a lost database connection (flaskweb.infra), and no one else;
- files_store / file_open / files_delete: the uploaded files in the default storage;
- Progress: {"phase", "done", "total"} in the cache (the import runs in one transaction,
  so its rows are invisible to a poller until it commits);
- ProblemLog: every problem counted, the first N in file order kept, in bounded memory;
- Staging: rows buffered and flushed to a temporary table in batches (COPY on PostgreSQL).
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import itertools
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import PurePath
from typing import IO, Any, Protocol, TypeVar, cast

from django.conf import settings
from django.core.cache import cache
from django.core.files.storage import default_storage
from django.db import models
from django.db.models import Q
from django.utils import timezone

from flaskweb.db import TimestampedModel, is_postgres
from flaskweb.infra import is_infra_error, reconnecting
from flaskweb.streams import HashingReader  # noqa: F401 (importers use it from here)

logger = logging.getLogger(__name__)

#: Problems kept on a job row (all are counted in problem_count).
PROBLEMS_KEPT = 1000


class JobStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    REJECTED = "rejected", "Rejected (nothing written)"
    FAILED = "failed", "Failed (nothing written)"


FINISHED = (JobStatus.SUCCEEDED, JobStatus.REJECTED, JobStatus.FAILED)


class ImportJob(TimestampedModel):
    """The job row of one background import. Subclasses add the project and what the
    import writes; `options` holds what was asked (dataset, judge, scales...), `files` the
    stored uploads [{"name", "stored", "bytes"}], `result` what the import returned."""

    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.PENDING)
    options = models.JSONField(default=dict, blank=True)
    files = models.JSONField(default=list, blank=True)
    bytes_total = models.BigIntegerField(default=0)
    problem_count = models.PositiveIntegerField(default=0)
    # the first PROBLEMS_KEPT problems in file order: [{"file", "line", "field", "code", "message"}]
    problems = models.JSONField(default=list, blank=True)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at", "-pk"]

    @classmethod
    def status_constraint(cls, name: str) -> models.CheckConstraint:
        return models.CheckConstraint(condition=Q(status__in=JobStatus.values), name=name)

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED


# --- transitions ------------------------------------------------------------------------------


#: A job row model: ImportJob's subclasses, or any model with the fields the transitions
#: write (`status` whose pending, running and failed values are JobStatus's, `started_at`,
#: `finished_at`, `error`), like analytics' ExportJob.
J = TypeVar("J", bound=models.Model)
IJ = TypeVar("IJ", bound="ImportJob")


def claim_token() -> datetime:
    """A claim for job_claim: the time it is made, recorded as the job's started_at."""
    return timezone.now()


def job_claim(model: type[J], job_id: int, *, claim: datetime | None = None) -> J | None:
    """pending -> running, by conditional update; None if another worker won or it is done
    (or the row is gone).

    `claim` (claim_token(), made once by the task before its first attempt) is recorded as
    the job's started_at, and a job still running under that same claim is claimed again:
    a task that lost its database connection after claiming (flaskweb.infra) resumes its
    own job, even when it cannot know whether its first claim was committed, while a job
    claimed by another worker or finished stays theirs."""
    started = claim or timezone.now()
    mine = Q(status=JobStatus.PENDING)
    if claim is not None:
        mine |= Q(status=JobStatus.RUNNING, started_at=claim)
    # _default_manager is the typed name of `objects` on a model class known only by its base
    won = model._default_manager.filter(mine, pk=job_id).update(
        status=JobStatus.RUNNING, started_at=started
    )
    return model._default_manager.get(pk=job_id) if won else None


def job_finish(model: type[models.Model], job_id: int, status: str, **fields: Any) -> bool:
    """running -> `status`, by conditional update: a late worker never overwrites an outcome
    already recorded (by the stale-job check, say). Returns whether it was recorded."""
    return bool(
        model._default_manager.filter(pk=job_id, status=JobStatus.RUNNING).update(
            status=status, finished_at=timezone.now(), **fields
        )
    )


def jobs_fail_stale(
    model: type[models.Model],
    *,
    older_than_seconds: int,
    error: str = "the import stopped responding (worker lost) and was marked failed",
) -> int:
    """Mark jobs stuck in running (their worker died) as failed with `error`. Returns how
    many."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    return model._default_manager.filter(status=JobStatus.RUNNING, started_at__lt=cutoff).update(
        status=JobStatus.FAILED, error=error, finished_at=timezone.now()
    )


def problems_as_dicts(problems: Iterable[Any]) -> list[dict[str, Any]]:
    return [
        {"file": p.file, "line": p.line, "field": p.field, "code": p.code, "message": p.message}
        for p in problems
    ]


# --- stored files -----------------------------------------------------------------------------


def files_store(files: Sequence[Any], *, folder: str) -> list[dict[str, Any]]:
    """Save uploaded files in the default storage under `folder`; returns
    [{"name", "stored", "bytes"}] in the order given. The content is streamed in chunks."""
    stored = []
    day = timezone.now().strftime("%Y/%m")
    for f in files:
        name = PurePath(f.name or "upload").name[:200] or "upload"
        path = default_storage.save(f"{folder}/{day}/{uuid.uuid4().hex}/{name}", f)
        stored.append({"name": f.name or name, "stored": path, "bytes": f.size or 0})
    return stored


def file_open(entry: dict[str, Any]) -> IO[bytes]:
    """A stored file (files_store), or a path on this machine (`path`: the commands)."""
    if entry.get("path"):
        return open(entry["path"], "rb")  # noqa: SIM115 - closed by the caller
    return default_storage.open(entry["stored"], "rb")


def files_delete(entries: Iterable[dict[str, Any]]) -> None:
    for entry in entries:
        if entry.get("stored"):
            with contextlib.suppress(OSError):
                default_storage.delete(entry["stored"])


# --- reading ----------------------------------------------------------------------------------


# --- progress ---------------------------------------------------------------------------------


class Progress:
    """Writes {"phase", "done", "total"} to the cache at most twice a second."""

    def __init__(self, key: str, total: int) -> None:
        self.key = key
        self.total = max(total, 1)
        self.done = 0
        self.phase = "reading"
        self.last = 0.0

    def advance(self, n: int) -> None:
        self.done += n
        self.set(self.phase)

    def set(self, phase: str, *, force: bool = False) -> None:
        self.phase = phase
        now = time.monotonic()
        if not force and now - self.last < 0.5:
            return
        self.last = now
        value = {"phase": phase, "done": min(self.done, self.total), "total": self.total}
        with contextlib.suppress(Exception):  # progress is best effort; never fail an import
            cache.set(self.key, value, timeout=24 * 3600)


def progress_get(key: str) -> dict:
    with contextlib.suppress(Exception):
        return cache.get(key) or {}
    return {}


# --- running a job -----------------------------------------------------------------------------


class _Rejection(Protocol):
    """What job_execute reads of its `rejected` exception: the kept problems, and how many
    there were in all."""

    problems: Sequence[Any]
    count: int


def job_execute(
    model: type[IJ],
    job_id: int,
    *,
    label: str,
    progress_key: str,
    rejected: type[Exception],
    run: Callable[[IJ, list[tuple[str, IO[bytes]]], Progress], dict[str, Any]],
    claim: datetime | None = None,
) -> IJ | None:
    """Claim job `job_id` (pending -> running, or again under `claim`: job_claim) and run it
    to its end state: `run(job, streams, progress)` imports from the stored files in one
    transaction and returns the job fields of a success; `rejected` (with `.problems` and
    `.count`) ends it rejected; any other exception ends it failed with the error. None when
    the job is gone or another worker claimed it. Never raises for bad input. The stored
    files are deleted when it ends.

    With `claim` (a task that retries: flaskweb.infra), an infrastructure error (the
    database or the broker lost) during the import is raised, not recorded: the job stays
    running under `claim` with its files, the import's transaction rolled back, so the
    task's retry starts it over cleanly. One while recording the outcome is retried in
    place."""
    job = job_claim(model, job_id, claim=claim)
    if job is None:
        return None
    streams: list[tuple[str, IO[bytes]]] = []
    fields: dict[str, Any] = {}
    status = JobStatus.FAILED
    try:
        streams = [(f["name"], file_open(f)) for f in job.files]
        fields = run(job, streams, Progress(progress_key, job.bytes_total))
    except rejected as exc:
        status = JobStatus.REJECTED
        rejection = cast(_Rejection, exc)
        fields = {
            "problems": problems_as_dicts(rejection.problems),
            "problem_count": rejection.count,
        }
    except Exception as exc:  # a crash: the import's transaction rolled back; record why
        if claim is not None and is_infra_error(exc):
            raise  # finally: closes the streams; the files stay for the retry
        logger.exception("%s %s failed", label, job.pk)
        fields = {"error": f"{type(exc).__name__}: {exc}"[:5000]}
    else:
        status = JobStatus.SUCCEEDED
    finally:
        for _, stream in streams:
            stream.close()
    # The outcome is recorded here once the database answers again, not by running the
    # import over: a committed import run again would find its own rows (already imported).
    # A finish whose commit was not confirmed is found finished by its retry: nothing lost.
    what = f"{label} {job.pk}"
    if not reconnecting(lambda: job_finish(model, job.pk, status, **fields), what=what):
        logger.warning("%s %s was finished elsewhere", label, job.pk)
    files_delete(job.files)
    Progress(progress_key, 1).set("done", force=True)
    reconnecting(job.refresh_from_db, what=what)
    return job


# --- problems ---------------------------------------------------------------------------------


class ProblemLog:
    """Counts every problem and keeps the first `limit` in (file, line) order, in memory
    bounded by `limit` (None: keeps all, for the commands). `order` maps a file name to its
    position in the import; problems of no file (the options) come first."""

    def __init__(self, order: Callable[[str], int], limit: int | None = PROBLEMS_KEPT) -> None:
        self.order = order
        self.limit = limit
        self.count = 0
        self.codes: Counter[str] = Counter()
        self._heap: list[tuple] = []  # max-heap by sort key (negated), size <= limit
        self._seq = itertools.count()

    def __bool__(self) -> bool:
        return self.count > 0

    def add(self, problem: Any) -> None:
        self.count += 1
        self.codes[problem.code] += 1
        key = (self.order(problem.file), problem.line or 0, next(self._seq))
        if self.limit is None or len(self._heap) < self.limit:
            heapq.heappush(self._heap, (_Neg(key), problem))
        elif key < self._heap[0][0].key:
            heapq.heapreplace(self._heap, (_Neg(key), problem))

    def extend(self, problems: Iterable[Any]) -> None:
        for problem in problems:
            self.add(problem)

    def counted(self, n: int, code: str) -> None:
        """`n` more problems of `code` that are counted but were not handed over (a SQL
        check passes at most `limit` of them)."""
        self.count += n
        self.codes[code] += n

    def sorted(self) -> list[Any]:
        return [p for _, p in sorted(self._heap, key=lambda e: e[0].key)]


class _Neg:
    __slots__ = ("key",)

    def __init__(self, key: tuple) -> None:
        self.key = key

    def __lt__(self, other: _Neg) -> bool:
        return self.key > other.key


# --- staging ----------------------------------------------------------------------------------


class Staging:
    """Rows buffered per temporary table and flushed in batches: COPY on PostgreSQL,
    executemany elsewhere. The tables are made by the caller (CREATE TEMP TABLE) inside the
    import's transaction and dropped with `drop`."""

    def __init__(self, cursor, columns: dict[str, Sequence[str]], batch: int = 5000) -> None:
        self.cursor = cursor
        self.columns = columns
        self.batch = batch
        self.buffers: dict[str, list[tuple]] = {t: [] for t in columns}

    def add(self, table: str, row: tuple) -> None:
        buffer = self.buffers[table]
        buffer.append(row)
        if len(buffer) >= self.batch:
            self.flush(table)

    def flush(self, table: str | None = None) -> None:
        for name in [table] if table else list(self.buffers):
            rows = self.buffers[name]
            if not rows:
                continue
            cols = self.columns[name]
            if is_postgres(self.cursor.db):
                raw = self.cursor.cursor  # the psycopg 3 cursor under Django's wrapper
                with raw.copy(f"COPY {name} ({', '.join(cols)}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
            else:
                marks = ", ".join(["%s"] * len(cols))
                self.cursor.executemany(
                    f"INSERT INTO {name} ({', '.join(cols)}) VALUES ({marks})", rows
                )
            rows.clear()

    def drop(self) -> None:
        for name in self.columns:
            self.cursor.execute(f"DROP TABLE IF EXISTS {name}")


def keyset_pages(cursor, sql: str, params: Sequence, *, key: str, size: int = 1000):
    """The rows of `sql` page by page (lists of at most `size`), in bounded memory and
    without re-reading what came before: `sql` selects the unique `key` first and holds an
    `{after}` placeholder where `AND key > %s` goes (its WHERE clause must exist; write
    WHERE TRUE if it has no other condition), with no ORDER BY or LIMIT."""
    last = None
    while True:
        after = "" if last is None else f"AND {key} > %s"
        query = sql.format(after=after) + f" ORDER BY {key} LIMIT {int(size)}"
        cursor.execute(query, [*params] + ([] if last is None else [last]))
        rows = cursor.fetchall()
        if rows:
            yield rows
        if len(rows) < size:
            return
        last = rows[-1][0]


def key_ranges(cursor, table: str, key: str, where: str, params: Sequence, *, size: int = 1000):
    """(after, upto) ranges of `key` (an indexed unique positive integer column of `table`)
    holding at most `size` rows matching `where` each, read by index, so that a join over
    one range (`key > after AND key <= upto`) costs that range, not the whole table (a
    keyset page over a join would have the planner join everything for every page)."""
    last = None
    while True:
        after = "" if last is None else f"AND {key} > %s"
        cursor.execute(
            f"SELECT MAX({key}), COUNT(*) FROM (SELECT {key} FROM {table} WHERE {where} {after} "
            f"ORDER BY {key} LIMIT {int(size)}) page_keys",
            [*params] + ([] if last is None else [last]),
        )
        upto, n = cursor.fetchone()
        if not n:
            return
        yield (last if last is not None else 0), upto
        if n < size:
            return
        last = upto


def sql_problems(
    cursor, sql: str, params: Sequence, log: ProblemLog, code: str, make: Callable
) -> None:
    """Report the rows of a set check (`sql`, ordered by file and line) as problems of
    `code`: all are counted, at most the log's limit are read and made into problems. The
    count comes first: it is the whole answer in the usual case of no problem, and a LIMIT
    on a check that finds nothing would have the planner pick nested loops that expect to
    stop early."""
    cursor.execute(f"SELECT COUNT(*) FROM ({sql}) checked", params)
    total = cursor.fetchone()[0]
    if not total:
        return
    limit = "" if log.limit is None else f" LIMIT {int(log.limit)}"
    cursor.execute(f"SELECT * FROM ({sql}) checked{limit}", params)
    rows = cursor.fetchall()
    log.extend(make(row) for row in rows)
    log.counted(total - len(rows), code)


def input_sha256(files: Sequence[dict[str, Any]]) -> str:
    """The SHA-256 of an import's input from its files' ({"sha256"}): for one file, the
    hash of its bytes (what sha256sum prints); for several, the hash of their sorted hex
    digests, one a line, so the order the files are given in does not matter."""
    if len(files) == 1:
        return files[0]["sha256"]
    joined = "\n".join(sorted(f["sha256"] for f in files)).encode()
    return hashlib.sha256(joined).hexdigest()
