"""How many labels are enough (pure: numpy and analytics.ppi, no Django; docs/LABEL_PLANNING.md).

From a pilot, the human and judge score rows a project already has (analytics.rows), per
skill for one judge:

- the pilot's figures on its labeled responses (a judge score and a mean human score, Y =
  the mean of the response's human values on the skill, N/A left out; Yhat = the judge's
  value): n, the sd of Y (population, as analytics.ppi), the Pearson rho of Y and Yhat, and
  PPI++'s lambda with the frame's other responses as the unlabeled ones;
- the frame a new campaign would cover: the responses the judge scored (optionally narrowed
  to a dataset and models by the caller), T of them;
- the expected error of each frame response for active selection: the pilot's
  |Y - lambda_a Yhat - c_a| calibrated by the judge's score level (bins of the judge's
  value), each bin's mean square shrunk toward the overall one with the weight of
  SHRINK_LABELS labels, so a bin of few labels says little of its own;
- the labels needed for an interval half-width h (people only, uniform PPI++, active
  selection) and the minimum detectable difference between two systems for a budget, each
  computed by analytics.ppi's planning functions on these figures.

lambda_a and c_a, the active design's prediction lambda_a Yhat + c_a, are the least-squares
line of Y on Yhat (lambda_a clipped to [0, 1], c_a refitted): the inverse-probability-
weighted estimator (analytics.ppi.active_mean, which tunes the same two numbers) pays
sum(e^2 (1 - pi) / pi) for the errors e = Y - lambda_a Yhat - c_a around that line, so a
judge's constant bias costs nothing and only the spread of its errors counts.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import numpy.typing as npt

from analytics import ppi
from analytics.minimums import minimum, too_few
from analytics.rows import Row

Array = npt.NDArray[np.float64]

ALPHA = 0.05
POWER = 0.8
DEFAULT_HALF_WIDTH = 0.1
MAX_HALF_WIDTH = 4.0  # the width of the 1-5 scale
DEFAULT_BUDGET = 100
MIN_BUDGET = 2
#: Below this many labeled responses a pilot's figures are shown as rough.
ROUGH_BELOW = 30
#: A bin's mean squared error is shrunk toward the overall one with this many labels' weight.
SHRINK_LABELS = 10
#: Bins of a judge on the 1-5 scale: its value rounded to the nearest level (halves up).
SCALE_EDGES = (1.5, 2.5, 3.5, 4.5)
#: A judge on its own scale is binned by the quintiles of its pilot scores.
OWN_SCALE_QUANTILES = (0.2, 0.4, 0.6, 0.8)
#: Paired differences the pilot needs for their own sd and rho (else sd_y * sqrt(2)): the
#: minimum of a prediction-powered difference between two systems.
DIFFERENCES_MINIMUM = minimum("prediction_powered_difference").n


@dataclass(frozen=True)
class ResidualBin:
    """One judge score level: the pilot's labels in it and the frame's responses in it."""

    label: str
    low: float | None  # included; None: no lower edge
    high: float | None  # excluded; None: no upper edge
    n_labeled: int
    rms: float | None  # the bin's own RMS of |Y - lambda_a Yhat - c_a| (None without labels)
    rms_shrunk: float  # what every frame response in the bin is expected to miss by
    n_frame: int


@dataclass(frozen=True)
class PairedDifferences:
    """The pilot's paired differences between systems on the same item (both responses
    labeled and judged), over every pair of systems, each pair centered on its own mean."""

    n: int
    n_system_pairs: int
    sd: float | None  # pooled within-pair sd of the human differences (population)
    rho: float | None  # pooled within-pair Pearson of the human and judge differences
    n_frame_items: int  # frame items with at least two judged systems


@dataclass(frozen=True)
class SkillPilot:
    skill: str
    n_labeled: int  # labeled responses: judged and with a non-N/A human score
    n_human_na: int  # judged responses whose human scores on the skill are all N/A
    mean_y: float | None
    sd_y: float | None
    rho: float | None
    lam: float | None  # PPI++'s, with the frame's unlabeled responses
    lam_active: float | None
    offset_active: float | None  # the active design's prediction: lam_active Yhat + this
    n_frame: int  # T: the frame's responses the judge scored
    n_frame_labeled: int  # of which already labeled
    bins: tuple[ResidualBin, ...]
    own_scale: bool
    differences: PairedDifferences

    def expected_error(self, yhat: npt.ArrayLike) -> Array:
        """The expected error of responses the judge scored `yhat`: their bins' shrunk RMS."""
        edges = np.array([b.low for b in self.bins[1:]], dtype=np.float64)
        rms = np.array([b.rms_shrunk for b in self.bins], dtype=np.float64)
        values = np.asarray(yhat, dtype=np.float64).reshape(-1)
        return rms[np.searchsorted(edges, values, side="right")]

    def frame_residual_sd(self) -> Array:
        """Every frame response's expected error (its bin's shrunk RMS), in bin order."""
        return np.repeat(
            np.array([b.rms_shrunk for b in self.bins], dtype=np.float64),
            [b.n_frame for b in self.bins],
        )


