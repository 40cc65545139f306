"""Intervals for every agreement and correlation figure (analytics.report.resampled on
analytics.bootstrap.Resampler). Two checks per statistic: its sums give the report's point
estimate on the full data, and a resample's value is exactly the statistic recomputed by the
report's own code on that resample written out (each drawn item copied as often as drawn)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from analytics import bootstrap, metrics
from analytics.report import resampled
from analytics.report.build import (
    _icc,
    _icc_design,
    _loo_ceiling,
    _mean_pairwise_spearman,
    agreement,
    build_report,
    correlation,
    human_means,
)

SEED = 11


def crowd_rows(n_items=30, systems=3, raters=8, per_unit=3, seed=SEED, na_rate=0.0):
    """Human rows (response, item, system, skill, rater, value) and judge rows of one skill:
    each response scored by `per_unit` of `raters` annotators, near a latent quality."""
    rng = np.random.default_rng(seed)
    human, judge = [], []
    rid = 0
    for item in range(n_items):
        for s in range(systems):
            truth = rng.integers(1, 6)
            for rater in rng.choice(raters, size=per_unit, replace=False):
                value = int(np.clip(truth + rng.integers(-1, 2), 1, 5))
                if rng.random() < na_rate:
                    value = None
                human.append((rid, 1000 + item, f"sys{s}", "Skill", f"r{rater}", value))
            judged = int(np.clip(truth + rng.integers(-1, 2), 1, 5))
            judge.append((rid, 1000 + item, f"sys{s}", "Skill", "judge", judged))
            rid += 1
    return human, judge


def complete_rows(n_items=25, systems=2, raters=2, seed=SEED):
    """Every response scored by the same raters (a complete design: Cohen's kappa, all ICCs)."""
    rng = np.random.default_rng(seed)
    rows, rid = [], 0
    for item in range(n_items):
        for s in range(systems):
            truth = rng.integers(1, 6)
            for rater in range(raters):
                value = int(np.clip(truth + rng.integers(-1, 2) * (rater % 2), 1, 5))
                rows.append((rid, item, f"sys{s}", "Skill", f"r{rater}", value))
            rid += 1
    return rows


def expand(rows, counts_by_item: dict) -> list[tuple]:
    """The resample written out: each item's rows repeated as often as the item was drawn,
    every copy its own item and responses (the same raters and systems)."""
    out = []
    for copy in range(max(counts_by_item.values(), default=0)):
        for response, item, system, skill, rater, value in rows:
            if counts_by_item.get(item, 0) > copy:
                out.append(
                    (response * 1000 + copy, item * 1000 + copy, system, skill, rater, value)
                )
    return out


def first_resample(rs: bootstrap.Resampler) -> dict:
    """The item counts of the Resampler's first resample (its first row of draws)."""
    rng = np.random.default_rng(rs.seed)
    counts = next(bootstrap._chunks(rs.keys.size, 1, rs.resamples, rng))[0]
    return {int(item): int(c) for item, c in zip(rs.keys, counts, strict=True)}


def matrix_of(rows):
    raters = sorted({r[4] for r in rows})
    units = sorted({r[0] for r in rows})
    matrix = np.full((len(raters), len(units)), np.nan)
    for response, _i, _s, _k, rater, value in rows:
        if value is not None:
            matrix[raters.index(rater), units.index(response)] = value
    item_of = {r[0]: r[1] for r in rows}
    return matrix, np.array([item_of[u] for u in units])


def close(a, b):
    return (a is None and b is None) or (
        a is not None and b is not None and abs(a - b) < 1e-9
    ), f"{a} != {b}"


# --- estimates equal the report's figures ------------------------------------------------------


def test_every_agreement_interval_is_centred_on_the_reports_figure():
    human, _ = crowd_rows()
    result = agreement(human, resamples=200)
    for level, value in result["krippendorff_alpha"].items():
        assert close(result["krippendorff_alpha_ci"][level]["estimate"], value)[0]
    assert close(result["fleiss_kappa_ci"]["estimate"], result["fleiss_kappa"])[0]
    assert close(result["gwet_ac1_ci"]["estimate"], result["gwet_ac1"])[0]
    assert result["icc"]["design"].startswith("one-way")
    assert set(result["icc_ci"]) == {"ICC1", "ICC1k"}
    for form in ("ICC1", "ICC1k"):
        assert close(result["icc_ci"][form]["estimate"], result["icc"][form])[0]
    # with intervals, these two come from the intervals' tables: compare with the direct code
    matrix, _ = matrix_of(human)
    direct_pairs, direct_loo = _mean_pairwise_spearman(matrix), _loo_ceiling(matrix)
    assert result["mean_pairwise_spearman"]["pairs"] == direct_pairs["pairs"] > 0
    assert close(result["mean_pairwise_spearman"]["value"], direct_pairs["value"])[0]
    assert (
        result["mean_pairwise_spearman_ci"]["estimate"] == result["mean_pairwise_spearman"]["value"]
    )
    assert result["loo_ceiling"]["annotators"] == direct_loo["annotators"] > 0
    for name in ("pearson", "spearman"):
        assert close(result["loo_ceiling"][name], direct_loo[name])[0]
    for ci in (
        result["fleiss_kappa_ci"],
        result["icc_ci"]["ICC1"],
        result["loo_ceiling_ci"]["pearson"],
    ):
        assert ci["low"] <= ci["estimate"] <= ci["high"] and ci["resamples"] == 200


def test_complete_designs_get_cohen_and_all_six_icc_intervals():
    rows = complete_rows()
    result = agreement(rows, resamples=200)
    assert result["icc"]["design"] == "complete"
    for form in ("ICC1", "ICC1k", "ICC2", "ICC2k", "ICC3", "ICC3k"):
        assert close(result["icc_ci"][form]["estimate"], result["icc"][form])[0]
    for weights in metrics.KAPPA_WEIGHTS:
        assert close(result["cohen_kappa_ci"][weights]["estimate"], result["cohen_kappa"][weights])[
            0
        ]


def test_every_correlation_interval_is_centred_on_the_reports_figure():
    human, judge = crowd_rows(na_rate=0.1)
    result = correlation(human, judge, resamples=200)
    for level, names in {
        "instance": ("pearson", "spearman", "kendall", "mae", "exact", "within_one"),
        "item": ("pearson", "spearman", "kendall"),
        "system": ("pearson", "spearman", "kendall"),
    }.items():
        for name in names:
            assert close(result[level]["ci"][name]["estimate"], result[level][name])[0], (
                level,
                name,
            )


def test_a_judge_on_its_own_scale_gets_no_agreement_intervals():
    human, judge = crowd_rows()
    raw = [(*r[:5], r[5] * 0.137) for r in judge]
    report = build_report(human, raw, resamples=50, off_scale={("judge", "Skill")})
    ci = report["correlation"]["judge"]["Skill"]["instance"]["ci"]
    assert set(ci) == {"pearson", "spearman", "kendall"}


def test_the_agreement_and_a_full_coverage_judge_share_one_set_of_resamples():
    human, judge = crowd_rows()
    report = build_report(human, judge, resamples=100)
    skill = report["agreement"]["Skill"]
    corr = report["correlation"]["judge"]["Skill"]
    assert skill["krippendorff_alpha_ci"]["interval"]["resamples"] == 100
    assert corr["instance"]["ci"]["pearson"]["resamples"] == 100
    assert corr["system"]["ci"]["pearson"]["resamples"] == 100


# --- a resample is the statistic of the written-out resample --------------------------------


def test_a_resample_of_each_agreement_figure_is_the_figure_of_the_expanded_data():
    human, _ = crowd_rows(n_items=20, raters=6)
    matrix, unit_items = matrix_of(human)
    rs = bootstrap.Resampler(unit_items, resamples=5, seed=3, keep=True)
    sink: dict = {}
    counts, cats = metrics.category_counts(matrix, categories=[1, 2, 3, 4, 5])
    resampled.alpha_register(rs, matrix, unit_items, sink=sink, key="alpha")
    resampled.kappa_register(rs, counts, unit_items, len(cats), sink=sink, key="kappas")
    design = _icc_design(matrix)
    resampled.icc_register(
        rs, design[0], unit_items[design[1]], complete=False, sink=sink, key="icc"
    )
    resampled.pairwise_spearman_register(rs, matrix, unit_items, sink=sink, key="pairs")
    resampled.loo_register(rs, matrix, unit_items, sink=sink, key="loo")
    rs.run()
    drawn = expand(human, first_resample(rs))
    m2, _ = matrix_of(drawn)
    c2, _ = metrics.category_counts(m2, categories=[1, 2, 3, 4, 5])
    expected = {
        ("alpha", "interval"): metrics.krippendorff_alpha(m2, "interval"),
        ("alpha", "ordinal"): metrics.krippendorff_alpha(m2, "ordinal"),
        ("kappas", "fleiss_kappa"): metrics.fleiss_kappa(c2),
        ("kappas", "gwet_ac1"): metrics.gwet_ac1(c2, n_categories=5),
        ("icc", "ICC1"): _icc(m2)["ICC1"],
        ("icc", "ICC1k"): _icc(m2)["ICC1k"],
        ("pairs", "value"): _mean_pairwise_spearman(m2)["value"],
        ("loo", "pearson"): _loo_ceiling(m2)["pearson"],
        ("loo", "spearman"): _loo_ceiling(m2)["spearman"],
    }
    for (key, name), value in expected.items():
        assert rs.values[key][name][0] == pytest.approx(value, abs=1e-9), (key, name)


def test_a_resample_of_cohen_and_two_way_icc_is_the_figure_of_the_expanded_data():
    rows = complete_rows(n_items=15)
    matrix, unit_items = matrix_of(rows)
    rs = bootstrap.Resampler(unit_items, resamples=3, seed=5, keep=True)
    sink: dict = {}
    resampled.cohen_register(
        rs, matrix[0], matrix[1], unit_items, [1, 2, 3, 4, 5], sink=sink, key="cohen"
    )
    slots, columns, complete = _icc_design(matrix)
    assert complete
    resampled.icc_register(rs, slots, unit_items[columns], complete=True, sink=sink, key="icc")
    rs.run()
    m2, _ = matrix_of(expand(rows, first_resample(rs)))
    for weights in metrics.KAPPA_WEIGHTS:
        expected = metrics.cohen_kappa(m2[0], m2[1], weights, categories=[1, 2, 3, 4, 5])
        assert rs.values["cohen"][weights][0] == pytest.approx(expected, abs=1e-9)
    icc = metrics.icc(m2.T)
    for form in ("ICC1", "ICC1k", "ICC2", "ICC2k", "ICC3", "ICC3k"):
        assert rs.values["icc"][form][0] == pytest.approx(getattr(icc, form), abs=1e-9), form


def test_a_resample_of_each_correlation_level_is_the_level_of_the_expanded_data():
    human, judge = crowd_rows(n_items=25, systems=4, na_rate=0.05)
    means = human_means(human)
    jv = {r[0]: r[5] for r in judge}
    shared = sorted(rid for rid in means if rid in jv)
    h = np.array([means[r][2] for r in shared])
    j = np.array([jv[r] for r in shared], dtype=float)
    items = np.array([means[r][0] for r in shared])
    rs = bootstrap.Resampler(items, resamples=4, seed=9, keep=True)
    sink: dict = {}
    resampled.instance_register(rs, h, j, items, sink=sink, key="instance")
    resampled.item_level_register(
        rs, np.unique(items), metrics.grouped_correlations(h, j, items), sink=sink, key="item"
    )
    resampled.system_level_register(
        rs,
        items,
        [means[r][1] for r in shared],
        [means[r][3] for r in shared],
        [means[r][4] for r in shared],
        j,
        sink=sink,
        key="system",
    )
    rs.run()
    counts = first_resample(rs)
    expected = correlation(expand(human, counts), expand(judge, counts))
    for level, names in {
        "instance": ("pearson", "spearman", "kendall", "mae", "exact", "within_one"),
        "item": ("pearson", "spearman", "kendall"),
        "system": ("pearson", "spearman", "kendall"),
    }.items():
        for name in names:
            got = rs.values[level][name][0]
            assert got == pytest.approx(expected[level][name], abs=1e-9), (level, name)


def test_system_means_that_are_equal_stay_tied_in_every_resample():
    # system a: two responses per item with means 4/3 and 5/3; system b: one with 3/2.
    # Both system means are exactly 3/2 in any resample; summed as floats they need not be
    # equal floats, and a broken tie changes Spearman (1.0 with the tie, 0.87 without).
    rows = []
    for item in range(7):
        base = item * 10
        rows += [
            (base, item, "a", "S", "r1", 1),
            (base, item, "a", "S", "r2", 1),
            (base, item, "a", "S", "r3", 2),
        ]
        rows += [
            (base + 1, item, "a", "S", "r1", 1),
            (base + 1, item, "a", "S", "r2", 2),
            (base + 1, item, "a", "S", "r3", 2),
        ]
        rows += [(base + 2, item, "b", "S", "r1", 1), (base + 2, item, "b", "S", "r2", 2)]
        rows += [(base + 3, item, "c", "S", "r1", 5), (base + 3, item, "c", "S", "r2", 4)]
    means = human_means(rows)
    ids = sorted(means)
    items = [means[r][0] for r in ids]
    rs = bootstrap.Resampler(items, resamples=300, keep=True)
    judge = np.array([3.0 if means[r][1] == "c" else 1.0 for r in ids])
    sink: dict = {}
    resampled.system_level_register(
        rs,
        items,
        [means[r][1] for r in ids],
        [means[r][3] for r in ids],
        [means[r][4] for r in ids],
        judge,
        sink=sink,
        key="s",
    )
    rs.run()
    assert sink["s"]["spearman"]["estimate"] == 1.0
    assert np.all(rs.values["s"]["spearman"] == 1.0)


def test_tau_b_from_tables_equals_scipy():
    rng = np.random.default_rng(4)
    x = rng.integers(1, 6, 200).astype(float)
    y = np.clip(x + rng.integers(-2, 3, 200), 1, 5).astype(float)
    vx, cx = np.unique(x, return_inverse=True)
    vy, cy = np.unique(y, return_inverse=True)
    table = np.zeros((1, vx.size, vy.size))
    np.add.at(table[0], (cx, cy), 1)
    expected = stats.kendalltau(x, y, variant="b").statistic
    assert bootstrap.tau_b_tables(table)[0] == pytest.approx(expected, abs=1e-12)


def test_a_feature_row_outside_the_items_is_refused():
    rs = bootstrap.Resampler([1, 2, 3], resamples=1)
    with pytest.raises(ValueError, match="outside"):
        rs.add([1, 4], np.ones((2, 1)), lambda s: {"x": s[:, 0]}, sink={}, key="k")


def _tau_b_counted(table):
    """Kendall's tau-b of one joint table, its concordant and discordant pairs counted one
    cell against every cell below it (the definition, no running sums)."""
    nx, ny = table.shape
    s = 0.0
    for i in range(nx):
        for j in range(ny):
            below = table[i + 1 :]
            s += table[i, j] * (below[:, j + 1 :].sum() - below[:, :j].sum())
    rows, cols = table.sum(axis=1)[None], table.sum(axis=0)[None]
    return bootstrap.tau_b_from(np.array([s]), rows, cols)[0]


def test_tau_b_tables_counts_the_pairs_of_the_definition():
    rng = np.random.default_rng(5)
    tables = np.zeros((20, 4, 30))
    for t in tables:
        np.add.at(t, (rng.integers(0, 4, 60), rng.integers(0, 30, 60)), 1.0)
    tables[0] = 0.0  # empty: undefined
    tables[1, 1:] = 0.0  # one x value: undefined
    found = bootstrap.tau_b_tables(tables)
    expected = np.array([_tau_b_counted(t) for t in tables])
    assert np.array_equal(found, expected, equal_nan=True)
    assert np.isnan(found[:2]).all() and np.isfinite(found[2:]).all()


def test_kendall_from_the_items_is_the_tables_kendall_to_the_bit():
    # a metric table's shape: raw values with many ties (zeros, a few hundred distinct
    # values) against human means, few systems per item, so that the joint table is much
    # larger than the items and Kendall's S is counted from the items' concordances
    rng = np.random.default_rng(6)
    n_items = 40
    items = np.repeat(np.arange(n_items) * 3, rng.integers(2, 6, n_items))
    h = rng.integers(3, 16, items.size) / 3
    j = np.where(rng.random(items.size) < 0.4, 0.0, np.round(h / 5 + rng.random(items.size), 2))
    cells = np.unique(h).size * np.unique(j).size
    assert bootstrap.tau_by_items(cells, items)
    rs = bootstrap.Resampler(items, resamples=200, keep=True)
    sink: dict = {}
    resampled.instance_register(rs, h, j, items, sink=sink, key="ci", agreement=False)
    rs.run()
    kept = rs.values["ci"]["kendall"]
    # the same resamples, each table written out and counted by tau_b_tables
    vx, cx = np.unique(h, return_inverse=True)
    vy, cy = np.unique(j, return_inverse=True)
    keys, code = np.unique(items, return_inverse=True)
    rng_again = np.random.default_rng(rs.seed)
    counts = next(bootstrap._chunks(keys.size, 0, 200, rng_again, size=200))
    tables = np.zeros((200, vx.size, vy.size))
    for r in range(200):
        np.add.at(tables[r], (cx, cy), counts[r, code])
    assert np.array_equal(kept, bootstrap.tau_b_tables(tables), equal_nan=True)
    whole = np.zeros((1, vx.size, vy.size))
    np.add.at(whole[0], (cx, cy), 1.0)
    assert sink["ci"]["kendall"]["estimate"] == bootstrap.tau_b_tables(whole)[0]
    assert sink["ci"]["kendall"]["estimate"] == pytest.approx(
        stats.kendalltau(h, j, variant="b").statistic, abs=1e-12
    )


def test_a_table_resampled_over_its_cells_gives_the_written_out_tables_figures():
    # the metric table's shape of the test above: the instance intervals are resampled over
    # the cells the sample holds (a few hundred of the table's thousands), not the whole table
    rng = np.random.default_rng(8)
    n_items = 40
    items = np.repeat(np.arange(n_items) * 3, rng.integers(2, 6, n_items))
    h = rng.integers(3, 16, items.size) / 3
    j = np.where(rng.random(items.size) < 0.4, 0.0, np.round(h / 5 + rng.random(items.size), 2))
    vx, cx = np.unique(h, return_inverse=True)
    vy, cy = np.unique(j, return_inverse=True)
    assert bootstrap.over_cells(vx.size * vy.size, items)
    assert np.unique(cx * vy.size + cy).size < vx.size * vy.size / 4
    rs = bootstrap.Resampler(items, resamples=300, keep=True)
    sink: dict = {}
    resampled.instance_register(rs, h, j, items, sink=sink, key="ci", agreement=True)
    rs.run()
    kept = rs.values["ci"]
    # the same resamples written out as whole tables, with the whole table's figures
    keys, code = np.unique(items, return_inverse=True)
    counts = next(bootstrap._chunks(keys.size, 0, 300, np.random.default_rng(rs.seed), size=300))
    tables = np.zeros((300, vx.size, vy.size))
    for r in range(300):
        np.add.at(tables[r], (cx, cy), counts[r, code])
    pearson, spearman = bootstrap._stats_from_tables(tables, vx, vy)
    n = tables.sum(axis=(1, 2))
    diff = np.abs(vx[:, None] - vy[None, :])
    # Pearson and Spearman: the cross sums in another order, so the last places may move
    np.testing.assert_allclose(kept["pearson"], pearson, rtol=1e-12, atol=0)
    np.testing.assert_allclose(kept["spearman"], spearman, rtol=1e-12, atol=0)
    np.testing.assert_allclose(kept["mae"], (tables * diff).sum(axis=(1, 2)) / n, rtol=1e-12)
    # counts are whole numbers: Kendall and the agreement shares to the bit
    assert np.array_equal(kept["kendall"], bootstrap.tau_b_tables(tables), equal_nan=True)
    assert np.array_equal(kept["exact"], (tables * (diff < 0.5)).sum(axis=(1, 2)) / n)
    assert np.array_equal(kept["within_one"], (tables * (diff <= 1)).sum(axis=(1, 2)) / n)
    # and each is the coefficient of the expanded resample (scipy)
    for r in range(5):
        weights = counts[r, code].astype(int)
        x, y = np.repeat(h, weights), np.repeat(j, weights)
        assert kept["pearson"][r] == pytest.approx(stats.pearsonr(x, y).statistic, rel=1e-12)
        assert kept["spearman"][r] == pytest.approx(stats.spearmanr(x, y).statistic, rel=1e-12)
    ci = sink["ci"]
    assert ci["pearson"]["estimate"] == pytest.approx(stats.pearsonr(h, j).statistic, rel=1e-12)
    assert ci["spearman"]["estimate"] == pytest.approx(stats.spearmanr(h, j).statistic, rel=1e-12)
    assert ci["pearson"]["low"] < ci["pearson"]["estimate"] < ci["pearson"]["high"]


def test_paired_difference_reads_the_tables_the_instance_intervals_read():
    # a tied metric against human means: its table is resampled over the cells, on both
    # ways to a pair's difference (the report's kept Pearsons and paired_difference)
    rng = np.random.default_rng(9)
    items = np.repeat(np.arange(30), 4)
    h = rng.integers(3, 16, items.size) / 3
    a = np.round(h / 5 + rng.random(items.size), 2)
    b = np.round(h / 3 + rng.random(items.size), 2)
    assert bootstrap.over_cells(np.unique(h).size * np.unique(a).size, items)
    rs = bootstrap.Resampler(items, resamples=200)
    sinks: list[dict] = [{}, {}]
    for sink, judge in zip(sinks, (a, b), strict=True):
        resampled.instance_register(rs, h, judge, items, sink=sink, key="ci", agreement=False)
        rs.keep_values(sink, "pearson")
    rs.run()
    kept = bootstrap.paired_difference_of(
        sinks[0]["ci"]["pearson"]["estimate"],
        sinks[1]["ci"]["pearson"]["estimate"],
        rs.kept_values(sinks[0], "pearson"),
        rs.kept_values(sinks[1], "pearson"),
        sinks[0]["ci"]["pearson"]["items"],
    )
    assert kept == bootstrap.paired_difference(h, a, b, items, resamples=200)
