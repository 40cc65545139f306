"""Import of judge outputs produced elsewhere, as a named judge of the project (JudgeKind
IMPORTED), so they show up like any judge run: one run per judge and import, one judgment per
response, one score per skill. Formats and rules: docs/JUDGE_OUTPUT_IMPORTS.md.

Contract
- Validate, then write. Every file is read as a stream, row by row, and every well-formed
  row is staged in a temporary table; set checks (duplicates, items, responses and their
  texts in the dataset, judge names, earlier imports) then run in SQL over the staging
  tables. If anything is wrong, nothing is written and JudgeOutputImportRejected carries
  the problems (all counted; the first PROBLEMS_KEPT in file order), each with file, line
  and field.
- Atomic: staging, checks and the judges, runs, judgments and scores of one import are one
  transaction; judgments and scores are inserted in batches read back from the staging
  tables.
- Flat in memory: no step holds the file, its rows or its judgments; memory is bounded by
  one line, one staging batch and one write batch (bench/import_memory_bench.py).
- Idempotent: a run records the SHA-256 of its input. The same bytes imported again as the
  same judge into the same dataset find that run and write nothing.

Web and API imports run as background jobs (judging.output_imports.jobs); the command runs
the same import in process.

The first half of this module is pure (streams in, rows out, no database): the parsers.
The second half, from judge_outputs_import on, stages, checks and writes.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import IO, Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from annotation.models import Dataset, Item, Project, Response
from annotation.names import NameScope, name_problem
from annotation.parsers import (
    Problem,
    RowProblems,
    ScoreRefused,
    archive_problem,
    iter_lines,
    json_line,
    score_read,
    skill_key,
    type_name,
)
from annotation.selectors import skill_list_for_project
from flaskweb.db import is_postgres
from flaskweb.jobs import (
    PROBLEMS_KEPT,
    HashingReader,
    ProblemLog,
    Progress,
    Staging,
    input_sha256,
    key_ranges,
    sql_problems,
)
from judging.models import (
    JudgeConfig,
    JudgeKind,
    JudgeRun,
    JudgeScore,
    Judgment,
    JudgmentStatus,
    RunStatus,
)

FLASK_REVIEW = "flask-review"
LONG = "long"
FORMATS = (FLASK_REVIEW, LONG)

#: Spellings of "not applicable" (compared case-insensitively, spaces trimmed).
#: Columns (or keys) every long-format row must have; `rationale` is optional.
LONG_COLUMNS = ("item", "system", "rater", "rater_kind", "skill", "score")
PARSE_METHOD = "imported"
MAX_NAME = 200  # judge names, model names and item ids, as in the models
SCALE_NOTE = "other scales are not imported here: map them to 1-5 first"


# === pure part: parsing ======================================================================


@dataclass(frozen=True)
class ImportedScore:
    skill: str  # the catalogue's spelling
    score: int | None  # None: N/A
    feedback: str = ""


@dataclass
class ImportedJudgment:
    """One judge's verdict on one response (item x model), read from the input."""

    judge: str
    item: str  # the item's external id
    model: str
    file: str
    line: int  # where it starts (long format: its first row)
    scores: list[ImportedScore] = field(default_factory=list)
    raw_output: str = ""
    total_tokens: int | None = None
    target_text: str | None = None  # flask-review: the text the judge saw
    parse_failed: bool = False
    item_field: str = "item"
    model_field: str = "system"


def skill_catalogue(names: Iterable[str]) -> dict[str, str]:
    """skill_key -> the catalogue's spelling. A later name wins (pass the project's own
    skills after the built-in ones)."""
    return {skill_key(name): name for name in names}


def score_parse(value: Any) -> int | None:
    """An integer 1-5, or None for N/A, by the rule of every score input
    (annotation.parsers.score_read: ASCII digits, no white space, sign or decimal point).
    Raises ValueError with a message otherwise."""
    try:
        return score_read(value)
    except ScoreRefused as exc:
        raise ValueError(f"{exc} ({SCALE_NOTE})") from None


def model_from_file_name(name: str) -> str:
    """chatgpt_review.jsonl -> chatgpt (the FLASK review scripts' naming)."""
    stem = PurePath(name).stem
    return stem.removesuffix("_review") or stem


def _first_line(data: bytes) -> str:
    for raw in data.splitlines():
        if raw.strip():
            return raw.removeprefix(b"\xef\xbb\xbf").decode("utf-8", errors="replace").strip()
    return ""


def detect_format(name: str, data: bytes) -> str | None:
    """flask-review, long, or None when the first row does not tell."""
    if PurePath(name).suffix.lower() == ".csv":
        return LONG
    first = _first_line(data)
    try:
        obj = json.loads(first)
    except (ValueError, RecursionError):
        obj = None
    if isinstance(obj, dict):
        keys = {str(k).strip().lower() for k in obj}
        if "question_id" in keys and ({"review", "score"} & keys):
            return FLASK_REVIEW
        if {"rater", "skill", "score"} <= keys:
            return LONG
        return None
    header = next(csv.reader([first]), [])
    if {"item", "system", "rater", "skill", "score"} <= {h.strip().lower() for h in header}:
        return LONG
    return None


