"""Baseline judges: reference-overlap metrics mapped onto the FLASK 1-5 skill scale.

A baseline judge needs no network and no model: it compares a response with the item's
reference answer word by word. It is a *baseline*, not a judgment of any skill: a correct
answer worded differently scores low, a fluent wrong answer that copies the reference's words
scores high. Use it as the floor a real judge (person or model) has to beat. The full
rationale, the scale mapping and the citations are in docs/BASELINE_JUDGES.md.

Pure Python, standard library only: no Django, no project imports.

Tokenisation (`tokenize`), deterministic and Unicode-aware:

1. lower-case (`str.lower`), then Unicode NFC, so a composed "é" and "e" + U+0301 are equal;
2. punctuation - every character of `string.punctuation` (the set SQuAD removes) and every
   Unicode punctuation character (general category P*) - is either *deleted* in place
   (`strip_punctuation=True`: "don't" -> "dont", "U.S." -> "us", as SQuAD does) or turned
   into a token boundary (`strip_punctuation=False`: "don't" -> "don", "t", as ROUGE does);
3. tokens are the maximal runs of letters, digits and combining marks (general categories
   L*, N*, M*); every other character (white space, symbols, emoji, controls) separates
   tokens. This is the regex `\\w+` of Python minus "_" (punctuation) and plus combining marks:
   Python's `\\w` does not match marks, so `\\w+` would cut Hindi "हिंदी" into "ह", "द";
4. optionally (`drop_articles=True`) the English articles "a", "an", "the" are dropped.

With `strip_punctuation=True, drop_articles=True` this is the answer normaliser of the
official SQuAD evaluation script (Rajpurkar et al. 2016; `normalize_answer` of
evaluate-v1.1.py / evaluate-v2.0.py: lower-case, remove punctuation, remove articles
a/an/the, split on white space): on printable ASCII text the tokens are identical, which the
tests check against a transcription of that function. The only differences are the Unicode
extensions above (Unicode punctuation is removed too; symbols such as "€" separate tokens).
With `strip_punctuation=False, drop_articles=False` it is, on ASCII text, the default
tokeniser of Google's `rouge-score` package (lower-case, tokens are runs of [a-z0-9], no
stemming), which reproduces the worked examples of Lin (2004).

Metrics:

- `token_f1` - SQuAD-style bag-of-tokens F1 on SQuAD-normalised tokens.
- `rouge_l` - ROUGE-L (Lin 2004): longest common subsequence (LCS) precision, recall and
  F-measure on ROUGE tokens. `lcs_length` computes the LCS length with the bit-parallel
  form of the O(n*m) dynamic programme (Allison & Dix 1986; Hyyrö 2004): one DP row is held
  as a bit vector of its 0/1 increments, so memory is O(min(n, m)) bits for the row and each
  row update is a handful of big-integer operations. `lcs_length_dp` is the textbook two-row
  DP (O(n*m) time, O(min(n, m)) memory), kept as the executable specification the tests
  check against. Each side is cut to its first `MAX_TOKENS` (4,000) tokens before the LCS,
  so one huge response cannot blow up the time (at most 4,000 x 4,000 cells).
- `to_skill_scale` - a value in [0, 1] to a FLASK score 1-5 by fixed cut points.

Judges: `BaselineJudge.score(instruction, response, reference, skills)` returns a
`BaselineResult` with the *same* metric value and score for every asked skill (a baseline is
skill-agnostic; the note says so), or N/A (None) for every skill when there is no reference
answer. `BASELINES` is the registry: "token-f1" and "rouge-l".
"""

from __future__ import annotations

import math
import string
import unicodedata
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from types import MappingProxyType
from typing import ClassVar, NamedTuple

