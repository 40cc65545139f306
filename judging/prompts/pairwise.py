"""Pairwise judging, pure parts: the built-in prompt (the project's own wording), the reply
parser, and the position-consistency analysis. No Django here.

A pair is a *challenger* response and the *anchor* model's response to the same item. It is
asked in both orders: order 0 shows the challenger as "Response 1", order 1 shows the anchor
first. Verdicts are stored in terms of challenger/anchor, so the two orders of one pair can
be compared directly: a judge that is not swayed by position gives the same verdict both
times (Zheng et al. 2023 call the other case position bias; FLAMe reports it too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import PromptError
from .names import SkillMatcher, name_key
from .parse import brace_spans, load_object
from .skills import render_skills_block
from .templates import substitute

OVERALL = "Overall"
FIRST_MARK, FIRST_END = "[Response 1]", "[End of response 1]"
SECOND_MARK, SECOND_END = "[Response 2]", "[End of response 2]"

PAIR_SYSTEM_PROMPT = (
    "You are a careful and impartial reviewer of answers written by AI assistants. You compare "
    "two responses to the same instruction, one skill at a time. The order in which the two "
    "responses are shown says nothing about their quality, and neither does their length: "
    "judge what they say."
)


def _pair_user_template(*, with_reference: bool) -> str:
    intro = (
        "Please compare the two responses below, written by AI assistants for the same "
        "instruction. For each skill in the block that follows, decide which response is "
        "better on that skill alone, using its criterion and score levels; then decide which "
        "response is better overall."
    )
    if with_reference:
        intro += (
            " A reference answer is included: use it to check facts, results and coverage, "
            "not wording."
        )
    reference = "[Reference answer]\n{reference}\n[End of reference answer]\n\n"
    return (
        f"{intro}\n\n"
        "{skills}\n\n"
        "[Instruction]\n{instruction}\n[End of instruction]\n\n"
        f"{reference if with_reference else ''}"
        f"{FIRST_MARK}\n{{first}}\n{FIRST_END}\n\n"
        f"{SECOND_MARK}\n{{second}}\n{SECOND_END}\n\n"
        "How to answer:\n"
        "1. Go through the skills in the order listed; for each, one or two sentences on how "
        "the two responses differ on it.\n"
        "2. End your reply with one JSON object and nothing after it. Its keys are the skill "
        f'names exactly as listed, plus "{OVERALL}". Each value is "1" when Response 1 is '
        'better, "2" when Response 2 is better, or "tie" when neither is, for example '
        f'{{{{"<first skill>": "2", "{OVERALL}": "tie"}}}}.'
    )


@dataclass(frozen=True)
class PairTemplate:
    key: str
    version: str
    system_prompt: str
    user_template: str
    with_reference: bool


PAIR_TEMPLATES = {
    t.key: t
    for t in (
        PairTemplate(
            "pairwise", "1", PAIR_SYSTEM_PROMPT, _pair_user_template(with_reference=False), False
        ),
        PairTemplate(
            "pairwise-reference",
            "1",
            PAIR_SYSTEM_PROMPT,
            _pair_user_template(with_reference=True),
            True,
        ),
    )
}


def pair_template(*, with_reference: bool) -> PairTemplate:
    return PAIR_TEMPLATES["pairwise-reference" if with_reference else "pairwise"]


def render_pair(
    template: PairTemplate,
    *,
    instruction: str,
    first: str,
    second: str,
    skills: Iterable[Any],
    reference: str | None = None,
) -> list[dict[str, str]]:
    """The chat messages [system, user] for one pair in one order."""
    if template.with_reference and not (isinstance(reference, str) and reference.strip()):
        raise PromptError(
            f"template {template.key!r} needs a reference answer and this item has none"
        )
    values = {
        "instruction": instruction,
        "first": first,
        "second": second,
        "reference": reference or "",
        "skills": render_skills_block(skills),
    }
    return [
        {"role": "system", "content": template.system_prompt},
        {"role": "user", "content": substitute(template.user_template, values)},
    ]


# --- reading a reply --------------------------------------------------------------------------

Choice = Literal["1", "2", "tie"]
_FIRST_WORDS = frozenset({"1", "response 1", "first", "a", "response a", "1st"})
_SECOND_WORDS = frozenset({"2", "response 2", "second", "b", "response b", "2nd"})
_TIE_WORDS = frozenset({"tie", "equal", "draw", "same", "both", "neither", "0", "none"})


def _choice(value: Any) -> Choice | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and value in (1, 2, 0):
        return "tie" if value == 0 else ("1" if value == 1 else "2")
    if not isinstance(value, str):
        return None
    key = name_key(value)
    if key in _FIRST_WORDS:
        return "1"
    if key in _SECOND_WORDS:
        return "2"
    if key in _TIE_WORDS:
        return "tie"
    return None


@dataclass(frozen=True)
class PairReading:
    status: Literal["ok", "partial", "parse_failed"]
    choices: dict[str, Choice]  # skill name or OVERALL -> "1" / "2" / "tie"
    method: str = ""
    error: str = ""
    missing: tuple[str, ...] = field(default=())


_LINE = re.compile(
    r"^[\s>#*•+\-]*(?P<name>[^:\n]{1,80}?)\s*[:=]\s*[\"'\[]*(?P<value>[^\"'\]\n,.;]{1,20})"
)


def parse_pair(text: str, skills: Sequence[str]) -> PairReading:
    """The verdicts of a pairwise reply: the last JSON (or Python-dict) object naming the
    skills, else `Skill: 1` lines. A verdict that is not 1, 2 or a tie word is not read."""
    names = [*skills, OVERALL]
    match = SkillMatcher(names)
    if not isinstance(text, str) or not text.strip():
        return PairReading("parse_failed", {}, error="empty reply", missing=tuple(names))
    found: dict[str, Choice] = {}
    method = ""
    for start, end in sorted(brace_spans(text), key=lambda s: (-s[1], s[0]))[:200]:
        loaded = load_object(text[start:end])
        if loaded is None or not isinstance(loaded[0], Mapping):
            continue
        read = {}
        for key, value in loaded[0].items():
            name = match(key)
            if name is not None and (choice := _choice(value)) is not None:
                read[name] = choice
        if read:
            found, method = read, loaded[1]
            break
    if not found:
        for line in text.splitlines():
            m = _LINE.match(line)
            if m and (name := match(m.group("name"))) and (choice := _choice(m.group("value"))):
                found[name] = choice
        method = "lines" if found else ""
    missing = tuple(n for n in names if n not in found)
    if not found:
        return PairReading("parse_failed", {}, error="no verdicts found", missing=missing)
    return PairReading("partial" if missing else "ok", found, method, missing=missing)


# --- orders and consistency -------------------------------------------------------------------

CHALLENGER, ANCHOR, TIE = "challenger", "anchor", "tie"


def to_verdicts(choices: Mapping[str, Choice], order: int) -> dict[str, str]:
    """ "1"/"2" as shown in `order` -> challenger/anchor (order 0: the challenger was shown
    first)."""
    first, second = (CHALLENGER, ANCHOR) if order == 0 else (ANCHOR, CHALLENGER)
    return {name: {"1": first, "2": second, "tie": TIE}[c] for name, c in choices.items()}


def first_position(verdict: str, order: int) -> str:
    """Which position a verdict favoured: "first", "second" or "tie"."""
    if verdict == TIE:
        return "tie"
    shown_first = CHALLENGER if order == 0 else ANCHOR
    return "first" if verdict == shown_first else "second"


@dataclass(frozen=True)
class ConsistencyRow:
    """One skill (or Overall) over a run's pairs."""

    name: str
    pairs: int  # pairs with a verdict in both orders
    consistent: int
    challenger_wins: int  # consistent verdicts only
    anchor_wins: int
    ties: int
    first_position: int  # verdicts (of both orders) that favoured the response shown first
    second_position: int

    @property
    def inconsistent(self) -> int:
        return self.pairs - self.consistent

    @property
    def inconsistency_rate(self) -> float | None:
        return self.inconsistent / self.pairs if self.pairs else None

    @property
    def first_position_share(self) -> float | None:
        decided = self.first_position + self.second_position
        return self.first_position / decided if decided else None

    @property
    def challenger_win_rate(self) -> float | None:
        return self.challenger_wins / self.consistent if self.consistent else None


def consistency(
    pairs: Iterable[tuple[Mapping[str, str], Mapping[str, str]]], names: Sequence[str]
) -> list[ConsistencyRow]:
    """Per name, from (verdicts in order 0, verdicts in order 1) of each pair."""
    rows = []
    pairs = list(pairs)
    for name in names:
        both = consistent = won = lost = tied = first = second = 0
        for order0, order1 in pairs:
            for order, verdicts in ((0, order0), (1, order1)):
                if name in verdicts:
                    position = first_position(verdicts[name], order)
                    first += position == "first"
                    second += position == "second"
            if name not in order0 or name not in order1:
                continue
            both += 1
            if order0[name] == order1[name]:
                consistent += 1
                won += order0[name] == CHALLENGER
                lost += order0[name] == ANCHOR
                tied += order0[name] == TIE
        rows.append(ConsistencyRow(name, both, consistent, won, lost, tied, first, second))
    return rows
