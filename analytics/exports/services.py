"""Exports of a project's scores (docs/EXPORTS.md): the formats, written as a stream of text
chunks, and the export job (ExportJob) that writes one to a file in the background.

Contract
- One writer for every entry point: the Celery task, the pages, the API and the
  `export_scores` command all stream through `ScoreExport.chunks()`, whose memory is bound by
  one chunk of rows (the queries run on server-side cursors), not by the export.
- Options are checked before a job exists: `export_options_clean` resolves every filter
  against the project and raises ExportOptionsError with the problems per field.
- Jobs are claimed pending -> running by a conditional UPDATE, so a redelivered task finds
  the job claimed and does nothing; finishing is conditional too, so a late success never
  overwrites a recorded failure. A crash marks the job failed with the error.
- The file is written to a temporary file first and saved to storage only when complete;
  the job points at it only once it is saved, so a half-written export is never served.
- One snapshot: on PostgreSQL an export reads in one REPEATABLE READ, READ ONLY
  transaction, so scores submitted meanwhile cannot make its sources disagree.
- CSV cells are protected against formula injection (`csv_safe`); JSONL is left as is.
"""

from __future__ import annotations

import contextlib
import csv
import heapq
import io
import json
import logging
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import chain, groupby
from typing import IO, Any, NamedTuple

from django.core.exceptions import SuspiciousFileOperation
from django.core.files import File
from django.db import connection, transaction
from django.utils import timezone
from django.utils.text import get_valid_filename

from analytics.exports.preferences import PREFERENCE_COLUMNS, preference_export_rows
from analytics.exports.selectors import (
    ExportFilters,
    ReviewLine,
    ScoreRow,
    flask_review_lines,
    human_score_export_rows,
    imported_score_export_rows,
    imported_scores_are_small_integers,
    judge_score_export_rows,
    latest_run_ids,
    raters_for_export,
)
from analytics.exports.training import (
    TRAINING_FILTERS,
    TRAINING_KIND,
    TrainingExport,
    TrainingOptions,
    training_options_clean,
    training_options_stored,
)
from analytics.models import (
    ExportFormat,
    ExportJob,
    ExportKind,
    ExportStatus,
    ImportedScore,
    RaterKind,
)
from analytics.tasks import export_run_task
from annotation import selectors as annotation_selectors
from annotation.models import Project
from flaskweb.db import is_postgres
from flaskweb.infra import is_infra_error, reconnecting
from flaskweb.jobs import job_claim, job_finish, jobs_fail_stale
from judging import selectors as judging_selectors
from judging.models import JudgeRun

logger = logging.getLogger(__name__)

#: Rows per chunk handed to the caller (and written to the file at once).
CHUNK_ROWS = 2000
#: Unfinished (pending or running) exports a project may have at a time.
MAX_ACTIVE_EXPORTS = 5

LONG_COLUMNS = (
    "project",
    "dataset",
    "item",
    "system",
    "skill",
    "rater",
    "rater_kind",
    "score",
    "is_na",
    "rationale",
    "time_on_task_ms",
    "rubric_version",
    "prompt_version",
    "source",
    "created_at",
    "updated_at",
    "sample",
    # added after the others, so positions stay: "built-in v1" / "project:<slug> v1"
    "rubric_label",
    # a study participant's recruiting platform and worker id (blank for other raters)
    "platform",
    "worker_id",
    # a reviewer's adjudicated score of the row's (campaign, response, skill), on campaign
    # rows only (annotation/review/); the raw score stays in `score`
    "adjudicated_score",
    "adjudicated_note",
    "adjudicated_by",
    # the language a person's task was shown in (a code of LANGUAGES; empty: unknown, a
    # judge or an imported score; docs/LANGUAGES.md)
    "language",
)
WIDE_COLUMNS = ("dataset", "item", "system", "skill")


class Column(NamedTuple):
    """A column of a Parquet export: its name and type (analytics.exports.columnar)."""

    name: str
    type: str


