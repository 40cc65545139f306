"""The metadata prompt: a model is asked for an instruction's domains, its three most relevant
skills (ranked) and its difficulty on the five FLASK levels, and its answer is read back.

Pure: no Django. The catalogue (skills with their criteria, domains with their sub-domains)
is passed in, so a project's own skills and domains are offered too. The prompt is written
in the project's own words; METADATA_TEMPLATE_VERSION changes whenever its wording does
(the versioned row is a judging.models.PromptTemplate keyed METADATA_TEMPLATE_KEY, with the
content hash of the texts, docs/METADATA.md).

The reader never guesses: an answer with an unknown skill or domain, not exactly three
distinct skills, or a difficulty that is not a whole number 1-5 is parse_failed, and the
raw text is kept by the caller."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import PromptError
from .templates import escape_braces, substitute, template_fields

METADATA_TEMPLATE_KEY = "flask-metadata"
METADATA_TEMPLATE_VERSION = "1"
SKILL_COUNT = 3

# The fake server (devtools/openai_server) finds the catalogue and the instruction between
# these marks; they are part of the wording, so changing them is a new template version.
SKILLS_START = "=== SKILLS ==="
DOMAINS_START = "=== DOMAINS ==="
LEVELS_START = "=== DIFFICULTY LEVELS ==="
INSTRUCTION_START = "=== INSTRUCTION ==="
INSTRUCTION_END = "=== END OF INSTRUCTION ==="
METADATA_MARK = "Describe the instruction with metadata"

DIFFICULTY_LEVELS: tuple[tuple[int, str, str], ...] = (
    (1, "simple lifestyle knowledge", "anyone could answer it from everyday life"),
    (2, "advanced lifestyle knowledge", "it needs some care or experience beyond daily routine"),
    (3, "formal education knowledge", "it needs what a school or first university course teaches"),
    (4, "major level knowledge", "it needs the knowledge of someone who studied the field"),
    (5, "expert level knowledge", "only a specialist of the field could answer it well"),
)

METADATA_SYSTEM_PROMPT = (
    "You help researchers label evaluation instructions. You read one instruction, decide "
    "what it is about, which abilities a good answer needs most and how hard it is, and you "
    "answer with a single JSON object and nothing else."
)

METADATA_USER_TEMPLATE = (
    METADATA_MARK + ": its domains, the three skills a good answer needs most, and its "
    "difficulty. Use only the keys listed below.\n\n"
    + SKILLS_START
    + "\n{skills}\n\n"
    + DOMAINS_START
    + "\n{domains}\n\n"
    + LEVELS_START
    + "\n{levels}\n\n"
    + INSTRUCTION_START
    + "\n{instruction}\n"
    + INSTRUCTION_END
    + "\n\nAnswer with one JSON object of this shape, and nothing else:\n"
    '{{"domains": ["<domain key>"], "skills": ["<most relevant skill key>", "<second>", '
    '"<third>"], "difficulty": <level 1-5>}}\n'
    "List one domain, or more when the instruction plainly belongs to several. List exactly "
    "three different skills, the most relevant first."
)

PLACEHOLDERS = ("skills", "domains", "levels", "instruction")


@dataclass(frozen=True)
class CatalogueSkill:
    key: str
    name: str
    criterion: str = ""


@dataclass(frozen=True)
class CatalogueDomain:
    key: str
    name: str
    subdomains: Sequence[str] = ()


def metadata_messages(
    *,
    instruction: str,
    skills: Sequence[CatalogueSkill],
    domains: Sequence[CatalogueDomain],
    system_prompt: str = METADATA_SYSTEM_PROMPT,
    user_template: str = METADATA_USER_TEMPLATE,
) -> list[dict[str, str]]:
    """The chat messages asking for one instruction's metadata. The instruction is inserted
    in one pass, so braces or marks inside it are copied, never interpreted."""
    if not instruction.strip():
        raise PromptError("the item has no instruction text")
    if len(skills) < SKILL_COUNT:
        raise PromptError(f"the catalogue needs at least {SKILL_COUNT} skills")
    if not domains:
        raise PromptError("the catalogue has no domain")
    template_fields(user_template, allowed=PLACEHOLDERS, where="metadata template")
    values = {
        "skills": "\n".join(
            f"- {s.key}: {s.name}" + (f" — {_one_line(s.criterion)}" if s.criterion else "")
            for s in skills
        ),
        "domains": "\n".join(
            f"- {d.key}: {d.name}"
            + (f" (for example {', '.join(d.subdomains)})" if d.subdomains else "")
            for d in domains
        ),
        "levels": "\n".join(f"{n}: {name} — {text}" for n, name, text in DIFFICULTY_LEVELS),
        "instruction": instruction,
    }
    return [
        {"role": "system", "content": substitute(escape_braces(system_prompt), {})},
        {"role": "user", "content": substitute(user_template, values)},
    ]


def _one_line(text: str) -> str:
    return " ".join(text.split())


# --- reading the answer ------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedMetadata:
    """What a model's answer says, or why it could not be read (`error`; values empty)."""

    domains: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    difficulty: int | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def _json_object(text: str) -> dict[str, Any] | None:
    """The JSON object of an answer: the whole text, a fenced block, or the span from the
    first "{" to the last "}"."""
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _matcher(entries: Sequence[CatalogueSkill] | Sequence[CatalogueDomain]) -> dict[str, str]:
    """Key or name (any case, spaces or underscores for hyphens) -> key."""
    table: dict[str, str] = {}
    for entry in entries:
        for spelling in (entry.key, entry.name):
            table[_norm(spelling)] = entry.key
    return table