def _json_lines(
    stream: IO[bytes], file_name: str, max_line_bytes: int
) -> Iterator[tuple[int, Any] | Problem]:
    """(line number, decoded JSON value) for every non-blank line, or a Problem; one line
    in memory at a time."""
    for lineno, raw, _ in iter_lines(stream, max_line_bytes=max_line_bytes):
        if raw is None:
            yield Problem(
                file_name,
                lineno,
                "",
                "line_too_long",
                f"the line is longer than {max_line_bytes:,} bytes",
            )
            continue
        if lineno == 1:
            raw = raw.removeprefix(b"\xef\xbb\xbf")
        if not raw.strip():
            continue
        value = json_line(raw, file_name, lineno)
        yield value if isinstance(value, Problem) else (lineno, value)


class _Row(RowProblems):
    """Problems of one row, with the file and line filled in. Names (item ids as the
    dataset importer reads FLASK `question_id` and `idx`, models, raters, skills) are
    1-200 characters (RowProblems.name)."""

    def text(self, obj: Mapping, key: str, *, required: bool) -> str | None:
        if key not in obj or obj[key] is None:
            if required:
                self.problem(key, "missing_field", f"{key} is missing")
            return None
        value = obj[key]
        if not isinstance(value, str):
            self.problem(key, "invalid_type", f"{key} must be text, not {type_name(value)}")
            return None
        return value

    def skill(self, raw: str, skills: Mapping[str, str], fld: str) -> str:
        canonical = skills.get(skill_key(raw))
        if canonical is None:
            self.problem(fld, "unknown_skill", f"skill {raw!r} is not one of the project's skills")
            return ""
        return canonical

    def score(self, value: Any, fld: str) -> int | None | bool:
        """The score, or False when it is not valid (reported)."""
        if value is None or (isinstance(value, str) and not value.strip()):
            self.problem(fld, "missing_field", f"{fld} is missing or empty")
            return False
        try:
            return score_parse(value)
        except ValueError as exc:
            self.problem(fld, "invalid_score", str(exc))
            return False


class _Sink(list):
    """Where RowProblems appends: straight into a ProblemLog (or a plain list)."""

    def __init__(self, add: Callable[[Problem], None]) -> None:
        super().__init__()
        self._add = add

    def append(self, problem: Problem) -> None:
        self._add(problem)


def flask_reviews(
    stream: IO[bytes],
    *,
    file_name: str,
    judge: str,
    model: str,
    skills: Mapping[str, str],
    problems: list[Problem],
    max_line_bytes: int,
    model_fixed: bool = False,
) -> Iterator[ImportedJudgment]:
    """A FLASK review file, read as a stream: one JSON object per line with `question_id`,
    `review` (the judge's text), `score` ({"logical correctness": 4, "readability": "N/A"},
    empty when the judge's answer could not be read), optional `model_id`, `target_txt` and
    `total_tokens_step4`. Yields the well-formed judgments, appends the problems. The judged
    model is a line's `model_id` (flaskweb's own exports write it; FLASK's files do not), else
    `model`, which the caller names (the model option, or the file name). With `model_fixed`
    (the model option was given) a line whose `model_id` names another model is a problem.
    Duplicates are the caller's to find."""
    for entry in _json_lines(stream, file_name, max_line_bytes):
        if isinstance(entry, Problem):
            problems.append(entry)
            continue
        lineno, obj = entry
        row = _Row(file_name, lineno, problems)
        if not isinstance(obj, dict):
            row.problem("", "invalid_json", f"a line must hold an object, not {type_name(obj)}")
            continue
        item = row.name(obj, "question_id")
        line_model, model_field = model, ""
        if obj.get("model_id") is not None:
            line_model, model_field = row.name(obj, "model_id"), "model_id"
            if model_fixed and line_model and line_model != model:
                row.problem(
                    "model_id",
                    "model_conflict",
                    f"model_id {line_model!r} is not the model option {model!r}",
                )
        review = row.text(obj, "review", required=True)
        target = row.text(obj, "target_txt", required=False)
        tokens = obj.get("total_tokens_step4")
        if tokens is not None and (
            isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0
        ):
            row.problem(
                "total_tokens_step4",
                "invalid_type",
                f"total_tokens_step4 must be a whole number, not {tokens!r}",
            )
        raw_scores = obj.get("score")
        scores: list[ImportedScore] = []
        if "score" not in obj:
            row.problem("score", "missing_field", "score is missing")
        elif not isinstance(raw_scores, dict):
            row.problem(
                "score", "invalid_type", f"score must be an object, not {type_name(raw_scores)}"
            )
        else:
            seen: dict[str, str] = {}
            for key, value in raw_scores.items():
                fld = f"score.{key}"
                skill = row.skill(str(key), skills, fld)
                score = row.score(value, fld)
                if not skill or score is False:
                    continue
                if skill in seen:
                    row.problem(
                        fld,
                        "duplicate_score",
                        f"{skill} is scored twice ({seen[skill]!r} and {key!r})",
                    )
                    continue
                seen[skill] = str(key)
                scores.append(ImportedScore(skill, score))
        if row.bad:
            continue
        yield ImportedJudgment(
            judge=judge,
            item=item,
            model=line_model,
            file=file_name,
            line=lineno,
            scores=scores,
            raw_output=review or "",
            total_tokens=tokens,
            target_text=target,
            parse_failed=not raw_scores,
            item_field="question_id",
            model_field=model_field,
        )