#: The long table's Parquet types, by column; `score` is int8 or float64 (ScoreExport.typed).
LONG_TYPES = {
    **dict.fromkeys(LONG_COLUMNS, "string"),
    "is_na": "bool",
    "rationale": "large_string",
    "time_on_task_ms": "int64",
    "rubric_version": "int64",
    "prompt_version": "int64",
    "created_at": "timestamp",
    "updated_at": "timestamp",
    "sample": "int64",
    "adjudicated_score": "int8",
    "adjudicated_note": "large_string",
}
#: Parquet has types: the long table's N/A adjudications get a flag of their own (last).
ADJUDICATED_NA_COLUMN = "adjudicated_is_na"
#: Suffix of the wide table's flag column beside each rater column: true where it is N/A.
NA_SUFFIX = ":na"
PREFERENCE_TYPES = {
    **dict.fromkeys(PREFERENCE_COLUMNS, "string"),
    "strength": "int8",
    "rationale": "large_string",
    "time_on_task_ms": "int64",
    "submitted_at": "timestamp",
}
REVIEW_COLUMNS = (
    Column("question_id", "string"),
    Column("model_id", "string"),
    Column("text", "large_string"),
    Column("answer", "large_string"),
    Column("metrics", "strings"),
    Column("target_txt", "large_string"),
    Column("review", "large_string"),
    Column("score", "scores"),
    Column("total_tokens_step4", "int64"),
)
#: The wide table's last column when reviewers settled some (response, skill): their score.
ADJUDICATED_COLUMN = "adjudicated"
NA = "N/A"

#: The formats each kind is written in; the first is the default.
FORMATS_OF = {
    ExportKind.LONG: (ExportFormat.CSV, ExportFormat.JSONL, ExportFormat.PARQUET),
    ExportKind.WIDE: (ExportFormat.CSV, ExportFormat.PARQUET),
    ExportKind.FLASK_REVIEW: (ExportFormat.JSONL, ExportFormat.PARQUET),
    ExportKind.PREFERENCES: (ExportFormat.CSV, ExportFormat.JSONL, ExportFormat.PARQUET),
    ExportKind.HF_DATASET: (ExportFormat.ZIP,),
}
CONTENT_TYPES = {
    ExportFormat.CSV: "text/csv; charset=utf-8",
    ExportFormat.JSONL: "application/x-ndjson; charset=utf-8",
    ExportFormat.PARQUET: "application/vnd.apache.parquet",
    ExportFormat.ZIP: "application/zip",
}
#: Formats written as bytes by pyarrow (analytics.exports.columnar), not as text chunks.
BINARY_FORMATS = (ExportFormat.PARQUET, ExportFormat.ZIP)
FILTER_KEYS = ("skill", "rater_kind", "judge", "campaign", "dataset", "system", "run")
_LIST_FILTERS = ("skill", "judge", "system")

#: What a spreadsheet would read as the start of a formula (OWASP "CSV injection").
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text, never evaluates: a string starting with =, +,
    -, @, a tab or a carriage return gets a leading apostrophe. Numbers (a score, -0.5
    included) and everything else are returned untouched."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def _number(value: float | int | None) -> float | int | None:
    """4.0 -> 4: imported and averaged scores read like the 1-5 integers of campaigns."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


# --- options ------------------------------------------------------------------------------------


class ExportOptionsError(ValueError):
    """An export asked for with options that cannot work; `errors` maps each field (kind,
    format, skill, rater_kind, judge, campaign, dataset, system, run, filters or
    non_field_errors) to its messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__(
            "; ".join(f"{name}: {' '.join(messages)}" for name, messages in errors.items())
        )


@dataclass(frozen=True)
class ExportOptions:
    project: Project
    kind: str
    fmt: str
    filters: ExportFilters
    stored: dict[str, Any]  # the filters as given, resolved (what ExportJob.filters keeps)
    training: TrainingOptions | None = None  # a judge-training export (analytics.exports.training)

    @property
    def content_type(self) -> str:
        return CONTENT_TYPES[ExportFormat(self.fmt)]

    @property
    def download_name(self) -> str:
        return download_name(
            project_slug=self.project.slug, kind=self.kind, fmt=self.fmt, filters=self.stored
        )


def download_name(*, project_slug: str, kind: str, fmt: str, filters: Mapping[str, Any]) -> str:
    """The file name a download is offered under. A FLASK review file of one system is
    named as the FLASK scripts name theirs, `<system>_review.jsonl`: the judge-output
    import reads the judged model from that name."""
    if kind == TRAINING_KIND:
        name = f"{project_slug}-judge-training.jsonl"
    elif kind == ExportKind.FLASK_REVIEW:
        systems, judges = filters.get("system") or [], filters.get("judge") or ["judge"]
        if len(systems) == 1:
            name = f"{systems[0]}_review.{fmt}"
        else:
            name = f"{judges[0]}-run{filters.get('run')}-reviews.{fmt}"
    elif kind == ExportKind.HF_DATASET:
        name = f"{project_slug}-hf-dataset.zip"
    elif kind == ExportKind.PREFERENCES:
        name = f"{project_slug}-preferences.{fmt}"
    else:
        name = f"{project_slug}-scores-{kind}.{fmt}"
    try:
        return get_valid_filename(name)
    except SuspiciousFileOperation:
        return f"export.{fmt}"


