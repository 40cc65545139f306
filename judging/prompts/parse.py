"""Reading a judge's reply back: per-skill scores (never invented, rounded or clamped),
feedback, and the follow-up turn that asks for the JSON object again."""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .names import SkillMatcher, name_key

# --- parsing judge output -----------------------------------------------------------------------

Status = Literal["ok", "partial", "parse_failed"]
Method = Literal["json", "python_dict", "lines"]


@dataclass(frozen=True)
class ParsedJudgment:
    """A parsed judge reply.

    `scores` maps each skill read to 1-5, or None for N/A; a skill that was not read is
    absent (never None). `missing` lists every asked skill without a score, in the asked
    order, and `invalid` says why a value given for a skill was refused. `method` is how the
    scores were found, None when nothing structured was found.
    """

    status: Status
    scores: dict[str, int | None]
    feedback: dict[str, str]
    method: Method | None
    error: str = ""
    missing: tuple[str, ...] = ()
    invalid: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


_NA_WORDS = frozenset({"n/a", "na", "n.a.", "n.a", "not applicable", "none", "null"})
_NUMBER = r"[+-]?\d+(?:\.\d+)?"
_SCORE_TEXT = re.compile(rf"({_NUMBER})\s*(?:(?:/|out of)\s*({_NUMBER}))?")


def _number(raw: str | float) -> tuple[bool, int | None, str]:
    """(accepted, score, reason): only whole numbers 1..5, as int or as 4.0."""
    text = raw if isinstance(raw, str) else repr(raw)
    try:
        value = float(raw)
    except OverflowError:
        return False, None, f"{text[:20]} is outside 1-5"
    if not math.isfinite(value) or value != int(value):
        return False, None, f"{text} is not a whole score"
    if not 1 <= value <= 5:
        return False, None, f"{text} is outside 1-5"
    return True, int(value), ""


def _coerce(value: Any) -> tuple[bool, int | None, str]:
    """A value from a parsed object -> (accepted, score or None for N/A, reason)."""
    if value is None:
        return True, None, ""
    if isinstance(value, bool):
        return False, None, f"{value} is not a score"
    if isinstance(value, int | float):
        return _number(value)
    if isinstance(value, str):
        text = value.strip().strip("*`\"' ").strip()
        if text.casefold() in _NA_WORDS:
            return True, None, ""
        match = _SCORE_TEXT.fullmatch(text)
        if match is None:
            return False, None, f"{value!r} is not a score"
        if match.group(2) is not None and float(match.group(2)) != 5:
            return False, None, f"{text} is not on the 1-5 scale"
        return _number(match.group(1))
    if isinstance(value, Mapping):
        for key, inner in value.items():
            if isinstance(key, str) and name_key(key) in _SCORE_KEYS:
                return _coerce(inner)
        return False, None, "no score in this object"
    return False, None, f"{value!r} is not a score"


_SCORE_KEYS = frozenset({"score", "rating", "value", "grade", "points"})
_FEEDBACK_KEYS = frozenset(
    {"feedback", "rationale", "explanation", "reason", "reasoning", "comment", "justification"}
)


def _is_feedback_key(key: str) -> bool:
    key = name_key(key)
    return key in _FEEDBACK_KEYS or (key.endswith("s") and key[:-1] in _FEEDBACK_KEYS)


_SCORE_CONTAINERS = frozenset(
    {"scores", "score", "ratings", "rating", "grades", "results", "evaluation", "final scores"}
)
_NAME_KEYS = frozenset({"skill", "name", "category", "skill name", "criterion"})


def _score_like(value: Any) -> bool:
    if value is None or isinstance(value, int | float):
        return True
    if isinstance(value, str):
        return len(value.strip()) <= 16
    if isinstance(value, Mapping):
        return any(isinstance(k, str) and name_key(k) in _SCORE_KEYS for k in value)
    return False


def _list_to_map(items: list[Any]) -> dict[str, Any] | None:
    # [{"skill": "Readability", "score": 4, "feedback": "..."}, ...] -> {"Readability": {...}}
    result: dict[str, Any] = {}
    for entry in items:
        if not isinstance(entry, Mapping):
            return None
        name = next(
            (v for k, v in entry.items() if isinstance(k, str) and name_key(k) in _NAME_KEYS), None
        )
        if not isinstance(name, str):
            return None
        result[name] = entry
    return result or None


