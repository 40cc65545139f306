"""Streaming parsers for dataset files: FLASK evaluation sets, FLASK model outputs, and the
generic JSONL/CSV format (see docs/IMPORT_FORMATS.md). Pure Python, no Django.

A parser reads one file as a byte stream, one line (record) at a time, and yields
`ItemRow`, `ResponseRow` or `Problem` objects. Rows come out already cleaned: when a value
is bad in a way that can be accepted (difficulty -1, domain "-1", an unknown skill), the row
carries the cleaned value *and* a Problem whose code tells the caller what was cleaned; the
caller's policy for that code decides whether the row is accepted, skipped, or the whole
import rejected. Memory use does not grow with the file: nothing is kept between lines.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import IO, TYPE_CHECKING, Any

from annotation.names import name_problem

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

#: Told the bytes of the file read so far, every few thousand lines, then None at its end.
ProgressCallback = Callable[[int | None], object]

# --- problem classes -------------------------------------------------------------------------

REJECT, SKIP, ACCEPT = "reject", "skip", "accept"

#: code -> (allowed actions, what "accept" means)
PROBLEM_CLASSES: dict[str, tuple[tuple[str, ...], str]] = {
    "unknown_format": ((REJECT,), ""),
    "empty_file": ((REJECT,), ""),
    "invalid_encoding": ((REJECT, SKIP), ""),
    "line_too_long": ((REJECT, SKIP), ""),
    "invalid_json": ((REJECT, SKIP), ""),
    "invalid_csv": ((REJECT, SKIP), ""),
    "missing_field": ((REJECT, SKIP), ""),
    "invalid_type": ((REJECT, SKIP), ""),
    "invalid_name": ((REJECT, SKIP), ""),
    "lookalike_name": ((REJECT, SKIP), ""),
    "empty_response": ((REJECT, SKIP, ACCEPT), "import the empty answer as it is"),
    "invalid_difficulty": ((REJECT, SKIP, ACCEPT), "import the row with difficulty unknown"),
    "invalid_domain": ((REJECT, SKIP, ACCEPT), "import the row without that domain"),
    "unknown_skill": ((REJECT, SKIP, ACCEPT), "import the row without that skill"),
    "skill_count": ((REJECT, SKIP, ACCEPT), "import the row with the skills it has"),
    "invalid_checklist": ((REJECT, SKIP, ACCEPT), "import the row without that checklist"),
    "duplicate_item": ((REJECT, SKIP), ""),
    "duplicate_response": ((REJECT, SKIP), ""),
    "unknown_item": ((REJECT, SKIP), ""),
    "changed_item": ((REJECT, SKIP), ""),
    "changed_response": ((REJECT, SKIP), ""),
    "inconsistent_item": ((REJECT, SKIP), ""),
    "identical_pair": ((REJECT, SKIP), ""),
}

FORMATS = ("flask-eval", "flask-output", "generic-jsonl", "generic-csv", "preference")

DIFFICULTY_NAMES = {
    "simple lifestyle knowledge": 1,
    "advanced lifestyle knowledge": 2,
    "formal education knowledge": 3,
    "major level knowledge": 4,
    "expert level knowledge": 5,
}

EXPECTED_SKILLS = 3
MAX_TEXT_CHARS = 1_000_000
#: Deepest nesting of a JSON line. Python's decoder stops near 1,000 levels, and a value
#: nested almost that deep breaks the first deeper recursion (repr, json.dumps); no input
#: of ours nests beyond a handful.
MAX_JSON_DEPTH = 100


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input, for every importer of the project (datasets, judge
    outputs, long-format scores). `line` is None for a problem of a whole file; `file` is
    empty too for a problem of the options."""

    file: str
    line: int | None
    field: str
    code: str
    message: str

    def __str__(self) -> str:
        where = self.file or "options"
        if self.line:
            where += f", line {self.line}"
        fld = f" [{self.field}]" if self.field else ""
        return f"{where}{fld}: {self.message} ({self.code})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "field": self.field,
            "code": self.code,
            "message": self.message,
        }


#: How an input writes "not applicable" for a score (compared case-insensitively).
NA_SPELLINGS = frozenset({"n/a", "na", "not applicable"})


class ScoreRefused(ValueError):
    """A score value that score_number or score_read refuses; the message says why."""


#: How a score is written as text: ASCII digits only (Python's int() and float() also take
#: "５" and "٥", and strip white space), no sign but a minus, no leading zero. A decimal
#: adds a fraction and/or an exponent; only scales that take any number accept one.
_INTEGER_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_DECIMAL_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MAX_SCORE_CHARS = 32


