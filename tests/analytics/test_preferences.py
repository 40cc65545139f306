"""Preference figures (analytics/preferences.py), pure: Bradley-Terry against the choix
library (unpenalised, and with the prior as choix's ridge), Davidson's ties against a
penalised likelihood written out here and its closed form for equal systems, Fleiss' kappa
against Fleiss (1971)'s worked example, alpha against the krippendorff library, Cohen's kappa
against analytics.metrics (checked against Cohen 1960). Small samples, separation and the
prior's worked examples: test_preference_small_n.py."""

from __future__ import annotations

import math
import random

import choix
import krippendorff
import numpy as np
import pytest

from analytics import metrics
from analytics import preferences as prefs
from analytics.preferences import EVEN, FIRST, OVERALL, SECOND, Label, Verdict

# Fleiss (1971): ten subjects, fourteen raters, five categories; kappa = 0.210.
FLEISS_EXAMPLE = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
]


def _comparisons(seed: int, k: int = 5, n: int = 400) -> list[tuple[int, int]]:
    """(winner, loser) pairs drawn from a Bradley-Terry model with spread strengths."""
    rng = random.Random(seed)
    theta = [1.2 - 0.6 * i for i in range(k)]
    out = []
    for _ in range(n):
        i, j = rng.sample(range(k), 2)
        p = 1 / (1 + math.exp(theta[j] - theta[i]))
        out.append((i, j) if rng.random() < p else (j, i))
    return out


def _tables(comparisons, k, ties=()):
    wins = np.zeros((k, k))
    for winner, loser in comparisons:
        wins[winner, loser] += 1
    tie = np.zeros((k, k))
    for i, j in ties:
        tie[i, j] += 1
        tie[j, i] += 1
    return wins, tie


#: choix's ridge alpha * sum(theta^2) is the prior's sum(theta^2) / (2 scale^2)
CHOIX_ALPHA = 1 / (2 * prefs.PRIOR_SCALE**2)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bradley_terry_without_ties_matches_choix(seed):
    comparisons = _comparisons(seed)
    wins, ties = _tables(comparisons, 5)
    # unpenalised (an infinite prior scale): choix's maximum likelihood
    fit = prefs.davidson_fit(wins, ties, prior_scale=math.inf)
    expected = choix.opt_pairwise(5, comparisons, alpha=0.0)
    assert fit.nu == 0.0
    assert fit.converged
    assert fit.theta.sum() == pytest.approx(0.0, abs=1e-9)
    np.testing.assert_allclose(fit.theta, expected - expected.mean(), atol=1e-5)
    # with the prior: choix's ridge of the same weight
    fit = prefs.davidson_fit(wins, ties)
    expected = choix.opt_pairwise(5, comparisons, alpha=CHOIX_ALPHA)
    np.testing.assert_allclose(fit.theta, expected - expected.mean(), atol=1e-5)


def test_a_system_that_won_everything_has_the_finite_strength_of_choix_with_the_prior():
    comparisons = [(0, 1)] * 5 + [(1, 2)] * 3 + [(2, 1)] * 2
    wins, ties = _tables(comparisons, 3)
    fit = prefs.davidson_fit(wins, ties)
    expected = choix.opt_pairwise(3, comparisons, alpha=CHOIX_ALPHA)
    assert fit.converged and np.isfinite(fit.theta).all()
    # the prior's maximum is a proper one (not a flat likelihood stopped somewhere): the
    # same as choix's to the optimiser's precision
    np.testing.assert_allclose(fit.theta, expected - expected.mean(), atol=1e-6)
    assert 1.0 < fit.theta[0] < 3.0  # ahead, by what 5 wins and the prior say
    found = prefs.separation(wins, ties)
    assert found.separated and found.strengths_separated and found.never_lost == (0,)


