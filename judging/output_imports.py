"""Import of judge outputs produced elsewhere, as a named judge of the project (JudgeKind
IMPORTED), so they show up like any judge run: one run per judge and import, one judgment per
response, one score per skill. Formats and rules: docs/JUDGE_OUTPUT_IMPORTS.md.

Contract
- Validate, then write. Every file is parsed and every row checked (items, responses and
  their texts in the dataset, the project's skills, score values, duplicates, judge names)
  before anything is written. If anything is wrong, nothing is written and
  JudgeOutputImportRejected carries the whole problem list, each with file, line and field.
- Atomic: the judges, runs, judgments and scores of one import are written in one
  transaction, with bulk inserts.
- Idempotent: a run records the SHA-256 of its input. The same bytes imported again as the
  same judge into the same dataset find that run and write nothing.

The first half of this module is pure (bytes in, dataclasses out, no database): the parsers.
The second half, from judge_outputs_import on, reads the dataset and writes.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.models import Dataset, Item, Project, Response
from annotation.parsers import (
    Problem,
    RowProblems,
    ScoreRefused,
    archive_problem,
    json_line,
    score_read,
    skill_key,
    type_name,
)
from annotation.selectors import skill_list_for_project
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


@dataclass
class ParsedInput:
    format: str
    judgments: list[ImportedJudgment] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    human_rows: int = 0  # long format: rows of human raters, left to another importer
    other_rater_rows: int = 0  # long format: judge rows of raters not chosen with --judge
    models: dict[str, str] = field(default_factory=dict)  # flask-review: file -> model


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


def _json_lines(data: bytes, file_name: str) -> Iterator[tuple[int, Any] | Problem]:
    """(line number, decoded JSON value) for every non-blank line, or a Problem."""
    for lineno, raw in enumerate(data.splitlines(), start=1):
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


def parse_flask_review(
    data: bytes, *, file_name: str, judge: str, model: str, skills: Mapping[str, str]
) -> ParsedInput:
    """A FLASK review file: one JSON object per line with `question_id`, `review` (the
    judge's text), `score` ({"logical correctness": 4, "readability": "N/A"}, empty when
    the judge's answer could not be read), optional `target_txt` and `total_tokens_step4`.
    The judged model is not in the file: the caller names it."""
    result = ParsedInput(FLASK_REVIEW)
    for entry in _json_lines(data, file_name):
        if isinstance(entry, Problem):
            result.problems.append(entry)
            continue
        lineno, obj = entry
        row = _Row(file_name, lineno, result.problems)
        if not isinstance(obj, dict):
            row.problem("", "invalid_json", f"a line must hold an object, not {type_name(obj)}")
            continue
        item = row.name(obj, "question_id")
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
        result.judgments.append(
            ImportedJudgment(
                judge=judge,
                item=item,
                model=model,
                file=file_name,
                line=lineno,
                scores=scores,
                raw_output=review or "",
                total_tokens=tokens,
                target_text=target,
                parse_failed=not raw_scores,
                item_field="question_id",
                model_field="",
            )
        )
    return result


def _csv_rows(data: bytes, file_name: str, problems: list[Problem]) -> Iterator[tuple[int, dict]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        problems.append(
            Problem(file_name, line, "", "invalid_encoding", f"not UTF-8 ({exc.reason})")
        )
        return
    # strict: an unbalanced quote is an error, not a cell that swallows the rows after it
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
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


def _long_objects(data: bytes, file_name: str, problems: list[Problem]):
    for entry in _json_lines(data, file_name):
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


def parse_long(
    files: Sequence[tuple[str, bytes]], *, skills: Mapping[str, str], rater: str = ""
) -> ParsedInput:
    """Long tables (CSV, or JSONL with the same keys), one row per score: item, system,
    rater, rater_kind, skill, score, optional rationale. Judge rows of one (rater, item,
    system), across all files, make one judgment. Human rows are counted, not read; with
    `rater`, judge rows of other raters are counted, not read."""
    result = ParsedInput(LONG)
    groups: dict[tuple[str, str, str], ImportedJudgment] = {}
    where: dict[tuple[str, str, str, str], tuple[str, int]] = {}
    for file_name, data in files:
        is_json = _first_line(data).startswith("{")
        rows = (
            _long_objects(data, file_name, result.problems)
            if is_json
            else _csv_rows(data, file_name, result.problems)
        )
        for lineno, obj in rows:
            row = _Row(file_name, lineno, result.problems)
            kind = row.name(obj, "rater_kind").casefold()
            if kind == "human":
                result.human_rows += 1
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
                result.other_rater_rows += 1
                continue
            item = row.name(obj, "item")
            system = row.name(obj, "system")
            raw_skill = row.name(obj, "skill")
            skill = row.skill(raw_skill, skills, "skill") if raw_skill else ""
            score = row.score(obj.get("score"), "score")
            rationale = (
                row.text(obj, "rationale", required=False) if is_json else obj.get("rationale")
            )
            if row.bad:
                continue
            key = (name, item, system)
            first = where.get((*key, skill))
            if first is not None:
                row.problem(
                    "skill",
                    "duplicate_score",
                    f"{name!r} already scored {skill} of {system!r} on item {item!r} "
                    f"({first[0]}, line {first[1]})",
                )
                continue
            where[(*key, skill)] = (file_name, lineno)
            judgment = groups.get(key)
            if judgment is None:
                judgment = groups[key] = ImportedJudgment(
                    judge=name, item=item, model=system, file=file_name, line=lineno
                )
                result.judgments.append(judgment)
            judgment.scores.append(ImportedScore(skill, score, (rationale or "").strip()))
    return result


def parse_input(
    files: Sequence[tuple[str, bytes]],
    *,
    skills: Mapping[str, str],
    fmt: str = "",
    judge: str = "",
    model: str = "",
) -> ParsedInput:
    """Parse every file (format detected per file unless `fmt` is given; all must agree),
    check the options, and report duplicate judgments. Never raises for bad input: the
    problems are in the result."""
    judge, model = judge.strip(), model.strip()
    problems: list[Problem] = []
    formats: dict[str, str] = {}
    if not files:
        problems.append(Problem("", None, "files", "missing_option", "no file given"))
    if fmt and fmt not in FORMATS:
        problems.append(
            Problem(
                "",
                None,
                "format",
                "invalid_option",
                f"format {fmt!r} is not one of {', '.join(FORMATS)}",
            )
        )
        return ParsedInput(fmt, problems=problems)
    for name, data in files:
        if not data.strip():
            problems.append(Problem(name, None, "", "empty_file", "the file holds no rows"))
            continue
        archive = archive_problem(name, data[:16])
        if archive is not None:
            problems.append(archive)
            continue
        found = fmt or detect_format(name, data)
        if found is None:
            problems.append(
                Problem(
                    name,
                    None,
                    "",
                    "unknown_format",
                    f"cannot tell the format from the first row; name it ({', '.join(FORMATS)})",
                )
            )
            continue
        formats[name] = found
    if len(set(formats.values())) > 1:
        listing = ", ".join(f"{n}: {f}" for n, f in formats.items())
        problems.append(
            Problem("", None, "format", "mixed_formats", f"one import takes one format ({listing})")
        )
        return ParsedInput("", problems=problems)
    chosen = next(iter(formats.values()), fmt)
    for value, label in ((judge, "judge"), (model, "model")):
        if len(value) > MAX_NAME:
            problems.append(
                Problem("", None, label, "invalid_option", f"{label} is longer than {MAX_NAME}")
            )
    readable = [(n, d) for n, d in files if n in formats]
    if chosen == LONG:
        if model:
            problems.append(
                Problem(
                    "",
                    None,
                    "model",
                    "invalid_option",
                    "the model option is for flask-review files; long tables name the "
                    "model in their system column",
                )
            )
        result = parse_long(readable, skills=skills, rater=judge)
        if not result.judgments and not result.problems:
            message = (
                f"no judge rows of rater {judge!r}" if judge else "no rows with rater_kind judge"
            )
            result.problems.append(Problem("", None, "rater", "no_rows", message))
    else:
        result = ParsedInput(chosen)
        if chosen == FLASK_REVIEW and not judge:
            problems.append(
                Problem(
                    "",
                    None,
                    "judge",
                    "missing_option",
                    "a FLASK review file does not say who judged: name the judge",
                )
            )
        seen: dict[tuple[str, str], tuple[str, int]] = {}
        for name, data in readable:
            file_model = model or model_from_file_name(name)
            result.models[name] = file_model
            parsed = parse_flask_review(
                data, file_name=name, judge=judge, model=file_model, skills=skills
            )
            result.problems += parsed.problems
            for judgment in parsed.judgments:
                first = seen.get((judgment.item, judgment.model))
                if first is not None:
                    result.problems.append(
                        Problem(
                            name,
                            judgment.line,
                            "question_id",
                            "duplicate_judgment",
                            f"a second review of {judgment.model!r} on item {judgment.item!r} "
                            f"(first at {first[0]}, line {first[1]})",
                        )
                    )
                    continue
                seen[(judgment.item, judgment.model)] = (name, judgment.line)
                result.judgments.append(judgment)
    result.problems = problems + result.problems
    return result


def input_sha256(files: Sequence[tuple[str, bytes]]) -> tuple[str, list[dict[str, Any]]]:
    """The input's SHA-256 and each file's: for one file, the hash of its bytes (what
    sha256sum prints); for several, the hash of their sorted hex digests, one a line, so the
    order the files are given in does not matter."""
    described = [
        {"name": name, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
        for name, data in files
    ]
    if len(described) == 1:
        return described[0]["sha256"], described
    joined = "\n".join(sorted(d["sha256"] for d in described)).encode()
    return hashlib.sha256(joined).hexdigest(), described


def _normalized(text: str) -> str:
    return text.replace("\r\n", "\n").strip()


# === the service: read the dataset, check, write =============================================


class JudgeOutputImportRejected(Exception):
    """Nothing was written; `problems` lists every reason."""

    code = "rejected"

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        n = len(self.problems)
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


def _project_skills(project: Project) -> tuple[dict[str, str], dict[str, int]]:
    """(skill_key -> name, name -> id): built-in skills, then the project's own."""
    rows = sorted(
        skill_list_for_project(project=project).values_list("name", "pk", "project_id"),
        key=lambda r: r[2] is not None,
    )
    return skill_catalogue(r[0] for r in rows), {r[0]: r[1] for r in rows}


def _responses(
    dataset: Dataset, judgments: Sequence[ImportedJudgment], with_text: bool
) -> tuple[set[str], dict[tuple[str, str], tuple[int, str]]]:
    """(the external ids among the judgments' items that exist in the dataset,
    (item, model) -> (response id, text)), read in chunks of 1,000 ids. A read of the
    annotation app's tables: annotation.selectors has no lookup by (external id, model)."""
    ids = sorted({j.item for j in judgments})
    models = sorted({j.model for j in judgments})
    known: set[str] = set()
    found: dict[tuple[str, str], tuple[int, str]] = {}
    for start in range(0, len(ids), 1000):
        chunk = ids[start : start + 1000]
        known.update(
            Item.objects.filter(dataset=dataset, external_id__in=chunk).values_list(
                "external_id", flat=True
            )
        )
        rows = Response.objects.filter(
            item__dataset=dataset, item__external_id__in=chunk, model_name__in=models
        )
        columns = ["pk", "item__external_id", "model_name"] + (["text"] if with_text else [])
        for pk, external_id, model_name, *text in rows.values_list(*columns):
            found[(external_id, model_name)] = (pk, text[0] if text else "")
    return known, found


def _check_against_dataset(
    dataset: Dataset, judgments: Sequence[ImportedJudgment], fmt: str
) -> tuple[list[Problem], dict[tuple[str, str], int]]:
    problems: list[Problem] = []
    known, found = _responses(dataset, judgments, with_text=fmt == FLASK_REVIEW)
    response_ids: dict[tuple[str, str], int] = {}
    for j in judgments:
        key = (j.item, j.model)
        if j.item not in known:
            problems.append(
                Problem(
                    j.file,
                    j.line,
                    j.item_field,
                    "unknown_item",
                    f"item {j.item!r} is not in dataset {dataset.name!r}",
                )
            )
            continue
        if key not in found:
            source = "" if j.model_field else " (from the model option or the file name)"
            problems.append(
                Problem(
                    j.file,
                    j.line,
                    j.model_field,
                    "unknown_model",
                    f"dataset {dataset.name!r} has no response of model {j.model!r}"
                    f"{source} to item {j.item!r}",
                )
            )
            continue
        response_id, text = found[key]
        if j.target_text is not None and _normalized(j.target_text) != _normalized(text):
            problems.append(
                Problem(
                    j.file,
                    j.line,
                    "target_txt",
                    "changed_response",
                    f"target_txt differs from the stored response of {j.model!r} to item "
                    f"{j.item!r}: this review is of another text",
                )
            )
            continue
        response_ids[key] = response_id
    return problems, response_ids


def _existing_run(judge: JudgeConfig, dataset: Dataset, digest: str) -> JudgeRun | None:
    return (
        JudgeRun.objects.filter(
            judge=judge, dataset=dataset, settings_snapshot__input_sha256=digest
        )
        .order_by("pk")
        .first()
    )


def _file_order(files: Sequence[tuple[str, bytes]]):
    order = {name: i for i, (name, _) in enumerate(files)}
    return lambda p: (order.get(p.file, -1), p.line or 0)


def judge_outputs_import(
    *,
    project: Project,
    dataset: Dataset,
    files: Sequence[tuple[str, bytes]],
    fmt: str = "",
    judge_name: str = "",
    model: str = "",
    created_by=None,
) -> JudgeOutputImportResult:
    """Import judge outputs (files as (name, bytes)) into `dataset` as named judges.

    flask-review: every file's reviews are one judge's, `judge_name` (required); the judged
    model is `model`, or each file's name without `_review`. long: every rater is its own
    judge, or only `judge_name`'s rows are read. Raises JudgeOutputImportRejected with every
    problem, having written nothing; or returns one ImportedRun per judge, each either new
    or (same input, same judge, same dataset) the run made by an earlier import.
    """
    if dataset.project_id != project.pk:
        raise ValueError("the dataset belongs to another project")
    skills, skill_ids = _project_skills(project)
    parsed = parse_input(files, skills=skills, fmt=fmt, judge=judge_name, model=model)
    digest, described = input_sha256(files)
    problems = list(parsed.problems)
    by_judge: dict[str, list[ImportedJudgment]] = {}
    for judgment in parsed.judgments:
        by_judge.setdefault(judgment.judge, []).append(judgment)

    def snapshot(judge: str, judgments: list[ImportedJudgment]) -> dict[str, Any]:
        tokens = [j.total_tokens for j in judgments if j.total_tokens is not None]
        return {
            "kind": JudgeKind.IMPORTED,
            "format": parsed.format,
            "files": described,
            "input_sha256": digest,
            "model_option": model.strip() or None,
            "models": sorted({j.model for j in judgments}),
            "judge_option": judge_name.strip() or None,
            "rater": judge if parsed.format == LONG else None,
            "total_tokens": sum(tokens) if tokens else None,
        }

    existing_judges = {
        j.name: j for j in JudgeConfig.objects.filter(project=project, name__in=list(by_judge))
    }
    earlier: dict[str, JudgeRun] = {}
    to_check: list[ImportedJudgment] = []
    for name, judgments in by_judge.items():
        judge = existing_judges.get(name)
        if judge is not None and judge.kind != JudgeKind.IMPORTED:
            problems.append(
                Problem(
                    "",
                    None,
                    "judge",
                    "judge_name_taken",
                    f"the project has a {judge.get_kind_display()} judge named {name!r}; "
                    "imported outputs need a judge of their own: choose another name",
                )
            )
            continue
        run = _existing_run(judge, dataset, digest) if judge is not None else None
        if run is not None:
            if run.settings_snapshot.get("models") != snapshot(name, judgments)["models"]:
                problems.append(
                    Problem(
                        "",
                        None,
                        "model",
                        "already_imported",
                        f"this input was imported as judge {name!r} before (run {run.pk}) "
                        f"for model(s) {', '.join(run.settings_snapshot.get('models', []))}",
                    )
                )
                continue
            earlier[name] = run
            continue
        to_check.extend(judgments)
    # The rows that parsed are checked against the project and the dataset even when others
    # did not: one round of fixing, not one per kind of problem.
    dataset_problems, response_ids = _check_against_dataset(dataset, to_check, parsed.format)
    problems += dataset_problems
    if problems:
        raise JudgeOutputImportRejected(sorted(problems, key=_file_order(files)))

    started = timezone.now()
    runs: list[ImportedRun] = []
    with transaction.atomic():
        for name, judgments in by_judge.items():
            if name in earlier:
                runs.append(_earlier(earlier[name]))
                continue
            judge = _imported_judge(project, name, created_by)
            # Serializes imports into this judge, so two identical imports racing each other
            # make one run: the second one finds it here.
            judge = JudgeConfig.objects.select_for_update().get(pk=judge.pk)
            run = _existing_run(judge, dataset, digest)
            if run is not None:
                runs.append(_earlier(run))
                continue
            runs.append(
                _write_run(
                    judge,
                    dataset,
                    judgments,
                    response_ids,
                    skill_ids,
                    snapshot(name, judgments),
                    started,
                    created_by,
                )
            )
    return JudgeOutputImportResult(
        format=parsed.format,
        input_sha256=digest,
        runs=runs,
        human_rows=parsed.human_rows,
        other_rater_rows=parsed.other_rater_rows,
    )


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


def _write_run(
    judge, dataset, judgments, response_ids, skill_ids, snapshot, started, created_by
) -> ImportedRun:
    parse_failed = sum(1 for j in judgments if j.parse_failed)
    run = JudgeRun.objects.create(
        judge=judge,
        dataset=dataset,
        status=RunStatus.DONE,
        settings_snapshot=snapshot,
        total=len(judgments),
        done=len(judgments) - parse_failed,
        parse_failed=parse_failed,
        created_by=created_by,
        started_at=started,
        finished_at=timezone.now(),
    )
    rows = [
        Judgment(
            run=run,
            response_id=response_ids[(j.item, j.model)],
            sample_index=0,
            status=JudgmentStatus.PARSE_FAILED if j.parse_failed else JudgmentStatus.OK,
            request={"imported": True}
            | ({"total_tokens": j.total_tokens} if j.total_tokens is not None else {}),
            raw_output=j.raw_output,
            parse_method=PARSE_METHOD,
            error="the judge's answer held no scores that could be read" if j.parse_failed else "",
        )
        for j in judgments
    ]
    Judgment.objects.bulk_create(rows, batch_size=1000)
    scores = [
        JudgeScore(
            judgment=row,
            run=run,
            response_id=row.response_id,
            skill_id=skill_ids[s.skill],
            rubric=None,
            score=s.score,
            is_na=s.score is None,
            feedback=s.feedback,
        )
        for row, j in zip(rows, judgments, strict=True)
        for s in j.scores
    ]
    JudgeScore.objects.bulk_create(scores, batch_size=2000)
    return ImportedRun(run=run, already_imported=False, judgments=len(rows), scores=len(scores))
