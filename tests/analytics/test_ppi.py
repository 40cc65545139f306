"""analytics/ppi.py, the statistics behind prediction-powered estimates
(docs/PREDICTION_POWERED.md), checked three ways: against the reference implementation
`ppi_python` on many generated cases (PPI++ means, intervals, lambda, the people-only
interval), against hand-worked examples written out below, and against exact enumeration
(every Poisson draw of a small frame for the active estimator) or brute force (the
planning formulas). Pure: no database."""

from __future__ import annotations

import itertools
import math
from types import ModuleType

import numpy as np
import pytest
from scipy import stats

from analytics import ppi

Z95 = float(stats.norm.ppf(0.975))  # 1.959963984540054


@pytest.fixture(scope="module")
def ppi_py() -> ModuleType:
    # importing ppi_python takes ~2.5 s (numba): once, and only in the tests that compare
    return pytest.importorskip("ppi_py")


# --- ppi_mean against ppi_python -------------------------------------------------------------


def _case(
    rng: np.random.Generator, n: int, big_n: int, human: str, judge: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """y for n labeled responses, the judge's scores on them and on big_n unlabeled ones."""
    quality = rng.normal(3.0, 1.0, n + big_n)

    def person() -> np.ndarray:
        return np.clip(np.rint(quality + rng.normal(0, 0.7, n + big_n)), 1, 5)

    # "int": one annotator's 1-5 score; "frac": the mean of three annotators' (1, 4/3, ...)
    y = person() if human == "int" else (person() + person() + person()) / 3
    if judge == "good":  # the 1-5 scale, close to people
        yhat = np.clip(np.rint(quality + 0.3 + rng.normal(0, 0.5, n + big_n)), 1, 5)
    elif judge == "raw":  # its own 0-100 scale (a metric imported raw)
        yhat = np.clip(20 * quality + rng.normal(0, 10, n + big_n), 0, 100)
    elif judge == "useless":  # anti-correlated: lambda < 0, clipped to 0
        yhat = 6 - np.clip(np.rint(quality + rng.normal(0, 0.5, n + big_n)), 1, 5)
    else:  # "compressed": spreads a fifth as much as people, so lambda > 1, clipped to 1
        yhat = 3 + 0.2 * (quality - 3) + rng.normal(0, 0.02, n + big_n)
    return y[:n], yhat[:n], yhat[n:]


SHAPES = [(2, 5), (3, 3), (2, 1), (3, 40), (10, 200), (50, 20), (40, 40), (300, 2000)]


def test_ppi_mean_equals_ppi_python(ppi_py: ModuleType) -> None:
    reference_lambda = ppi_py.ppi._calc_lam_glm
    lambdas: dict[str, list[float]] = {"good": [], "raw": [], "useless": [], "compressed": []}
    compared = 0
    for seed, (n, big_n), human, judge in itertools.product(
        range(4), SHAPES, ("int", "frac"), tuple(lambdas)
    ):
        rng = np.random.default_rng(seed)
        y, yhat, yhat_u = _case(rng, n, big_n, human, judge)
        mine = ppi.ppi_mean(y, yhat, yhat_u)
        if not np.concatenate([yhat, yhat_u]).var() > 0:
            # ppi_python divides by the judge's variance (nan); here lambda is 0
            assert mine.lam == 0.0
            continue
        assert mine.estimate is not None and mine.lam is not None
        estimate = np.squeeze(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_u, lam=None))
        low, high = ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, lam=None)
        human_low, human_high = ppi_py.classical_mean_ci(y, alpha=0.05)
        lam = reference_lambda(y[:, None], yhat[:, None], yhat_u[:, None], np.eye(1), clip=True)
        assert mine.estimate == pytest.approx(float(estimate), abs=1e-9)
        assert mine.ci_low == pytest.approx(float(np.squeeze(low)), abs=1e-9)
        assert mine.ci_high == pytest.approx(float(np.squeeze(high)), abs=1e-9)
        assert mine.lam == pytest.approx(float(lam), abs=1e-9)
        assert mine.human_only_estimate == pytest.approx(float(y.mean()), abs=1e-9)
        assert mine.human_only_ci_low == pytest.approx(float(human_low), abs=1e-9)
        assert mine.human_only_ci_high == pytest.approx(float(human_high), abs=1e-9)
        # the same at a fixed lambda (PPI at 1, people only at 0)
        for fixed in (0.0, 1.0):
            at = ppi.ppi_mean(y, yhat, yhat_u, lam=fixed)
            low, high = ppi_py.ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, lam=fixed)
            assert at.ci_low == pytest.approx(float(np.squeeze(low)), abs=1e-9)
            assert at.ci_high == pytest.approx(float(np.squeeze(high)), abs=1e-9)
        assert (mine.n_labeled, mine.n_unlabeled) == (n, big_n)
        if n >= 10:  # on 2 or 3 labels lambda is anything
            lambdas[judge].append(mine.lam)
        compared += 1
    assert compared >= 240
    # the cases cover both clips and the open interval
    assert sum(lam == 0.0 for lam in lambdas["useless"]) >= 0.8 * len(lambdas["useless"])
    assert sum(lam == 1.0 for lam in lambdas["compressed"]) >= 0.5 * len(lambdas["compressed"])
    assert sum(0 < lam < 1 for lam in lambdas["good"]) >= 0.8 * len(lambdas["good"])
    assert max(lambdas["raw"]) < 0.1  # a 0-100 judge gets a small lambda, not a wrong mean


