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
  D = pi_i + pi_j + nu sqrt(pi_i pi_j). Maximum likelihood with scipy's L-BFGS on
  theta = log pi and log nu, with the analytic gradient and choix's weak ridge
  (alpha/2 sum theta^2, alpha = 1e-6) so that a system that won every comparison has a
  finite strength; the ridge also makes sum(theta) = 0, the identifying constraint. Without
  any tie the model is Bradley & Terry (1952) (nu = 0). Intervals: percentile bootstrap that
  resamples items (every label of an item goes together) and refits every resample at once
  by damped Newton (`davidson_fit_many`).
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

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from analytics import bootstrap, metrics

OVERALL = "Overall"
#: Choices as stored (annotation.models.PairChoice), in a label's own A/B terms.
A, B, TIE, BOTH_BAD = "a", "b", "tie", "both_bad"
CHOICES = (A, B, TIE, BOTH_BAD)
#: Outcomes, from the canonical pair's first system: first preferred, tie, second preferred.
FIRST, EVEN, SECOND = 1, 0, -1
OUTCOMES = (FIRST, EVEN, SECOND)
#: choix's default ridge: keeps a system that won every comparison finite.
RIDGE = 1e-6


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


@dataclass(frozen=True)
class Fit:
    """A Davidson (or, with nu = 0, Bradley-Terry) fit: log-strengths summing to 0."""

    theta: npt.NDArray[np.float64]
    nu: float  # 0: no ties modelled
    log_likelihood: float
    converged: bool


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
    ridge: float = RIDGE,
    start: Fit | None = None,
) -> Fit:
    """Maximum likelihood of the Davidson model (Bradley-Terry when there is no tie) with a
    ridge on the log-strengths (module docstring). `start`: a fit to start from (the point
    estimate, for a bootstrap refit)."""
    w = np.array(wins, dtype=np.float64)
    t = np.array(ties, dtype=np.float64)
    np.fill_diagonal(w, 0.0)  # a system never meets itself
    np.fill_diagonal(t, 0.0)
    k = w.shape[0]
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
        ll = float((w * log_p).sum())
        if with_ties:
            ll += float((np.triu(t, 1) * log_q).sum())
        ll -= ridge / 2 * float((theta**2).sum())
        grad = np.empty(params.size)
        grad[:k] = won - (n * (p + q / 2)).sum(axis=1) - ridge * theta
        if with_ties:
            grad[k] = tied - float((np.triu(n, 1) * q).sum())
        return -ll, -grad

    if start is not None and start.theta.size == k:
        x0 = np.concatenate([start.theta, [np.log(start.nu)] if with_ties and start.nu > 0 else []])
        if with_ties and start.nu <= 0:
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
    return Fit(theta, nu, davidson_log_likelihood(theta, nu, w, t), bool(found.success))


#: log nu of a resample without a tie (nu ~ 2e-22: Bradley-Terry), and Newton's limits.
_NO_TIES_ETA, _NEWTON_STEPS, _NEWTON_GTOL = -50.0, 100, 1e-7


