"""Correlations on any finite scores, at every level of the report, against scipy.stats.

Judges' values may be subnormal (1e-320), tiny (1e-310, 1e-300), huge (1e300) or anywhere
in the float range; constant sides, ties and groups of one or two responses are common.
The references:

- Spearman and Kendall's tau-b: scipy on the values as they are (ranks are exact).
- Pearson: scipy on the values times a power of two that brings the largest to the unit
  scale. The product is exact, and Pearson does not change under scaling, so this is scipy
  on the same data; as it is, scipy rounds the mean of values with a few significant bits
  (1e-320: about eleven) and its sums overflow near 1e308. Where scipy itself warns that
  an input is nearly constant (its result may be inaccurate), and always besides, Pearson
  is checked against exact rational arithmetic.
- MAE, exact and within-one agreement: exact rational arithmetic.

Intervals are checked where the resampling code computes its own point estimate: each
interval's estimate equals the figure it belongs to.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from analytics import metrics
from analytics.report import build, resampled

# krippendorff's alpha and the agreement sums square values of 1e300 (overflow warnings);
# the figures checked here do not
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

TOLERANCE = 1e-9
NAMES = ("pearson", "spearman", "kendall")
MAGNITUDES = (5e-324, 1e-320, 1e-310, 1e-300, 1.0, 1e300)
#: Powers of two near those: their multiples by small integers are exact, and so are sums.
BINARY_MAGNITUDES = tuple(math.ldexp(1.0, e) for e in (-1074, -1063, -1030, -997, 0, 997))


# --- references ---------------------------------------------------------------------------


def unit_scaled(values: np.ndarray) -> np.ndarray:
    top = float(np.abs(values).max())
    return values if top == 0 else np.ldexp(values, -math.frexp(top)[1])


def exact_pearson(x, y) -> float:
    fx, fy = [Fraction(v) for v in x], [Fraction(v) for v in y]
    mx, my = sum(fx) / len(fx), sum(fy) / len(fy)
    sxy = sum((a - mx) * (b - my) for a, b in zip(fx, fy, strict=True))
    sxx = sum((a - mx) ** 2 for a in fx)
    syy = sum((b - my) ** 2 for b in fy)
    return math.sqrt(float(sxy * sxy / (sxx * syy))) * (1 if sxy >= 0 else -1)


def reference(x, y) -> dict[str, float | None]:
    """Pearson, Spearman and tau-b as scipy gives them (None where scipy gives NaN: fewer
    than two pairs or a constant side), with Pearson also from exact arithmetic."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.size < 2 or np.all(a == a[0]) or np.all(b == b[0]):
        return {"pearson": None, "spearman": None, "kendall": None, "exact_pearson": None}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pearson = float(stats.pearsonr(unit_scaled(a), unit_scaled(b)).statistic)
    near_constant = any(issubclass(w.category, stats.NearConstantInputWarning) for w in caught)
    return {
        "pearson": None if near_constant else pearson,  # None: scipy may be inaccurate here
        "spearman": float(stats.spearmanr(a, b).statistic),
        "kendall": float(stats.kendalltau(a, b, variant="b").statistic),
        "exact_pearson": exact_pearson(a, b),
    }


def exact_agreement(x, y) -> dict[str, float]:
    """MAE in exact arithmetic; exact and within-one agreement on the float differences
    (|x - y| rounded, inf past the largest float), as the report defines them."""
    diffs = [abs(Fraction(a) - Fraction(b)) for a, b in zip(x, y, strict=True)]
    with np.errstate(over="ignore"):
        rounded = np.abs(np.asarray(x, dtype=float) - np.asarray(y, dtype=float))
    mean = sum(diffs) / len(diffs)
    try:  # rounded to the nearest float: MAX + 1 is MAX; inf only past the rounding bound
        mae = float(mean)
    except OverflowError:
        mae = math.inf
    return {
        "mae": mae,
        "exact": float(np.mean(rounded < 0.5)),
        "within_one": float(np.mean(rounded <= 1)),
    }