__all__ = [
    "ARTICLES",
    "BASELINES",
    "BASELINE_DESCRIPTION",
    "DEFAULT_CUTS",
    "MAX_TOKENS",
    "NO_REFERENCE_NOTE",
    "NO_REFERENCE_TOKENS_NOTE",
    "ROUGE_L_JUDGE",
    "ROUGE_TOKENIZATION",
    "SQUAD_TOKENIZATION",
    "TOKEN_F1_JUDGE",
    "BaselineJudge",
    "BaselineResult",
    "RougeL",
    "Tokenization",
    "lcs_length",
    "lcs_length_dp",
    "normalize_answer",
    "rouge_l",
    "rouge_l_tokens",
    "to_skill_scale",
    "token_f1",
    "token_f1_tokens",
    "tokenize",
    "validate_cuts",
]

#: Tokens compared per side by ROUGE-L; longer inputs are cut to their first MAX_TOKENS.
MAX_TOKENS = 4000
#: Cut points from a value in [0, 1] to the FLASK scale: < 0.2 -> 1, [0.2, 0.4) -> 2,
#: [0.4, 0.6) -> 3, [0.6, 0.8) -> 4, >= 0.8 -> 5.
DEFAULT_CUTS: tuple[float, float, float, float] = (0.2, 0.4, 0.6, 0.8)
#: English articles removed by the SQuAD normaliser.
ARTICLES = frozenset({"a", "an", "the"})

BASELINE_DESCRIPTION = "baseline: reference overlap, not a judgment of the skill"
NO_REFERENCE_NOTE = "no reference answer"
#: E.g. a multiple-choice answer "A": SQuAD's normaliser drops it as an article.
NO_REFERENCE_TOKENS_NOTE = "reference answer has no tokens left after normalisation"


# --- tokenisation ------------------------------------------------------------------------------

_SPACE = ord(" ")
_ASCII_PUNCTUATION = frozenset(string.punctuation)
#: Distinct code points remembered per translation table; beyond this they are recomputed.
_TABLE_LIMIT = 1 << 16


class _CharTable(dict[int, int | None]):
    """A `str.translate` table filled on first sight of each code point: letters, digits and
    marks map to themselves, punctuation to nothing (deleted) or to a space, anything else to
    a space. Lazy, so no table of all 1.1 million code points is built at import."""

    def __init__(self, *, strip_punctuation: bool) -> None:
        super().__init__()
        self.strip_punctuation = strip_punctuation

    def __missing__(self, code_point: int) -> int | None:
        char = chr(code_point)
        category = unicodedata.category(char)[0]
        value: int | None
        if category in "LNM":
            value = code_point
        elif self.strip_punctuation and (category == "P" or char in _ASCII_PUNCTUATION):
            value = None
        else:
            value = _SPACE
        if len(self) < _TABLE_LIMIT:
            self[code_point] = value
        return value


_TABLES = {flag: _CharTable(strip_punctuation=flag) for flag in (False, True)}


def tokenize(text: str, *, strip_punctuation: bool = True, drop_articles: bool = True) -> list[str]:
    """The word tokens of `text` (see the module docstring). The defaults are the SQuAD
    normaliser; `strip_punctuation=False, drop_articles=False` is the ROUGE tokenisation."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    normal = unicodedata.normalize("NFC", text.lower())
    tokens = normal.translate(_TABLES[bool(strip_punctuation)]).split()
    if drop_articles:
        return [t for t in tokens if t not in ARTICLES]
    return tokens


def normalize_answer(text: str) -> str:
    """SQuAD's normalised answer string: the SQuAD tokens joined by single spaces."""
    return " ".join(tokenize(text))


@dataclass(frozen=True)
class Tokenization:
    """A named tokenisation setting; calling it tokenises a text."""

    strip_punctuation: bool
    drop_articles: bool

    def __call__(self, text: str) -> list[str]:
        return tokenize(
            text, strip_punctuation=self.strip_punctuation, drop_articles=self.drop_articles
        )


#: SQuAD's normaliser: punctuation deleted, articles dropped.
SQUAD_TOKENIZATION = Tokenization(strip_punctuation=True, drop_articles=True)
#: ROUGE's tokens: punctuation separates tokens, every word kept, no stemming.
ROUGE_TOKENIZATION = Tokenization(strip_punctuation=False, drop_articles=False)


