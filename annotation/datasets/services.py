"""Dataset import: one job (DatasetUpload) turns one or more files into items and responses.

Contract
- Atomic: everything the import writes happens in one transaction. A rejected or crashed
  import leaves the dataset exactly as it was (the job row and its problem report remain).
- Validate, then write: rows stream from the parsers into temporary staging tables
  (COPY on PostgreSQL); per-row problems are found while streaming, set-level problems
  (duplicates, unknown items, changed content) by SQL over the staging tables. Only when
  no problem's policy says "reject" are the staged rows inserted.
- Idempotent: items are keyed by (dataset, external_id) and responses by (item, model);
  re-importing the same files inserts nothing and reports everything "unchanged".
- Streaming: memory does not grow with the file; rows are staged in bounded batches.
- The new items' own metadata (domains, ranked skills, difficulty) is recorded as their
  "dataset" metadata proposals in the same transaction (docs/METADATA.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO

from django.conf import settings
from django.core.cache import cache
from django.core.files.uploadedfile import UploadedFile
from django.db import connection, transaction
from django.utils import timezone

from annotation import parsers
from annotation.models import (
    Dataset,
    DatasetUpload,
    ImportProblem,
    Project,
    UploadFile,
    UploadSource,
    UploadStatus,
)
from annotation.names import NameRefused, NameScope
from annotation.parsers import ACCEPT, PROBLEM_CLASSES, REJECT, SKIP, ItemRow, Problem, ResponseRow
from annotation.selectors import domain_list_for_project, skill_list_for_project
from annotation.services.items import dataset_name_check, metadata_dataset_snapshot
from flaskweb.infra import is_infra_error
from flaskweb.jobs import job_claim, job_finish, jobs_fail_stale

logger = logging.getLogger(__name__)

#: Rows per staging flush. 5,000 keeps each COPY/executemany round trip large enough to be
#: cheap while bounding the Python-side buffer (~5 MB for typical responses).
STAGE_BATCH = 5000
#: Problems stored per class in ImportProblem (all are counted and printed by the CLI).
PROBLEMS_STORED_PER_CLASS = 200


class ImportOptionsError(ValueError):
    """The import was asked for with options that can never work (bad policy, format...)."""


@dataclass
class FileSpec:
    name: str
    format: str = ""  # "" = detect
    model_name: str = ""  # flask-output only; "" = from the file name


#: Named starting points for policies; explicit CLASS=ACTION pairs override them.
POLICY_PRESETS: dict[str, tuple[str, dict[str, str]]] = {
    "strict": ("reject the import on any problem", {}),
    "flask-release": (
        "accept the known quirks of the public FLASK release, reject anything else",
        {
            "invalid_difficulty": ACCEPT,
            "invalid_domain": ACCEPT,
            "skill_count": ACCEPT,
            "empty_response": ACCEPT,
        },
    ),
    "lenient": ("accept what can be cleaned, skip every other bad row", {"all": ACCEPT}),
}


def policies_parse(pairs: list[str] | dict[str, str] | None, *, preset: str = "") -> dict[str, str]:
    """Validate problem-class policies: {"invalid_difficulty": "accept", "all": "skip"}.

    "all" sets every class to that action where allowed (else its strictest allowed one).
    A preset (POLICY_PRESETS) is applied first; the pairs override it.
    """
    if preset and preset not in POLICY_PRESETS:
        raise ImportOptionsError(f"unknown preset {preset!r} (known: {', '.join(POLICY_PRESETS)})")
    items = list(POLICY_PRESETS[preset][1].items()) if preset else []
    items += pairs.items() if isinstance(pairs, dict) else [_split_pair(p) for p in pairs or []]
    result: dict[str, str] = {}
    for code, action in items:
        code, action = code.strip(), action.strip().lower()
        if action not in (REJECT, SKIP, ACCEPT):
            raise ImportOptionsError(f"action {action!r} for {code!r}: use reject, skip or accept")
        if code == "all":
            for each, (allowed, _) in PROBLEM_CLASSES.items():
                if action in allowed:
                    result[each] = action
                elif action == ACCEPT and SKIP in allowed:
                    result[each] = SKIP
            continue
        if code not in PROBLEM_CLASSES:
            known = ", ".join(sorted(PROBLEM_CLASSES))
            raise ImportOptionsError(f"unknown problem class {code!r} (known: {known}, all)")
        if action not in PROBLEM_CLASSES[code][0]:
            choices = ", ".join(PROBLEM_CLASSES[code][0])
            raise ImportOptionsError(f"{code} can only be: {choices}")
        result[code] = action
    return result


def _split_pair(pair: str) -> tuple[str, str]:
    if "=" not in pair:
        raise ImportOptionsError(f"policy {pair!r} must look like CLASS=ACTION")
    code, action = pair.split("=", 1)
    return code, action


# --- job creation -----------------------------------------------------------------------------


@transaction.atomic
def dataset_upload_create(
    *,
    project: Project,
    dataset_name: str,
    source: str,
    files: list[tuple[FileSpec, UploadedFile | str]],
    policies: dict[str, str] | None = None,
    created_by=None,
    enqueue: bool = True,
) -> DatasetUpload:
    """Create the job row (status pending) and its file rows; enqueue the import on commit.

    `files` pairs a FileSpec with either an uploaded file (stored in MEDIA_ROOT) or a path
    on this machine (the CLI reads it in place).
    """
    if not files:
        raise ImportOptionsError("no file given")
    dataset_name = dataset_name.strip()
    if not dataset_name or len(dataset_name) > 200:
        raise ImportOptionsError("dataset name must be 1-200 characters")
    try:
        dataset_name = dataset_name_check(project=project, name=dataset_name)
    except NameRefused as exc:
        raise ImportOptionsError(str(exc)) from None
    for spec, _ in files:
        if spec.format and spec.format not in parsers.FORMATS:
            raise ImportOptionsError(
                f"{spec.name}: format {spec.format!r} is not one of {', '.join(parsers.FORMATS)}"
            )
    upload = DatasetUpload(
        project=project,
        dataset_name=dataset_name,
        source=source,
        options={"policies": policies_parse(policies or {})},
        created_by=created_by,
    )
    upload.full_clean()
    upload.save()
    for position, (spec, content) in enumerate(files):
        row = UploadFile(
            upload=upload,
            position=position,
            original_name=spec.name[:300],
            format=spec.format,
            model_name=spec.model_name[:200],
        )
        if isinstance(content, str):
            row.path = content
            row.size_bytes = Path(content).stat().st_size
        else:
            row.size_bytes = content.size or 0
            row.file.save(Path(spec.name).name, content, save=False)
        row.save()
    if enqueue and source != UploadSource.CLI:
        from annotation.tasks import dataset_import_task

        transaction.on_commit(lambda: dataset_import_task.delay(upload.pk))
    return upload


# --- progress ---------------------------------------------------------------------------------


def progress_key(upload_id: int) -> str:
    return f"upload-progress:{upload_id}"


def upload_progress_get(upload_id: int) -> dict:
    return cache.get(progress_key(upload_id)) or {}


class _Progress:
    """Writes {"phase", "done", "total"} to the cache at most twice a second: the import
    runs in one transaction, so its own rows are invisible to the page until commit."""

    def __init__(self, upload_id: int, total: int) -> None:
        self.key = progress_key(upload_id)
        self.total = max(total, 1)
        self.base = 0
        self.last = 0.0

    def set(self, phase: str, done: int | None = None, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < 0.5:
            return
        self.last = now
        value = {"phase": phase, "done": min(done or 0, self.total), "total": self.total}
        with contextlib.suppress(Exception):  # progress is best effort; never fail an import
            cache.set(self.key, value, timeout=24 * 3600)


# --- the import -------------------------------------------------------------------------------


class _Rejected(Exception):
    pass


class _ClaimLost(Exception):
    pass


@dataclass
class ImportReport:
    upload: DatasetUpload
    problems_by_code: Counter = field(default_factory=Counter)


class _Problems:
    def __init__(self, policies: dict[str, str], on_problem: Callable | None) -> None:
        self.policies = policies
        self.on_problem = on_problem
        self.counts: Counter[str] = Counter()
        self.actions: Counter[str] = Counter()
        self.stored: list[tuple[Problem, str]] = []
        self.rejected = False
        # Rows skipped, not problems: a row with two skipped problems counts once. Problems
        # of one row arrive together, so remembering the last skipped row is enough.
        self.rows_skipped = 0
        self._last_skipped: tuple[str, int | None] | None = None

    def action(self, code: str) -> str:
        allowed = PROBLEM_CLASSES[code][0]
        action = self.policies.get(code, REJECT)
        return action if action in allowed else REJECT

    def add(self, problem: Problem) -> str:
        action = self.action(problem.code)
        self.counts[problem.code] += 1
        self.actions[action] += 1
        if action == REJECT:
            self.rejected = True
        elif action == SKIP:
            key = (problem.file, problem.line)
            if key != self._last_skipped or problem.line is None:
                self.rows_skipped += 1
            self._last_skipped = key
        if self.counts[problem.code] <= PROBLEMS_STORED_PER_CLASS:
            self.stored.append((problem, action))
        if self.on_problem is not None:
            self.on_problem(problem, action)
        return action


def _open(file_row: UploadFile) -> IO[bytes]:
    if file_row.path:
        return open(file_row.path, "rb")  # noqa: SIM115 - closed by the caller
    file_row.file.open("rb")
    return file_row.file


def _first_record(stream: IO[bytes]) -> bytes | None:
    """The first non-blank line, for format detection (None: it is over the line limit). A
    fixed-size head would cut a long first record (an item with inline answers easily passes
    64 KB) and fail detection."""
    for _, raw, _ in parsers.iter_lines(stream, max_line_bytes=settings.FLASKWEB_MAX_LINE_BYTES):
        if raw is None or raw.strip():
            return raw
    return b""


def _catalogue(project: Project) -> tuple[parsers.Catalogue, dict[str, int], dict[str, int]]:
    skills = {s.name: s.pk for s in skill_list_for_project(project=project)}
    domains = {d.name: d.pk for d in domain_list_for_project(project=project)}
    return parsers.Catalogue.of(skills, domains), skills, domains


def dataset_import_run(
    *,
    upload: DatasetUpload,
    on_problem: Callable[[Problem, str], None] | None = None,
    retried: bool = False,
) -> DatasetUpload:
    """Run a claimed (running) import to its end state: succeeded, rejected or failed.

    Never raises for bad input: the outcome is on the returned job row. `on_problem` is
    called for every problem found (the CLI prints them all). With `retried` (the caller
    retries infrastructure errors: flaskweb.infra), a lost database or broker is raised
    instead of recorded as a failure: the import's transaction rolled back, the upload
    stays running for the retry to start it over.
    """
    policies = upload.options.get("policies", {})
    problems = _Problems(policies, on_problem)
    file_rows = list(upload.files.all())
    progress = _Progress(upload.pk, sum(f.size_bytes for f in file_rows))
    summary: dict = {"files": []}
    try:
        with transaction.atomic():
            counts = _import_in_transaction(upload, file_rows, problems, progress, summary)
            if problems.rejected:
                raise _Rejected
            # The success — status, counts, summary and problem report together — commits
            # with the data: a poller never sees "succeeded" without its numbers, and if the
            # stale-job check failed the job meanwhile, the rows are rolled back too.
            if not _finish_write(upload, UploadStatus.SUCCEEDED, problems, summary, counts):
                raise _ClaimLost
    except _ClaimLost:
        logger.warning("import %s was finished elsewhere; its rows were rolled back", upload.pk)
        upload.refresh_from_db()
        return upload
    except _Rejected:
        return _finish(upload, UploadStatus.REJECTED, problems, summary, {})
    except Exception as exc:  # crash: the transaction rolled back, record why
        if retried and is_infra_error(exc):
            raise  # the database or broker is away: the task's retry starts it over cleanly
        logger.exception("import %s failed", upload.pk)
        upload.error = f"{type(exc).__name__}: {exc}"[:5000]
        return _finish(upload, UploadStatus.FAILED, problems, summary, {})
    return _finish_done(upload)


def _finish(upload, status, problems: _Problems, summary: dict, counts: dict) -> DatasetUpload:
    _finish_write(upload, status, problems, summary, counts)
    return _finish_done(upload)


def _finish_write(upload, status, problems: _Problems, summary: dict, counts: dict) -> bool:
    """Record the outcome, conditional on the job still running (a late worker never
    overwrites a result already recorded). Returns whether it was recorded."""
    summary["problems"] = dict(problems.counts)
    summary["actions"] = dict(problems.actions)
    fields = {
        "summary": summary,
        "problem_count": sum(problems.counts.values()),
        "rows_skipped": problems.rows_skipped,
        "error": upload.error,
        **counts,
    }
    if not job_finish(DatasetUpload, upload.pk, status, **fields):
        return False
    ImportProblem.objects.filter(upload=upload).delete()  # a retried job reports afresh
    ImportProblem.objects.bulk_create(
        ImportProblem(
            upload=upload,
            file_name=p.file[:300],
            line=p.line,
            field=p.field[:100],
            code=p.code,
            action=action,
            message=p.message,
        )
        for p, action in problems.stored
    )
    return True


def _finish_done(upload) -> DatasetUpload:
    upload.refresh_from_db()
    with contextlib.suppress(Exception):
        cache.set(
            progress_key(upload.pk),
            {"phase": "done", "done": 1, "total": 1},
            timeout=3600,
        )
    return upload


def dataset_upload_claim(*, upload_id: int, claim: datetime | None = None) -> DatasetUpload | None:
    """pending -> running, by conditional update; None if another worker won or it is done.
    With `claim`, also an upload still running under that claim (its task's retry after a
    lost connection). The job-row transitions are flaskweb.jobs' (UploadStatus has
    JobStatus's values)."""
    return job_claim(DatasetUpload, upload_id, claim=claim)