def check(got, x, y, where: str, names: tuple[str, ...] = NAMES) -> None:
    """The coefficients in `got` (a dict or an object with the three names) are the
    reference's: both undefined, or within TOLERANCE (Pearson: of exact arithmetic, and of
    scipy unless scipy warns that its result may be inaccurate)."""
    want = reference(x, y)
    for name in names:
        value = got[name] if isinstance(got, dict) else getattr(got, name)
        if value is not None and math.isnan(value):
            value = None
        expected = want["exact_pearson" if name == "pearson" else name]
        if expected is None:
            assert value is None, (where, name, value)
            continue
        assert value is not None, (where, name, want)
        assert abs(value - expected) <= TOLERANCE, (where, name, value, want)
        if name == "pearson" and want["pearson"] is not None:
            assert abs(value - want["pearson"]) <= TOLERANCE, (where, value, want)


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return (a is None or math.isnan(a)) and (b is None or math.isnan(b))
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))  # coefficients: absolute


# --- strategies -------------------------------------------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False)


@st.composite
def score_lists(draw, size: int):
    """`size` finite scores: small integers (ties, constants) or floats at one magnitude
    from subnormal to 1e300, or any finite floats at all."""
    kind = draw(st.sampled_from(["ties", "floats", "any"]))
    if kind == "any":
        return draw(st.lists(finite, min_size=size, max_size=size))
    magnitude = draw(st.sampled_from(MAGNITUDES + BINARY_MAGNITUDES))
    base = st.integers(-4, 4) if kind == "ties" else st.floats(-10, 10)
    return [float(v) * magnitude for v in draw(st.lists(base, min_size=size, max_size=size))]


@st.composite
def pairs(draw, max_size: int = 12):
    n = draw(st.integers(0, max_size))
    return draw(score_lists(n)), draw(score_lists(n))


@st.composite
def judged_skill(draw):
    """Human rows (integer 1-5 scores, one to three people per response) and one judge's
    rows of one skill: items with one to four systems' responses, judge values from
    `score_lists` (some N/A)."""
    n_items = draw(st.integers(1, 5))
    human, judge, rid = [], [], 0
    for item in range(n_items):
        for system in range(draw(st.integers(1, 4))):
            for rater in range(draw(st.integers(1, 3))):
                value = draw(st.integers(1, 5))
                human.append((rid, 100 + item, f"sys{system}", "S", f"p{rater}", value))
            judge.append((rid, 100 + item, f"sys{system}", "S", "J", None))
            rid += 1
    values = draw(score_lists(len(judge)))
    missing = draw(st.lists(st.booleans(), min_size=len(judge), max_size=len(judge)))
    judge = [
        (*row[:5], None if gone and k % 3 == 0 else v)
        for k, (row, v, gone) in enumerate(zip(judge, values, missing, strict=True))
    ]
    return human, judge


# --- the report's levels, recomputed with scipy ----------------------------------------------


def levels(human, judge):
    """(h, j, items) of the responses both scored, and each level's reference inputs:
    per item (h, j) and the per-system exact means."""
    totals: dict[int, list] = {}
    for rid, item, system, _skill, _rater, value in human:
        if value is not None:
            t = totals.setdefault(rid, [item, system, 0, 0])
            t[2] += value
            t[3] += 1
    scored = {r[0]: r[5] for r in judge if r[5] is not None}
    shared = sorted(rid for rid in totals if rid in scored)
    h = [totals[r][2] / totals[r][3] for r in shared]
    j = [scored[r] for r in shared]
    items = [totals[r][0] for r in shared]
    by_item: dict[int, tuple[list, list]] = defaultdict(lambda: ([], []))
    for hv, jv, item in zip(h, j, items, strict=True):
        by_item[item][0].append(hv)
        by_item[item][1].append(jv)
    human_sys: dict[str, list[Fraction]] = defaultdict(list)
    judge_sys: dict[str, list[Fraction]] = defaultdict(list)
    for r in shared:
        human_sys[totals[r][1]].append(Fraction(totals[r][2], totals[r][3]))
        judge_sys[totals[r][1]].append(Fraction(scored[r]))
    systems = sorted(human_sys)
    hs = [float(sum(human_sys[s]) / len(human_sys[s])) for s in systems]
    js = [float(sum(judge_sys[s]) / len(judge_sys[s])) for s in systems]
    return h, j, dict(sorted(by_item.items())), hs, js


