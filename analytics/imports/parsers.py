"""Long-format score files, pure (no Django): one row per score, as CSV, JSONL or Parquet.

Columns (keys): item, system, rater, rater_kind, skill, score; optional instruction,
response, reference, domain, difficulty, rationale. See docs/IMPORT_FORMATS.md.

`scores_parse` reads each file once, as a stream, hashing its bytes on the way, and hands
every well-formed row to a sink (with the item and response values it gives) and every
Problem found in a row to a problem list: malformed rows, scores that are neither a finite
number nor N/A. It keeps nothing per row, so memory does not grow with the file. Parquet
files are read one record batch at a time (`_parquet`), their column types checked first.
Checks
across rows (the same score given twice, item or response values that differ between rows)
and checks that need the database (the project's skills and domains, stored texts and
scores, scales) are the caller's: analytics.imports runs them in SQL over staged rows.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import IO, Any, NamedTuple, TypedDict

from annotation.parsers import (
    Problem,
    RowProblems,
    archive_problem,
    json_line,
    score_number,
    skill_key,
    type_name,
)
from flaskweb.streams import HashingReader

REQUIRED = ("item", "system", "rater", "rater_kind", "skill", "score")
OPTIONAL = ("instruction", "response", "reference", "domain", "difficulty", "rationale")
RATER_KINDS = ("human", "judge")
#: Spellings of "not applicable", compared trimmed and case-insensitively.
MAX_NAME = 200  # item ids, systems and raters, as the models store them
MAX_SKILL_NAME = 100
MAX_TEXT_CHARS = 1_000_000
MAX_LINE_BYTES = 4 * 1024 * 1024
CSV, JSONL, PARQUET = "csv", "jsonl", "parquet"
#: Rows per record batch read from a Parquet file (memory holds one batch as Python rows).
PARQUET_BATCH_ROWS = 2000
#: What each column of a Parquet score file may hold (the CSV's columns, typed): names and
#: ids are text or whole numbers, texts are text, scores numbers (null: N/A).
_PARQUET_KINDS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("item", "system", "rater"), ("text", "integer")),
    **dict.fromkeys(("rater_kind", "skill"), ("text",)),
    **dict.fromkeys(("instruction", "response", "reference", "rationale"), ("text",)),
    "score": ("integer", "float", "null"),
    "domain": ("text", "text list"),
    "difficulty": ("integer", "text"),
}

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


# --- scales ----------------------------------------------------------------------------------


class ScaleDict(TypedDict):
    low: float
    high: float
    continuous: bool


@dataclass(frozen=True)
class Scale:
    low: float
    high: float
    continuous: bool = False

    def __str__(self) -> str:
        kind = "continuous" if self.continuous else "integers"
        return f"{self.low:g} to {self.high:g} ({kind})"

    def as_dict(self) -> ScaleDict:
        return {"low": self.low, "high": self.high, "continuous": self.continuous}

    def check(self, value: float) -> str | None:
        """Why `value` is not on this scale, or None when it is."""
        if not self.continuous and not value.is_integer():
            return f"score {value:g} is not a whole number; the scale is {self}"
        if not self.low <= value <= self.high:
            return f"score {value:g} is outside the scale {self}"
        return None


DEFAULT_SCALE = Scale(1.0, 5.0, False)
ALL_SKILLS = "*"


def scale_spec_parse(spec: str) -> tuple[str, Scale]:
    """`SKILL=MIN:MAX[:continuous]` (SKILL may be `*`) -> (skill name, Scale). Raises
    ValueError with a message."""
    name, sep, rest = spec.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ValueError(f"scale {spec!r} must look like SKILL=MIN:MAX or SKILL=MIN:MAX:continuous")
    parts = [p.strip() for p in rest.split(":")]
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2].casefold() != "continuous"):
        raise ValueError(f"scale {spec!r} must look like SKILL=MIN:MAX or SKILL=MIN:MAX:continuous")
    bounds = []
    for part in parts[:2]:
        if not _NUMBER.fullmatch(part):
            raise ValueError(f"scale {spec!r}: {part!r} is not a number")
        bounds.append(float(part))
    low, high = bounds
    continuous = len(parts) == 3
    if not all(math.isfinite(b) for b in bounds) or low >= high:
        raise ValueError(f"scale {spec!r}: MIN must be below MAX")
    if not continuous and not (low.is_integer() and high.is_integer()):
        raise ValueError(f"scale {spec!r}: an integer scale needs whole-number bounds")
    return name, Scale(low, high, continuous)


# --- values ----------------------------------------------------------------------------------


def score_value(raw: object) -> float | None:
    """A finite number, or None for N/A, by the rule of every score input
    (annotation.parsers.score_number: ASCII digits, no white space or plus sign; a
    fraction or an exponent only for a scale that takes any number). Raises ValueError
    with a message."""
    value = score_number(raw, decimals=True)
    return None if value is None else float(value)


def normalized_text(text: str) -> str:
    """How texts are compared: line endings and surrounding white space do not count."""
    return text.replace("\r\n", "\n").strip()


# --- parsed input ------------------------------------------------------------------------------


class ScoreRow(NamedTuple):
    file: int  # index into ParsedScores.files
    line: int
    item: str
    system: str
    rater: str
    rater_kind: str
    skill: str  # skill_key of the skill's name
    value: float | None  # None: N/A
    rationale: str
    # written with a fraction or an exponent ("4.0", "4e0"): refused on an integer scale,
    # where only whole numbers as written count ("4.0" is not 4 there)
    fractional: int = 0


class Given(NamedTuple):
    """A value a row gives for its item (`system` "") or its response: `field` is
    instruction, reference, difficulty, domain or response; `value` as stored (a domain
    list as JSON), `norm` the form two rows' values are compared in."""

    field: str
    system: str
    value: str
    norm: str