def test_ppi_mean_by_hand() -> None:
    # 4 labeled responses Y = 3 4 2 5 with judge scores Yhat = 3 5 2 4, and 4 unlabeled
    # responses with judge scores 4 4 5 3.
    #
    # lambda = Cov(Y, Yhat) / ((1 + n/N) Var(all Yhat))
    #   mean Y = 3.5, mean Yhat = 3.5; deviations Y: -.5 .5 -1.5 1.5, Yhat: -.5 1.5 -1.5 .5
    #   Cov (population) = (.25 + .75 + 2.25 + .75) / 4 = 1
    #   all 8 judge scores 3 5 2 4 4 4 5 3: mean 3.75, squared deviations sum to 7.5,
    #   Var (sample, ddof 1) = 7.5 / 7 = 15/14
    #   lambda = 1 / ((1 + 4/4) * 15/14) = 14/30 = 7/15
    # estimate = lambda mean(Yhat_unlabeled) + mean(Y - lambda Yhat)
    #          = 7/15 * 4 + 3.5 - 7/15 * 3.5 = 3.5 + 7/30 = 3.7333...
    # se^2 = lambda^2 Var(Yhat_unlabeled) / N + Var(Y - lambda Yhat) / n
    #   Var(4 4 5 3) = .5 -> (49/225) * .5 / 4 = 49/1800
    #   Y - 7/15 Yhat = 24/15 25/15 16/15 47/15, mean 28/15, squared deviations
    #   (16 + 9 + 144 + 361) / 225 = 530/225, Var = 530/900 -> / 4 = 53/360 = 265/1800
    #   se^2 = 314/1800 = 157/900, se = sqrt(157) / 30 = 0.41766
    # interval = 3.7333 -/+ 1.95996 * 0.41766 = [2.91473, 4.55194]
    # people only: mean 3.5, Var(Y) = 5/4, se = sqrt(5/4 / 4) = 0.55902,
    #   interval = 3.5 -/+ 1.09565 = [2.40435, 4.59565]
    # effective n = Var(Y) / se^2 = (5/4) / (157/900) = 1125/157 = 7.1656: the judge's 4
    #   unlabeled responses are worth 3.17 more labeled ones
    result = ppi.ppi_mean([3, 4, 2, 5], [3, 5, 2, 4], [4, 4, 5, 3])
    assert result.lam == pytest.approx(7 / 15, abs=1e-12)
    assert result.estimate == pytest.approx(3.5 + 7 / 30, abs=1e-12)
    assert result.se == pytest.approx(math.sqrt(157) / 30, abs=1e-12)
    assert result.ci_low == pytest.approx(3.5 + 7 / 30 - Z95 * math.sqrt(157) / 30, abs=1e-12)
    assert (result.ci_low, result.ci_high) == pytest.approx((2.91473, 4.55194), abs=1e-5)
    assert result.human_only_estimate == 3.5
    assert result.human_only_se == pytest.approx(math.sqrt(5 / 16), abs=1e-12)
    assert (result.human_only_ci_low, result.human_only_ci_high) == pytest.approx(
        (2.40435, 4.59565), abs=1e-5
    )
    assert result.effective_n == pytest.approx(1125 / 157, abs=1e-12)