def dataset_import(
    *, upload_id: int, on_problem=None, claim: datetime | None = None
) -> DatasetUpload | None:
    """Claim and run an import (the Celery task and the CLI both come here). The import is
    one transaction: with `claim` (the task, which retries), an infrastructure error
    (flaskweb.infra) rolls it back and is raised, leaving the upload running under `claim`
    for the retry to start over; without (the command), it is recorded as a failure."""
    upload = dataset_upload_claim(upload_id=upload_id, claim=claim)
    if upload is None:
        return None
    return dataset_import_run(upload=upload, on_problem=on_problem, retried=claim is not None)


def uploads_fail_stale(*, older_than_seconds: int) -> int:
    """Mark imports stuck in running (their worker died) as failed. Returns how many."""
    return jobs_fail_stale(DatasetUpload, older_than_seconds=older_than_seconds)


# --- staging ----------------------------------------------------------------------------------

_STAGING_DDL = [
    """CREATE TEMP TABLE stg_item (
        seq BIGINT PRIMARY KEY, file_pos INTEGER NOT NULL, line INTEGER NOT NULL,
        external_id TEXT NOT NULL, instruction TEXT NOT NULL, reference TEXT NOT NULL,
        difficulty SMALLINT NULL, task TEXT NOT NULL, metadata TEXT NOT NULL,
        content_hash TEXT NOT NULL, keep SMALLINT NOT NULL DEFAULT 1)""",
    """CREATE TEMP TABLE stg_item_skill (
        seq BIGINT NOT NULL, skill_id BIGINT NOT NULL, rank SMALLINT NOT NULL,
        checklist TEXT NOT NULL)""",
    """CREATE TEMP TABLE stg_item_domain (seq BIGINT NOT NULL, domain_id BIGINT NOT NULL)""",
    """CREATE TEMP TABLE stg_response (
        seq BIGINT NOT NULL, file_pos INTEGER NOT NULL, line INTEGER NOT NULL,
        external_id TEXT NOT NULL, model_name TEXT NOT NULL, text TEXT NOT NULL,
        metadata TEXT NOT NULL, keep SMALLINT NOT NULL DEFAULT 1)""",
]
_STAGING_TABLES = ("stg_item", "stg_item_skill", "stg_item_domain", "stg_response")
_STAGING_COLUMNS = {
    "stg_item": (
        "seq",
        "file_pos",
        "line",
        "external_id",
        "instruction",
        "reference",
        "difficulty",
        "task",
        "metadata",
        "content_hash",
    ),
    "stg_item_skill": ("seq", "skill_id", "rank", "checklist"),
    "stg_item_domain": ("seq", "domain_id"),
    "stg_response": ("seq", "file_pos", "line", "external_id", "model_name", "text", "metadata"),
}


