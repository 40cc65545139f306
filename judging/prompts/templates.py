"""Templates and rendering: the template syntax and its checks (TemplateText), single-pass
rendering of the chat messages, the two built-in templates in the project's own words, and
the rough token estimate used for costs."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import PromptError, TemplateError
from .skills import SKILLS_BLOCK_VERSION, render_skills_block

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

CHARS_PER_TOKEN = 4


# --- templates ---------------------------------------------------------------------------------

TEMPLATE_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def template_fields(text: str, *, allowed: Iterable[str], where: str) -> list[str]:
    """The placeholder names used in `text`, in order; TemplateError listing every problem."""
    allowed = set(allowed)
    found: list[str] = []
    problems: list[str] = []
    for match in TEMPLATE_TOKEN.finditer(text):
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
                f"{placeholder_list(PLACEHOLDERS)}, and literal braces are written {{{{ and }}}}"
            )
        elif name not in allowed:
            hint = _PLACEHOLDER_HINTS.get(name)
            hint_text = f" (did you mean {{{hint}}}?)" if hint in allowed else ""
            allowed_text = placeholder_list(sorted(allowed)) if allowed else "none"
            problems.append(
                f"line {line}: unknown placeholder {{{name}}}{hint_text}; allowed: {allowed_text}"
            )
        else:
            found.append(name)
    if problems:
        raise TemplateError(f"{where}: " + "; ".join(problems))
    return found


def placeholder_list(names: Iterable[str]) -> str:
    return ", ".join(f"{{{n}}}" for n in names)


def substitute(text: str, values: Mapping[str, str]) -> str:
    # One pass over the template: the inserted values are never scanned again, so user text
    # containing "{response}" or unbalanced braces is copied as is.
    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        return values[match.group(1)]

    return TEMPLATE_TOKEN.sub(replace, text)


def escape_braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


@dataclass(frozen=True)
class TemplateText:
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
        template_fields(self.system_prompt, allowed=(), where=f"{label}, system prompt")
        used = set(
            template_fields(self.user_template, allowed=PLACEHOLDERS, where=f"{label}, user")
        )
        missing = [p for p in REQUIRED_PLACEHOLDERS if p not in used]
        if missing:
            raise TemplateError(
                f"{label}: the user template must contain {placeholder_list(missing)}"
            )
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
    ) -> TemplateText:
        """A custom template; `with_reference` defaults to whether {reference} is used, and
        the system prompt to the built-in one. Raises TemplateError with every problem."""
        if with_reference is None:
            names = template_fields(user_template, allowed=PLACEHOLDERS, where=f"template {key!r}")
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
    template: TemplateText,
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
        {"role": "system", "content": substitute(template.system_prompt, {})},
        {"role": "user", "content": substitute(template.user_template, values)},
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


BUILTIN_TEMPLATES: dict[str, TemplateText] = {
    t.key: t
    for t in (
        TemplateText(
            key="flask",
            version="1",
            system_prompt=SYSTEM_PROMPT,
            user_template=_builtin_user_template(with_reference=False),
            with_reference=False,
            description="FLASK-style fine-grained scoring, without the reference answer.",
        ),
        TemplateText(
            key="flask-reference",
            version="1",
            system_prompt=SYSTEM_PROMPT,
            user_template=_builtin_user_template(with_reference=True),
            with_reference=True,
            description="FLASK-style fine-grained scoring, with the reference answer.",
        ),
    )
}


def builtin_template(*, with_reference: bool) -> TemplateText:
    return BUILTIN_TEMPLATES["flask-reference" if with_reference else "flask"]


# --- size ---------------------------------------------------------------------------------------


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