# --- token F1 (SQuAD) --------------------------------------------------------------------------


def token_f1_tokens(candidate: Sequence[str], reference: Sequence[str]) -> float:
    """Bag-of-tokens F1 of two token lists, as SQuAD's `compute_f1`: the overlap counts each
    token min(count in candidate, count in reference) times; P = overlap / len(candidate),
    R = overlap / len(reference), F1 = 2PR / (P + R). Both empty -> 1.0, one empty -> 0.0."""
    if not candidate or not reference:
        return 1.0 if not candidate and not reference else 0.0
    overlap = sum((Counter(candidate) & Counter(reference)).values())
    if overlap == 0:
        return 0.0
    # 2PR / (P + R) with P = overlap / len(candidate), R = overlap / len(reference), in the
    # equal form 2 * overlap / (len(candidate) + len(reference)): one rounding, never > 1.
    return 2 * overlap / (len(candidate) + len(reference))


def token_f1(candidate: str, reference: str) -> float:
    """SQuAD-style token F1 (Rajpurkar et al. 2016) of a candidate against a reference text,
    on SQuAD-normalised tokens. Both without tokens -> 1.0; exactly one -> 0.0."""
    return token_f1_tokens(SQUAD_TOKENIZATION(candidate), SQUAD_TOKENIZATION(reference))


# --- ROUGE-L (Lin 2004) ------------------------------------------------------------------------


class RougeL(NamedTuple):
    """ROUGE-L of a candidate against a reference: LCS precision, recall and F-measure."""

    precision: float
    recall: float
    f: float