def test_ppi_mean_edges() -> None:
    # fewer than 2 labeled responses: nothing but the counts
    few = ppi.ppi_mean([4], [4], [3, 5])
    assert (few.estimate, few.se, few.lam, few.effective_n) == (None, None, None, None)
    assert (few.n_labeled, few.n_unlabeled) == (1, 2)
    # no unlabeled response: lambda 0, the people-only figures, effective n = n
    alone = ppi.ppi_mean([1, 2, 4, 5], [1, 3, 4, 4], [])
    assert alone.lam == 0.0
    assert alone.estimate == alone.human_only_estimate == 3.0
    assert alone.ci_low == alone.human_only_ci_low
    assert alone.effective_n == pytest.approx(4.0, abs=1e-12)
    # a judge that gives every response the same score: lambda 0
    flat = ppi.ppi_mean([1, 2, 4, 5], [3, 3, 3, 3], [3, 3])
    assert flat.lam == 0.0 and flat.estimate == 3.0
    with pytest.raises(ValueError, match="same length"):
        ppi.ppi_mean([1, 2], [1], [])
    with pytest.raises(ValueError, match="finite"):
        ppi.ppi_mean([1, float("nan")], [1, 2], [3])
    with pytest.raises(ValueError, match="finite"):
        ppi.ppi_mean([1, 2], [1, 2], [float("inf")])
    with pytest.raises(ValueError, match="alpha"):
        ppi.ppi_mean([1, 2], [1, 2], [3], alpha=1.5)


# --- ppi_influence ---------------------------------------------------------------------------


def test_influence_squares_sum_to_the_variance() -> None:
    rng = np.random.default_rng(3)
    for n, big_n in [(2, 3), (10, 0), (25, 100)]:
        y, yhat, yhat_u = _case(rng, n, big_n, "frac", "good")
        result = ppi.ppi_mean(y, yhat, yhat_u)
        assert result.lam is not None and result.se is not None
        labeled, unlabeled = ppi.ppi_influence(y, yhat, yhat_u, result.lam)
        assert (len(labeled), len(unlabeled)) == (n, big_n)
        assert float(np.sum(labeled**2) + np.sum(unlabeled**2)) == pytest.approx(
            result.se**2, rel=1e-12
        )


def test_influence_covariance_of_two_systems_by_hand() -> None:
    # Two systems on the same 5 items: items 1-3 labeled for both, items 4-5 judged only;
    # lambda = 1/2 for both.
    #   A: Y = 4 2 3, Yhat = 4 3 3, Yhat_unlabeled = 5 3
    #   B: Y = 3 2 1, Yhat = 3 2 2, Yhat_unlabeled = 4 2
    # A: Y - Yhat/2 = 2 .5 1.5, mean 4/3 -> psi = (2/3, -5/6, 1/6) / 3 = 2/9 -5/18 1/18;
    #    unlabeled psi = 1/2 (5 - 4, 3 - 4) / 2 = 1/4 -1/4
    # B: Y - Yhat/2 = 1.5 1 0, mean 5/6 -> psi = (2/3, 1/6, -5/6) / 3 = 2/9 1/18 -5/18;
    #    unlabeled psi = 1/2 (4 - 3, 2 - 3) / 2 = 1/4 -1/4
    # Cov(A, B) = sum over items of psi_A psi_B
    #   = 4/81 - 5/324 - 5/324 + 1/16 + 1/16 = 6/324 + 1/8 = 1/54 + 1/8 = 31/216
    # Var(A) = 4/81 + 25/324 + 1/324 + 1/8 = 7/54 + 1/8 = 55/216 = Var(B)
    # Var(A - B) = 55/216 + 55/216 - 2 * 31/216 = 48/216 = 2/9, which is the PPI variance of
    #   the paired differences: Y 1 0 2, Yhat 1 1 1, Yhat_unlabeled 1 1 -> Y - Yhat/2 =
    #   .5 -.5 1.5, Var = 2/3, / 3 = 2/9 (the judge's differences do not vary: + 0)
    a_labeled, a_unlabeled = ppi.ppi_influence([4, 2, 3], [4, 3, 3], [5, 3], 0.5)
    b_labeled, b_unlabeled = ppi.ppi_influence([3, 2, 1], [3, 2, 2], [4, 2], 0.5)
    a = np.concatenate([a_labeled, a_unlabeled])
    b = np.concatenate([b_labeled, b_unlabeled])
    assert a == pytest.approx([2 / 9, -5 / 18, 1 / 18, 1 / 4, -1 / 4], abs=1e-12)
    assert b == pytest.approx([2 / 9, 1 / 18, -5 / 18, 1 / 4, -1 / 4], abs=1e-12)
    cov = float(a @ b)
    assert cov == pytest.approx(31 / 216, abs=1e-12)
    assert float(a @ a) == pytest.approx(55 / 216, abs=1e-12)
    var_difference = float(a @ a + b @ b - 2 * cov)
    assert var_difference == pytest.approx(2 / 9, abs=1e-12)
    paired = ppi.ppi_mean([1, 0, 2], [1, 1, 1], [1, 1], lam=0.5)
    assert paired.se is not None
    assert paired.se**2 == pytest.approx(var_difference, abs=1e-12)


# --- active_mean -----------------------------------------------------------------------------


