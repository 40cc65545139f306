"""The judge trust report's figures (analytics.trust.figures), each against a hand-computed
example written here or against the library that computes it (scipy, krippendorff)."""

from __future__ import annotations

import json
import math

import krippendorff
import numpy as np
import pytest
from scipy import stats

from analytics.trust.figures import (
    TrustInputs,
    applies_majority,
    bland_altman,
    confusion,
    cross_validated_map,
    human_spread,
    isotonic_map,
    item_folds,
    map_apply,
    round_scale,
    terciles,
    trust_figures,
)


def test_rounding_onto_the_scale_is_half_up_and_clipped():
    assert round_scale([0.2, 1.49, 1.5, 2.5, 3.5, 4.51, 7]).tolist() == [1, 1, 2, 3, 4, 5, 5]


def test_bland_altman_by_hand():
    # differences judge - human: 1, 0, 1, 1 -> bias 0.75; squared deviations
    # 0.0625 * 3 + 0.5625 = 0.75, / (n - 1) = 0.25 -> SD 0.5; limits 0.75 -/+ 1.96 * 0.5
    found = bland_altman([1, 2, 3, 4], [2, 2, 4, 5])
    assert found["n"] == 4
    assert found["bias"] == pytest.approx(0.75)
    assert found["sd"] == pytest.approx(0.5)
    assert found["loa_low"] == pytest.approx(-0.23)
    assert found["loa_high"] == pytest.approx(1.73)


def test_the_isotonic_map_pools_adjacent_violators_by_hand():
    # mean human value per judge value: 1 -> 3 (2 pairs), 2 -> 1 (1 pair), 3 -> 4 (2 pairs);
    # 3 > 1 violates the order, so 1 and 2 pool to (3 * 2 + 1 * 1) / 3 = 7/3
    xs, ys = isotonic_map([1, 1, 2, 3, 3], [2, 4, 1, 3, 5])
    assert xs.tolist() == [1, 2, 3]
    assert ys == pytest.approx([7 / 3, 7 / 3, 4])


def test_a_map_is_linear_between_its_points_and_flat_beyond():
    assert map_apply([1, 3], [2, 4], [0, 1, 2, 3, 5]).tolist() == [2, 2, 3, 4, 4]


def test_folds_keep_an_items_responses_together_and_are_deterministic():
    items = [7, 7, 8, 9, 9, 10, 11, 12]
    folds = item_folds(items, 3)
    assert folds[0] == folds[1] and folds[3] == folds[4]
    assert sorted(set(folds.tolist())) == [0, 1, 2]
    assert item_folds(items, 3).tolist() == folds.tolist()


def test_cross_validation_predicts_each_item_from_the_others_by_hand():
    # item 1: (judge 1, human 1), (2, 2); item 2: (1, 3), (2, 4). With two items, each is
    # mapped by the other's map: item 1 by {1: 3, 2: 4}, item 2 by {1: 1, 2: 2}.
    predicted = cross_validated_map([1, 2, 3, 4], [1, 2, 1, 2], [1, 1, 2, 2])
    assert predicted is not None
    assert predicted.tolist() == [3, 4, 1, 2]
    assert cross_validated_map([1, 2], [1, 2], [5, 5]) is None  # one item: nothing to hold out


def test_the_confusion_matrix_rounds_both_sides_and_has_an_na_row_and_column():
    found = confusion([1.4, 2.5, None, 4.6, 3.0], [1, None, 3, 5, 3.5])
    counts = found["counts"]
    assert found["labels"] == [1, 2, 3, 4, 5, "N/A"]
    assert counts[0][0] == 1  # judge 1, human 1.4 -> 1
    assert counts[5][2] == 1  # judge N/A, human 2.5 -> 3
    assert counts[2][5] == 1  # judge 3, human N/A
    assert counts[4][4] == 1  # judge 5, human 4.6 -> 5
    assert counts[3][2] == 1  # judge 3.5 -> 4, human 3
    assert sum(map(sum, counts)) == 5


def test_terciles_by_hand():
    # numpy's linear quantiles of 0 0 1 2 3 4: at 1/3, position 5/3 -> 0 + 2/3 * (1 - 0);
    # at 2/3, position 10/3 -> 2 + 1/3 * (3 - 2)
    cuts, group = terciles([0, 0, 1, 2, 3, 4])
    assert cuts == pytest.approx([2 / 3, 7 / 3])
    assert group.tolist() == [0, 0, 1, 1, 2, 2]


