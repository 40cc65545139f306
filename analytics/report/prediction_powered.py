"""Prediction-powered estimates in the report (pure: numpy, no Django): per judge, skill and
system (and all systems together, system None), the mean human score estimated from
people's scores on the labeled responses and the judge's scores on all of them, beside the
people-only estimate; the paired differences between systems; and the probability of each
system's rank (docs/PREDICTION_POWERED.md).

Units are responses. Y, a response's human score on a skill, is the report's own human
mean (analytics.report.build.human_means: its human scores' mean, N/A left out); Yhat is
the judge's value (None, the judge's N/A, leaves the response out for that judge). Of a
judge's scored responses of a skill, those with a Y are *labeled*, those with no human row
at all are *unlabeled*, and those whose human scores are all N/A are counted in
`n_human_na` and left out (the skill does not apply to them, so they are not in the mean
being estimated).

The figures are analytics.ppi's: PPI++ (`ppi.ppi_mean`), the active-inference IPW estimate
(`ppi.active_mean`), the errors' shares by response (`ppi.ppi_influence`) and
`ppi.rank_probabilities`. A large report has tens of thousands of PPI++ means (72 judges x 6
skills x 20 systems is 9,072 rows and 8,208 differences), and one call of `ppi_mean` costs a
few hundred microseconds of numpy overhead, so `_ppi_many` computes PPI++ for every row at
once with segment sums (np.bincount): `ppi_mean`'s formulas (those of `ppi_python`, which
`ppi_mean` equals within 1e-9), the same numbers to rounding, which
tests/analytics/test_prediction_powered_report.py checks against `ppi.ppi_mean` and
`ppi.ppi_influence` on every row of random reports. The active rows call `ppi.active_mean`
one by one.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from analytics import ppi
from analytics.report import small_samples
from analytics.report.build import human_means
from analytics.rows import Row

Json = dict[str, Any]
Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
#: response id -> (inclusion probability, drawn for people): the sampling designs of the
#: project's active-selection campaigns (annotation.selectors.sampling_design).
Design = Mapping[int, tuple[float, bool]]

#: With more systems than this on a skill, the differences are those of the systems next to
#: each other in the estimated order (n - 1 pairs), not every pair (n (n - 1) / 2): 20
#: systems would give 190 pairs per judge and skill, and 72 judges x 6 skills of them.
ALL_PAIRS_UP_TO = 12

PPI, ACTIVE = "ppi++", "active"


def prediction_powered(
    human: Sequence[Row],
    judges: Sequence[Row],
    *,
    skills: Sequence[str] | None = None,
    design: Design | None = None,
    alpha: float = 0.05,
    draws: int = 4000,
    seed: int = 0,
) -> Json:
    """The prediction-powered figures of the report from its rows (see the module docstring).

    - "prediction_powered": per judge, skill and system (None: all systems together), the
      estimate of the mean human score and its (1 - alpha) interval. Method "ppi++"
      (`ppi.ppi_mean`, power-tuned), or "active" (`ppi.active_mean` over the frame) when
      a response of the group that the judge scored is in `design`'s frame: its labeled
      responses are then those drawn for people and with a Y, its unlabeled ones the rest of
      the frame, its people-only figures the same IPW estimate with lambda 0, and the
      group's responses outside the frame are left out (`n_outside_frame`).
    - "prediction_powered_differences": per judge, skill and pair of systems, the PPI++ mean
      of the per-item difference A - B (labeled items: both responses labeled; unlabeled:
      both scored by the judge, not both labeled). Every pair (A before B by name) when the
      skill has at most ALL_PAIRS_UP_TO systems; with more, only the systems next to each
      other in the estimated order (A the higher); the ranks row says which ("differences":
      "all" or "adjacent").
    - "prediction_powered_ranks": per judge and skill with two systems or more, each
      system's rank by estimate (1 = the highest) and the probability of each rank
      (`ppi.rank_probabilities`, `draws` draws from `seed`) from the joint normal of the
      systems' estimates, whose covariance sums their errors' shares by item (the responses
      of one item share its difficulty); systems without an estimate are "left_out" (all
      of them, and no ranking, when fewer than two have one).

    Rows are sorted by judge, skill (the order of `skills`, else by name) and system. A
    response of a skill outside `skills` is not read."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    z = ppi.z_quantile(alpha)
    names = list(skills) if skills else sorted({r[3] for r in human} | {r[3] for r in judges})
    order = {skill: k for k, skill in enumerate(names)}
    human_by_skill: dict[str, list[Row]] = defaultdict(list)
    for row in human:
        if row[3] in order:
            human_by_skill[row[3]].append(row)
    people = {skill: _People.of(rows) for skill, rows in human_by_skill.items()}
    frame = _Frame.of(design)
    columns = _JudgeColumns.of([r for r in judges if r[3] in order])
    groups = [
        _Scored.of(group, people.get(group.skill), frame)
        for group in sorted(columns.groups(), key=lambda g: (g.judge, order[g.skill]))
    ]
    # every row of every group in one batch, then every difference in another
    means = _Means()
    plans = [_plan_rows(scored, means) for scored in groups]
    figures = means.compute(alpha, z)
    rows: list[Json] = []
    differences = _Means()
    paired: list[tuple[_Scored, list[tuple[str, str]], int]] = []
    ranked: list[tuple[_Scored, _Plan, str]] = []
    for scored, plan in zip(groups, plans, strict=True):
        rows.extend(plan.rows(figures))
        if len(plan.systems) < 2:
            continue
        pairs, mode = _pairs(plan, figures)
        paired.append((scored, pairs, differences.size))
        _plan_differences(scored, pairs, differences)
        ranked.append((scored, plan, mode))
    difference_figures = differences.compute(alpha, z)
    found = [
        row
        for scored, pairs, first in paired
        for row in _difference_rows(scored, pairs, first, difference_figures)
    ]
    ranks = [
        _ranks(scored, plan, mode, figures, alpha=alpha, draws=draws, seed=seed)
        for scored, plan, mode in ranked
    ]
    return small_samples.flag_prediction_powered(
        {
            "prediction_powered": rows,
            "prediction_powered_differences": found,
            "prediction_powered_ranks": ranks,
        }
    )