def _draws(pi: np.ndarray) -> list[tuple[np.ndarray, float]]:
    """Every Poisson sample of the frame with its probability (those of probability 0 left
    out)."""
    out = []
    for bits in itertools.product((False, True), repeat=len(pi)):
        xi = np.array(bits)
        weight = float(np.prod(np.where(xi, pi, 1 - pi)))
        if weight > 0:
            out.append((xi, weight))
    return out


def test_active_mean_is_exactly_unbiased_with_the_design_variance() -> None:
    # 8 responses; the first two are always drawn (pi = 1), so every sample has >= 2 labels
    lam0 = 0.5
    yhat = np.array([4.0, 2.0, 3.0, 5.0, 1.0, 3.0, 4.0, 2.0])
    residual = np.array([3.0, 2.5, 0.5, 1.0, 0.2, 0.8, 0.4, 0.6])
    y = lam0 * yhat + residual * np.array([1, -1, 1, -1, 1, 1, -1, 1])
    pi = ppi.inclusion_probabilities(residual, 4, uniform_share=0)
    assert pi[:2].tolist() == [1.0, 1.0] and pi.sum() == pytest.approx(4, abs=1e-12)
    draws = _draws(pi)
    assert sum(w for _, w in draws) == pytest.approx(1.0, abs=1e-12)
    for lam, offset in ((0.0, 0.0), (lam0, 0.0), (1.0, 0.0), (lam0, 0.4), (1.0, -1.5)):
        estimates = []
        for xi, _ in draws:
            result = ppi.active_mean(yhat, pi, xi, np.where(xi, y, np.nan), lam=lam, offset=offset)
            assert result.estimate is not None and result.lam == lam
            assert result.offset == offset
            if lam == 0 and offset == 0:  # Horvitz-Thompson: sum of Y / pi over the drawn, / N
                assert result.estimate == pytest.approx(
                    float(np.sum(y[xi] / pi[xi]) / len(y)), abs=1e-12
                )
            estimates.append(result.estimate)
        weights = np.array([w for _, w in draws])
        values = np.array(estimates)
        mean = float(weights @ values)
        assert mean == pytest.approx(float(y.mean()), abs=1e-12)
        variance = float(weights @ (values - mean) ** 2)
        errors = y - lam * yhat - offset
        design = float(np.sum(errors**2 * (1 - pi) / pi) / len(y) ** 2)
        assert variance == pytest.approx(design, abs=1e-12)
        if lam == lam0 and offset == 0:
            # the planning variance is this design variance plus sd^2 / T (sd = 0 here)
            assert ppi.active_variance(0.0, residual, 4, uniform_share=0) == pytest.approx(
                variance, abs=1e-12
            )


