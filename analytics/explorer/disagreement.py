"""The disagreement explorer: the (response, skill) pairs where people disagree with each
other or with a judge, ranked (docs/DISAGREEMENTS.md).

`disagreements()` is pure computation: it takes report rows (analytics.rows.Row: response
id, item id, system, skill, rater, value or None for N/A) and returns ranked rows without
touching the database (no Django). analytics.explorer.selectors feeds it from
`analytics.selectors.report_rows`, so the explorer sees exactly the scores and filters the
report does.

Numbers are exact where they decide an order:
- the human mean is the exact total over the count (N/A left out), rounded once, as in
  analytics.report.build.human_means;
- the spread is the population standard deviation (and the range) of the human scores; the
  variance is computed as a fraction, so equal spreads are equal;
- the gap is |human mean - judge value| as a fraction. A judge's value is the mean of its k
  samples (k <= 20), which reaches us as a float: a float that is the rounding of a fraction
  with denominator <= 20 is read as that fraction (3.3333333333333335 is 10/3), any other
  as its own exact value. So a gap of exactly 2 is 2, and it ties with every other 2.
Ties are broken by response id, then skill name.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction

from analytics.rows import Row

SORTS = ("gap", "spread")
PAGE_SIZE = 50
#: The largest sample count of a judge (JudgeConfig's CHECK): denominators of its means.
SNAP_DENOMINATOR = 20


@dataclass(frozen=True)
class DisagreementFilters:
    """What the explorer shows: report filters (any of the values; empty = all), the least
    number of human scores (N/A not counted) and the order."""

    skills: tuple[str, ...] = ()
    judges: tuple[str, ...] = ()
    systems: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    difficulties: tuple[int, ...] = ()
    min_human: int = 1
    sort: str = "gap"


@dataclass(frozen=True)
class JudgeGap:
    judge: str
    value: float | None  # None: the judge said N/A
    gap: float | None  # |human mean - value|; None when the judge said N/A


@dataclass(frozen=True)
class Disagreement:
    response_id: int
    item_id: int
    system: str
    skill: str
    human_scores: tuple[tuple[str, float | int | None], ...]  # (rater, value), by rater
    n_human: int  # scores with a value
    n_na: int
    human_mean: float
    human_sd: float  # population standard deviation
    human_range: float  # highest minus lowest score
    judges: tuple[JudgeGap, ...]  # by judge name
    gap: float | None  # the largest gap over the judges (the only one with one judge)
    gap_exact: Fraction | None = field(default=None, repr=False, compare=False)
    variance_exact: Fraction = field(default=Fraction(0), repr=False, compare=False)


def exact(value: float) -> int | Fraction:
    """A score as an exact number: ints stay ints; a float is the fraction with denominator
    <= SNAP_DENOMINATOR that rounds to it, if there is one, else its own exact value."""
    if isinstance(value, int) and value.__class__ is int:
        return value
    value = float(value)
    if value.is_integer():
        return int(value)
    own = Fraction(value)
    near = own.limit_denominator(SNAP_DENOMINATOR)
    return near if float(near) == value else own


def disagreements(
    human: Iterable[Row], judges: Iterable[Row], *, min_human: int = 1, sort: str = "gap"
) -> list[Disagreement]:
    """One row per (response, skill) with at least max(1, min_human) human scores that are
    not N/A, with every judge's value and gap; ranked by `sort`, largest first:

    - "gap": the largest gap over the judges; rows no judge gave a value come last;
    - "spread": the human scores' standard deviation.

    Ties (and the rows without a gap) go by response id, then skill."""
    if sort not in SORTS:
        raise ValueError(f"sort is one of {', '.join(SORTS)}")
    people: dict[tuple[int, str], list[Row]] = defaultdict(list)
    for row in human:
        people[(row[0], row[3])].append(row)
    judged: dict[tuple[int, str], dict[str, float | None]] = defaultdict(dict)
    for response_id, _item, _system, skill, judge, value in judges:
        judged[(response_id, skill)][judge] = value
    least = max(1, min_human)
    rows = []
    for (response_id, skill), scores in people.items():
        values = [exact(r[5]) for r in scores if r[5] is not None]
        if len(values) < least:
            continue
        rows.append(_row(response_id, skill, scores, values, judged.get((response_id, skill), {})))
    if sort == "gap":
        rows.sort(key=lambda r: (r.gap_exact is None, -(r.gap_exact or 0), r.response_id, r.skill))
    else:
        rows.sort(key=lambda r: (-r.variance_exact, r.response_id, r.skill))
    return rows


def _row(
    response_id: int,
    skill: str,
    scores: list[Row],
    values: list[int | Fraction],
    judge_values: dict[str, float | None],
) -> Disagreement:
    n = len(values)
    mean = Fraction(sum(values)) / n
    variance = sum(((Fraction(v) - mean) ** 2 for v in values), Fraction(0)) / n
    gaps = []
    widest: Fraction | None = None
    for judge in sorted(judge_values):
        value = judge_values[judge]
        if value is None:
            gaps.append(JudgeGap(judge, None, None))
            continue
        gap = abs(mean - exact(value))
        widest = gap if widest is None or gap > widest else widest
        gaps.append(JudgeGap(judge, float(value), float(gap)))
    first = scores[0]
    return Disagreement(
        response_id=response_id,
        item_id=first[1],
        system=first[2],
        skill=skill,
        human_scores=tuple(sorted(((r[4], r[5]) for r in scores), key=lambda s: str(s[0]))),
        n_human=n,
        n_na=len(scores) - n,
        human_mean=float(mean),
        human_sd=math.sqrt(variance),
        human_range=float(max(values) - min(values)),
        judges=tuple(gaps),
        gap=None if widest is None else float(widest),
        gap_exact=widest,
        variance_exact=variance,
    )
