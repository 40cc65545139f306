"""Many judges' correlations computed at once, equal to the bit to scipy row by row.

`metrics.correlate_many` (and `correlate`, which goes through it) computes Spearman and
Kendall's tau-b itself, from exact integer and half-integer sums, with the float steps
scipy takes; these tests hold every coefficient to `scipy.stats.spearmanr` /
`kendalltau` with ==, on scores with many ties, continuous values, subnormal and huge
magnitudes. The report built with the batched path is compared, as JSON, with the report
built one scipy call per judge.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from scipy import stats

from analytics import bootstrap, metrics
from analytics.report import build, wide_tables
from analytics.rows import Row

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def scipy_correlate(x: np.ndarray, y: np.ndarray) -> metrics.Correlation:
    """`metrics.correlate` as it was: one scipy call per coefficient."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = ~np.isnan(a) & ~np.isnan(b)
    a, b = a[keep], b[keep]
    n = int(a.size)
    if n == 0:
        return metrics.Correlation(0, None, None, None, None, None, None)
    with np.errstate(over="ignore"):
        diff = np.abs(a - b)
    mae = metrics.mean_abs_difference(a, b)
    exact, within = float(np.mean(diff < 0.5)), float(np.mean(diff <= 1))
    if n < 2 or a.min() == a.max() or b.min() == b.max():
        return metrics.Correlation(n, None, None, None, mae, exact, within)
    return metrics.Correlation(
        n=n,
        pearson=float(metrics.row_pearson(a[None, :], b[None, :])[0]),
        spearman=float(stats.spearmanr(a, b).statistic),
        kendall=float(stats.kendalltau(a, b, variant="b").statistic),
        mae=mae,
        exact=exact,
        within_one=within,
    )


def one_judge_grouped(x: np.ndarray, y: np.ndarray, groups: np.ndarray) -> dict[str, np.ndarray]:
    """`metrics.grouped_correlations` as it was: one judge at a time."""
    keys, group = np.unique(groups, return_inverse=True)
    out = {name: np.full(keys.size, np.nan) for name in ("pearson", "spearman", "kendall")}
    order = np.argsort(group, kind="stable")
    sizes = np.bincount(group, minlength=keys.size)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    for size in np.unique(sizes):
        if size < 2:
            continue
        which = np.flatnonzero(sizes == size)
        idx = order[starts[which][:, None] + np.arange(size)]
        gx, gy = x[idx], y[idx]
        out["pearson"][which] = metrics.row_pearson(gx, gy)
        out["spearman"][which] = metrics.row_pearson(
            stats.rankdata(gx, axis=1), stats.rankdata(gy, axis=1)
        )
        out["kendall"][which] = metrics.row_tau_b(gx, gy)
    return out


def scores(rng: np.random.Generator, kind: str, shape: tuple[int, ...]) -> np.ndarray:
    if kind == "likert":
        return rng.integers(1, 6, shape).astype(float)
    if kind == "means of three":
        return rng.integers(3, 16, shape) / 3
    if kind == "two values":
        return rng.integers(0, 2, shape).astype(float)
    if kind == "raw":
        return np.round(rng.normal(size=shape), 4)
    if kind == "subnormal":
        return rng.integers(1, 40, shape) * 1e-322
    if kind == "huge":
        return rng.normal(size=shape) * 1e300
    return rng.normal(size=shape)


KINDS = ["likert", "means of three", "two values", "raw", "subnormal", "huge", "normal"]


@pytest.mark.parametrize("x_kind", KINDS)
@pytest.mark.parametrize("y_kind", KINDS)
def test_many_rows_equal_scipy_row_by_row(x_kind: str, y_kind: str) -> None:
    rng = np.random.default_rng(len(x_kind) * 31 + len(y_kind))
    for n in (2, 3, 5, 10, 37, 400):
        x = scores(rng, x_kind, (n,))
        ys = scores(rng, y_kind, (6, n))
        ys[0] = ys[0, 0]  # a constant row: undefined
        ys[1] = x  # a perfect match
        ys[2] = -x
        found = metrics.correlate_many(x, ys)
        for row, got in zip(ys, found, strict=True):
            assert got == scipy_correlate(x, row)
            assert metrics.correlate(x, row) == got