def test_active_mean_by_hand() -> None:
    # 3 responses in the frame: judge scores 4 3 4, drawn with pi = 1/2 1 1/4; the first two
    # were drawn and people scored them 3 and 4; the third was not drawn.
    # weights xi/pi = 2 1 0; a = Y xi/pi = 6 4 0; b = Yhat (1 - xi/pi) = -4 0 4
    # power-tuned lambda = -Cov(a, b) / Var(b):
    #   mean a = 10/3, mean b = 0; Cov = (8/3 * -4 + 2/3 * 0 + -10/3 * 4) / 3 = -8;
    #   Var(b) = (16 + 0 + 16) / 3 = 32/3; lambda = 8 / (32/3) = 3/4
    # terms lambda Yhat + (Y - lambda Yhat) xi/pi = 3 + 0 * 2, 2.25 + 1.75 * 1, 3 + 0 = 3 4 3
    # estimate = 10/3; Var(terms) = (1/9 + 4/9 + 1/9) / 3 = 2/9; se = sqrt(2/9 / 3) =
    #   sqrt(2/27) = 0.27217; interval 3.3333 -/+ 0.53344 = [2.79989, 3.86677]
    # lambda = 0 (Horvitz-Thompson): terms 6 4 0, the same 10/3 here, se = sqrt(56/27) = 1.44
    result = ppi.active_mean(
        [4, 3, 4], [0.5, 1.0, 0.25], [True, True, False], [3, 4, 0], offset=0.0, lam=None
    )
    assert result.lam == pytest.approx(0.75, abs=1e-12)
    assert result.estimate == pytest.approx(10 / 3, abs=1e-12)
    # lambda was tuned on these 2 labels (p = 1): the variance is scaled by n / (n - p) = 2
    # and the interval takes Student's t with 1 degree of freedom (12.7062):
    # se = sqrt(2/27 * 2) = sqrt(4/27) = 0.38490; 3.33333 -/+ 4.89062 = [-1.55729, 8.22395]
    assert result.se == pytest.approx(math.sqrt(4 / 27), abs=1e-12)
    assert (result.ci_low, result.ci_high) == pytest.approx((-1.55729, 8.22395), abs=1e-5)
    assert (result.n_labeled, result.n_frame) == (2, 3)
    # both given (p = 0): the design-based normal interval, se sqrt(2/27) = 0.27217,
    # 3.3333 -/+ 1.95996 * 0.27217 = [2.79989, 3.86677]
    fixed = ppi.active_mean(
        [4, 3, 4], [0.5, 1.0, 0.25], [True, True, False], [3, 4, 0], lam=0.75, offset=0.0
    )
    assert fixed.se == pytest.approx(math.sqrt(2 / 27), abs=1e-12)
    assert (fixed.ci_low, fixed.ci_high) == pytest.approx((2.79989, 3.86677), abs=1e-5)
    ht = ppi.active_mean(
        [4, 3, 4], [0.5, 1.0, 0.25], [True, True, False], [3, 4, 0], lam=0, offset=0.0
    )
    assert ht.estimate == pytest.approx(10 / 3, abs=1e-12)
    assert ht.se == pytest.approx(math.sqrt(56 / 27), abs=1e-12)
    # Tuned together (the default): d = 1 - xi/pi = -1 0 1 and b = Yhat d = -4 0 4 = 4 d are
    # collinear, so lambda adds nothing beyond the offset: lambda = 0 and
    # offset = -Cov(a, d) / Var(d) = -(-2) / (2/3) = 3; terms 3 + (3 - 3) * 2, 3 + (4 - 3),
    # 3 = 3 4 3: the same estimate as lambda 3/4 with no offset. Two numbers tuned on two
    # labels leave no degree of freedom: no estimate; with a third label drawn, there is.
    tuned = ppi.active_mean([4, 3, 4], [0.5, 1.0, 0.25], [True, True, False], [3, 4, 0])
    assert (tuned.estimate, tuned.se, tuned.n_labeled) == (None, None, 2)
    three = ppi.active_mean([4, 3, 4], [0.5, 1.0, 0.25], [True, True, True], [3, 4, 4])
    assert three.estimate is not None and three.se is not None
    # lambda 0 with the offset tuned: the people-only IPW estimate, centred (offset 3, the
    # same terms 3 4 3), p = 1: se sqrt(4/27)
    centred = ppi.active_mean([4, 3, 4], [0.5, 1.0, 0.25], [True, True, False], [3, 4, 0], lam=0)
    assert centred.offset == pytest.approx(3.0, abs=1e-12)
    assert centred.estimate == pytest.approx(10 / 3, abs=1e-12)
    assert centred.se == pytest.approx(math.sqrt(4 / 27), abs=1e-12)


def test_active_mean_edges() -> None:
    one = ppi.active_mean([3, 4, 5], [0.5, 0.5, 0.5], [True, False, False], [3, 0, 0])
    assert (one.estimate, one.lam, one.n_labeled, one.n_frame) == (None, None, 1, 3)
    # y is not read where the response is not labeled
    result = ppi.active_mean(
        [3, 4, 5], [1, 1, 0.5], [True, True, False], [3, 4, float("nan")], lam=0.5
    )
    assert result.estimate is not None and math.isfinite(result.estimate)
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        ppi.active_mean([3, 4], [0.0, 1.0], [True, True], [3, 4])
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        ppi.active_mean([3, 4], [1.2, 1.0], [True, True], [3, 4])
    with pytest.raises(ValueError, match="same length"):
        ppi.active_mean([3, 4], [1.0], [True, True], [3, 4])
    with pytest.raises(ValueError, match="finite"):
        ppi.active_mean([3, 4], [1.0, 1.0], [True, True], [3, float("nan")])


# --- inclusion_probabilities ------------------------------------------------------------------