#: What a sink is handed per well-formed row: the row, the skill as written, its Givens.
RowSink = Callable[["ScoreRow", str, list[Given]], None]
#: A value as a row gives it: the domain names (field "domain"), the difficulty level
#: ("difficulty") or a text (the other fields).
GivenValue = tuple[str, ...] | int | str


def given_norm(fld: str, value: GivenValue) -> str:
    """How two rows' values for the same item or response are compared: texts without
    line-ending style and surrounding white space, domain names without order and case."""
    if fld == "domain" and isinstance(value, tuple):
        return "\x1f".join(sorted(d.casefold() for d in value))
    if fld == "difficulty" or not isinstance(value, str):
        return str(value)
    return hashlib.blake2b(
        normalized_text(value).encode("utf-8", "surrogatepass"), digest_size=16
    ).hexdigest()


def given_make(fld: str, system: str, value: GivenValue) -> Given:
    shown = json.dumps(list(value)) if fld == "domain" and isinstance(value, tuple) else str(value)
    return Given(fld, system, shown, given_norm(fld, value))


class FileInputDict(TypedDict):
    name: str
    format: str
    sha256: str
    bytes: int
    rows: int


@dataclass
class FileInput:
    name: str
    format: str = ""
    sha256: str = ""
    bytes: int = 0
    rows: int = 0

    def as_dict(self) -> FileInputDict:
        return {
            "name": self.name,
            "format": self.format,
            "sha256": self.sha256,
            "bytes": self.bytes,
            "rows": self.rows,
        }


@dataclass
class ParsedScores:
    files: list[FileInput] = field(default_factory=list)
    # the well-formed rows, when no sink was given (small inputs, tests)
    rows: list[ScoreRow] = field(default_factory=list)
    # skill_key -> (spelling, file, line) of its first row
    skills: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    rows_read: int = 0

    @property
    def input_sha256(self) -> str:
        """One file: the hash of its bytes (what sha256sum prints). Several: the hash of
        their sorted hex digests, one a line, so their order does not matter."""
        if len(self.files) == 1:
            return self.files[0].sha256
        joined = "\n".join(sorted(f.sha256 for f in self.files)).encode()
        return hashlib.sha256(joined).hexdigest()


# --- reading -----------------------------------------------------------------------------------


def _format_of(name: str, reader: io.BufferedReader[HashingReader]) -> str:
    suffix = PurePath(name).suffix.lower()
    if suffix == ".parquet" or reader.peek(4)[:4] == b"PAR1":
        return PARQUET
        return CSV
    if suffix in {".jsonl", ".ndjson", ".json"}:
        return JSONL
    head = reader.peek(64).removeprefix(b"\xef\xbb\xbf").lstrip()
    return JSONL if head.startswith(b"{") else CSV


class _Problems(list[Problem]):
    """The parser's problem list: remembers which files had one, and hands each problem
    to `add` (a bounded log) when given, instead of keeping it."""

    def __init__(self, add: Callable[[Problem], None] | None) -> None:
        super().__init__()
        self.add = add
        self.files: set[str] = set()

    def append(self, problem: Problem) -> None:
        self.files.add(problem.file)
        if self.add is None:
            super().append(problem)
        else:
            self.add(problem)


