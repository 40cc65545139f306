"""The one small-sample rule (analytics/minimums.py)."""

from __future__ import annotations

import math

import pytest

from analytics import minimums


def test_a_figure_at_its_minimum_is_shown_and_below_it_says_why():
    floor = minimums.minimum("correlation").n
    assert minimums.too_few("correlation", floor) == ""
    assert minimums.too_few("correlation", floor - 1) == (
        f"too few: n = {floor - 1} (at least {floor} responses)"
    )
    assert minimums.too_few("icc", None).startswith("too few: n = 0")


def test_an_unknown_kind_of_figure_is_a_bug():
    with pytest.raises(KeyError):
        minimums.too_few("corelation", 100)


@pytest.mark.parametrize(
    ("estimate", "low", "high", "holds"),
    [
        (0.5, 0.2, 0.8, True),
        (0.819, 0.819, 0.819, True),  # a point interval contains its point
        (5.346, 0.0, 5.345, False),  # the runaway Bradley-Terry strength of issue 28
        (17_222.78, 17_261.28, 44_933_967.86, False),
        (0.473, 0.230, 0.473, True),
        (0.5, 0.8, 0.2, False),
        (0.5, None, None, True),
        (math.nan, 0.1, 0.9, False),
        (0.5, -math.inf, 0.9, False),
    ],
)
def test_an_interval_holds_only_around_its_estimate(estimate, low, high, holds):
    assert minimums.interval_holds(estimate, low, high) is holds


def test_every_minimum_says_what_it_counts_and_why():
    for kind, floor in minimums.MINIMUMS.items():
        assert floor.n >= 2 and floor.unit and len(floor.why) > 20, kind
