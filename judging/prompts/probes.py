"""Bias probes, pure parts: how each probe changes what a judge reads (docs/JUDGE_TRUST.md,
"Bias probes"). A probe run asks the same judge about the same responses as its base run
with one thing changed; these functions make that change. The texts are the project's own
wording and are kept here, in one place, so the report can show exactly what was added.

Pointwise probes (on a pointwise base run):
- `pad`: the response, then a blank line and a closing paragraph that restates the
  response's first sentence (PAD_TEMPLATE): longer, with nothing new in it;
- `truncate`: the response cut after a share of its words (`share`, default 0.5);
- `reference`: the reference answer taken out of a template that shows it, or put into
  one that does not (reference_template);
- `rubric_order`: the item's skills listed in another order (`order`: "reverse", the
  default, or "rotate": the first skill moved to the end);
- `names_shown`: the response headed by the line "Response from <model>:" (NAMES_TEMPLATE).

Pairwise probes (on a pairwise base run):
- `bandwagon`: after the two responses, the line BANDWAGON_TEMPLATE naming the response the
  base run did *not* prefer overall in that order (`target`: "unpreferred", the default, or
  a fixed "1" / "2"); on a tie or a missing base verdict, Response 2;
- `distraction`: DISTRACTIONS[`sentence`] (default 0) added as a last paragraph of the
  challenger's response (`target`: "challenger", the default, or "anchor").
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from .errors import PromptError
from .templates import TemplateText, escape_braces

POINTWISE = ("pad", "truncate", "reference", "rubric_order", "names_shown")
PAIRWISE = ("bandwagon", "distraction")

PAD_TEMPLATE = (
    "To restate the main point of this answer once more: {first} This closing paragraph "
    "only repeats what is written above and adds nothing new to it."
)
NAMES_TEMPLATE = "Response from {model}:"
BANDWAGON_TEMPLATE = "Most people who compared these two responses preferred Response {n}."
#: Sentences that have nothing to do with any instruction (the distraction probe).
DISTRACTIONS: tuple[str, ...] = (
    "Incidentally, the coast redwood is the tallest kind of tree known to grow today.",
    "On an unrelated note, honey kept in a sealed jar can stay edible for many years.",
    "As an aside, a day on the planet Venus lasts longer than its year.",
)
REFERENCE_BLOCK = "[Reference answer]\n{reference}\n[End of reference answer]\n\n"
RESPONSE_MARK = "[Response to score]"
DEFAULT_SHARE = 0.5
#: The largest number of responses a probe may sample (probe_params["limit"]).
MAX_LIMIT = 100_000

_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")


# --- parameters ---------------------------------------------------------------------------------


def clean_params(kind: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """The probe's parameters, checked, with defaults filled in. PromptError names the
    problem (unknown kind, unknown key, a value out of range)."""
    params = dict(params or {})
    if kind not in POINTWISE + PAIRWISE:
        raise PromptError(f"unknown probe {kind!r}; known: {', '.join(POINTWISE + PAIRWISE)}")
    allowed = {
        "pad": set(),
        "truncate": {"share"},
        "reference": set(),
        "rubric_order": {"order"},
        "names_shown": set(),
        "bandwagon": {"target"},
        "distraction": {"target", "sentence"},
    }[kind] | {"limit"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise PromptError(f"probe {kind!r} takes no parameter {', '.join(map(repr, unknown))}")
    clean: dict[str, Any] = {}
    if params.get("limit") not in (None, ""):
        clean["limit"] = _integer(params["limit"], "limit", 1, MAX_LIMIT)
    if kind == "truncate":
        share = params.get("share", DEFAULT_SHARE)
        if isinstance(share, bool) or not isinstance(share, int | float):
            raise PromptError("share must be a number between 0 and 1 (0.5 keeps half the words)")
        if not (0 < share < 1) or not math.isfinite(share):
            raise PromptError("share must be between 0 and 1, both excluded")
        clean["share"] = float(share)
    if kind == "rubric_order":
        order = params.get("order", "reverse")
        if order not in ("reverse", "rotate"):
            raise PromptError('order must be "reverse" or "rotate"')
        clean["order"] = order
    if kind == "bandwagon":
        target = str(params.get("target", "unpreferred"))
        if target not in ("unpreferred", "1", "2"):
            raise PromptError('target must be "unpreferred", "1" or "2"')
        clean["target"] = target
    if kind == "distraction":
        target = params.get("target", "challenger")
        if target not in ("challenger", "anchor"):
            raise PromptError('target must be "challenger" or "anchor"')
        clean["target"] = target
        clean["sentence"] = _integer(
            params.get("sentence", 0), "sentence", 0, len(DISTRACTIONS) - 1
        )
    return clean


def _integer(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise PromptError(f"{name} must be a whole number from {low} to {high}")
    return int(value)


def probe_texts(kind: str, params: Mapping[str, Any]) -> list[str]:
    """What the probe adds or changes, in words, for the report."""
    if kind == "pad":
        return [PAD_TEMPLATE.replace("{first}", "<the response's first sentence>")]
    if kind == "truncate":
        share = params.get("share", DEFAULT_SHARE)
        return [f"the response cut after {share:.0%} of its words"]
    if kind == "reference":
        return ["the reference answer taken out (or put in, for a judge that does not use it)"]
    if kind == "rubric_order":
        order = params.get("order", "reverse")
        return [
            "the skills in reverse order" if order == "reverse" else "the skills rotated by one"
        ]
    if kind == "names_shown":
        return [NAMES_TEMPLATE.replace("{model}", "<model name>")]
    if kind == "bandwagon":
        target = params.get("target", "unpreferred")
        n = "<the response the base run did not prefer>" if target == "unpreferred" else target
        return [BANDWAGON_TEMPLATE.replace("{n}", n)]
    if kind == "distraction":
        return [DISTRACTIONS[params.get("sentence", 0)]]
    return []


# --- the transforms -----------------------------------------------------------------------------


def first_sentence(text: str) -> str:
    """The text up to the end of its first sentence (or first line), at most 300 chars."""
    stripped = text.strip()
    match = _SENTENCE_END.search(stripped)
    sentence = stripped[: match.start()] if match else stripped
    sentence = " ".join(sentence.split())[:300]
    if sentence and sentence[-1] not in ".!?":
        sentence += "."
    return sentence


def pad(text: str) -> str:
    """The response and a closing paragraph restating its first sentence."""
    first = first_sentence(text)
    if not first:
        return text
    return f"{text.rstrip()}\n\n{PAD_TEMPLATE.replace('{first}', first)}"


def truncate(text: str, share: float = DEFAULT_SHARE) -> str:
    """The response up to the end of its ceil(share x words)-th word (layout kept)."""
    words = list(_WORD.finditer(text))
    if not words:
        return text
    keep = max(1, math.ceil(len(words) * share))
    return text[: words[keep - 1].end()]


def names_shown(text: str, model: str) -> str:
    """The response headed by its model's name."""
    header = NAMES_TEMPLATE.replace("{model}", " ".join(str(model).split()))
    return f"{header}\n\n{text}"