def _davidson_by_hand(theta, nu, wins, ties, ridge):
    """The penalised Davidson (1970) log-likelihood, written out term by term: the prior
    N(0, 1 / ridge) on each theta and on log nu."""
    k = len(theta)
    pi = [math.exp(t) for t in theta]
    total = 0.0
    for i in range(k):
        for j in range(k):
            if i == j:
                continue
            d = pi[i] + pi[j] + nu * math.sqrt(pi[i] * pi[j])
            total += wins[i][j] * math.log(pi[i] / d)
            if i < j and ties[i][j]:
                total += ties[i][j] * math.log(nu * math.sqrt(pi[i] * pi[j]) / d)
    return total - ridge / 2 * (sum(t * t for t in theta) + math.log(nu) ** 2)


def test_davidson_fit_is_the_maximum_of_the_likelihood_written_out_by_hand():
    rng = random.Random(7)
    comparisons = _comparisons(4, k=4, n=300)
    tie_pairs = [tuple(rng.sample(range(4), 2)) for _ in range(80)]
    wins, ties = _tables(comparisons, 4, tie_pairs)
    fit = prefs.davidson_fit(wins, ties)
    assert fit.converged and fit.nu > 0
    params = [*fit.theta, math.log(fit.nu)]

    def ll(p):
        return _davidson_by_hand(p[:4], math.exp(p[4]), wins, ties, prefs.RIDGE)

    prior = prefs.RIDGE / 2 * (sum(fit.theta**2) + math.log(fit.nu) ** 2)
    assert fit.log_likelihood == pytest.approx(ll(params) + prior)
    assert prefs.log_prior(fit.theta, fit.nu) == pytest.approx(-prior)
    # the gradient of the hand-written likelihood is zero at the fit (central differences)
    h = 1e-5
    for index in range(5):
        up, down = list(params), list(params)
        up[index] += h
        down[index] -= h
        assert (ll(up) - ll(down)) / (2 * h) == pytest.approx(0.0, abs=1e-4)
    # and moving away in any direction lowers it
    for index in range(5):
        moved = list(params)
        moved[index] += 0.05
        assert ll(moved) < ll(params)


def test_davidson_tie_parameter_has_its_closed_form_for_equal_systems():
    # two equal systems: P(tie) = nu / (2 + nu), so with T ties of N comparisons nu = 2T/(N-T)
    wins = np.array([[0.0, 30.0], [30.0, 0.0]])  # 30 wins each way
    ties = np.array([[0.0, 20.0], [20.0, 0.0]])
    fit = prefs.davidson_fit(wins, ties, prior_scale=math.inf)
    assert fit.theta == pytest.approx([0.0, 0.0], abs=1e-6)
    assert fit.nu == pytest.approx(2 * 20 / (80 - 20), rel=1e-5)


def test_davidson_with_vanishing_ties_is_bradley_terry():
    comparisons = _comparisons(5, k=4)
    wins, _ = _tables(comparisons, 4)
    ties = np.full((4, 4), 1e-7)
    np.fill_diagonal(ties, 0.0)
    fit = prefs.davidson_fit(wins, ties, prior_scale=math.inf)
    expected = choix.opt_pairwise(4, comparisons, alpha=0.0)
    assert fit.nu < 1e-5
    np.testing.assert_allclose(fit.theta, expected - expected.mean(), atol=1e-4)


def test_fleiss_kappa_from_sums_matches_fleiss_1971():
    sums = prefs.fleiss_features(FLEISS_EXAMPLE).sum(axis=0, keepdims=True)
    assert prefs.fleiss_from_sums(sums)["fleiss_kappa"][0] == pytest.approx(0.210, abs=5e-4)


def test_fleiss_kappa_from_sums_matches_metrics_with_different_numbers_of_raters():
    rng = np.random.default_rng(3)
    counts = rng.integers(0, 4, size=(40, 3))
    counts[::7] = [1, 0, 0]  # some units with one label: not pairable
    sums = prefs.fleiss_features(counts).sum(axis=0, keepdims=True)
    expected = metrics.fleiss_kappa(counts)
    assert prefs.fleiss_from_sums(sums)["fleiss_kappa"][0] == pytest.approx(expected)