def _names(value: Any) -> list[str]:
    """A filter's names: a string or a list of strings, trimmed, blanks and repeats dropped."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    names: list[str] = []
    for item in items:
        text = str(item).strip()
        if text and text not in names:
            names.append(text)
    return names


def export_options_clean(
    *, project: Project, kind: str, fmt: str = "", filters: Mapping[str, Any] | None = None
) -> ExportOptions:
    """Check an export's kind, format and filters against the project and resolve them.
    Raises ExportOptionsError with every problem, per field."""
    if kind == TRAINING_KIND:
        return _training_options_clean(project=project, fmt=fmt, filters=filters)
    errors: dict[str, list[str]] = {}

    def bad(name: str, message: str) -> None:
        errors.setdefault(name, []).append(message)

    raw = dict(filters or {})
    unknown = sorted(set(raw) - set(FILTER_KEYS))
    if unknown:
        bad("filters", f"unknown filter(s): {', '.join(unknown)} (known: {', '.join(FILTER_KEYS)})")
    if kind not in ExportKind.values:
        bad("kind", f"{kind!r} is not one of {', '.join(ExportKind.values)}")
        raise ExportOptionsError(errors)
    kind = ExportKind(kind)
    fmt = fmt or FORMATS_OF[kind][0]
    if fmt not in FORMATS_OF[kind]:
        allowed = " or ".join(str(f) for f in FORMATS_OF[kind])
        bad("format", f"a {kind} export is written as {allowed}, not {fmt!r}")

    skills = _names(raw.get("skill"))
    judges = _names(raw.get("judge"))
    systems = _names(raw.get("system"))
    rater_kind = str(raw.get("rater_kind") or "").strip()
    campaign_name = str(raw.get("campaign") or "").strip()
    dataset_name = str(raw.get("dataset") or "").strip()
    run_id = raw.get("run")

    if skills:
        known = set(
            annotation_selectors.skill_list_for_project(project=project).values_list(
                "name", flat=True
            )
        )
        missing = [s for s in skills if s not in known]
        if missing:
            bad("skill", f"not a skill of the project: {', '.join(missing)}")
    if rater_kind not in ("", *RaterKind.values):
        bad("rater_kind", f"{rater_kind!r} is not one of {', '.join(RaterKind.values)}")
    if judges:
        known = set(judging_selectors.judge_names_for_project(project=project)) | set(
            ImportedScore.objects.filter(
                project=project, rater_kind=RaterKind.JUDGE, rater__in=judges
            ).values_list("rater", flat=True)
        )
        missing = [j for j in judges if j not in known]
        if missing:
            bad("judge", f"not a judge of the project: {', '.join(missing)}")

    campaign = dataset = None
    if campaign_name:
        campaign = annotation_selectors.campaign_get_by_name(project=project, name=campaign_name)
        if campaign is None:
            bad("campaign", f"the project has no campaign {campaign_name!r}")
    if dataset_name:
        dataset = annotation_selectors.dataset_get_by_name(project=project, name=dataset_name)
        if dataset is None:
            bad("dataset", f"the project has no dataset {dataset_name!r}")
    if campaign is not None and dataset is not None and campaign.dataset_id != dataset.pk:
        bad("campaign", f"campaign {campaign.name!r} scores another dataset than {dataset.name!r}")
    known_systems = (
        set(annotation_selectors.project_system_names(project=project)) if systems else set()
    )
    missing = [s for s in systems if s not in known_systems]
    if missing:
        bad("system", f"no response of the project is by {', '.join(missing)}")
    dataset_id = dataset.pk if dataset is not None else None
    if campaign is not None:
        dataset_id = campaign.dataset_id

    run = None
    if run_id is not None and run_id != "":
        try:
            run = judging_selectors.pointwise_run_get(project=project, run_id=int(run_id))
        except (TypeError, ValueError):
            run = None
        if run is None:
            bad("run", f"the project has no pointwise judge run {run_id!r}")
        if kind == ExportKind.WIDE:
            bad("run", "a wide table reads each judge's latest finished run; no run is chosen")
    if kind == ExportKind.FLASK_REVIEW and "judge" not in errors:
        run = _review_run(project, judges, run, dataset_id, rater_kind, bad)

    effective_systems = tuple(systems)
    if campaign is not None and campaign.model_names:
        # a campaign that names its systems covers only their responses
        effective_systems = tuple(
            s for s in systems or campaign.model_names if s in campaign.model_names
        )
        if not effective_systems:
            bad(
                "system",
                f"campaign {campaign.name!r} scores only {', '.join(campaign.model_names)}",
            )
    if errors:
        raise ExportOptionsError(errors)
    stored = {
        "skill": skills,
        "rater_kind": rater_kind,
        "judge": judges,
        "campaign": campaign_name,
        "dataset": dataset_name,
        "system": systems,
        "run": run.pk if run is not None else None,
    }
    resolved = ExportFilters(
        skills=tuple(skills),
        rater_kind=rater_kind,
        judges=tuple(judges),
        campaign_id=campaign.pk if campaign is not None else None,
        dataset_id=dataset_id,
        systems=effective_systems,
        run_id=run.pk if run is not None else None,
    )
    return ExportOptions(
        project=project,
        kind=kind,
        fmt=fmt,
        filters=resolved,
        stored={k: v for k, v in stored.items() if v not in ("", [], None)},
    )


def _training_options_clean(
    *, project: Project, fmt: str, filters: Mapping[str, Any] | None
) -> ExportOptions:
    """A judge-training export's options: its own (`filters["training"]`) and the filters it
    takes (skill, campaign, dataset, system), resolved like a long export of people's
    scores."""
    raw = dict(filters or {})
    training, errors = training_options_clean(raw.pop("training", None))
    refused = sorted(
        k for k, v in raw.items() if k not in TRAINING_FILTERS and v not in ("", [], None)
    )
    if refused:
        errors.setdefault("filters", []).append(
            f"a judge-training export reads people's scores; it takes no {', '.join(refused)} "
            f"(it takes {', '.join(TRAINING_FILTERS)})"
        )
    if fmt not in ("", ExportFormat.JSONL):
        errors.setdefault("format", []).append(f"a {TRAINING_KIND} export is written as jsonl")
    try:
        base = export_options_clean(
            project=project,
            kind=ExportKind.LONG,
            fmt=ExportFormat.JSONL,
            filters={**{k: raw[k] for k in TRAINING_FILTERS if k in raw}, "rater_kind": "human"},
        )
    except ExportOptionsError as exc:
        for name, messages in exc.errors.items():
            errors.setdefault(name, []).extend(messages)
        base = None
    if errors or base is None:
        raise ExportOptionsError(errors)
    stored = {k: v for k, v in base.stored.items() if k != "rater_kind"}
    stored["training"] = training_options_stored(training)
    return ExportOptions(
        project=project,
        kind=TRAINING_KIND,
        fmt=ExportFormat.JSONL,
        filters=base.filters,
        stored=stored,
        training=training,
    )


def _review_run(project, judges, run, dataset_id, rater_kind, bad) -> JudgeRun | None:
    """The run a FLASK review file is written from: the one asked for, or the judge's
    latest finished pointwise run (on the dataset asked for)."""
    if len(judges) != 1:
        bad("judge", "a FLASK review file holds one judge's reviews: name exactly one judge")
        return None
    if rater_kind == RaterKind.HUMAN:
        bad("rater_kind", "a FLASK review file holds judge reviews, not human scores")
    judge = judging_selectors.judge_get_by_name(project=project, name=judges[0])
    if judge is None:
        bad(
            "judge",
            f"{judges[0]!r} is a rater of imported scores, not a judge with runs; "
            "export its scores as a long table",
        )
        return None
    if run is not None:
        if run.judge_id != judge.pk:
            bad("run", f"run {run.pk} is not a run of judge {judge.name!r}")
        return run
    latest = judging_selectors.pointwise_run_latest(judge=judge, dataset_id=dataset_id)
    if latest is None:
        bad(
            "judge",
            f"judge {judge.name!r} has no finished pointwise run"
            + (" on that dataset" if dataset_id is not None else ""),
        )
    return latest


# --- the writer -----------------------------------------------------------------------------------


def _row_key(row: ScoreRow) -> tuple[int, int]:
    return row.response_id, row.skill_id


class ScoreExport:
    """One export, written as text chunks of `chunk_rows` rows each (the CSV header goes
    with the first). `rows` counts the data rows yielded so far."""

    def __init__(self, options: ExportOptions, *, chunk_rows: int = CHUNK_ROWS) -> None:
        self.options = options
        self.chunk_rows = chunk_rows
        self.rows = 0
        self._adjudicated: dict | None = None

    def _adjudication(self, row: ScoreRow) -> list[Any]:
        """The adjudicated score, note and reviewer of a campaign row's (campaign, response,
        skill), or three empty cells. Read once per export (one query; as many rows as
        reviewers settled)."""
        if row.rater_kind != RaterKind.HUMAN or not row.source.startswith("campaign:"):
            return [None, None, None]
        if self._adjudicated is None:
            self._adjudicated = annotation_selectors.adjudicated_export_map(
                project=self.options.project, campaign_id=self.options.filters.campaign_id
            )
        found = self._adjudicated.get((row.source[9:], row.response_id, row.skill_id))
        if found is None:
            return [None, None, None]
        score, is_na, note, reviewer = found
        return [NA if is_na else score, note, reviewer]

    def chunks(self) -> Iterator[str]:
        kind, fmt = self.options.kind, self.options.fmt
        if kind == ExportKind.FLASK_REVIEW:
            return self._jsonl(self._review_objects())
        if kind == ExportKind.WIDE:
            header, rows = self._wide_table()
            return self._csv(header, rows)
        if kind == ExportKind.PREFERENCES:
            rows = preference_export_rows(
                project=self.options.project, filters=self.options.filters
            )
            if fmt == ExportFormat.JSONL:
                return self._jsonl(dict(zip(PREFERENCE_COLUMNS, r, strict=True)) for r in rows)
            return self._csv(PREFERENCE_COLUMNS, rows)
        if fmt == ExportFormat.JSONL:
            return self._jsonl(self._long_object(row) for row in self._score_rows())
        return self._csv(LONG_COLUMNS, (self._long_cells(row) for row in self._score_rows()))

    def typed(self) -> tuple[list[Column], Iterator[list[Any]]]:
        """The export as typed rows for a Parquet file: its columns (names and types) and
        the rows' values in their order. N/A is null (with a boolean beside it where the
        text formats write `N/A`), times are datetimes, nothing is CSV-escaped. `rows`
        counts the rows as they are read."""
        kind = self.options.kind
        if kind == ExportKind.FLASK_REVIEW:
            return list(REVIEW_COLUMNS), self._counted(
                _review_values(line)
                for line in flask_review_lines(
                    run_id=self._run_id(), filters=self.options.filters, chunk_size=self.chunk_rows
                )
            )
        if kind == ExportKind.WIDE:
            return self._wide_typed()
        if kind == ExportKind.PREFERENCES:
            columns = [Column(name, PREFERENCE_TYPES[name]) for name in PREFERENCE_COLUMNS]
            rows = preference_export_rows(
                project=self.options.project, filters=self.options.filters
            )
            return columns, self._counted(_preference_values(row) for row in rows)
        return self.long_columns(), self._counted(
            self._long_typed(row) for row in self._score_rows()
        )

    def long_columns(self) -> list[Column]:
        """The long table's typed columns: the text formats' columns in their order, then
        `adjudicated_is_na`. `score` is int8 when every imported score of the export is a
        small whole number (campaign and judge scores always are), float64 otherwise."""
        whole = imported_scores_are_small_integers(
            project=self.options.project, filters=self.options.filters
        )
        types = {**LONG_TYPES, "score": "int8" if whole else "float64"}
        return [Column(name, types[name]) for name in LONG_COLUMNS] + [
            Column(ADJUDICATED_NA_COLUMN, "bool")
        ]

    def _counted(self, rows: Iterator[list[Any]]) -> Iterator[list[Any]]:
        for row in rows:
            self.rows += 1
            yield row

    def _run_id(self) -> int:
        run_id = self.options.filters.run_id
        assert run_id is not None, "a FLASK review export is validated with its run"
        return run_id

    def _long_typed(self, row: ScoreRow) -> list[Any]:
        adjudicated, note, reviewer = self._adjudication(row)
        return [
            *self._long_base(row, na=None, when=lambda at: at),
            None if adjudicated == NA else adjudicated,
            note,
            reviewer,
            row.language or None,
            adjudicated == NA,
        ]

    def _wide_typed(self) -> tuple[list[Column], Iterator[list[Any]]]:
        """The wide table with a float64 column per rater (null where the rater gave no
        score, or only N/A) and beside it a boolean `<column>:na`, true where the rater
        said N/A; the adjudicated column, when there is one, is int8 with its own flag."""
        header, rows = self._wide_table()
        columns = [Column(name, "string") for name in WIDE_COLUMNS]
        for name in header[len(WIDE_COLUMNS) :]:
            kind = "int8" if name == ADJUDICATED_COLUMN else "float64"
            columns += [Column(name, kind), Column(name + NA_SUFFIX, "bool")]

        def typed() -> Iterator[list[Any]]:
            for cells in rows:
                values = list(cells[: len(WIDE_COLUMNS)])
                for cell in cells[len(WIDE_COLUMNS) :]:
                    values += [None, True] if cell == NA else [cell, False]
                yield values

        return columns, self._counted(typed())

    # --- framing

    def _csv(self, header, rows) -> Iterator[str]:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([csv_safe(cell) for cell in header])
        pending = 0
        for row in rows:
            writer.writerow([csv_safe(cell) for cell in row])
            self.rows += 1
            pending += 1
            if pending >= self.chunk_rows:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
                pending = 0
        if buffer.tell():
            yield buffer.getvalue()

    def _jsonl(self, objects) -> Iterator[str]:
        lines: list[str] = []
        for obj in objects:
            lines.append(json.dumps(obj, ensure_ascii=False, allow_nan=False) + "\n")
            self.rows += 1
            if len(lines) >= self.chunk_rows:
                yield "".join(lines)
                lines = []
        if lines:
            yield "".join(lines)

    # --- long

    def _score_rows(self) -> Iterator[ScoreRow]:
        project, f = self.options.project, self.options.filters
        return heapq.merge(
            human_score_export_rows(project=project, filters=f),
            judge_score_export_rows(project=project, filters=f),
            imported_score_export_rows(project=project, filters=f),
            key=_row_key,
        )

    def _long_base(self, row: ScoreRow, *, na: Any, when: Callable[[Any], Any]) -> list[Any]:
        """A long row's cells before the adjudication: `na` for an N/A score, `when` for
        the times (the text formats write ISO strings, Parquet keeps datetimes)."""
        return [
            self.options.project.slug,
            row.dataset,
            row.item,
            row.system,
            row.skill,
            row.rater,
            row.rater_kind,
            na if row.is_na else _number(row.score),
            row.is_na,
            row.rationale,
            row.time_on_task_ms,
            row.rubric_version,
            row.prompt_version,
            row.source,
            when(row.created_at),
            when(row.updated_at),
            row.sample,
            row.rubric_label,
            row.platform or None,
            row.worker_id or None,
        ]

    def _long_values(self, row: ScoreRow) -> list[Any]:
        return [
            *self._long_base(row, na=NA, when=_iso),
            *self._adjudication(row),
            row.language or None,
        ]

    def _long_cells(self, row: ScoreRow) -> list[Any]:
        values = self._long_values(row)
        values[8] = "true" if row.is_na else "false"
        return values

    def _long_object(self, row: ScoreRow) -> dict[str, Any]:
        return dict(zip(LONG_COLUMNS, self._long_values(row), strict=True))

    # --- wide

    def _wide_table(self) -> tuple[list[str], Iterator[list[Any]]]:
        project, f = self.options.project, self.options.filters
        run_ids = latest_run_ids(project=project, filters=f)
        humans, judges = raters_for_export(project=project, filters=f, run_ids=run_ids)
        columns = [(RaterKind.HUMAN.value, h) for h in humans]
        columns += [(RaterKind.JUDGE.value, j) for j in judges]
        index = {column: i for i, column in enumerate(columns)}
        header = [*WIDE_COLUMNS, *(f"{kind}:{name}" for kind, name in columns)]
        # reviewers' adjudicated scores (docs/REVIEW.md) in a last column, when there are any
        settled: dict[tuple[int, str], int | None] = {}
        if f.wants(RaterKind.HUMAN.value):
            settled = {
                (response_id, skill): score
                for response_id, _, _, skill, score in annotation_selectors.adjudicated_score_rows(
                    project=project,
                    campaign_id=f.campaign_id,
                    skills=f.skills,
                    dataset_id=f.dataset_id,
                    systems=f.systems,
                )
            }
        if settled:
            header.append(ADJUDICATED_COLUMN)
        stream = heapq.merge(
            human_score_export_rows(project=project, filters=f),
            judge_score_export_rows(project=project, filters=f, run_ids=run_ids),
            imported_score_export_rows(project=project, filters=f),
            key=_row_key,
        )

        def rows() -> Iterator[list[Any]]:
            for _, group in groupby(stream, key=_row_key):
                first = next(group)
                # per column: [sum of values, number of values, number of N/A]
                acc: dict[int, list] = {}
                for row in chain((first,), group):
                    cell = acc.setdefault(index[(row.rater_kind, row.rater)], [0, 0, 0])
                    if row.is_na:
                        cell[2] += 1
                    else:
                        cell[0] += row.score
                        cell[1] += 1
                cells = [_wide_cell(acc.get(i)) for i in range(len(columns))]
                if settled:
                    cells.append(_settled_cell(settled, (first.response_id, first.skill)))
                yield [first.dataset, first.item, first.system, first.skill, *cells]

        return header, rows()

    # --- FLASK review

    def _review_objects(self) -> Iterator[dict[str, Any]]:
        f = self.options.filters
        assert f.run_id is not None, "a FLASK review export is validated with its run"
        for line in flask_review_lines(run_id=f.run_id, filters=f, chunk_size=self.chunk_rows):
            yield _review_object(line)


def _settled_cell(settled: Mapping[tuple[int, str], int | None], key: tuple[int, str]) -> Any:
    """The adjudicated column's cell: the score, N/A, or empty when nobody settled it."""
    if key not in settled:
        return None
    score = settled[key]
    return NA if score is None else score


