"""The bias probes' figures (analytics.trust.probes): pure, no database. Each formula is
checked against a computation written out here."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.trust import probes
from judging.selectors import ProbeData, ProbeRunData


def test_partial_correlation_matches_the_hand_computation_and_residuals():
    # Hand computation (deviations from the means 3, 3 and 1.8):
    #   Sxx = 10, Syy = 10, Szz = 2.8, Sxy = 8, Sxz = 5, Syz = 5
    #   r_xy = 0.8, r_xz = r_yz = 5 / sqrt(28), so r_xz^2 = 25/28
    #   r_xy.z = (0.8 - 25/28) / (1 - 25/28) = (-2.6/28) / (3/28) = -0.8666...
    x, y, z = [1, 2, 3, 4, 5], [2, 1, 4, 3, 5], [1, 1, 2, 2, 3]
    assert probes.partial_correlation(x, y, z) == pytest.approx(-2.6 / 3)
    # the same as correlating the residuals of x and y regressed on z (as pingouin does)
    rng = np.random.default_rng(3)
    z = rng.normal(size=200)
    x = z + rng.normal(size=200)
    y = 0.5 * z + 0.3 * x + rng.normal(size=200)
    design = np.column_stack([np.ones_like(z), z])
    rx = x - design @ np.linalg.lstsq(design, x, rcond=None)[0]
    ry = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    assert probes.partial_correlation(x, y, z) == pytest.approx(np.corrcoef(rx, ry)[0, 1])
    assert probes.partial_correlation([1, 2, 3], [1, 1, 1], [3, 2, 1]) is None


def test_a_mean_interval_resamples_items_not_rows():
    # item 1 has three rows of 1.0, item 2 one row of 0.0: the mean is 0.75; a resample
    # draws two items, so its mean is 1 (1,1), 0 (2,2) or 0.75 (one of each)
    interval = probes.mean_interval([1, 1, 1, 2], [1.0, 1.0, 1.0, 0.0], 400)
    assert interval["estimate"] == 0.75 and interval["resamples"] == 400
    assert interval["low"] == 0.0 and interval["high"] == 1.0
    constant = probes.mean_interval([1, 2, 3], [0.0, 0.0, 0.0], 100)
    assert constant["low"] == constant["high"] == constant["estimate"] == 0.0
    assert probes.mean_interval([], [], 100)["estimate"] is None


def _run(**extra):
    fields = dict(
        run_id=2,
        judge="J",
        probe="pad",
        label="Length",
        base_run_id=1,
        params={},
        texts=["t"],
        cost="0.1",
        base_cost="0.2",
        pairwise=False,
        items={},
        base_scores={},
        probe_scores={},
        base_verdicts={},
        probe_verdicts={},
    )
    fields.update(extra)
    return ProbeRunData(**fields)


def test_effect_flip_rate_and_self_preference_are_what_the_definitions_say():
    items = {r: r // 2 for r in range(40)}  # two responses per item
    base = {(r, s): 3.0 for r in range(40) for s in ("A", "B")}
    moved = {(r, s): 3.0 + (s == "A") for r in range(40) for s in ("A", "B")}
    flips = {(r, o): ("challenger" if r % 4 else "anchor") for r in range(40) for o in (0, 1)}
    runs = [
        _run(items=items, base_scores=base, probe_scores=moved),
        _run(
            run_id=3,
            probe="bandwagon",
            pairwise=True,
            items=items,
            base_verdicts={k: "challenger" for k in flips},
            probe_verdicts=flips,
        ),
    ]
    human = [
        (r, items[r], "own" if r % 2 else "other", s, "p", 3.0) for r in range(40) for s in "AB"
    ]
    # the judge gives its own family's responses +1 on every skill
    judge = [(r, i, sy, s, "J", v + (sy == "own")) for r, i, sy, s, _, v in human]
    data = ProbeData(runs=runs, families={"own": "fam"}, judge_families={"J": "fam"}, lengths={})
    figures = probes.probe_figures(data, human=human, judge=judge, resamples=200)["J"]
    pad, wagon = figures["runs"]
    assert pad["effect"]["estimate"] == pytest.approx(0.5)  # +1 on A, 0 on B
    assert pad["skills"]["A"]["estimate"] == 1.0 == pad["skills"]["A"]["low"]
    assert pad["skills"]["B"]["high"] == 0.0 and pad["n"] == 80 and pad["items"] == 20
    assert wagon["flip_rate"]["estimate"] == pytest.approx(0.25)  # r % 4 == 0
    assert 0 < wagon["flip_rate"]["low"] < 0.25 < wagon["flip_rate"]["high"]
    self_pref = figures["self_preference"]
    assert self_pref["difference"]["estimate"] == 1.0 and self_pref["own_systems"] == ["own"]
    assert self_pref["own"] == self_pref["other"] == 40
    assert figures["length"] is None  # no lengths known
    assert probes.probe_figures(None, human=human, judge=judge, resamples=10) == {}