def _norm(value: str) -> str:
    return re.sub(r"[\s_\-]+", "-", value.strip().lower())


def _keys(value: Any, table: dict[str, str], what: str) -> tuple[list[str], str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        return [], f"{what} must be a non-empty list"
    keys: list[str] = []
    for entry in value:
        if not isinstance(entry, str):
            return [], f"{what} must be names, not {entry!r}"
        key = table.get(_norm(entry))
        if key is None:
            return [], f"unknown {what[:-1]} {entry!r}"
        if key in keys:
            return [], f"{what[:-1]} {entry!r} is listed twice"
        keys.append(key)
    return keys, ""


def parse_metadata(
    text: str, *, skills: Sequence[CatalogueSkill], domains: Sequence[CatalogueDomain]
) -> ParsedMetadata:
    """Read a model's answer to metadata_messages."""
    data = _json_object(text or "")
    if data is None:
        return ParsedMetadata(error="no JSON object in the answer")
    lowered = {str(k).strip().lower(): v for k, v in data.items()}
    missing = [k for k in ("domains", "skills", "difficulty") if k not in lowered]
    if missing:
        return ParsedMetadata(error="missing " + ", ".join(missing))
    domain_keys, problem = _keys(lowered["domains"], _matcher(domains), "domains")
    if problem:
        return ParsedMetadata(error=problem)
    skill_keys, problem = _keys(lowered["skills"], _matcher(skills), "skills")
    if problem:
        return ParsedMetadata(error=problem)
    if len(skill_keys) != SKILL_COUNT:
        return ParsedMetadata(error=f"{len(skill_keys)} skills given; {SKILL_COUNT} asked")
    difficulty = lowered["difficulty"]
    if isinstance(difficulty, bool) or not isinstance(difficulty, int) or not 1 <= difficulty <= 5:
        return ParsedMetadata(error=f"difficulty {difficulty!r} is not a level 1-5")
    return ParsedMetadata(domains=domain_keys, skills=skill_keys, difficulty=difficulty)


def instruction_of(prompt: str) -> str | None:
    """The instruction of a metadata prompt (the user message), or None if it is not one."""
    if METADATA_MARK not in prompt or INSTRUCTION_START not in prompt:
        return None
    start = prompt.index(INSTRUCTION_START) + len(INSTRUCTION_START) + 1
    end = prompt.rfind(INSTRUCTION_END)
    return prompt[start : end - 1] if end > start else None


def catalogue_keys_of(prompt: str) -> tuple[list[str], list[str]]:
    """The skill and domain keys a metadata prompt offers, in order."""

    def block(start: str, stop: str) -> list[str]:
        if start not in prompt:
            return []
        body = prompt.split(start, 1)[1].split(stop, 1)[0]
        return re.findall(r"^- ([^:\s]+):", body, re.MULTILINE)

    return block(SKILLS_START, DOMAINS_START), block(DOMAINS_START, LEVELS_START)