def _wide_cell(acc: list | None) -> Any:
    """A rater's cell: the score; the mean of several (k judge samples, or one person in two
    campaigns), N/A left out; N/A when every one was N/A; empty when not scored."""
    if acc is None:
        return None
    total, count, na = acc
    if count:
        return _number(total / count if count > 1 else total)
    return NA if na else None


def _review_values(line: ReviewLine) -> list[Any]:
    """One FLASK review line as REVIEW_COLUMNS values: `score` a map, null for N/A."""
    return [
        line.item,
        line.system,
        line.instruction,
        line.reference,
        [skill for skill, _ in line.scores],
        line.response,
        line.review,
        list(line.scores),
        line.total_tokens,
    ]


def _preference_values(row: list[Any]) -> list[Any]:
    """A preference export row with its time as a datetime (the text formats' ISO string)."""
    *values, submitted, language = row
    return [*values, None if submitted is None else datetime.fromisoformat(submitted), language]


def _review_object(line: ReviewLine) -> dict[str, Any]:
    """One line of a FLASK review file, as judging.output_imports reads it."""
    obj: dict[str, Any] = {
        "question_id": line.item,
        "model_id": line.system,
        "text": line.instruction,
        "answer": line.reference,
        "metrics": [skill for skill, _ in line.scores],
        "target_txt": line.response,
        "review": line.review,
        "score": {skill: NA if score is None else score for skill, score in line.scores},
    }
    if line.total_tokens is not None:
        obj["total_tokens_step4"] = line.total_tokens
    return obj