def test_comparison_figures_match_cohen_kappa_and_counts_by_hand():
    rng = random.Random(11)
    pairs = [(rng.choice([1, 0, -1]), rng.choice([1, 0, -1])) for _ in range(200)]
    pairs += [(p, p) for p, _ in pairs[:80]]  # some agreement
    sums = prefs.comparison_features(pairs).sum(axis=0, keepdims=True)
    found = {k: v[0] for k, v in prefs.comparison_from_sums(sums).items()}
    people = [p for p, _ in pairs]
    judge = [j for _, j in pairs]
    assert found["kappa"] == pytest.approx(metrics.cohen_kappa(people, judge))
    assert found["accuracy"] == pytest.approx(sum(p == j for p, j in pairs) / len(pairs))
    strict = [(p, j) for p, j in pairs if p != 0 and j != 0]
    assert found["accuracy_without_ties"] == pytest.approx(
        sum(p == j for p, j in strict) / len(strict)
    )


def test_canonical_orientation_and_both_bad_is_a_tie():
    assert prefs.canonical("zeta", "alpha", "a") == ("alpha", "zeta", SECOND)
    assert prefs.canonical("alpha", "zeta", "a") == ("alpha", "zeta", FIRST)
    assert prefs.canonical("zeta", "alpha", "both_bad") == ("alpha", "zeta", EVEN)
    with pytest.raises(ValueError, match="choice must be one of"):
        prefs.canonical("x", "y", "maybe")
    with pytest.raises(ValueError, match="two different systems"):
        prefs.canonical("x", "x", "a")


def test_win_matrices_count_ties_and_both_bad():
    labels = [
        Label(1, "y", "x", "r1", OVERALL, "a"),  # y over x
        Label(1, "x", "y", "r2", OVERALL, "b"),  # y over x
        Label(2, "x", "y", "r1", OVERALL, "a"),  # x over y
        Label(2, "x", "y", "r2", OVERALL, "tie"),
        Label(3, "y", "x", "r1", OVERALL, "both_bad"),
    ]
    found = prefs.win_matrices(labels, ["x", "y"])
    assert found["wins"] == [[0, 1], [2, 0]]
    assert found["ties"] == [[0, 2], [2, 0]]
    assert found["both_bad"] == [[0, 1], [1, 0]]


def test_decision_is_a_strict_plurality():
    assert prefs.decision([FIRST, FIRST, SECOND]) == FIRST
    assert prefs.decision([EVEN, EVEN, FIRST]) == EVEN
    assert prefs.decision([FIRST, SECOND]) is None
    assert prefs.decision([FIRST, SECOND, EVEN]) is None
    assert prefs.decision([]) is None


def test_verdicts_from_scores_higher_wins_equal_ties_overall_from_shared_skills():
    scores = [
        (10, 1, "x", "Factuality", 4.0),
        (11, 1, "y", "Factuality", 2.0),
        (10, 1, "x", "Readability", 3.0),
        (11, 1, "y", "Readability", 3.0),
        (10, 1, "x", "Conciseness", None),  # N/A: not compared
        (11, 1, "y", "Conciseness", 5.0),
        (11, 1, "y", "Harmlessness", 1.0),  # only y: not shared
    ]
    found = prefs.verdicts_from_scores(scores, [(1, "x", "y"), (2, "x", "y")])
    assert set(found) == {
        Verdict(1, "x", "y", "Factuality", FIRST),
        Verdict(1, "x", "y", "Readability", EVEN),
        Verdict(1, "x", "y", OVERALL, FIRST),  # mean 3.5 against 2.5
    }


