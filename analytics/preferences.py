"""Figures of pairwise preferences, pure (numpy/scipy, no Django). Docs:
docs/PREFERENCE_ANALYTICS.md.

A *label* is one rater's preference between two systems' responses to one item on one skill
(or Overall): A better, B better, a tie, or both bad. Everything is computed per skill and
for Overall, on the label's *pair* in a canonical orientation: the two systems in name
order, `first` and `second`, and an outcome of +1 (first preferred), 0 (tie) or -1 (second
preferred), whichever of them was A or shown on the left.

Rules (the same in every figure):
- "both bad" is a tie: it says neither response is better. The win/tie/loss matrices also
  count it apart (`both_bad`, a part of `ties`), so the share of ties that were "both bad"
  stays visible.
- A *unit* is one (item, first, second, skill): the thing several raters labelled.
- Bradley-Terry strengths with ties (Davidson 1970) are fitted on every label (each rater's
  label is one comparison): P(i over j) = pi_i / D, P(tie) = nu sqrt(pi_i pi_j) / D, with
  D = pi_i + pi_j + nu sqrt(pi_i pi_j). Without any tie the model is Bradley & Terry (1952)
  (nu = 0, not estimated).
- The fit is penalised: the maximum of the likelihood times a weak prior, independent
  normal N(0, PRIOR_SCALE^2) on each log-strength theta = log pi and on log nu (centred on
  nu = 1: for two equal systems a win, a tie and a loss equally likely), PRIOR_SCALE = 2.5,
  the scale of Gelman et al. (2008)'s weakly informative default for logistic regression
  (their t family with infinite degrees of freedom: a normal keeps the penalised
  log-likelihood concave, so it has one maximum and Newton reaches it). It is choix's ridge
  with alpha = 1 / (2 PRIOR_SCALE^2). With few labels the unpenalised maximum often does
  not exist: when a system never lost (or never won, or some systems never met the others)
  the likelihood grows without end as they are set apart (Ford 1957; Hunter 2004), and when
  a pair has wins one way and ties (or every label is a tie) nu and the strengths run off
  together. `separation` finds both (the figures are flagged "separation"); the prior keeps
  every estimate finite and puts it where the data and the prior agree. With
  `prior_scale=math.inf` the fit is the unpenalised maximum likelihood (tests compare it with
  choix and Agresti (2002)'s worked example). theta is centred (sum 0). Fitted with scipy's
  L-BFGS on (theta, log nu) with the analytic gradient, then Newton steps to the maximum.
- Intervals: percentile bootstrap that resamples items (every label of an item goes
  together) and refits every resample at once by damped Newton (`davidson_fit_many`) under
  the same prior. A resample whose refit degenerates (it did not converge, or a system has
  no comparison in it) is counted (`degenerate_resamples`) and put in the tail that widens
  the interval (`percentile_interval`).
- Every figure carries its n (labels for the strengths and nu, units rated twice or more
  for agreement, decided units for a judge), `too_few` below its kind's minimum
  (analytics.minimums), `interval_too_few` when fewer items than the interval minimum were
  resampled, and `flags` (FLAGS); an interval that does not hold its estimate
  (minimums.interval_holds) is withheld.
- People agree on a unit's outcome: Krippendorff's alpha (nominal) and Fleiss' kappa
  (generalised to units with different numbers of raters, as analytics.metrics) over the
  three outcomes, on units with at least two labels.
- The people's decision on a unit is the outcome most of its labels gave (a strict
  plurality); a unit whose top outcomes are level has no decision and is left out of the
  comparison with judges. A unit decided "tie" counts as a tie.
- A judge's (or a pointwise score's) outcome on the same unit is compared with the people's
  decision: accuracy with ties (three classes, every decided unit the judge has an outcome
  for), accuracy without ties (only units where neither the people nor the judge said tie;
  Zheng et al. 2023, "agreement w/o tie") and Cohen's kappa over the three classes.
- A pointwise score becomes a preference: the higher score on the skill wins, equal scores
  are a tie; Overall compares the mean of each response's scores over the skills both
  responses were scored on (N/A left out).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from analytics import bootstrap, metrics, minimums

OVERALL = "Overall"
#: Choices as stored (annotation.models.PairChoice), in a label's own A/B terms.
A, B, TIE, BOTH_BAD = "a", "b", "tie", "both_bad"
CHOICES = (A, B, TIE, BOTH_BAD)
#: Outcomes, from the canonical pair's first system: first preferred, tie, second preferred.
FIRST, EVEN, SECOND = 1, 0, -1
OUTCOMES = (FIRST, EVEN, SECOND)


class Label(NamedTuple):
    """One rater's preference on one skill (OVERALL for the overall question)."""

    item: int
    model_a: str
    model_b: str
    rater: str
    skill: str
    choice: str  # A, B, TIE or BOTH_BAD
    strength: int | None = None


class Verdict(NamedTuple):
    """A judge's (or a converted score's) outcome for a pair: `outcome` is FIRST, EVEN or
    SECOND from `model_x`'s side (+1: model_x preferred)."""

    item: int
    model_x: str
    model_y: str
    skill: str
    outcome: int


Unit = tuple[int, str, str, str]  # (item, first, second, skill)


def canonical(model_a: str, model_b: str, choice: str) -> tuple[str, str, int]:
    """(first, second, outcome) of a label: the two systems in name order and the outcome
    from the first's side (both bad = tie)."""
    if choice not in CHOICES:
        raise ValueError(f"choice must be one of {', '.join(CHOICES)}")
    if model_a == model_b:
        raise ValueError("a pair compares two different systems")
    outcome = {A: FIRST, B: SECOND, TIE: EVEN, BOTH_BAD: EVEN}[choice]
    if model_a < model_b:
        return model_a, model_b, outcome
    return model_b, model_a, -outcome