@contextlib.contextmanager
def export_snapshot() -> Iterator[None]:
    """Read an export in one consistent snapshot (PostgreSQL: REPEATABLE READ, READ ONLY).
    Inside a caller's transaction (tests) the caller's transaction is the snapshot."""
    if connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        if is_postgres():
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


def export_write(options: ExportOptions, out: IO[bytes], *, chunk_rows: int = CHUNK_ROWS) -> int:
    """Write an export to a binary stream, UTF-8; returns the number of data rows."""
    export: ScoreExport | TrainingExport = ScoreExport(options, chunk_rows=chunk_rows)
    if options.training is not None:
        f = options.filters
        export = TrainingExport(
            project=options.project,
            options=options.training,
            skills=f.skills,
            dataset_id=f.dataset_id,
            systems=f.systems,
            campaign_id=f.campaign_id,
            chunk_rows=chunk_rows,
        )
    if options.fmt in BINARY_FORMATS and isinstance(export, ScoreExport):
        with export_snapshot():
            return _binary_write(export, out)
    with export_snapshot():
        for chunk in export.chunks():
            out.write(chunk.encode("utf-8"))
    return export.rows


def _binary_write(export: ScoreExport, out: IO[bytes]) -> int:
    """A Parquet file, or the zipped Hugging Face layout (analytics.exports.hf_dataset).
    Imported here: pyarrow costs every process that loads the pages a few hundred
    milliseconds at start, and only these exports need it."""
    from analytics.exports import columnar, hf_dataset

    options = export.options
    if options.kind == ExportKind.HF_DATASET:
        return hf_dataset.hf_dataset_write(options, out)
    columns, rows = export.typed()
    columnar.parquet_write(out, columns, rows, metadata=export_metadata(options))
    return export.rows