def distraction(text: str, sentence: int = 0) -> str:
    """The response with an irrelevant sentence as its last paragraph."""
    return f"{text.rstrip()}\n\n{DISTRACTIONS[sentence]}"


T = TypeVar("T")


def reorder(skills: Sequence[T], order: str = "reverse") -> list[T]:
    """The skills in another order: reversed, or rotated (the first moved to the end)."""
    items = list(skills)
    if order == "rotate":
        return items[1:] + items[:1]
    return items[::-1]


def reference_template(template: TemplateText, counterpart: TemplateText | None) -> TemplateText:
    """The template with the reference answer taken out (if it shows one) or put in (if
    not). `counterpart` is the built-in template of the other kind when `template` is a
    built-in one (the wording made for that case); a custom template with {reference} gets
    it removed with the block's lines around it where they are the built-in block's, and
    one without gets REFERENCE_BLOCK just before the line holding {response}."""
    if counterpart is not None and counterpart.with_reference != template.with_reference:
        return counterpart
    user = template.user_template
    if template.with_reference:
        if REFERENCE_BLOCK in user:
            user = user.replace(REFERENCE_BLOCK, "")
        else:
            user = user.replace("{reference}", escape_braces("(no reference answer is given)"))
        return replace(
            template, key=f"{template.key}-probe", user_template=user, with_reference=False
        )
    at = user.find("{response}")
    line_start = user.rfind("\n", 0, at) + 1
    if RESPONSE_MARK in user[:at]:
        line_start = user.rfind("\n", 0, user.rfind(RESPONSE_MARK, 0, at)) + 1
    user = user[:line_start] + REFERENCE_BLOCK + user[line_start:]
    return replace(template, key=f"{template.key}-probe", user_template=user, with_reference=True)


def bandwagon_line(*, target: str, order: int, base_overall: str | None) -> str:
    """The bandwagon line for one order of a pair. `base_overall` is the base run's
    Overall verdict for that order ("challenger", "anchor", "tie" or None)."""
    if target in ("1", "2"):
        n = target
    else:
        # the position of the response the base run did not prefer
        challenger_first = order == 0
        if base_overall == "challenger":
            n = "2" if challenger_first else "1"
        elif base_overall == "anchor":
            n = "1" if challenger_first else "2"
        else:
            n = "2"
    return BANDWAGON_TEMPLATE.replace("{n}", n)


def with_note_after_responses(user_template: str, note: str, second_end: str) -> str:
    """A pair template with `note` as its own paragraph right after the second response
    (inserted into the template, so a response's text is never searched)."""
    mark = f"{second_end}\n\n"
    if mark not in user_template:
        raise PromptError("the pair template has no end-of-second-response mark")
    return user_template.replace(mark, f"{mark}{escape_braces(note)}\n\n", 1)