def lcs_length_dp(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence by the textbook dynamic programme:
    O(len(a) * len(b)) time, two rows of min(len(a), len(b)) + 1 cells. Readable and slow;
    the executable specification of `lcs_length`."""
    if len(a) < len(b):
        a, b = b, a  # the rows run over the shorter sequence
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token sequences.

    The same O(n*m) dynamic programme as `lcs_length_dp`, computed a machine word at a time
    (bit-parallel LCS, Allison & Dix 1986, in the form of Hyyrö 2004). A DP row over the
    shorter sequence `b` only ever grows by 0 or 1 from cell to cell, so it is kept as the bit
    vector V of those steps (bit j is 0 where the row grows at j). For each token x of `a`,
    with M[x] the positions of x in `b`:  U = V & M[x];  V = (V + U) | (V - U).  The LCS
    length is the number of 0 bits of V. Python's integers make V any width; a token of `a`
    absent from `b` leaves V unchanged and is skipped.
    """
    if len(a) < len(b):
        a, b = b, a
    width = len(b)
    if width == 0:
        return 0
    masks: dict[str, int] = {}
    for j, token in enumerate(b):
        masks[token] = masks.get(token, 0) | (1 << j)
    full = (1 << width) - 1
    v = full
    for match in [masks[x] for x in a if x in masks]:
        u = v & match
        v = ((v + u) | (v - u)) & full
    return width - v.bit_count()


def rouge_l_tokens(
    candidate: Sequence[str],
    reference: Sequence[str],
    *,
    beta: float = 1.0,
    max_tokens: int | None = MAX_TOKENS,
) -> RougeL:
    """ROUGE-L of two token lists (see `rouge_l`)."""
    if not (isinstance(beta, int | float) and math.isfinite(beta) and beta > 0):
        raise ValueError(f"beta must be a finite number > 0, not {beta!r}")
    if max_tokens is not None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be an int >= 1 or None, not {max_tokens!r}")
        candidate = candidate[:max_tokens]
        reference = reference[:max_tokens]
    if not candidate or not reference:
        value = 1.0 if not candidate and not reference else 0.0
        return RougeL(value, value, value)
    lcs = lcs_length(candidate, reference)
    if lcs == 0:
        return RougeL(0.0, 0.0, 0.0)
    n, m = len(candidate), len(reference)
    b2 = beta * beta
    # (1 + b2) P R / (R + b2 P) with P = lcs / n, R = lcs / m, in the equal form
    # (1 + b2) lcs / (n + b2 m): fewer roundings; for beta = 1 exactly 2 lcs / (n + m).
    f = 2 * lcs / (n + m) if b2 == 1 else (1 + b2) * lcs / (n + b2 * m)
    return RougeL(lcs / n, lcs / m, min(1.0, f))


def rouge_l(
    candidate: str,
    reference: str,
    *,
    beta: float = 1.0,
    max_tokens: int | None = MAX_TOKENS,
) -> RougeL:
    """ROUGE-L (Lin 2004, section 3.1) of a candidate text against a reference text.

    On ROUGE tokens (lower-case, punctuation separates tokens, no article removal, no
    stemming): P = LCS / len(candidate), R = LCS / len(reference) and
    F = (1 + beta^2) P R / (R + beta^2 P).

    beta: Lin defines beta as P/R at the point where dF/dR = dF/dP and, for DUC, sets it to a
    very large number, so F is practically R. We use beta = 1 by default, the harmonic mean
    2PR / (P + R), as most current implementations do (e.g. Google's rouge-score); a larger
    beta weighs recall more.

    max_tokens: each side is cut to its first `max_tokens` tokens before the LCS (None: no
    cut), and P and R are those of the cut sequences; this bounds the cost at
    max_tokens^2 DP cells.

    Both without tokens -> (1, 1, 1); exactly one -> (0, 0, 0).
    """
    return rouge_l_tokens(
        ROUGE_TOKENIZATION(candidate),
        ROUGE_TOKENIZATION(reference),
        beta=beta,
        max_tokens=max_tokens,
    )


# --- the FLASK scale ---------------------------------------------------------------------------


def validate_cuts(cuts: Sequence[float]) -> tuple[float, ...]:
    """`cuts` as a tuple of floats: four strictly increasing values inside (0, 1). ValueError
    otherwise."""
    try:
        values = tuple(float(c) for c in cuts)
    except (TypeError, ValueError):
        raise ValueError(f"cuts must be four numbers, not {cuts!r}")
    if len(values) != 4:
        raise ValueError(f"cuts must be four numbers (for scores 1-5), not {len(values)}")
    if not all(0.0 < c < 1.0 for c in values):  # also rejects NaN
        raise ValueError(f"every cut must lie strictly between 0 and 1: {values}")
    if any(low >= high for low, high in pairwise(values)):
        raise ValueError(f"cuts must be strictly increasing: {values}")
    return values


def to_skill_scale(value: float, cuts: Sequence[float] = DEFAULT_CUTS) -> int:
    """A value in [0, 1] as a FLASK score 1-5: 1 + the number of cuts <= value. With the
    default cuts: < 0.2 -> 1, [0.2, 0.4) -> 2, [0.4, 0.6) -> 3, [0.6, 0.8) -> 4, >= 0.8 -> 5.
    ValueError for a value outside [0, 1] (or NaN) and for invalid cuts."""
    checked = validate_cuts(cuts)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"value must be a number, not {type(value).__name__}")
    if not 0.0 <= value <= 1.0:  # also rejects NaN
        raise ValueError(f"value must lie in [0, 1], not {value!r}")
    return 1 + bisect_right(checked, value)


# --- judges ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BaselineResult:
    """What a baseline judge says about one response: per asked skill a score 1-5 (None: N/A)
    and the metric value behind it (None when N/A), plus a note for people."""

    scores: dict[str, int | None]
    raw: dict[str, float | None]
    note: str