def _labels(seed=0, items=40, raters=("r1", "r2", "r3")):
    rng = random.Random(seed)
    theta = {"m1": 1.0, "m2": 0.2, "m3": -0.8}
    models = sorted(theta)
    out = []
    for item in range(items):
        for i, a in enumerate(models):
            for b in models[i + 1 :]:
                p = 1 / (1 + math.exp(theta[b] - theta[a]))
                for rater in raters:
                    for skill in ("Factuality", OVERALL):
                        u = rng.random()
                        choice = "tie" if u < 0.15 else "both_bad" if u < 0.2 else None
                        choice = choice or ("a" if rng.random() < p else "b")
                        # half of the pairs shown with the systems the other way round
                        if item % 2:
                            choice = {"a": "b", "b": "a"}.get(choice, choice)
                            out.append(Label(item, b, a, rater, skill, choice))
                        else:
                            out.append(Label(item, a, b, rater, skill, choice))
    return out


def test_preference_report_figures_match_the_libraries_on_the_same_data():
    labels = _labels()
    overall = [label for label in labels if label.skill == OVERALL]
    judge = [
        Verdict(lb.item, lb.model_a, lb.model_b, lb.skill, {"a": 1, "b": -1}.get(lb.choice, 0))
        for lb in overall
        if lb.rater == "r1"
    ]
    report = prefs.preference_report(labels, {"judge r1": judge}, skills=["Factuality"])
    assert list(report["skills"]) == ["Factuality", OVERALL]
    figures = report["skills"][OVERALL]
    assert figures["models"] == ["m1", "m2", "m3"]
    assert figures["labels"] == len(overall)
    assert figures["units"] == 40 * 3 and figures["items"] == 40 and figures["raters"] == 3
    # strengths: the fit of the pooled tables, ordered from the strongest
    bt = figures["bradley_terry"]
    assert list(bt["strengths"]) == ["m1", "m2", "m3"]
    fit = prefs.davidson_fit(np.array(figures["wins"]), np.array(figures["ties"]))
    assert bt["strengths"]["m1"]["estimate"] == pytest.approx(fit.theta[0])
    assert bt["nu"]["estimate"] == pytest.approx(fit.nu)
    # alpha: the krippendorff library on the raters x units matrix built here
    units = sorted({(lb.item, *sorted((lb.model_a, lb.model_b))) for lb in overall})
    matrix = np.full((3, len(units)), np.nan)
    for lb in overall:
        first, second, outcome = prefs.canonical(lb.model_a, lb.model_b, lb.choice)
        matrix[int(lb.rater[1]) - 1, units.index((lb.item, first, second))] = outcome
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal")
    assert figures["agreement"]["alpha_nominal"]["estimate"] == pytest.approx(expected)
    counts = np.stack([(matrix == o).sum(axis=0) for o in (1, 0, -1)], axis=1)
    assert figures["agreement"]["fleiss_kappa"]["estimate"] == pytest.approx(
        metrics.fleiss_kappa(counts)
    )
    # the judge against the people's plurality (units without one left out)
    decided = {}
    for u, unit in enumerate(units):
        d = prefs.decision([int(v) for v in matrix[:, u]])
        if d is not None:
            decided[unit] = d
    mine = {
        (v.item, *sorted((v.model_x, v.model_y))): prefs._oriented(*v[1:3], v.outcome)[2]
        for v in judge
    }
    shared = [(decided[u], mine[u]) for u in decided]
    j = figures["judges"]["judge r1"]
    assert j["units"] == len(shared) == figures["decided_units"]
    assert j["accuracy"]["estimate"] == pytest.approx(sum(p == q for p, q in shared) / len(shared))
    assert j["kappa"]["estimate"] == pytest.approx(
        metrics.cohen_kappa([p for p, _ in shared], [q for _, q in shared])
    )
    assert figures["choices"]["both_bad"] > 0
    assert all(v["low"] is None for v in bt["strengths"].values())  # no resamples asked