def check_correlation(result, human, judge, where: str, intervals: bool) -> None:
    h, j, by_item, hs, js = levels(human, judge)
    # instance
    check(result["instance"], h, j, f"{where} instance")
    if h:
        for name, value in exact_agreement(h, j).items():
            got = result["instance"][name]
            assert got is not None and math.isfinite(got), (where, name, got)
            assert got == pytest.approx(value, rel=1e-12), (where, name)
    # item: the mean of the defined per-item coefficients
    per_item = [reference(x, y) for x, y in by_item.values()]
    used = [r for r in per_item if r["exact_pearson"] is not None]
    assert result["item"]["n"] == len(used), where
    assert result["item"]["items_skipped"] == len(per_item) - len(used), where
    for name in NAMES:
        key = "exact_pearson" if name == "pearson" else name
        want = float(np.mean([r[key] for r in used])) if used else None
        assert close(result["item"][name], want), (where, "item", name, result["item"], want)
    # system: the exact per-system means
    check(result["system"], hs, js, f"{where} system")
    if intervals:
        # a resample's per-system judge mean is a float sum of the values over the count
        # (the point figure's is exact): they may differ where such a sum rounds, and a
        # tie or a constant side can then differ too; compared where the sums are exact
        exact_sums = all(sums_exactly(v) for v in judge_by_system(judge).values())
        for level in ("instance", "item", "system") if exact_sums else ("instance", "item"):
            # an interval has no estimate without a resample where it is defined (one
            # item: none at all); otherwise its estimate is the level's figure
            for name, interval in result[level].get("ci", {}).items():
                if interval["estimate"] is not None or result[level][name] is None:
                    assert close(interval["estimate"], result[level][name]), (where, level, name)


def judge_by_system(judge) -> dict[str, list[float]]:
    found: dict[str, list[float]] = defaultdict(list)
    for row in judge:
        if row[5] is not None:
            found[row[2]].append(row[5])
    return found


def sums_exactly(values: list[float]) -> bool:
    """Every float sum of these values, in any order, is exact: they are multiples of one
    power of two 2**e whose absolute values sum below 2**53 * 2**e."""
    exact = [Fraction(v) for v in values if v]
    if not exact:
        return True
    # 2-adic valuation of each value: trailing zero bits of its numerator less its
    # denominator's (a power of two)
    e = min(
        (abs(f.numerator) & -abs(f.numerator)).bit_length() - f.denominator.bit_length()
        for f in exact
    )
    return sum(abs(f) for f in exact) < Fraction(2) ** (53 + e)


# --- the pure functions -------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(pairs())
def test_correlate_matches_scipy_on_any_finite_scores(data):
    x, y = data
    result = metrics.correlate(x, y)
    assert result.n == len(x)
    check(result, x, y, "correlate")
    if x:
        want = exact_agreement(x, y)
        if math.isfinite(want["mae"]):
            assert result.mae == pytest.approx(want["mae"], rel=1e-12)
        assert (result.exact, result.within_one) == (want["exact"], want["within_one"])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), pairs(max_size=5)), min_size=1, max_size=6))
def test_grouped_correlations_match_scipy_per_group(groups):
    x, y, g = [], [], []
    for key, (gx, gy) in groups:
        x += gx
        y += gy
        g += [key] * len(gx)
    if not g:
        return
    got = metrics.grouped_correlations(x, y, g)
    keys = np.unique(g)
    for k, key in enumerate(keys):
        members = [i for i, v in enumerate(g) if v == key]
        check(
            {name: float(got[name][k]) for name in NAMES},
            [x[i] for i in members],
            [y[i] for i in members],
            f"group {key}",
        )


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), pairs(max_size=12))
def test_table_pearson_of_a_resample_matches_scipy_on_its_expansion(seed, data):
    # bootstrap intervals' Pearson comes from count tables: a table of random counts over
    # the distinct values is the expanded sample's Pearson
    x, y = data
    if len(x) < 1:
        return
    vx, cx = np.unique(x, return_inverse=True)
    vy, cy = np.unique(y, return_inverse=True)
    counts = np.random.default_rng(seed).integers(0, 3, len(x))
    table = np.zeros((1, vx.size, vy.size))
    np.add.at(table[0], (cx, cy), counts)
    got = metrics.table_pearson(table, table.sum(axis=2), table.sum(axis=1), vx, vy)[0]
    ex, ey = np.repeat(vx[cx], counts), np.repeat(vy[cy], counts)
    check({"pearson": got}, ex, ey, "table", names=("pearson",))