@dataclass(frozen=True)
class Need:
    """Labels needed by one design: `labels` None with `reachable` False when even labeling
    the whole frame would not reach the half-width; both None when it cannot be computed."""

    labels: int | None
    reachable: bool | None


@dataclass(frozen=True)
class Detectable:
    budget: int
    human: float | None  # people only, from `budget` paired labels
    ppi: float | None  # PPI++ with the judge's differences on the frame's items
    sd: float | None
    rho: float | None
    source: str  # "pilot differences" or "scores" (sd_y * sqrt(2), the judge's rho on scores)


@dataclass(frozen=True)
class SkillPlan:
    skill: str
    pilot: SkillPilot
    half_width: float
    human: Need
    ppi: Need
    active: Need
    detectable: Detectable
    too_few: str  # "" or the reason (analytics.minimums)
    rough: bool
    notes: tuple[str, ...]


# --- the pilot ------------------------------------------------------------------------------


def _human_means(human: Iterable[Row]) -> dict[tuple[int, str], float | None]:
    """(response, skill) -> the mean of its human values, N/A left out (None: all N/A)."""
    sums: dict[tuple[int, str], list[float]] = {}
    for response, _item, _system, skill, _rater, value in human:
        acc = sums.setdefault((response, skill), [0.0, 0.0])
        if value is not None:
            acc[0] += float(value)
            acc[1] += 1
    return {key: (total / count if count else None) for key, (total, count) in sums.items()}


def _pearson(x: Array, y: Array) -> float | None:
    if len(x) < 2 or not (np.std(x) > 0 and np.std(y) > 0):
        return None
    return float(np.corrcoef(x, y)[0, 1])


def least_squares_line(y: Array, yhat: Array) -> tuple[float, float]:
    """(lambda, c) minimising the mean of (Y - lambda Yhat - c)^2 with lambda in [0, 1]:
    lambda = Cov(Y, Yhat) / Var(Yhat) clipped, c = mean(Y) - lambda mean(Yhat)."""
    var = float(np.var(yhat))
    lam = float(np.mean((y - y.mean()) * (yhat - yhat.mean()))) / var if var > 0 else 0.0
    lam = min(max(lam, 0.0), 1.0)
    return lam, float(y.mean() - lam * yhat.mean())


def _edges(yhat: Array, own_scale: bool) -> tuple[float, ...]:
    if not own_scale:
        return SCALE_EDGES
    if len(yhat) == 0:
        return ()
    return tuple(float(q) for q in np.unique(np.quantile(yhat, OWN_SCALE_QUANTILES)))