def test_inclusion_probabilities() -> None:
    rng = np.random.default_rng(5)
    for size, budget, share in itertools.product((5, 40, 300), (1, 2.5, 4), (0.0, 0.2, 1.0)):
        u = rng.exponential(1.0, size) ** 2  # a few large ones, so some are capped
        pi = ppi.inclusion_probabilities(u, budget, uniform_share=share)
        assert pi.sum() == pytest.approx(budget, abs=1e-9)
        assert np.all(pi <= 1) and np.all(pi >= share * budget / size - 1e-15)
        order = np.argsort(u, kind="stable")
        assert np.all(np.diff(pi[order]) >= -1e-12)  # more uncertain, more likely drawn
        if share > 0:
            assert np.all(pi > 0)
    # capped at exactly 1 without the uniform share; with it, 0.8 + 0.2 * 2/5
    pi = ppi.inclusion_probabilities([100, 1, 1, 1, 1], 2, uniform_share=0)
    assert pi.tolist() == [1.0, 0.25, 0.25, 0.25, 0.25]
    pi = ppi.inclusion_probabilities([100, 1, 1, 1, 1], 2)
    assert pi == pytest.approx([0.88, 0.28, 0.28, 0.28, 0.28], abs=1e-12)
    # the excess of several capped responses spreads over the rest (water filling)
    pi = ppi.inclusion_probabilities([50, 40, 4, 2, 2], 3, uniform_share=0)
    assert pi.tolist()[:2] == [1.0, 1.0]
    assert pi[2:] == pytest.approx([0.5, 0.25, 0.25], abs=1e-12)
    assert ppi.inclusion_probabilities([1, 2, 3], 3).tolist() == [1.0, 1.0, 1.0]
    assert ppi.inclusion_probabilities([1, 2, 3], 10).tolist() == [1.0, 1.0, 1.0]
    assert ppi.inclusion_probabilities([0, 0, 0, 0], 1) == pytest.approx([0.25] * 4)
    assert ppi.inclusion_probabilities([], 3).tolist() == []
    with pytest.raises(ValueError, match="budget must be a number > 0"):
        ppi.inclusion_probabilities([1, 2], 0)
    with pytest.raises(ValueError, match="budget must be a number > 0"):
        ppi.inclusion_probabilities([1, 2], float("nan"))
    with pytest.raises(ValueError, match="uncertainties must be finite and >= 0"):
        ppi.inclusion_probabilities([1, -2], 1)
    with pytest.raises(ValueError, match="uncertainties must be finite and >= 0"):
        ppi.inclusion_probabilities([1, float("nan")], 1)
    with pytest.raises(ValueError, match="uniform_share must be in"):
        ppi.inclusion_probabilities([1, 2], 1, uniform_share=1.5)


# --- rank_probabilities ----------------------------------------------------------------------


def test_rank_probabilities_of_two_independent_systems() -> None:
    draws = 20_000
    figures = ppi.rank_probabilities([3.1, 3.0], [[0.01, 0.0], [0.0, 0.0025]], draws=draws)
    expected = float(stats.norm.cdf(0.1 / math.sqrt(0.01 + 0.0025)))  # 0.8143
    tolerance = 4 * math.sqrt(expected * (1 - expected) / draws)
    assert figures.probabilities[0][0] == pytest.approx(expected, abs=tolerance)
    assert figures.probabilities[1][1] == pytest.approx(expected, abs=tolerance)
    assert (figures.rank_low, figures.rank_high) == ([1, 1], [2, 2])


def test_rank_probabilities_rows_columns_and_ties() -> None:
    rng = np.random.default_rng(2)
    root = rng.normal(0, 0.05, (4, 4))
    figures = ppi.rank_probabilities([3.0, 3.1, 2.5, 3.05], root @ root.T, draws=3000)
    table = np.array(figures.probabilities)
    assert table.sum(axis=1) == pytest.approx(np.ones(4), abs=1e-12)
    assert table.sum(axis=0) == pytest.approx(np.ones(4), abs=1e-12)
    # same seed, same figures
    assert ppi.rank_probabilities([3.0, 3.1, 2.5, 3.05], root @ root.T, draws=3000) == figures
    # far apart: certain ranks
    sure = ppi.rank_probabilities([4.0, 2.0, 3.0], np.eye(3) * 1e-4)
    assert sure.probabilities == [[1, 0, 0], [0, 0, 1], [0, 1, 0]]
    assert (sure.rank_low, sure.rank_high) == ([1, 3, 2], [1, 3, 2])
    # identical independent systems split evenly; identical and perfectly correlated ones
    # (the same draw every time: a tie) too, with the rank interval [1, 2]
    for cov in ([[0.01, 0.0], [0.0, 0.01]], [[0.01, 0.01], [0.01, 0.01]]):
        even = ppi.rank_probabilities([3.0, 3.0], cov, draws=10_000)
        assert even.probabilities[0] == pytest.approx([0.5, 0.5], abs=0.04)
        assert (even.rank_low, even.rank_high) == ([1, 1], [2, 2])
    # a covariance that is not positive semi-definite (eigenvalues 3 and -1) does not crash
    clipped = ppi.rank_probabilities([3.0, 2.9], [[1.0, 2.0], [2.0, 1.0]], draws=500)
    assert np.array(clipped.probabilities).sum(axis=1) == pytest.approx([1.0, 1.0])
    zero = ppi.rank_probabilities([3.0, 2.9], np.zeros((2, 2)), draws=50)
    assert zero.probabilities == [[1.0, 0.0], [0.0, 1.0]]
    assert ppi.rank_probabilities([3.0], [[0.1]]).probabilities == [[1.0]]
    with pytest.raises(ValueError, match="2 x 2"):
        ppi.rank_probabilities([3.0, 2.0], [[0.1]])
    with pytest.raises(ValueError, match="finite"):
        ppi.rank_probabilities([3.0, float("nan")], np.eye(2))