@dataclass
class _Read:
    """Scores read from one source, before the final status is decided."""

    scores: dict[str, int | None] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)
    feedback: dict[str, str] = field(default_factory=dict)

    def put(self, skill: str, accepted: bool, score: int | None, reason: str) -> None:
        # Later values win (a final summary after the running feedback).
        if accepted:
            self.scores[skill] = score
            self.invalid.pop(skill, None)
        else:
            self.invalid[skill] = reason
            self.scores.pop(skill, None)


def _read_object(obj: Any, match: SkillMatcher) -> _Read | None:
    """Scores from a parsed object, or None when it holds no score-like skill entries. The
    scores mapping may be the object itself or nested (e.g. under "scores"); a nested
    "feedback" mapping or per-skill {"score", "feedback"} objects give the feedback."""
    if not isinstance(obj, Mapping):
        return None
    candidates: list[tuple[int, int, Mapping[Any, Any]]] = []  # (rank, order, mapping)
    feedback_maps: list[Mapping[Any, Any]] = []
    queue: list[tuple[Mapping[Any, Any], str, int]] = [(obj, "", 0)]
    while queue:
        current, parent, depth = queue.pop(0)
        parent_norm = name_key(parent)
        skill_values = [v for k, v in current.items() if match(k)]
        if _is_feedback_key(parent):
            feedback_maps.append(current)
        elif skill_values and any(_score_like(v) for v in skill_values):
            rank = 0 if parent_norm in _SCORE_CONTAINERS else (1 if depth == 0 else 2)
            candidates.append((rank, len(candidates), current))
        if depth >= 3:
            continue
        for key, value in current.items():
            if isinstance(value, list):
                value = _list_to_map(value)
            if isinstance(value, Mapping) and not match(key):
                queue.append((value, key if isinstance(key, str) else "", depth + 1))
    if not candidates:
        return None
    scores_map = min(candidates, key=lambda c: (c[0], c[1]))[2]
    read = _Read()
    given: dict[str, tuple[bool, int | None, str]] = {}
    conflicts: set[str] = set()
    for key, value in scores_map.items():
        skill = match(key)
        if skill is None:
            continue
        result = _coerce(value)
        if given.get(skill, result) != result:  # "Readability" and "readability" disagree
            conflicts.add(skill)
        given[skill] = result
        if isinstance(value, Mapping) and (text := _feedback_of(value)):
            read.feedback[skill] = text
    for skill, result in given.items():
        if skill in conflicts:
            read.put(skill, False, None, "given twice with different values")
        else:
            read.put(skill, *result)
    for feedback_map in feedback_maps:
        for key, value in feedback_map.items():
            skill = match(key)
            if skill and isinstance(value, str) and value.strip() and skill not in read.feedback:
                read.feedback[skill] = value.strip()
    return read


def _feedback_of(entry: Mapping[Any, Any]) -> str:
    for key, value in entry.items():
        if isinstance(key, str) and _is_feedback_key(key) and isinstance(value, str):
            return value.strip()
    return ""


