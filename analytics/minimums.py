"""The smallest samples a figure is shown for: one rule for every figure a researcher sees
(the report, the dashboard, the trust page, the preference page, the evaluation card) and
every JSON export of them (docs/SMALL_SAMPLES.md).

A figure computed on fewer than its kind's minimum is not shown as a number with an
interval: pages show "too few" with the reason (`too_few`), exports carry the number with
`too_few` set so nothing downstream mistakes it for a finding. An interval must contain its
point estimate (`interval_holds`); when it does not (a degenerate bootstrap, a separated
fit), the figure is flagged with why, never shown as if it held.

The minimums are deliberately low floors, not sample-size recommendations: below them the
figure's interval is so wide, or its estimator so degenerate, that any value means nothing.
Each entry says what it counts and why the floor is where it is."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Minimum:
    n: int  # the smallest count shown
    unit: str  # what is counted, in the plural ("responses", "labels", ...)
    why: str  # one sentence for the docs and the tooltip


MINIMUMS: dict[str, Minimum] = {
    "correlation": Minimum(
        10,
        "responses",
        "a correlation's 95% interval on fewer than 10 pairs spans most of [-1, 1]",
    ),
    "agreement": Minimum(
        10,
        "units",
        "chance-corrected agreement (Krippendorff's alpha, kappa) on fewer than 10 units "
        "with two or more ratings is dominated by a few disagreements",
    ),
    "icc": Minimum(
        5,
        "units",
        "an intraclass correlation needs variance between units: with fewer than 5 its "
        "estimate and interval degenerate",
    ),
    "mean": Minimum(
        5, "responses", "a mean and its interval on fewer than 5 values is a handful of cases"
    ),
    "accuracy": Minimum(
        10, "decisions", "an accuracy or a kappa against people on fewer than 10 decisions"
    ),
    "interval": Minimum(
        10,
        "units",
        "a bootstrap interval resamples units: with fewer than 10 distinct units most "
        "resamples repeat the same few, and the percentiles collapse onto the estimate",
    ),
    "stratum": Minimum(
        10,
        "responses",
        "a row of a breakdown (a domain, a difficulty, a tercile) on fewer than 10",
    ),
    "bradley_terry": Minimum(
        20,
        "labels",
        "Bradley–Terry strengths from fewer than 20 pairwise labels are mostly prior",
    ),
    "ranking": Minimum(
        4,
        "systems",
        "a correlation between systems (their ranks, their means) over fewer than 4 systems "
        "takes a handful of values",
    ),
    "calibration": Minimum(
        5,
        "responses",
        "a calibration figure (an offset, Bland–Altman limits of agreement, a calibration "
        "bin) on fewer than 5 responses is a handful of differences",
    ),
    "item_level": Minimum(
        10,
        "items",
        "the item-level correlation averages one correlation per item, each over that "
        "item's few responses: over fewer than 10 items it is a handful of them",
    ),
    "prediction_powered": Minimum(
        10,
        "labeled responses",
        "a prediction-powered mean rests on the labeled responses: on fewer than 10 its "
        "lambda and its error variance are a handful of residuals, and its normal interval "
        "does not hold",
    ),
    "prediction_powered_difference": Minimum(
        10,
        "labeled items",
        "a prediction-powered difference between two systems rests on the items where both "
        "responses are labeled: on fewer than 10 its interval does not hold",
    ),
}


def minimum(kind: str) -> Minimum:
    """The minimum of a kind of figure; KeyError for an unknown kind (a typo is a bug)."""
    return MINIMUMS[kind]


def too_few(kind: str, n: int | None) -> str:
    """ "" when `n` is at least the kind's minimum; otherwise the reason, for a page and an
    export: "too few: n = 3 (at least 10 responses)"."""
    floor = MINIMUMS[kind]
    if n is not None and n >= floor.n:
        return ""
    return f"too few: n = {n or 0} (at least {floor.n} {floor.unit})"


def interval_holds(estimate: float | None, low: float | None, high: float | None) -> bool:
    """Whether an interval is usable as shown: finite bounds, low <= high, and the point
    estimate inside it (a small tolerance for floating point). An interval absent (None)
    holds vacuously: there is nothing to contradict."""
    if low is None or high is None:
        return True
    if estimate is None or any(not math.isfinite(v) for v in (estimate, low, high)):
        return False
    tolerance = 1e-9 * max(1.0, abs(estimate), abs(low), abs(high))
    return low - tolerance <= estimate <= high + tolerance and low <= high