def test_missing_pairs_are_left_out_as_before() -> None:
    rng = np.random.default_rng(7)
    x = rng.integers(1, 6, 50).astype(float)
    ys = rng.integers(1, 6, (3, 50)).astype(float)
    ys[0, :5] = np.nan
    x[10] = np.nan
    for row, got in zip(ys, metrics.correlate_many(x, ys), strict=True):
        assert got == scipy_correlate(x, row)
    assert (
        metrics.correlate_many(np.array([]), np.empty((2, 0)))
        == [metrics.Correlation(0, None, None, None, None, None, None)] * 2
    )


def test_tables_larger_than_a_chunk_equal_scipy(monkeypatch: pytest.MonkeyPatch) -> None:
    # rows counted in several chunks, and a row whose table alone is too large (scipy)
    rng = np.random.default_rng(3)
    x = rng.integers(1, 6, 300).astype(float)
    ys = np.round(rng.normal(size=(5, 300)), 3)
    monkeypatch.setattr(metrics, "_TABLE_CELLS", 5 * 300 * 2)
    for row, got in zip(ys, metrics.correlate_many(x, ys), strict=True):
        assert got == scipy_correlate(x, row)
    monkeypatch.setattr(metrics, "_TABLE_CELLS", 10)
    for row, got in zip(ys, metrics.correlate_many(x, ys), strict=True):
        assert got == scipy_correlate(x, row)


@pytest.mark.parametrize("cells", [metrics._GROUP_CELLS, 100])  # one pass; a judge at a time
def test_grouped_correlations_of_many_judges_equal_each_judges_own(
    cells: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics, "_GROUP_CELLS", cells)
    rng = np.random.default_rng(11)
    items = np.repeat(np.arange(40), 6)[: 40 * 6 - 7]  # groups of six, one of one
    items = np.concatenate([items, [99, 99]])  # and one of two
    n = items.size
    x = rng.integers(3, 16, n) / 3
    ys = np.stack([scores(rng, kind, (n,)) for kind in KINDS * 2])
    ys[0, :12] = 4.0  # constant within the first two items
    found = metrics.grouped_correlations_many(x, ys, items)
    for k, row in enumerate(ys):
        own = one_judge_grouped(x, row, items)
        for name, values in metrics.grouped_correlations(x, row, items).items():
            assert values.tobytes() == own[name].tobytes()
        for name, values in own.items():
            np.testing.assert_array_equal(found[name][k], values)
            assert found[name][k].tobytes() == values.tobytes()


def many_judge_rows(
    judges: int = 9, systems: int = 5, items: int = 24, seed: int = 5
) -> tuple[list[Row], list[Row], dict[int, dict[str, Any]], set[tuple[str, str]]]:
    """A small table of the many-judge benchmark's shape: three people of a crowd per
    response (some N/A), LLM judges on 1-5 and raw-valued metrics (one subnormal, one
    huge), some judges leaving responses out or answering N/A."""
    rng = np.random.default_rng(seed)
    names = [f"judge-{k}" for k in range(judges)]
    facets = {
        item: {
            "domains": [f"d{item % 3}"] + ([f"d{item % 4}"] if item % 2 else []),
            "difficulty": item % 3,
        }
        for item in range(items)
    }
    human: list[Row] = []
    judge: list[Row] = []
    off_scale: set[tuple[str, str]] = set()
    for skill in ("A", "B"):
        truth = rng.integers(1, 6, (items, systems))
        for item in range(items):
            for s in range(systems):
                rid = item * systems + s
                for p in rng.choice(8, 3, replace=False):
                    value = int(np.clip(truth[item, s] + rng.integers(-1, 2), 1, 5))
                    na = rng.random() < 0.05
                    human.append((rid, item, f"sys-{s}", skill, f"p{p}", None if na else value))
        for k, name in enumerate(names):
            raw = truth + rng.normal(size=truth.shape) * (0.5 + k / 4)
            if k % 3 == 0:
                values: np.ndarray = np.clip(np.rint(raw), 1, 5)
            else:
                values = np.round(raw, 3) * (1e-318 if k == 4 else 1e300 if k == 5 else 1.0)
                off_scale.add((name, skill))
            for item in range(items):
                for s in range(systems):
                    if k == 7 and (item + s) % 5 == 0:
                        continue  # left out: a set of shared responses of its own
                    v: float | None = float(values[item, s])
                    if k % 3 == 0:
                        v = int(values[item, s])
                    if k == 8 and item == 3:
                        v = None
                    judge.append((item * systems + s, item, f"sys-{s}", skill, name, v))
    return human, judge, facets, off_scale