class _Stager:
    """Buffers staged rows per table and flushes them in batches (COPY on PostgreSQL)."""

    def __init__(self, cursor) -> None:
        self.cursor = cursor
        self.postgres = connection.vendor == "postgresql"
        self.buffers: dict[str, list[tuple]] = {t: [] for t in _STAGING_TABLES}

    def add(self, table: str, row: tuple) -> None:
        buf = self.buffers[table]
        buf.append(row)
        if len(buf) >= STAGE_BATCH:
            self.flush(table)

    def flush(self, table: str | None = None) -> None:
        for name in [table] if table else list(self.buffers):
            rows = self.buffers[name]
            if not rows:
                continue
            cols = _STAGING_COLUMNS[name]
            if self.postgres:
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


def _json_cast(expr: str) -> str:
    return f"CAST({expr} AS jsonb)" if connection.vendor == "postgresql" else expr


def _import_in_transaction(
    upload: DatasetUpload,
    file_rows: list[UploadFile],
    problems: _Problems,
    progress: _Progress,
    summary: dict,
) -> dict:
    project = upload.project
    catalogue, skill_ids, domain_ids = _catalogue(project)
    dataset, _ = Dataset.objects.get_or_create(project=project, name=upload.dataset_name)
    with connection.cursor() as cursor:
        for table in _STAGING_TABLES:
            cursor.execute(f"DROP TABLE IF EXISTS {table}")
        for ddl in _STAGING_DDL:
            cursor.execute(ddl)
        stager = _Stager(cursor)
        seq = 0
        done_before = 0
        for file_row in file_rows:
            file_summary = {"name": file_row.original_name, "items": 0, "responses": 0}
            summary["files"].append(file_summary)
            with _open(file_row) as stream:
                archive = parsers.archive_problem(file_row.original_name, stream.read(16))
                stream.seek(0)
                if archive is not None:
                    problems.add(archive)
                    continue
                first = b"" if file_row.format else _first_record(stream)
                fmt = file_row.format or parsers.detect_format(file_row.original_name, first or b"")
                stream.seek(0)
                if fmt is None:
                    empty = first is not None and not first.strip()
                    why = ""
                    if first is None:
                        limit = settings.FLASKWEB_MAX_LINE_BYTES
                        why = f" (its first line is longer than {limit:,} bytes)"
                    problems.add(
                        Problem(
                            file_row.original_name,
                            None,
                            "",
                            "empty_file" if empty else "unknown_format",
                            "the file holds no rows"
                            if empty
                            else f"cannot tell the format{why}; name it "
                            f"({', '.join(parsers.FORMATS)})",
                        )
                    )
                    continue
                file_summary["format"] = fmt
                if file_row.detected_format != fmt:
                    UploadFile.objects.filter(pk=file_row.pk).update(detected_format=fmt)
                model_name = file_row.model_name or None
                if fmt == "flask-output" and not model_name:
                    model_name = parsers.model_name_from_filename(file_row.original_name)
                file_summary["model"] = model_name or ""

                def on_progress(consumed, base=done_before):
                    if consumed is not None:
                        progress.set("reading", base + consumed)

                rows = parsers.parse_file(
                    stream,
                    file_name=file_row.original_name,
                    fmt=fmt,
                    catalogue=catalogue,
                    model_name=model_name,
                    max_line_bytes=settings.FLASKWEB_MAX_LINE_BYTES,
                    on_progress=on_progress,
                )
                seq = _stage_rows(
                    rows,
                    stager,
                    problems,
                    file_row.position,
                    seq,
                    skill_ids,
                    domain_ids,
                    file_summary,
                )
            done_before += file_row.size_bytes
        stager.flush()
        upload.rows_read = seq
        progress.set("checking", progress.total, force=True)
        _check_sets(cursor, dataset, problems, file_rows)
        if problems.rejected:
            return {}
        progress.set("writing", progress.total, force=True)
        created_by_model, counts = _apply(cursor, dataset, upload)
        if counts["items_created"]:
            # the dataset's own metadata (FLASK's model-made labels) is there to compare with
            # what people verify from the start; it commits with the items or not at all
            summary["metadata_proposals"] = metadata_dataset_snapshot(
                dataset=dataset, upload_id=upload.pk
            )
        summary["models"] = _model_coverage(cursor, dataset, created_by_model)
        for table in _STAGING_TABLES:
            cursor.execute(f"DROP TABLE IF EXISTS {table}")
    if counts["items_created"] or counts["responses_created"]:
        Dataset.objects.filter(pk=dataset.pk).update(updated_at=timezone.now())
    DatasetUpload.objects.filter(pk=upload.pk).update(dataset=dataset)
    return {"rows_read": seq, **counts}