def _bin_label(index: int, edges: tuple[float, ...], own_scale: bool) -> str:
    if not own_scale:
        return str(index + 1)
    if not edges:
        return "all"
    if index == 0:
        return f"< {edges[0]:g}"
    if index == len(edges):
        return f">= {edges[-1]:g}"
    return f"{edges[index - 1]:g} to < {edges[index]:g}"


def residual_bins(
    residuals: Array, yhat: Array, yhat_frame: Array, *, own_scale: bool = False
) -> tuple[ResidualBin, ...]:
    """The pilot's errors (`residuals` at judge values `yhat`) by judge score level, each
    bin's mean square shrunk toward the overall one: (n_b ms_b + K ms) / (n_b + K) with
    K = SHRINK_LABELS (a bin without labels gets the overall RMS); `yhat_frame` counts the
    frame's responses per bin."""
    edges = _edges(yhat, own_scale)
    overall = float(np.mean(residuals**2)) if len(residuals) else 0.0
    pilot_bin = np.searchsorted(np.array(edges), yhat, side="right")
    frame_bin = np.searchsorted(np.array(edges), yhat_frame, side="right")
    bins = []
    for index in range(len(edges) + 1):
        own = residuals[pilot_bin == index]
        n = len(own)
        ms = float(np.mean(own**2)) if n else None
        shrunk = ((n * ms if ms is not None else 0.0) + SHRINK_LABELS * overall) / (
            n + SHRINK_LABELS
        )
        bins.append(
            ResidualBin(
                label=_bin_label(index, edges, own_scale),
                low=edges[index - 1] if index > 0 else None,
                high=edges[index] if index < len(edges) else None,
                n_labeled=n,
                rms=math.sqrt(ms) if ms is not None else None,
                rms_shrunk=math.sqrt(shrunk),
                n_frame=int(np.sum(frame_bin == index)),
            )
        )
    return tuple(bins)


def paired_differences(
    labeled: dict[int, tuple[int, str, float, float]], frame_items: dict[int, set[str]]
) -> PairedDifferences:
    """`labeled`: response -> (item, system, Y, Yhat); `frame_items`: item -> the systems
    the judge scored in the frame. The differences A - B (systems by name) per item, centered
    on each system pair's own mean and pooled (pairs with at least 2 items)."""
    by_item: dict[int, dict[str, tuple[float, float]]] = {}
    for item, system, y, yhat in labeled.values():
        by_item.setdefault(item, {})[system] = (y, yhat)
    by_pair: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for systems in by_item.values():
        for a, b in combinations(sorted(systems), 2):
            (ya, yha), (yb, yhb) = systems[a], systems[b]
            by_pair.setdefault((a, b), []).append((ya - yb, yha - yhb))
    n = pairs = 0
    ss_d = ss_dhat = cross = 0.0
    for values in by_pair.values():
        if len(values) < 2:
            continue
        d, dhat = np.array(values).T
        d, dhat = d - d.mean(), dhat - dhat.mean()
        ss_d += float(np.sum(d * d))
        ss_dhat += float(np.sum(dhat * dhat))
        cross += float(np.sum(d * dhat))
        n += len(values)
        pairs += 1
    sd = math.sqrt(ss_d / n) if n else None
    rho = cross / math.sqrt(ss_d * ss_dhat) if n >= 2 and ss_d > 0 and ss_dhat > 0 else None
    return PairedDifferences(
        n=n,
        n_system_pairs=pairs,
        sd=sd,
        rho=rho,
        n_frame_items=sum(1 for systems in frame_items.values() if len(systems) >= 2),
    )