#: Bytes that are not UTF-8 decode to lone surrogates (errors="surrogateescape").
_UNDECODABLE = re.compile("[\udc80-\udcff]")


def _csv_rows(
    stream: IO[bytes], file_name: str, problems: list[Problem], max_line_bytes: int
) -> Iterator[tuple[int, dict]]:
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", errors="surrogateescape", newline="")
    try:
        yield from _csv_records(text, file_name, problems, max_line_bytes)
    finally:
        text.detach()  # leaves the stream open, for hashing what is left


def _csv_records(
    text: io.TextIOWrapper, file_name: str, problems: list[Problem], max_line_bytes: int
) -> Iterator[tuple[int, dict]]:
    csv.field_size_limit(max(max_line_bytes, csv.field_size_limit()))
    # strict: an unbalanced quote is an error, not a cell that swallows the rows after it
    reader = csv.reader(text, strict=True)
    header: list[str] | None = None
    end = 0
    while True:
        start = end + 1
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            problems.append(Problem(file_name, reader.line_num, "", "invalid_csv", str(exc)))
            return
        end = reader.line_num
        if not record or not any(cell.strip() for cell in record):
            continue
        if any(_UNDECODABLE.search(cell) for cell in record):
            problems.append(Problem(file_name, start, "", "invalid_encoding", "not UTF-8"))
            return
        if any("\x00" in cell for cell in record):
            problems.append(
                Problem(file_name, start, "", "invalid_csv", "the record holds a NUL byte")
            )
            if header is None:
                return
            continue
        if header is None:
            header = [cell.strip().lower() for cell in record]
            missing = [c for c in LONG_COLUMNS if c not in header]
            if missing:
                problems.append(
                    Problem(
                        file_name,
                        start,
                        "",
                        "missing_field",
                        f"the header lacks the column(s) {', '.join(missing)}",
                    )
                )
                return
            continue
        if len(record) != len(header):
            problems.append(
                Problem(
                    file_name,
                    start,
                    "",
                    "invalid_csv",
                    f"{len(record)} cells where the header has {len(header)}",
                )
            )
            continue
        yield start, dict(zip(header, record, strict=True))


def _long_objects(stream, file_name: str, problems: list[Problem], max_line_bytes: int):
    for entry in _json_lines(stream, file_name, max_line_bytes):
        if isinstance(entry, Problem):
            problems.append(entry)
        elif not isinstance(entry[1], dict):
            problems.append(
                Problem(
                    file_name,
                    entry[0],
                    "",
                    "invalid_json",
                    f"a line must hold an object, not {type_name(entry[1])}",
                )
            )
        else:
            yield entry[0], {str(k).strip().lower(): v for k, v in entry[1].items()}


@dataclass
class LongCounts:
    human_rows: int = 0  # rows of human raters, left to another importer
    other_rater_rows: int = 0  # judge rows of raters not chosen with --judge


def long_rows(
    stream: IO[bytes],
    *,
    file_name: str,
    is_json: bool,
    skills: Mapping[str, str],
    rater: str,
    problems: list[Problem],
    counts: LongCounts,
    max_line_bytes: int,
) -> Iterator[tuple[int, str, str, str, str, int | None, str]]:
    """A long table (CSV, or JSONL with the same keys), one row per score, read as a
    stream: item, system, rater, rater_kind, skill, score, optional rationale. Yields
    (line, rater, item, system, skill, score, rationale) of the well-formed judge rows;
    human rows are counted, not read; with `rater`, judge rows of other raters are counted,
    not read. Grouping into judgments and duplicates are the caller's."""
    rows = (
        _long_objects(stream, file_name, problems, max_line_bytes)
        if is_json
        else _csv_rows(stream, file_name, problems, max_line_bytes)
    )
    for lineno, obj in rows:
        row = _Row(file_name, lineno, problems)
        kind = row.name(obj, "rater_kind").casefold()
        if kind == "human":
            counts.human_rows += 1
            continue
        if row.bad:
            continue
        if kind != "judge":
            row.problem(
                "rater_kind",
                "invalid_value",
                f"rater_kind must be human or judge, not {obj.get('rater_kind')!r}",
            )
            continue
        name = row.name(obj, "rater")
        if rater and name and name != rater:
            counts.other_rater_rows += 1
            continue
        item = row.name(obj, "item")
        system = row.name(obj, "system")
        raw_skill = row.name(obj, "skill")
        skill = row.skill(raw_skill, skills, "skill") if raw_skill else ""
        score = row.score(obj.get("score"), "score")
        rationale = row.text(obj, "rationale", required=False) if is_json else obj.get("rationale")
        if row.bad:
            continue
        yield lineno, name, item, system, skill, score, (rationale or "").strip()


def _normalized(text: str) -> str:
    return text.replace("\r\n", "\n").strip()


# === the service: stage, check, write =========================================================