# --- inputs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _People:
    """One skill's human side: the response ids with a human row (sorted) and each one's Y
    (NaN when all its human scores are N/A)."""

    rids: Ints
    y: Floats

    @classmethod
    def of(cls, rows: Sequence[Row]) -> _People:
        means = human_means(rows)
        rids = np.unique(np.fromiter((r[0] for r in rows), np.int64, len(rows)))
        y = np.fromiter(
            (means[rid][2] if rid in means else math.nan for rid in rids.tolist()),
            np.float64,
            rids.size,
        )
        return cls(rids, y)


@dataclass(frozen=True)
class _Frame:
    """The sampling designs as sorted arrays: response id, inclusion probability, drawn.
    A probability outside (0, 1] leaves its response out of the frame (the IPW estimate
    needs one), so that its group is estimated by PPI++ instead of failing."""

    rids: Ints
    pi: Floats
    drawn: Bools

    @classmethod
    def of(cls, design: Design | None) -> _Frame:
        entries = sorted(
            (rid, float(p), bool(d))
            for rid, (p, d) in (design or {}).items()
            if math.isfinite(p) and 0 < p <= 1
        )
        if not entries:
            return cls(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, bool))
        rids, pi, drawn = zip(*entries, strict=True)
        return cls(np.array(rids, np.int64), np.array(pi), np.array(drawn, bool))


def _lookup(keys: Ints, wanted: Ints) -> tuple[Bools, Ints]:
    """Whether each of `wanted` is in the sorted `keys`, and its index there (0 if not)."""
    if keys.size == 0:
        return np.zeros(wanted.size, bool), np.zeros(wanted.size, np.int64)
    index = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
    return keys[index] == wanted, index


@dataclass(frozen=True)
class _Group:
    """One judge's scored responses of one skill (its N/A left out; a response it scored
    twice counts once, with the mean of its values), by system name and response id."""

    judge: str
    skill: str
    rids: Ints
    items: Ints
    system: Ints  # each response's system, an index into `systems`
    systems: list[str]  # the group's systems, by name
    yhat: Floats


