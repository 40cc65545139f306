"""Import of preference labels made elsewhere, in the long format of the preference export
(docs/PREFERENCE_ANALYTICS.md, "Export and import"): one row per label, CSV or JSONL.

Contract
- Validate, then write: every row is checked (columns, choice, strength, shown order, skill,
  time, the dataset's item and both systems' responses to it, the same label twice, a label
  stored before with another choice); on any problem nothing is written and
  PreferenceImportRejected carries every problem with its line.
- Atomic and serialised per project: the checks against stored labels and the writes run in
  one transaction under a lock on the project row.
- Idempotent: the same bytes imported into the same project again write nothing and return
  the earlier PreferenceImport; a label already stored with the same choice and strength is
  counted as unchanged.
- Items and responses are not created: the labels' dataset must be in the project (import
  the dataset first). Imported labels join the preference analytics like campaign labels;
  their rater is the id as given (equal to an annotator's username: the same rater).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from analytics.models import ImportedPreference, PreferenceImport
from analytics.preferences import OVERALL
from annotation.models import PairChoice, Project
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
)
#: Rows one import may hold (the rows are checked in memory).
MAX_ROWS = 200_000


class PreferenceImportRejected(Exception):
    """Nothing was written; `problems` says why, one "line N: ..." per problem."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(f"{len(problems)} problem{'s' if len(problems) != 1 else ''}")


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


def _records(data: bytes, fmt: str) -> Iterator[tuple[int, dict[str, Any] | str]]:
    """(line, record or a problem text) per data row."""
    text = data.decode("utf-8-sig")
    if fmt == "jsonl":
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                yield n, f"not JSON ({exc.msg})"
                continue
            yield n, obj if isinstance(obj, dict) else "not a JSON object"
        return
    reader = csv.DictReader(io.StringIO(text, newline=""))
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        yield 1, f"the header lacks the column(s) {', '.join(missing)}"
        return
    for record in reader:
        yield reader.line_num, record


def _text(record: dict[str, Any], name: str) -> str:
    value = record.get(name)
    return "" if value is None else str(value).strip()


def _row(line: int, record: dict[str, Any], dataset: str, skills: set[str]) -> _Row | list[str]:
    problems = []
    for name in REQUIRED:
        if not _text(record, name):
            problems.append(f"{name} is empty")
    unknown = sorted(set(record) - set(KNOWN))
    if unknown:
        problems.append(f"unknown column(s) {', '.join(unknown)}")
    choice = _text(record, "choice").lower()
    if choice and choice not in PairChoice.values:
        problems.append(f"choice {choice!r} is not one of {', '.join(PairChoice.values)}")
    model_a, model_b = _text(record, "model_a"), _text(record, "model_b")
    if model_a and model_a == model_b:
        problems.append("model_a and model_b are the same system")
    strength: int | None = None
    raw = _text(record, "strength")
    if raw:
        if raw not in ("1", "2"):
            problems.append(f"strength {raw!r} is not 1 (slightly) or 2 (much)")
        else:
            strength = int(raw)
    order = _text(record, "shown_order").lower()
    if order not in ("", "ab", "ba"):
        problems.append(f"shown_order {order!r} is not ab, ba or empty")
    skill: str | None = _text(record, "skill")
    if skill in ("", OVERALL):
        skill = None
    elif skill not in skills:
        problems.append(f"skill {skill!r} is not a skill of the project")
    time_ms: int | None = None
    raw = _text(record, "time_on_task_ms")
    if raw:
        try:
            time_ms = int(float(raw))
            if time_ms < 0:
                raise ValueError
        except ValueError:
            problems.append(f"time_on_task_ms {raw!r} is not a whole number of milliseconds")
    rater = _text(record, "rater")
    if len(rater) > 200:
        problems.append("rater is longer than 200 characters")
    name = _text(record, "dataset") or dataset
    if not name:
        problems.append("dataset is empty (give the column or --dataset)")
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


def preferences_import(
    *,
    project: Project,
    data: bytes,
    name: str,
    fmt: str = "",
    dataset: str = "",
    created_by=None,
) -> PreferenceImportResult:
    """Import one file of preference labels into `project` (module docstring). `fmt`: csv
    or jsonl (default: from the name's suffix); `dataset`: the dataset of rows whose own
    dataset column is empty."""
    fmt = fmt or ("jsonl" if name.lower().endswith((".jsonl", ".ndjson")) else "csv")
    if fmt not in ("csv", "jsonl"):
        raise PreferenceImportRejected([f"format {fmt!r} is not csv or jsonl"])
    sha = hashlib.sha256(data).hexdigest()
    earlier = PreferenceImport.objects.filter(project=project, input_sha256=sha).first()
    if earlier is not None:
        return PreferenceImportResult(earlier, already_imported=True)
    try:
        records = list(_records(data, fmt))
    except UnicodeDecodeError:
        raise PreferenceImportRejected(["line 1: the file is not UTF-8 text"]) from None
    if len(records) > MAX_ROWS:
        raise PreferenceImportRejected([f"more than {MAX_ROWS:,} rows: split the file"])
    skills = set(skill_list_for_project(project=project).values_list("name", flat=True))
    problems: list[str] = []
    rows: list[_Row] = []
    for line, record in records:
        if isinstance(record, str):
            problems.append(f"line {line}: {record}")
            continue
        checked = _row(line, record, dataset, skills)
        if isinstance(checked, list):
            problems += [f"line {line}: {p}" for p in checked]
        else:
            rows.append(checked)
    if not records:
        problems.append("line 1: no rows")
    with transaction.atomic():
        project_lock(slug=project.slug)
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
            for model in (r.model_a, r.model_b):
                found = responses.get((r.dataset, r.item, model))
                if found is None:
                    problems.append(
                        f"line {r.line}: no response of {model!r} to item {r.item!r} in "
                        f"dataset {r.dataset!r} of the project"
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
                    f"line {r.line}: {r.rater!r} labelled this pair on "
                    f"{r.skill or OVERALL} already (line {seen[key]})"
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
                        f"line {r.line}: {r.rater!r} has another label of this pair stored "
                        f"({before[1]}); it is not overwritten"
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
            raise PreferenceImportRejected(problems)
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


def _flipped(choice: str) -> str:
    return {"a": "b", "b": "a"}.get(choice, choice)