# --- planning --------------------------------------------------------------------------------


def test_labels_needed_human() -> None:
    # the textbook n = (z sd / h)^2: sd 1, h 0.1, 95 % -> 1.95996^2 * 100 = 384.15 -> 385
    assert ppi.labels_needed_human(1.0, 0.1) == 385
    for sd, h in [(1.0, 0.1), (0.8, 0.05), (1.3, 0.25), (0.5, 2.0), (0.0, 0.1)]:
        brute = next(n for n in range(2, 10_000) if Z95 * sd / math.sqrt(n) <= h)
        assert ppi.labels_needed_human(sd, h) == brute
    with pytest.raises(ValueError, match="half-width"):
        ppi.labels_needed_human(1.0, 0)


def test_ppi_variance_is_the_variance_at_the_optimal_lambda() -> None:
    # Var(lambda) = lambda^2 Var(Yhat) / N + Var(Y - lambda Yhat) / n, minimised at
    # lambda* = Cov / ((1 + n/N) Var(Yhat)); the judge's own spread drops out
    for sd_y, sd_f, rho, n, big_t in [(1.0, 1.0, 0.8, 50, 500), (0.7, 2.0, 0.5, 30, 60)]:
        big_n = big_t - n
        cov = rho * sd_y * sd_f
        lam = cov / ((1 + n / big_n) * sd_f**2)
        direct = lam**2 * sd_f**2 / big_n + (sd_y**2 - 2 * lam * cov + lam**2 * sd_f**2) / n
        assert ppi.ppi_variance(sd_y, rho, n, big_t) == pytest.approx(direct, rel=1e-12)
    # a judge that goes the wrong way is not used: people's variance alone
    assert ppi.ppi_variance(1.0, -0.7, 40, 400) == pytest.approx(1 / 40)


def test_labels_needed_ppi_is_the_smallest_n_that_fits() -> None:
    for sd, rho, big_t, h in itertools.product(
        (0.6, 1.0, 1.4), (-0.5, 0.0, 0.3, 0.7, 0.9, 1.0), (50, 400, 3000), (0.05, 0.1, 0.2)
    ):
        brute = next(
            (
                n
                for n in range(2, big_t + 1)
                if Z95 * math.sqrt(ppi.ppi_variance(sd, rho, n, big_t)) <= h
            ),
            None,
        )
        assert ppi.labels_needed_ppi(sd, rho, big_t, h) == brute, (sd, rho, big_t, h)
    # rho = 0: people only, as long as the responses are there to label
    assert ppi.labels_needed_ppi(1.0, 0.0, 10_000, 0.1) == ppi.labels_needed_human(1.0, 0.1)
    assert ppi.labels_needed_ppi(1.0, 0.0, 300, 0.1) is None
    # a good judge needs far fewer: rho 0.8 over 1000 responses
    assert ppi.labels_needed_ppi(1.0, 0.8, 1000, 0.1) == 184
    with pytest.raises(ValueError, match="rho"):
        ppi.labels_needed_ppi(1.0, 1.5, 100, 0.1)


def test_labels_needed_active_is_the_smallest_budget_that_fits() -> None:
    rng = np.random.default_rng(11)
    frames = [
        np.full(60, 0.6),
        rng.uniform(0.1, 1.2, 60),
        rng.exponential(0.5, 60),
        np.concatenate([np.zeros(30), np.full(30, 1.0)]),
    ]
    for e, sd, h, share in itertools.product(frames, (0.8, 1.2), (0.2, 0.3, 0.5), (0.0, 0.2)):
        brute = next(
            (
                b
                for b in range(2, len(e) + 1)
                if Z95 * math.sqrt(ppi.active_variance(sd, e, b, uniform_share=share)) <= h
            ),
            None,
        )
        assert ppi.labels_needed_active(sd, e, h, uniform_share=share) == brute