def test_human_spread_is_the_population_sd_of_at_least_two_scores():
    rows = [
        (1, 10, "m", "S", "a", 1),
        (1, 10, "m", "S", "b", 3),
        (1, 10, "m", "S", "c", None),
        (2, 10, "m", "S", "a", 2),
        (2, 10, "m", "S", "b", 2),
        (2, 10, "m", "S", "c", 5),
        (3, 11, "m", "S", "a", 4),
    ]
    # response 1: 1 and 3 -> SD 1; response 2: mean 3, variance (1 + 1 + 4) / 3 = 2
    assert human_spread(rows) == pytest.approx({1: 1.0, 2: math.sqrt(2)})


def test_the_majority_says_na_only_when_more_than_half_said_it():
    rows = [
        (1, 1, "m", "S", "a", None),
        (1, 1, "m", "S", "b", None),
        (1, 1, "m", "S", "c", 3),
        (2, 1, "m", "S", "a", None),
        (2, 1, "m", "S", "b", 4),
        (3, 1, "m", "S", "a", None),
    ]
    assert applies_majority(rows) == {1: False, 2: True, 3: False}


def _rows(pairs, skill="S", judge="J"):
    """Human rows (one person "p") and judge rows from (item, human, judge) triples."""
    human = [(k, item, "m", skill, "p", h) for k, (item, h, _j) in enumerate(pairs)]
    model = [(k, item, "m", skill, judge, j) for k, (item, _h, j) in enumerate(pairs)]
    return human, model


def test_kappa_on_whether_the_skill_applies_by_hand():
    # the 2 x 2 example of Cohen's kappa: 20 both apply, 5 judge only, 10 people only, 15
    # both N/A: p_o = 35/50 = 0.7, p_e = (25 * 30 + 25 * 20) / 50**2 = 0.5, kappa = 0.4
    pairs = (
        [(k, 3, 3) for k in range(20)]
        + [(20 + k, None, 3) for k in range(5)]
        + [(25 + k, 3, None) for k in range(10)]
        + [(35 + k, None, None) for k in range(15)]
    )
    human, judge = _rows(pairs)
    na = trust_figures(human, judge, {}, TrustInputs(), resamples=200)["J"]["na"]["S"]
    assert na["table"] == [[20, 5], [10, 15]]
    assert na["agreement"] == pytest.approx(0.7)
    assert na["kappa"] == pytest.approx(0.4)
    assert na["kappa_ci"]["estimate"] == pytest.approx(0.4)
    assert na["kappa_ci"]["low"] <= 0.4 <= na["kappa_ci"]["high"]
    # people said N/A on 5 + 15 responses, the judge on 10 + 15
    assert na["people_rate"] == pytest.approx(20 / 50)
    assert na["judge_rate"] == pytest.approx(25 / 50)


def _lenient(n_items=30):
    """A judge one point above people who disagree a little, on two systems per item."""
    rng = np.random.default_rng(3)
    human, judge, facets, words = [], [], {}, {}
    rid = 0
    for item in range(n_items):
        facets[item] = {"domains": ["Math" if item % 2 else "Coding"], "difficulty": 1 + item % 5}
        for system in ("a", "b"):
            rid += 1
            true = int(rng.integers(1, 5))
            words[rid] = 10 + 7 * rid
            for person in ("p", "q"):
                human.append((rid, item, system, "S", person, true + int(rng.integers(0, 2))))
            judge.append((rid, item, system, "S", "J", min(5, true + 1)))
    return human, judge, facets, words


def test_calibration_figures_match_their_definitions_and_intervals_hold_them():
    human, judge, facets, words = _lenient()
    trust = trust_figures(human, judge, facets, TrustInputs(words=words), resamples=300)["J"]
    cal = trust["calibration"]["S"]
    means = {}
    for rid, _i, _s, _k, _r, v in human:
        means.setdefault(rid, []).append(v)
    h = np.array([np.mean(means[r[0]]) for r in judge])
    j = np.array([r[5] for r in judge], dtype=float)
    d = j - h
    assert cal["n"] == len(judge)
    assert cal["offset"]["estimate"] == pytest.approx(d.mean())
    assert cal["bland_altman"]["sd"] == pytest.approx(d.std(ddof=1))
    for name in ("bias", "sd", "loa_low", "loa_high"):
        ci = cal["bland_altman"]["ci"][name]
        assert ci["estimate"] == pytest.approx(cal["bland_altman"][name])
        assert ci["low"] <= ci["estimate"] <= ci["high"]
    iso = cal["isotonic"]
    assert iso["mae_before"] == pytest.approx(np.abs(d).mean())
    assert iso["exact_before"] == pytest.approx(np.mean(round_scale(h) == round_scale(j)))
    # a lenient judge is mostly fixed by the monotone map, out of fold too
    assert iso["mae_after"] < iso["mae_before"]
    assert iso["ci"]["mae_after"]["estimate"] == pytest.approx(iso["mae_after"])
    xs, ys = isotonic_map(j, h)
    assert cal["map"] == [[pytest.approx(x), pytest.approx(y)] for x, y in zip(xs, ys, strict=True)]
    assert sum(map(sum, cal["confusion"]["counts"])) == len(judge)
    json.dumps(trust, allow_nan=False)