def export_metadata(options: ExportOptions) -> dict[str, Any]:
    """What a columnar file says about itself (its key-value metadata): what was exported,
    from which project, with which filters, when."""
    return {
        "project": options.project.slug,
        "kind": str(options.kind),
        "filters": options.stored,
        "exported_at": _iso(timezone.now()),
        "docs": "docs/EXPORTS.md",
    }


# --- jobs -----------------------------------------------------------------------------------------


@transaction.atomic
def export_job_create(
    *,
    project: Project,
    kind: str,
    fmt: str = "",
    filters: Mapping[str, Any] | None = None,
    requested_by=None,
    enqueue: bool = True,
) -> ExportJob:
    """Check the options and create the job (pending); the export runs in the background,
    enqueued on commit. Raises ExportOptionsError, having created nothing."""
    options = export_options_clean(project=project, kind=kind, fmt=fmt, filters=filters)
    # Counted under a lock on the project row, so two requests cannot both pass the cap.
    annotation_selectors.project_lock(slug=project.slug)
    active = ExportJob.objects.filter(
        project=project, status__in=[ExportStatus.PENDING, ExportStatus.RUNNING]
    ).count()
    if active >= MAX_ACTIVE_EXPORTS:
        raise ExportOptionsError(
            {
                "non_field_errors": [
                    f"the project has {active} exports waiting or running; ask again "
                    "when one has finished"
                ]
            }
        )
    job = ExportJob(
        project=project,
        requested_by=requested_by,
        kind=options.kind,
        format=options.fmt,
        filters=options.stored,
    )
    job.full_clean()
    job.save()
    if enqueue:
        transaction.on_commit(lambda: export_run_task.delay(job.pk))
    return job