class _Parser:
    def __init__(
        self,
        difficulty_names: Mapping[str, int],
        max_line_bytes: int,
        sink: RowSink | None = None,
        on_problem: Callable[[Problem], None] | None = None,
        on_read: Callable[[int], None] | None = None,
    ) -> None:
        self.problems = _Problems(on_problem)
        self.result = ParsedScores(problems=self.problems)
        self.difficulty_names = difficulty_names
        self.max_line_bytes = max_line_bytes
        self.sink = sink or (lambda row, skill, givens: self.result.rows.append(row))
        self.on_read = on_read

    def parse(self, files: Sequence[tuple[str, IO[bytes] | bytes]]) -> ParsedScores:
        if not files:
            self._problem("", None, "files", "missing_option", "no file given")
        for index, (name, stream) in enumerate(files):
            if isinstance(stream, (bytes, bytearray)):
                stream = io.BytesIO(stream)
            info = FileInput(name)
            self.result.files.append(info)
            hashing = HashingReader(stream, self.on_read)
            reader = io.BufferedReader(hashing, buffer_size=1 << 16)
            archive = archive_problem(name, reader.peek(16)[:16])
            info.format = _format_of(name, reader)
            if archive is not None:
                self.result.problems.append(archive)
            elif info.format == PARQUET:
                self._parquet(index, reader)
            elif info.format == CSV:
                self._csv(index, reader)
            else:
                self._jsonl(index, reader)
            while reader.read(1 << 20):  # a file left early is still hashed whole
                pass
            info.sha256 = hashing.digest.hexdigest()
            info.bytes = hashing.count
            if info.rows == 0 and name not in self.problems.files:
                self._problem(name, None, "", "empty_file", "the file holds no rows")
        return self.result

    def _problem(self, file: str, line: int | None, fld: str, code: str, message: str) -> None:
        self.result.problems.append(Problem(file, line, fld, code, message))

    def _jsonl(self, index: int, reader: io.BufferedReader[HashingReader]) -> None:
        name = self.result.files[index].name
        lineno = 0
        while True:
            raw = reader.readline(self.max_line_bytes + 1)
            if not raw:
                return
            lineno += 1
            if len(raw) > self.max_line_bytes and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):
                    raw = reader.readline(self.max_line_bytes + 1)
                self._problem(
                    name,
                    lineno,
                    "",
                    "line_too_long",
                    f"the line is longer than {self.max_line_bytes:,} bytes",
                )
                continue
            if lineno == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            if not raw.strip():
                continue
            self.result.files[index].rows += 1
            obj = json_line(raw, name, lineno)
            if isinstance(obj, Problem):
                self.result.problems.append(obj)
                continue
            if not isinstance(obj, dict):
                self._problem(
                    name,
                    lineno,
                    "",
                    "invalid_json",
                    f"a line must hold an object, not {type_name(obj)}",
                )
                continue
            self._row(index, lineno, {str(k).strip().lower(): v for k, v in obj.items()})

    def _parquet(self, index: int, reader: io.BufferedReader[HashingReader]) -> None:
        """A Parquet file: its footer is at its end, so the file is first copied to a
        temporary file (hashed on the way), then read one record batch at a time. The
        column types are checked before any row; a row's number is its position in the
        file, the first row being 1."""
        # imported here: pyarrow costs every process a few hundred ms at start (the pages
        # load this module), and only Parquet files need it
        import pyarrow as pa
        import pyarrow.parquet as pq

        name = self.result.files[index].name
        with tempfile.TemporaryFile() as spool:
            shutil.copyfileobj(reader, spool, 1 << 20)
            spool.seek(0)
            try:
                parquet = pq.ParquetFile(spool)
            except (pa.ArrowException, OSError) as exc:
                self._problem(name, None, "", "invalid_parquet", f"not a Parquet file: {exc}")
                return
            schema = parquet.schema_arrow
            missing = [c for c in REQUIRED if c not in schema.names]
            if missing:
                self._problem(
                    name,
                    None,
                    "",
                    "missing_field",
                    f"the file lacks the column(s) {', '.join(missing)}",
                )
                return
            columns = [c for c in (*REQUIRED, *OPTIONAL) if c in schema.names]
            wrong = False
            for column in columns:
                found = schema.field(column).type
                kind = _parquet_kind(found)
                if kind not in _PARQUET_KINDS[column]:
                    wrong = True
                    allowed = " or ".join(_PARQUET_KINDS[column])
                    self._problem(
                        name,
                        None,
                        column,
                        "invalid_type",
                        f"column {column} is of Parquet type {found}; it must hold {allowed}"
                        + (" (null for N/A)" if column == "score" else ""),
                    )
            if wrong:
                return
            row_number = 0
            try:
                for batch in parquet.iter_batches(
                    batch_size=PARQUET_BATCH_ROWS, columns=columns, use_threads=False
                ):
                    for values in batch.to_pylist():
                        row_number += 1
                        self.result.files[index].rows += 1
                        self._row(index, row_number, _parquet_row(values))
            except (pa.ArrowException, OSError) as exc:
                self._problem(
                    name, row_number + 1, "", "invalid_parquet", f"the file cannot be read: {exc}"
                )

    def _csv(self, index: int, reader: io.BufferedReader[HashingReader]) -> None:
        text = io.TextIOWrapper(reader, encoding="utf-8-sig", errors="surrogateescape", newline="")
        try:
            self._csv_records(index, text)
        finally:
            text.detach()  # leaves the reader open, for hashing what is left

    def _csv_records(self, index: int, text: io.TextIOWrapper) -> None:
        name = self.result.files[index].name
        csv.field_size_limit(self.max_line_bytes)
        records = csv.reader(text, strict=True)
        header: list[str] | None = None
        end = 0  # the line the previous record ended on
        while True:
            start = end + 1
            try:
                record = next(records)
            except StopIteration:
                break
            except csv.Error as exc:
                self._problem(name, records.line_num, "", "invalid_csv", f"not valid CSV: {exc}")
                return  # the reader cannot resynchronise after a broken record
            end = records.line_num
            if not record or not any(cell.strip() for cell in record):
                continue
            if any(_UNDECODABLE.search(cell) for cell in record):
                self._problem(name, start, "", "invalid_encoding", "not UTF-8")
                if header is None:
                    return
                self.result.files[index].rows += 1
                continue
            if any("\x00" in cell for cell in record):
                self._problem(name, start, "", "invalid_csv", "the record holds a NUL byte")
                if header is None:
                    return
                self.result.files[index].rows += 1
                continue
            if header is None:
                header = [cell.strip().lower() for cell in record]
                missing = [c for c in REQUIRED if c not in header]
                if missing:
                    self._problem(
                        name,
                        start,
                        "",
                        "missing_field",
                        f"the header lacks the column(s) {', '.join(missing)}",
                    )
                    return
                continue
            self.result.files[index].rows += 1
            if len(record) != len(header):
                self._problem(
                    name,
                    start,
                    "",
                    "invalid_csv",
                    f"{len(record)} cells where the header has {len(header)}",
                )
                continue
            # an empty cell is a value not given
            self._row(index, start, {h: c for h, c in zip(header, record, strict=True) if c != ""})

    # --- one row -----------------------------------------------------------------------------

    def _row(self, index: int, line: int, obj: dict[str, object]) -> None:
        result = self.result
        result.rows_read += 1
        file_name = result.files[index].name
        row = _RowCheck(file_name, line, result.problems)
        item = row.name(obj, "item", MAX_NAME)
        system = row.name(obj, "system", MAX_NAME)
        rater = row.name(obj, "rater", MAX_NAME)
        kind = row.name(obj, "rater_kind", MAX_NAME).casefold()
        if kind and kind not in RATER_KINDS:
            row.problem(
                "rater_kind",
                "invalid_value",
                f"rater_kind must be human or judge, not {obj['rater_kind']!r}",
            )
        skill = row.name(obj, "skill", MAX_SKILL_NAME)
        value: float | None = None
        fractional = 0
        if "score" not in obj or obj["score"] is None:
            row.problem("score", "missing_field", "score is missing or empty")
        else:
            try:
                number = score_number(obj["score"], decimals=True)
            except ValueError as exc:
                row.problem("score", "invalid_score", str(exc))
            else:
                value = None if number is None else float(number)
                fractional = int(isinstance(number, float))
        instruction = row.text(obj, "instruction")
        response = row.text(obj, "response")
        reference = row.text(obj, "reference")
        rationale = row.text(obj, "rationale")
        domains = row.domains(obj)
        difficulty = row.difficulty(obj, self.difficulty_names)
        if row.bad:
            return
        key = skill_key(skill)
        item_values: tuple[tuple[str, GivenValue | None], ...] = (
            ("instruction", instruction),
            ("reference", reference),
            ("difficulty", difficulty),
            ("domain", domains),
        )
        givens = [given_make(fld, "", value) for fld, value in item_values if value is not None]
        if response is not None:
            givens.append(given_make("response", system, response))
        result.skills.setdefault(key, (skill, index, line))
        self.sink(
            ScoreRow(
                index, line, item, system, rater, kind, key, value, rationale or "", fractional
            ),
            skill,
            givens,
        )


