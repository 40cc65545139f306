"""How uncertain a judge's scores of responses are, and the batch design built on it (pure:
numpy, no Django). Active selection (docs/CAMPAIGNS.md, "Active selection") sends people
the responses where the judge is least to be trusted, with known inclusion probabilities.

Each response of a campaign's frame comes with, per skill its task asks:

- `samples`: each judge run's k sample scores, keyed (run, skill) (N/A left out);
- `means`: each run's mean over its samples, keyed by skill (N/A left out);
- `labels`: the mean of people's accepted scores so far, keyed by skill (N/A left out; empty
  while unlabeled).

Three figures of uncertainty (in score points, >= 0; only their ratios matter, since
`analytics.ppi.inclusion_probabilities` makes the probabilities proportional to them):

- **spread**: the standard deviation (ddof 1) of a run's k samples of the response, averaged
  over its skills (and runs): a judge that answers differently when asked again is unsure;
- **judges**: the standard deviation (ddof 1) of the runs' means across two runs or more,
  averaged over its skills: judges that disagree cannot all be right;
- both as sqrt(m + s^2), m the batch's mean s^2 (`_floored`): agreement is no proof of
  being right, so a response whose samples agree keeps an expected error of its own;
- **calibration**: the judge's expected error on it, from the labels so far. Per skill, the
  residuals r = Y - (lambda Yhat + c) of the labeled responses give a mean squared residual
  per score level (Yhat rounded to 1..5; a judge on its own scale, by its quintiles over
  the frame: `level_edges`), shrunk toward the skill's mean, itself shrunk
  toward the mean over all skills, each by SHRINKAGE pseudo-labels: m_all = mean r^2;
  m_skill = (sum r^2 + k m_all) / (n_skill + k); m_level = (sum r^2 + k m_skill) /
  (n_level + k). The figure of a response is the square root of its level's m, averaged
  over its skills: the root mean squared residual, since the variance of the IPW estimate
  is sum E[r^2 | x] (1 - pi) / pi / N^2, which probabilities proportional to
  sqrt(E[r^2 | x]) minimise for a given budget (Zrnic & Candes 2024, section 4).

  lambda Yhat + c is the least-squares line of Y on Yhat over the skill's labels (a skill
  with fewer than two: over every skill's), its slope clipped to [0, 1] and c refitted for
  it: the prediction the report's active estimate subtracts (`analytics.ppi.active_mean`
  tunes lambda and an offset together, which minimises the same residuals weighted by
  (1 - pi) / pi). So r is the judge's error once its scale and constant bias are taken out,
  and the design goes where that error is large, not where the human scores are.

A response with no figure (every sample N/A, one sample) takes the batch's mean figure; a
batch with no figure at all, or the same figure everywhere, is drawn uniformly, and says so.
Calibration on fewer than MIN_CALIBRATION_LABELS labeled responses falls back to the spread,
then to uniform, and says why.

Batches: a batch decides the next undecided responses of the frame (a fixed, seeded random
order); its budget is what is left of the plan's, counted in expected draws (the sum of the
probabilities recorded), shared over the undecided responses in proportion to their number
(`batch_budget`), and each response is drawn with its probability from a generator seeded by
(seed, batch) (`draw`). Every response of the frame is decided once (the last batch takes
what is left of the budget), with a probability that depends only on what was known before
its batch (the labels then in), so E[xi / pi | past] = 1 for each, and the inverse-
probability-weighted estimate over the frame is unbiased (`analytics.ppi.active_mean`;
Zrnic & Candes 2024, section 3; tests/analytics/test_active_selection.py checks it by
simulation).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]
#: per response: key (a skill, or a (run, skill) pair) -> the values given for it
Values = Sequence[Mapping[Any, Sequence[float]]]

SOURCES = ("spread", "judges", "calibration")
#: Labeled responses a calibration model is fitted from: the smallest number of labeled
#: responses a prediction-powered mean is shown for (analytics/minimums.py), since below it
#: lambda and the residuals are a handful of values.
MIN_CALIBRATION_LABELS = 10
#: The prior weight, in labels, of the mean a score level's (and a skill's) squared residual
#: is shrunk toward: a level seen on 10 labels counts half its own, half the skill's (the
#: label planner's weight, docs/LABEL_PLANNING.md, so a plan and the design agree).
SHRINKAGE = 10.0


@dataclass(frozen=True)
class Uncertainty:
    """The figures of a batch's responses (`values`, aligned with the targets asked for) and
    where they came from: `source` is "spread", "judges", "calibration" or "uniform" (no
    information); `note` says why it is not the source asked for ("" when it is); `labels`
    is the number of labeled responses a calibration model saw; `fit` is the model per skill
    ({"lambda", "offset", "labels", "rms": {level: rms}}, levels as strings)."""

    values: Array
    source: str
    note: str = ""
    labels: int = 0
    fit: dict[str, dict[str, Any]] = field(default_factory=dict)


# --- the figures ------------------------------------------------------------------------------


def sd_figures(values: Values) -> list[float | None]:
    """Per response, the mean over its keys of the standard deviation (ddof 1) of the values
    given for the key; keys with fewer than two values add nothing; None when no key has
    two (e.g. samples [3, 5] and [4, 4]: (sqrt(2) + 0) / 2)."""
    figures: list[float | None] = []
    for per_key in values:
        sds = [float(np.std(v, ddof=1)) for v in per_key.values() if len(v) >= 2]
        figures.append(sum(sds) / len(sds) if sds else None)
    return figures


def _filled(figures: Sequence[float | None]) -> Array | None:
    """The figures with the missing ones at the mean of the others; None when no figure
    tells the responses apart (none known, or all the same)."""
    known = [f for f in figures if f is not None]
    if not known or max(known) - min(known) <= 0:
        return None
    mean = sum(known) / len(known)
    return np.array([mean if f is None else f for f in figures], dtype=np.float64)


def _floored(values: Array) -> Array:
    """A disagreement figure s (spread, judges) as an expected error: sqrt(m + s^2), m the
    batch's mean s^2. The judge's error against people has a part that no disagreement
    shows (people's own disagreement, a mistake the judge makes every time): a response
    whose samples agree is not one the judge is sure to get right. Without the floor such
    responses sit at the uniform share's minimum probability, and the few of them drawn
    carry weights of hundreds (coverage 71-77 % at 25 labels in bench/ppi_coverage_bench.py;
    with it, as good as uniform PPI++ at worst)."""
    return np.sqrt(float(np.mean(values**2)) + values**2)


def _uniform(n: int, note: str) -> Uncertainty:
    return Uncertainty(values=np.ones(n), source="uniform", note=note)


def spread(samples: Values) -> Uncertainty:
    """The k-sample spread of each response (see the module docstring)."""
    values = _filled(sd_figures(samples))
    if values is None:
        return _uniform(
            len(samples),
            "the judge's samples do not tell these responses apart (one sample per "
            "response, or the same spread everywhere): drawn uniformly",
        )
    return Uncertainty(values=_floored(values), source="spread")


def judges(means: Values) -> Uncertainty:
    """The disagreement between the runs' judges on each response."""
    values = _filled(sd_figures(means))
    if values is None:
        return _uniform(
            len(means),
            "the judges' disagreement does not tell these responses apart (they agree "
            "alike, or one judge scored them): drawn uniformly",
        )
    return Uncertainty(values=_floored(values), source="judges")


# --- the calibration model --------------------------------------------------------------------


def score_level(yhat: float) -> int:
    """A judge's (mean) score as a level 1..5: rounded half up, clipped."""
    return int(min(max(math.floor(yhat + 0.5), 1), 5))


#: The quantiles whose values bound the levels of a judge on its own scale (quintiles).
OWN_SCALE_QUANTILES = (0.2, 0.4, 0.6, 0.8)


def level_edges(values: Sequence[float]) -> tuple[float, ...] | None:
    """None for a judge on the 1-5 scale (every value in [1, 5]: `score_level`); for a judge
    on its own scale (a metric's 0-100, a log-probability), the distinct quintiles of its
    values over the frame, so its levels are five groups of about equal size rather than
    everything clipped into level 1 or 5 (which would make the calibration uniform)."""
    if not values or all(1 <= v <= 5 for v in values):
        return None
    return tuple(float(q) for q in np.unique(np.quantile(values, OWN_SCALE_QUANTILES)))


def level_of(yhat: float, edges: tuple[float, ...] | None) -> int:
    """The level of a judge value: `score_level` on the 1-5 scale, else 1 + the number of
    `edges` at or below it."""
    if edges is None:
        return score_level(yhat)
    return 1 + int(np.searchsorted(edges, yhat, side="right"))


@dataclass(frozen=True)
class CalibrationModel:
    """Mean squared residuals by skill and level (see the module docstring)."""

    overall: float  # m_all
    per_skill: dict[Any, float]  # m_skill
    per_level: dict[Any, dict[int, float]]  # skill -> level -> m_level (levels with labels)
    lines: dict[Any, tuple[float, float]]  # skill -> (lambda, c)
    labels_per_skill: dict[Any, int]
    labeled_responses: int
    # skill -> the level bounds of a judge on its own scale (`level_edges`; absent: 1-5)
    edges: dict[Any, tuple[float, ...]] = field(default_factory=dict)

    def rms(self, skill: Any, yhat: float) -> float:
        level = self.per_level.get(skill, {}).get(level_of(yhat, self.edges.get(skill)))
        if level is None:
            level = self.per_skill.get(skill, self.overall)
        return math.sqrt(level)

    def fit(self, names: Mapping[Any, str] | None = None) -> dict[str, dict[str, Any]]:
        """The model as JSON: per skill (by `names`, else str), lambda, offset (c), labels and
        the rms of every level (levels without labels at the skill's own)."""
        out: dict[str, dict[str, Any]] = {}
        for skill, m_skill in self.per_skill.items():
            levels = self.per_level.get(skill, {})
            out[(names or {}).get(skill, str(skill))] = {
                "lambda": self.lines[skill][0],
                "offset": self.lines[skill][1],
                "labels": self.labels_per_skill[skill],
                "rms": {str(lv): math.sqrt(levels.get(lv, m_skill)) for lv in range(1, 6)},
            }
        return out


def prediction_line(pairs: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(lambda, c): the least-squares line Y ~ lambda Yhat + c over (Y, Yhat) pairs, the slope
    clipped to [0, 1] and c = mean Y - lambda mean Yhat refitted for it; slope 0 when Yhat
    does not vary (e.g. (2, 2), (4, 3), (3, 4): slope (1/3) / (2/3) = 0.5, c = 1.5)."""
    n = len(pairs)
    mean_y = sum(y for y, _ in pairs) / n
    mean_v = sum(v for _, v in pairs) / n
    var_v = sum((v - mean_v) ** 2 for _, v in pairs) / n
    cov = sum((y - mean_y) * (v - mean_v) for y, v in pairs) / n
    slope = min(max(cov / var_v, 0.0), 1.0) if var_v > 0 else 0.0
    return slope, mean_y - slope * mean_v


def calibration_fit(
    yhat: Sequence[Mapping[Any, float]],
    labels: Sequence[Mapping[Any, float]],
    *,
    shrinkage: float = SHRINKAGE,
) -> CalibrationModel | None:
    """The calibration model from the frame responses' judge scores per skill (`yhat`) and
    the labels so far (aligned; only the labeled responses count); None without a labeled
    response."""
    pairs: dict[Any, list[tuple[float, float]]] = {}
    labeled_responses = 0
    for scores, known in zip(yhat, labels, strict=True):
        seen = False
        for skill, value in scores.items():
            if skill in known:
                pairs.setdefault(skill, []).append((known[skill], value))
                seen = True
        labeled_responses += seen
    if not pairs:
        return None
    every = [p for skill_pairs in pairs.values() for p in skill_pairs]
    pooled = prediction_line(every)
    lines = {skill: prediction_line(ps) if len(ps) >= 2 else pooled for skill, ps in pairs.items()}
    frame_values: dict[Any, list[float]] = {}
    for scores in yhat:
        for skill, value in scores.items():
            frame_values.setdefault(skill, []).append(value)
    edges = {
        skill: found
        for skill in pairs
        if (found := level_edges(frame_values.get(skill, []))) is not None
    }
    squared = {
        skill: [
            ((y - lines[skill][0] * v - lines[skill][1]) ** 2, level_of(v, edges.get(skill)))
            for y, v in ps
        ]
        for skill, ps in pairs.items()
    }
    overall = sum(r for rows in squared.values() for r, _ in rows) / len(every)
    per_skill: dict[Any, float] = {}
    per_level: dict[Any, dict[int, float]] = {}
    for skill, rows in squared.items():
        m_skill = (sum(r for r, _ in rows) + shrinkage * overall) / (len(rows) + shrinkage)
        per_skill[skill] = m_skill
        by_level: dict[int, list[float]] = {}
        for r, level in rows:
            by_level.setdefault(level, []).append(r)
        per_level[skill] = {
            level: (sum(rs) + shrinkage * m_skill) / (len(rs) + shrinkage)
            for level, rs in by_level.items()
        }
    return CalibrationModel(
        overall=overall,
        per_skill=per_skill,
        per_level=per_level,
        lines=lines,
        labels_per_skill={skill: len(ps) for skill, ps in pairs.items()},
        labeled_responses=labeled_responses,
        edges=edges,
    )


def calibration(
    yhat: Sequence[Mapping[Any, float]],
    labels: Sequence[Mapping[Any, float]],
    targets: Sequence[int],
    *,
    samples: Values | None = None,
    names: Mapping[Any, str] | None = None,
    min_labels: int = MIN_CALIBRATION_LABELS,
    shrinkage: float = SHRINKAGE,
) -> Uncertainty:
    """The calibration figure of the frame responses `targets` (indices into `yhat`),
    fitted on every labeled frame response; with fewer than `min_labels` labeled responses,
    the spread of `samples` (aligned with the frame), else uniform, with the reason."""
    model = calibration_fit(yhat, labels, shrinkage=shrinkage)
    n = model.labeled_responses if model else 0
    if model is None or n < min_labels:
        why = (
            f"calibration needs {min_labels} labeled responses, there are {n}: "
            if n
            else f"calibration needs {min_labels} labeled responses, there is none yet: "
        )
        fallback = (
            spread([samples[i] for i in targets])
            if samples is not None
            else _uniform(len(targets), "")
        )
        if fallback.source == "spread":
            return Uncertainty(fallback.values, "spread", why + "the spread of the samples")
        return _uniform(
            len(targets), why + "drawn uniformly (" + (fallback.note or "no samples") + ")"
        )
    figures: list[float | None] = []
    for i in targets:
        rms = [model.rms(skill, value) for skill, value in yhat[i].items()]
        figures.append(sum(rms) / len(rms) if rms else None)
    values = _filled(figures)
    fit = model.fit(names)
    if values is None:
        return Uncertainty(
            np.ones(len(targets)),
            "uniform",
            "the calibration model expects the same error on every response of the batch: "
            "drawn uniformly",
            labels=n,
            fit=fit,
        )
    return Uncertainty(values, "calibration", labels=n, fit=fit)


def uncertainty(
    source: str,
    *,
    samples: Values,
    means: Values,
    labels: Sequence[Mapping[Any, float]],
    targets: Sequence[int],
    names: Mapping[Any, str] | None = None,
    min_labels: int = MIN_CALIBRATION_LABELS,
    shrinkage: float = SHRINKAGE,
) -> Uncertainty:
    """The figures of the frame responses `targets` (indices into the aligned `samples`,
    `means` and `labels`) from `source` ("spread", "judges" or "calibration"), with its
    fallbacks."""
    if source == "spread":
        return spread([samples[i] for i in targets])
    if source == "judges":
        return judges([means[i] for i in targets])
    if source == "calibration":
        yhat = [{skill: float(np.mean(v)) for skill, v in m.items() if v} for m in means]
        return calibration(
            yhat,
            labels,
            targets,
            samples=samples,
            names=names,
            min_labels=min_labels,
            shrinkage=shrinkage,
        )
    raise ValueError(f"unknown source {source!r}: one of {', '.join(SOURCES)}")


# --- batches ----------------------------------------------------------------------------------


def batch_budget(remaining: float, size: int, undecided: int) -> float:
    """The expected draws of a batch deciding `size` of the `undecided` responses when
    `remaining` of the budget is left: the remaining budget shared over the remaining
    batches in proportion to their sizes, remaining * size / undecided (at most `size`)."""
    if not 0 < size <= undecided:
        raise ValueError("a batch decides between 1 and the undecided responses")
    return min(float(size), max(remaining, 0.0) * size / undecided)


def draw(pi: Array, *, seed: int, batch: int) -> npt.NDArray[np.bool_]:
    """Bernoulli draws with probabilities `pi`, from a generator seeded by (seed, batch):
    the same plan draws the same batch the same way."""
    rng = np.random.default_rng([seed, batch])
    return np.asarray(rng.random(len(pi)) < pi, dtype=np.bool_)


def frame_order(response_ids: Sequence[int], *, seed: int) -> list[int]:
    """The frame in a random order fixed by `seed` (of the ids sorted first, so the order
    does not depend on how they were read)."""
    ids = np.array(sorted(response_ids), dtype=np.int64)
    rng = np.random.default_rng(seed)
    return [int(pk) for pk in ids[rng.permutation(len(ids))]]