def export_job_run(*, job_id: int, claim: datetime | None = None) -> ExportJob | None:
    """Claim and run an export job to done (its file saved) or failed (with the error).
    Returns None when the job is missing or was claimed already (a redelivered task). The
    transitions are flaskweb.jobs' (ExportStatus shares JobStatus's pending, running and
    failed values).

    With `claim` (the task, which retries: flaskweb.infra), an infrastructure error while
    writing is raised, not recorded: the job stays running under `claim` and the retry
    writes the file again (over the one an earlier attempt of this claim left). One while
    recording the outcome is retried in place."""
    job = job_claim(ExportJob, job_id, claim=claim)
    if job is None:
        return None
    what = f"export {job.pk}"
    try:
        options = export_options_clean(
            project=job.project, kind=job.kind, fmt=job.format, filters=job.filters
        )
        with tempfile.TemporaryFile() as tmp:
            rows = export_write(options, tmp)
            tmp.seek(0)
            stored_name = f"{job.project.slug}-{job.kind}-{job.pk}.{job.format}"
            # a file of this name can only be left by an earlier attempt of this claim that
            # lost the database before recording it (the job is still running under it)
            path = job.file.field.generate_filename(job, stored_name)
            if job.file.storage.exists(path):
                job.file.storage.delete(path)
            job.file.save(stored_name, File(tmp, name=stored_name), save=False)
    except Exception as exc:  # a soft time limit included: record why, never leave it running
        if claim is not None and is_infra_error(exc):
            raise
        logger.exception("export %s failed", job.pk)
        error = str(exc) if isinstance(exc, ExportOptionsError) else f"{type(exc).__name__}: {exc}"
        reconnecting(
            lambda: job_finish(ExportJob, job.pk, ExportStatus.FAILED, error=error[:5000]),
            what=what,
        )
    else:
        name = job.file.name
        won = reconnecting(
            lambda: job_finish(ExportJob, job.pk, ExportStatus.DONE, file=name, rows=rows),
            what=what,
        )
        if not won and not reconnecting(
            # a finish retried after its commit went unconfirmed finds it done with this file
            ExportJob.objects.filter(pk=job.pk, status=ExportStatus.DONE, file=name).exists,
            what=what,
        ):  # failed meanwhile (stale-job check): the file belongs to no job
            job.file.storage.delete(name)
    reconnecting(job.refresh_from_db, what=what)
    return job