# --- the report -----------------------------------------------------------------------------


def test_an_mae_just_past_the_largest_float_rounds_to_it_not_to_infinity():
    # |1 - (-MAX)| is MAX + 1, which rounds to MAX: the reference once called it inf, and
    # hypothesis found that case in one run out of several
    biggest = float(np.finfo(float).max)
    human, judge = [(0, 100, "sys0", "S", "p0", 1)], [(0, 100, "sys0", "S", "J", -biggest)]
    assert exact_agreement([1.0], [-biggest])["mae"] == biggest
    assert exact_agreement([biggest], [-biggest])["mae"] == math.inf
    check_correlation(build.correlation(human, judge), human, judge, "point", False)


@settings(max_examples=60, deadline=None)
@given(judged_skill())
def test_every_correlation_level_of_the_report_matches_scipy(data):
    human, judge = data
    check_correlation(build.correlation(human, judge), human, judge, "point", False)


@settings(max_examples=30, deadline=None)
@given(judged_skill())
def test_every_interval_estimate_is_its_levels_figure(data):
    human, judge = data
    result = build.correlation(human, judge, resamples=8)
    check_correlation(result, human, judge, "resampled", True)


@settings(max_examples=20, deadline=None)
@given(judged_skill(), st.sampled_from(MAGNITUDES))
def test_build_report_correlations_and_judge_comparison_match_scipy(data, magnitude):
    human, judge = data
    # a second judge: the first one's values at another magnitude, half of them negated
    other = [
        (*row[:4], "K", None if row[5] is None else other_value(row[5], magnitude, row[0]))
        for row in judge
    ]
    report = build.build_report(human, judge + other, resamples=8)
    for name, rows in (("J", judge), ("K", other)):
        found = report["correlation"][name].get("S")
        if found is not None:
            check_correlation(found, human, rows, f"report {name}", True)
    h, j, *_ = levels(human, judge)
    hk, k, *_ = levels(human, other)
    comparison = report.get("judge_comparison", {}).get("S", {}).get("J vs K")
    if comparison is None:
        return
    assert h == hk  # both judges left out the same responses
    a, b = reference(h, j)["exact_pearson"], reference(h, k)["exact_pearson"]
    want = None if a is None or b is None else a - b
    if comparison["estimate"] is not None or want is None:  # None: no resample (one item)
        assert close(comparison["estimate"], want), (comparison, want)


def other_value(value: float, magnitude: float, rid: int) -> float:
    moved = value * magnitude * (-1) ** rid
    return moved if math.isfinite(moved) else value


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 6), st.integers(2, 4), st.data())
def test_the_human_ceiling_and_pairwise_spearman_match_scipy_at_any_magnitude(units, raters, data):
    # people's values as imported numbers, here at any magnitude (no resamples: the
    # figures as report.build computes them; with resamples: the intervals' estimates)
    values = data.draw(score_lists(units * raters))
    rows = [
        (u, u, "sys", "S", f"p{r}", values[u * raters + r])
        for u in range(units)
        for r in range(raters)
    ]
    plain = build.agreement(rows)
    with_ci = build.agreement(rows, resamples=8)
    matrix = build._reliability_matrix(rows)[0]
    sides = resampled.loo_sides(matrix)
    for side in sides:
        check(metrics.correlate(side.own, side.rest), side.own, side.rest, "loo side")
    want_p = [reference(s.own, s.rest)["exact_pearson"] for s in sides]
    want_s = [reference(s.own, s.rest)["spearman"] for s in sides]
    ceiling = plain["loo_ceiling"]
    assert ceiling["annotators"] == len(sides) == with_ci["loo_ceiling"]["annotators"]
    for name, want in (("pearson", want_p), ("spearman", want_s)):
        expected = float(np.mean(want)) if want else None
        assert close(ceiling[name], expected), (name, ceiling, expected)
        assert close(with_ci["loo_ceiling"][name], expected), (name, with_ci["loo_ceiling"])
    ids, x, y, _ = resampled.rater_pairs(matrix)
    spearmans = [
        reference(x[ids == pid], y[ids == pid])["spearman"]
        for pid in np.unique(ids)
        if (ids == pid).sum() >= 3 and np.ptp(x[ids == pid]) > 0 and np.ptp(y[ids == pid]) > 0
    ]
    expected = float(np.mean(spearmans)) if spearmans else None
    assert close(plain["mean_pairwise_spearman"]["value"], expected)
    assert close(with_ci["mean_pairwise_spearman"]["value"], expected)