def test_preference_report_intervals_resample_items():
    labels = _labels(seed=1, items=30)
    report = prefs.preference_report(labels, resamples=200, seed=5)
    again = prefs.preference_report(labels, resamples=200, seed=5)
    assert report == again  # seeded
    figures = report["skills"][OVERALL]
    for found in [
        *figures["bradley_terry"]["strengths"].values(),
        figures["bradley_terry"]["nu"],
        figures["agreement"]["alpha_nominal"],
        figures["agreement"]["fleiss_kappa"],
    ]:
        assert found["resamples"] == 200
        assert found["low"] <= found["estimate"] <= found["high"]
    m1 = figures["bradley_terry"]["strengths"]["m1"]
    m3 = figures["bradley_terry"]["strengths"]["m3"]
    assert m1["low"] > m3["high"]  # clearly apart with these strengths


def test_preference_report_of_no_labels_is_empty():
    assert prefs.preference_report([])["skills"] == {}


def test_pair_judgments_two_orders_agreeing_give_their_verdict_else_a_tie():
    rows = [
        (1, "x", "anchor", 0, {"Factuality": "challenger", "Overall": "anchor"}),
        (1, "x", "anchor", 1, {"Factuality": "challenger", "Overall": "challenger"}),
        (2, "x", "anchor", 1, {"Overall": "anchor", "Readability": "bogus"}),
    ]
    found = set(prefs.verdicts_from_pair_judgments(rows))
    assert found == {
        Verdict(1, "x", "anchor", "Factuality", FIRST),
        Verdict(1, "x", "anchor", OVERALL, EVEN),  # position-inconsistent
        Verdict(2, "x", "anchor", OVERALL, SECOND),  # one order read
    }


def test_many_fits_at_once_match_one_fit_each():
    # a bootstrap's resamples are refitted together by Newton: the same maxima as scipy's
    rng = np.random.default_rng(9)
    k = 5
    tables = []
    for r in range(12):
        wins = rng.integers(0, 30, size=(k, k)).astype(float)
        np.fill_diagonal(wins, 0.0)
        ties = np.triu(rng.integers(0, 8, size=(k, k)).astype(float), 1)
        if r == 3:
            ties[:] = 0.0  # no tie at all: Bradley-Terry
        if r == 7:
            wins[0, :] += 20
            wins[:, 0] = 0.0  # system 0 won every comparison: the ridge keeps it finite
        if r == 9:
            wins[:] = 0.0  # every label a tie: nu is the prior's
        tables.append((wins, ties + ties.T))
    start = prefs.davidson_fit(*tables[0])
    theta, nu = prefs.davidson_fit_many(
        np.stack([w for w, _ in tables]), np.stack([t for _, t in tables]), start
    )
    for r, (wins, ties) in enumerate(tables):
        one = prefs.davidson_fit(wins, ties)

        def penalised(th, v, w=wins, t=ties):
            return prefs.davidson_log_likelihood(th, v, w, t) + prefs.log_prior(th, v)

        # the same maximum as one fit's (scipy's, polished), the separated one (7) too
        assert penalised(theta[r], nu[r]) >= penalised(one.theta, one.nu) - 1e-9
        np.testing.assert_allclose(theta[r], one.theta, atol=1e-6)
        assert nu[r] == pytest.approx(one.nu, rel=1e-6, abs=1e-6)
    assert nu[3] == 0.0
    assert 0 < nu[9] < 1e3 and np.isfinite(theta[9]).all()


def test_one_label_per_pair_gives_figures_without_agreement():
    """A pairwise campaign's first answers (K = 1, or before a second annotator came): the
    report has its counts and matrices, and agreement among raters is simply undefined."""
    labels = [
        Label(1, "m1", "m2", "r1", OVERALL, "a"),
        Label(2, "m1", "m2", "r1", OVERALL, "tie"),
        Label(3, "m2", "m1", "r2", OVERALL, "b"),
    ]
    report = prefs.preference_report(labels, resamples=50)
    overall = report["skills"][OVERALL]
    assert overall["labels"] == 3
    assert overall["agreement"]["units_pairable"] == 0
    assert overall["agreement"]["alpha_nominal"]["estimate"] is None
