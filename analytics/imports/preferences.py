"""Import of preference labels made elsewhere, in the long format of the preference export
(docs/PREFERENCE_ANALYTICS.md, "Export and import"): one row per label, CSV or JSONL.

Contract
- Validate, then write: every row is checked (columns, choice, strength, shown order, skill,
  time, the dataset's item and both systems' responses to it, the same label twice, a label
  stored before with another choice); on any problem nothing is written and
  PreferenceImportRejected carries every problem (annotation.parsers.Problem: file, line,
  field, code, message).
- Hostile files: at most MAX_BYTES bytes and MAX_ROWS rows are read; an archive, text that
  is not UTF-8, a broken CSV record, a JSON line nested too deeply or holding a key twice,
  and a NUL character (PostgreSQL stores none) are problems of their line, never a crash.
- Atomic and serialised per project: the checks against stored labels and the writes run in
  one transaction under a lock on the project row.
- Idempotent: the same bytes imported into the same project again write nothing and return
  the earlier PreferenceImport (looked up again under the lock, so two uploads of the same
  bytes at once write it once); a label already stored with the same choice and strength is
  counted as unchanged.
- Items and responses are not created: the labels' dataset must be in the project (import
  the dataset first). Imported labels join the preference analytics like campaign labels;
  their rater is the id as given (equal to an annotator's username: the same rater).
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings
from django.db import transaction

from analytics.models import ImportedPreference, PreferenceImport
from analytics.preferences import OVERALL
from annotation.models import PairChoice, Project
from annotation.parsers import Problem, archive_problem, json_line, unstorable_text
from annotation.selectors import pair_responses_for_import, project_lock, skill_list_for_project

REQUIRED = ("item", "model_a", "model_b", "rater", "choice")
KNOWN = (
    "project",
    "dataset",
    "campaign",
    "item",
    "model_a",
    "model_b",
    "shown_order",
    "rater",
    "skill",
    "choice",
    "strength",
    "rationale",
    "time_on_task_ms",
    "submitted_at",
    "language",  # written by the export (the language shown); read back, not stored
)
#: The JSON types a column may have besides text (a JSONL row): an id may be a whole
#: number; true, false, lists, objects and fractions are refused.
_NUMBERS: dict[str, tuple[type, ...]] = {"time_on_task_ms": (int, float)}
#: Rows one import may hold (the rows are checked in memory).
MAX_ROWS = 200_000
#: Bytes one file may hold: the rows are read into memory, so a larger file is refused
#: before it is read (200,000 labels with a rationale each fit well within it).
MAX_BYTES = 100 * 1024 * 1024


class PreferenceImportRejected(Exception):
    """Nothing was written; `problems` says why, in file order (`count`: how many)."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        self.count = len(problems)
        super().__init__(f"{self.count} problem{'s' if self.count != 1 else ''}")

    @property
    def lines(self) -> list[str]:
        """One "line N [field]: message" per problem (what the command prints)."""
        return [problem_line(p) for p in self.problems]


def problem_line(p: Problem) -> str:
    where = f"line {p.line}" if p.line else "file"
    return f"{where}: {p.message}"


@dataclass
class PreferenceImportResult:
    batch: PreferenceImport
    already_imported: bool = False
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Row:
    line: int
    dataset: str
    item: str
    model_a: str
    model_b: str
    rater: str
    skill: str | None
    choice: str
    strength: int | None
    b_left: bool | None
    rationale: str
    time_ms: int | None
    source: str