def test_strata_quality_is_scipys_on_each_stratum():
    human, judge, facets, words = _lenient()
    trust = trust_figures(human, judge, facets, TrustInputs(words=words), resamples=100)["J"]
    strata = trust["strata"]["S"]
    means = {}
    for rid, _i, _s, _k, _r, v in human:
        means.setdefault(rid, []).append(v)
    coding = [r for r in judge if facets[r[1]]["domains"] == ["Coding"]]
    h = [np.mean(means[r[0]]) for r in coding]
    j = [r[5] for r in coding]
    group = next(g for g in strata["domain"] if g["group"] == "Coding")
    assert group["n"] == len(coding)
    assert group["pearson"] == pytest.approx(stats.pearsonr(h, j)[0])
    assert group["spearman"] == pytest.approx(stats.spearmanr(h, j)[0])
    assert group["mae"] == pytest.approx(np.mean(np.abs(np.array(h) - np.array(j))))
    assert group["ci"]["pearson"]["estimate"] == pytest.approx(group["pearson"])
    assert [g["group"] for g in strata["difficulty"]] == ["1", "2", "3", "4", "5"]
    assert sum(g["n"] for g in strata["difficulty"]) == len(judge)
    # length terciles: response lengths rise with the response id
    length = strata["length"]
    assert sum(g["n"] for g in length["groups"]) == len(judge)
    assert length["groups"][0]["range"][1] <= length["cuts"][0] < length["groups"][1]["range"][0]
    spread = strata["human_spread"]
    assert spread["responses"] == len(judge)  # two people each


def test_stochasticity_is_krippendorffs_alpha_over_samples_and_retest_pairs():
    human, judge, facets, words = _lenient(10)
    # three samples per response; the third differs on every other response
    samples = []
    for rid, item, _s, skill, _j, value in judge:
        for k in range(3):
            samples.append((rid, item, skill, k, value - (k == 2 and rid % 2)))
    retest = [(1, 0, "S", 3, 3), (2, 0, "S", 4, 3), (3, 1, "S", None, None), (5, 2, "S", 2, 2)]
    trust = trust_figures(
        human, judge, facets, TrustInputs(samples={"J": samples}, retest=retest), resamples=200
    )["J"]
    found = trust["stochasticity"]["S"]
    mine = found["judge"]
    rids = sorted({r[0] for r in samples})
    matrix = np.array(
        [[next(r[4] for r in samples if r[0] == u and r[3] == k) for u in rids] for k in range(3)],
        dtype=float,
    )
    for level in ("ordinal", "interval"):
        expected = krippendorff.alpha(
            reliability_data=matrix,
            level_of_measurement=level,
            value_domain=np.unique(matrix),
        )
        assert mine["alpha"][level] == pytest.approx(expected)
        assert mine["alpha_ci"][level]["estimate"] == pytest.approx(expected)
    assert mine["samples"] == 3 and mine["responses"] == len(rids)
    assert mine["unanimous"] == pytest.approx(np.mean([rid % 2 == 0 for rid in rids]))
    people = found["people"]
    # pairs (3, 3), (4, 3), (N/A, N/A), (2, 2): three of four agree exactly (N/A = N/A)
    assert people["pairs"] == 4 and people["exact"] == pytest.approx(0.75)
    pairs = np.array([[3, 4, np.nan, 2], [3, 3, np.nan, 2]])
    assert people["alpha"]["interval"] == pytest.approx(
        krippendorff.alpha(reliability_data=pairs, level_of_measurement="interval")
    )


def test_a_judge_off_the_scale_gets_no_calibration_and_no_mae():
    human, judge, facets, words = _lenient(6)
    trust = trust_figures(human, judge, facets, TrustInputs(), resamples=0, off_scale={("J", "S")})[
        "J"
    ]
    assert trust["calibration"]["S"] == {"off_scale": True}
    assert trust["strata"]["S"]["all"]["mae"] is None
    assert trust["strata"]["S"]["all"]["pearson"] is not None