@dataclass(frozen=True)
class BaselineJudge:
    """A reference-based, skill-agnostic baseline judge.

    `metric` maps (response tokens, reference tokens) to a value in [0, 1]; the tokens come
    from `tokenization`. `max_tokens` is the per-side cut the metric applies (None: none),
    reported in the note when it was reached. The value is mapped to 1-5 by `cuts` and given
    to every skill alike.
    """

    name: str
    description: str
    tokenization: Tokenization
    metric: Callable[[Sequence[str], Sequence[str]], float]
    max_tokens: int | None = None
    cuts: tuple[float, ...] = DEFAULT_CUTS

    #: Always True: lets callers label these judges as baselines without knowing the class.
    is_baseline: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "cuts", validate_cuts(self.cuts))
        if not self.name or not self.name.strip():
            raise ValueError("a baseline judge needs a name")
        if "baseline" not in self.description.lower():
            raise ValueError("a baseline judge's description must say it is a baseline")

    def score(
        self,
        instruction: str,
        response: str,
        reference: str | None,
        skills: Sequence[str],
    ) -> BaselineResult:
        """Score `response` against `reference` for each of `skills`.

        The instruction is accepted for parity with model judges and ignored: the metric only
        compares the response with the reference. Every skill gets the same value and score.
        With no reference (None, empty or blank) every skill is N/A (None), note
        NO_REFERENCE_NOTE; likewise, note NO_REFERENCE_TOKENS_NOTE, when the reference has no
        token left after this judge's normalisation (e.g. "A" or "the" for token-f1, whose
        SQuAD normaliser drops articles; an emoji-only answer for both).
        """
        names = list(dict.fromkeys(skills))
        if reference is None or not reference.strip():
            return self._not_applicable(names, NO_REFERENCE_NOTE)
        reference_tokens = self.tokenization(reference)
        if not reference_tokens:
            return self._not_applicable(names, NO_REFERENCE_TOKENS_NOTE)
        response_tokens = self.tokenization(response)
        value = float(self.metric(response_tokens, reference_tokens))
        level = to_skill_scale(value, self.cuts)
        cuts = "/".join(f"{c:g}" for c in self.cuts)
        note = (
            f"{BASELINE_DESCRIPTION}. {self.name} = {value:.4f} -> score {level} "
            f"(cuts {cuts}); the same value and score are given to every skill "
            "(a baseline is skill-agnostic)"
        )
        if self.max_tokens is not None and (
            len(response_tokens) > self.max_tokens or len(reference_tokens) > self.max_tokens
        ):
            note += f"; only the first {self.max_tokens} tokens of each text were compared"
        return BaselineResult(
            scores=dict.fromkeys(names, level), raw=dict.fromkeys(names, value), note=note
        )

    @staticmethod
    def _not_applicable(names: list[str], note: str) -> BaselineResult:
        return BaselineResult(
            scores=dict.fromkeys(names, None), raw=dict.fromkeys(names, None), note=note
        )


def _rouge_l_f(candidate: Sequence[str], reference: Sequence[str]) -> float:
    return rouge_l_tokens(candidate, reference).f


TOKEN_F1_JUDGE = BaselineJudge(
    name="token-f1",
    description=(
        f"{BASELINE_DESCRIPTION}. SQuAD-style token F1 (Rajpurkar et al. 2016) between the "
        "response and the reference answer, mapped to 1-5; the same score for every skill."
    ),
    tokenization=SQUAD_TOKENIZATION,
    metric=token_f1_tokens,
)

ROUGE_L_JUDGE = BaselineJudge(
    name="rouge-l",
    description=(
        f"{BASELINE_DESCRIPTION}. ROUGE-L F1 (longest common subsequence, Lin 2004) between "
        "the response and the reference answer, mapped to 1-5; the same score for every skill."
    ),
    tokenization=ROUGE_TOKENIZATION,
    metric=_rouge_l_f,
    max_tokens=MAX_TOKENS,
)

#: The baseline judges by name.
BASELINES: Mapping[str, BaselineJudge] = MappingProxyType(
    {judge.name: judge for judge in (TOKEN_F1_JUDGE, ROUGE_L_JUDGE)}
)