def pilot_figures(
    human: Sequence[Row],
    judge: Sequence[Row],
    *,
    judge_name: str,
    frame: Collection[int] | None = None,
    own_scale_skills: Collection[str] = (),
) -> list[SkillPilot]:
    """The pilot of each skill `judge_name` scored (in the order the judge rows first name
    them). `frame`: the response ids a new campaign would cover (None: every response the
    judge scored); `own_scale_skills`: skills the judge scores on its own scale (binned by
    quantiles, not by the 1-5 levels)."""
    means = _human_means(human)
    scored: dict[str, dict[int, tuple[int, str, float]]] = {}
    for response, item, system, skill, rater, value in judge:
        if rater == judge_name and value is not None:
            scored.setdefault(skill, {})[response] = (item, system, float(value))
    return [
        _skill_pilot(skill, responses, means, frame, skill in own_scale_skills)
        for skill, responses in scored.items()
    ]


def _skill_pilot(
    skill: str,
    responses: dict[int, tuple[int, str, float]],
    means: dict[tuple[int, str], float | None],
    frame: Collection[int] | None,
    own_scale: bool,
) -> SkillPilot:
    labeled: dict[int, tuple[int, str, float, float]] = {}
    n_na = 0
    for response in sorted(responses):
        item, system, value = responses[response]
        if (response, skill) not in means:
            continue
        mean = means[(response, skill)]
        if mean is None:
            n_na += 1
        else:
            labeled[response] = (item, system, mean, value)
    in_frame = [r for r in sorted(responses) if frame is None or r in frame]
    y = np.array([v[2] for v in labeled.values()], dtype=np.float64)
    yhat = np.array([v[3] for v in labeled.values()], dtype=np.float64)
    yhat_frame = np.array([responses[r][2] for r in in_frame], dtype=np.float64)
    unlabeled = np.array([responses[r][2] for r in in_frame if r not in labeled], dtype=np.float64)
    frame_items: dict[int, set[str]] = {}
    for r in in_frame:
        frame_items.setdefault(responses[r][0], set()).add(responses[r][1])
    n = len(y)
    enough = n >= 2
    lam_active, offset_active = least_squares_line(y, yhat) if enough else (None, None)
    return SkillPilot(
        skill=skill,
        n_labeled=n,
        n_human_na=n_na,
        mean_y=float(y.mean()) if n else None,
        sd_y=float(y.std()) if enough else None,
        rho=_pearson(y, yhat),
        lam=ppi.power_tuning_lambda(y, yhat, unlabeled) if enough else None,
        lam_active=lam_active,
        offset_active=offset_active,
        n_frame=len(in_frame),
        n_frame_labeled=sum(1 for r in in_frame if r in labeled),
        bins=residual_bins(
            y - (lam_active or 0.0) * yhat - (offset_active or 0.0),
            yhat,
            yhat_frame,
            own_scale=own_scale,
        )
        if enough
        else (),
        own_scale=own_scale,
        differences=paired_differences(labeled, frame_items),
    )


# --- the plan -------------------------------------------------------------------------------


def pilot_too_few(n: int) -> str:
    """The small-sample rule of a pilot: analytics.minimums' "prediction_powered" kind."""
    return too_few("prediction_powered", n)