def score_number(raw: Any, *, decimals: bool = False) -> int | float | None:
    """The one reading of a score value, for every input that carries scores (the annotate
    API and page, the score, judge-output and gold-score inputs): None (JSON null) or a
    spelling of N/A (NA_SPELLINGS, exactly, in any case) is N/A; a JSON integer or text
    that is a whole number in ASCII digits ("4", "-2") is an int. With `decimals` a JSON
    float or text with a fraction or exponent ("0.25", "1e-5") is a float, which an
    integer scale refuses later (score_on_scale) — "4.0" is not 4 there. Anything else is
    refused with a message: booleans, "5 " (white space), "+4", "５" or "٥" (not ASCII),
    4.0 or 1e0 without `decimals`, NaN and infinities."""
    what = "a number" if decimals else "a whole number"
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        raise ScoreRefused(f"a score must be {what} or N/A, not {type_name(raw)}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise ScoreRefused(f"score {raw} is not a finite number")
        if not decimals:
            hint = f" (write {int(raw)})" if raw.is_integer() else ""
            raise ScoreRefused(f"score {raw!r} is not written as a whole number{hint}")
        return raw
    if not raw:
        raise ScoreRefused("the score is empty (write N/A for not applicable)")
    if len(raw) > _MAX_SCORE_CHARS:
        raise ScoreRefused(f"the score is longer than {_MAX_SCORE_CHARS} characters")
    if raw.casefold() in NA_SPELLINGS:
        return None
    if raw != raw.strip():
        raise ScoreRefused(f"score {raw!r} has white space around it")
    foreign = next((c for c in raw if not c.isascii()), None)
    if foreign is not None:
        raise ScoreRefused(
            f"score {raw!r} holds {foreign!r} (U+{ord(foreign):04X}); write digits 0-9"
        )
    if _INTEGER_TEXT.fullmatch(raw):
        return int(raw)
    if decimals and _DECIMAL_TEXT.fullmatch(raw):
        value = float(raw)
        if not math.isfinite(value):
            raise ScoreRefused(f"score {raw!r} is not a finite number")
        return value
    if raw.startswith("+"):
        raise ScoreRefused(f"score {raw!r} has a plus sign; write the number without it")
    if not decimals and _DECIMAL_TEXT.fullmatch(raw):
        raise ScoreRefused(f"score {raw!r} is not written as a whole number (like 4)")
    example = "4 or 0.25" if decimals else "4"
    raise ScoreRefused(f"score {raw!r} is not {what} (like {example}) or N/A")


def _number_shown(value: int | float) -> str:
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return text if len(text) <= 20 else f"{text[:20]}…"


def score_on_scale(value: int | float, low: float, high: float, *, integers: bool) -> str | None:
    """Why a score read by score_number is off the scale low..high, or None. On an integer
    scale the score must have been written as a whole number (an int, not 4.0)."""
    shown = f"{low:g} to {high:g}"
    if integers and not isinstance(value, int):
        return f"score {value!r} is not written as a whole number; the scale is {shown} (integers)"
    if not low <= value <= high:
        return f"score {_number_shown(value)} is outside the scale {shown}"
    return None


def score_read(raw: Any, *, low: int = 1, high: int = 5) -> int | None:
    """A score on an integer scale (FLASK's 1-5 unless told), or None for N/A, read with
    score_number; raises ScoreRefused with a message otherwise."""
    value = score_number(raw)
    if value is None:
        return None
    why = score_on_scale(value, low, high, integers=True)
    if why is not None:
        raise ScoreRefused(why)
    return int(value)


def skill_key(name: str) -> str:
    """How skill names written in an input are matched to the catalogue: case-insensitive,
    with `_`, `-` and runs of spaces alike (so `logical_correctness` is Logical
    Correctness)."""
    return re.sub(r"[\s_\-]+", " ", name).strip().casefold()


@dataclass
class ItemRow:
    line: int
    external_id: str
    instruction: str
    reference: str = ""
    skills: list[str] = field(default_factory=list)  # names, most relevant first
    checklists: dict[str, list[str]] = field(default_factory=dict)
    domains: list[str] = field(default_factory=list)
    difficulty: int | None = None
    task: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def fingerprint(self) -> str:
        """Content hash used to tell an unchanged re-import from a changed item."""
        canon = json.dumps(
            [
                self.instruction,
                self.reference,
                [s.lower() for s in self.skills],
                {k.lower(): v for k, v in sorted(self.checklists.items())},
                sorted(d.lower() for d in self.domains),
                self.difficulty,
                self.task,
                self.metadata,
            ],
            sort_keys=True,
            ensure_ascii=False,
        )
        return hashlib.sha1(canon.encode()).hexdigest()


@dataclass
class ResponseRow:
    line: int
    item_external_id: str
    model: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


@dataclass(frozen=True)
class Catalogue:
    """Names the parser validates against (lower-cased name -> canonical name)."""

    skills: dict[str, str]
    domains: dict[str, str]

    @classmethod
    def of(cls, skills: Iterable[str], domains: Iterable[str]) -> Catalogue:
        return cls({s.lower(): s for s in skills}, {d.lower(): d for d in domains})


# --- line reading ----------------------------------------------------------------------------


def iter_lines(
    stream: IO[bytes], *, max_line_bytes: int
) -> Iterator[tuple[int, bytes | None, int]]:
    """Yield (line number, raw line or None if too long, bytes consumed so far).

    Reads in bounded pieces, so a 2 GB line costs max_line_bytes of memory, not 2 GB.
    """
    lineno = 0
    consumed = 0
    while True:
        chunk = stream.readline(max_line_bytes + 1)
        if not chunk:
            return
        lineno += 1
        consumed += len(chunk)
        if len(chunk) > max_line_bytes and not chunk.endswith(b"\n"):
            while chunk and not chunk.endswith(b"\n"):  # drain the rest of the long line
                chunk = stream.readline(max_line_bytes + 1)
                consumed += len(chunk)
            yield lineno, None, consumed
            continue
        yield lineno, chunk, consumed


def _decode(raw: bytes, lineno: int) -> str:
    if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    return raw.decode("utf-8")


# --- format detection ------------------------------------------------------------------------


def detect_format(name: str, head: bytes) -> str | None:
    """Guess a file's format from its name and first bytes; None when unsure."""
    suffix = PurePath(name).suffix.lower()
    if suffix in {".csv", ".tsv"}:
        header = head.splitlines()[0] if head.strip() else b""
        cells = {
            c.strip().strip('"').lower()
            for c in header.lstrip(b"\xef\xbb\xbf").decode("utf-8", "replace").split(",")
        }
        return "preference" if cells >= PREFERENCE_KEYS else "generic-csv"
    first = b""
    for raw in head.splitlines():
        if raw.strip():
            first = raw.strip()
            break
    if first.startswith(b"\xef\xbb\xbf"):
        first = first[3:]
    try:
        obj = json.loads(first)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    keys = set(obj)
    if keys >= PREFERENCE_KEYS:
        return "preference"
    if {"question_id", "text"} <= keys:
        return "flask-output"
    if {"idx", "instruction"} <= keys and ("skill" in keys or "answer" in keys):
        return "flask-eval"
    if "instruction" in keys or {"item", "model", "text"} <= keys:
        return "generic-jsonl"
    return None


#: Leading bytes of the archive and compression formats people upload by mistake.
_ARCHIVE_MAGIC = (
    (b"PK\x03\x04", "a zip archive"),
    (b"PK\x05\x06", "a zip archive"),
    (b"\x1f\x8b", "gzip-compressed"),
    (b"\xfd7zXZ\x00", "xz-compressed"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed"),
    (b"7z\xbc\xaf\x27\x1c", "a 7z archive"),
)
_BZIP2 = re.compile(rb"BZh[1-9]\x31\x41\x59\x26\x53\x59")


def archive_problem(file_name: str, head: bytes) -> Problem | None:
    """An `unknown_format` Problem when a file starts like an archive or a compressed file
    (importers read plain UTF-8 text only), else None. `head`: the file's first 16 bytes."""
    kind = next((k for magic, k in _ARCHIVE_MAGIC if head.startswith(magic)), None)
    if kind is None and _BZIP2.match(head):
        kind = "bzip2-compressed"
    if kind is None:
        return None
    return Problem(
        file_name,
        None,
        "",
        "unknown_format",
        f"the file is {kind}; archives are not accepted: upload the uncompressed file",
    )


def model_name_from_filename(name: str) -> str:
    return PurePath(name).stem


# --- value cleaning (shared by all formats) ---------------------------------------------------


class _RowContext:
    def __init__(self, file: str, line: int) -> None:
        self.file = file
        self.line = line
        self.problems: list[Problem] = []
        self.fatal = False

    def problem(self, field_name: str, code: str, message: str, *, fatal: bool = False) -> None:
        self.problems.append(Problem(self.file, self.line, field_name, code, message))
        self.fatal = self.fatal or fatal


def _as_text(ctx: _RowContext, obj: dict[str, Any], key: str, *, required: bool, label: str) -> str:
    value = obj.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            ctx.problem(label, "missing_field", f"{label} is missing or empty", fatal=True)
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        ctx.problem(
            label, "invalid_type", f"{label} must be text, not {type_name(value)}", fatal=True
        )
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        ctx.problem(label, "invalid_type", f"{label} must be text, not {value}", fatal=True)
        return ""
    text = str(value)
    if len(text) > MAX_TEXT_CHARS:
        ctx.problem(
            label,
            "invalid_type",
            f"{label} is {len(text):,} characters (limit {MAX_TEXT_CHARS:,})",
            fatal=True,
        )
        return ""
    if "\x00" in text:
        ctx.problem(label, "invalid_type", f"{label} contains a NUL character", fatal=True)
        return ""
    return text


def type_name(value: Any) -> str:
    """How a problem message names the type of a decoded JSON or CSV value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


# --- JSON, strictly --------------------------------------------------------------------------


class JsonRefused(ValueError):
    """A JSON text that json_loads_strict refuses; the message says why, for a person."""


#: A JSON string, to its closing quote or to the end of an unterminated one (so removing
#: them is linear whatever the text), and what is neither a bracket nor a string.
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth_exceeds(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a JSON text nests lists and objects deeper than `limit`, found from the
    text before any decoding and without recursion (the decoder's recursion is what a
    3,000-level body crashed). Counting brackets first keeps the scan off nearly every
    text; the scan itself runs in C (a 5 MB body of brackets takes a fraction of a
    second)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(itertools.accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0) > limit


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise JsonRefused(f"the key {key!r} appears twice in one object")
        result[key] = value
    return result


def json_loads_strict(text: str, *, limit: int = MAX_JSON_DEPTH) -> Any:
    """Decode JSON as every input of the project is read (API bodies, upload lines, rubric
    files): at most `limit` levels of lists and objects, each key at most once in an
    object (Python's decoder silently keeps the last, so `{"score": 1, "score": 5}` would
    mean what only one reader thinks). Raises JsonRefused, with a message, for anything
    else. Decoding bytes is the caller's (each input has its encoding rule)."""
    if json_depth_exceeds(text, limit):
        raise JsonRefused(f"nested too deeply: deeper than {limit} levels of lists and objects")
    try:
        return json.loads(text, object_pairs_hook=_refuse_duplicates)
    except JsonRefused:
        raise
    except (ValueError, RecursionError) as exc:  # RecursionError: not reachable under limit
        raise JsonRefused(f"not valid JSON: {exc}") from None


def json_line(raw: bytes, file_name: str, line: int) -> Any:
    """One line of a JSON-lines file, decoded: the value, or the Problem that stops it (not
    UTF-8, not JSON, a key twice in an object, nested too deeply, or holding what
    PostgreSQL cannot store)."""
    try:
        value = json_loads_strict(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return Problem(file_name, line, "", "invalid_encoding", f"not UTF-8 ({exc.reason})")
    except JsonRefused as exc:
        return Problem(file_name, line, "", "invalid_json", str(exc))
    unstorable = unstorable_field(raw, value)
    if unstorable is not None:  # PostgreSQL takes it nowhere, not even in a lookup
        at, what = unstorable
        return Problem(file_name, line, at, "invalid_type", f"{what}, which cannot be stored")
    return value


class RowProblems:
    """The problems of one row of a long-format file (scores, judge outputs), with its file
    and line filled in; `bad` once one is reported."""

    def __init__(self, file_name: str, line: int, problems: list[Problem]) -> None:
        self.file_name = file_name
        self.line = line
        self.problems = problems
        self.bad = False

    def problem(self, fld: str, code: str, message: str) -> None:
        self.problems.append(Problem(self.file_name, self.line, fld, code, message))
        self.bad = True

    def name(self, obj: Any, key: str, limit: int = 200, *, required: bool = True) -> str:
        """An id or a name (short_name_check); "" when missing or not valid (reported,
        except a missing one that is not `required`)."""
        text, problem = short_name_check(obj.get(key), key, limit)
        if problem and (required or problem[0] != "missing_field"):
            self.problem(key, *problem)
        return text


def short_name_check(value: Any, key: str, limit: int) -> tuple[str, tuple[str, str] | None]:
    """An id or name as the long-format importers read it (an item id, a system, a rater, a
    skill): text or a whole number, trimmed, 1 to `limit` characters, no NUL. Returns the
    text, or "" and (code, message) of the problem. The characters annotation.names refuses
    in names are refused here too, in ids as well (they make two look the same)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return "", ("missing_field", f"{key} is missing or empty")
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return "", ("invalid_type", f"{key} must be text or a whole number, not {type_name(value)}")
    text = str(value).strip()
    if len(text) > limit:
        return "", ("invalid_type", f"{key} is longer than {limit} characters")
    if "\x00" in text:
        return "", ("invalid_type", f"{key} contains a NUL character")
    problem = name_problem(text)
    if problem is not None:  # bidi overrides, zero-width and other invisible characters
        return "", ("invalid_name", f"{key} {text!r} {problem}")
    return text, None


#: Characters no text column takes: NUL (PostgreSQL stores it in neither text nor jsonb) and
#: half of a UTF-16 surrogate pair (not encodable as UTF-8). JSON writes both only as \u
#: escapes, which the byte pattern finds in a raw line.
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_UNSTORABLE_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")


def unstorable_text(text: str) -> str | None:
    """What in `text` cannot be stored ("a NUL character (\\u0000)"), or None."""
    match = UNSTORABLE.search(text)
    if match is None:
        return None
    code = f"\\u{ord(match.group()):04x}"
    return f"a NUL character ({code})" if code == "\\u0000" else f"half a surrogate pair ({code})"


def unstorable_field(raw: bytes, value: Any) -> tuple[str, str] | None:
    """(field path, what) for the first key or text of a decoded JSON line that cannot be
    stored (see UNSTORABLE), at any depth, or None. The path shows the character escaped.
    Lines without a \\u escape of that kind are not walked."""
    if not _UNSTORABLE_ESCAPE.search(raw):
        return None
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        each, path = stack.pop()
        if isinstance(each, dict):
            children = [(child, f"{path}.{key}" if path else key) for key, child in each.items()]
            children += [(key, where) for (_, where), key in zip(children, each, strict=True)]
        elif isinstance(each, list):
            children = [(child, f"{path}[{n}]") for n, child in enumerate(each, start=1)]
        else:
            found = unstorable_text(each) if isinstance(each, str) else None
            if found:
                return UNSTORABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", path), found
            continue
        stack.extend(reversed(children))
    return None


def _name_check(ctx: _RowContext, label: str, name: str) -> None:
    """A model name (what annotation.names refuses in every name), fatal for the row."""
    problem = name_problem(name)
    if problem is not None:
        ctx.problem(label, "invalid_name", f"{label} {name!r} {problem}", fatal=True)


def _external_id(ctx: _RowContext, obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    if value is None or value == "":
        ctx.problem(key, "missing_field", f"{key} is missing", fatal=True)
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        ctx.problem(
            key,
            "invalid_type",
            f"{key} must be a string or integer, not {type_name(value)}",
            fatal=True,
        )
        return ""
    text = str(value).strip()
    if not text or len(text) > 200:
        ctx.problem(key, "invalid_type", f"{key} must be 1-200 characters", fatal=True)
        return ""
    problem = name_problem(text)
    if problem is not None:  # the rule of ids in every import (short_name_check)
        ctx.problem(key, "invalid_name", f"{key} {text!r} {problem}", fatal=True)
        return ""
    return text


def _difficulty(ctx: _RowContext, value: Any, label: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        stripped = value.strip()
        named = DIFFICULTY_NAMES.get(stripped.lower())
        if named:
            return named
        try:
            value = int(stripped)
        except ValueError:
            ctx.problem(
                label,
                "invalid_difficulty",
                f"difficulty {value!r} is not a level 1-5 or a level name",
            )
            return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
        ctx.problem(label, "invalid_difficulty", f"difficulty {value!r} is not a level 1-5")
        return None
    level: int = value
    return level


def _name_list(ctx: _RowContext, value: Any, label: str) -> list[str] | None:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(";") if part.strip()]
    if isinstance(value, list) and all(isinstance(v, (str, int)) for v in value):
        return [str(v).strip() for v in value if str(v).strip()]
    ctx.problem(
        label,
        "invalid_type",
        f"{label} must be a list of names or a ';'-separated string",
        fatal=True,
    )
    return None


def _skills(ctx: _RowContext, value: Any, catalogue: Catalogue, label: str) -> list[str]:
    names = _name_list(ctx, value, label)
    if names is None:
        return []
    skills: list[str] = []
    for name in names:
        canonical = catalogue.skills.get(name.lower())
        if canonical is None:
            ctx.problem(label, "unknown_skill", f"skill {name!r} is not in the catalogue")
        elif canonical in skills:
            ctx.problem(label, "unknown_skill", f"skill {name!r} is listed twice")
        else:
            skills.append(canonical)
    if not skills and not ctx.fatal:
        ctx.problem(label, "missing_field", "no valid skill", fatal=True)
    elif len(names) != EXPECTED_SKILLS and not ctx.fatal:
        ctx.problem(
            label,
            "skill_count",
            f"{len(names)} skill{'' if len(names) == 1 else 's'} given; "
            f"FLASK instances have {EXPECTED_SKILLS}",
        )
    return skills


def _domains(ctx: _RowContext, value: Any, catalogue: Catalogue, label: str) -> list[str]:
    names = _name_list(ctx, value, label)
    if names is None:
        return []
    domains: list[str] = []
    for name in names:
        canonical = catalogue.domains.get(name.lower())
        if canonical is None:
            ctx.problem(label, "invalid_domain", f"domain {name!r} is not a known domain")
        elif canonical not in domains:
            domains.append(canonical)
    return domains


def _checklists(
    ctx: _RowContext, value: Any, skills: list[str], label: str
) -> dict[str, list[str]]:
    if value is None or value == "":
        return {}
    if not isinstance(value, dict):
        ctx.problem(label, "invalid_checklist", f"{label} must map skill names to checks")
        return {}
    by_lower = {s.lower(): s for s in skills}
    result: dict[str, list[str]] = {}
    for key, checks in value.items():
        skill = by_lower.get(str(key).lower())
        if skill is None:
            ctx.problem(
                label, "invalid_checklist", f"checklist for {key!r}, not a skill of this item"
            )
            continue
        if isinstance(checks, str):
            checks = [checks]
        if not isinstance(checks, list) or not all(isinstance(c, str) for c in checks):
            ctx.problem(label, "invalid_checklist", f"checklist for {key!r} must be text or a list")
            continue
        cleaned = [c.strip() for c in checks if c.strip()]
        if cleaned:
            result[skill] = cleaned
    return result


def _metadata(ctx: _RowContext, value: Any, label: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        ctx.problem(label, "invalid_type", f"{label} must be an object", fatal=True)
        return {}
    return value


# --- JSONL ------------------------------------------------------------------------------------

FLASK_EVAL_KEYS = {"idx", "instruction", "answer", "skill", "domain", "difficulty", "task"}
GENERIC_ITEM_KEYS = {
    "id",
    "external_id",
    "instruction",
    "reference",
    "skills",
    "domains",
    "difficulty",
    "task",
    "metadata",
    "checklist",
    "responses",
}


def _flask_eval_row(ctx: _RowContext, obj: dict[str, Any], catalogue: Catalogue) -> ItemRow | None:
    external_id = _external_id(ctx, obj, "idx")
    instruction = _as_text(ctx, obj, "instruction", required=True, label="instruction")
    reference = _as_text(ctx, obj, "answer", required=False, label="answer")
    skills = _skills(ctx, obj.get("skill"), catalogue, "skill")
    domains = _domains(ctx, obj.get("domain"), catalogue, "domain")
    difficulty = _difficulty(ctx, obj.get("difficulty"), "difficulty")
    task = _as_text(ctx, obj, "task", required=False, label="task")[:200]
    extra = {k: v for k, v in obj.items() if k not in FLASK_EVAL_KEYS}
    if ctx.fatal:
        return None
    return ItemRow(
        ctx.line,
        external_id,
        instruction,
        reference,
        skills,
        {},
        domains,
        difficulty,
        task,
        extra,
    )


def _generic_item_row(
    ctx: _RowContext, obj: dict[str, Any], catalogue: Catalogue
) -> tuple[ItemRow | None, list[ResponseRow]]:
    id_key = "id" if "id" in obj else "external_id"
    external_id = _external_id(ctx, obj, id_key)
    instruction = _as_text(ctx, obj, "instruction", required=True, label="instruction")
    reference = _as_text(ctx, obj, "reference", required=False, label="reference")
    skills = _skills(ctx, obj.get("skills"), catalogue, "skills")
    checklists = _checklists(ctx, obj.get("checklist"), skills, "checklist")
    domains = _domains(ctx, obj.get("domains"), catalogue, "domains")
    difficulty = _difficulty(ctx, obj.get("difficulty"), "difficulty")
    task = _as_text(ctx, obj, "task", required=False, label="task")[:200]
    metadata = dict(_metadata(ctx, obj.get("metadata"), "metadata"))
    metadata.update({k: v for k, v in obj.items() if k not in GENERIC_ITEM_KEYS})
    responses: list[ResponseRow] = []
    raw_responses = obj.get("responses") or []
    if not isinstance(raw_responses, list):
        ctx.problem("responses", "invalid_type", "responses must be a list", fatal=True)
        raw_responses = []
    for n, raw in enumerate(raw_responses, start=1):
        label = f"responses[{n}]"
        if not isinstance(raw, dict):
            ctx.problem(label, "invalid_type", f"{label} must be an object", fatal=True)
            continue
        model = _as_text(ctx, raw, "model", required=True, label=f"{label}.model")[:200]
        _name_check(ctx, f"{label}.model", model.strip())
        raw_text = raw.get("text")
        if isinstance(raw_text, str) and not raw_text.strip():
            ctx.problem(f"{label}.text", "empty_response", "the response text is empty")
            text = raw_text
        else:
            text = _as_text(ctx, raw, "text", required=True, label=f"{label}.text")
        meta = _metadata(ctx, raw.get("metadata"), f"{label}.metadata")
        responses.append(ResponseRow(ctx.line, external_id, model.strip(), text, meta))
    if ctx.fatal:
        return None, []
    item = ItemRow(
        ctx.line,
        external_id,
        instruction,
        reference,
        skills,
        checklists,
        domains,
        difficulty,
        task,
        metadata,
    )
    return item, responses


def _response_row(
    ctx: _RowContext, obj: dict[str, Any], *, id_key: str, model: str | None
) -> ResponseRow | None:
    external_id = _external_id(ctx, obj, id_key)
    raw_text = obj.get("text")
    if isinstance(raw_text, str) and not raw_text.strip():
        ctx.problem("text", "empty_response", "the response text is empty")
        text = raw_text
    else:
        text = _as_text(ctx, obj, "text", required=True, label="text")
    if model is None:
        model = _as_text(ctx, obj, "model", required=True, label="model")[:200].strip()
    _name_check(ctx, "model", model)
    reserved = {id_key, "text", "model"}
    metadata = {k: v for k, v in obj.items() if k not in reserved}
    if ctx.fatal:
        return None
    return ResponseRow(ctx.line, external_id, model, text, metadata)


def parse_jsonl(
    stream: IO[bytes],
    *,
    file_name: str,
    fmt: str,
    catalogue: Catalogue,
    model_name: str | None = None,
    max_line_bytes: int = 4 * 1024 * 1024,
    on_progress: ProgressCallback | None = None,
) -> Iterator[ItemRow | ResponseRow | Problem]:
    """Parse a JSONL file of format flask-eval, flask-output or generic-jsonl."""
    saw_row = False
    for lineno, raw, consumed in iter_lines(stream, max_line_bytes=max_line_bytes):
        if on_progress is not None and lineno % 2048 == 0:
            on_progress(consumed)
        if raw is None:
            yield Problem(
                file_name,
                lineno,
                "",
                "line_too_long",
                f"line is longer than {max_line_bytes:,} bytes",
            )
            continue
        try:
            text = _decode(raw, lineno)
        except UnicodeDecodeError as exc:
            yield Problem(
                file_name, lineno, "", "invalid_encoding", f"not valid UTF-8 ({exc.reason})"
            )
            continue
        if not text.strip():
            continue
        saw_row = True
        try:
            obj = json_loads_strict(text)
        except JsonRefused as exc:
            yield Problem(file_name, lineno, "", "invalid_json", str(exc))
            continue
        if not isinstance(obj, dict):
            yield Problem(
                file_name,
                lineno,
                "",
                "invalid_json",
                f"a line must hold a JSON object, not {type_name(obj)}",
            )
            continue
        unstorable = unstorable_field(raw, obj)
        if unstorable is not None:
            at, what = unstorable
            yield Problem(file_name, lineno, at, "invalid_type", f"{what}, which cannot be stored")
            continue
        ctx = _RowContext(file_name, lineno)
        rows: list[ItemRow | ResponseRow] = []
        if fmt == "flask-eval":
            item = _flask_eval_row(ctx, obj, catalogue)
            rows = [item] if item else []
        elif fmt == "flask-output":
            resp = _response_row(ctx, obj, id_key="question_id", model=model_name)
            rows = [resp] if resp else []
        elif "instruction" in obj:
            item, responses = _generic_item_row(ctx, obj, catalogue)
            rows = [item, *responses] if item else []
        else:
            resp = _response_row(ctx, obj, id_key="item", model=model_name)
            rows = [resp] if resp else []
        if ctx.fatal or not rows:
            yield from ctx.problems
            continue
        rows[0].problems = ctx.problems
        yield from rows
    if not saw_row:
        yield Problem(file_name, None, "", "empty_file", "the file holds no rows")
    if on_progress is not None:
        on_progress(None)


# --- CSV --------------------------------------------------------------------------------------

CSV_ITEM_COLUMNS = (
    "instruction",
    "reference",
    "skills",
    "domains",
    "difficulty",
    "task",
    "checklist",
)


# Bytes that are not UTF-8 decode to lone surrogates (errors="surrogateescape"): finding one
# reports that record alone, where a strict decoder fails a whole 8 KB chunk of rows at once.
_UNDECODABLE = re.compile("[\udc80-\udcff]")


def _undecodable_byte(record: list[str]) -> int | None:
    for cell in record:
        match = _UNDECODABLE.search(cell)
        if match:
            return ord(match.group()) - 0xDC00
    return None


class _CountingReader(io.RawIOBase):
    """Wraps a byte stream to count bytes consumed (for progress)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer)  # io hands a bytearray or a byte memoryview
        data = self.stream.read(len(view))
        n = len(data)
        view[:n] = data
        self.count += n
        return n


def _cells_digest(cells: dict[str, str]) -> bytes:
    return hashlib.sha1(json.dumps(cells, sort_keys=True).encode()).digest()


def parse_csv(
    stream: IO[bytes],
    *,
    file_name: str,
    catalogue: Catalogue,
    model_name: str | None = None,
    max_line_bytes: int = 4 * 1024 * 1024,
    on_progress: ProgressCallback | None = None,
) -> Iterator[ItemRow | ResponseRow | Problem]:
    """Parse a generic CSV: one row per response (item columns repeat) or per item.

    Columns: id, instruction, reference, skills, domains, difficulty, task, checklist (JSON),
    model, response; skills/domains are ';'-separated. A row whose id was seen before adds a
    response to that item; its item columns must be empty or equal to the first row's.
    """
    counting = _CountingReader(stream)
    text_stream = io.TextIOWrapper(
        io.BufferedReader(counting), encoding="utf-8-sig", errors="surrogateescape", newline=""
    )
    csv.field_size_limit(max_line_bytes)
    reader = csv.reader(text_stream, strict=True)
    # id -> digest of the item columns of its first row: 20 bytes per item, not its text
    seen: dict[str, bytes] = {}
    header: list[str] | None = None
    index: dict[str, int] = {}
    rows_done = 0
    while True:
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            code = "line_too_long" if "field larger" in str(exc) else "invalid_csv"
            if code == "line_too_long":
                yield Problem(
                    file_name,
                    reader.line_num,
                    "",
                    code,
                    f"a record is longer than {max_line_bytes:,} bytes; "
                    "the rest of the file cannot be read",
                )
                return
            yield Problem(file_name, reader.line_num, "", code, f"CSV error: {exc}")
            rows_done += 1
            continue
        lineno = reader.line_num
        bad_byte = _undecodable_byte(record)
        if bad_byte is not None:
            message = f"not valid UTF-8 (byte 0x{bad_byte:02x})"
            yield Problem(file_name, lineno, "", "invalid_encoding", message)
            if header is None:
                return
            rows_done += 1
            continue
        if any("\x00" in cell for cell in record):  # text files hold no NUL; PostgreSQL neither
            yield Problem(file_name, lineno, "", "invalid_csv", "the record holds a NUL byte")
            if header is None:
                return
            rows_done += 1
            continue
        if header is None:
            header = [h.strip().lower() for h in record]
            index = {h: i for i, h in enumerate(header)}
            id_col = "id" if "id" in index else "external_id" if "external_id" in index else None
            if id_col is None:
                yield Problem(file_name, 1, "id", "unknown_format", "the header has no id column")
                return
            if "instruction" not in index and not {"model", "response"} <= index.keys():
                yield Problem(
                    file_name,
                    1,
                    "",
                    "unknown_format",
                    "the header needs an instruction column, or model and response columns",
                )
                return
            continue
        if not any(cell.strip() for cell in record):
            continue
        rows_done += 1
        if on_progress is not None and rows_done % 2048 == 0:
            on_progress(counting.count)
        if len(record) != len(header):
            yield Problem(
                file_name,
                lineno,
                "",
                "invalid_csv",
                f"{len(record)} columns, the header has {len(header)}",
            )
            continue
        obj = {h: record[i] for h, i in index.items()}
        ctx = _RowContext(file_name, lineno)
        external_id = _external_id(ctx, obj, "id" if "id" in index else "external_id")
        if ctx.fatal:
            yield from ctx.problems
            continue
        out: list[ItemRow | ResponseRow] = []
        item_cells = {c: obj.get(c, "").strip() for c in CSV_ITEM_COLUMNS}
        has_item_cells = bool(item_cells["instruction"])
        if external_id not in seen and has_item_cells:
            checklist_raw = item_cells["checklist"]
            checklist_value: Any = None
            if checklist_raw:
                try:
                    checklist_value = json_loads_strict(checklist_raw)
                except JsonRefused as exc:
                    ctx.problem("checklist", "invalid_checklist", f"checklist must be JSON ({exc})")
            obj_item = {
                "id": external_id,
                "instruction": item_cells["instruction"],
                "reference": item_cells["reference"],
                "skills": item_cells["skills"],
                "domains": item_cells["domains"],
                "difficulty": item_cells["difficulty"],
                "task": item_cells["task"],
                "checklist": checklist_value,
            }
            item, _ = _generic_item_row(ctx, obj_item, catalogue)
            if item is None:
                yield from ctx.problems
                continue
            seen[external_id] = _cells_digest(item_cells)
            out.append(item)
        elif (
            external_id in seen
            and has_item_cells
            and _cells_digest(item_cells) != seen[external_id]
        ):
            ctx.problem(
                "instruction",
                "inconsistent_item",
                f"item {external_id!r} repeats with different item columns",
                fatal=True,
            )
            yield from ctx.problems
            continue
        model = (obj.get("model") or "").strip() or (model_name or "")
        response_text = obj.get("response", "")
        if response_text.strip():
            if not model:
                ctx.problem(
                    "model", "missing_field", "model is missing for the response", fatal=True
                )
                yield from ctx.problems
                continue
            resp = _response_row(
                ctx, {"id": external_id, "text": response_text}, id_key="id", model=model[:200]
            )
            if resp is None:
                yield from ctx.problems
                continue
            out.append(resp)
        elif not out:
            ctx.problem("response", "missing_field", "row has neither item columns nor a response")
            ctx.fatal = True
            yield from ctx.problems
            continue
        out[0].problems = ctx.problems
        yield from out
    if rows_done == 0:
        yield Problem(file_name, None, "", "empty_file", "the file holds no rows")
    if on_progress is not None:
        on_progress(None)


def parse_file(
    stream: IO[bytes],
    *,
    file_name: str,
    fmt: str,
    catalogue: Catalogue,
    model_name: str | None = None,
    max_line_bytes: int = 4 * 1024 * 1024,
    on_progress: ProgressCallback | None = None,
) -> Iterator[ItemRow | ResponseRow | Problem]:
    if fmt == "preference":
        return parse_preference(
            stream,
            file_name=file_name,
            catalogue=catalogue,
            max_line_bytes=max_line_bytes,
            on_progress=on_progress,
        )
    if fmt == "generic-csv":
        return parse_csv(
            stream,
            file_name=file_name,
            catalogue=catalogue,
            model_name=model_name,
            max_line_bytes=max_line_bytes,
            on_progress=on_progress,
        )
    if fmt == "flask-output" and not model_name:
        model_name = model_name_from_filename(file_name)
    return parse_jsonl(
        stream,
        file_name=file_name,
        fmt=fmt,
        catalogue=catalogue,
        model_name=model_name,
        max_line_bytes=max_line_bytes,
        on_progress=on_progress,
    )


# --- pairwise preference sets -----------------------------------------------------------------

#: The fields every row of a preference set has (the reward-model benchmark shape).
PREFERENCE_KEYS = frozenset({"prompt", "chosen", "rejected"})
#: The skills a preference item is compared on when its row names none (docs/IMPORT_FORMATS.md):
#: following the instruction, getting it right, and staying harmless. Accuracy reads the
#: judge's Overall verdict; these keep the pairwise prompt's skill block FLASK-shaped.
PREFERENCE_SKILLS = ("Comprehension", "Logical Correctness", "Harmlessness")
#: The two responses of a preference item, by model name.
CHOSEN, REJECTED = "chosen", "rejected"
PREFERENCE_ROW_KEYS = {"id", "prompt", "chosen", "rejected", "subset", "skills"}
MAX_SUBSET_CHARS = 100


def _preference_row(
    ctx: _RowContext, obj: dict[str, Any], catalogue: Catalogue
) -> list[ItemRow | ResponseRow]:
    """An item (instruction = prompt, metadata {"preference_set": true, "subset": ...}) and
    its two responses, by the models `chosen` and `rejected`; [] when the row is refused."""
    prompt = _as_text(ctx, obj, "prompt", required=True, label="prompt")
    chosen = _as_text(ctx, obj, CHOSEN, required=True, label=CHOSEN)
    rejected = _as_text(ctx, obj, REJECTED, required=True, label=REJECTED)
    subset, problem = short_name_check(obj.get("subset"), "subset", MAX_SUBSET_CHARS)
    if problem is not None:
        ctx.problem("subset", *problem, fatal=True)
    if obj.get("id") not in (None, ""):
        external_id = _external_id(ctx, obj, "id")
    else:  # no id: one from the content, so the same pair is the same item on a re-import
        digest = hashlib.sha1("\x00".join((prompt, chosen, rejected)).encode()).hexdigest()
        external_id = f"pref-{digest[:16]}"
    if chosen and rejected and chosen.strip() == rejected.strip():
        ctx.problem(
            REJECTED,
            "identical_pair",
            "chosen and rejected are the same text: there is no preference to measure",
            fatal=True,
        )
    if obj.get("skills") not in (None, "", []):
        skills = _skills(ctx, obj.get("skills"), catalogue, "skills")
    else:
        skills = [
            catalogue.skills[s.lower()] for s in PREFERENCE_SKILLS if s.lower() in catalogue.skills
        ]
    metadata: dict[str, Any] = {
        k: v for k, v in obj.items() if k not in PREFERENCE_ROW_KEYS and v not in (None, "")
    }
    metadata.update({"preference_set": True, "subset": subset})
    if ctx.fatal:
        return []
    item = ItemRow(ctx.line, external_id, prompt, "", skills, metadata=metadata)
    return [
        item,
        ResponseRow(ctx.line, external_id, CHOSEN, chosen),
        ResponseRow(ctx.line, external_id, REJECTED, rejected),
    ]


def _preference_records(
    stream: IO[bytes], *, file_name: str, max_line_bytes: int, on_progress: ProgressCallback | None
) -> Iterator[tuple[int, dict[str, Any]] | Problem]:
    """(line, row) of a preference file: JSON Lines, or CSV with a header (by the name)."""
    if PurePath(file_name).suffix.lower() not in {".csv", ".tsv"}:
        for lineno, raw, consumed in iter_lines(stream, max_line_bytes=max_line_bytes):
            if on_progress is not None and lineno % 2048 == 0:
                on_progress(consumed)
            if raw is None:
                message = f"line is longer than {max_line_bytes:,} bytes"
                yield Problem(file_name, lineno, "", "line_too_long", message)
                continue
            if not raw.strip():
                continue
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            value = json_line(raw, file_name, lineno)
            if isinstance(value, Problem):
                yield value
            elif not isinstance(value, dict):
                message = f"a line must hold a JSON object, not {type_name(value)}"
                yield Problem(file_name, lineno, "", "invalid_json", message)
            else:
                yield lineno, value
        return
    counting = _CountingReader(stream)
    text_stream = io.TextIOWrapper(
        io.BufferedReader(counting), encoding="utf-8-sig", errors="surrogateescape", newline=""
    )
    csv.field_size_limit(max_line_bytes)
    reader = csv.reader(text_stream, strict=True)
    header: list[str] | None = None
    while True:
        try:
            record = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            if "field larger" in str(exc):
                message = f"a record is longer than {max_line_bytes:,} bytes; the rest is unread"
                yield Problem(file_name, reader.line_num, "", "line_too_long", message)
                return
            yield Problem(file_name, reader.line_num, "", "invalid_csv", f"CSV error: {exc}")
            continue
        lineno = reader.line_num
        if on_progress is not None and lineno % 2048 == 0:
            on_progress(counting.count)
        bad_byte = _undecodable_byte(record)
        if bad_byte is not None:
            message = f"not valid UTF-8 (byte 0x{bad_byte:02x})"
            yield Problem(file_name, lineno, "", "invalid_encoding", message)
            if header is None:
                return
            continue
        if any("\x00" in cell for cell in record):
            yield Problem(file_name, lineno, "", "invalid_csv", "the record holds a NUL byte")
            continue
        if header is None:
            header = [h.strip().lower() for h in record]
            missing = sorted(PREFERENCE_KEYS - set(header))
            if missing:
                message = f"the header has no {', '.join(missing)} column"
                yield Problem(file_name, 1, "", "unknown_format", message)
                return
            continue
        if not any(cell.strip() for cell in record):
            continue
        if len(record) != len(header):
            message = f"{len(record)} columns, the header has {len(header)}"
            yield Problem(file_name, lineno, "", "invalid_csv", message)
            continue
        yield lineno, {h: cell for h, cell in zip(header, record, strict=True) if h}


def parse_preference(
    stream: IO[bytes],
    *,
    file_name: str,
    catalogue: Catalogue,
    max_line_bytes: int = 4 * 1024 * 1024,
    on_progress: ProgressCallback | None = None,
) -> Iterator[ItemRow | ResponseRow | Problem]:
    """Parse a pairwise preference set (JSONL or CSV): per row `prompt`, `chosen`,
    `rejected`, `subset`, optionally `id` and `skills`; other fields go to the item's
    metadata. Each row is one item with the responses of the models `chosen` and
    `rejected`. Duplicate ids are found by the import, over the whole upload."""
    saw_row = False
    for record in _preference_records(
        stream, file_name=file_name, max_line_bytes=max_line_bytes, on_progress=on_progress
    ):
        if isinstance(record, Problem):
            saw_row = True
            yield record
            continue
        saw_row = True
        lineno, obj = record
        ctx = _RowContext(file_name, lineno)
        rows = _preference_row(ctx, obj, catalogue)
        if not rows:
            yield from ctx.problems
            continue
        rows[0].problems = ctx.problems
        yield from rows
    if not saw_row:
        yield Problem(file_name, None, "", "empty_file", "the file holds no rows")
    if on_progress is not None:
        on_progress(None)
