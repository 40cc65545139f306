"""Judge prompts: render a FLASK-style prompt for one response, read the judge's scores back.

Pure Python: no Django and no project imports, so it is unit-tested without a database and
the same code serves real model clients and the local fake judge. The contract between the
prompt and the parser (what the judge is asked to write, what is accepted back) is described
in docs/JUDGE_PROMPTS.md; keep the two in step.

- `PromptTemplate` holds a system prompt and a user template with the named placeholders
  {instruction} {response} {reference} {skills} (str.format syntax: `{{` and `}}` are literal
  braces). Two built-in templates are written in the project's own words; custom ones come
  from `PromptTemplate.from_text`, and `import_flask_prompt_file` reads the official FLASK
  prompt-file format.
- `render` fills a template by single-pass substitution, so braces or placeholder names
  inside an instruction or a response are copied verbatim and never interpreted.
- `parse_judgment` reads a judge reply into per-skill scores (int 1-5, or None for N/A).
  It never invents, rounds or clamps a score: anything it cannot read exactly is reported.
- `repair_messages` builds the follow-up turn that asks for the final JSON object again.
- `estimate_tokens` is the rough size used for cost estimates.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "BUILTIN_TEMPLATES",
    "CHARS_PER_TOKEN",
    "PLACEHOLDERS",
    "SKILLS_BLOCK_END",
    "SKILLS_BLOCK_START",
    "Judgment",
    "JudgeSkill",
    "PromptError",
    "PromptFileError",
    "PromptTemplate",
    "SYSTEM_PROMPT",
    "TemplateError",
    "builtin_template",
    "estimate_text_tokens",
    "estimate_tokens",
    "import_flask_prompt_file",
    "parse_judgment",
    "render",
    "render_skills_block",
    "repair_messages",
    "skill_names_from_prompt",
]

PLACEHOLDERS: tuple[str, ...] = ("instruction", "response", "reference", "skills")
REQUIRED_PLACEHOLDERS: tuple[str, ...] = ("instruction", "response", "skills")
#: Common names from other prompt formats, offered as a hint in the error message.
_PLACEHOLDER_HINTS = {
    "question": "instruction",
    "query": "instruction",
    "prompt": "instruction",
    "answer": "reference",
    "sample_answer": "reference",
    "reference_answer": "reference",
    "output": "response",
    "rubric": "skills",
    "rubrics": "skills",
}

SKILLS_BLOCK_START = "[Skills to score]"
SKILLS_BLOCK_END = "[End of skills to score]"
#: Bumped whenever render_skills_block's layout changes: it is part of every template's
#: content hash, because the block is part of what the judge reads.
SKILLS_BLOCK_VERSION = 1

CHARS_PER_TOKEN = 4


class PromptError(ValueError):
    """A prompt cannot be built from these inputs."""


class TemplateError(PromptError):
    """A template's text is invalid (unknown, missing or malformed placeholders)."""


class PromptFileError(PromptError):
    """A prompt file has bad lines; `errors` holds (line number, message) for each."""

    def __init__(self, errors: list[tuple[int, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"line {line}: {message}" for line, message in errors))


# --- skills ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeSkill:
    """One skill as the judge sees it: the same wording as the annotator's scoring card."""

    name: str
    criterion: str
    anchors: tuple[str, ...]  # five level descriptions, score 1 (worst) to 5
    checklist: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "anchors", tuple(self.anchors))
        object.__setattr__(self, "checklist", tuple(self.checklist or ()))
        if not isinstance(self.name, str) or not _one_line(self.name):
            raise PromptError("a skill needs a name")
        if len(self.anchors) != 5 or not all(
            isinstance(a, str) and a.strip() for a in self.anchors
        ):
            raise PromptError(f"skill {self.name!r} needs exactly five non-empty score anchors")

    @classmethod
    def of(cls, skill: Any) -> JudgeSkill:
        """A JudgeSkill from a JudgeSkill, a mapping, or any object with the same attributes
        (annotation's TaskSkill, a SkillText plus checklist, ...)."""
        if isinstance(skill, JudgeSkill):
            return skill
        if isinstance(skill, Mapping):
            get = skill.get
        else:

            def get(attr: str, default: Any = None) -> Any:
                return getattr(skill, attr, default)

        return cls(
            name=get("name", ""),
            criterion=get("criterion", "") or "",
            anchors=tuple(get("anchors", ()) or ()),
            checklist=tuple(get("checklist", ()) or ()),
        )


