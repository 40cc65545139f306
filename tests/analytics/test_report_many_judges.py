"""The report with many judges: raw-valued judges' group means exact without a Fraction per
value, and the judge comparison computed for the pairs asked for (default: each judge
against the skill's best), with the figures of the all-pairs comparison."""

from __future__ import annotations

import json
from fractions import Fraction
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command

from analytics import bootstrap
from analytics.report.build import build_report, group_means, human_means
from annotation.models import Dataset
from devtools.openai_server import FakeOpenAIServer
from judging.services import judge_response, judge_run_create
from tests.analytics.test_report import scored_project  # noqa: F401 (a fixture)
from tests.judging.test_runs import llm_judge, response_ids, running

JUDGES = [f"j{k}" for k in range(6)]


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


def many_judges(n_judges: int = 6, items: int = 12, systems: int = 4, seed: int = 3):
    """Human rows (three people per response) and judges of different quality on two
    skills: Likert judges and raw-valued metrics, one of which skips some responses."""
    rng = np.random.default_rng(seed)
    human, judge = [], []
    for skill in ("Factuality", "Readability"):
        truth = rng.integers(1, 6, size=(items, systems))
        for item in range(items):
            for s in range(systems):
                rid = item * systems + s
                for person in ("ann", "bob", "cy"):
                    value = int(np.clip(truth[item, s] + rng.integers(-1, 2), 1, 5))
                    human.append((rid, item, f"m{s}", skill, person, value))
                for k in range(n_judges):
                    noise = 0.3 + 0.4 * k
                    raw = truth[item, s] + rng.normal() * noise
                    if k == 3 and rid % 5 == 0:
                        continue  # a judge that skipped some responses
                    value = float(np.round(raw, 3)) if k % 2 else int(np.clip(np.rint(raw), 1, 5))
                    judge.append((rid, item, f"m{s}", skill, f"j{k}", value))
    return human, judge


def test_the_default_compares_each_judge_with_the_best_and_keeps_the_all_pairs_figures():
    # given six judges on two skills
    human, judge = many_judges()
    # when
    every = build_report(human, judge, resamples=200, compare_all=True)
    default = build_report(human, judge, resamples=200)
    # then the best judge of each skill has the highest instance Pearson
    best = default["judge_comparison_pairs"]["best"]
    for skill, name in best.items():
        pearsons = {j: default["correlation"][j][skill]["instance"]["pearson"] for j in JUDGES}
        assert pearsons[name] == max(pearsons.values())
    assert default["judge_comparison_pairs"] == {"mode": "best", "best": best, "extra": []}
    assert every["judge_comparison_pairs"] == {"mode": "all", "best": best, "extra": []}
    # and each judge is compared with it, with the all-pairs figures, A before B by name
    for skill, pairs in default["judge_comparison"].items():
        expected = [f"{min(j, best[skill])} vs {max(j, best[skill])}" for j in JUDGES]
        assert list(pairs) == [p for p in expected if p.split(" vs ")[0] != p.split(" vs ")[1]]
        assert all(pairs[key] == every["judge_comparison"][skill][key] for key in pairs)
    assert sum(map(len, every["judge_comparison"].values())) == 2 * 15
    # and everything else is the same report
    for key in ("agreement", "correlation", "leaderboard"):
        assert default[key] == every[key]


def test_pairs_asked_for_are_compared_on_every_skill():
    human, judge = many_judges()
    report = build_report(human, judge, resamples=100, compare=[("j5", "j4"), ("j4", "j5")])
    assert report["judge_comparison_pairs"]["extra"] == [["j4", "j5"]]
    every = build_report(human, judge, resamples=100, compare_all=True)
    for skill in ("Factuality", "Readability"):
        assert (
            report["judge_comparison"][skill]["j4 vs j5"]
            == (every["judge_comparison"][skill]["j4 vs j5"])
        )


def test_a_pair_equals_paired_difference_on_the_same_responses():
    # the comparison taken from the judges' own resampled Pearsons is paired_difference's
    human, judge = many_judges(items=40, systems=8)
    report = build_report(human, judge, resamples=150, compare_all=True)
    means = {s: human_means([r for r in human if r[3] == s]) for s in ("Factuality",)}
    scored = {
        name: {r[0]: r[5] for r in judge if r[3] == "Factuality" and r[4] == name}
        for name in JUDGES
    }
    for key, got in report["judge_comparison"]["Factuality"].items():
        a, b = key.split(" vs ")
        m = means["Factuality"]
        shared = sorted(set(m) & set(scored[a]) & set(scored[b]))
        expected = bootstrap.paired_difference(
            [m[r][2] for r in shared],
            [scored[a][r] for r in shared],
            [scored[b][r] for r in shared],
            [m[r][0] for r in shared],
            resamples=150,
        )
        # and the pair says whether it rests on too few responses (docs/SMALL_SAMPLES.md)
        assert got == {"n": len(shared), **expected, "too_few": {}}


def test_the_command_compares_the_pairs_asked_for(scored_project):  # noqa: F811
    # given a second judge on the project's dataset
    with FakeOpenAIServer(style="json") as server:
        judge = llm_judge(scored_project, server, name="bleu")
        run = running(
            judge_run_create(judge=judge, dataset=Dataset.objects.get(project=scored_project))
        )
        for rid in response_ids(run):
            judge_response(run_id=run.pk, response_id=rid)
    out, err = StringIO(), StringIO()
    args = ["analytics_report", "--project", scored_project.slug, "--resamples", "50"]
    call_command(*args, "--compare", "rouge", "nobody", stdout=out, stderr=err)
    report = json.loads(out.getvalue())
    assert report["judge_comparison_pairs"]["extra"] == [["nobody", "rouge"]]
    assert "no judge named 'nobody'" in err.getvalue()
    out = StringIO()
    call_command(*args, "--compare-all", stdout=out)
    assert json.loads(out.getvalue())["judge_comparison_pairs"]["mode"] == "all"