def test_uniform_residuals_make_active_selection_uniform() -> None:
    # with the same expected error everywhere the design is uniform (pi = B / T) whatever
    # the share, and the variance sd^2 / T + e^2 (1/B - 1/T) is PPI++'s at n = B when
    # e^2 = sd^2 (1 - rho^2) (the error left at lambda*)
    sd, rho, big_t = 1.0, 0.8, 500
    e = np.full(big_t, sd * math.sqrt(1 - rho**2))
    for budget in (20, 100, 250):
        uniform = sd**2 / big_t + e[0] ** 2 * (1 / budget - 1 / big_t)
        for share in (0.0, 0.2, 1.0):
            assert ppi.active_variance(sd, e, budget, uniform_share=share) == pytest.approx(
                uniform, rel=1e-12
            )
        assert ppi.ppi_variance(sd, rho, budget, big_t) == pytest.approx(uniform, rel=1e-12)
    assert ppi.labels_needed_active(sd, e, 0.1) == ppi.labels_needed_ppi(sd, rho, big_t, 0.1)
    # uncertain responses concentrated: active selection needs fewer
    skewed = np.concatenate([np.full(400, 0.1), np.full(100, 1.5)])
    assert ppi.labels_needed_active(sd, skewed, 0.1)
    assert ppi.labels_needed_active(sd, skewed, 0.1) < ppi.labels_needed_active(
        sd, np.full(big_t, math.sqrt(np.mean(skewed**2))), 0.1
    )


def test_min_detectable_difference() -> None:
    # sd of the paired differences 1, 100 pairs, 95 %, power 80 %:
    # (1.95996 + 0.84162) / sqrt(100) = 0.28016
    assert ppi.min_detectable_difference(1.0, 100) == pytest.approx(0.28016, abs=1e-5)
    exact = (Z95 + float(stats.norm.ppf(0.8))) / 10
    assert ppi.min_detectable_difference(1.0, 100) == pytest.approx(exact, abs=1e-12)
    with_judge = ppi.min_detectable_difference(1.0, 100, rho=0.8, n_total=1000)
    assert with_judge == pytest.approx(
        (Z95 + float(stats.norm.ppf(0.8))) * math.sqrt(ppi.ppi_variance(1.0, 0.8, 100, 1000))
    )
    assert with_judge < ppi.min_detectable_difference(1.0, 100)
    with pytest.raises(ValueError, match="at least 2"):
        ppi.min_detectable_difference(1.0, 1)
    with pytest.raises(ValueError, match="power"):
        ppi.min_detectable_difference(1.0, 100, power=1.0)


# --- coverage: a quick simulation (bench/ppi_coverage_bench.py is the full one) ---------------


def test_ppi_and_active_intervals_cover_the_true_mean() -> None:
    # people's scores: 3 + quality + noise whose size (the response's difficulty) the judge
    # knows, as from its k-sample spread (true mean 3); the judge is biased (+0.4) but follows
    # quality; 40 labeled and 400 unlabeled responses, or 40 labels expected by active
    # selection over the 440 (4,000 replications: PPI++ 93.7 %, people only 94.6 %, active
    # 92.8 %; normal intervals on 40 labels cover a little under 95 %)
    rng = np.random.default_rng(1)
    reps, n, big_n = 300, 40, 400
    covered = {"ppi": 0, "human": 0, "active": 0}
    ratios: dict[str, list[float]] = {"ppi": [], "active": []}
    for _ in range(reps):
        quality = rng.normal(0, 0.8, n + big_n)
        difficulty = rng.uniform(0.1, 1.2, n + big_n)
        y = 3 + quality + rng.normal(0, 1, n + big_n) * difficulty
        yhat = 3.4 + quality + rng.normal(0, 0.2, n + big_n)
        result = ppi.ppi_mean(y[:n], yhat[:n], yhat[n:])
        assert result.ci_low is not None and result.ci_high is not None
        assert result.human_only_ci_low is not None and result.human_only_ci_high is not None
        covered["ppi"] += result.ci_low <= 3 <= result.ci_high
        covered["human"] += result.human_only_ci_low <= 3 <= result.human_only_ci_high
        human_width = result.human_only_ci_high - result.human_only_ci_low
        ratios["ppi"].append((result.ci_high - result.ci_low) / human_width)
        pi = ppi.inclusion_probabilities(difficulty, n)
        xi = rng.random(n + big_n) < pi
        active = ppi.active_mean(yhat, pi, xi, np.where(xi, y, np.nan))
        assert active.ci_low is not None and active.ci_high is not None
        covered["active"] += active.ci_low <= 3 <= active.ci_high
        ratios["active"].append((active.ci_high - active.ci_low) / human_width)
    assert covered["ppi"] / reps >= 0.90
    assert covered["human"] / reps >= 0.90
    assert covered["active"] / reps >= 0.90
    # the judge narrows the interval (~0.73 of people's width), active selection more (~0.69)
    assert float(np.mean(ratios["ppi"])) < 0.85
    assert float(np.mean(ratios["active"])) < float(np.mean(ratios["ppi"]))