def _one_line(text: str) -> str:
    # The scoring card shows these texts in HTML, where runs of whitespace collapse to one
    # space; the judge gets the same. It also keeps a stray "Skill:" at a line start out of
    # the skills block.
    return " ".join(str(text).split())


def _judge_skills(skills: Iterable[Any]) -> list[JudgeSkill]:
    result = [JudgeSkill.of(s) for s in skills]
    if not result:
        raise PromptError("at least one skill is needed")
    _SkillMatcher([s.name for s in result])  # rejects names a reply could not tell apart
    return result


def render_skills_block(skills: Iterable[Any]) -> str:
    """The {skills} text: a delimited block with, per skill, a `Skill: <name>` line, the
    criterion, the five anchors as `Score 1: ...` to `Score 5: ...`, and the item's checklist."""
    lines = [SKILLS_BLOCK_START]
    for index, skill in enumerate(_judge_skills(skills)):
        if index:
            lines.append("")
        lines.append(f"Skill: {_one_line(skill.name)}")
        if skill.criterion.strip():
            lines.append(f"Criterion: {_one_line(skill.criterion)}")
        lines.extend(
            f"Score {level}: {_one_line(anchor)}" for level, anchor in enumerate(skill.anchors, 1)
        )
        checks = [_one_line(c) for c in skill.checklist if str(c).strip()]
        if checks:
            lines.append("Check for this item:")
            lines.extend(f"- {c}" for c in checks)
    lines.append(SKILLS_BLOCK_END)
    return "\n".join(lines)


def skill_names_from_prompt(prompt: str | Sequence[Mapping[str, Any]]) -> list[str]:
    """The skill names of the first skills block in a rendered prompt (a user message's text,
    or the message list): what a fake judge needs to answer in the expected shape."""
    if not isinstance(prompt, str):
        prompt = "\n".join(
            str(m.get("content") or "") for m in prompt if m.get("role") in ("user", None)
        )
    start = prompt.find(SKILLS_BLOCK_START)
    if start < 0:
        return []
    end = prompt.find(SKILLS_BLOCK_END, start)
    block = prompt[start : end if end >= 0 else len(prompt)]
    return [
        line[len("Skill: ") :].strip() for line in block.splitlines() if line.startswith("Skill: ")
    ]


# --- templates ---------------------------------------------------------------------------------

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _template_fields(text: str, *, allowed: Iterable[str], where: str) -> list[str]:
    """The placeholder names used in `text`, in order; TemplateError listing every problem."""
    allowed = set(allowed)
    found: list[str] = []
    problems: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        line = text.count("\n", 0, match.start()) + 1
        name = match.group(1)
        if name is None:
            problems.append(f"line {line}: lone {token!r}; write {token * 2!r} for a literal brace")
        elif not _IDENT.fullmatch(name):
            problems.append(
                f"line {line}: {token!r} is not a placeholder; placeholders are "
                f"{_fmt_names(PLACEHOLDERS)}, and literal braces are written {{{{ and }}}}"
            )
        elif name not in allowed:
            hint = _PLACEHOLDER_HINTS.get(name)
            hint_text = f" (did you mean {{{hint}}}?)" if hint in allowed else ""
            allowed_text = _fmt_names(sorted(allowed)) if allowed else "none"
            problems.append(
                f"line {line}: unknown placeholder {{{name}}}{hint_text}; allowed: {allowed_text}"
            )
        else:
            found.append(name)
    if problems:
        raise TemplateError(f"{where}: " + "; ".join(problems))
    return found


def _fmt_names(names: Iterable[str]) -> str:
    return ", ".join(f"{{{n}}}" for n in names)


def _substitute(text: str, values: Mapping[str, str]) -> str:
    # One pass over the template: the inserted values are never scanned again, so user text
    # containing "{response}" or unbalanced braces is copied as is.
    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        return values[match.group(1)]

    return _TOKEN.sub(replace, text)


def _escape_braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