class JudgeOutputImportRejected(Exception):
    """Nothing was written; `problems` lists the reasons (the first ones in file order when
    there were more than the import kept), `count` counts them all."""

    code = "rejected"

    def __init__(self, problems: Sequence[Problem], count: int | None = None) -> None:
        self.problems = list(problems)
        n = self.count = len(self.problems) if count is None else count
        super().__init__(
            f"the import was rejected with {n} problem{'s' if n != 1 else ''}; nothing was written"
        )


@dataclass
class ImportedRun:
    run: JudgeRun
    already_imported: bool  # True: this input was imported before; nothing was written
    judgments: int
    scores: int


@dataclass
class JudgeOutputImportResult:
    format: str
    input_sha256: str
    runs: list[ImportedRun]
    human_rows: int = 0
    other_rater_rows: int = 0

    @property
    def created(self) -> bool:
        return any(not r.already_imported for r in self.runs)

    def as_dict(self) -> dict[str, Any]:
        """What a job row keeps (the runs by id)."""
        return {
            "format": self.format,
            "input_sha256": self.input_sha256,
            "human_rows_ignored": self.human_rows,
            "other_rater_rows_ignored": self.other_rater_rows,
            "runs": [
                {
                    "run_id": r.run.pk,
                    "already_imported": r.already_imported,
                    "judgments": r.judgments,
                    "scores": r.scores,
                }
                for r in self.runs
            ],
        }


def _project_skills(project: Project) -> tuple[dict[str, str], dict[str, int]]:
    """(skill_key -> name, name -> id): built-in skills, then the project's own."""
    rows = sorted(
        skill_list_for_project(project=project).values_list("name", "pk", "project_id"),
        key=lambda r: r[2] is not None,
    )
    return skill_catalogue(r[0] for r in rows), {r[0]: r[1] for r in rows}


def _existing_run(judge: JudgeConfig, dataset: Dataset, digest: str) -> JudgeRun | None:
    return (
        JudgeRun.objects.filter(
            judge=judge, dataset=dataset, settings_snapshot__input_sha256=digest
        )
        .order_by("pk")
        .first()
    )


#: Judgments per INSERT batch (their scores follow in the same batch).
WRITE_BATCH = 1000

_J, _S = "stg_jo_judgment", "stg_jo_score"
_STAGING_COLUMNS: dict[str, Sequence[str]] = {
    _J: (
        "seq",
        "file_pos",
        "line",
        "judge",
        "item",
        "model",
        "raw_output",
        "total_tokens",
        "target_text",
        "parse_failed",
    ),
    _S: ("seq", "file_pos", "line", "judge", "item", "model", "skill", "score", "feedback"),
}
_STAGING_DDL = (
    f"""CREATE TEMP TABLE {_J} (
        seq BIGINT PRIMARY KEY, file_pos INTEGER NOT NULL, line INTEGER NOT NULL,
        judge TEXT NOT NULL, item TEXT NOT NULL, model TEXT NOT NULL, raw_output TEXT NOT NULL,
        total_tokens BIGINT NULL, target_text TEXT NULL, parse_failed SMALLINT NOT NULL)""",
    f"""CREATE TEMP TABLE {_S} (
        seq BIGINT PRIMARY KEY, file_pos INTEGER NOT NULL, line INTEGER NOT NULL,
        judge TEXT NOT NULL, item TEXT NOT NULL, model TEXT NOT NULL, skill TEXT NOT NULL,
        score SMALLINT NULL, feedback TEXT NOT NULL)""",
)
_STAGING_INDEXES = (
    f"CREATE INDEX {_J}_key ON {_J} (judge, item, model)",
    f"CREATE INDEX {_S}_key ON {_S} (judge, item, model, skill)",
)


def judge_outputs_import(
    *,
    project: Project,
    dataset: Dataset,
    files: Sequence[tuple[str, IO[bytes] | bytes]],
    fmt: str = "",
    judge_name: str = "",
    model: str = "",
    created_by=None,
    problem_limit: int | None = PROBLEMS_KEPT,
    progress: Progress | None = None,
) -> JudgeOutputImportResult:
    """Import judge outputs (files as (name, seekable binary stream or bytes)) into
    `dataset` as named judges.

    flask-review: every file's reviews are one judge's, `judge_name` (required); the judged
    model is `model`, or each file's name without `_review`. long: every rater is its own
    judge, or only `judge_name`'s rows are read. Raises JudgeOutputImportRejected with the
    problems (the first `problem_limit` in file order; None: all), having written nothing;
    or returns one ImportedRun per judge, each either new or (same input, same judge, same
    dataset) the run made by an earlier import.
    """
    if dataset.project_id != project.pk:
        raise ValueError("the dataset belongs to another project")
    streams = [
        (name, io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data)
        for name, data in files
    ]
    return _Import(
        project,
        dataset,
        streams,
        fmt,
        judge_name.strip(),
        model.strip(),
        created_by,
        problem_limit,
        progress,
    ).run()