def _json(value: dict) -> str:
    # Most rows carry no metadata; skipping json.dumps for them saves ~1.3 s per 1M rows.
    return json.dumps(value, ensure_ascii=False) if value else "{}"


def _stage_rows(
    rows: Iterator[ItemRow | ResponseRow | Problem],
    stager: _Stager,
    problems: _Problems,
    file_pos: int,
    seq: int,
    skill_ids: dict[str, int],
    domain_ids: dict[str, int],
    file_summary: dict,
) -> int:
    skipped_line = -1
    for row in rows:
        if isinstance(row, Problem):
            problems.add(row)
            continue
        if row.line == skipped_line:  # the responses inline with a skipped item
            continue
        # Every problem is reported (a list, not any(), which stops at the first skip), so a
        # problem whose policy is reject rejects the import even when another one skips the row.
        if SKIP in [problems.add(p) for p in row.problems]:
            skipped_line = row.line
            continue
        seq += 1
        if isinstance(row, ItemRow):
            file_summary["items"] += 1
            stager.add(
                "stg_item",
                (
                    seq,
                    file_pos,
                    row.line,
                    row.external_id,
                    row.instruction,
                    row.reference,
                    row.difficulty,
                    row.task,
                    _json(row.metadata),
                    row.fingerprint(),
                ),
            )
            for rank, name in enumerate(row.skills, start=1):
                checklist = json.dumps(row.checklists.get(name, []), ensure_ascii=False)
                stager.add("stg_item_skill", (seq, skill_ids[name], rank, checklist))
            for name in row.domains:
                stager.add("stg_item_domain", (seq, domain_ids[name]))
        else:
            file_summary["responses"] += 1
            stager.add(
                "stg_response",
                (
                    seq,
                    file_pos,
                    row.line,
                    row.item_external_id,
                    row.model,
                    row.text,
                    _json(row.metadata),
                ),
            )
    return seq