@dataclass(frozen=True)
class PromptTemplate:
    """A judge prompt: a fixed system prompt and a user template with named placeholders.

    `user_template` must use {instruction}, {response} and {skills}, and uses {reference}
    exactly when `with_reference` is true. `system_prompt` is sent as is (its doubled braces
    are undoubled) and may use no placeholder. `content_hash` identifies what the judge
    reads: the two texts, the reference flag and the skills-block layout, not key or version.
    """

    key: str
    version: str
    system_prompt: str
    user_template: str
    with_reference: bool
    description: str = ""
    content_hash: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        label = f"template {self.key!r}"
        if not self.key or not str(self.key).strip():
            raise TemplateError("a template needs a key")
        _template_fields(self.system_prompt, allowed=(), where=f"{label}, system prompt")
        used = set(
            _template_fields(self.user_template, allowed=PLACEHOLDERS, where=f"{label}, user")
        )
        missing = [p for p in REQUIRED_PLACEHOLDERS if p not in used]
        if missing:
            raise TemplateError(f"{label}: the user template must contain {_fmt_names(missing)}")
        if self.with_reference and "reference" not in used:
            raise TemplateError(f"{label}: with_reference is set but {{reference}} is not used")
        if not self.with_reference and "reference" in used:
            raise TemplateError(f"{label}: uses {{reference}} but with_reference is not set")
        payload = json.dumps(
            {
                "system": self.system_prompt,
                "user": self.user_template,
                "with_reference": self.with_reference,
                "skills_block": SKILLS_BLOCK_VERSION,
            },
            sort_keys=True,
        )
        object.__setattr__(self, "content_hash", hashlib.sha256(payload.encode()).hexdigest())

    @classmethod
    def from_text(
        cls,
        user_template: str,
        *,
        key: str,
        version: str = "1",
        system_prompt: str | None = None,
        with_reference: bool | None = None,
        description: str = "",
    ) -> PromptTemplate:
        """A custom template; `with_reference` defaults to whether {reference} is used, and
        the system prompt to the built-in one. Raises TemplateError with every problem."""
        if with_reference is None:
            names = _template_fields(user_template, allowed=PLACEHOLDERS, where=f"template {key!r}")
            with_reference = "reference" in names
        return cls(
            key=key,
            version=version,
            system_prompt=SYSTEM_PROMPT if system_prompt is None else system_prompt,
            user_template=user_template,
            with_reference=with_reference,
            description=description,
        )


def render(
    template: PromptTemplate,
    instruction: str,
    response: str,
    skills: Iterable[Any],
    reference: str | None = None,
) -> list[dict[str, str]]:
    """The chat messages [system, user] for one response. `skills` are JudgeSkills or objects
    with name/criterion/anchors/checklist. A template without {reference} ignores
    `reference`; one with it raises PromptError when the reference is missing or blank."""
    if not isinstance(instruction, str) or not isinstance(response, str):
        raise PromptError("instruction and response must be text")
    if template.with_reference and (not isinstance(reference, str) or not reference.strip()):
        raise PromptError(
            f"template {template.key!r} needs a reference answer and this item has none"
        )
    values = {
        "instruction": instruction,
        "response": response,
        "reference": reference or "",
        "skills": render_skills_block(skills),
    }
    return [
        {"role": "system", "content": _substitute(template.system_prompt, {})},
        {"role": "user", "content": _substitute(template.user_template, values)},
    ]


# --- built-in templates (the project's own wording) ---------------------------------------------

SYSTEM_PROMPT = (
    "You are a careful and impartial reviewer of answers written by AI assistants. You score "
    "one response at a time against the rubric given for each skill, you judge every skill on "
    "its own, and you do not let the length or the confident tone of a response stand in for "
    "its quality."
)