def test_the_report_and_its_breakdowns_equal_those_of_one_scipy_call_per_judge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    human, judge, facets, off_scale = many_judge_rows()
    report = build.build_report(human, judge, off_scale=off_scale)
    report["breakdowns"] = build.breakdowns(human, judge, facets, off_scale=off_scale)

    def one_at_a_time(
        humans: dict[int, build.HumanMean], judge_rows: dict[str, list[Row]]
    ) -> dict[str, Any]:
        return {
            name: (build.correlation([], rows, means=humans), {})
            for name, rows in judge_rows.items()
        }

    monkeypatch.setattr(metrics, "correlate", scipy_correlate)
    monkeypatch.setattr(metrics, "grouped_correlations", one_judge_grouped)
    monkeypatch.setattr(build, "point_correlations", one_at_a_time)
    before = build.build_report(human, judge, off_scale=off_scale)
    before["breakdowns"] = build.breakdowns(human, judge, facets, off_scale=off_scale)
    assert json.dumps(report) == json.dumps(before)
    assert report["correlation"]["judge-5"]["A"]["instance"]["kendall"] is not None


def assert_close(found: Any, expected: Any) -> None:
    """The same JSON, floats within 1e-12 (relative or absolute)."""
    if isinstance(expected, dict):
        assert list(found) == list(expected)
        for key in expected:
            assert_close(found[key], expected[key])
    elif isinstance(expected, list):
        assert len(found) == len(expected)
        for a, b in zip(found, expected, strict=True):
            assert_close(a, b)
    elif isinstance(expected, float):
        assert found == pytest.approx(expected, rel=1e-12, abs=1e-12)
    else:
        assert found == expected