def skill_plan(
    pilot: SkillPilot,
    *,
    half_width: float = DEFAULT_HALF_WIDTH,
    budget: int = DEFAULT_BUDGET,
    alpha: float = ALPHA,
    power: float = POWER,
) -> SkillPlan:
    """The labels each design needs for `half_width` and the minimum detectable difference
    for `budget` paired labels, from analytics.ppi's planning functions on the pilot."""
    if not 0 < half_width <= MAX_HALF_WIDTH:
        raise ValueError(f"the half-width must be > 0 and at most {MAX_HALF_WIDTH:g}")
    if budget < MIN_BUDGET:
        raise ValueError(f"the budget must be at least {MIN_BUDGET}")
    notes: list[str] = []
    unknown = Need(None, None)
    human = ppi_need = active = unknown
    sd_y, rho, big_t = pilot.sd_y, pilot.rho, pilot.n_frame
    usable_rho = max(rho or 0.0, 0.0)
    if sd_y is not None:
        human = Need(ppi.labels_needed_human(sd_y, half_width, alpha=alpha), True)
        if big_t and human.labels and human.labels > big_t:
            notes.append(
                f"People only needs more labels than the frame's {big_t} responses: the "
                "half-width is out of reach for this frame by people alone."
            )
        if not rho or rho <= 0:
            notes.append(
                "The judge's scores do not correlate positively with people's in the pilot: "
                "PPI++ gives them no weight (lambda 0) and needs as many labels as people only."
            )
        if big_t >= 2:
            found = ppi.labels_needed_ppi(sd_y, usable_rho, big_t, half_width, alpha=alpha)
            ppi_need = Need(found, found is not None)
            found = ppi.labels_needed_active(
                sd_y, pilot.frame_residual_sd(), half_width, alpha=alpha
            )
            active = Need(found, found is not None)
        else:
            notes.append(
                f"The judge scored {big_t} response(s) of the frame: PPI and active selection "
                "need its scores on the responses a campaign covers."
            )
    if pilot.own_scale:
        notes.append(
            "The judge scores this skill on its own scale: its score levels are the quintiles "
            "of its pilot scores."
        )
    detectable = _detectable(pilot, budget, alpha=alpha, power=power, notes=notes)
    reason = pilot_too_few(pilot.n_labeled)
    rough = not reason and pilot.n_labeled < ROUGH_BELOW
    if rough:
        notes.insert(
            0,
            f"Rough: the pilot has {pilot.n_labeled} labeled responses (fewer than "
            f"{ROUGH_BELOW}); its sd and rho, and every figure from them, may be far off.",
        )
    return SkillPlan(
        skill=pilot.skill,
        pilot=pilot,
        half_width=half_width,
        human=human,
        ppi=ppi_need,
        active=active,
        detectable=detectable,
        too_few=reason,
        rough=rough,
        notes=tuple(notes),
    )


def _detectable(
    pilot: SkillPilot, budget: int, *, alpha: float, power: float, notes: list[str]
) -> Detectable:
    diffs = pilot.differences
    if diffs.n >= DIFFERENCES_MINIMUM and diffs.sd is not None:
        sd, rho, source = diffs.sd, diffs.rho, "pilot differences"
    elif pilot.sd_y is not None:
        sd, rho, source = pilot.sd_y * math.sqrt(2), pilot.rho, "scores"
        notes.append(
            f"The pilot has {diffs.n} paired differences between systems (fewer than "
            f"{DIFFERENCES_MINIMUM}): their sd is taken as sd_y x sqrt(2) (two systems' "
            "scores independent on an item) and the judge's rho on them as its rho on scores."
        )
    else:
        return Detectable(budget, None, None, None, None, "scores")
    human = ppi.min_detectable_difference(sd, budget, alpha=alpha, power=power)
    with_judge = None
    if diffs.n_frame_items >= 2:
        with_judge = ppi.min_detectable_difference(
            sd,
            budget,
            rho=max(rho or 0.0, 0.0),
            n_total=diffs.n_frame_items,
            alpha=alpha,
            power=power,
        )
        if budget > diffs.n_frame_items:
            notes.append(
                f"The budget is more than the frame's {diffs.n_frame_items} items with two "
                "judged systems: the judge's scores add nothing past them."
            )
    return Detectable(budget, human, with_judge, sd, rho, source)


def label_plan(
    human: Sequence[Row],
    judge: Sequence[Row],
    *,
    judge_name: str,
    half_width: float = DEFAULT_HALF_WIDTH,
    budget: int = DEFAULT_BUDGET,
    frame: Collection[int] | None = None,
    own_scale_skills: Collection[str] = (),
) -> list[SkillPlan]:
    """`pilot_figures` then `skill_plan` for each skill."""
    return [
        skill_plan(pilot, half_width=half_width, budget=budget)
        for pilot in pilot_figures(
            human, judge, judge_name=judge_name, frame=frame, own_scale_skills=own_scale_skills
        )
    ]