def _builtin_user_template(*, with_reference: bool) -> str:
    intro = (
        "Please review the response below, written by an AI assistant for the user's "
        "instruction. Score it on each skill in the block that follows, using only that "
        "skill's criterion and its five score levels. Where a skill has a \"Check for this "
        'item" list, use those points when you apply it.'
    )
    if with_reference:
        intro += (
            " A reference answer written for this instruction is included: use it to check "
            "facts, results and coverage, but do not mark the response down only for wording "
            "or organising things differently."
        )
    reference = "[Reference answer]\n{reference}\n[End of reference answer]\n\n"
    return (
        f"{intro}\n\n"
        "{skills}\n\n"
        "[Instruction]\n{instruction}\n[End of instruction]\n\n"
        f"{reference if with_reference else ''}"
        "[Response to score]\n{response}\n[End of response to score]\n\n"
        "How to answer:\n"
        "1. Go through the skills in the order listed. For each one, start a new line with "
        'the skill name exactly as written after "Skill:", followed by a colon, and give two '
        "to four sentences of feedback that apply its rubric to this response. Keep the "
        "skills apart: a flaw counts against the skill it concerns and not against others.\n"
        "2. Give each skill a whole-number score from 1 (worst) to 5 (best): the level whose "
        "description fits the response best.\n"
        '3. Write "N/A" instead of a number only when a skill cannot be applied to this '
        "instruction at all, for example logical correctness for a request that has no right "
        "or wrong answer. A weak response is not a reason for N/A; it gets a low score.\n"
        "4. End your reply with one JSON object and nothing after it. Its keys are the skill "
        'names exactly as listed and its values are integers from 1 to 5 or the string "N/A", '
        'for example {{"<first skill>": 4, "<second skill>": "N/A"}}.'
    )


BUILTIN_TEMPLATES: dict[str, PromptTemplate] = {
    t.key: t
    for t in (
        PromptTemplate(
            key="flask",
            version="1",
            system_prompt=SYSTEM_PROMPT,
            user_template=_builtin_user_template(with_reference=False),
            with_reference=False,
            description="FLASK-style fine-grained scoring, without the reference answer.",
        ),
        PromptTemplate(
            key="flask-reference",
            version="1",
            system_prompt=SYSTEM_PROMPT,
            user_template=_builtin_user_template(with_reference=True),
            with_reference=True,
            description="FLASK-style fine-grained scoring, with the reference answer.",
        ),
    )
}


def builtin_template(*, with_reference: bool) -> PromptTemplate:
    return BUILTIN_TEMPLATES["flask-reference" if with_reference else "flask"]


# --- the official FLASK prompt-file format ------------------------------------------------------

#: Longest template key stored (judging.models.PromptTemplate.key, a slug).
MAX_KEY_CHARS = 80
_SLUG = re.compile(r"[-a-zA-Z0-9_]+")
#: What no text column takes: NUL, and half of a UTF-16 surrogate pair.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

#: FLASK placeholder -> ours. {prompt1}/{prompt2} (any key of "defaults") are filled in.
_FLASK_PLACEHOLDERS = {
    "question": "instruction",
    "instruction": "instruction",
    "answer": "reference",
    "sample_answer": "reference",
    "reference": "reference",
    "response": "response",
    "skills": "skills",
}


def import_flask_prompt_file(
    text: str, *, key_prefix: str = "flask-file", version: str = "1"
) -> list[PromptTemplate]:
    """Templates from a FLASK review-prompt file: one JSON object per line with `prompt_id`,
    `system_prompt`, `prompt_template` and optional `defaults` (texts for {prompt1}, ...) and
    `description`. {question} becomes {instruction}, {answer} or {sample_answer} becomes
    {reference}. Raises PromptFileError listing every bad line."""
    errors: list[tuple[int, str]] = []
    templates: list[PromptTemplate] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            template = _flask_line(raw, key_prefix=key_prefix, version=version)
        except (PromptError, ValueError) as exc:
            errors.append((number, str(exc)))
            continue
        if template.key in seen:
            errors.append((number, f"prompt_id repeats line {seen[template.key]}"))
            continue
        seen[template.key] = number
        templates.append(template)
    if not templates and not errors:
        errors.append((1, "the file holds no prompt"))
    if errors:
        raise PromptFileError(errors)
    return templates


