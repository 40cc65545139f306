"""What the fake judge answers: token counts, the skills a prompt asks for, and the
deterministic scores, pair verdicts and reply styles (docs/OPENAI_SERVER.md). Pure: no
network, no state."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from judging.prompts import metadata, probes
from judging.prompts.pairwise import FIRST_END, FIRST_MARK, SECOND_END, SECOND_MARK
from judging.prompts.pairwise import OVERALL as PAIR_OVERALL

NA = "N/A"
FLASK_SKILLS: tuple[str, ...] = (
    "Logical Robustness",
    "Logical Correctness",
    "Logical Efficiency",
    "Factuality",
    "Commonsense Understanding",
    "Comprehension",
    "Insightfulness",
    "Completeness",
    "Metacognition",
    "Conciseness",
    "Readability",
    "Harmlessness",
)
STYLES: tuple[str, ...] = ("json", "python_dict", "lines")
MAX_SKILLS = 32


# --------------------------------------------------------------------------------------------
# Tokens
# --------------------------------------------------------------------------------------------

_WORD = re.compile(r"\S+")


def count_tokens(text: str) -> int:
    """Approximate token count: each whitespace-separated word costs ceil(len(word) / 4)."""
    return sum((len(word) + 3) // 4 for word in _WORD.findall(text))


def truncate_tokens(text: str, limit: int) -> str:
    """The longest prefix of `text` whose `count_tokens` is at most `limit`."""
    used = 0
    for match in _WORD.finditer(text):
        cost = (len(match.group()) + 3) // 4
        if used + cost > limit:
            return text[: match.start() + 4 * (limit - used)].rstrip()
        used += cost
    return text


def message_text(content: Any) -> str:
    """The text of one message's `content`: a string, or a list of OpenAI content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]
        return "\n".join(parts)
    return ""


def prompt_tokens_of(messages: Sequence[Mapping[str, Any]]) -> int:
    """`usage.prompt_tokens`: 3 + for every message 4 + count_tokens(its text)."""
    return 3 + sum(4 + count_tokens(message_text(m.get("content"))) for m in messages)


