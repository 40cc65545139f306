"""Prediction-powered inference (pure: numpy and scipy, no Django).

The mean human score of a set of responses, estimated from people's scores on some of them
(the *labeled* responses, Y) and a judge's scores on all of them (Yhat on the labeled ones,
Yhat_unlabeled on the rest):

- `ppi_mean`: PPI++ (Angelopoulos, Duchi & Zrnic 2023, arXiv 2311.01453) with the
  power-tuning lambda, the same numbers as the reference implementation `ppi_python`
  (`ppi_mean_pointestimate` / `ppi_mean_ci` with `lam=None`; tests/analytics/test_ppi.py
  compares them to 1e-9), beside the people-only estimate on the labeled responses
  (`ppi_python`'s `classical_mean_ci`) and the effective sample size;
- `active_mean`: the inverse-probability-weighted estimator of active statistical inference
  (Zrnic & Candes, ICML 2024, arXiv 2403.03208) for responses sent to people with known
  inclusion probabilities, power-tuned;
- `inclusion_probabilities`: the sampling design that favours the judge's uncertain responses
  within a budget (probabilities proportional to the expected error, capped at 1, mixed with
  a uniform floor so that no response is left out with certainty);
- `ppi_influence` / `rank_probabilities`: the joint normal approximation of several systems'
  estimates on shared items, and the probability of each rank it implies;
- the planning formulas (`labels_needed_*`, `min_detectable_difference`): how many labels a
  target interval half-width needs, for people only, uniform PPI and active selection.

Conventions (those of `ppi_python`): standard deviations are population ones (ddof 0), the
judge scores' variance in lambda is the sample one (ddof 1), intervals are normal (z), and
lambda is clipped to [0, 1]. Bad input (scores that are not finite, an alpha outside (0, 1),
probabilities outside (0, 1], a correlation outside [-1, 1]) raises ValueError with what is
wrong. docs/PREDICTION_POWERED.md says what the figures mean and when not to use them;
tests/analytics/test_ppi.py checks every formula here against `ppi_python` or a hand-worked
example.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]


def z_quantile(alpha: float) -> float:
    """The normal quantile of a two-sided (1 - alpha) interval (1.95996 at alpha 0.05)."""
    return _z(alpha)


@functools.lru_cache(maxsize=64)
def _z(alpha: float) -> float:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    # scipy is imported where a function needs it, not at module import: every process
    # loads this module through the URLconf (tests/test_startup.py)
    from scipy import stats

    return float(stats.norm.ppf(1 - alpha / 2))


def _f(values: npt.ArrayLike) -> Array:
    return np.asarray(values, dtype=np.float64).reshape(-1)


def _finite(name: str, values: Array) -> Array:
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must be finite numbers (no NaN or infinity)")
    return values


@dataclass(frozen=True)
class MeanEstimate:
    """A prediction-powered mean beside the people-only one on the same labeled responses.
    Fields are None where they cannot be computed (fewer than 2 labeled responses)."""

    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    se: float | None
    lam: float | None
    human_only_estimate: float | None
    human_only_ci_low: float | None
    human_only_ci_high: float | None
    human_only_se: float | None
    n_labeled: int
    n_unlabeled: int
    #: how many labeled responses a people-only estimate would need for the same interval
    #: width: Var(Y) / se^2 (equal to n_labeled when the judge adds nothing)
    effective_n: float | None


def power_tuning_lambda(y: Array, yhat: Array, yhat_unlabeled: Array) -> float:
    """PPI++'s lambda for a mean: Cov(Y, Yhat) / ((1 + n/N) Var(Yhat over all responses)),
    clipped to [0, 1] (`ppi_python`'s `_calc_lam_glm` for a mean, `clip=True`). 0 when the
    judge's scores do not vary or there is no unlabeled response."""
    n, big_n = len(y), len(yhat_unlabeled)
    if n < 2 or big_n == 0:
        return 0.0
    cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
    var = float(np.var(np.concatenate([yhat, yhat_unlabeled]), ddof=1))
    if not var > 0:
        return 0.0
    lam = cov / ((1 + n / big_n) * var)
    return float(min(max(lam, 0.0), 1.0))


def ppi_mean(
    y: npt.ArrayLike,
    yhat: npt.ArrayLike,
    yhat_unlabeled: npt.ArrayLike,
    *,
    alpha: float = 0.05,
    lam: float | None = None,
) -> MeanEstimate:
    """PPI++ estimate and (1 - alpha) interval of the mean of Y (see the module docstring)."""
    y, yhat = _finite("y", _f(y)), _finite("yhat", _f(yhat))
    yhat_unlabeled = _finite("yhat_unlabeled", _f(yhat_unlabeled))
    if len(y) != len(yhat):
        raise ValueError("y and yhat must have the same length")
    z = _z(alpha)
    n, big_n = len(y), len(yhat_unlabeled)
    if n < 2:
        return _no_mean_estimate(n, big_n)
    human = float(y.mean())
    human_se = float(y.std() / math.sqrt(n))
    if lam is None:
        lam = power_tuning_lambda(y, yhat, yhat_unlabeled)
    if big_n == 0:
        lam = 0.0
    rectified = y - lam * yhat
    imputed = float(np.mean(lam * yhat_unlabeled)) if big_n else 0.0
    estimate = imputed + float(rectified.mean())
    imputed_var = float(np.var(lam * yhat_unlabeled)) / big_n if big_n else 0.0
    se = math.sqrt(imputed_var + float(rectified.var()) / n)
    var_y = float(y.var())
    effective = var_y / se**2 if se > 0 else None
    return MeanEstimate(
        estimate=estimate,
        ci_low=estimate - z * se,
        ci_high=estimate + z * se,
        se=se,
        lam=float(lam),
        human_only_estimate=human,
        human_only_ci_low=human - z * human_se,
        human_only_ci_high=human + z * human_se,
        human_only_se=human_se,
        n_labeled=n,
        n_unlabeled=big_n,
        effective_n=effective,
    )


def _no_mean_estimate(n: int, big_n: int) -> MeanEstimate:
    return MeanEstimate(
        estimate=None,
        ci_low=None,
        ci_high=None,
        se=None,
        lam=None,
        human_only_estimate=None,
        human_only_ci_low=None,
        human_only_ci_high=None,
        human_only_se=None,
        n_labeled=n,
        n_unlabeled=big_n,
        effective_n=None,
    )


def ppi_influence(
    y: npt.ArrayLike, yhat: npt.ArrayLike, yhat_unlabeled: npt.ArrayLike, lam: float
) -> tuple[Array, Array]:
    """Each response's share of `ppi_mean`'s error: (labeled, unlabeled) arrays psi with
    sum(psi^2) = se^2 exactly. Summing psi by item across systems and multiplying gives the
    covariance of two systems' estimates on shared items (`rank_probabilities`)."""
    y, yhat, yhat_unlabeled = _f(y), _f(yhat), _f(yhat_unlabeled)
    if len(y) != len(yhat) or len(y) == 0:
        raise ValueError("y and yhat must have the same length, at least 1")
    rectified = y - lam * yhat
    labeled = (rectified - rectified.mean()) / len(y)
    if len(yhat_unlabeled) == 0:
        return labeled, np.zeros(0)
    unlabeled = lam * (yhat_unlabeled - yhat_unlabeled.mean()) / len(yhat_unlabeled)
    return labeled, unlabeled


@dataclass(frozen=True)
class ActiveEstimate:
    """The IPW (active inference) estimate of the mean of Y over a sampling frame."""

    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    se: float | None
    lam: float | None
    n_labeled: int  # responses drawn for people and labeled
    n_frame: int  # responses in the frame (each with a judge score and a probability)
    offset: float | None = None  # the prediction is lambda Yhat + offset (`active_mean`)


def active_tuning(yhat: Array, pi: Array, labeled: Array, y: Array) -> tuple[float, float]:
    """The (lambda, offset) that minimise the sample variance of the IPW terms
    t = a + lambda b + offset d, with a = Y xi / pi, b = Yhat (1 - xi / pi), d = 1 - xi / pi:
    the least-squares solution of [Var b, Cov(b, d); Cov(b, d), Var d] (lambda, offset) =
    -(Cov(a, b), Cov(a, d)), lambda clipped to [0, 1] and the offset refitted for it.
    The offset is what centres the judge's errors: a judge that scores everything 0.7 too
    high leaves residuals Y - lambda Yhat of mean -0.7, and the IPW terms pay for that mean
    on every response not drawn; the prediction lambda Yhat + offset does not."""
    w = np.where(labeled, 1.0 / pi, 0.0)
    a = np.where(labeled, y, 0.0) * w
    d = 1.0 - w
    b = yhat * d

    def cov(u: Array, v: Array) -> float:
        return float(np.mean((u - u.mean()) * (v - v.mean())))

    var_b, var_d, cov_bd = cov(b, b), cov(d, d), cov(b, d)
    cov_ab, cov_ad = cov(a, b), cov(a, d)
    det = var_b * var_d - cov_bd**2
    if var_d <= 0:
        # every response drawn with certainty: d = b = 0, the terms are Y
        return 0.0, 0.0
    if det > 1e-12 * max(var_b * var_d, 1e-300):
        lam = (-cov_ab * var_d + cov_ad * cov_bd) / det
    else:
        lam = 0.0
    lam = min(max(lam, 0.0), 1.0)
    offset = -(cov_ad + lam * cov_bd) / var_d
    return float(lam), float(offset)


def active_lambda(yhat: Array, pi: Array, labeled: Array, y: Array) -> float:
    """The lambda that minimises the sample variance of the IPW terms with no offset
    (the form of Zrnic & Candes): t = a + lambda b, a = Y xi / pi, b = Yhat (1 - xi / pi):
    -Cov(a, b) / Var(b), in [0, 1]."""
    w = np.where(labeled, 1.0 / pi, 0.0)
    a = np.where(labeled, y, 0.0) * w
    b = yhat * (1.0 - w)
    var_b = float(np.var(b))
    if not var_b > 0:
        return 0.0
    lam = -float(np.mean((a - a.mean()) * (b - b.mean()))) / var_b
    return float(min(max(lam, 0.0), 1.0))


def active_mean(
    yhat: npt.ArrayLike,
    pi: npt.ArrayLike,
    labeled: npt.ArrayLike,
    y: npt.ArrayLike,
    *,
    alpha: float = 0.05,
    lam: float | None = None,
    offset: float | None = None,
) -> ActiveEstimate:
    """theta = mean_i [g_i + (Y_i - g_i) xi_i / pi_i] over the frame, with the prediction
    g_i = lambda Yhat_i + offset and xi_i = 1 for a response drawn (with probability pi_i,
    given what was known when it was drawn) and labeled; y is read only where `labeled` is
    true. The interval is normal with the terms' population variance (ddof 0, as in the
    authors' code) / N (Zrnic & Candes 2024, section 3) when lambda and the offset are
    given; with p of them tuned on these labels, the variance is scaled by n / (n - p) and
    the interval takes Student's t with n - p degrees of freedom (None below n - p = 1): at
    25 labels the plain normal interval covered 89-92 % in bench/ppi_coverage_bench.py.

    For a fixed (lambda, offset) the estimate is exactly unbiased for the frame's mean of Y
    over the Poisson draws, with design variance sum((Y - g)^2 (1 - pi) / pi) / N^2
    (tests/analytics/test_ppi.py enumerates every draw of a small frame to check both).
    `lam` and `offset` None: both are tuned together (`active_tuning`), as PPI++ tunes
    lambda; one given: the other is tuned for it (lambda 0 with the offset tuned is the
    people-only IPW estimate, centred). `offset=0.0` is the paper's own estimator."""
    yhat, pi = _finite("yhat", _f(yhat)), _f(pi)
    y = _f(y)
    xi = np.asarray(labeled, dtype=bool).reshape(-1)
    if not (len(yhat) == len(pi) == len(xi) == len(y)):
        raise ValueError("yhat, pi, labeled and y must have the same length")
    if not np.all((pi > 0) & (pi <= 1)):
        raise ValueError("inclusion probabilities must be in (0, 1]")
    _finite("y (where labeled)", y[xi])
    z = _z(alpha)
    big_n, n = len(yhat), int(xi.sum())
    if n < 2:
        return ActiveEstimate(None, None, None, None, None, n_labeled=n, n_frame=big_n)
    w = np.where(xi, 1.0 / pi, 0.0)
    tuned = (lam is None) + (offset is None)
    df = n - tuned
    if df < 1:
        return ActiveEstimate(None, None, None, None, None, n_labeled=n, n_frame=big_n)
    if lam is None and offset is None:
        lam, offset = active_tuning(yhat, pi, xi, y)
    elif lam is None and offset is not None:
        # lambda tuned for the given offset: -Cov(a + offset d, b) / Var(b)
        lam = active_lambda(yhat, pi, xi, y - offset)
    assert lam is not None
    if offset is None:
        a = np.where(xi, y, 0.0) * w - lam * yhat * w
        d = 1.0 - w
        var_d = float(np.var(d))
        offset = -float(np.mean((a - a.mean()) * (d - d.mean()))) / var_d if var_d > 0 else 0.0
    g = lam * yhat + offset
    terms = g + (np.where(xi, y, 0.0) - g) * w
    estimate = float(terms.mean())
    se = float(terms.std() / math.sqrt(big_n))
    if tuned:
        # fitted on the same labels: the variance scaled by n / (n - p) and Student's t with
        # n - p degrees of freedom, as for a regression estimator with p fitted coefficients
        se *= math.sqrt(n / df)
        from scipy import stats

        z = float(stats.t.ppf(1 - alpha / 2, df))
    return ActiveEstimate(
        estimate=estimate,
        ci_low=estimate - z * se,
        ci_high=estimate + z * se,
        se=se,
        lam=float(lam),
        n_labeled=n,
        n_frame=big_n,
        offset=float(offset),
    )


def inclusion_probabilities(
    uncertainty: npt.ArrayLike, budget: float, *, uniform_share: float = 0.2
) -> Array:
    """Probabilities pi_i that sum to `budget` (the expected number of responses sent to
    people), mixing a part proportional to `uncertainty` (the expected size of the judge's
    error, >= 0), capped at 1 with the excess spread over the rest (water filling), with the
    uniform design: pi = (1 - s) pi_prop + s budget / N. Both parts sum to the budget, so
    the mix does too, and every pi is in [s budget / N, 1]: the uniform share s bounds the
    IPW weights (Zrnic & Candes mix with the uniform rule for the same reason); a capped
    response's pi is exactly 1 only when s = 0, and with s = 0 a response of uncertainty 0
    gets pi = 0 (never drawn, which `active_mean` refuses). All uncertainties 0 gives the
    uniform design; a budget >= N gives every pi = 1."""
    u = _f(uncertainty)
    big_n = len(u)
    if not 0 <= uniform_share <= 1:
        raise ValueError(f"uniform_share must be in [0, 1], got {uniform_share!r}")
    if not (math.isfinite(budget) and budget > 0):
        raise ValueError(f"the budget must be a number > 0, got {budget!r}")
    if np.any(~np.isfinite(u)) or np.any(u < 0):
        raise ValueError("uncertainties must be finite and >= 0")
    if big_n == 0:
        return np.zeros(0)
    if budget >= big_n:
        return np.ones(big_n)
    if not u.sum() > 0:
        u = np.ones(big_n)
    prop = _capped_proportional(u, budget)
    pi = (1 - uniform_share) * prop + uniform_share * (budget / big_n)
    return np.minimum(pi, 1.0)


def _capped_proportional(u: Array, budget: float) -> Array:
    """pi proportional to u with sum `budget`, the largest capped at 1 and the rest rescaled
    (water filling); u > 0 somewhere and budget < len(u)."""
    pi = np.zeros_like(u)
    free = np.ones(len(u), dtype=bool)
    left = budget
    for _ in range(len(u)):
        total = float(u[free].sum())
        if total <= 0:
            # what is left goes uniformly to the responses with no uncertainty
            pi[free] = left / int(free.sum())
            break
        scaled = u * (left / total)
        over = free & (scaled >= 1)
        if not over.any():
            pi[free] = scaled[free]
            break
        pi[over] = 1.0
        free &= ~over
        left = budget - float(pi[~free].sum())
        if not free.any():
            break
    return pi


@dataclass(frozen=True)
class RankFigures:
    """`rank_probabilities`' result: probabilities[s][r] is the probability that system s
    has rank r + 1 (1 = the highest mean), and each system's central (1 - alpha) rank
    interval."""

    probabilities: list[list[float]]
    rank_low: list[int]
    rank_high: list[int]


def rank_probabilities(
    estimates: npt.ArrayLike,
    cov: npt.ArrayLike,
    *,
    draws: int = 4000,
    alpha: float = 0.05,
    seed: int = 0,
) -> RankFigures:
    """Monte Carlo ranks from the joint normal N(estimates, cov) of several systems' means
    (cov: the summed products of `ppi_influence` by item). A covariance that is not positive
    semi-definite from rounding is clipped to its nearest PSD matrix (negative eigenvalues
    set to 0). Ties within a draw (a degenerate covariance: two systems with the same scores
    everywhere) are broken at random, so each draw is a permutation, every row and every
    column of `probabilities` sums to 1, and tied systems share their ranks evenly."""
    mu = _finite("estimates", _f(estimates))
    k = len(mu)
    sigma = _finite("cov", np.asarray(cov, dtype=np.float64))
    if sigma.size != k * k:
        raise ValueError(f"cov must be a {k} x {k} matrix")
    if draws < 1:
        raise ValueError("draws must be >= 1")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if k == 0:
        return RankFigures(probabilities=[], rank_low=[], rank_high=[])
    sigma = sigma.reshape(k, k)
    sigma = (sigma + sigma.T) / 2
    values, vectors = np.linalg.eigh(sigma)
    root = vectors * np.sqrt(np.clip(values, 0, None))
    rng = np.random.default_rng(seed)
    sample = mu + rng.standard_normal((draws, k)) @ root.T
    # order[d, r]: the system at rank r + 1 in draw d (rank 1 = the highest mean); a sort
    # per draw, not a comparison of every pair (432 rankings of 20 systems in a report)
    order = np.argsort(-sample, axis=1, kind="stable")
    ranked = np.take_along_axis(sample, order, axis=1)
    if np.any(ranked[:, 1:] == ranked[:, :-1]):
        tiebreak = rng.random((draws, k))  # drawn after the normals: the same stream
        order = np.lexsort((-tiebreak, -sample), axis=-1)
    counts = np.bincount((order * k + np.arange(k)).ravel(), minlength=k * k).reshape(k, k)
    probabilities = (counts / draws).tolist()
    # the ranks' quantiles from each system's counts ("lower" / "higher" as np.quantile)
    cum = np.cumsum(counts, axis=1)
    low = (np.argmax(cum > math.floor(alpha / 2 * (draws - 1)), axis=1) + 1).tolist()
    high = (np.argmax(cum > math.ceil((1 - alpha / 2) * (draws - 1)), axis=1) + 1).tolist()
    return RankFigures(probabilities=probabilities, rank_low=low, rank_high=high)


# --- planning: how many labels are enough ---------------------------------------------------


def labels_needed_human(sd_y: float, half_width: float, *, alpha: float = 0.05) -> int:
    """Labeled responses a people-only normal interval needs for `half_width`:
    ceil((z sd / h)^2), at least 2."""
    _check_sd("sd_y", sd_y)
    _check_half_width(half_width)
    return max(2, math.ceil((_z(alpha) * sd_y / half_width) ** 2))


def _check_sd(name: str, sd: float) -> None:
    if not (math.isfinite(sd) and sd >= 0):
        raise ValueError(f"{name} must be a number >= 0, got {sd!r}")


def _check_half_width(half_width: float) -> None:
    if not (math.isfinite(half_width) and half_width > 0):
        raise ValueError(f"the half-width must be a number > 0, got {half_width!r}")


def _check_rho(rho: float) -> None:
    if not -1 <= rho <= 1:
        raise ValueError(f"the correlation rho must be in [-1, 1], got {rho!r}")


def ppi_variance(sd_y: float, rho: float, n: int, n_total: int) -> float:
    """The variance of PPI++ with the optimal lambda when n of n_total responses are labeled
    and the judge's scores correlate rho with people's: sd^2 ((1 - rho^2) / n + rho^2 / T)
    (the variance at lambda* = Cov / ((1 + n/N) Var(Yhat)), N = T - n). A negative rho counts
    as 0: its lambda* is clipped to 0 and the estimate is people's alone (sd^2 / n). The
    formula assumes lambda* = rho (sd_y / sd_yhat) (N / T) <= 1, true unless the judge's scores
    spread much less than people's; when it is clipped to 1 the variance is larger."""
    _check_sd("sd_y", sd_y)
    _check_rho(rho)
    if n < 1 or n_total < n:
        raise ValueError(f"need 1 <= n <= n_total, got n={n!r}, n_total={n_total!r}")
    r2 = max(rho, 0.0) ** 2
    return sd_y**2 * ((1 - r2) / n + r2 / n_total)


def labels_needed_ppi(
    sd_y: float, rho: float, n_total: int, half_width: float, *, alpha: float = 0.05
) -> int | None:
    """The smallest n (of n_total responses) whose PPI++ interval half-width is at most
    `half_width` (`ppi_variance`), at least 2, or None when even labeling all would not do."""
    _check_sd("sd_y", sd_y)
    _check_rho(rho)
    _check_half_width(half_width)
    z = _z(alpha)
    if n_total < 2:
        return None

    def fits(n: int) -> bool:
        return z * math.sqrt(ppi_variance(sd_y, rho, n, n_total)) <= half_width

    if not fits(n_total):
        return None
    if sd_y == 0 or fits(2):
        return 2
    # the closed form (1 - rho^2) / (target / sd^2 - rho^2 / T), then a step either way so
    # that rounding never moves it off the smallest n that fits
    r2 = max(rho, 0.0) ** 2
    slack = (half_width / z) ** 2 / sd_y**2 - r2 / n_total
    n = min(n_total, max(3, math.ceil((1 - r2) / slack))) if slack > 0 else n_total
    while n > 2 and fits(n - 1):
        n -= 1
    while not fits(n):
        n += 1
    return n


def active_variance(
    sd_y: float, residual_sd: npt.ArrayLike, budget: float, *, uniform_share: float = 0.2
) -> float:
    """The variance of the active (IPW) estimate of a mean over a frame of T responses whose
    expected squared errors E[(Y - lambda Yhat)^2] are residual_sd^2, with
    `inclusion_probabilities(residual_sd, budget)`: sd^2 / T + sum(e^2 (1 - pi) / pi) / T^2."""
    _check_sd("sd_y", sd_y)
    e = _f(residual_sd)
    big_t = len(e)
    if big_t == 0:
        raise ValueError("the frame must hold at least 1 response")
    pi = inclusion_probabilities(e, budget, uniform_share=uniform_share)
    # a response the judge gets exactly right adds nothing, even with pi = 0 (share 0)
    design = np.divide(e**2 * (1 - pi), pi, out=np.zeros(big_t), where=e > 0)
    return float(sd_y**2 / big_t + np.sum(design) / big_t**2)


def labels_needed_active(
    sd_y: float,
    residual_sd: npt.ArrayLike,
    half_width: float,
    *,
    alpha: float = 0.05,
    uniform_share: float = 0.2,
) -> int | None:
    """The smallest expected budget whose active interval half-width is at most
    `half_width` (`active_variance`, which falls as the budget grows), at least 2, or None
    when even labeling the whole frame would not do."""
    _check_sd("sd_y", sd_y)
    _check_half_width(half_width)
    e = _f(residual_sd)
    big_t = len(e)
    z = _z(alpha)

    def fits(budget: int) -> bool:
        variance = active_variance(sd_y, e, budget, uniform_share=uniform_share)
        return z * math.sqrt(variance) <= half_width

    if big_t < 2 or not fits(big_t):
        return None
    low, high = 2, big_t
    if fits(low):
        return low
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            high = mid
        else:
            low = mid
    return high


def min_detectable_difference(
    sd_d: float,
    n: int,
    *,
    rho: float = 0.0,
    n_total: int | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
) -> float:
    """The smallest true difference between two systems' means a two-sided test at `alpha`
    finds with probability `power` from n paired labels: (z_{1-alpha/2} + z_power) * se, with
    se the people-only sd_d / sqrt(n) (rho = 0) or PPI++'s with the judge's paired
    differences correlating rho with people's over n_total items."""
    if n < 2:
        raise ValueError("at least 2 labeled items are needed")
    _check_sd("sd_d", sd_d)
    _check_rho(rho)
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    if rho and n_total:
        se = math.sqrt(ppi_variance(sd_d, rho, n, max(n_total, n)))
    else:
        se = sd_d / math.sqrt(n)
    from scipy import stats

    return (_z(alpha) + float(stats.norm.ppf(power))) * se