def _records(data: bytes, fmt: str) -> Iterator[tuple[int, dict[str, Any] | Problem]]:
    """(line, record or the Problem that stops it) per data row (the file name is filled in
    by the caller)."""
    longest = settings.FLASKWEB_MAX_LINE_BYTES
    if fmt == "jsonl":
        for n, raw in enumerate(data.splitlines(), start=1):
            if not raw.strip():
                continue
            if len(raw) > longest:
                yield (
                    n,
                    Problem(
                        "", n, "", "line_too_long", f"the line is longer than {longest:,} bytes"
                    ),
                )
                continue
            if n == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            value = json_line(raw, "", n)
            if isinstance(value, Problem):
                yield n, value
            elif not isinstance(value, dict):
                yield n, Problem("", n, "", "invalid_type", "not a JSON object")
            else:
                yield n, value
        return
    text = data.decode("utf-8-sig")
    # the limit is process-wide: every CSV reader of the project sets its own before reading
    csv.field_size_limit(longest)
    # strict: a quote left open at the end of the file is an error, not a cell running to the end
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    try:
        fieldnames = reader.fieldnames or []
        missing = [c for c in REQUIRED if c not in fieldnames]
        if missing:
            yield (
                1,
                Problem(
                    "",
                    1,
                    "",
                    "missing_column",
                    f"the header lacks the column(s) {', '.join(missing)}",
                ),
            )
            return
        for record in reader:
            if None in record or None in record.values():  # csv's restkey and restval
                more = None in record
                yield (
                    reader.line_num,
                    Problem(
                        "",
                        reader.line_num,
                        "",
                        "invalid_csv",
                        f"the row has {'more' if more else 'fewer'} cells than the header",
                    ),
                )
                continue
            yield reader.line_num, record
    except csv.Error as exc:  # a field over the csv module's limit, a broken quote...
        line = reader.line_num or 1
        yield line, Problem("", line, "", "invalid_csv", f"not readable as CSV ({exc})")


def _text(record: dict[str, Any], name: str) -> str:
    value = record.get(name)
    return "" if value is None else str(value).strip()


def _row(line: int, record: dict[str, Any], dataset: str, skills: set[str]) -> _Row | list[Problem]:
    problems: list[Problem] = []

    def problem(fld: str, code: str, message: str) -> None:
        problems.append(Problem("", line, fld, code, message))

    for name in REQUIRED:
        if not _text(record, name):
            problem(name, "missing_field", f"{name} is empty")
    unknown = sorted(str(k) for k in set(record) - set(KNOWN))
    if unknown:
        problem("", "unknown_column", f"unknown column(s) {', '.join(map(repr, unknown))}")
    for name in KNOWN:
        value = record.get(name)
        allowed = (str, *_NUMBERS.get(name, (int,)))
        if value is not None and (isinstance(value, bool) or not isinstance(value, allowed)):
            problem(name, "invalid_type", f"{name} is a JSON {type(value).__name__}, not text")
            record = {**record, name: None}
            continue
        found = unstorable_text(_text(record, name))
        if found:
            problem(name, "invalid_type", f"{name} holds {found}, which cannot be stored")
    choice = _text(record, "choice").lower()
    if choice and choice not in PairChoice.values:
        problem(
            "choice",
            "invalid_choice",
            f"choice {choice!r} is not one of {', '.join(PairChoice.values)}",
        )
    model_a, model_b = _text(record, "model_a"), _text(record, "model_b")
    if model_a and model_a == model_b:
        problem("model_b", "same_system", "model_a and model_b are the same system")
    strength: int | None = None
    raw = _text(record, "strength")
    if raw:
        if raw not in ("1", "2"):
            problem(
                "strength", "invalid_strength", f"strength {raw!r} is not 1 (slightly) or 2 (much)"
            )
        else:
            strength = int(raw)
    order = _text(record, "shown_order").lower()
    if order not in ("", "ab", "ba"):
        problem(
            "shown_order", "invalid_shown_order", f"shown_order {order!r} is not ab, ba or empty"
        )
    skill: str | None = _text(record, "skill")
    if skill in ("", OVERALL):
        skill = None
    elif skill not in skills:
        problem("skill", "unknown_skill", f"skill {skill!r} is not a skill of the project")
    time_ms: int | None = None
    raw = _text(record, "time_on_task_ms")
    if raw:
        try:
            time_ms = int(float(raw))
            if not 0 <= time_ms < 2**31:
                raise ValueError
        except (ValueError, OverflowError):
            problem(
                "time_on_task_ms",
                "invalid_time",
                f"time_on_task_ms {raw[:50]!r} is not a whole number of milliseconds",
            )
    rater = _text(record, "rater")
    if len(rater) > 200:
        problem("rater", "too_long", "rater is longer than 200 characters")
    name = _text(record, "dataset") or dataset
    if not name:
        problem("dataset", "missing_field", "dataset is empty (give the column or --dataset)")
    if problems:
        return problems
    return _Row(
        line,
        name,
        _text(record, "item"),
        model_a,
        model_b,
        rater,
        skill,
        choice,
        strength,
        None if not order else order == "ba",
        _text(record, "rationale"),
        time_ms,
        _text(record, "campaign")[:200],
    )