def prompt_text_of(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text scores are keyed on: the content of the last user message ("" if none)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return message_text(message.get("content"))
    return ""


# --------------------------------------------------------------------------------------------
# Skill detection
# --------------------------------------------------------------------------------------------

_CANONICAL = {skill.lower(): skill for skill in FLASK_SKILLS}
_NAMES_ALT = "|".join(re.escape(s) for s in sorted(FLASK_SKILLS, key=len, reverse=True))
# `Skills: a, b, c` / `Skill: a` / `"skills": [...]` / `**Skills:** ...`, at the start of a line.
_SKILL_LINE = re.compile(r"^\W*skill(s)?\W*?\s*[:=]\s*(.*?)\s*$", re.IGNORECASE)
# A FLASK skill name heading a line, as in a rubric: `Logical Correctness: Is the ...`.
_HEADER = re.compile(
    rf"^[\s>#*_\-•+\[(\d.)]*({_NAMES_ALT})\b[*_\])]*\s*(?:[:\-–—(]|$)",
    re.IGNORECASE,
)
_ANYWHERE = re.compile(rf"\b({_NAMES_ALT})\b")
_BULLET = re.compile(r"^\s*(?:[-*•+]|\d+[.)])\s+(.+?)\s*$")


def canonical_skill(name: str) -> str:
    """A FLASK skill's official spelling when `name` is one of them (any case), else `name`."""
    return _CANONICAL.get(name.strip().lower(), name.strip())


def _dedupe(names: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for name in names:
        seen.setdefault(name, None)
    return list(seen)[:MAX_SKILLS]


def _clean_name(raw: str) -> str:
    name = raw.strip().strip("\"'`*_").strip().rstrip(".").strip()
    return canonical_skill(name) if 0 < len(name) <= 100 else ""


def _split_names(value: str) -> list[str]:
    value = value.strip().rstrip(",").strip()
    items: list[str]
    if value.startswith("["):
        if "]" in value:
            value = value[: value.index("]") + 1]
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            items = [item for item in parsed if isinstance(item, str)]
        else:
            items = re.split(r"[,;]", value.strip("[]"))
    else:
        items = re.split(r"[,;]", value)
    return [name for name in map(_clean_name, items) if name]


def _names_after(value: str, following: list[str]) -> list[str]:
    """The names of a `Skills:` line; its list may continue on the next lines."""
    if value.startswith("[") and "]" not in value:
        for line in following[:50]:
            value += " " + line.strip()
            if "]" in line:
                break
        return _split_names(value)
    if value:
        return _split_names(value)
    names: list[str] = []
    for line in following[: MAX_SKILLS + 1]:
        bullet = _BULLET.match(line)
        if not bullet:
            if names or line.strip():
                break
            continue
        name = _clean_name(re.split(r":| - | – ", bullet.group(1), maxsplit=1)[0])
        if name:
            names.append(name)
    return names


def _anchored_skills(text: str) -> list[str]:
    """The skills of one text by its first anchor line (see `detect_skills`), or []."""
    lines = text.splitlines()
    mode = None
    names: list[str] = []
    for i, line in enumerate(lines):
        explicit = _SKILL_LINE.match(line)
        if explicit and mode in (None, "single"):
            plural, value = explicit.groups()
            if plural and mode is None:
                listed = _names_after(value, lines[i + 1 :])
                if listed:
                    return _dedupe(listed)
            elif not plural and value:
                mode = "single"
                names.extend(_split_names(value))
            continue
        header = _HEADER.match(line)
        if header and mode in (None, "header"):
            mode = "header"
            names.append(canonical_skill(header.group(1)))
    return _dedupe(names)


def detect_skills(texts: str | Sequence[str]) -> list[str]:
    """The skills a judge prompt asks for, in order, searched in `texts` (one or several).

    Each text in turn, until one yields skills, is read from its first *anchor* line:
    - a `Skills: a, b, c` line (also a JSON list, `"skills": [...]`, or a bulleted list under
      an empty `Skills:`): exactly those names;
    - a `Skill: <name>` line: the names of all `Skill:` lines of the text;
    - a line headed by a FLASK skill (`Logical Correctness: ...`, `- Readability (...)`):
      all FLASK skills heading lines of the text.
    What comes after the first anchor cannot change the mode, so a `Skills:` line inside the
    item's text does not override a rubric above it. Names may be anything; the 12 FLASK
    skills are spelled canonically whatever their case. Without any anchor in any text: the
    FLASK skills written anywhere in Title Case, in order of appearance.
    """
    texts = [texts] if isinstance(texts, str) else list(texts)
    for text in texts:
        names = _anchored_skills(text)
        if names:
            return names
    return _dedupe(canonical_skill(m.group(1)) for t in texts for m in _ANYWHERE.finditer(t))


def detect_skills_in_messages(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """`detect_skills` over the last user message, then the system/developer messages, then
    the earlier user messages (latest first); assistant and tool messages are ignored."""
    users = [m for m in messages if m.get("role") == "user"]
    systems = [m for m in messages if m.get("role") in ("system", "developer")]
    ordered = users[-1:] + systems + users[-2::-1]
    return detect_skills([message_text(m.get("content")) for m in ordered])


# --------------------------------------------------------------------------------------------
# Scores and answers
# --------------------------------------------------------------------------------------------

# Base score from a hash: 1 (8 %), 2 (14 %), 3 (28 %), 4 (30 %), 5 (20 %).
_SCORE_CDF = ((0.08, 1), (0.22, 2), (0.50, 3), (0.80, 4), (1.0, 5))
_FEEDBACK = {
    1: "falls far short here; the central problems are not addressed at all.",
    2: "has serious weaknesses here that a careful reader would notice at once.",
    3: "is adequate here but uneven, with clear room for improvement.",
    4: "is good here overall, with only minor issues.",
    5: "is excellent here, with nothing of substance to fix.",
    NA: "is not assessed here because the skill does not apply to this instruction.",
}
# fmt: off
_GARBAGE_WORDS = (
    "purple", "quantum", "banana", "the", "of", "lorem", "ipsum", "~~", "###", "zxq",
    "dishwasher", "ellipsis...", "7b", "<|im_end|>", "teapot", "rhubarb", "and", "so",
)
# fmt: on


def _digest(*parts: object) -> int:
    data = "\x1f".join(str(part) for part in parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


def _unit(*parts: object) -> float:
    return _digest(*parts) / 2.0**64


def _score(
    prompt_text: str, skill: str, seed: int | None, temperature: float, index: int, na_rate: float
) -> int | str:
    if na_rate > 0 and _unit("na", prompt_text, skill) < na_rate:
        return NA
    u = _unit("score", prompt_text, skill)
    score = next(value for bound, value in _SCORE_CDF if u < bound)
    if temperature > 0:
        score += _digest("sample", prompt_text, skill, seed, index) % 3 - 1
    return min(5, max(1, score))


# --------------------------------------------------------------------------------------------
# Bias knobs (docs/OPENAI_SERVER.md, "Biases"): what the bias probes are tested against
# --------------------------------------------------------------------------------------------

RESPONSE_MARK, RESPONSE_END = "[Response to score]", "[End of response to score]"
INSTRUCTION_MARK, INSTRUCTION_END = "[Instruction]", "[End of instruction]"
#: length_bias reaches its full +k at this many words.
LENGTH_FULL_WORDS = 200
_NAMES_LINE = re.compile(
    "^" + re.escape(probes.NAMES_TEMPLATE).replace(re.escape("{model}"), ".+") + r"\s*\n+"
)
_PAD_START = probes.PAD_TEMPLATE.split("{first}")[0]
_BANDWAGON = re.compile(re.escape(probes.BANDWAGON_TEMPLATE).replace(re.escape("{n}"), "([12])"))


def core_text(shown: str) -> str:
    """A response as the probes found it: without a "Response from <model>:" heading, a
    padding paragraph or a distraction sentence added by a probe."""
    text = _NAMES_LINE.sub("", shown.strip(), count=1)
    at = text.rfind(_PAD_START)
    if at >= 0:
        text = text[:at]
    for sentence in probes.DISTRACTIONS:
        text = text.replace(sentence, "")
    return text.strip()


def shown_response(prompt_text: str) -> str | None:
    """The response of a pointwise prompt of the project's template, as shown, or None."""
    text = _between(prompt_text, RESPONSE_MARK, RESPONSE_END)
    return text if RESPONSE_MARK in prompt_text else None


def content_key(prompt_text: str) -> str:
    """What `content_scores` keys scores on: the instruction and the first sentence of the
    response without the probes' additions (the whole prompt when it is not the project's
    template)."""
    shown = shown_response(prompt_text)
    if shown is None:
        return prompt_text
    instruction = _between(prompt_text, INSTRUCTION_MARK, INSTRUCTION_END)
    return "content\x1f" + instruction + "\x1f" + probes.first_sentence(core_text(shown))


def length_bonus(shown: str, length_bias: float) -> int:
    """+round(k x min(1, words / LENGTH_FULL_WORDS)): longer responses score higher."""
    words = len(_WORD.findall(shown))
    return int(length_bias * min(1.0, words / LENGTH_FULL_WORDS) + 0.5)


def of_family(shown: str, family: str) -> bool:
    """A response is of `family` for the self_preference knob when its text as shown
    (a "Response from <model>:" heading included) holds the family name as a word, in any
    case."""
    return bool(family) and re.search(rf"\b{re.escape(family)}\b", shown, re.IGNORECASE) is not None


def expected_scores(
    prompt_text: str,
    skills: Sequence[str] | None = None,
    seed: int | None = None,
    *,
    temperature: float = 0.0,
    index: int = 0,
    na_rate: float = 0.0,
    content_scores: bool = False,
    length_bias: float = 0.0,
    self_preference: str = "",
) -> dict[str, int | str]:
    """The scores the server gives, skill -> 1..5 (or "N/A").

    `prompt_text` is the content of the request's last user message; `skills` default to
    `detect_skills(prompt_text)`. With temperature 0 (or omitted) the score depends only on
    (prompt_text, skill); with temperature > 0 it moves by -1, 0 or +1 as a function of
    (prompt_text, skill, seed, index), `index` being the choice index when n > 1. A skill is
    "N/A" when a hash of (prompt_text, skill) falls under `na_rate`.

    The bias knobs (docs/OPENAI_SERVER.md, "Biases"): with `content_scores` the hashes use
    `content_key(prompt_text)` instead of the prompt text, so the probes' additions, the
    skills' order and the reference answer change nothing; `length_bias` k adds
    `length_bonus`, `self_preference` (a family name) adds 1 to a response `of_family`;
    scores stay within 1-5 and N/A stays N/A.
    """
    if skills is None:
        skills = detect_skills(prompt_text)
    temperature = temperature or 0.0
    names = [canonical_skill(skill) for skill in skills]
    key = content_key(prompt_text) if content_scores else prompt_text
    scores = {name: _score(key, name, seed, temperature, index, na_rate) for name in names}
    shown = shown_response(prompt_text)
    if shown is None or not (length_bias or self_preference):
        return scores
    bonus = length_bonus(shown, length_bias) + int(of_family(shown, self_preference))
    return {n: v if v == NA else min(5, int(v) + bonus) for n, v in scores.items()}


def feedback_sentence(skill: str, score: int | str) -> str:
    return f"The response {_FEEDBACK.get(score, _FEEDBACK[3])}"


def _between(text: str, start: str, end: str) -> str:
    head = text.find(start)
    tail = text.find(end, head + len(start)) if head >= 0 else -1
    return text[head + len(start) : tail].strip() if head >= 0 and tail >= 0 else ""


def expected_pair_choices(
    prompt_text: str,
    skills: Sequence[str],
    position_bias: float = 0.0,
    *,
    content_scores: bool = False,
    bandwagon: float = 0.0,
    distraction: float = 0.0,
) -> dict[str, str]:
    """The verdicts the server gives a pairwise prompt, per skill and Overall: "1", "2" or
    "tie". They depend on the two response texts as a set (so both orders of a pair agree),
    except that a hash of the pair under `position_bias` makes a verdict "1" whatever the
    order: a judge with position bias, for tests of the consistency report.

    The bias knobs (docs/OPENAI_SERVER.md, "Biases"): with `content_scores` the texts are
    hashed without the probes' additions (`core_text`); a hash under `bandwagon` follows a
    "Most people ... preferred Response N" line; a hash under `distraction` gives the
    verdict to the other response when exactly one holds a distraction sentence."""
    first = _between(prompt_text, FIRST_MARK, FIRST_END)
    second = _between(prompt_text, SECOND_MARK, SECOND_END)
    distracted = [any(s in text for s in probes.DISTRACTIONS) for text in (first, second)]
    if content_scores:
        first, second = core_text(first), core_text(second)
    low, high = sorted((first, second))
    claim = _BANDWAGON.search(prompt_text)
    choices = {}
    for name in [*skills, PAIR_OVERALL]:
        if position_bias > 0 and _unit("bias", low, high, name) < position_bias:
            choices[name] = "1"
            continue
        if claim and bandwagon > 0 and _unit("bandwagon", low, high, name) < bandwagon:
            choices[name] = claim.group(1)
            continue
        if (
            distracted[0] != distracted[1]
            and distraction > 0
            and _unit("distraction", low, high, name) < distraction
        ):
            choices[name] = "2" if distracted[0] else "1"
            continue
        u = _unit("pair", low, high, name)
        better = None if first == second or u >= 0.9 else (low if u < 0.45 else high)
        choices[name] = "tie" if better is None else ("1" if better == first else "2")
    return choices


def render_pair_answer(choices: Mapping[str, str], style: str) -> str:
    body = "\n".join(
        f"{name}: Response {c} is better here." if c != "tie" else f"{name}: neither is better."
        for name, c in choices.items()
    )
    if style == "lines":
        return body + "\n\nVerdicts:\n" + "\n".join(f"{n}: {c}" for n, c in choices.items())
    if style == "python_dict":
        return f"{body}\n\n{dict(choices)!r}"
    return json.dumps({"feedback": body, **choices})


def render_answer(scores: Mapping[str, int | str], style: str) -> str:
    """A judge's answer: per-skill feedback, then the scores, in one of `STYLES`."""
    feedback = {skill: feedback_sentence(skill, score) for skill, score in scores.items()}
    if style == "json":
        return json.dumps({"feedback": feedback, "scores": dict(scores)})
    if not scores:
        return "I could not find any skills to rate in the request."
    if style == "python_dict":
        body = "\n\n".join(f"{skill}: {text}" for skill, text in feedback.items())
        return f"{body}\n\n{dict(scores)!r}"
    if style == "lines":
        body = "\n".join(f"- {skill}: {text}" for skill, text in feedback.items())
        tail = "\n".join(f"{skill}: {score}" for skill, score in scores.items())
        return f"Feedback:\n{body}\n\nScores:\n{tail}"
    raise ValueError(f"unknown style {style!r}")


def garbage_reply(key: str) -> str:
    words = [_GARBAGE_WORDS[_digest("garbage", key, i) % len(_GARBAGE_WORDS)] for i in range(24)]
    return "glorp " + " ".join(words)


def wrong_json_reply(scores: Mapping[str, int | str], key: str) -> str:
    """JSON-looking text that is no valid judge answer: malformed, or without `scores`."""
    feedback = {skill: feedback_sentence(skill, score) for skill, score in scores.items()}
    if _digest("wrong_json", key) % 2:
        return json.dumps({"feedback": feedback, "verdict": "see feedback"})
    return json.dumps({"feedback": feedback, "scores": dict(scores)})[:-2] + ",}"


# --------------------------------------------------------------------------------------------
# Metadata prompts (judging.prompts.metadata; docs/OPENAI_SERVER.md, "Metadata")
# --------------------------------------------------------------------------------------------


def is_metadata_prompt(prompt_text: str) -> bool:
    return metadata.instruction_of(prompt_text) is not None


def expected_metadata(
    prompt_text: str,
    *,
    truth: Mapping[str, Mapping[str, Any]] | None = None,
    wrong_rate: float = 0.0,
) -> dict[str, Any]:
    """The metadata the server proposes for a metadata prompt: `truth[instruction]` when the
    instruction is listed there, else a choice keyed on a hash of the instruction among the
    keys the prompt offers. On a share `wrong_rate` of the instructions (by a hash of the
    instruction) the answer is wrong on purpose: another first domain, the skills of the
    right answer moved by one place in the offered list, and the difficulty 2 levels away."""
    instruction = metadata.instruction_of(prompt_text) or ""
    skill_keys, domain_keys = metadata.catalogue_keys_of(prompt_text)
    if not skill_keys or not domain_keys:
        return {"domains": [], "skills": [], "difficulty": None}
    given = (truth or {}).get(instruction)
    if given is not None:
        answer = {
            "domains": list(given.get("domains", [])),
            "skills": list(given.get("skills", [])),
            "difficulty": given.get("difficulty"),
        }
    else:
        start = _digest("metadata-skills", instruction) % len(skill_keys)
        answer = {
            "domains": [domain_keys[_digest("metadata-domain", instruction) % len(domain_keys)]],
            "skills": [skill_keys[(start + i) % len(skill_keys)] for i in range(3)],
            "difficulty": 1 + _digest("metadata-difficulty", instruction) % 5,
        }
    if wrong_rate and (_digest("metadata-wrong", instruction) % 10_000) / 10_000 < wrong_rate:
        answer = _wrong_metadata(answer, skill_keys, domain_keys)
    return answer


def _wrong_metadata(
    answer: dict[str, Any], skill_keys: list[str], domain_keys: list[str]
) -> dict[str, Any]:
    domains = answer["domains"]
    first = domains[0] if domains else domain_keys[0]
    other = (
        domain_keys[(domain_keys.index(first) + 1) % len(domain_keys)]
        if first in domain_keys
        else domain_keys[0]
    )
    skills = [
        skill_keys[(skill_keys.index(s) + 1) % len(skill_keys)] if s in skill_keys else s
        for s in answer["skills"]
    ]
    if len(set(skills)) != len(skills):  # moved onto each other: take the next free keys
        skills = list(dict.fromkeys(skills))
        skills += [k for k in skill_keys if k not in skills][: 3 - len(skills)]
    difficulty = answer["difficulty"]
    if isinstance(difficulty, int):
        difficulty = difficulty + 2 if difficulty <= 3 else difficulty - 2
    return {"domains": [other], "skills": skills, "difficulty": difficulty}


def render_metadata_answer(answer: Mapping[str, Any], style: str) -> str:
    """A metadata answer: the JSON object alone ("json"), or with a sentence before it."""
    body = json.dumps(dict(answer))
    if style == "json":
        return body
    return f"Here is the metadata of the instruction.\n{body}"
