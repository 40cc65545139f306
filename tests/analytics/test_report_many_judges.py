"""The report with many judges: raw-valued judges' group means exact without a Fraction per
value, and the judge comparison computed for the pairs asked for (default: each judge
against the skill's best), with the figures of the all-pairs comparison."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from analytics.report.build import group_means


def fraction_means(groups: list[str], values: list[float]) -> dict[str, float]:
    parts: dict[str, list[Fraction]] = {}
    for g, v in zip(groups, values, strict=True):
        parts.setdefault(g, []).append(Fraction(v))
    return {g: float(sum(p) / len(p)) for g, p in parts.items()}


@pytest.mark.parametrize(
    "scale", [1.0, 1e-3, 1e5, 1e-310, 1e300, "mixed"], ids=lambda s: f"scale={s}"
)
def test_group_means_of_raw_values_are_the_exact_means(scale):
    # given raw metric values, some equal in exact value from different groups
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        if scale == "mixed":
            values = np.concatenate(
                [rng.normal(size=n) * 1e-300, rng.normal(size=n) * 1e300, [0.0, 5e-324, 1.7e308]]
            )
        else:
            values = np.round(rng.normal(size=n) * 3, 4) * scale
        groups = [f"s{g}" for g in rng.integers(0, 4, size=values.size)]
        # when / then: the correctly rounded exact mean, groups in order of appearance
        got = group_means(groups, values.tolist())
        expected = fraction_means(groups, values.tolist())
        assert got == expected and list(got) == list(expected)


def test_equal_exact_means_of_raw_values_are_equal_floats():
    # 0.1 + 0.2 and 0.2 + 0.1 in other orders and other groups: the same exact sum
    got = group_means(["a", "a", "b", "b", "c"], [0.1, 0.2, 0.2, 0.1, 0.15000000000000002])
    assert got["a"] == got["b"] == float((Fraction(0.1) + Fraction(0.2)) / 2)