def _flask_line(raw: str, *, key_prefix: str, version: str) -> PromptTemplate:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise PromptError(f"not valid JSON ({exc.msg} at column {exc.colno})")
    except RecursionError:
        raise PromptError("not valid JSON (nested too deeply)")
    if not isinstance(data, dict):
        raise PromptError("a line must be a JSON object")
    missing = [k for k in ("prompt_id", "system_prompt", "prompt_template") if k not in data]
    if missing:
        raise PromptError(f"missing key(s): {', '.join(missing)}")
    prompt_id = data["prompt_id"]
    if isinstance(prompt_id, bool) or not isinstance(prompt_id, int | str) or prompt_id == "":
        raise PromptError("prompt_id must be a number or a non-empty string")
    longest = MAX_KEY_CHARS - len(key_prefix) - 1
    if not _SLUG.fullmatch(str(prompt_id)) or len(str(prompt_id)) > longest:
        raise PromptError(
            f"prompt_id must be 1-{longest} letters, digits, '-' or '_', not {prompt_id!r}"
        )
    system_prompt, body = data["system_prompt"], data["prompt_template"]
    if not isinstance(system_prompt, str) or not isinstance(body, str):
        raise PromptError("system_prompt and prompt_template must be strings")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in defaults.items()
    ):
        raise PromptError("defaults must be an object of strings")
    description = data.get("description") or ""
    if not isinstance(description, str):
        raise PromptError("description must be a string")
    texts = [("system_prompt", system_prompt), ("prompt_template", body)]
    texts += [("description", description), *((f"defaults[{k!r}]", v) for k, v in defaults.items())]
    for label, text in texts:
        if found := _UNSTORABLE.search(text):  # a database error otherwise
            code = ord(found.group())
            what = "a NUL character" if code == 0 else "half a surrogate pair"
            raise PromptError(f"{label} holds {what} (\\u{code:04x}), which cannot be stored")
    clash = sorted(set(defaults) & set(_FLASK_PLACEHOLDERS))
    if clash:
        raise PromptError(f"defaults may not replace {_fmt_names(clash)}")
    allowed = set(_FLASK_PLACEHOLDERS) | set(defaults)
    used = {
        _FLASK_PLACEHOLDERS.get(n, n)
        for n in _template_fields(body, allowed=allowed, where="prompt_template")
    }
    absent = [
        flask_name
        for flask_name, ours in (
            ("question", "instruction"),
            ("response", "response"),
            ("skills", "skills"),
        )
        if ours not in used
    ]
    if absent:
        raise PromptError(f"prompt_template must contain {_fmt_names(absent)}")

    def translate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return match.group(0)  # "{{" or "}}": stays escaped
        if name in defaults:
            return _escape_braces(defaults[name])
        return "{" + _FLASK_PLACEHOLDERS[name] + "}"

    user_template = _TOKEN.sub(translate, body)
    try:
        return PromptTemplate(
            key=f"{key_prefix}-{prompt_id}",
            version=version,
            system_prompt=_escape_braces(system_prompt),
            user_template=user_template,
            with_reference="{reference}" in user_template,
            description=description,
        )
    except TemplateError as exc:  # only reachable through an odd key_prefix
        raise PromptError(str(exc))


# --- parsing judge output -----------------------------------------------------------------------

Status = Literal["ok", "partial", "parse_failed"]
Method = Literal["json", "python_dict", "lines"]


@dataclass(frozen=True)
class Judgment:
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


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[\W_]+", " ", text.casefold()).split())


_NAME_PREFIXES = ("skill ", "score for ", "score of ", "rating for ", "rating of ")
_NAME_SUFFIXES = (" score", " rating")