def _file_names(file_rows: list[UploadFile]) -> dict[int, str]:
    return {f.position: f.original_name for f in file_rows}


def _set_check(cursor, sql, params, problems: _Problems, make_problem, table: str) -> None:
    """Run a check query returning (seq, file_pos, line, ...) rows; report each one and mark
    the rows to skip when that class's policy is "skip"."""
    cursor.execute(sql, params)
    to_skip: list[int] = []
    while True:
        batch = cursor.fetchmany(1000)
        if not batch:
            break
        for row in batch:
            if problems.add(make_problem(row)) == SKIP:
                to_skip.append(row[0])
    for start in range(0, len(to_skip), 1000):
        chunk = to_skip[start : start + 1000]
        marks = ", ".join(["%s"] * len(chunk))
        cursor.execute(f"UPDATE {table} SET keep = 0 WHERE seq IN ({marks})", chunk)


def _check_sets(cursor, dataset: Dataset, problems: _Problems, file_rows) -> None:
    names = _file_names(file_rows)
    cursor.execute("CREATE INDEX stg_item_ext ON stg_item (external_id)")
    cursor.execute("CREATE INDEX stg_response_key ON stg_response (external_id, model_name)")
    if connection.vendor == "postgresql":
        # Temp tables are never auto-analyzed; without statistics the planner picks nested
        # loops over 1M staged rows. annotation_item may have just grown by a previous import.
        cursor.execute("ANALYZE stg_item")
        cursor.execute("ANALYZE stg_response")
        cursor.execute("ANALYZE annotation_item")

    def p(code, message):
        return lambda r: Problem(names[r[1]], r[2], "", code, message(r))

    _set_check(
        cursor,
        """SELECT s.seq, s.file_pos, s.line, s.external_id, f.file_pos, f.line
             FROM stg_item s
             JOIN (SELECT external_id, MIN(seq) AS first FROM stg_item
                    GROUP BY external_id HAVING COUNT(*) > 1) d
               ON d.external_id = s.external_id AND s.seq > d.first
             JOIN stg_item f ON f.seq = d.first
            ORDER BY s.seq""",
        [],
        problems,
        p(
            "duplicate_item",
            lambda r: f"item {r[3]!r} already appears at {names[r[4]]}, line {r[5]}",
        ),
        "stg_item",
    )
    _set_check(
        cursor,
        """SELECT s.seq, s.file_pos, s.line, s.external_id
             FROM stg_item s JOIN annotation_item i
               ON i.dataset_id = %s AND i.external_id = s.external_id
            WHERE s.keep = 1 AND i.content_hash <> s.content_hash
            ORDER BY s.seq""",
        [dataset.pk],
        problems,
        p(
            "changed_item",
            lambda r: (
                f"item {r[3]!r} exists in the dataset with different "
                "content (skip keeps the stored version)"
            ),
        ),
        "stg_item",
    )
    _set_check(
        cursor,
        """SELECT s.seq, s.file_pos, s.line, s.external_id
             FROM stg_response s
            WHERE NOT EXISTS (SELECT 1 FROM stg_item t
                               WHERE t.external_id = s.external_id AND t.keep = 1)
              AND NOT EXISTS (SELECT 1 FROM annotation_item i
                               WHERE i.dataset_id = %s AND i.external_id = s.external_id)
            ORDER BY s.seq""",
        [dataset.pk],
        problems,
        p(
            "unknown_item",
            lambda r: (
                f"response to item {r[3]!r}, which is neither in the dataset nor in this import"
            ),
        ),
        "stg_response",
    )
    _set_check(
        cursor,
        """SELECT s.seq, s.file_pos, s.line, s.external_id, s.model_name
             FROM stg_response s
             JOIN (SELECT external_id, model_name, MIN(seq) AS first FROM stg_response
                    WHERE keep = 1 GROUP BY external_id, model_name HAVING COUNT(*) > 1) d
               ON d.external_id = s.external_id AND d.model_name = s.model_name
              AND s.seq > d.first
            WHERE s.keep = 1
            ORDER BY s.seq""",
        [],
        problems,
        p("duplicate_response", lambda r: f"a second response of {r[4]!r} to item {r[3]!r}"),
        "stg_response",
    )
    _set_check(
        cursor,
        """SELECT s.seq, s.file_pos, s.line, s.external_id, s.model_name
             FROM stg_response s
             JOIN annotation_item i ON i.dataset_id = %s AND i.external_id = s.external_id
            WHERE s.keep = 1
              AND EXISTS (SELECT 1 FROM annotation_response r
                           WHERE r.item_id = i.id AND r.model_name = s.model_name
                             AND r.text <> s.text)
            ORDER BY s.seq""",
        [dataset.pk],
        problems,
        p(
            "changed_response",
            lambda r: (
                f"{r[4]!r} already has a different response to item "
                f"{r[3]!r} (skip keeps the stored one)"
            ),
        ),
        "stg_response",
    )
    _check_model_names(cursor, dataset, problems, p)