# --- regressions ------------------------------------------------------------------------------

# One judge's values at 1e-310 (subnormal): products of two deviations underflowed to 0 and
# every item's Pearson was 0/0 or x/0, so the item-level mean was null; the intervals'
# Pearson (sums of squares less a squared sum) found "no variation" and was null too.
TINY_ITEMS = {
    1: ([1, 2, 4, 5], [3.0, 5.0, 7.0, 12.0]),
    2: ([2, 3, 3, 5], [9.0, 2.0, 4.0, 6.0]),
    3: ([5, 1, 2, 4], [1.0, 8.0, 2.0, 3.0]),
}


def tiny_rows(scale: float):
    human, judge, rid = [], [], 0
    for item, (people, judged) in TINY_ITEMS.items():
        for system, (p, v) in enumerate(zip(people, judged, strict=True)):
            human.append((rid, item, f"sys{system}", "S", "p0", p))
            judge.append((rid, item, f"sys{system}", "S", "J", v * scale))
            rid += 1
    return human, judge


@pytest.mark.parametrize("scale", [1e-310, 1e-320, 1e300, 1e307])
def test_a_judge_at_extreme_magnitudes_gets_the_item_level_mean_of_scipy(scale):
    # given
    human, judge = tiny_rows(scale)
    # when
    result = build.correlation(human, judge, resamples=20)
    # then: scipy on the values as they are (accurate at these magnitudes but 1e-320)
    want = float(
        np.mean(
            [
                stats.pearsonr(p, unit_scaled(np.array(v) * scale)).statistic
                for p, v in TINY_ITEMS.values()
            ]
        )
    )
    assert result["item"]["pearson"] == pytest.approx(want, abs=TOLERANCE)
    assert result["item"]["n"] == 3 and result["item"]["items_skipped"] == 0
    assert result["item"]["ci"]["pearson"]["estimate"] == pytest.approx(want, abs=TOLERANCE)
    people = [p for ps, _ in TINY_ITEMS.values() for p in ps]
    values = [v * scale for _, vs in TINY_ITEMS.values() for v in vs]
    instance = result["instance"]
    assert instance["ci"]["pearson"]["estimate"] == pytest.approx(
        stats.pearsonr(people, unit_scaled(np.array(values))).statistic, abs=TOLERANCE
    )
    assert instance["pearson"] == pytest.approx(instance["ci"]["pearson"]["estimate"], abs=1e-12)
    assert result["system"]["ci"]["pearson"]["estimate"] is not None
    assert math.isfinite(instance["mae"]) and math.isfinite(instance["ci"]["mae"]["estimate"])


def test_scores_near_the_largest_float_keep_a_finite_mae_and_their_correlation():
    # |x - y| and the sum of differences pass the largest float; the mean does not
    x = np.array([1.5e308, -1.5e308, 1e308, -1e308])
    y = np.array([-0.5e308, 1e307, 1e307, 3.0])
    result = metrics.correlate(x, y)
    assert result.mae == pytest.approx(
        float(sum(abs(Fraction(a) - Fraction(b)) for a, b in zip(x, y, strict=True)) / 4)
    )
    assert result.pearson == pytest.approx(
        stats.pearsonr(np.ldexp(x, -1023), np.ldexp(y, -1023)).statistic
    )
    assert (result.exact, result.within_one) == (0.0, 0.0)


def test_constant_sides_stay_undefined_at_every_magnitude():
    for value in MAGNITUDES:
        result = metrics.correlate([value] * 4, [1, 2, 3, 4])
        assert (result.pearson, result.spearman, result.kendall) == (None, None, None)
        grouped = metrics.grouped_correlations([value] * 3, [1, 2, 3], [0, 0, 0])
        assert all(np.isnan(grouped[name][0]) for name in NAMES)