def export_jobs_fail_stale(*, older_than_seconds: int) -> int:
    """Mark exports stuck in running (their worker died) as failed. Returns how many."""
    return jobs_fail_stale(
        ExportJob,
        older_than_seconds=older_than_seconds,
        error="the export stopped responding (worker lost) and was marked failed",
    )


def export_files_expire(*, older_than_days: int) -> int:
    """Delete the files of exports finished more than `older_than_days` ago and mark them
    expired (the row stays: who exported what, when). Returns how many."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    expired = 0
    for job in ExportJob.objects.filter(status=ExportStatus.DONE, finished_at__lt=cutoff):
        claimed = ExportJob.objects.filter(pk=job.pk, status=ExportStatus.DONE).update(
            status=ExportStatus.EXPIRED, error=f"the file was deleted after {older_than_days} days"
        )
        if claimed and job.file:
            job.file.delete(save=False)
            ExportJob.objects.filter(pk=job.pk).update(file="")
        expired += claimed
    return expired


@dataclass(frozen=True)
class ExportDownload:
    file: IO[bytes]
    name: str
    content_type: str


def export_file_open(*, job: ExportJob) -> ExportDownload | None:
    """A finished export's file, opened, with the name and type it is offered under; None
    while the job is not done."""
    if job.status != ExportStatus.DONE or not job.file:
        return None
    return ExportDownload(
        file=job.file.open("rb"),
        name=download_name(
            project_slug=job.project.slug, kind=job.kind, fmt=job.format, filters=job.filters
        ),
        content_type=CONTENT_TYPES[ExportFormat(job.format)],
    )