def brace_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every balanced {...} span, quote-aware inside braces. A string
    ends at a line break, so an apostrophe in prose cannot hide the rest of the reply."""
    stack: list[int] = []
    spans: list[tuple[int, int]] = []
    quote = ""
    i, size = 0, len(text)
    while i < size:
        char = text[i]
        if quote:
            if char == "\\":
                i += 2
                continue
            if char == quote or char == "\n":
                quote = ""
        elif char == "{":
            stack.append(i)
        elif char == "}":
            if stack:
                spans.append((stack.pop(), i + 1))
        elif char in "\"'" and stack:
            quote = char
        i += 1
    return spans


_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_BARE_NA = re.compile(r"(:\s*)(N/A|NA|n/a|na)(\s*[,}\n])")
_MAX_SPAN = 100_000
_MAX_SPANS_TRIED = 500


def load_object(span: str) -> tuple[Any, Method] | None:
    """json.loads, then ast.literal_eval (a Python dict as FLASK's GPT-4 judge wrote it),
    each retried once with trailing commas dropped and a bare N/A quoted. Never eval."""
    fixed = _BARE_NA.sub(r'\1"N/A"\3', span)
    for attempt in dict.fromkeys((span, _TRAILING_COMMA.sub(r"\1", fixed))):
        try:
            return json.loads(attempt), "json"
        except ValueError:
            pass
    for attempt in dict.fromkeys((span, fixed)):
        try:
            return ast.literal_eval(attempt), "python_dict"
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    return None


def _read_last_object(text: str, match: SkillMatcher) -> tuple[_Read, Method, int] | None:
    """The last well-formed object (by where it ends; outermost first) holding skill scores,
    with how it was parsed and where it starts."""
    spans = sorted(brace_spans(text), key=lambda s: (-s[1], s[0]))
    # Bounded work on pathological replies (deeply nested or brace-heavy code).
    for start, end in spans[:_MAX_SPANS_TRIED]:
        if end - start > _MAX_SPAN or text.find(":", start, end) < 0:
            continue
        loaded = load_object(text[start:end])
        if loaded is None:
            continue
        read = _read_object(loaded[0], match)
        if read is not None:
            return read, loaded[1], start
    return None


_MARKDOWN = re.compile(r"\*\*|__|`")
_LINE_LEAD = re.compile(r"^[\s>#*•+\-]*(?:\d{1,2}[.)]\s+)?")
_SEPARATOR = re.compile(r"\s*(?::|=|\s[-–—]\s)\s*")
_NA_LEAD = re.compile(r"^[\"']?(?:n/a|n\.a\.?|na|not applicable)[\"']?(?=$|[\s.,;:!(\-–—])", re.I)
_SCORE_LEAD = re.compile(
    rf"^[\[(]?[\"']?({_NUMBER})[\"']?\s*(?:(?:/|out of)\s*({_NUMBER}))?\s*[\])]?"
)
_SCORE_TAIL_OK = re.compile(r"^(?:$|[.,;!]|\s*[-–—(:]|\s+$)")
_PAREN_SCORE = re.compile(r"^(.+?)\s*[\[(]([^()\[\]]{1,16})[\])]\s*[.:]?$")
_TRAILING_SCORE = re.compile(r"\b(?:score|rating)\s*(?:[:=]|is)\s*(\S.{0,20}?)\s*$", re.I)
_SCORE_HEADS = frozenset({"score", "rating", "final score", "score given"})


def _line_value(rest: str) -> tuple[bool, int | None, str] | None:
    """A score at the start of `rest` (the part after "Skill:"), or None when `rest` is
    prose. A number may be followed by an explanation after punctuation; a bare "none" or
    "null" counts as N/A only on its own, since "none" also starts sentences."""
    text = _MARKDOWN.sub("", rest).strip()
    if not text:
        return None
    if _NA_LEAD.match(text) or text.strip(".,;!\"' ").casefold() in ("none", "null"):
        return True, None, ""
    match = _SCORE_LEAD.match(text)
    if match is None or not _SCORE_TAIL_OK.match(text[match.end() :]):
        return None
    if match.group(2) is not None and float(match.group(2)) != 5:
        return False, None, f"{match.group(0).strip('[]() ')} is not on the 1-5 scale"
    return _number(match.group(1))


def _read_lines(text: str, match: SkillMatcher) -> tuple[_Read, int]:
    """Scores and feedback from lines: "Skill: 4", "**Skill** - 4/5", "Skill (4)", or a
    "Skill: <name>" / "### <name>" heading followed by a "Score: 4" line. Returns the read
    and how many score lines were found."""
    read = _Read()
    notes: dict[str, list[str]] = {}
    current: str | None = None
    found = 0

    def score(skill: str, value: tuple[bool, int | None, str]) -> None:
        nonlocal found
        found += 1
        read.put(skill, *value)

    for raw in text.splitlines():
        line = _LINE_LEAD.sub("", _MARKDOWN.sub("", raw)).strip()
        if not line or raw.lstrip().startswith("```"):
            continue
        head, rest, skill = line, "", None
        separator = _SEPARATOR.search(line)
        if separator:
            head, rest = line[: separator.start()], line[separator.end() :]
            skill = match(head)
            if skill is None and name_key(head) == "skill":
                skill, rest = match(rest), ""
        if skill is None and match(line):
            skill, rest = match(line), ""
        if skill is None and (paren := _PAREN_SCORE.match(line)):
            paren_skill = match(paren.group(1))
            value = _line_value(paren.group(2)) if paren_skill else None
            if paren_skill and value:
                score(paren_skill, value)
                current = paren_skill
                continue
        if skill is not None:
            current = skill
            value = _line_value(rest)
            if value is None and (trailing := _TRAILING_SCORE.search(rest)):
                value = _line_value(trailing.group(1))
                rest = rest[: trailing.start()]
            elif value is not None:  # keep only the explanation after the value
                bare = _MARKDOWN.sub("", rest).strip()
                lead = _NA_LEAD if _NA_LEAD.match(bare) else _SCORE_LEAD
                bare = lead.sub("", bare, count=1).lstrip(" .,;:!-–—")
                rest = "" if bare.strip(".,;!\"' ").casefold() in ("none", "null") else bare
            if value is not None:
                score(skill, value)
            if rest.strip():
                notes.setdefault(skill, []).append(rest.strip())
            continue
        if current is None:
            continue
        if separator and name_key(head) in _SCORE_HEADS:
            value = _line_value(rest)
            if value is not None:
                score(current, value)
                continue
        if (trailing := _TRAILING_SCORE.search(line)) and (value := _line_value(trailing.group(1))):
            score(current, value)
            line = line[: trailing.start()].strip()
        if line:
            notes.setdefault(current, []).append(line)
    for skill, parts in notes.items():
        body = re.sub(r"^(?:feedback|comment|rationale)\s*:\s*", "", " ".join(parts), flags=re.I)
        if body.strip():
            read.feedback[skill] = body.strip()
    return read, found


def parse_judgment(text: str, skill_names: Sequence[str]) -> ParsedJudgment:
    """Read a judge reply into scores for `skill_names` (the names as asked; keys in the
    reply are matched loosely, see SkillMatcher).

    The last well-formed JSON object or Python dict that holds skill scores wins (anywhere
    in the reply: after prose, inside a code fence, nested under "scores"); only when there
    is none are "Skill: 4" lines read. Sources are never mixed. Values must be whole numbers
    1-5 (4, 4.0, "4", "4/5") or N/A ("N/A", "NA", "n/a", null, None); anything else (4.5,
    0, 7, "4/10") is refused, never rounded or clamped. Status is "ok" when every skill has
    a value, "partial" when some do, "parse_failed" when none does; the caller keeps the raw
    text.
    """
    match = SkillMatcher(skill_names)
    text = text if isinstance(text, str) else ""
    if not text.strip():
        return _finish(_Read(), None, match.names, "the judge returned an empty reply")
    found = _read_last_object(text, match)
    if found is not None:
        read, method, start = found
        prose, _ = _read_lines(text[:start], match)
        for skill, note in prose.feedback.items():
            read.feedback.setdefault(skill, note)
        return _finish(read, method, match.names, "")
    read, count = _read_lines(text, match)
    if count:
        return _finish(read, "lines", match.names, "")
    return _finish(
        read,
        None,
        match.names,
        "no scores found: no JSON object or Python dict with skill names, "
        "and no 'Skill: score' lines",
    )


def _finish(read: _Read, method: Method | None, names: list[str], why: str) -> ParsedJudgment:
    missing = tuple(n for n in names if n not in read.scores)
    invalid = {n: read.invalid[n] for n in names if n in read.invalid}
    details = []
    absent = [n for n in missing if n not in invalid]
    if absent:
        details.append("no score for " + ", ".join(absent))
    details.extend(f"{n}: {reason}" for n, reason in invalid.items())
    if not read.scores:
        status: Status = "parse_failed"
        error = "; ".join(filter(None, [why] + ([] if why else details)))
    elif missing:
        status, error = "partial", "; ".join(details)
    else:
        status, error = "ok", ""
    return ParsedJudgment(
        status=status,
        scores={n: read.scores[n] for n in names if n in read.scores},
        feedback={n: read.feedback[n] for n in names if n in read.feedback},
        method=method,
        error=error,
        missing=missing,
        invalid=invalid,
    )


# --- repair and size ----------------------------------------------------------------------------


def repair_messages(
    original_messages: Sequence[Mapping[str, Any]],
    bad_output: str,
    skill_names: Sequence[str],
    *,
    problem: str = "",
) -> list[dict[str, Any]]:
    """The conversation so far plus a user turn asking for only the final JSON object again.
    The unreadable reply is included as the assistant turn (left out when it was blank,
    which some APIs refuse); `problem` (e.g. ParsedJudgment.error) is quoted to the judge."""
    names = SkillMatcher(skill_names).names
    shape = ", ".join(f'{json.dumps(n)}: <1-5 or "N/A">' for n in names)
    opening = (
        "Your reply was empty."
        if not (bad_output or "").strip()
        else "Your reply could not be read as a complete set of scores"
        + (f" ({problem.strip()})." if problem.strip() else ".")
    )
    request = (
        f"{opening} Keep the judgement you made and do not repeat the feedback. Reply with "
        "only one JSON object, with no other text and no code fence. Its keys must be exactly "
        f"these skill names: {json.dumps(names)}. Each value must be a whole number from 1 to "
        '5, or the string "N/A" when the skill cannot be applied to this instruction at all.\n'
        f"Shape: {{{shape}}}"
    )
    messages = [dict(m) for m in original_messages]
    if (bad_output or "").strip():
        messages.append({"role": "assistant", "content": bad_output})
    messages.append({"role": "user", "content": request})
    return messages