def _parquet_kind(found: Any) -> str:
    """What a Parquet (Arrow) column type holds, in the words of the problem messages."""
    import pyarrow as pa

    if pa.types.is_dictionary(found):
        found = found.value_type
    if pa.types.is_string(found) or pa.types.is_large_string(found):
        return "text"
    if pa.types.is_string_view(found):
        return "text"
    if pa.types.is_integer(found):
        return "integer"
    if pa.types.is_floating(found):
        return "float"
    if pa.types.is_null(found):
        return "null"
    listed = pa.types.is_list(found) or pa.types.is_large_list(found)
    if listed and _parquet_kind(found.value_type) == "text":
        return "text list"
    return str(found)


def _parquet_row(values: dict[str, object]) -> dict[str, object]:
    """A Parquet row as the row reader takes it: a null cell is a value not given, except
    the score, where null is N/A; a whole float score (pandas writes integer columns with
    missing values as floats) is that integer."""
    row = {key: value for key, value in values.items() if value is not None}
    score = values.get("score")
    if score is None:
        row["score"] = "N/A"
    elif isinstance(score, float) and score.is_integer():
        row["score"] = int(score)
    return row


# Bytes that are not UTF-8 decode to lone surrogates (errors="surrogateescape"), so one bad
# record is reported alone instead of failing the rest of the file.
_UNDECODABLE = re.compile("[\udc80-\udcff]")