class _Import:
    def __init__(
        self, project, dataset, streams, fmt, judge, model, created_by, limit, progress
    ) -> None:
        self.project: Project = project
        self.dataset: Dataset = dataset
        self.streams: list[tuple[str, IO[bytes]]] = streams
        self.fmt: str = fmt
        self.judge: str = judge
        self.model: str = model
        self.created_by = created_by
        self.progress = progress or Progress("", 0)
        self.max_line = settings.FLASKWEB_MAX_LINE_BYTES
        order = {name: i for i, (name, _) in enumerate(streams)}
        self.log = ProblemLog(lambda f: order.get(f, -1), limit)
        self.sink = _Sink(self.log.add)
        self.formats: dict[str, str] = {}
        self.first_records: dict[str, bytes] = {}
        self.format = ""
        self.counts = LongCounts()

    def _option(self, fld: str, code: str, message: str) -> None:
        self.log.add(Problem("", None, fld, code, message))

    def _rejected(self) -> JudgeOutputImportRejected:
        return JudgeOutputImportRejected(self.log.sorted(), self.log.count)

    # --- files and options ---------------------------------------------------------------------

    def _first_record(self, stream: IO[bytes]) -> bytes | None:
        """The first non-blank line (b"": none; None: over the line limit); the stream is
        rewound."""
        found: bytes | None = b""
        for _, raw, _ in iter_lines(stream, max_line_bytes=self.max_line):
            if raw is None or raw.strip():
                found = raw
                break
        stream.seek(0)
        return found

    def _check_files(self) -> bool:
        """Formats and options; False when nothing can be read (reject at once)."""
        if not self.streams:
            self._option("files", "missing_option", "no file given")
        if self.fmt and self.fmt not in FORMATS:
            self._option(
                "format",
                "invalid_option",
                f"format {self.fmt!r} is not one of {', '.join(FORMATS)}",
            )
            return False
        for name, stream in self.streams:
            head = stream.read(16)
            stream.seek(0)
            first = self._first_record(stream)
            if first == b"":
                self.log.add(Problem(name, None, "", "empty_file", "the file holds no rows"))
                continue
            archive = archive_problem(name, head)
            if archive is not None:
                self.log.add(archive)
                continue
            found = self.fmt or detect_format(name, first or b"")
            if found is None:
                self.log.add(
                    Problem(
                        name,
                        None,
                        "",
                        "unknown_format",
                        "cannot tell the format from the first row; name it "
                        f"({', '.join(FORMATS)})",
                    )
                )
                continue
            self.formats[name] = found
            self.first_records[name] = first or b""
        if len(set(self.formats.values())) > 1:
            listing = ", ".join(f"{n}: {f}" for n, f in self.formats.items())
            self._option("format", "mixed_formats", f"one import takes one format ({listing})")
            return False
        self.format = next(iter(self.formats.values()), self.fmt)
        for value, label in ((self.judge, "judge"), (self.model, "model")):
            if len(value) > MAX_NAME:
                self._option(label, "invalid_option", f"{label} is longer than {MAX_NAME}")
        if self.format == LONG and self.model:
            self._option(
                "model",
                "invalid_option",
                "the model option is for flask-review files; long tables name the model in "
                "their system column",
            )
        if self.format == FLASK_REVIEW and not self.judge:
            self._option(
                "judge",
                "missing_option",
                "a FLASK review file does not say who judged: name the judge",
            )
        return True

    # --- staging --------------------------------------------------------------------------------

    def _stage(self, staging: Staging) -> list[dict[str, Any]]:
        """Read every file once (hashing it), staging the well-formed rows. Returns the
        files' descriptions (name, sha256, bytes)."""
        seq = itertools.count(1)
        described = []
        for pos, (name, stream) in enumerate(self.streams):
            hashing = HashingReader(stream, self.progress.advance)
            reader = io.BufferedReader(hashing, buffer_size=1 << 16)
            if name in self.formats and self.format == FLASK_REVIEW:
                self._stage_reviews(staging, seq, pos, name, reader)
            elif name in self.formats:
                self._stage_long(staging, seq, pos, name, reader)
            while reader.read(1 << 20):  # a file left early is still hashed whole
                pass
            described.append(
                {"name": name, "sha256": hashing.digest.hexdigest(), "bytes": hashing.count}
            )
        staging.flush()
        return described

    def _stage_reviews(self, staging, seq, pos, name, reader) -> None:
        file_model = self.model or model_from_file_name(name)
        for j in flask_reviews(
            reader,
            file_name=name,
            judge=self.judge,
            model=file_model,
            skills=self.skills,
            problems=self.sink,
            max_line_bytes=self.max_line,
            model_fixed=bool(self.model),
        ):
            staging.add(
                _J,
                (
                    next(seq),
                    pos,
                    j.line,
                    j.judge,
                    j.item,
                    j.model,
                    j.raw_output,
                    j.total_tokens,
                    j.target_text,
                    int(j.parse_failed),
                ),
            )
            for s in j.scores:
                staging.add(
                    _S, (next(seq), pos, j.line, j.judge, j.item, j.model, s.skill, s.score, "")
                )

    def _stage_long(self, staging, seq, pos, name, reader) -> None:
        is_json = _first_line(self.first_records[name]).startswith("{")
        for line, rater, item, system, skill, score, rationale in long_rows(
            reader,
            file_name=name,
            is_json=is_json,
            skills=self.skills,
            rater=self.judge,
            problems=self.sink,
            counts=self.counts,
            max_line_bytes=self.max_line,
        ):
            staging.add(_S, (next(seq), pos, line, rater, item, system, skill, score, rationale))

    # --- checks ----------------------------------------------------------------------------------

    def _file(self, pos: int) -> str:
        return self.streams[pos][0]

    def _check_duplicates(self, cursor) -> None:
        if self.format == FLASK_REVIEW:
            sql = f"""
                SELECT s.file_pos, s.line, s.item, s.model, f.file_pos, f.line
                FROM {_J} s
                JOIN (SELECT item, model, MIN(seq) AS first FROM {_J}
                      GROUP BY item, model HAVING COUNT(*) > 1) d
                  ON s.item = d.item AND s.model = d.model AND s.seq <> d.first
                JOIN {_J} f ON f.seq = d.first
                ORDER BY s.seq"""
            sql_problems(
                cursor,
                sql,
                [],
                self.log,
                "duplicate_judgment",
                lambda r: Problem(
                    self._file(r[0]),
                    r[1],
                    "question_id",
                    "duplicate_judgment",
                    f"a second review of {r[3]!r} on item {r[2]!r} "
                    f"(first at {self._file(r[4])}, line {r[5]})",
                ),
            )
            # the later ones are not checked against the dataset
            cursor.execute(
                f"DELETE FROM {_J} WHERE seq NOT IN "
                f"(SELECT MIN(seq) FROM {_J} GROUP BY item, model)"
            )
            return
        sql = f"""
            SELECT s.file_pos, s.line, s.judge, s.item, s.model, s.skill, f.file_pos, f.line
            FROM {_S} s
            JOIN (SELECT judge, item, model, skill, MIN(seq) AS first FROM {_S}
                  GROUP BY judge, item, model, skill HAVING COUNT(*) > 1) d
              ON s.judge = d.judge AND s.item = d.item AND s.model = d.model
                 AND s.skill = d.skill AND s.seq <> d.first
            JOIN {_S} f ON f.seq = d.first
            ORDER BY s.seq"""
        sql_problems(
            cursor,
            sql,
            [],
            self.log,
            "duplicate_score",
            lambda r: Problem(
                self._file(r[0]),
                r[1],
                "skill",
                "duplicate_score",
                f"{r[2]!r} already scored {r[5]} of {r[4]!r} on item {r[3]!r} "
                f"({self._file(r[6])}, line {r[7]})",
            ),
        )
        # one judgment per (rater, item, system), where its first row is
        cursor.execute(
            f"""INSERT INTO {_J} ({", ".join(_STAGING_COLUMNS[_J])})
            SELECT s.seq, s.file_pos, s.line, s.judge, s.item, s.model, '', NULL, NULL, 0
            FROM {_S} s
            JOIN (SELECT MIN(seq) AS first FROM {_S} GROUP BY judge, item, model) g
              ON s.seq = g.first"""
        )

    def _check_judge_names(self, judges: list[str], existing: dict) -> None:
        """A new judge's name follows the rule of every name (annotation.names): no
        invisible or control characters, and not a look-alike of another judge."""
        stored = JudgeConfig.objects.filter(project=self.project).values_list("name", flat=True)
        scope = NameScope("judge", stored)
        for name in judges:
            if name in existing:
                continue
            problem = name_problem(name)
            if problem is not None:
                self._option("judge", "invalid_name", f"judge {name!r} {problem}")
            elif (why := scope.admit(name)) is not None:
                self._option("judge", "lookalike_name", why)

    def _judges(self, cursor) -> list[str]:
        cursor.execute(f"SELECT judge FROM {_J} GROUP BY judge ORDER BY MIN(seq)")
        return [r[0] for r in cursor.fetchall()]

    def _snapshot(self, cursor, judge: str, files: list[dict], digest: str) -> dict[str, Any]:
        cursor.execute(f"SELECT DISTINCT model FROM {_J} WHERE judge = %s ORDER BY model", [judge])
        models = [r[0] for r in cursor.fetchall()]
        cursor.execute(
            f"SELECT SUM(total_tokens), COUNT(total_tokens) FROM {_J} WHERE judge = %s", [judge]
        )
        tokens, counted = cursor.fetchone()
        return {
            "kind": JudgeKind.IMPORTED,
            "format": self.format,
            "files": files,
            "input_sha256": digest,
            "model_option": self.model or None,
            "models": sorted(models),
            "judge_option": self.judge or None,
            "rater": judge if self.format == LONG else None,
            "total_tokens": int(tokens) if counted else None,
        }

    def _check_against_dataset(self, cursor, skip: Sequence[str]) -> None:
        item_table, response_table = Item._meta.db_table, Response._meta.db_table
        skip_sql = f"AND j.judge NOT IN ({', '.join(['%s'] * len(skip))})" if skip else ""
        item_field, model_field = (
            ("question_id", "") if self.format == FLASK_REVIEW else ("item", "system")
        )
        dataset = self.dataset
        # A read of the annotation app's tables, in SQL over the staged rows:
        # annotation.selectors has no lookup by (external id, model) that streams.
        sql_problems(
            cursor,
            f"""SELECT j.file_pos, j.line, j.item FROM {_J} j
            WHERE NOT EXISTS (SELECT 1 FROM {item_table} i
                              WHERE i.dataset_id = %s AND i.external_id = j.item) {skip_sql}
            ORDER BY j.seq""",
            [dataset.pk, *skip],
            self.log,
            "unknown_item",
            lambda r: Problem(
                self._file(r[0]),
                r[1],
                item_field,
                "unknown_item",
                f"item {r[2]!r} is not in dataset {dataset.name!r}",
            ),
        )
        source = "" if model_field else " (from model_id, the model option or the file name)"
        sql_problems(
            cursor,
            f"""SELECT j.file_pos, j.line, j.item, j.model FROM {_J} j
            JOIN {item_table} i ON i.dataset_id = %s AND i.external_id = j.item
            WHERE NOT EXISTS (SELECT 1 FROM {response_table} r
                              WHERE r.item_id = i.id AND r.model_name = j.model) {skip_sql}
            ORDER BY j.seq""",
            [dataset.pk, *skip],
            self.log,
            "unknown_model",
            lambda r: Problem(
                self._file(r[0]),
                r[1],
                model_field,
                "unknown_model",
                f"dataset {dataset.name!r} has no response of model {r[3]!r}{source} "
                f"to item {r[2]!r}",
            ),
        )
        if self.format != FLASK_REVIEW:
            return
        skip_plain = skip_sql.replace("j.judge", "judge")
        ranges = key_ranges(
            cursor, _J, "seq", f"target_text IS NOT NULL {skip_plain}", skip, size=WRITE_BATCH
        )
        for after, upto in ranges:
            cursor.execute(
                f"""SELECT j.seq, j.file_pos, j.line, j.item, j.model, j.target_text, r.text
                FROM {_J} j
                JOIN {item_table} i ON i.dataset_id = %s AND i.external_id = j.item
                JOIN {response_table} r ON r.item_id = i.id AND r.model_name = j.model
                WHERE j.seq > %s AND j.seq <= %s AND j.target_text IS NOT NULL {skip_sql}""",
                [dataset.pk, after, upto, *skip],
            )
            page = cursor.fetchall()
            for _, pos, line, item, model, target, text in page:
                if _normalized(target) != _normalized(text):
                    self.log.add(
                        Problem(
                            self._file(pos),
                            line,
                            "target_txt",
                            "changed_response",
                            f"target_txt differs from the stored response of {model!r} to item "
                            f"{item!r}: this review is of another text",
                        )
                    )

    # --- the import -------------------------------------------------------------------------------

    def run(self) -> JudgeOutputImportResult:
        self.skills, self.skill_ids = _project_skills(self.project)
        if not self._check_files():
            raise self._rejected()
        with transaction.atomic(), connection.cursor() as cursor:
            staging = _staging_create(cursor)
            described = self._stage(staging)
            digest = input_sha256(described)
            parse_problems = self.log.count
            self.progress.set("checking", force=True)
            for ddl in _STAGING_INDEXES:
                cursor.execute(ddl)
            self._check_duplicates(cursor)
            _analyze(cursor)
            judges = self._judges(cursor)
            if self.format == LONG and not judges and parse_problems == self.log.count == 0:
                message = (
                    f"no judge rows of rater {self.judge!r}"
                    if self.judge
                    else "no rows with rater_kind judge"
                )
                self._option("rater", "no_rows", message)
            existing = {
                j.name: j for j in JudgeConfig.objects.filter(project=self.project, name__in=judges)
            }
            self._check_judge_names(judges, existing)
            snapshots = {name: self._snapshot(cursor, name, described, digest) for name in judges}
            earlier: dict[str, JudgeRun] = {}
            skip: list[str] = []
            for name in judges:
                judge = existing.get(name)
                if judge is not None and judge.kind != JudgeKind.IMPORTED:
                    self._option(
                        "judge",
                        "judge_name_taken",
                        f"the project has a {judge.get_kind_display()} judge named {name!r}; "
                        "imported outputs need a judge of their own: choose another name",
                    )
                    skip.append(name)
                    continue
                run = _existing_run(judge, self.dataset, digest) if judge is not None else None
                if run is None:
                    continue
                skip.append(name)
                if run.settings_snapshot.get("models") != snapshots[name]["models"]:
                    self._option(
                        "model",
                        "already_imported",
                        f"this input was imported as judge {name!r} before (run {run.pk}) for "
                        f"model(s) {', '.join(run.settings_snapshot.get('models', []))}",
                    )
                    continue
                earlier[name] = run
            # The rows that parsed are checked against the dataset even when others did
            # not: one round of fixing, not one per kind of problem.
            self._check_against_dataset(cursor, skip)
            if self.log:
                raise self._rejected()
            self.progress.set("writing", force=True)
            started = timezone.now()
            runs: list[ImportedRun] = []
            for name in judges:
                if name in earlier:
                    runs.append(_earlier(earlier[name]))
                    continue
                judge = _imported_judge(self.project, name, self.created_by)
                # Serializes imports into this judge, so two identical imports racing each
                # other make one run: the second one finds it here.
                judge = JudgeConfig.objects.select_for_update().get(pk=judge.pk)
                run = _existing_run(judge, self.dataset, digest)
                if run is not None:
                    runs.append(_earlier(run))
                    continue
                runs.append(self._write_run(cursor, judge, name, snapshots[name], started))
            staging.drop()
        return JudgeOutputImportResult(
            format=self.format,
            input_sha256=digest,
            runs=runs,
            human_rows=self.counts.human_rows,
            other_rater_rows=self.counts.other_rater_rows,
        )

    def _write_run(self, cursor, judge, name, snapshot, started) -> ImportedRun:
        cursor.execute(
            f"SELECT COUNT(*), COALESCE(SUM(parse_failed), 0) FROM {_J} WHERE judge = %s", [name]
        )
        total, parse_failed = (int(v) for v in cursor.fetchone())
        run = JudgeRun.objects.create(
            judge=judge,
            dataset=self.dataset,
            status=RunStatus.DONE,
            settings_snapshot=snapshot,
            total=total,
            done=total - parse_failed,
            parse_failed=parse_failed,
            created_by=self.created_by,
            started_at=started,
            finished_at=timezone.now(),
        )
        item_table, response_table = Item._meta.db_table, Response._meta.db_table
        judgments = scores = 0
        for after, upto in key_ranges(cursor, _J, "seq", "judge = %s", [name], size=WRITE_BATCH):
            cursor.execute(
                f"""SELECT j.seq, r.id, j.raw_output, j.total_tokens, j.parse_failed
                FROM {_J} j
                JOIN {item_table} i ON i.dataset_id = %s AND i.external_id = j.item
                JOIN {response_table} r ON r.item_id = i.id AND r.model_name = j.model
                WHERE j.judge = %s AND j.seq > %s AND j.seq <= %s ORDER BY j.seq""",
                [self.dataset.pk, name, after, upto],
            )
            page = cursor.fetchall()
            rows = {
                seq: Judgment(
                    run=run,
                    response_id=response_id,
                    sample_index=0,
                    status=JudgmentStatus.PARSE_FAILED if failed else JudgmentStatus.OK,
                    request={"imported": True}
                    | ({"total_tokens": tokens} if tokens is not None else {}),
                    raw_output=raw_output,
                    parse_method=PARSE_METHOD,
                    error="the judge's answer held no scores that could be read" if failed else "",
                )
                for seq, response_id, raw_output, tokens, failed in page
            }
            Judgment.objects.bulk_create(list(rows.values()))
            cursor.execute(
                f"""SELECT j.seq, s.skill, s.score, s.feedback FROM {_S} s
                JOIN {_J} j ON j.judge = s.judge AND j.item = s.item AND j.model = s.model
                WHERE j.judge = %s AND j.seq > %s AND j.seq <= %s ORDER BY s.seq""",
                [name, after, upto],
            )
            batch = [
                JudgeScore(
                    judgment=rows[seq],
                    run=run,
                    response_id=rows[seq].response_id,
                    skill_id=self.skill_ids[skill],
                    rubric=None,
                    score=score,
                    is_na=score is None,
                    feedback=feedback,
                )
                for seq, skill, score, feedback in cursor.fetchall()
                if seq in rows
            ]
            JudgeScore.objects.bulk_create(batch, batch_size=2000)
            judgments += len(rows)
            scores += len(batch)
        return ImportedRun(run=run, already_imported=False, judgments=judgments, scores=scores)