def unit_scaled_stats_from_cells(
    cells: np.ndarray, table: bootstrap.CellTable, vx: np.ndarray, vy: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """`bootstrap._stats_from_cells` as it was (its count fixed to 1 / n): every table
    brought to the unit scale, the cross products summed cell by cell."""
    tx = np.add.reduceat(cells, table.x_starts, axis=1)
    ty = np.add.reduceat(cells[:, table.y_order], table.y_starts, axis=1)
    rank_x = np.cumsum(tx, axis=1) - (tx - 1) / 2
    rank_y = np.cumsum(ty, axis=1) - (ty - 1) / 2

    def pearson(x_values: np.ndarray, y_values: np.ndarray) -> np.ndarray:
        n = tx.sum(axis=1)
        inverse = 1.0 / np.where(n > 0, n, 1.0)
        hx, hy = tx > 0, ty > 0
        dx = metrics._centred(metrics._unit_scale(x_values, hx), tx, inverse)
        dy = metrics._centred(metrics._unit_scale(y_values, hy), ty, inverse)
        dx, dy = np.where(hx, dx, 0.0), np.where(hy, dy, 0.0)
        sxy = (cells * dx[:, table.x] * dy[:, table.y]).sum(axis=1)
        r = metrics._pearson_of_deviations(dx, dy, sxy, tx, ty)
        r[(hx.sum(axis=1) < 2) | (hy.sum(axis=1) < 2)] = np.nan
        return r

    return (
        pearson(np.broadcast_to(vx, tx.shape), np.broadcast_to(vy, ty.shape)),
        pearson(rank_x, rank_y),
    )


def test_intervals_over_cells_equal_those_on_the_unit_scale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every raw-valued judge resampled over its cells (a wide table), at any magnitude
    monkeypatch.setattr(wide_tables, "WIDE_TABLE_CELLS", 50)
    human, judge, _facets, off_scale = many_judge_rows(judges=7)
    report = build.build_report(human, judge, off_scale=off_scale, resamples=60)
    monkeypatch.setattr(bootstrap, "_stats_from_cells", unit_scaled_stats_from_cells)
    monkeypatch.setattr(wide_tables, "_stats_from_cells", unit_scaled_stats_from_cells)
    before = build.build_report(human, judge, off_scale=off_scale, resamples=60)
    assert_close(report, before)  # cross sums grouped by x value: the last place may move
    for name_of_judge in ("judge-1", "judge-4", "judge-5"):  # wide: raw values, normal and extreme
        instance = report["correlation"][name_of_judge]["A"]["instance"]
        for name in ("pearson", "spearman"):
            assert instance["ci"][name]["estimate"] == pytest.approx(instance[name], abs=1e-12)
            assert instance["ci"][name]["low"] < instance[name] < 1


def test_intervals_on_the_shared_point_figures_equal_those_of_each_judge_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    human, judge, _facets, off_scale = many_judge_rows(judges=7)
    report = build.build_report(human, judge, off_scale=off_scale, resamples=40)
    alone = build.correlation

    def without_point(*args: Any, point: Any = None, **kwargs: Any) -> Any:
        return alone(*args, **kwargs)

    monkeypatch.setattr(build, "correlation", without_point)
    before = build.build_report(human, judge, off_scale=off_scale, resamples=40)
    assert json.dumps(report) == json.dumps(before)
    assert report["correlation"]["judge-1"]["B"]["item"]["ci"]["pearson"]["low"] is not None


@pytest.mark.parametrize("scale", [1.0, 1e-318, 1e300])
def test_wide_tables_give_the_coefficients_of_the_sample(scale: float) -> None:
    # the cells' Pearson and Spearman are those of the scores (they were 1 for any sample)
    rng = np.random.default_rng(2)
    h = rng.integers(3, 16, 500) / 3
    j = np.round(h + rng.normal(size=500), 4) * scale
    vx, cx = bootstrap._codes(h)
    vy, cy = bootstrap._codes(j)
    table, cell = bootstrap.cell_table(cx, cy, vy.size)
    cells = np.bincount(cell, minlength=table.x.size).astype(float)[None, :]
    pearson, spearman = bootstrap._stats_from_cells(cells, table, vx, vy)
    assert pearson[0] == pytest.approx(stats.pearsonr(h, j / scale).statistic, abs=1e-12)
    assert spearman[0] == pytest.approx(stats.spearmanr(h, j).statistic, abs=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_midranks_are_scipys_average_ranks(kind: str) -> None:
    rng = np.random.default_rng(len(kind))
    for shape in [(1,), (7,), (3, 10), (4, 5, 6), (2, 300)]:
        values = scores(rng, kind, shape)
        expected = stats.rankdata(values, axis=-1)
        assert metrics.midranks(values).tobytes() == expected.tobytes()
    special = np.array([[0.0, -0.0, np.inf, -np.inf, 1.0, 0.0], [2.0, 2.0, 2.0, 2.0, 2.0, 2.0]])
    assert metrics.midranks(special).tobytes() == stats.rankdata(special, axis=-1).tobytes()
    with_nan = np.array([[1.0, np.nan, 2.0], [3.0, 1.0, 2.0]])
    np.testing.assert_array_equal(metrics.midranks(with_nan), stats.rankdata(with_nan, axis=-1))