class _SkillMatcher:
    """Maps a key written by the judge to the asked skill name: case, spaces, underscores,
    hyphens and markdown do not matter, and a "skill"/"score for" prefix or "score" suffix
    is dropped. Nothing fuzzier: "Correctness" is not "Logical Correctness"."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = list(names)
        if not self.names:
            raise PromptError("at least one skill name is needed")
        self.by_norm: dict[str, str] = {}
        for name in self.names:
            key = _norm(name) if isinstance(name, str) else ""
            if not key:
                raise PromptError(f"invalid skill name {name!r}")
            if key in self.by_norm:
                raise PromptError(f"skill names {self.by_norm[key]!r} and {name!r} are the same")
            self.by_norm[key] = name

    def __call__(self, raw: Any) -> str | None:
        if not isinstance(raw, str):
            return None
        key = _norm(raw)
        if key in self.by_norm:
            return self.by_norm[key]
        for prefix in _NAME_PREFIXES:
            if key.startswith(prefix) and key[len(prefix) :] in self.by_norm:
                return self.by_norm[key[len(prefix) :]]
        for suffix in _NAME_SUFFIXES:
            if key.endswith(suffix) and key[: -len(suffix)] in self.by_norm:
                return self.by_norm[key[: -len(suffix)]]
        return None


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
            if isinstance(key, str) and _norm(key) in _SCORE_KEYS:
                return _coerce(inner)
        return False, None, "no score in this object"
    return False, None, f"{value!r} is not a score"


_SCORE_KEYS = frozenset({"score", "rating", "value", "grade", "points"})
_FEEDBACK_KEYS = frozenset(
    {"feedback", "rationale", "explanation", "reason", "reasoning", "comment", "justification"}
)


def _is_feedback_key(key: str) -> bool:
    key = _norm(key)
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
        return any(isinstance(k, str) and _norm(k) in _SCORE_KEYS for k in value)
    return False


def _list_to_map(items: list[Any]) -> dict[str, Any] | None:
    # [{"skill": "Readability", "score": 4, "feedback": "..."}, ...] -> {"Readability": {...}}
    result: dict[str, Any] = {}
    for entry in items:
        if not isinstance(entry, Mapping):
            return None
        name = next(
            (v for k, v in entry.items() if isinstance(k, str) and _norm(k) in _NAME_KEYS), None
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


def _read_object(obj: Any, match: _SkillMatcher) -> _Read | None:
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
        parent_norm = _norm(parent)
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


def _brace_spans(text: str) -> list[tuple[int, int]]:
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


def _load(span: str) -> tuple[Any, Method] | None:
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


def _read_last_object(text: str, match: _SkillMatcher) -> tuple[_Read, Method, int] | None:
    """The last well-formed object (by where it ends; outermost first) holding skill scores,
    with how it was parsed and where it starts."""
    spans = sorted(_brace_spans(text), key=lambda s: (-s[1], s[0]))
    # Bounded work on pathological replies (deeply nested or brace-heavy code).
    for start, end in spans[:_MAX_SPANS_TRIED]:
        if end - start > _MAX_SPAN or text.find(":", start, end) < 0:
            continue
        loaded = _load(text[start:end])
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


def _read_lines(text: str, match: _SkillMatcher) -> tuple[_Read, int]:
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
            if skill is None and _norm(head) == "skill":
                skill, rest = match(rest), ""
        if skill is None and match(line):
            skill, rest = match(line), ""
        if skill is None and (paren := _PAREN_SCORE.match(line)):
            value = match(paren.group(1)) and _line_value(paren.group(2))
            if value:
                skill = match(paren.group(1))
                score(skill, value)
                current = skill
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
        if separator and _norm(head) in _SCORE_HEADS:
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


def parse_judgment(text: str, skill_names: Sequence[str]) -> Judgment:
    """Read a judge reply into scores for `skill_names` (the names as asked; keys in the
    reply are matched loosely, see _SkillMatcher).

    The last well-formed JSON object or Python dict that holds skill scores wins (anywhere
    in the reply: after prose, inside a code fence, nested under "scores"); only when there
    is none are "Skill: 4" lines read. Sources are never mixed. Values must be whole numbers
    1-5 (4, 4.0, "4", "4/5") or N/A ("N/A", "NA", "n/a", null, None); anything else (4.5,
    0, 7, "4/10") is refused, never rounded or clamped. Status is "ok" when every skill has
    a value, "partial" when some do, "parse_failed" when none does; the caller keeps the raw
    text.
    """
    match = _SkillMatcher(skill_names)
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


def _finish(read: _Read, method: Method | None, names: list[str], why: str) -> Judgment:
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
    return Judgment(
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
    which some APIs refuse); `problem` (e.g. Judgment.error) is quoted to the judge."""
    names = _SkillMatcher(skill_names).names
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


def estimate_text_tokens(text: str) -> int:
    """Rough token count: one token per CHARS_PER_TOKEN (4) characters, rounded up; close to
    real tokenisers on English prose, low on code and non-Latin scripts. For cost estimates
    only, never for enforcing limits."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """Rough prompt size of chat messages: the text estimate of each message plus 4 tokens of
    per-message framing, plus 3 for the reply's start (OpenAI's published chat overhead)."""
    total = 3
    for message in messages:
        content = message.get("content") or ""
        if not isinstance(content, str):  # a list of content parts
            content = "".join(
                str(part.get("text", "")) for part in content if isinstance(part, Mapping)
            )
        total += 4 + estimate_text_tokens(content)
    return total