def _analyze(cursor) -> None:
    """Statistics for the planner: autovacuum never sees temporary tables, and without
    them a set check over 100,000 staged rows can take a nested loop per row."""
    if is_postgres():
        for table in _STAGING_COLUMNS:
            cursor.execute(f"ANALYZE {table}")


def _staging_create(cursor) -> Staging:
    staging = Staging(cursor, _STAGING_COLUMNS)
    staging.drop()  # left by an earlier import on this connection inside a test transaction
    suffix = " ON COMMIT DROP" if is_postgres() else ""
    for ddl in _STAGING_DDL:
        cursor.execute(ddl + suffix)
    return staging


def _earlier(run: JudgeRun) -> ImportedRun:
    return ImportedRun(
        run=run,
        already_imported=True,
        judgments=run.total,
        scores=JudgeScore.objects.filter(run=run).count(),
    )


def _imported_judge(project: Project, name: str, created_by) -> JudgeConfig:
    judge = JudgeConfig.objects.filter(project=project, name=name).first()
    if judge is None:
        judge = JudgeConfig(
            project=project, name=name, kind=JudgeKind.IMPORTED, created_by=created_by
        )
        judge.full_clean(validate_unique=False, validate_constraints=False)
        try:
            with transaction.atomic():
                judge.save()
        except IntegrityError:  # created meanwhile by a concurrent import
            judge = JudgeConfig.objects.get(project=project, name=name)
    if judge.kind != JudgeKind.IMPORTED:
        raise JudgeOutputImportRejected(
            [
                Problem(
                    "",
                    None,
                    "judge",
                    "judge_name_taken",
                    f"the project has a {judge.get_kind_display()} judge named {name!r}",
                )
            ]
        )
    return judge