def _read(source: bytes | IO[bytes]) -> bytes:
    """The bytes of the file, at most MAX_BYTES (PreferenceImportRejected beyond)."""
    data = source if isinstance(source, bytes) else source.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise PreferenceImportRejected(
            [
                Problem(
                    "",
                    None,
                    "",
                    "too_large",
                    f"the file is larger than {MAX_BYTES:,} bytes: split it",
                )
            ]
        )
    return data


def preferences_import(
    *,
    project: Project,
    data: bytes | IO[bytes],
    name: str,
    fmt: str = "",
    dataset: str = "",
    created_by=None,
    progress: Callable[[str], None] | None = None,
) -> PreferenceImportResult:
    """Import one file of preference labels into `project` (module docstring). `data`: the
    bytes, or a binary stream (at most MAX_BYTES of it are read); `fmt`: csv or jsonl
    (default: from the name's suffix); `dataset`: the dataset of rows whose own dataset
    column is empty; `progress(phase)` is told "reading", "checking" and "writing"."""
    say = progress or (lambda phase: None)
    say("reading")
    fmt = fmt or ("jsonl" if name.lower().endswith((".jsonl", ".ndjson")) else "csv")
    if fmt not in ("csv", "jsonl"):
        raise PreferenceImportRejected(
            [Problem("", None, "format", "unknown_format", f"format {fmt!r} is not csv or jsonl")]
        )
    try:
        data = _read(data)
    except PreferenceImportRejected as exc:
        raise PreferenceImportRejected(_named(exc.problems, name)) from None
    sha = hashlib.sha256(data).hexdigest()
    earlier = PreferenceImport.objects.filter(project=project, input_sha256=sha).first()
    if earlier is not None:
        return PreferenceImportResult(earlier, already_imported=True)
    archive = archive_problem(name, data[:16])
    if archive is not None:
        raise PreferenceImportRejected([archive])
    records: list[tuple[int, dict[str, Any] | Problem]] = []
    try:
        for entry in _records(data, fmt):
            records.append(entry)
            if len(records) > MAX_ROWS:
                raise PreferenceImportRejected(
                    [
                        Problem(
                            name,
                            None,
                            "",
                            "too_many_rows",
                            f"more than {MAX_ROWS:,} rows: split the file",
                        )
                    ]
                )
    except UnicodeDecodeError as exc:
        raise PreferenceImportRejected(
            [Problem(name, 1, "", "invalid_encoding", f"the file is not UTF-8 text ({exc.reason})")]
        ) from None
    say("checking")
    skills = set(skill_list_for_project(project=project).values_list("name", flat=True))
    problems: list[Problem] = []
    rows: list[_Row] = []
    for line, record in records:
        if isinstance(record, Problem):
            problems.append(record)
            continue
        checked = _row(line, record, dataset, skills)
        if isinstance(checked, list):
            problems += checked
        else:
            rows.append(checked)
    if not records:
        problems.append(Problem("", None, "", "empty_file", "no rows"))
    with transaction.atomic():
        project_lock(slug=project.slug)
        # again under the lock: the same bytes uploaded twice at once are written once
        earlier = PreferenceImport.objects.filter(project=project, input_sha256=sha).first()
        if earlier is not None:
            return PreferenceImportResult(earlier, already_imported=True)
        keys = {(r.dataset, r.item, m) for r in rows for m in (r.model_a, r.model_b)}
        responses = pair_responses_for_import(project=project, keys=keys)
        seen: dict[tuple, int] = {}
        skill_ids = dict(skill_list_for_project(project=project).values_list("name", "pk"))
        stored: dict[tuple[int, int, int | None, str], tuple[int, str, int | None]] = {
            (min(a, b), max(a, b), s, rater): (a, choice, strength)
            for a, b, s, rater, choice, strength in ImportedPreference.objects.filter(
                project=project
            ).values_list(
                "response_a_id", "response_b_id", "skill_id", "rater", "choice", "strength"
            )
        }
        fresh: list[ImportedPreference] = []
        unchanged = 0
        for r in rows:
            ids: list[int] = []
            for column, model in (("model_a", r.model_a), ("model_b", r.model_b)):
                found = responses.get((r.dataset, r.item, model))
                if found is None:
                    problems.append(
                        Problem(
                            "",
                            r.line,
                            column,
                            "unknown_response",
                            f"no response of {model!r} to item {r.item!r} in "
                            f"dataset {r.dataset!r} of the project",
                        )
                    )
                else:
                    ids.append(found[0])
            if len(ids) < 2:
                continue
            a, b = ids
            skill_id = skill_ids[r.skill] if r.skill else None
            key = (min(a, b), max(a, b), skill_id, r.rater)
            if key in seen:
                problems.append(
                    Problem(
                        "",
                        r.line,
                        "rater",
                        "duplicate_label",
                        f"{r.rater!r} labelled this pair on {r.skill or OVERALL} already "
                        f"(line {seen[key]})",
                    )
                )
                continue
            seen[key] = r.line
            before = stored.get(key)
            if before is not None:
                # in the stored label's own A/B terms
                choice = r.choice if before[0] == a else _flipped(r.choice)
                if (choice, r.strength) == (before[1], before[2]):
                    unchanged += 1
                else:
                    problems.append(
                        Problem(
                            "",
                            r.line,
                            "choice",
                            "conflicting_label",
                            f"{r.rater!r} has another label of this pair stored "
                            f"({before[1]}); it is not overwritten",
                        )
                    )
                continue
            fresh.append(
                ImportedPreference(
                    project=project,
                    response_a_id=a,
                    response_b_id=b,
                    skill_id=skill_id,
                    rater=r.rater,
                    choice=r.choice,
                    strength=r.strength,
                    rationale=r.rationale,
                    b_left=r.b_left,
                    time_ms=r.time_ms,
                    source=r.source,
                )
            )
        if problems:
            problems.sort(key=lambda p: p.line or 0)
            raise PreferenceImportRejected(_named(problems, name))
        say("writing")
        batch = PreferenceImport.objects.create(
            project=project,
            name=name[:300],
            input_sha256=sha,
            rows_read=len(records),
            labels_created=len(fresh),
            labels_unchanged=unchanged,
            created_by=created_by,
        )
        for obj in fresh:
            obj.batch = batch
        ImportedPreference.objects.bulk_create(fresh)
    summary = {"raters": len({obj.rater for obj in fresh}), "pairs": len({k[:2] for k in seen})}
    return PreferenceImportResult(batch, summary=summary)


def _named(problems: list[Problem], name: str) -> list[Problem]:
    """The problems with the file's name filled in."""
    return [p if p.file else Problem(name, p.line, p.field, p.code, p.message) for p in problems]


def _flipped(choice: str) -> str:
    return {"a": "b", "b": "a"}.get(choice, choice)