def _oriented(model_x: str, model_y: str, outcome: int) -> tuple[str, str, int]:
    return (model_x, model_y, outcome) if model_x < model_y else (model_y, model_x, -outcome)


# --- win/tie/loss matrices ----------------------------------------------------------------------


def win_matrices(labels: Sequence[Label], models: Sequence[str]) -> dict[str, list[list[int]]]:
    """wins[i][j]: labels that preferred models[i] over models[j]; ties[i][j] (symmetric):
    ties between them, both bad included; both_bad[i][j]: of those ties, the "both bad"."""
    index = {m: i for i, m in enumerate(models)}
    k = len(models)
    wins = np.zeros((k, k), dtype=np.int64)
    ties = np.zeros((k, k), dtype=np.int64)
    bad = np.zeros((k, k), dtype=np.int64)
    for label in labels:
        first, second, outcome = canonical(label.model_a, label.model_b, label.choice)
        i, j = index[first], index[second]
        if outcome == FIRST:
            wins[i, j] += 1
        elif outcome == SECOND:
            wins[j, i] += 1
        else:
            ties[i, j] += 1
            ties[j, i] += 1
            if label.choice == BOTH_BAD:
                bad[i, j] += 1
                bad[j, i] += 1
    return {"wins": wins.tolist(), "ties": ties.tolist(), "both_bad": bad.tolist()}


# --- Bradley-Terry with Davidson ties -----------------------------------------------------------

#: The scale of the prior (module docstring): independent N(0, PRIOR_SCALE^2) on each
#: log-strength and on log nu. math.inf gives the unpenalised maximum likelihood.
PRIOR_SCALE = 2.5


def ridge_of(prior_scale: float) -> float:
    """The penalty's weight 1 / scale^2 of a prior scale (0 for an infinite scale: the MLE)."""
    if not prior_scale > 0:
        raise ValueError("a prior scale is positive (math.inf: no prior)")
    return 0.0 if math.isinf(prior_scale) else 1.0 / prior_scale**2


#: The report's penalty weight on the log-strengths and log nu (1 / PRIOR_SCALE^2).
RIDGE = ridge_of(PRIOR_SCALE)


@dataclass(frozen=True)
class Fit:
    """A Davidson (or, with nu = 0, Bradley-Terry) fit: log-strengths summing to 0."""

    theta: npt.NDArray[np.float64]
    nu: float  # 0: no ties modelled
    log_likelihood: float  # of the data at the fit (the prior's penalty not included)
    converged: bool


@dataclass(frozen=True)
class Separation:
    """Whether the unpenalised maximum likelihood of a table exists and is unique (module
    docstring): `strengths_separated` when the comparison graph (a win an edge from winner to
    loser, a tie an edge both ways) is not strongly connected (Ford 1957; Hunter 2004): some
    group of systems never lost to the others, and the likelihood grows without end as they
    are set apart, or never met them (`disconnected`), and how far apart they are is not
    estimable at all; `ties_unbounded` when, with ties, nu and the strengths can grow
    together so that every win becomes certain while the ties stay likely (every label a
    tie, or a pair with wins one way and ties). The lists name who never lost and who never
    won (both: who only tied)."""

    strengths_separated: bool
    ties_unbounded: bool
    disconnected: bool
    never_lost: tuple[int, ...]
    never_won: tuple[int, ...]

    @property
    def separated(self) -> bool:
        return self.strengths_separated or self.ties_unbounded


def separation(wins: npt.ArrayLike, ties: npt.ArrayLike) -> Separation:
    """The Separation of a table (wins[i, j]: i over j; ties symmetric) of k systems, each
    compared at least once.

    With ties, the likelihood has a direction of recession with nu growing exactly when the
    difference constraints `theta_i - theta_j >= 1` (each win of i over j) and
    `|theta_i - theta_j| <= 1` (each tie) have a solution: every win's probability then tends
    to a constant while nu grows and no tie's falls (the directions where the observed
    outcome's linear predictor stays the largest, as for logistic regression in Albert &
    Anderson 1984). Such constraints are solvable exactly when their graph (an edge i -> j of
    weight -1 per won pair, both ways of weight +1 per tied pair) has no negative cycle,
    which Bellman-Ford finds."""
    w = np.asarray(wins, dtype=np.float64) > 0
    t = np.asarray(ties, dtype=np.float64) > 0
    k = w.shape[0]
    np.fill_diagonal(w, False)
    np.fill_diagonal(t, False)
    t = t | t.T
    edges = w | t  # i -> j: i beat or tied j
    met = edges | edges.T

    def reach(adjacency: npt.NDArray[np.bool_]) -> set[int]:
        seen, todo = {0}, [0]
        while todo:
            i = todo.pop()
            for j in np.flatnonzero(adjacency[i]):
                if int(j) not in seen:
                    seen.add(int(j))
                    todo.append(int(j))
        return seen

    everyone = set(range(k))
    strongly = k < 2 or (reach(edges) == everyone and reach(edges.T) == everyone)
    disconnected = k >= 2 and reach(met) != everyone
    ties_unbounded = False
    if t.any():
        weighted = [(i, j, -1.0) for i, j in zip(*np.nonzero(w), strict=True)]
        weighted += [(i, j, 1.0) for i, j in zip(*np.nonzero(t), strict=True)]
        distance = np.zeros(k)  # from a virtual source joined to every system by 0
        for _ in range(k):
            changed = False
            for i, j, weight in weighted:
                if distance[i] + weight < distance[j]:
                    distance[j] = distance[i] + weight
                    changed = True
            if not changed:
                break
        ties_unbounded = not changed  # still relaxing after k rounds: a negative cycle
    lost = w.T.any(axis=1)  # lost[i]: someone beat i
    won = w.any(axis=1)
    return Separation(
        strengths_separated=not strongly,
        ties_unbounded=ties_unbounded,
        disconnected=disconnected,
        never_lost=tuple(int(i) for i in np.flatnonzero(~lost)),
        never_won=tuple(int(i) for i in np.flatnonzero(~won)),
    )