def davidson_fit_many(
    wins: npt.NDArray[np.float64],
    ties: npt.NDArray[np.float64],
    start: Fit,
    *,
    ridge: float = RIDGE,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """`davidson_fit` of many tables at once (a bootstrap's resamples: wins and ties are
    (R, k, k)), by damped Newton from `start`: the penalised log-likelihood is concave in
    (theta, log nu) (each pair's log D is a log-sum-exp of affine functions), so Newton with
    step halving climbs to the one maximum. Returns (theta (R, k), nu (R,)), NaN where a
    table did not converge; nu = 0 where a table has no tie."""
    w = np.asarray(wins, dtype=np.float64)
    t = np.asarray(ties, dtype=np.float64)
    r, k = w.shape[0], w.shape[1]
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
    x[:, :k] = start.theta
    x[:, k] = np.where(tied, np.log(start.nu) if start.nu > 0 else 0.0, _NO_TIES_ETA)

    def evaluate(
        x: npt.NDArray[np.float64],
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        a = np.einsum("pax,rx->rpa", jac, x)
        lse = np.logaddexp.reduce(a, axis=2)
        ll = (counts * (a - lse[..., None])).sum(axis=(1, 2))
        ll -= ridge / 2 * (x[:, :k] ** 2).sum(axis=1)
        return ll, a, lse

    ll, a, lse = evaluate(x)
    done = np.zeros(r, dtype=bool)
    eye = np.eye(k + 1)
    for _ in range(_NEWTON_STEPS):
        share = np.exp(a - lse[..., None])  # the model's probabilities, (R, P, 3)
        grad = np.einsum("rpa,pax->rx", counts - total[..., None] * share, jac)
        grad[:, :k] -= ridge * x[:, :k]
        curv = share[..., :, None] * eye[:3, :3] - share[..., :, None] * share[..., None, :]
        hess = -np.einsum("pax,rpab,pby->rxy", jac, total[..., None, None] * curv, jac)
        hess[:, np.arange(k), np.arange(k)] -= ridge
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
        step[done] = 0.0
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


def bt_from_sums(
    models: Sequence[str], point: Fit
) -> Callable[[npt.NDArray[np.float64]], dict[str, npt.NDArray[np.float64]]]:
    """A Resampler function refitting the Davidson model on each resample's tables (from the
    point estimate): each model's log-strength and nu."""
    k = len(models)

    def fn(sums: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
        wins = sums[:, : k * k].reshape(-1, k, k)
        ties = sums[:, k * k :].reshape(-1, k, k)
        theta, nu = davidson_fit_many(wins, ties, point)
        return {"nu": nu, **{m: theta[:, i] for i, m in enumerate(models)}}

    return fn


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
) -> dict[str, Any]:
    """The preference figures per skill and Overall (module docstring): label counts, the
    win/tie/loss matrices, Davidson strengths, agreement among raters and each judge
    against the people's decisions; with `resamples`, 95% item-bootstrap intervals.
    `judges`: source name -> its verdicts (a pairwise run's, or converted scores)."""
    judges = judges or {}
    by_skill: dict[str, list[Label]] = defaultdict(list)
    for label in labels:
        by_skill[label.skill].append(label)
    out: dict[str, Any] = {}
    for skill in skill_order(labels, skills):
        verdicts = {name: [v for v in found if v.skill == skill] for name, found in judges.items()}
        out[skill] = _skill_figures(by_skill[skill], verdicts, resamples=resamples, seed=seed)
    return {
        "overall": OVERALL,
        "both_bad": "tie",
        "resamples": resamples,
        "confidence": bootstrap.CONFIDENCE,
        "ridge": RIDGE,
        "skills": out,
    }


def _skill_figures(
    labels: Sequence[Label],
    judges: Mapping[str, Sequence[Verdict]],
    *,
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    models = sorted({label.model_a for label in labels} | {label.model_b for label in labels})
    units = units_of(labels)
    keys = sorted(units)
    items = [key[0] for key in keys]
    matrices = win_matrices(labels, models)
    resampler = bootstrap.Resampler(items, resamples=resamples, seed=seed)
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

    # Bradley-Terry / Davidson
    k = len(models)
    w, t = np.array(matrices["wins"], dtype=float), np.array(matrices["ties"], dtype=float)
    point = davidson_fit(w, t) if k >= 2 else None
    if point is not None and resamples:
        resampler.add(
            items,
            bt_features(units, keys, models),
            bt_from_sums(models, point),
            sink=sinks,
            key="bt",
        )
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
    compared: dict[str, int] = {}
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
            compared[name] = len(pairs)
            add(pair_items, comparison_features(pairs), comparison_from_sums, f"judge:{name}")
    if resamples:
        resampler.run()
    alpha = _with_estimate(
        metrics.krippendorff_alpha(matrix, "nominal") if keys else None,
        bootstrap.alpha_intervals(
            matrix, items, levels=("nominal",), resamples=resamples, seed=seed
        )["nominal"].as_dict()
        if resamples and keys
        else None,
    )

    def figure(key: str, name: str) -> bootstrap.IntervalDict:
        return _with_estimate(estimates[key][name], sinks.get(key, {}).get(name))

    strengths: dict[str, Any] = {}
    bt: dict[str, Any] | None = None
    if point is not None:
        boot = sinks.get("bt", {})
        for i, m in enumerate(models):
            strengths[m] = _with_estimate(float(point.theta[i]), boot.get(m))
        bt = {
            "strengths": dict(sorted(strengths.items(), key=lambda kv: -kv[1]["estimate"])),
            "nu": _with_estimate(point.nu, boot.get("nu")),
            "ties_modelled": point.nu > 0,
            "log_likelihood": point.log_likelihood,
            "converged": point.converged,
        }
    counts = Counter(label.choice for label in labels)
    return {
        "models": models,
        "labels": len(labels),
        "choices": {c: counts.get(c, 0) for c in CHOICES},
        "units": len(keys),
        "items": len(set(items)),
        "raters": len(raters),
        "decided_units": len(decided),
        **matrices,
        "bradley_terry": bt,
        "agreement": {
            "units_pairable": int(sum(1 for o in outcome_lists if len(o) >= 2)),
            "alpha_nominal": alpha,
            "fleiss_kappa": figure("fk", "fleiss_kappa"),
        },
        "judges": {
            name: {
                "units": compared[name],
                **{f: figure(f"judge:{name}", f) for f in estimates[f"judge:{name}"]},
            }
            for name in sorted(compared)
        },
    }


def _with_estimate(
    estimate: float | None, interval: bootstrap.IntervalDict | None
) -> bootstrap.IntervalDict:
    """The estimate from all the data with the resampled interval (None without one)."""
    if estimate is None or not np.isfinite(estimate):
        return {"estimate": None, "low": None, "high": None, "resamples": 0}
    if interval is None or interval["estimate"] is None:
        return {"estimate": estimate, "low": None, "high": None, "resamples": 0}
    return {**interval, "estimate": estimate}