@dataclass(frozen=True)
class _JudgeColumns:
    """The judge rows as columns, read in one pass."""

    rids: Ints
    items: Ints
    system: Ints  # a code into `systems`
    key: Ints  # judge code * number of skills + skill code
    values: Floats  # NaN: N/A (or not a finite number)
    systems: list[str]  # by name
    skills: list[str]
    judges: list[str]

    @classmethod
    def of(cls, rows: Sequence[Row]) -> _JudgeColumns:
        n = len(rows)

        def column(k: int) -> Iterator[Any]:
            return map(itemgetter(k), rows)

        # codes in name order, so that sorting by code sorts by name
        codes = [{name: c for c, name in enumerate(sorted(set(column(k))))} for k in (2, 3, 4)]
        system, skill, judge = (
            np.fromiter(map(found.__getitem__, column(k)), np.int64, n)
            for found, k in zip(codes, (2, 3, 4), strict=True)
        )
        value = np.array(list(column(5)), np.float64).reshape(n)  # None (N/A) becomes NaN
        value[~np.isfinite(value)] = math.nan
        return cls(
            rids=np.fromiter(column(0), np.int64, n),
            items=np.fromiter(column(1), np.int64, n),
            system=system,
            key=judge * len(codes[1]) + skill,
            values=value,
            systems=list(codes[0]),
            skills=list(codes[1]),
            judges=list(codes[2]),
        )

    def groups(self) -> Iterator[_Group]:
        """Each (judge, skill)'s scored responses by system and response id: one sort of
        every row, then slices."""
        scored = np.flatnonzero(~np.isnan(self.values))
        if scored.size == 0:
            return
        order = scored[np.lexsort((self.rids[scored], self.system[scored], self.key[scored]))]
        key = self.key[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        ends = np.r_[starts[1:], key.size]
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
            at = order[start:end]
            judge, skill = divmod(int(key[start]), len(self.skills))
            rids, yhat = self.rids[at], self.values[at]
            items, codes = self.items[at], self.system[at]
            if rids.size > 1 and np.unique(rids).size < rids.size:
                # a response scored twice (a run's and an import's): the mean of its values
                ids, first, inverse = np.unique(rids, return_index=True, return_inverse=True)
                yhat = np.bincount(inverse, weights=yhat) / np.bincount(inverse)
                again = np.lexsort((ids, codes[first]))
                rids, yhat, items, codes = (
                    ids[again],
                    yhat[again],
                    items[first][again],
                    codes[first][again],
                )
            present, system = np.unique(codes, return_inverse=True)
            yield _Group(
                judge=self.judges[judge],
                skill=self.skills[skill],
                rids=rids,
                items=items,
                system=system.astype(np.int64),
                systems=[self.systems[c] for c in present.tolist()],
                yhat=yhat,
            )


@dataclass(frozen=True)
class _Scored:
    """A (judge, skill) group with its human side: each scored response's Y (NaN when it
    has none), whether it is labeled, unlabeled or human-N/A, and its place in the frame."""

    group: _Group
    y: Floats
    labeled: Bools
    unlabeled: Bools
    human_na: Bools
    in_frame: Bools
    pi: Floats
    drawn: Bools

    @classmethod
    def of(cls, group: _Group, people: _People | None, frame: _Frame) -> _Scored:
        n = group.rids.size
        if people is None or people.rids.size == 0:
            present, y = np.zeros(n, bool), np.full(n, math.nan)
        else:
            present, at = _lookup(people.rids, group.rids)
            y = np.where(present, people.y[at], math.nan)
        labeled = ~np.isnan(y)
        in_frame, where = _lookup(frame.rids, group.rids)
        pi, drawn = np.ones(n), np.zeros(n, bool)
        if frame.rids.size:
            pi = np.where(in_frame, frame.pi[where], 1.0)
            drawn = in_frame & frame.drawn[where]
        return cls(group, y, labeled, ~present, present & ~labeled, in_frame, pi, drawn)


# --- the batch of means ---------------------------------------------------------------------


@dataclass
class _Means:
    """Many means estimated at once: each a *segment* (an integer id), its PPI++ responses
    (labeled: Y, Yhat; unlabeled: Yhat) or its active frame (Yhat, pi, drawn-and-labeled,
    Y), each response with its item (for the errors' shares by item)."""

    size: int = 0
    active: list[bool] = field(default_factory=list)
    labeled: list[tuple[Ints, Floats, Floats, Ints]] = field(default_factory=list)
    unlabeled: list[tuple[Ints, Floats, Ints]] = field(default_factory=list)
    framed: list[tuple[Ints, Floats, Floats, Bools, Floats, Ints]] = field(default_factory=list)

    def new(self, count: int, active: Sequence[bool]) -> int:
        """Reserve `count` segments (their methods: `active`); returns the first id."""
        first = self.size
        self.size += count
        self.active.extend(active)
        return first

    def add_ppi(
        self, segment: Ints, y: Floats, yhat: Floats, items: Ints, unlabeled: Bools
    ) -> None:
        """Responses of PPI++ segments: the labeled ones' (y, yhat) where `unlabeled` is
        false, the unlabeled ones' yhat where it is true."""
        known = ~unlabeled
        self.labeled.append((segment[known], y[known], yhat[known], items[known]))
        self.unlabeled.append((segment[unlabeled], yhat[unlabeled], items[unlabeled]))

    def add_active(
        self, segment: Ints, yhat: Floats, pi: Floats, xi: Bools, y: Floats, items: Ints
    ) -> None:
        self.framed.append((segment, yhat, pi, xi, np.where(xi, y, 0.0), items))

    def compute(self, alpha: float, z: float) -> _Figures:
        g = self.size
        lab = _concat(self.labeled, 4)
        unl = _concat(self.unlabeled, 3)
        act = _concat(self.framed, 6)
        found = _Figures.empty(g, np.array(self.active, bool), z)
        ppi_segments = _ppi_many(lab[0], lab[1], lab[2], unl[0], unl[1], g, found)
        found.shares.append((lab[0], lab[3], ppi_segments[0]))
        found.shares.append((unl[0], unl[2], ppi_segments[1]))
        active_shares = _active_many(act[0], act[1], act[2], act[3], act[4], found, alpha)
        found.shares.append((act[0], act[5], active_shares))
        # sorted by segment (`_ranks` slices them): they are, in the order the groups and
        # their systems were added; sorted here should a caller ever add them otherwise
        for k, (segment, items, share) in enumerate(found.shares):
            if segment.size and bool(np.any(segment[1:] < segment[:-1])):
                by = np.argsort(segment, kind="stable")
                found.shares[k] = (segment[by], items[by], share[by])
        found.json = found.columns()
        return found


def _concat(parts: list[Any], width: int) -> list[Any]:
    if not parts:
        return [np.zeros(0, np.int64 if k in (0, width - 1) else np.float64) for k in range(width)]
    return [np.concatenate([p[k] for p in parts]) for k in range(width)]


@dataclass
class _Figures:
    """Per segment: the estimate and its people-only counterpart (NaN where none), and the
    errors' shares of each response (segment, item, share; their squares sum to se^2)."""

    active: Bools
    estimate: Floats
    se: Floats
    human: Floats
    human_se: Floats
    lam: Floats
    n_labeled: Ints
    n_unlabeled: Ints
    effective_n: Floats
    z: float
    shares: list[tuple[Ints, Ints, Floats]] = field(default_factory=list)
    # per segment, the interval's quantile where it is not z (an active row's Student t:
    # `ppi.active_mean` with lambda and the offset tuned); NaN: z
    quantile: Floats = field(default_factory=lambda: np.zeros(0))
    human_quantile: Floats = field(default_factory=lambda: np.zeros(0))
    json: list[Json] = field(default_factory=list)  # `columns()`, once computed

    @classmethod
    def empty(cls, g: int, active: Bools, z: float) -> _Figures:
        def nan() -> Floats:
            return np.full(g, math.nan)

        zero = np.zeros(g, np.int64)
        found = cls(active, nan(), nan(), nan(), nan(), nan(), zero, zero.copy(), nan(), z)
        found.quantile, found.human_quantile = nan(), nan()
        return found

    def columns(self) -> list[Json]:
        """Every segment's figures, JSON-safe (None for NaN), one dict each."""
        z = self.z
        quantile = np.where(np.isnan(self.quantile), z, self.quantile)
        human_quantile = np.where(np.isnan(self.human_quantile), z, self.human_quantile)
        half, human_half = quantile * self.se, human_quantile * self.human_se
        found = {
            "estimate": self.estimate,
            "ci_low": self.estimate - half,
            "ci_high": self.estimate + half,
            "se": self.se,
            "human_only_estimate": self.human,
            "human_only_ci_low": self.human - human_half,
            "human_only_ci_high": self.human + human_half,
            "lambda": self.lam,
        }
        lists = {key: _json_list(values) for key, values in found.items()}
        lists["n_labeled"] = self.n_labeled.tolist()
        lists["n_unlabeled"] = self.n_unlabeled.tolist()
        lists["effective_n"] = _json_list(self.effective_n)
        keys = list(lists)
        return [
            dict(zip(keys, values, strict=True)) for values in zip(*lists.values(), strict=True)
        ]


def _json_list(values: Floats) -> list[float | None]:
    """The values as Python floats, None for NaN and infinities."""
    clean = np.where(np.isfinite(values), values, math.nan).tolist()
    return [None if v != v else v for v in clean]


def _seg_mean(segment: Ints, values: Floats, count: Floats, g: int) -> Floats:
    with np.errstate(invalid="ignore", divide="ignore"):
        out: Floats = np.bincount(segment, weights=values, minlength=g) / count
    return out


def _ppi_many(
    seg: Ints,
    y: Floats,
    yhat: Floats,
    seg_u: Ints,
    yhat_u: Floats,
    g: int,
    out: _Figures,
) -> tuple[Floats, Floats]:
    """`ppi.ppi_mean` (lam=None) of every segment with PPI++ responses, into `out`, and
    the shares of its error by labeled and unlabeled response (`ppi.ppi_influence`)."""
    n = np.bincount(seg, minlength=g).astype(np.float64)
    big_n = np.bincount(seg_u, minlength=g).astype(np.float64)
    y_mean, yhat_mean = _seg_mean(seg, y, n, g), _seg_mean(seg, yhat, n, g)
    dy, dyhat = y - y_mean[seg], yhat - yhat_mean[seg]
    var_y = _seg_mean(seg, dy * dy, n, g)
    cov = _seg_mean(seg, dy * dyhat, n, g)
    unlabeled_mean = _seg_mean(seg_u, yhat_u, big_n, g)
    # lambda: Cov(Y, Yhat) / ((1 + n/N) Var(all Yhat, ddof 1)), clipped to [0, 1]
    total = n + big_n
    all_mean = _seg_mean(np.r_[seg, seg_u], np.r_[yhat, yhat_u], total, g)  # the mean of every Yhat
    spread = np.bincount(seg, weights=(yhat - all_mean[seg]) ** 2, minlength=g) + np.bincount(
        seg_u, weights=(yhat_u - all_mean[seg_u]) ** 2, minlength=g
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        var_all = spread / (total - 1)
        lam = cov / ((1 + n / big_n) * var_all)
    tuned = (n >= 2) & (big_n > 0) & (var_all > 0)
    lam = np.where(tuned, np.clip(np.nan_to_num(lam), 0.0, 1.0), 0.0)
    rectified = y - lam[seg] * yhat
    rectified_mean = _seg_mean(seg, rectified, n, g)
    rectified_dev = rectified - rectified_mean[seg]
    var_rectified = _seg_mean(seg, rectified_dev**2, n, g)
    unlabeled_dev = yhat_u - unlabeled_mean[seg_u]
    var_unlabeled = _seg_mean(seg_u, unlabeled_dev**2, big_n, g)
    with np.errstate(invalid="ignore", divide="ignore"):
        imputed = np.where(big_n > 0, lam * unlabeled_mean, 0.0)
        imputed_var = np.where(big_n > 0, lam**2 * var_unlabeled / big_n, 0.0)
        se = np.sqrt(imputed_var + var_rectified / n)
        effective = np.where(se > 0, var_y / se**2, math.nan)
        human_se = np.sqrt(var_y) / np.sqrt(n)
    mine = ~out.active & (n >= 2)
    out.estimate[mine] = (imputed + rectified_mean)[mine]
    out.se[mine] = se[mine]
    out.human[mine] = y_mean[mine]
    out.human_se[mine] = human_se[mine]
    out.lam[mine] = lam[mine]
    out.effective_n[mine] = effective[mine]
    ppi_rows = ~out.active
    out.n_labeled[ppi_rows] = n[ppi_rows]
    out.n_unlabeled[ppi_rows] = big_n[ppi_rows]
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = rectified_dev / n[seg]
        shares_u = lam[seg_u] * unlabeled_dev / big_n[seg_u]
    return shares, shares_u


def _active_many(
    seg: Ints,
    yhat: Floats,
    pi: Floats,
    xi: Bools,
    y: Floats,
    out: _Figures,
    alpha: float,
) -> Floats:
    """`ppi.active_mean` of every active segment (its frame's responses, tuned; lambda 0
    for the people-only figures), into `out`, and the shares of its error by response:
    (t - mean t) / N, t the estimate's terms g + (Y - g) xi / pi with g = lambda Yhat +
    offset as `active_mean` tuned them (their squares sum to se^2). The effective n is
    Var(Y) / se^2, Var(Y) the inverse-probability-weighted variance of the labeled Y (the
    drawn responses are not a uniform sample). One call per active row: the active
    estimator is this project's (its offset), so it is not repeated here."""
    shares = np.zeros(seg.size)
    if seg.size == 0:
        return shares
    order = np.argsort(seg, kind="stable")
    sorted_seg = seg[order]
    starts = np.flatnonzero(np.r_[True, sorted_seg[1:] != sorted_seg[:-1]])
    ends = np.r_[starts[1:], seg.size]
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        at = order[start:end]
        segment = int(sorted_seg[start])
        f_yhat, f_pi, f_xi, f_y = yhat[at], pi[at], xi[at], y[at]
        est = ppi.active_mean(f_yhat, f_pi, f_xi, f_y, alpha=alpha)
        out.n_labeled[segment] = est.n_labeled
        out.n_unlabeled[segment] = est.n_frame - est.n_labeled
        people = ppi.active_mean(f_yhat, f_pi, f_xi, f_y, alpha=alpha, lam=0.0)
        out.human[segment] = math.nan if people.estimate is None else people.estimate
        out.human_se[segment] = math.nan if people.se is None else people.se
        if people.se and people.estimate is not None and people.ci_high is not None:
            out.human_quantile[segment] = (people.ci_high - people.estimate) / people.se
        if est.estimate is None or est.se is None or est.lam is None:
            continue
        out.estimate[segment], out.se[segment], out.lam[segment] = est.estimate, est.se, est.lam
        if est.se > 0 and est.ci_high is not None:
            out.quantile[segment] = (est.ci_high - est.estimate) / est.se
        w = np.where(f_xi, 1.0 / f_pi, 0.0)
        if est.se > 0:
            labeled_y, weight = f_y[f_xi], w[f_xi]
            centre = float(np.average(labeled_y, weights=weight))
            var_y = float(np.average((labeled_y - centre) ** 2, weights=weight))
            out.effective_n[segment] = var_y / est.se**2
        g = est.lam * f_yhat + (est.offset or 0.0)
        terms = g + (np.where(f_xi, f_y, 0.0) - g) * w
        plain = float(terms.std()) / math.sqrt(terms.size)
        # scaled as the estimate's se is (n / (n - p)): their squares still sum to se^2
        scale = est.se / plain if plain > 0 else 1.0
        shares[at] = (terms - terms.mean()) / terms.size * scale
    return shares


def _num(value: float | np.floating[Any] | None) -> float | None:
    """JSON-safe: None for a missing or non-finite number."""
    return None if value is None or not math.isfinite(value) else float(value)


# --- per system -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """A (judge, skill) group's rows in the batch: segment `first` is all systems together,
    `first + 1 + k` system k (`systems`, by name)."""

    scored: _Scored
    first: int
    systems: list[str]
    judge_means: list[float | None]
    human_na: list[int]
    outside_frame: list[int]  # an active row's responses left out (outside every frame)

    def rows(self, figures: _Figures) -> list[Json]:
        group = self.scored.group
        out = []
        for k, system in enumerate([None, *self.systems]):
            segment = self.first + k
            found = dict(figures.json[segment])
            out.append(
                {
                    "judge": group.judge,
                    "skill": group.skill,
                    "system": system,
                    "method": ACTIVE if figures.active[segment] else PPI,
                    **found,
                    "judge_mean": self.judge_means[k],
                    "width_ratio": _width_ratio(found),
                    "n_human_na": self.human_na[k],
                    "n_outside_frame": self.outside_frame[k],
                    "too_few": None,
                }
            )
        return out

    def estimate(self, figures: _Figures, k: int) -> float | None:
        """System k's estimate (None if it has none)."""
        return _num(figures.estimate[self.first + 1 + k])


def _plan_rows(scored: _Scored, means: _Means) -> _Plan:
    """Add the group's rows to the batch: all systems together, then each system. A row is
    "active" when a response of it that the judge scored is in a sampling design's frame:
    its labels were then drawn with unequal probabilities, and PPI++ (which takes labels
    for a uniform sample) would be biased. The active estimate is over the frame's decided
    responses (a uniform random part of the frame, since a plan decides its frame in a
    seeded random order); the row's responses outside the frame are left out and counted
    in `n_outside_frame`."""
    group = scored.group
    k = len(group.systems)
    system = group.system
    inside = np.bincount(system, weights=scored.in_frame, minlength=k)
    outside = np.bincount(system, weights=~scored.in_frame, minlength=k)
    active = [bool(inside.sum()), *(inside > 0).tolist()]
    n_outside = [
        int(outside.sum()) if active[0] else 0,
        *[int(o) if a else 0 for o, a in zip(outside.tolist(), active[1:], strict=True)],
    ]
    first = means.new(k + 1, active)
    keep = ~scored.human_na
    counted = np.bincount(system, weights=keep, minlength=k)
    sums = np.bincount(system, weights=np.where(keep, group.yhat, 0.0), minlength=k)
    judge_means = [
        _num(sums.sum() / counted.sum()) if counted.sum() else None,
        *[_num(s / c) if c else None for s, c in zip(sums.tolist(), counted.tolist(), strict=True)],
    ]
    human_na = np.bincount(system, weights=scored.human_na, minlength=k).astype(int).tolist()
    human_na = [sum(human_na), *human_na]
    # each response twice: in the row of all systems, and in its system's
    everything = np.full(group.rids.size, active[0])
    by_system = np.array(active[1:], bool)[system]
    for segment, is_active in (
        (np.full(group.rids.size, first, np.int64), everything),
        (first + 1 + system, by_system),
    ):
        ppi_part = keep & ~is_active
        means.add_ppi(
            segment[ppi_part],
            scored.y[ppi_part],
            group.yhat[ppi_part],
            group.items[ppi_part],
            scored.unlabeled[ppi_part],
        )
        framed = keep & is_active & scored.in_frame
        if framed.any():
            means.add_active(
                segment[framed],
                group.yhat[framed],
                scored.pi[framed],
                (scored.drawn & scored.labeled)[framed],
                scored.y[framed],
                group.items[framed],
            )
    return _Plan(scored, first, list(group.systems), judge_means, human_na, n_outside)


def _width_ratio(figures: Json) -> float | None:
    """The estimate's interval width over the people-only one's (None if either is
    missing or the people-only one has no width)."""
    low, high = figures["ci_low"], figures["ci_high"]
    human_low, human_high = figures["human_only_ci_low"], figures["human_only_ci_high"]
    if low is None or high is None or human_low is None or human_high is None:
        return None
    if not human_high > human_low:
        return None
    return _num((high - low) / (human_high - human_low))


# --- differences ----------------------------------------------------------------------------


def _pairs(plan: _Plan, figures: _Figures) -> tuple[list[tuple[str, str]], str]:
    """The pairs of systems compared, and which ("all" or "adjacent"): every pair by name
    up to ALL_PAIRS_UP_TO systems; beyond, the neighbours in the estimated order, best
    first (systems without an estimate left out)."""
    if len(plan.systems) <= ALL_PAIRS_UP_TO:
        return list(combinations(plan.systems, 2)), "all"
    estimated = [
        (value, name)
        for k, name in enumerate(plan.systems)
        if (value := plan.estimate(figures, k)) is not None
    ]
    chain = [name for _, name in sorted(estimated, key=lambda e: (-e[0], e[1]))]
    return list(zip(chain, chain[1:], strict=False)), "adjacent"


def _plan_differences(scored: _Scored, pairs: Sequence[tuple[str, str]], means: _Means) -> None:
    """Add the group's pairs to the batch: per pair, PPI++ on the per-item differences.
    Per (item, system), over its responses the judge scored (human-N/A ones left out): Yhat
    is the mean of their judge values, Y the mean of their Y; it is labeled when every one
    of them has a Y."""
    first = means.new(len(pairs), [False] * len(pairs))
    if not pairs:
        return
    group = scored.group
    keep = ~scored.human_na
    items, item_code = np.unique(group.items[keep], return_inverse=True)
    k, n_items = len(group.systems), items.size
    cell = group.system[keep] * n_items + item_code
    labeled = scored.labeled[keep]
    count = np.bincount(cell, minlength=k * n_items)
    labeled_count = np.bincount(cell, weights=labeled, minlength=k * n_items)
    yhat_sum = np.bincount(cell, weights=group.yhat[keep], minlength=k * n_items)
    y_sum = np.bincount(cell, weights=np.where(labeled, scored.y[keep], 0.0), minlength=k * n_items)
    judged = (count > 0).reshape(k, n_items)
    full = judged & (labeled_count == count).reshape(k, n_items)
    with np.errstate(invalid="ignore", divide="ignore"):
        yhat = (yhat_sum / count).reshape(k, n_items)
        y = (y_sum / labeled_count).reshape(k, n_items)
    code = {name: i for i, name in enumerate(group.systems)}
    a = np.array([code[p] for p, _ in pairs], np.int64)
    b = np.array([code[q] for _, q in pairs], np.int64)
    both = full[a] & full[b]
    some = judged[a] & judged[b]
    pair, item = np.nonzero(some)
    means.add_ppi(
        first + pair,
        y[a[pair], item] - y[b[pair], item],
        yhat[a[pair], item] - yhat[b[pair], item],
        items[item],
        ~both[pair, item],
    )


def _difference_rows(
    scored: _Scored, pairs: Sequence[tuple[str, str]], first: int, figures: _Figures
) -> list[Json]:
    group = scored.group
    out = []
    for k, (a, b) in enumerate(pairs):
        found = dict(figures.json[first + k])
        found.pop("se")
        out.append(
            {
                "judge": group.judge,
                "skill": group.skill,
                "system_a": a,
                "system_b": b,
                "method": PPI,
                **found,
                "too_few": None,
            }
        )
    return out


# --- ranks ----------------------------------------------------------------------------------


def _ranks(
    scored: _Scored,
    plan: _Plan,
    mode: str,
    figures: _Figures,
    *,
    alpha: float,
    draws: int,
    seed: int,
) -> Json:
    """The systems' ranks from their estimates' joint normal (see `prediction_powered`):
    the covariance of systems s and t is the sum over items of s's error shares on the item
    times t's (a system's responses of one item summed)."""
    group = scored.group
    values = [plan.estimate(figures, k) for k in range(len(plan.systems))]
    ranked = [k for k, value in enumerate(values) if value is not None]
    found: Json = {
        "judge": group.judge,
        "skill": group.skill,
        "n_draws": draws,
        "differences": mode,
        "systems": [],
        "left_out": [plan.systems[k] for k, value in enumerate(values) if value is None],
    }
    if len(ranked) < 2:
        found["left_out"] = list(plan.systems)
        return found
    segments = np.array([plan.first + 1 + k for k in ranked], np.int64)
    items = np.unique(group.items)
    shares = np.zeros((len(ranked), items.size))
    for segment, item, share in figures.shares:
        # the shares of this group's systems: a segment's rows are contiguous in the batch
        low, high = np.searchsorted(segment, [segments[0], segments[-1] + 1])
        if low == high:
            continue
        place = np.searchsorted(segments, segment[low:high])
        hit = segments[np.minimum(place, len(segments) - 1)] == segment[low:high]
        column = np.searchsorted(items, item[low:high])
        np.add.at(shares, (place[hit], column[hit]), share[low:high][hit])
    cov = shares @ shares.T
    estimates = np.array([values[k] for k in ranked], np.float64)
    result = ppi.rank_probabilities(estimates, cov, draws=draws, alpha=alpha, seed=seed)
    systems = [
        {
            "system": plan.systems[k],
            "estimate": values[k],
            "rank": 1 + int(np.count_nonzero(estimates > estimates[i])),
            "rank_low": result.rank_low[i],
            "rank_high": result.rank_high[i],
            "rank_probabilities": result.probabilities[i],
        }
        for i, k in enumerate(ranked)
    ]
    found["systems"] = sorted(systems, key=lambda s: (s["rank"], s["system"]))
    return found