def davidson_log_likelihood(
    theta: npt.NDArray[np.float64], nu: float, wins: npt.ArrayLike, ties: npt.ArrayLike
) -> float:
    """The Davidson (1970) log-likelihood of `wins` (wins[i, j]: i over j) and `ties`
    (symmetric; each pair's ties once in [i, j] and [j, i]); nu = 0 is Bradley-Terry."""
    w = np.asarray(wins, dtype=np.float64)
    t = np.triu(np.asarray(ties, dtype=np.float64), 1)
    _, log_p, log_q = _probabilities(theta, nu)
    out = float((w * log_p).sum())
    if nu > 0:
        out += float((t * log_q).sum())
    return out


def log_prior(theta: npt.NDArray[np.float64], nu: float, prior_scale: float = PRIOR_SCALE) -> float:
    """The prior's log-density (module docstring) up to a constant: -(sum theta^2 +
    (log nu)^2) / (2 scale^2), log nu left out when nu = 0 (no ties modelled)."""
    ridge = ridge_of(prior_scale)
    out = float((np.asarray(theta) ** 2).sum())
    if nu > 0:
        out += math.log(nu) ** 2
    return -ridge / 2 * out


def _probabilities(
    theta: npt.NDArray[np.float64], nu: float
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(p, log p, log q): p[i, j] = P(i over j), q[i, j] = P(tie), computed stably."""
    ti, tj = theta[:, None], theta[None, :]
    mid = (ti + tj) / 2
    if nu > 0:
        log_d = np.logaddexp(np.logaddexp(ti, tj), np.log(nu) + mid)
        log_q = np.log(nu) + mid - log_d
    else:
        log_d = np.logaddexp(ti, tj)
        log_q = np.full_like(log_d, -np.inf)
    log_p = ti - log_d
    return np.exp(log_p), log_p, log_q


def davidson_fit(
    wins: npt.ArrayLike,
    ties: npt.ArrayLike,
    *,
    prior_scale: float = PRIOR_SCALE,
    start: Fit | None = None,
) -> Fit:
    """The maximum of the Davidson likelihood (Bradley-Terry when there is no tie) times the
    prior (module docstring): L-BFGS, then polished by the Newton steps of
    `davidson_fit_many`, the bootstrap's refit, so the point estimate is the very maximum
    the resamples are refitted to. `prior_scale=math.inf`: the unpenalised maximum
    likelihood (infinite when the table is separated: `separation`). `start`: a fit to
    start from."""
    w = np.array(wins, dtype=np.float64)
    t = np.array(ties, dtype=np.float64)
    np.fill_diagonal(w, 0.0)  # a system never meets itself
    np.fill_diagonal(t, 0.0)
    k = w.shape[0]
    ridge = ridge_of(prior_scale)
    n = w + w.T + t  # comparisons between i and j (symmetric)
    won = w.sum(axis=1) + t.sum(axis=1) / 2
    tied = float(np.triu(t, 1).sum())
    with_ties = tied > 0
    np.fill_diagonal(n, 0.0)

    def negative(params: npt.NDArray[np.float64]) -> tuple[float, npt.NDArray[np.float64]]:
        theta = params[:k]
        eta = params[k] if with_ties else -np.inf
        nu = float(np.exp(eta)) if with_ties else 0.0
        p, log_p, log_q = _probabilities(theta, nu)
        q = np.exp(log_q)
        total = float(theta.sum())
        ll = float((w * log_p).sum())
        if with_ties:
            ll += float((np.triu(t, 1) * log_q).sum())
        # the prior, and (sum theta)^2 / 2, zero at every maximum, which centres theta
        # without a prior
        ll -= ridge / 2 * float((theta**2).sum()) + total**2 / 2
        grad = np.empty(params.size)
        grad[:k] = won - (n * (p + q / 2)).sum(axis=1) - ridge * theta - total
        if with_ties:
            ll -= ridge / 2 * float(eta**2)
            grad[k] = tied - float((np.triu(n, 1) * q).sum()) - ridge * eta
        return -ll, -grad

    if start is not None and start.theta.size == k and np.isfinite(start.theta).all():
        x0 = np.concatenate([start.theta, [np.log(start.nu)] if with_ties and start.nu > 0 else []])
        if with_ties and not start.nu > 0:
            x0 = np.concatenate([start.theta, [0.0]])
    else:
        x0 = np.zeros(k + (1 if with_ties else 0))
    # scipy is imported where used: at module top it added ~0.5 s of CPU to every process start
    from scipy import optimize

    found = optimize.minimize(
        negative, x0, jac=True, method="L-BFGS-B", options={"maxiter": 500, "gtol": 1e-9}
    )
    theta = found.x[:k] - found.x[:k].mean()
    nu = float(np.exp(found.x[k])) if with_ties else 0.0
    converged = bool(found.success)
    polished, polished_nu = davidson_fit_many(
        w[None], t[None], Fit(theta, nu, 0.0, converged), prior_scale=prior_scale
    )
    if np.isfinite(polished[0]).all() and np.isfinite(polished_nu[0]):
        theta, nu, converged = polished[0], float(polished_nu[0]), True
    return Fit(theta, nu, davidson_log_likelihood(theta, nu, w, t), converged)


#: log nu of a resample without a tie (nu ~ 2e-22: Bradley-Terry), and Newton's limits.
_NO_TIES_ETA, _NEWTON_STEPS, _NEWTON_GTOL = -50.0, 100, 1e-7


def davidson_fit_many(
    wins: npt.NDArray[np.float64],
    ties: npt.NDArray[np.float64],
    start: Fit,
    *,
    prior_scale: float = PRIOR_SCALE,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """`davidson_fit` of many tables at once (a bootstrap's resamples: wins and ties are
    (R, k, k)), by damped Newton from `start`: the penalised log-likelihood is concave in
    (theta, log nu) (each pair's log D is a log-sum-exp of affine functions; the prior is
    strictly concave), so Newton with step halving climbs to the one maximum. Returns
    (theta (R, k), nu (R,)), NaN where a table did not converge; nu = 0 where a table has
    no tie."""
    w = np.asarray(wins, dtype=np.float64)
    t = np.asarray(ties, dtype=np.float64)
    r, k = w.shape[0], w.shape[1]
    ridge = ridge_of(prior_scale)
    ii, jj = np.triu_indices(k, 1)
    # observed counts per pair: i over j, j over i, tie
    counts = np.stack([w[:, ii, jj], w[:, jj, ii], t[:, ii, jj]], axis=2)
    total = counts.sum(axis=2)
    tied = counts[:, :, 2].sum(axis=1) > 0
    # d a / d x for a = (theta_i, theta_j, eta + (theta_i + theta_j) / 2), x = (theta, eta)
    jac = np.zeros((ii.size, 3, k + 1))
    p = np.arange(ii.size)
    jac[p, 0, ii] = 1.0
    jac[p, 1, jj] = 1.0
    jac[p, 2, ii] = 0.5
    jac[p, 2, jj] = 0.5
    jac[:, 2, k] = 1.0
    x = np.empty((r, k + 1))
    x[:, :k] = start.theta - start.theta.mean() if np.isfinite(start.theta).all() else 0.0
    x[:, k] = np.where(tied, np.log(start.nu) if start.nu > 0 else 0.0, _NO_TIES_ETA)
    # the prior on (theta, log nu) (log nu's only where ties are modelled), plus
    # (sum theta)^2 / 2, which is zero at every maximum and centres theta without a prior
    weights = np.full((r, k + 1), ridge)
    weights[~tied, k] = 0.0

    def evaluate(
        x: npt.NDArray[np.float64],
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        a = np.einsum("pax,rx->rpa", jac, x)
        lse = np.logaddexp.reduce(a, axis=2)
        ll = (counts * (a - lse[..., None])).sum(axis=(1, 2))
        ll -= (weights * x**2).sum(axis=1) / 2 + x[:, :k].sum(axis=1) ** 2 / 2
        return ll, a, lse

    ll, a, lse = evaluate(x)
    done = np.zeros(r, dtype=bool)
    eye = np.eye(k + 1)
    centre = np.zeros((k + 1, k + 1))
    centre[:k, :k] = 1.0
    for _ in range(_NEWTON_STEPS):
        share = np.exp(a - lse[..., None])  # the model's probabilities, (R, P, 3)
        grad = np.einsum("rpa,pax->rx", counts - total[..., None] * share, jac)
        grad -= weights * x
        grad[:, :k] -= x[:, :k].sum(axis=1, keepdims=True)
        curv = share[..., :, None] * eye[:3, :3] - share[..., :, None] * share[..., None, :]
        hess = -np.einsum("pax,rpab,pby->rxy", jac, total[..., None, None] * curv, jac)
        hess -= weights[:, :, None] * eye + centre
        # no tie: nu stays at ~0 (eta fixed)
        grad[~tied, k] = 0.0
        hess[~tied, k, :] = 0.0
        hess[~tied, :, k] = 0.0
        hess[~tied, k, k] = -1.0
        done |= np.abs(grad).max(axis=1) < _NEWTON_GTOL * np.maximum(1.0, total.sum(axis=1))
        if done.all():
            break
        with np.errstate(all="ignore"):
            step = np.linalg.solve(-hess, grad[..., None])[..., 0]
        step[done | ~np.isfinite(step).all(axis=1)] = 0.0
        scale = np.ones(r)
        for _half in range(30):  # halve each table's step until its likelihood does not drop
            trial = x + scale[:, None] * step
            new_ll, new_a, new_lse = evaluate(trial)
            worse = ~(new_ll >= ll - 1e-12) & ~done
            if not worse.any():
                break
            scale[worse] /= 2
        ok = ~worse
        x[ok], ll[ok], a[ok], lse[ok] = trial[ok], new_ll[ok], new_a[ok], new_lse[ok]
    theta = x[:, :k] - x[:, :k].mean(axis=1, keepdims=True)
    nu = np.where(tied, np.exp(x[:, k]), 0.0)
    theta[~done] = np.nan
    nu[~done] = np.nan
    return theta, nu


# --- per-unit tables ----------------------------------------------------------------------------


def units_of(labels: Iterable[Label]) -> dict[Unit, list[int]]:
    """unit -> its labels' outcomes (canonical orientation)."""
    out: dict[Unit, list[int]] = defaultdict(list)
    for label in labels:
        first, second, outcome = canonical(label.model_a, label.model_b, label.choice)
        out[(label.item, first, second, label.skill)].append(outcome)
    return out


def decision(outcomes: Sequence[int]) -> int | None:
    """The outcome a strict plurality of `outcomes` gave; None when the top ones are level."""
    ranked = Counter(outcomes).most_common()
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


def _code(outcome: int) -> int:
    """0, 1, 2 for FIRST, EVEN, SECOND (a column of the per-category tables)."""
    return OUTCOMES.index(outcome)


# --- resampled statistics (analytics.bootstrap.Resampler functions of summed features) -----------


def outcome_counts(units: Sequence[Sequence[int]]) -> npt.NDArray[np.float64]:
    """(units x 3) counts of FIRST, EVEN and SECOND labels per unit."""
    out = np.zeros((len(units), len(OUTCOMES)))
    for row, outcomes in enumerate(units):
        for outcome in outcomes:
            out[row, _code(outcome)] += 1
    return out


def fleiss_features(counts: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Per unit of a (units x categories) table of label counts: [pairable, agreement,
    rated, then each category's share of the unit's labels], where agreement is
    sum_k r_k (r_k - 1) / (r (r - 1)) on units with two or more labels: the sums Fleiss'
    kappa (in analytics.metrics's generalisation) is a function of (`fleiss_from_sums`)."""
    table = np.asarray(counts, dtype=np.float64)
    r = table.sum(axis=1)
    out = np.zeros((table.shape[0], 3 + table.shape[1]))
    rated, pairable = r >= 1, r >= 2
    out[rated, 2] = 1.0
    out[rated, 3:] = table[rated] / r[rated, None]
    out[pairable, 0] = 1.0
    t = table[pairable]
    out[pairable, 1] = (t * (t - 1)).sum(axis=1) / (r[pairable] * (r[pairable] - 1))
    return out


def fleiss_from_sums(sums: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
    """Fleiss' kappa of each row of summed `fleiss_features` (NaN where undefined)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        p_a = sums[:, 1] / sums[:, 0]
        pi = sums[:, 3:] / sums[:, 2:3]
        p_e = (pi**2).sum(axis=1)
        kappa = (p_a - p_e) / (1 - p_e)
    kappa[np.isclose(p_e, 1.0) | (sums[:, 0] == 0)] = np.nan
    return {"fleiss_kappa": kappa}


def comparison_features(pairs: Sequence[tuple[int, int]]) -> npt.NDArray[np.float64]:
    """Per (people's decision, judge's outcome): [1, correct, both decided without a tie,
    correct of those, then the 3 x 3 table people x judge (FIRST, EVEN, SECOND)]."""
    out = np.zeros((len(pairs), 13))
    for row, (people, judge) in enumerate(pairs):
        out[row, 0] = 1.0
        out[row, 1] = float(people == judge)
        if people != EVEN and judge != EVEN:
            out[row, 2] = 1.0
            out[row, 3] = float(people == judge)
        out[row, 4 + 3 * _code(people) + _code(judge)] = 1.0
    return out


def comparison_from_sums(sums: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
    """Accuracy with and without ties and Cohen's kappa of each row of summed
    `comparison_features` (NaN where undefined)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = sums[:, 1] / sums[:, 0]
        without = sums[:, 3] / sums[:, 2]
        table = sums[:, 4:].reshape(-1, 3, 3)
        n = table.sum(axis=(1, 2))
        observed = np.trace(table, axis1=1, axis2=2) / n
        expected = (table.sum(axis=2) * table.sum(axis=1)).sum(axis=1) / n**2
        kappa = (observed - expected) / (1 - expected)
    kappa[np.isclose(expected, 1.0)] = np.nan
    return {"accuracy": accuracy, "accuracy_without_ties": without, "kappa": kappa}


def bt_features(
    units: Mapping[Unit, Sequence[int]], keys: Sequence[Unit], models: Sequence[str]
) -> npt.NDArray[np.float64]:
    """Per unit: its labels' wins (k x k, i over j) then ties (k x k, symmetric), flattened:
    a resample's sums are the tables `davidson_fit` takes."""
    index = {m: i for i, m in enumerate(models)}
    k = len(models)
    out = np.zeros((len(keys), 2 * k * k))
    for row, key in enumerate(keys):
        i, j = index[key[1]], index[key[2]]
        for outcome in units[key]:
            if outcome == FIRST:
                out[row, i * k + j] += 1
            elif outcome == SECOND:
                out[row, j * k + i] += 1
            else:
                out[row, k * k + i * k + j] += 1
                out[row, k * k + j * k + i] += 1
    return out


#: The names of `bt_from_sums`'s values: nu, and each system's log-strength.
NU = "nu"


def strength_key(model: str) -> str:
    return f"strength:{model}"


def bt_from_sums(
    models: Sequence[str], point: Fit, *, prior_scale: float = PRIOR_SCALE
) -> Callable[[npt.NDArray[np.float64]], dict[str, npt.NDArray[np.float64]]]:
    """A Resampler function refitting the Davidson model on each resample's tables (from the
    point estimate): nu (NU) and each model's log-strength (`strength_key`). A degenerate
    refit is NaN: every value of a resample whose fit did not converge, and the strength of
    a system the resample has no comparison of (its strength would be the prior's alone)."""
    k = len(models)

    def fn(sums: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
        wins = sums[:, : k * k].reshape(-1, k, k)
        ties = sums[:, k * k :].reshape(-1, k, k)
        theta, nu = davidson_fit_many(wins, ties, point, prior_scale=prior_scale)
        met = (wins + wins.transpose(0, 2, 1) + ties).sum(axis=2) > 0
        theta[~met] = np.nan
        return {NU: nu, **{strength_key(m): theta[:, i] for i, m in enumerate(models)}}

    return fn


def percentile_interval(
    values: npt.NDArray[np.float64],
) -> tuple[float | None, float | None, int]:
    """The 95% percentile interval of a bootstrap's values, one per resample, NaN where the
    resample's fit degenerated, and the count of those: np.percentile's interpolation over
    every resample with the degenerate ones put in the tail that widens the interval most
    (at -inf for the lower bound, +inf for the upper), so the interval holds whatever their
    values were; once they could fill a tail, the bound is infinite. (None, None, k) when
    no resample is usable."""
    values = np.asarray(values, dtype=np.float64)
    finite = np.sort(values[np.isfinite(values)])
    total, m = values.size, finite.size
    degenerate = total - m
    if m == 0:
        return None, None, degenerate
    tail = (1 - bootstrap.CONFIDENCE) / 2

    def at(position: float) -> float:
        low = math.floor(position)
        if low < 0 or math.ceil(position) > m - 1:
            return -math.inf if low < 0 else math.inf
        return float(finite[low] + (position - low) * (finite[math.ceil(position)] - finite[low]))

    return (
        at(tail * (total - 1) - degenerate),
        at((1 - tail) * (total - 1)),
        degenerate,
    )


# --- judges' outcomes from scores ---------------------------------------------------------------


def verdicts_from_scores(
    scores: Iterable[tuple[int, int, str, str, float | None]],
    pairs: Iterable[tuple[int, str, str]],
) -> list[Verdict]:
    """Pointwise scores made preferences (module docstring): `scores` are (response id,
    item, system, skill, value or None for N/A), one per response and skill (a rater's, or
    a mean); `pairs` the (item, first, second) to compare. One Verdict per pair and skill
    both systems were scored on, plus Overall over their shared skills."""
    by_response: dict[tuple[int, str], dict[str, float]] = defaultdict(dict)
    for _rid, item, system, skill, value in scores:
        if value is not None:
            by_response[(item, system)][skill] = float(value)
    out: list[Verdict] = []
    for item, first, second in sorted(set(pairs)):
        x, y = by_response.get((item, first)), by_response.get((item, second))
        if not x or not y:
            continue
        shared = sorted(set(x) & set(y))
        for skill in shared:
            out.append(Verdict(item, first, second, skill, _sign(x[skill] - y[skill])))
        if shared:
            diff = float(np.mean([x[s] for s in shared]) - np.mean([y[s] for s in shared]))
            out.append(Verdict(item, first, second, OVERALL, _sign(diff)))
    return out


#: A pairwise judge's verdicts as stored (judging.prompts.pairwise), from the challenger's side.
PAIR_VERDICTS = {"challenger": FIRST, "anchor": SECOND, "tie": EVEN}


def verdicts_from_pair_judgments(
    rows: Iterable[tuple[int, str, str, int, Mapping[str, str]]],
) -> list[Verdict]:
    """A pairwise judge run's judgments -> one Verdict per pair and skill: `rows` are
    (item, challenger system, anchor system, order, verdicts). The two orders agreeing give
    their verdict; disagreeing (position-inconsistent) give a tie; a pair read in one order
    only gives that order's verdict."""
    seen: dict[tuple[int, str, str, str], list[int]] = defaultdict(list)
    for item, challenger, anchor, _order, verdicts in rows:
        if challenger == anchor:
            continue
        for skill, verdict in (verdicts or {}).items():
            if verdict in PAIR_VERDICTS:
                seen[(item, challenger, anchor, skill)].append(PAIR_VERDICTS[verdict])
    return [
        Verdict(item, challenger, anchor, skill, found[0] if len(set(found)) == 1 else EVEN)
        for (item, challenger, anchor, skill), found in seen.items()
    ]


def _sign(value: float) -> int:
    return FIRST if value > 0 else SECOND if value < 0 else EVEN


def mean_scores(
    rows: Iterable[tuple[int, int, str, str, str, float | None]],
) -> list[tuple[int, int, str, str, float | None]]:
    """Report rows (analytics.rows.Row) of several raters -> one mean per response and skill
    (N/A left out; None when every rater said N/A)."""
    sums: dict[tuple[int, int, str, str], list[float]] = {}
    for rid, item, system, skill, _rater, value in rows:
        acc = sums.setdefault((rid, item, system, skill), [0.0, 0.0])
        if value is not None:
            acc[0] += value
            acc[1] += 1
    return [(*key, (s / c) if c else None) for key, (s, c) in sums.items()]


# --- the report ---------------------------------------------------------------------------------


def skill_order(labels: Iterable[Label], skills: Sequence[str] = ()) -> list[str]:
    """The skills of `labels` in the order of `skills` (others after, by name), Overall last."""
    found = {label.skill for label in labels}
    ordered = [s for s in skills if s in found and s != OVERALL]
    ordered += sorted(found - set(ordered) - {OVERALL})
    return ordered + ([OVERALL] if OVERALL in found else [])


def preference_report(
    labels: Sequence[Label],
    judges: Mapping[str, Sequence[Verdict]] | None = None,
    *,
    skills: Sequence[str] = (),
    resamples: int = 0,
    seed: int = 0,
    prior_scale: float = PRIOR_SCALE,
) -> dict[str, Any]:
    """The preference figures per skill and Overall (module docstring): label counts, the
    win/tie/loss matrices, Davidson strengths, agreement among raters and each judge
    against the people's decisions; with `resamples`, 95% item-bootstrap intervals. Every
    figure carries its n, a "too few" reason below its kind's minimum (analytics.minimums)
    and its flags (FLAGS). `judges`: source name -> its verdicts (a pairwise run's, or
    converted scores)."""
    judges = judges or {}
    by_skill: dict[str, list[Label]] = defaultdict(list)
    for label in labels:
        by_skill[label.skill].append(label)
    out: dict[str, Any] = {}
    for skill in skill_order(labels, skills):
        verdicts = {name: [v for v in found if v.skill == skill] for name, found in judges.items()}
        out[skill] = _skill_figures(
            by_skill[skill], verdicts, resamples=resamples, seed=seed, prior_scale=prior_scale
        )
    return {
        "overall": OVERALL,
        "both_bad": "tie",
        "resamples": resamples,
        "confidence": bootstrap.CONFIDENCE,
        "ridge": ridge_of(prior_scale),
        "prior_scale": None if math.isinf(prior_scale) else prior_scale,
        "minimums": {kind: minimums.minimum(kind).n for kind in FIGURE_KINDS},
        "skills": out,
    }


#: The kinds of figure of the report (analytics.minimums) and what their n counts.
FIGURE_KINDS = ("bradley_terry", "agreement", "accuracy", "interval")

#: A figure's flags, each a reason not to read it as a finding (docs/PREFERENCE_ANALYTICS.md).
FLAGS = {
    "too_few": "below its kind's minimum (its `too_few` says n and the minimum)",
    "separation": "the table is separated: without the prior the estimate would be infinite "
    "or not unique",
    "all_ties": "every label is a tie: nu is the prior's",
    "no_ties": "no label is a tie: nu is 0 (Bradley-Terry)",
    "degenerate_resamples": "some resamples' fits degenerated (`degenerate_resamples` of them)",
    "interval_too_few": "too few items resampled for an interval (`interval_too_few`)",
    "interval_fails": "the interval did not hold its estimate or was not finite: withheld",
}


def figure(
    estimate: float | None,
    interval: tuple[float | None, float | None, int] | None,
    *,
    kind: str,
    n: int,
    items: int,
    flags: Sequence[str] = (),
    degenerate: int | None = None,
) -> dict[str, Any]:
    """One figure as the report holds it: `estimate`, its interval (`low`, `high`, and the
    `resamples` that gave it; None without one), `n` (what the kind's minimum counts),
    `too_few` ("" or the reason), `interval_too_few` (the same for the items resampled),
    `flags` (FLAGS) and, for a refitted figure, `degenerate_resamples`. An interval that does
    not hold its estimate (analytics.minimums.interval_holds) is withheld: its bounds are
    None and the figure is flagged "interval_fails"."""
    found = list(flags)
    if estimate is not None and not math.isfinite(estimate):
        estimate = None
    low, high, used = interval if interval is not None and estimate is not None else (None, None, 0)
    out: dict[str, Any] = {
        "estimate": estimate,
        "low": low,
        "high": high,
        "resamples": used,
        "n": n,
        "too_few": minimums.too_few(kind, n),
        "interval_too_few": "",
    }
    if out["too_few"]:
        found.append("too_few")
    if degenerate is not None:
        out["degenerate_resamples"] = degenerate
        if degenerate:
            found.append("degenerate_resamples")
    if interval is not None and estimate is not None:
        out["interval_too_few"] = minimums.too_few("interval", items)
        if out["interval_too_few"]:
            found.append("interval_too_few")
        if low is None or high is None or not minimums.interval_holds(estimate, low, high):
            out["low"] = out["high"] = None
            found.append("interval_fails")
    out["flags"] = list(dict.fromkeys(found))
    return out


def _skill_figures(
    labels: Sequence[Label],
    judges: Mapping[str, Sequence[Verdict]],
    *,
    resamples: int,
    seed: int,
    prior_scale: float,
) -> dict[str, Any]:
    models = sorted({label.model_a for label in labels} | {label.model_b for label in labels})
    units = units_of(labels)
    keys = sorted(units)
    items = [key[0] for key in keys]
    n_items = len(set(items))
    matrices = win_matrices(labels, models)
    resampler = bootstrap.Resampler(items, resamples=resamples, seed=seed)
    resampled = bool(resamples) and n_items >= 2
    sinks: dict[str, Any] = {}
    estimates: dict[str, dict[str, float | None]] = {}

    def add(
        at: Sequence[int], features: npt.NDArray[np.float64], fn: bootstrap.StatFn, key: str
    ) -> None:
        # the estimate from all the data, the interval from the resamples
        estimates[key] = {
            name: (float(v[0]) if np.isfinite(v[0]) else None)
            for name, v in fn(features.sum(axis=0).reshape(1, -1)).items()
        }
        if resamples:
            resampler.add(at, features, fn, sink=sinks, key=key)

    # Bradley-Terry / Davidson: the resamples' values are kept, for intervals that count
    # and widen over the degenerate refits (percentile_interval)
    k = len(models)
    w, t = np.array(matrices["wins"], dtype=float), np.array(matrices["ties"], dtype=float)
    point = davidson_fit(w, t, prior_scale=prior_scale) if k >= 2 else None
    bt_sink: dict[str, Any] = {}
    if point is not None and resamples:
        resampler.add(
            items,
            bt_features(units, keys, models),
            bt_from_sums(models, point, prior_scale=prior_scale),
            sink=bt_sink,
            key="bt",
        )
        for name in (NU, *map(strength_key, models)):
            resampler.keep_values(bt_sink, name)
    # agreement among raters
    outcome_lists = [units[key] for key in keys]
    add(items, fleiss_features(outcome_counts(outcome_lists)), fleiss_from_sums, "fk")
    raters = sorted({label.rater for label in labels})
    rater_index = {r: i for i, r in enumerate(raters)}
    unit_index = {key: i for i, key in enumerate(keys)}
    matrix = np.full((len(raters), len(keys)), np.nan)
    for label in labels:
        first, second, outcome = canonical(label.model_a, label.model_b, label.choice)
        matrix[rater_index[label.rater], unit_index[(label.item, first, second, label.skill)]] = (
            _code(outcome)
        )
    # judges against the people's decisions
    decided = {key: d for key in keys if (d := decision(units[key])) is not None}
    compared: dict[str, tuple[int, int]] = {}  # name -> (decided units, of them without ties)
    for name, verdicts in judges.items():
        pairs, pair_items = [], []
        seen: set[Unit] = set()
        for v in verdicts:
            first, second, outcome = _oriented(v.model_x, v.model_y, v.outcome)
            key = (v.item, first, second, v.skill)
            if key in decided and key not in seen:
                seen.add(key)
                pairs.append((decided[key], outcome))
                pair_items.append(v.item)
        if pairs:
            strict = sum(1 for people, judge in pairs if EVEN not in (people, judge))
            compared[name] = (len(pairs), strict)
            add(pair_items, comparison_features(pairs), comparison_from_sums, f"judge:{name}")
    if resamples:
        resampler.run()
    pairable = int(sum(1 for o in outcome_lists if len(o) >= 2))
    alpha_interval = (
        bootstrap.alpha_intervals(
            matrix, items, levels=("nominal",), resamples=resamples, seed=seed
        )["nominal"]
        if resampled and keys
        else None
    )
    alpha = figure(
        metrics.krippendorff_alpha(matrix, "nominal") if keys else None,
        (alpha_interval.low, alpha_interval.high, alpha_interval.resamples)
        if alpha_interval is not None
        else None,
        kind="agreement",
        n=pairable,
        items=n_items,
    )

    def resampled_figure(key: str, name: str, *, kind: str, n: int) -> dict[str, Any]:
        found = sinks.get(key, {}).get(name) if resampled else None
        interval = (found["low"], found["high"], found["resamples"]) if found else None
        return figure(estimates[key][name], interval, kind=kind, n=n, items=n_items)

    bt: dict[str, Any] | None = None
    if point is not None:
        bt = _bt_figures(
            models,
            point,
            separation(w, t),
            {
                name: resampler.kept_values(bt_sink, name)
                for name in (NU, *map(strength_key, models))
            }
            if resampled
            else None,
            n=len(labels),
            items=n_items,
            ties=int(np.triu(t, 1).sum()),
            prior_scale=prior_scale,
        )
    counts = Counter(label.choice for label in labels)
    return {
        "models": models,
        "labels": len(labels),
        "choices": {c: counts.get(c, 0) for c in CHOICES},
        "units": len(keys),
        "items": n_items,
        "raters": len(raters),
        "decided_units": len(decided),
        **matrices,
        "bradley_terry": bt,
        "agreement": {
            "units_pairable": pairable,
            "n": pairable,
            "too_few": minimums.too_few("agreement", pairable),
            "alpha_nominal": alpha,
            "fleiss_kappa": resampled_figure("fk", "fleiss_kappa", kind="agreement", n=pairable),
        },
        "judges": {
            name: {
                "units": compared[name][0],
                "n": compared[name][0],
                "too_few": minimums.too_few("accuracy", compared[name][0]),
                **{
                    f: resampled_figure(
                        f"judge:{name}",
                        f,
                        kind="accuracy",
                        n=compared[name][1 if f == "accuracy_without_ties" else 0],
                    )
                    for f in estimates[f"judge:{name}"]
                },
            }
            for name in sorted(compared)
        },
    }


def _bt_figures(
    models: Sequence[str],
    point: Fit,
    found: Separation,
    kept: Mapping[str, npt.NDArray[np.float64]] | None,
    *,
    n: int,
    items: int,
    ties: int,
    prior_scale: float,
) -> dict[str, Any]:
    """The Bradley-Terry part of a skill's figures: each strength and nu as `figure`s (n:
    the labels), their intervals from the kept resamples (`percentile_interval`), the
    separation found and every flag."""
    separated = ["separation"] if found.separated else []

    def interval(name: str) -> tuple[tuple[float | None, float | None, int] | None, int | None]:
        if kept is None:
            return None, None
        values = kept[name]
        low, high, degenerate = percentile_interval(values)
        return (low, high, values.size - degenerate), degenerate

    strengths: dict[str, Any] = {}
    for i, m in enumerate(models):
        span, degenerate = interval(strength_key(m))
        strengths[m] = figure(
            float(point.theta[i]),
            span,
            kind="bradley_terry",
            n=n,
            items=items,
            flags=separated,
            degenerate=degenerate,
        )
    tie_flags = ["no_ties"] if ties == 0 else ["all_ties"] if ties == n else []
    span, degenerate = interval(NU)
    nu = figure(
        point.nu,
        span if ties else None,
        kind="bradley_terry",
        n=n,
        items=items,
        flags=[*(separated if found.ties_unbounded else []), *tie_flags],
        degenerate=degenerate if ties else None,
    )
    flags = [*separated, *tie_flags]
    for f in [*strengths.values(), nu]:
        flags += f["flags"]
    return {
        "strengths": dict(sorted(strengths.items(), key=lambda kv: -kv[1]["estimate"])),
        "nu": nu,
        "ties_modelled": point.nu > 0,
        "log_likelihood": point.log_likelihood,
        "converged": point.converged,
        "n": n,
        "too_few": minimums.too_few("bradley_terry", n),
        "prior_scale": None if math.isinf(prior_scale) else prior_scale,
        "separation": {
            "separated": found.separated,
            "strengths_separated": found.strengths_separated,
            "ties_unbounded": found.ties_unbounded,
            "disconnected": found.disconnected,
            "never_lost": [models[i] for i in found.never_lost],
            "never_won": [models[i] for i in found.never_won],
        },
        "degenerate_resamples": max(
            (f.get("degenerate_resamples") or 0 for f in [*strengths.values(), nu]), default=0
        ),
        "flags": list(dict.fromkeys(flags)),
    }