def _check_model_names(cursor, dataset: Dataset, problems: _Problems, p) -> None:
    """A model name new to the dataset that looks like one it has, or like a name earlier in
    the import (annotation.names), is a lookalike_name problem on each of its rows: two
    spellings of one model would split its responses and scores in two."""
    cursor.execute(
        """SELECT DISTINCT r.model_name FROM annotation_response r
             JOIN annotation_item i ON i.id = r.item_id WHERE i.dataset_id = %s""",
        [dataset.pk],
    )
    scope = NameScope("model", (name for (name,) in cursor.fetchall()))
    cursor.execute(
        "SELECT model_name FROM stg_response WHERE keep = 1 GROUP BY model_name ORDER BY MIN(seq)"
    )
    refused = {name: why for (name,) in cursor.fetchall() if (why := scope.admit(name))}
    if not refused:
        return
    marks = ", ".join(["%s"] * len(refused))
    _set_check(
        cursor,
        f"""SELECT s.seq, s.file_pos, s.line, s.model_name FROM stg_response s
             WHERE s.keep = 1 AND s.model_name IN ({marks}) ORDER BY s.seq""",
        list(refused),
        problems,
        p("lookalike_name", lambda r: refused[r[3]]),
        "stg_response",
    )


def _apply(cursor, dataset: Dataset, upload: DatasetUpload) -> tuple[dict | None, dict]:
    """Insert the kept staged rows. Returns (responses created per model when that came for
    free, else None; the counts for the job row)."""
    now = timezone.now()
    cursor.execute(
        f"""INSERT INTO annotation_item
               (dataset_id, external_id, instruction, reference_answer, difficulty,
                source_task, metadata, content_hash, upload_id, created_at)
            SELECT %s, s.external_id, s.instruction, s.reference, s.difficulty, s.task,
                   {_json_cast("s.metadata")}, s.content_hash, %s, %s
              FROM stg_item s
             WHERE s.keep = 1
               AND NOT EXISTS (SELECT 1 FROM annotation_item i
                                WHERE i.dataset_id = %s AND i.external_id = s.external_id)
             ORDER BY s.seq""",
        [dataset.pk, upload.pk, now, dataset.pk],
    )
    items_created = cursor.rowcount
    cursor.execute("SELECT COUNT(*) FROM stg_item WHERE keep = 1")
    items_kept = cursor.fetchone()[0]
    new_items = """JOIN annotation_item i ON i.dataset_id = %s AND i.external_id = s.external_id
                    AND i.upload_id = %s WHERE s.keep = 1"""
    cursor.execute(
        f"""INSERT INTO annotation_itemskill (item_id, skill_id, rank, checklist)
            SELECT i.id, k.skill_id, k.rank, {_json_cast("k.checklist")}
              FROM stg_item_skill k JOIN stg_item s ON s.seq = k.seq {new_items}""",
        [dataset.pk, upload.pk],
    )
    cursor.execute(
        f"""INSERT INTO annotation_itemdomain (item_id, domain_id)
            SELECT i.id, d.domain_id
              FROM stg_item_domain d JOIN stg_item s ON s.seq = d.seq {new_items}""",
        [dataset.pk, upload.pk],
    )
    cursor.execute(
        """SELECT EXISTS (SELECT 1 FROM annotation_response r
                            JOIN annotation_item i ON i.id = r.item_id
                           WHERE i.dataset_id = %s)""",
        [dataset.pk],
    )
    had_responses = bool(cursor.fetchone()[0])
    # The WHERE makes SQLite parse ON CONFLICT as an upsert clause, not a join constraint.
    # ORDER BY: responses get their ids in the file's order, as items do, whatever order the
    # join comes out in (a hash join's is not the file's), so a campaign's tasks, made in
    # response order, are claimed in the file's order on every database and every run.
    insert = f"""INSERT INTO annotation_response
               (item_id, model_name, text, metadata, upload_id, created_at)
            SELECT i.id, s.model_name, s.text, {_json_cast("s.metadata")}, %s, %s
              FROM stg_response s
              JOIN annotation_item i ON i.dataset_id = %s AND i.external_id = s.external_id
             WHERE s.keep = 1
             ORDER BY s.seq
            ON CONFLICT (item_id, model_name) DO NOTHING"""
    params = [upload.pk, now, dataset.pk]
    created_by_model: dict[str, int] | None = None
    if connection.vendor == "postgresql" and not had_responses:
        # Into a dataset without responses, what the insert returns *is* the per-model
        # coverage: no second scan of annotation_response (3.5 s per 1M rows measured).
        cursor.execute(
            f"WITH ins AS ({insert} RETURNING model_name) "
            "SELECT model_name, COUNT(*) FROM ins GROUP BY model_name",
            params,
        )
        created_by_model = dict(cursor.fetchall())
        responses_created = sum(created_by_model.values())
    else:
        cursor.execute(insert, params)
        responses_created = cursor.rowcount
    cursor.execute("SELECT COUNT(*) FROM stg_response WHERE keep = 1")
    responses_kept = cursor.fetchone()[0]
    return created_by_model, {
        "items_created": items_created,
        "items_unchanged": items_kept - items_created,
        "responses_created": responses_created,
        "responses_unchanged": responses_kept - responses_created,
    }


def _model_coverage(cursor, dataset: Dataset, created_by_model: dict | None) -> list[dict]:
    """For each model in this import: responses in the dataset and items without one."""
    cursor.execute("SELECT COUNT(*) FROM annotation_item WHERE dataset_id = %s", [dataset.pk])
    total_items = cursor.fetchone()[0]
    if created_by_model is not None:
        return [
            {"model": name, "responses": n, "items_without_response": total_items - n}
            for name, n in sorted(created_by_model.items())
        ]
    cursor.execute(
        """SELECT r.model_name, COUNT(*) FROM annotation_response r
             JOIN annotation_item i ON i.id = r.item_id
            WHERE i.dataset_id = %s
              AND r.model_name IN (SELECT DISTINCT model_name FROM stg_response)
            GROUP BY r.model_name ORDER BY r.model_name""",
        [dataset.pk],
    )
    return [
        {"model": name, "responses": n, "items_without_response": total_items - n}
        for name, n in cursor.fetchall()
    ]