class _RowCheck(RowProblems):
    """Reads the fields of one row, reporting what is wrong with file and line."""

    def text(self, obj: Mapping[str, object], key: str) -> str | None:
        """An optional text; None when not given (absent, null or only white space)."""
        value = obj.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.problem(key, "invalid_type", f"{key} must be text, not {type_name(value)}")
            return None
        if not value.strip():
            return None
        if len(value) > MAX_TEXT_CHARS:
            self.problem(key, "invalid_type", f"{key} is longer than {MAX_TEXT_CHARS:,} characters")
            return None
        if "\x00" in value:
            self.problem(key, "invalid_type", f"{key} contains a NUL character")
            return None
        return value

    def domains(self, obj: Mapping[str, object]) -> tuple[str, ...] | None:
        value = obj.get("domain")
        if value is None:
            return None
        if isinstance(value, str):
            names = [part.strip() for part in value.split(";")]
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            names = [v.strip() for v in value]
        else:
            self.problem(
                "domain", "invalid_type", "domain must be a name, ';'-separated names or a list"
            )
            return None
        names = [n for n in names if n]
        return tuple(names) if names else None

    def difficulty(self, obj: Mapping[str, object], level_names: Mapping[str, int]) -> int | None:
        value = obj.get("difficulty")
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if isinstance(value, str):
            text = value.strip()
            if text.casefold() in level_names:
                return level_names[text.casefold()]
            value = int(text) if re.fullmatch(r"[+-]?\d{1,3}", text) else text
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
            self.problem(
                "difficulty",
                "invalid_difficulty",
                f"difficulty {value!r} is not a level 1-5 or a level name",
            )
            return None
        return value


def scores_parse(
    files: Sequence[tuple[str, IO[bytes] | bytes]],
    *,
    difficulty_names: Mapping[str, int] | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
    sink: RowSink | None = None,
    on_problem: Callable[[Problem], None] | None = None,
    on_read: Callable[[int], None] | None = None,
) -> ParsedScores:
    """Parse long-format score files given as (name, binary stream or bytes). Never raises
    for bad input. `difficulty_names` maps lower-cased level names to levels 1-5. Each
    well-formed row goes to `sink(row, skill as written, givens)` (default: kept in
    `rows`), each problem to `on_problem` (default: kept in `problems`); `on_read` is told
    how many bytes were read (progress)."""
    return _Parser(difficulty_names or {}, max_line_bytes, sink, on_problem, on_read).parse(files)
