"""The analytics report: agreement among people and human-judge correlation, per skill.

Units are responses. A response's human score on a skill is the mean of its human scores
(N/A left out, counted apart), computed from the integer sum and count so that equal means
are equal floats; per-system means are summed as exact fractions for the same reason (a
tie between systems must stay a tie, or system-level ranks move). All coefficients come
from analytics.metrics (see there for the libraries used and the published examples).

The report is one JSON-ready dict; `manage.py analytics_report` and the API return it as is.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from itertools import combinations
from typing import Any, Literal, NotRequired, TypedDict

import numpy as np
import numpy.typing as npt

from analytics import bootstrap, metrics
from analytics.report import resampled, small_samples, wide_tables
from analytics.rows import Row

#: A response's exact human total: an int for whole scores, else a Fraction.
Total = int | Fraction
#: `human_means`' values: (item id, system, mean, exact total, count).
HumanMean = tuple[int, str, float, Total, int]
#: The report and its parts: JSON-ready dicts keyed by figure, skill, judge or system. Their
#: values are nested JSON of many shapes that chart_data and the templates read by key, so
#: they stay Any here; the fixed shapes built below have TypedDicts.
Json = dict[str, Any]
#: `_icc_design`: the (units x k) scores, the units' columns, whether the design is complete.
IccDesign = tuple[npt.NDArray[np.float64], npt.NDArray[np.intp], bool]


class PairwiseSpearman(TypedDict):
    value: float | None
    pairs: int
    units: int  # the distinct responses the pairs cover: its n (docs/SMALL_SAMPLES.md)


class LooCeiling(TypedDict):
    pearson: float | None
    spearman: float | None
    annotators: int
    units: int  # the distinct responses the annotators cover: its n


class JudgeStanding(TypedDict):
    mean: float | None
    n: NotRequired[int]  # the judge's responses of the system (N/A left out)
    rank: NotRequired[int | None]


class LeaderboardRow(TypedDict):
    system: str
    n: int
    humans: float | None
    judges: dict[str, JudgeStanding]
    humans_rank: NotRequired[int | None]


LIKERT = [1, 2, 3, 4, 5]


def _clean(value: object) -> object:
    """JSON-safe: NaN and infinities become None; numpy scalars become Python numbers."""
    if isinstance(value, dict):
        return _clean_dict(value)
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _clean_dict(value: Mapping[str, object]) -> Json:
    """`_clean` of a dict (the report and its parts)."""
    return {k: _clean(v) for k, v in value.items()}


def _by_skill(rows: Iterable[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        grouped[row[3]].append(row)
    return grouped


# --- agreement among people ---------------------------------------------------------------


def agreement(
    rows: Sequence[Row], *, resamples: int = 0, resampler: bootstrap.Resampler | None = None
) -> Json:
    """Agreement of the human scores of one skill (rows of that skill only). With
    `resamples` (or a shared `resampler`, whose `run()` the caller owns), item-resampling
    intervals for every figure (`*_ci` keys)."""
    matrix, raters, unit_items, na = _reliability_matrix(rows)
    rated = np.sum(~np.isnan(matrix), axis=0)
    result: Json = {
        "n_units": int(np.sum(rated >= 2)),
        "n_raters": len(raters),
        "n_scores": int(np.sum(rated)),
        "n_na": na,
    }
    own = None
    if resamples and resampler is None:
        resampler = own = bootstrap.Resampler(unit_items[rated >= 1], resamples=resamples)
    if resampler is not None:
        # The intervals' coincidence matrices give alpha's point estimates too: the same
        # numbers as the krippendorff library (tests/analytics/test_bootstrap.py and
        # test_report.py compare them), without computing them a second time.
        resampled.alpha_register(
            resampler, matrix, unit_items, sink=result, key="krippendorff_alpha_ci"
        )

        def alpha_estimates() -> None:
            result["krippendorff_alpha"] = {
                level: ci["estimate"] for level, ci in result["krippendorff_alpha_ci"].items()
            }

        resampler.on_done(alpha_estimates)
    else:
        result["krippendorff_alpha"] = {
            level: metrics.krippendorff_alpha(matrix, level) for level in metrics.ALPHA_LEVELS
        }
    # On the 1-5 scale every level counts as a category, used or not (Gwet's q).
    values = matrix[~np.isnan(matrix)]
    scale = LIKERT if values.size and np.isin(values, LIKERT).all() else None
    counts, cats = metrics.category_counts(matrix, categories=scale)
    result["fleiss_kappa"] = metrics.fleiss_kappa(counts) if counts.size else None
    result["gwet_ac1"] = metrics.gwet_ac1(counts, n_categories=len(cats)) if counts.size else None
    result["cohen_kappa"] = (
        {
            weights: metrics.cohen_kappa(matrix[0], matrix[1], weights, categories=scale)
            for weights in metrics.KAPPA_WEIGHTS
        }
        if len(raters) == 2
        else None
    )
    icc_design = _icc_design(matrix)
    result["icc"] = _icc(matrix, icc_design)
    if resampler is None:
        result["mean_pairwise_spearman"] = _mean_pairwise_spearman(matrix)
        result["loo_ceiling"] = _loo_ceiling(matrix)
    if resampler is not None:
        _register_agreement(
            resampler, result, matrix, unit_items, rated, counts, len(cats), scale, icc_design
        )
    if own is not None:
        own.run()
    return result


def _reliability_matrix(
    rows: Sequence[Row],
) -> tuple[npt.NDArray[np.float64], list[str], npt.NDArray[np.generic], int]:
    """(raters x units matrix with NaN where not scored or N/A, the sorted rater names,
    each unit's item, the number of N/A scores); units are the responses in id order."""
    n = len(rows)
    codes: dict[str, int] = {}
    rater_code = np.fromiter((codes.setdefault(r[4], len(codes)) for r in rows), np.int64, n)
    raters = sorted(codes)
    order = np.empty(len(codes), dtype=np.int64)
    order[[codes[name] for name in raters]] = np.arange(len(codes))
    rid = np.fromiter((r[0] for r in rows), np.int64, n)
    values = np.fromiter((np.nan if r[5] is None else r[5] for r in rows), float, n)
    units, first, unit_code = np.unique(rid, return_index=True, return_inverse=True)
    matrix = np.full((len(raters), units.size), np.nan)
    scored = ~np.isnan(values)
    matrix[order[rater_code[scored]], unit_code[scored]] = values[scored]
    unit_items = np.array([rows[i][1] for i in first.tolist()])
    return matrix, raters, unit_items, int(n - scored.sum())


def _register_agreement(
    rs: bootstrap.Resampler,
    result: Json,
    matrix: npt.NDArray[np.float64],
    unit_items: npt.NDArray[np.generic],
    rated: npt.NDArray[np.intp],
    counts: npt.NDArray[np.intp],
    q: int,
    scale: list[int] | None,
    icc_design: IccDesign | None,
) -> None:
    """Intervals for every agreement figure besides alpha, on the resampler's resamples."""
    found: Json = {}
    if counts.size and result["fleiss_kappa"] is not None:
        resampled.kappa_register(
            rs, counts[rated >= 1], unit_items[rated >= 1], q, sink=found, key="kappas"
        )
    if result["cohen_kappa"] is not None:
        resampled.cohen_register(
            rs, matrix[0], matrix[1], unit_items, scale, sink=result, key="cohen_kappa_ci"
        )
    if result["icc"] is not None and icc_design is not None:
        slots, columns, complete = icc_design
        resampled.icc_register(
            rs, slots, unit_items[columns], complete=complete, sink=result, key="icc_ci"
        )
    # The mean pairwise Spearman and the ceiling come from the intervals' tables, like
    # alpha (test_resampled.py checks them against _mean_pairwise_spearman/_loo_ceiling).
    pairs, units = resampled.pairwise_spearman_register(
        rs, matrix, unit_items, sink=result, key="mean_pairwise_spearman_ci"
    )
    result["mean_pairwise_spearman"] = {"value": None, "pairs": pairs, "units": units}
    annotators, units = resampled.loo_register(
        rs, matrix, unit_items, sink=result, key="loo_ceiling_ci"
    )
    result["loo_ceiling"] = {
        "pearson": None,
        "spearman": None,
        "annotators": annotators,
        "units": units,
    }

    def kappas() -> None:
        if "kappas" in found:
            result["fleiss_kappa_ci"] = found["kappas"]["fleiss_kappa"]
            result["gwet_ac1_ci"] = found["kappas"]["gwet_ac1"]
        result["mean_pairwise_spearman"]["value"] = result["mean_pairwise_spearman_ci"]["estimate"]
        for name in ("pearson", "spearman"):
            result["loo_ceiling"][name] = result["loo_ceiling_ci"][name]["estimate"]

    rs.on_done(kappas)


def _icc_design(matrix: npt.NDArray[np.float64]) -> IccDesign | None:
    """The (units x k) scores ICC is computed on, the units' columns, and whether the
    design is complete: the units every rater scored when there are at least two (and the
    targets vary); otherwise, as in crowd designs where different people score different
    responses, each unit's first k scores, k the most common number of scores per unit."""
    present = ~np.isnan(matrix)
    columns = np.flatnonzero(present.all(axis=0))
    complete = matrix[:, columns]
    if complete.shape[0] >= 2 and complete.shape[1] >= 2 and metrics.icc(complete.T) is not None:
        return complete.T, columns, True
    sizes = present.sum(axis=0)
    pairable = sizes[sizes >= 2]
    if pairable.size == 0:
        return None
    values, frequency = np.unique(pairable, return_counts=True)
    k = int(max(zip(frequency, values, strict=True))[1])  # most common size, larger on a tie
    units = np.flatnonzero(sizes >= k)
    order = np.argsort(~present, axis=0, kind="stable")  # each unit's scores first, by rater
    slots = matrix[order[:k, units], units].T
    if slots.shape[0] < 2:
        return None
    return slots, units, False


def _icc(
    matrix: npt.NDArray[np.float64], design: IccDesign | Literal[False] | None = False
) -> Json | None:
    """The six ICCs on a complete design; ICC1 and ICC1k (raters interchangeable) on a
    one-way design (see `_icc_design`; `design` when already found)."""
    if design is False:
        design = _icc_design(matrix)
    if design is None:
        return None
    slots, _columns, complete = design
    result = metrics.icc(slots)
    if result is None:
        return None
    if complete:
        return {**asdict(result), "design": "complete"}
    return {
        "ICC1": result.ICC1,
        "ICC1k": result.ICC1k,
        "ICC2": None,
        "ICC2k": None,
        "ICC3": None,
        "ICC3k": None,
        "n": result.n,
        "k": result.k,
        "design": "one-way (raters differ per unit)",
    }


def _mean_pairwise_spearman(matrix: npt.NDArray[np.float64]) -> PairwiseSpearman:
    """Spearman of every two annotators over the units both scored (at least three, with
    variation on both sides), averaged (pairs from `resampled.rater_pairs`)."""
    # scipy is imported where used: at module top it added ~0.5 s of CPU to every process start
    from scipy import stats

    ids, x, y, units = resampled.rater_pairs(matrix)
    values: list[float] = []
    covered: set[int] = set()
    if ids.size:
        bounds = np.flatnonzero(np.diff(ids)) + 1
        groups = zip(np.split(x, bounds), np.split(y, bounds), np.split(units, bounds), strict=True)
        for gx, gy, gu in groups:
            if gx.size >= 3 and np.ptp(gx) > 0 and np.ptp(gy) > 0:
                rx, ry = stats.rankdata(gx), stats.rankdata(gy)  # Spearman: Pearson of ranks
                rx -= rx.mean()
                ry -= ry.mean()
                values.append(float((rx * ry).sum() / np.sqrt((rx * rx).sum() * (ry * ry).sum())))
                covered.update(gu.tolist())
    return {
        "value": float(np.mean(values)) if values else None,
        "pairs": len(values),
        "units": len(covered),
    }


def _loo_ceiling(matrix: npt.NDArray[np.float64]) -> LooCeiling:
    """Each annotator against the mean of the others on the units they share (a human
    ceiling for judge correlations), averaged over the annotators of `resampled.loo_sides`."""
    sides = resampled.loo_sides(matrix)
    found = [metrics.correlate(side.own, side.rest) for side in sides]
    pearsons = [c.pearson for c in found if c.pearson is not None]
    # both are defined or neither (metrics.correlate)
    spearmans = [c.spearman for c in found if c.pearson is not None and c.spearman is not None]
    counted = [side for side, c in zip(sides, found, strict=True) if c.pearson is not None]
    return {
        "pearson": float(np.mean(pearsons)) if pearsons else None,
        "spearman": float(np.mean(spearmans)) if spearmans else None,
        "annotators": len(pearsons),
        "units": resampled.sides_units(counted),
    }


# --- human-judge correlation ----------------------------------------------------------------


def _exact(value: float | Fraction) -> Total:
    """A score as an exact number: an int when it is whole (Likert scores, k-sample means
    that happen to be whole), else a Fraction of its float value."""
    value = float(value)
    return int(value) if value.is_integer() else Fraction(value)


def human_means(rows: Sequence[Row]) -> dict[int, HumanMean]:
    """response id -> (item id, system, mean, total, count): the mean of its human scores
    (N/A left out) as a float, from the exact total and count (ints for whole scores), so
    equal means are equal floats. Whole scores take a numpy path (totals are sums of small
    integers, exact in float64, and float64 division is correctly rounded like int / int)."""
    rows = list(rows)
    n = len(rows)
    if n == 0:
        return {}
    values = np.fromiter((np.nan if r[5] is None else r[5] for r in rows), float, count=n)
    scored = ~np.isnan(values)
    if not np.array_equal(values[scored], np.round(values[scored])):
        return _human_means_exact(rows)
    rid = np.fromiter((r[0] for r in rows), np.int64, count=n)
    ids, first, inverse = np.unique(rid, return_index=True, return_inverse=True)
    totals = np.bincount(inverse, weights=np.where(scored, values, 0.0), minlength=ids.size)
    counts = np.bincount(inverse, weights=scored.astype(float), minlength=ids.size)
    keep = np.flatnonzero(counts > 0)
    means = totals[keep] / counts[keep]
    heads = [rows[i] for i in first[keep].tolist()]
    return dict(
        zip(
            ids[keep].tolist(),
            zip(
                [r[1] for r in heads],
                [r[2] for r in heads],
                means.tolist(),
                totals[keep].astype(np.int64).tolist(),
                counts[keep].astype(np.int64).tolist(),
                strict=True,
            ),
            strict=True,
        )
    )


@dataclass(slots=True)
class _ExactSum:
    """A response's human scores so far (`_human_means_exact`)."""

    item: int
    system: str
    total: Total = 0
    count: int = 0


def _human_means_exact(rows: Sequence[Row]) -> dict[int, HumanMean]:
    acc: dict[int, _ExactSum] = {}
    for response_id, item_id, system, _skill, _rater, value in rows:
        entry = acc.get(response_id)
        if entry is None:
            entry = acc[response_id] = _ExactSum(item_id, system)
        if value is not None:
            entry.total += value if isinstance(value, int) else _exact(value)
            entry.count += 1
    return {
        rid: (
            e.item,
            e.system,
            float(e.total / e.count) if isinstance(e.total, Fraction) else e.total / e.count,
            e.total,
            e.count,
        )
        for rid, e in acc.items()
        if e.count
    }


def mean_of_means(parts: Sequence[tuple[Total | float, int]]) -> float | None:
    """The exact mean of ratios total/count, as a correctly rounded float. With whole
    totals it stays in integers (over the least common multiple of the counts); otherwise
    it sums Fractions (a float total counts as its exact value)."""
    if not parts:
        return None
    return _exact_mean(parts)


def _exact_mean(parts: Sequence[tuple[Total | float, int]]) -> float:
    """`mean_of_means` of one or more parts."""
    if all(total.__class__ is int for total, _ in parts):
        pairs = np.array(parts, dtype=np.int64)
        common = math.lcm(*np.unique(pairs[:, 1]).tolist())
        scaled = pairs[:, 0] * (common // pairs[:, 1])
        if common * int(np.abs(pairs[:, 0]).max()) * len(parts) < 2**62:  # no int64 overflow
            return int(scaled.sum()) / (common * len(parts))
        numerator = sum(int(total) * (common // count) for total, count in parts)
        return numerator / (common * len(parts))
    return float(sum(Fraction(total) / count for total, count in parts) / len(parts))


def group_means(
    groups: Sequence[str], totals: Sequence[Total | float], counts: Sequence[int] | None = None
) -> dict[str, float]:
    """Per group, the exact mean of totals[i]/counts[i] (counts default to 1), as
    `mean_of_means` gives it. Whole totals take a numpy path: numerators over the least
    common multiple of the counts, summed as integers (exact in float64 below 2**53) and
    divided once per group as Python ints (correctly rounded); anything else goes through
    `mean_of_means`."""
    n = len(groups)
    if n == 0:
        return {}
    c = np.ones(n, dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64)
    t = np.asarray(totals)
    whole = t.dtype.kind in "iu" or (
        t.dtype.kind == "f"
        and bool(np.all(np.isfinite(t)))
        and bool(np.all(t == np.round(t)))
        and float(np.abs(t).max()) < 2**53  # int64 holds it (1e300 is whole too)
    )
    if whole:
        t = t.astype(np.int64)
        common = math.lcm(*np.unique(c).tolist())
        numerators = t * (common // c)
        whole = int(np.abs(numerators).max()) * n < 2**53
    if not whole and counts is None and t.dtype.kind == "f" and bool(np.all(np.isfinite(t))):
        return _float_group_means(groups, t)
    if not whole:
        parts: dict[str, list[tuple[Total, int]]] = defaultdict(list)
        for g, total, count in zip(groups, totals, c.tolist(), strict=True):
            # a Fraction total is exact already: through float it would round, and two
            # groups with equal means could then rank apart
            parts[g].append((total if isinstance(total, int | Fraction) else _exact(total), count))
        return {g: _exact_mean(p) for g, p in parts.items()}
    codes: dict[str, int] = {}
    code = np.fromiter((codes.setdefault(g, len(codes)) for g in groups), np.int64, n)
    sums = np.bincount(code, weights=numerators.astype(float), minlength=len(codes))
    sizes = np.bincount(code, minlength=len(codes))
    return {g: int(sums[k]) / (common * int(sizes[k])) for g, k in codes.items()}


def _float_group_means(groups: Sequence[str], values: npt.NDArray[np.float64]) -> dict[str, float]:
    """`group_means` of finite floats (a judge's raw values), exactly as the Fraction path
    gives it, without a Fraction per value: a float is m * 2**e with m a 53-bit integer, so
    per group and exponent the m are summed as integers (in two 27-bit halves, which int64
    holds for up to 2**36 values), the few partial sums are shifted onto the group's
    smallest exponent as Python ints, and the exact total is divided once by the count
    (int / int is correctly rounded, subnormal results included)."""
    codes: dict[str, int] = {}
    code = np.fromiter((codes.setdefault(g, len(codes)) for g in groups), np.int64, len(groups))
    fraction, exponent = np.frexp(values)
    mantissa = (fraction * 2.0**53).astype(np.int64)  # exact: 53 significant bits
    exponent = exponent.astype(np.int64) - 53
    low_exponent = int(exponent.min())
    span = int(exponent.max()) - low_exponent + 1
    bucket = code * span + (exponent - low_exponent)
    order = np.argsort(bucket, kind="stable")
    bucket, mantissa = bucket[order], mantissa[order]
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    high = mantissa >> 26
    high_sums = np.add.reduceat(high, starts).tolist()
    low_sums = np.add.reduceat(mantissa - (high << 26), starts).tolist()
    sizes = np.bincount(code, minlength=len(codes)).tolist()
    totals: dict[int, tuple[int, int]] = {}  # group -> (exact total over 2**-exp, exp)
    for key, hi, lo in zip(bucket[starts].tolist(), high_sums, low_sums, strict=True):
        group, exp = divmod(key, span)
        part = (hi << 26) + lo
        if group in totals:  # buckets come by rising exponent: shift onto the first one's
            total, first = totals[group]
            totals[group] = (total + (part << (exp - first)), first)
        else:
            totals[group] = (part, exp)
    out: dict[str, float] = {}
    for g, k in codes.items():
        total, exp = totals[k]
        exp += low_exponent
        out[g] = (total << exp) / sizes[k] if exp >= 0 else total / (sizes[k] << -exp)
    return out


def _corr_dict(c: metrics.Correlation) -> Json:
    return {k: v for k, v in asdict(c).items()}


def correlation(
    human_rows: Sequence[Row],
    judge_rows: Sequence[Row],
    *,
    resamples: int = 0,
    means: dict[int, HumanMean] | None = None,
    resampler: bootstrap.Resampler | None = None,
    off_scale: bool = False,
    point: tuple[Json, dict[str, npt.NDArray[np.float64]]] | None = None,
) -> Json:
    """One judge against the people on one skill, at the instance, item and system levels.
    With `resamples` (or a shared `resampler`, whose `run()` the caller owns), item-resampling
    intervals for every figure of each level (`ci`). `off_scale`: the judge's values are not
    on the skill's scale, so MAE and exact agreement get no interval. `point`: this judge's
    figures and per-item coefficients from `point_correlations` (the same), when known."""
    humans = human_means(human_rows) if means is None else means
    judge = {r[0]: r[5] for r in judge_rows if r[5] is not None}
    shared = sorted(rid for rid in humans if rid in judge)
    h = np.array([humans[rid][2] for rid in shared], dtype=float)
    j = np.array([judge[rid] for rid in shared], dtype=float)
    items = np.array([humans[rid][0] for rid in shared])
    if point is not None:
        return _register_correlation(
            point[0], point[1], resampler, h, j, items, shared, humans, off_scale
        )
    result: Json = {"instance": _corr_dict(metrics.correlate(h, j))}
    own: bootstrap.Resampler | None = None
    if resamples and resampler is None and shared:
        resampler = own = bootstrap.Resampler(items, resamples=resamples)
    if resampler is not None and shared:
        register = (
            wide_tables.instance_cells_register
            if wide_tables.is_wide(h, j)
            else resampled.instance_register
        )
        register(resampler, h, j, items, sink=result["instance"], agreement=not off_scale)
    # item level: per item, across its systems' responses; then the mean over items
    per_item: dict[str, npt.NDArray[np.float64]]
    if shared:
        per_item = metrics.grouped_correlations(h, j, items)
        used = ~np.isnan(per_item["pearson"])
        n_items = per_item["pearson"].size
    else:
        per_item, used, n_items = {}, np.array([], dtype=bool), 0
    result["item"] = {
        **{
            name: (float(per_item[name][used].mean()) if used.any() else None)
            for name in ("pearson", "spearman", "kendall")
        },
        "n": int(used.sum()),
        "items_skipped": int(n_items - used.sum()),
    }
    if resampler is not None and used.any():
        resampled.item_level_register(resampler, np.unique(items), per_item, sink=result["item"])
    # system level: exact per-system means of the shared responses
    system_of = [humans[rid][1] for rid in shared]
    human_by_system = group_means(
        system_of, [humans[rid][3] for rid in shared], [humans[rid][4] for rid in shared]
    )
    judge_by_system = group_means(system_of, [judge[rid] for rid in shared])
    systems = sorted(human_by_system)
    hs = [human_by_system[s] for s in systems]
    js = [judge_by_system[s] for s in systems]
    system = _corr_dict(metrics.correlate(hs, js))
    result["system"] = {**system, "systems": systems}
    if resampler is not None and system["pearson"] is not None:
        resampled.system_level_register(
            resampler,
            items,
            [humans[rid][1] for rid in shared],
            [humans[rid][3] for rid in shared],
            [humans[rid][4] for rid in shared],
            j,
            sink=result["system"],
        )
    if own is not None:
        own.run()
    return result


def _register_correlation(
    levels: Json,
    per_item: dict[str, npt.NDArray[np.float64]],
    resampler: bootstrap.Resampler | None,
    h: npt.NDArray[np.float64],
    j: npt.NDArray[np.float64],
    items: npt.NDArray[np.generic],
    shared: Sequence[int],
    humans: dict[int, HumanMean],
    off_scale: bool,
) -> Json:
    """`correlation`'s intervals on `resampler` for figures already computed (`levels`,
    and `per_item`: the item level's coefficients), registered in the same order."""
    if resampler is None or not shared:
        return levels
    register = (
        wide_tables.instance_cells_register
        if wide_tables.is_wide(h, j)
        else resampled.instance_register
    )
    register(resampler, h, j, items, sink=levels["instance"], agreement=not off_scale)
    if (~np.isnan(per_item["pearson"])).any():
        resampled.item_level_register(resampler, np.unique(items), per_item, sink=levels["item"])
    if levels["system"]["pearson"] is not None:
        resampled.system_level_register(
            resampler,
            items,
            [humans[rid][1] for rid in shared],
            [humans[rid][3] for rid in shared],
            [humans[rid][4] for rid in shared],
            j,
            sink=levels["system"],
        )
    return levels


def point_correlations(
    humans: dict[int, HumanMean], judge_rows: Mapping[str, Sequence[Row]]
) -> dict[str, tuple[Json, dict[str, npt.NDArray[np.float64]]]]:
    """`correlation` without intervals for many judges of one skill at once (`humans`: the
    skill's `human_means`), the same figures to the bit, with each judge's per-item
    coefficients (the item level's `grouped_correlations`): judges that scored the same
    responses share their human values, items and per-system human means, and their
    coefficients come from `metrics.correlate_many` and `grouped_correlations_many`."""
    by_shared: dict[tuple[int, ...], list[tuple[str, dict[int, float]]]] = defaultdict(list)
    for name, rows in judge_rows.items():
        scored = {r[0]: r[5] for r in rows if r[5] is not None}
        by_shared[tuple(rid for rid in sorted(humans) if rid in scored)].append((name, scored))
    out: dict[str, tuple[Json, dict[str, npt.NDArray[np.float64]]]] = {}
    for shared, group in by_shared.items():
        h = np.array([humans[rid][2] for rid in shared], dtype=float)
        values = [[scored[rid] for rid in shared] for _, scored in group]
        j = np.array(values, dtype=float).reshape(len(group), len(shared))
        items = np.array([humans[rid][0] for rid in shared])
        instance = metrics.correlate_many(h, j)
        per_item = metrics.grouped_correlations_many(h, j, items) if shared else {}
        system_of = [humans[rid][1] for rid in shared]
        human_by_system = group_means(
            system_of, [humans[rid][3] for rid in shared], [humans[rid][4] for rid in shared]
        )
        systems = sorted(human_by_system)
        hs = [human_by_system[s] for s in systems]
        judge_by_system = [group_means(system_of, v) for v in values]
        js = np.array([[found[s] for s in systems] for found in judge_by_system], dtype=float)
        system = metrics.correlate_many(hs, js.reshape(len(group), len(systems)))
        for k, (name, _) in enumerate(group):
            item: Json
            if shared:
                used = ~np.isnan(per_item["pearson"][k])
                item = {
                    key: (float(per_item[key][k][used].mean()) if used.any() else None)
                    for key in ("pearson", "spearman", "kendall")
                }
                item |= {"n": int(used.sum()), "items_skipped": int(used.size - used.sum())}
            else:
                item = {"pearson": None, "spearman": None, "kendall": None}
                item |= {"n": 0, "items_skipped": 0}
            levels = {
                "instance": _corr_dict(instance[k]),
                "item": item,
                "system": {**_corr_dict(system[k]), "systems": systems},
            }
            out[name] = (levels, {key: values[k] for key, values in per_item.items()})
    return out


def build_report(
    human: Sequence[Row],
    judges: Sequence[Row],
    *,
    skills: Sequence[str] | None = None,
    resamples: int = 0,
    off_scale: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset(),
    compare: Sequence[tuple[str, str]] | None = None,
    compare_all: bool = False,
    progress: Callable[[float], None] | None = None,
    agreement_rows: Sequence[Row] | None = None,
) -> Json:
    """The report from plain rows (see Row). `judges` rows carry the judge name as rater.
    `agreement_rows`: the rows agreement among people is computed on, when they are not
    `human` (the adjudicated report: `human` has one adjudicated row per settled pair, the
    people's own scores are these).
    With `resamples` > 0: bootstrap intervals (resampling items) and, per skill, paired
    comparisons of judges (`judge_comparison`): each judge against the skill's best
    (`best_judges`), plus the pairs in `compare` on every skill, or every two judges with
    `compare_all`; `judge_comparison_pairs` says which. `off_scale`: (judge, skill) pairs
    whose values are not on the skill's scale (a metric's raw value): MAE and exact/±1
    agreement are left out."""
    human_by_skill = _by_skill(human)
    judge_by_name: dict[str, list[Row]] = defaultdict(list)
    for row in judges:
        judge_by_name[row[4]].append(row)
    names = list(skills) if skills else sorted(set(human_by_skill) | {r[3] for r in judges})
    means = {s: human_means(rows) for s, rows in human_by_skill.items()}
    resamplers: dict[bytes, bootstrap.Resampler] = {}

    def resampler_for(item_ids: Iterable[int]) -> bootstrap.Resampler | None:
        """One set of resamples per set of items: a skill's agreement and the correlations
        of the judges that scored all its responses share theirs."""
        if not resamples:
            return None
        keys = np.unique(np.asarray(list(item_ids)))
        found = resamplers.get(keys.tobytes())
        if found is None:
            found = resamplers[keys.tobytes()] = bootstrap.Resampler(keys, resamples=resamples)
        return found

    report: Json = {"resamples": resamples, "agreement": {}, "correlation": {}}
    if agreement_rows is None:
        for s in names:
            if human_by_skill.get(s):
                items = {item for item, *_ in means[s].values()}
                report["agreement"][s] = agreement(
                    human_by_skill[s], resampler=resampler_for(items)
                )
    else:
        people_by_skill = _by_skill(agreement_rows)
        for s in names:
            if people_by_skill.get(s):
                items = {row[1] for row in people_by_skill[s]}
                report["agreement"][s] = agreement(
                    people_by_skill[s], resampler=resampler_for(items)
                )
    judge_skills = {judge: _by_skill(rows) for judge, rows in sorted(judge_by_name.items())}
    instances: dict[tuple[str, str], _Instance] = {}
    points = {
        s: point_correlations(
            means[s],
            {judge: by_skill[s] for judge, by_skill in judge_skills.items() if s in by_skill},
        )
        for s in names
        if human_by_skill.get(s)
    }
    for judge, by_skill in judge_skills.items():
        report["correlation"][judge] = {}
        for s in names:
            if s not in by_skill or not human_by_skill.get(s):
                continue
            if not resamples:
                point = points[s][judge][0]
                report["correlation"][judge][s] = _scale_aware(point, (judge, s) in off_scale)
                continue
            scored = {r[0] for r in by_skill[s] if r[5] is not None}
            shared = frozenset(rid for rid in scored if rid in means[s])
            items = {means[s][rid][0] for rid in shared}
            rs = resampler_for(items) if items else None
            levels = report["correlation"][judge][s] = _scale_aware(
                correlation(
                    human_by_skill[s],
                    by_skill[s],
                    means=means[s],
                    resampler=rs,
                    off_scale=(judge, s) in off_scale,
                    point=points[s][judge],
                ),
                (judge, s) in off_scale,
            )
            if rs is not None:
                instances[judge, s] = _Instance(rs, levels["instance"], shared)
    pairs: dict[str, list[tuple[str, str]]] = {}
    compared = bool(resamples) and len(judge_skills) >= 2
    if compared:
        # chosen from the point estimates, before the resamples are drawn, so that the
        # pairs' Pearsons are kept from the judges' own intervals (`_compare_judges`)
        best = best_judges(report["correlation"])
        extra = _pair_list(compare or [])
        for s in names:
            chosen = (
                _all_pairs(judge_skills) if compare_all else _best_pairs(judge_skills, best.get(s))
            )
            pairs[s] = sorted(set(chosen) | set(extra))
            for a, b in pairs[s]:
                if _same_resamples(instances.get((a, s)), instances.get((b, s))):
                    for judge in (a, b):
                        found = instances[judge, s]
                        found.resampler.keep_values(found.sink, "pearson")
        report["judge_comparison_pairs"] = {
            "mode": "all" if compare_all else "best",
            "best": best,
            "extra": [list(pair) for pair in extra],
        }
    # the resamples are the long part: `progress` gets the fraction of them drawn
    for done, rs in enumerate(resamplers.values()):
        rs.run(None if progress is None else _share(progress, done, len(resamplers)))
    if compared:
        report["judge_comparison"] = _compare_judges(
            means, judge_skills, pairs, resamples, instances
        )
        report["judge_comparison_pairs"] = report.pop("judge_comparison_pairs")  # after it
    judge_by_skill = _by_skill(judges)
    report["leaderboard"] = {
        s: leaderboard(human_by_skill.get(s, []), judge_by_skill.get(s, []), means=means.get(s))
        for s in names
        if human_by_skill.get(s) or judge_by_skill.get(s)
    }
    # flagged once clean: the flags are strings and counts, nothing to clean in them
    return small_samples.flag_report(_clean_dict(report))


def _share(progress: Callable[[float], None], done: int, parts: int) -> Callable[[float], None]:
    """`progress` of part `done` of `parts` equal ones, from that part's own fraction."""
    return lambda fraction: progress((done + fraction) / parts)


def breakdowns(
    human: Sequence[Row],
    judges: Sequence[Row],
    facets: dict[int, dict[str, Any]],
    *,
    skills: Sequence[str] | None = None,
    off_scale: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset(),
    progress: Callable[[float], None] | None = None,
    agreement_rows: Sequence[Row] | None = None,
) -> Json:
    """The report (without intervals) per domain, per difficulty and per system: FLASK's
    per-skill views by domain and difficulty, and how each judge does on each model.
    `progress` gets the fraction of the groups done after each. `agreement_rows`: as in
    build_report, split the same way."""

    def split(rows: Iterable[Row], key_of: Callable[[Row], list[str]]) -> dict[str, list[Row]]:
        groups: dict[str, list[Row]] = defaultdict(list)
        for row in rows:
            for key in key_of(row):
                groups[key].append(row)
        return groups

    keys: dict[str, Callable[[Row], list[str]]] = {
        "domain": lambda r: facets.get(r[1], {}).get("domains") or ["(none)"],
        "difficulty": lambda r: [str(facets.get(r[1], {}).get("difficulty") or "(none)")],
        "system": lambda r: [r[2]],
    }
    out: Json = {}
    groups = {
        facet: (split(human, key_of), split(judges, key_of)) for facet, key_of in keys.items()
    }
    people = (
        None
        if agreement_rows is None
        else {facet: split(agreement_rows, key_of) for facet, key_of in keys.items()}
    )
    total = sum(len(set(h) | set(j)) for h, j in groups.values())
    done = 0
    for facet, (human_groups, judge_groups) in groups.items():
        out[facet] = {}
        for value in sorted(set(human_groups) | set(judge_groups)):
            out[facet][value] = build_report(
                human_groups.get(value, []),
                judge_groups.get(value, []),
                skills=skills,
                off_scale=off_scale,
                agreement_rows=None if people is None else people[facet].get(value, []),
            )
            done += 1
            if progress is not None:
                progress(done / total)
    return _clean_dict(out)


def leaderboard(
    human_rows: Sequence[Row],
    judge_rows: Sequence[Row],
    means: dict[int, HumanMean] | None = None,
) -> list[LeaderboardRow]:
    """Per system, one skill: the mean human score (of per-response means, exact) and each
    judge's mean, with the ranks they give (1 = best; equal means share the best rank);
    sorted by the human mean, best first. Rows: {"system", "n", "humans", "humans_rank",
    "judges": {JUDGE: {"mean", "n", "rank"}}} (judges nested, so no judge name can collide
    with a key; a judge's `n` counts its scored responses of the system)."""
    means = human_means(human_rows) if means is None else means
    entries = list(means.values())
    humans = group_means([e[1] for e in entries], [e[3] for e in entries], [e[4] for e in entries])
    sizes: dict[str, int] = defaultdict(int)
    for e in entries:
        sizes[e[1]] += 1
    # per judge, the systems and values of its scores (N/A left out)
    scored: dict[str, tuple[list[str], list[float]]] = defaultdict(lambda: ([], []))
    for _rid, _item, system, _skill, rater, value in judge_rows:
        if value is not None:
            scored[rater][0].append(system)
            scored[rater][1].append(value)
    raters = sorted({r[4] for r in judge_rows})
    by_judge = {name: group_means(systems, values) for name, (systems, values) in scored.items()}
    judge_sizes = {name: Counter(systems) for name, (systems, _values) in scored.items()}
    no_scores: Counter[str] = Counter()
    table: list[LeaderboardRow] = []
    for system in list(humans) + sorted(
        {s for found in by_judge.values() for s in found} - set(humans)
    ):
        table.append(
            {
                "system": system,
                "n": sizes.get(system, 0),
                "humans": humans.get(system),
                "judges": {
                    name: {
                        "mean": by_judge.get(name, {}).get(system),
                        "n": judge_sizes.get(name, no_scores)[system],
                    }
                    for name in raters
                },
            }
        )

    def rank(value: float | None, values: Iterable[float | None]) -> int | None:
        return None if value is None else 1 + sum(1 for v in values if v is not None and v > value)

    human_values = [row["humans"] for row in table]
    for row in table:
        row["humans_rank"] = rank(row["humans"], human_values)
    for name in raters:
        values = [row["judges"][name]["mean"] for row in table]
        for row in table:
            row["judges"][name]["rank"] = rank(row["judges"][name]["mean"], values)
    table.sort(key=lambda r: (r["humans"] is None, -(r["humans"] or 0), r["system"]))
    return table


def _scale_aware(levels: Json, off_scale: bool) -> Json:
    if off_scale:
        for figures in levels.values():
            for key in ("mae", "exact", "within_one"):
                figures[key] = None
            figures["judge_scale"] = "raw"
    return levels


def best_judges(correlation: Mapping[str, Mapping[str, Json]]) -> dict[str, str]:
    """Per skill, the judge closest to the people: the highest instance-level Pearson with
    the human means (judges where it is undefined left out); on a tie, the first by name."""
    found: dict[str, tuple[float, str]] = {}
    for judge in sorted(correlation):
        for skill, levels in correlation[judge].items():
            value = levels["instance"]["pearson"]
            if value is None or not math.isfinite(value):
                continue
            if skill not in found or value > found[skill][0]:
                found[skill] = (value, judge)
    return {skill: judge for skill, (_, judge) in sorted(found.items())}


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _pair_list(pairs: Iterable[Sequence[str]]) -> list[tuple[str, str]]:
    """Pairs asked for, each A before B by name, without repeats or a judge against itself."""
    return sorted({_pair(a, b) for a, b in pairs if a != b})


def _all_pairs(judge_skills: Mapping[str, object]) -> list[tuple[str, str]]:
    return list(combinations(sorted(judge_skills), 2))


def _best_pairs(judge_skills: Mapping[str, object], best: str | None) -> list[tuple[str, str]]:
    if best is None:
        return []
    return [_pair(judge, best) for judge in sorted(judge_skills) if judge != best]


@dataclass(frozen=True, slots=True)
class _Instance:
    """Where a judge's instance-level intervals on a skill are resampled: the Resampler,
    the sink its Pearson goes to, and the responses it is computed on."""

    resampler: bootstrap.Resampler
    sink: Json
    shared: frozenset[int]


def _same_resamples(a: _Instance | None, b: _Instance | None) -> bool:
    """Whether a pair's `paired_difference` is the difference of the two judges' own
    resampled Pearsons: both on the same responses (so the pair's are theirs), hence on
    the same items, drawn by the same Resampler with paired_difference's seed."""
    return (
        a is not None
        and b is not None
        and a.resampler is b.resampler
        and a.resampler.seed == 0
        and len(a.shared) >= 3
        and a.shared == b.shared
    )


def _compare_judges(
    means: Mapping[str, dict[int, HumanMean]],
    judge_skills: Mapping[str, Mapping[str, list[Row]]],
    pairs: Mapping[str, Sequence[tuple[str, str]]],
    resamples: int,
    instances: Mapping[tuple[str, str], _Instance] | None = None,
) -> Json:
    """Per skill and pair of judges asked for (A before B by name, pairs sorted):
    Pearson(human, A) - Pearson(human, B) on the responses both scored, with its interval
    and one-sided bootstrap p-value; a pair with fewer than three such responses, or with a
    judge that did not score the skill, is left out. Where both judges' instance intervals
    were resampled together on the pair's responses (`_same_resamples`, `instances`), the
    difference of their kept Pearsons is the pair's: the figures `paired_difference` gives,
    without resampling the two joint tables again."""
    out: dict[str, Json] = {}
    instances = instances or {}
    for skill, wanted in pairs.items():
        humans = means.get(skill) or {}
        scored = {
            judge: {r[0]: r[5] for r in judge_skills[judge].get(skill, []) if r[5] is not None}
            for judge in sorted({judge for pair in wanted for judge in pair} & set(judge_skills))
        }
        for a, b in wanted:
            first, second = instances.get((a, skill)), instances.get((b, skill))
            if first is not None and second is not None and _same_resamples(first, second):
                out.setdefault(skill, {})[f"{a} vs {b}"] = {
                    "n": len(first.shared),
                    **bootstrap.paired_difference_of(
                        first.sink["ci"]["pearson"]["estimate"],
                        second.sink["ci"]["pearson"]["estimate"],
                        first.resampler.kept_values(first.sink, "pearson"),
                        second.resampler.kept_values(second.sink, "pearson"),
                        first.sink["ci"]["pearson"].get("items"),
                    ),
                }
                continue
            if a not in scored or b not in scored:
                continue
            shared = sorted(set(humans) & set(scored[a]) & set(scored[b]))
            if len(shared) < 3:
                continue
            out.setdefault(skill, {})[f"{a} vs {b}"] = {
                "n": len(shared),
                **bootstrap.paired_difference(
                    [humans[r][2] for r in shared],
                    [scored[a][r] for r in shared],
                    [scored[b][r] for r in shared],
                    [humans[r][0] for r in shared],
                    resamples=resamples,
                ),
            }
    return out
