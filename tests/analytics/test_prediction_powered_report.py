"""The report's prediction-powered rows (analytics/report/prediction_powered.py): from
hand-made report rows, each row equals analytics.ppi on the same arrays and the reference
implementation `ppi_python`; N/A, several annotators, the active method, differences, ranks
and the small-sample flags; on random reports, every row equals `ppi.ppi_mean` /
`ppi.active_mean` computed one at a time; and one project end to end through the report
and its API."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from types import ModuleType

import numpy as np
import pytest

from analytics import ppi
from analytics.report.prediction_powered import ALL_PAIRS_UP_TO, prediction_powered
from analytics.rows import Row

SKILL = "Readability"


@pytest.fixture(scope="module")
def ppi_py() -> ModuleType:
    return pytest.importorskip("ppi_py")


def _report(
    rng: np.random.Generator,
    *,
    items: int = 40,
    systems: dict[str, float] | None = None,
    labeled: float = 0.4,
    judges: tuple[str, ...] = ("J",),
    skills: tuple[str, ...] = (SKILL,),
) -> tuple[list[Row], list[Row]]:
    """Human and judge rows: per item, one response per system (id item * 100 + k); people
    (two annotators, 1-5) score a share `labeled` of the responses, each judge all of them
    (its own bias and noise)."""
    systems = systems or {"a": 3.4, "b": 2.9}
    human: list[Row] = []
    judge: list[Row] = []
    for item in range(1, items + 1):
        difficulty = rng.normal(0, 0.5)
        for k, (system, level) in enumerate(sorted(systems.items())):
            rid = item * 100 + k
            for skill in skills:
                quality = level + difficulty + rng.normal(0, 0.7)
                if rng.random() < labeled:
                    for rater in ("ann", "bob"):
                        score = int(np.clip(np.rint(quality + rng.normal(0, 0.6)), 1, 5))
                        human.append((rid, item, system, skill, rater, score))
                for j, name in enumerate(judges):
                    value = float(np.clip(quality + 0.3 * j + rng.normal(0, 0.5), 1, 5))
                    judge.append((rid, item, system, skill, name, value))
    return human, judge


def _arrays(
    human: list[Row], judge: list[Row], name: str, skill: str, system: str | None
) -> tuple[list[float], list[float], list[float], int]:
    """(Y, Yhat of the labeled responses, Yhat of the unlabeled ones, human-N/A count) of a
    row, the plain way: a response's Y is the mean of its non-N/A human scores."""
    scores: dict[int, list[float]] = defaultdict(list)
    with_rows = set()
    for rid, _item, _system, s, _rater, value in human:
        if s == skill:
            with_rows.add(rid)
            if value is not None:
                scores[rid].append(value)
    y, yhat, unlabeled, na = [], [], [], 0
    for rid, _item, sys_, s, rater, value in judge:
        if rater != name or s != skill or value is None or system not in (None, sys_):
            continue
        if scores.get(rid):
            y.append(sum(scores[rid]) / len(scores[rid]))
            yhat.append(value)
        elif rid in with_rows:
            na += 1
        else:
            unlabeled.append(value)
    return y, yhat, unlabeled, na


def _row(found: dict, judge: str, skill: str, system: str | None) -> dict:
    [row] = [
        r
        for r in found["prediction_powered"]
        if (r["judge"], r["skill"], r["system"]) == (judge, skill, system)
    ]
    return row


FIELDS = {
    "estimate": "estimate",
    "ci_low": "ci_low",
    "ci_high": "ci_high",
    "se": "se",
    "human_only_estimate": "human_only_estimate",
    "human_only_ci_low": "human_only_ci_low",
    "human_only_ci_high": "human_only_ci_high",
    "lambda": "lam",
    "effective_n": "effective_n",
}


def _assert_equals_ppi_mean(row: dict, expected: ppi.MeanEstimate, tolerance: float) -> None:
    for key, attribute in FIELDS.items():
        want = getattr(expected, attribute)
        if want is None:
            assert row.get(key) is None, key
        else:
            assert row[key] == pytest.approx(want, rel=tolerance, abs=tolerance), key
    assert row["n_labeled"] == expected.n_labeled
    assert row["n_unlabeled"] == expected.n_unlabeled


def test_a_row_equals_ppi_mean_and_ppi_python(ppi_py: ModuleType) -> None:
    human, judge = _report(np.random.default_rng(1))
    found = prediction_powered(human, judge)
    json.dumps(found, allow_nan=False)
    for system in (None, "a", "b"):
        row = _row(found, "J", SKILL, system)
        y, yhat, unlabeled, _na = _arrays(human, judge, "J", SKILL, system)
        assert row["method"] == "ppi++" and row["n_labeled"] >= 10 and row["too_few"] is None
        _assert_equals_ppi_mean(row, ppi.ppi_mean(y, yhat, unlabeled), 1e-12)
        y, yhat, unlabeled = np.array(y), np.array(yhat), np.array(unlabeled)
        estimate = ppi_py.ppi_mean_pointestimate(y, yhat, unlabeled, lam=None)
        low, high = ppi_py.ppi_mean_ci(y, yhat, unlabeled, alpha=0.05, lam=None)
        human_low, human_high = ppi_py.classical_mean_ci(y, alpha=0.05)
        assert row["estimate"] == pytest.approx(float(np.squeeze(estimate)), abs=1e-9)
        assert row["ci_low"] == pytest.approx(float(np.squeeze(low)), abs=1e-9)
        assert row["ci_high"] == pytest.approx(float(np.squeeze(high)), abs=1e-9)
        assert row["human_only_estimate"] == pytest.approx(float(y.mean()), abs=1e-9)
        assert row["human_only_ci_low"] == pytest.approx(float(human_low), abs=1e-9)
        assert row["human_only_ci_high"] == pytest.approx(float(human_high), abs=1e-9)
        assert row["judge_mean"] == pytest.approx(float(np.r_[yhat, unlabeled].mean()))
        width = (row["ci_high"] - row["ci_low"]) / (human_high - human_low)
        assert row["width_ratio"] == pytest.approx(float(width))
    # sorted: all systems first, then by name
    assert [r["system"] for r in found["prediction_powered"]] == [None, "a", "b"]


def test_na_is_left_out_and_three_annotators_give_their_mean() -> None:
    human, judge = _report(np.random.default_rng(2), labeled=0.5)
    # response 100 (item 1, system a): a third annotator, so Y = the mean of three
    human = [r for r in human if r[0] != 100] + [
        (100, 1, "a", SKILL, "ann", 5),
        (100, 1, "a", SKILL, "bob", 4),
        (100, 1, "a", SKILL, "cy", 2),
    ]
    # response 200 (item 2, system a): every person said N/A
    human = [r for r in human if r[0] != 200] + [
        (200, 2, "a", SKILL, "ann", None),
        (200, 2, "a", SKILL, "bob", None),
    ]
    # response 300 (item 3, system a): the judge said N/A
    judge = [(*r[:5], None) if r[0] == 300 else r for r in judge]
    found = prediction_powered(human, judge)
    row = _row(found, "J", SKILL, "a")
    assert row["n_human_na"] == 1 and _row(found, "J", SKILL, None)["n_human_na"] == 1
    assert _row(found, "J", SKILL, "b")["n_human_na"] == 0
    y, yhat, unlabeled, na = _arrays(human, judge, "J", SKILL, "a")
    assert na == 1
    assert 11 / 3 in y  # response 100's Y
    _assert_equals_ppi_mean(row, ppi.ppi_mean(y, yhat, unlabeled), 1e-12)
    # neither the judge's N/A (300) nor the people's (200) is in the counts
    responses = {r[0] for r in judge if r[2] == "a"}
    assert row["n_labeled"] + row["n_unlabeled"] == len(responses) - 2


def test_differences_equal_ppi_python_on_the_per_item_differences(ppi_py: ModuleType) -> None:
    human, judge = _report(
        np.random.default_rng(3), items=60, systems={"a": 3.5, "b": 3.0}, labeled=0.6
    )
    judge = [r for r in judge if r[0] != 500]  # item 5: system a not judged
    found = prediction_powered(human, judge)
    [diff] = found["prediction_powered_differences"]
    assert (diff["system_a"], diff["system_b"], diff["method"]) == ("a", "b", "ppi++")
    y = {r[0]: [] for r in human}
    for r in human:
        y[r[0]].append(r[5])
    yhat = {r[0]: r[5] for r in judge}
    d, dhat, dhat_u = [], [], []
    for item in range(1, 61):
        a, b = item * 100, item * 100 + 1
        if a not in yhat or b not in yhat:
            continue
        if a in y and b in y:
            d.append(np.mean(y[a]) - np.mean(y[b]))
            dhat.append(yhat[a] - yhat[b])
        else:
            dhat_u.append(yhat[a] - yhat[b])
    d_, dhat_, dhat_u_ = np.array(d), np.array(dhat), np.array(dhat_u)
    estimate = ppi_py.ppi_mean_pointestimate(d_, dhat_, dhat_u_, lam=None)
    low, high = ppi_py.ppi_mean_ci(d_, dhat_, dhat_u_, alpha=0.05, lam=None)
    assert diff["estimate"] == pytest.approx(float(np.squeeze(estimate)), abs=1e-9)
    assert diff["ci_low"] == pytest.approx(float(np.squeeze(low)), abs=1e-9)
    assert diff["ci_high"] == pytest.approx(float(np.squeeze(high)), abs=1e-9)
    assert diff["n_labeled"] == len(d) and diff["n_unlabeled"] == len(dhat_u)
    expected = ppi.ppi_mean(d, dhat, dhat_u)
    assert diff["human_only_estimate"] == pytest.approx(expected.human_only_estimate, abs=1e-12)
    assert diff["effective_n"] == pytest.approx(expected.effective_n, rel=1e-12)
    assert "se" not in diff and diff["too_few"] is None


def test_ranks_put_the_clearly_best_system_first() -> None:
    systems = {"best": 4.6, "mid": 2.9, "low": 2.7}
    human, judge = _report(np.random.default_rng(4), items=50, systems=systems)
    found = prediction_powered(human, judge, draws=2000)
    [ranks] = found["prediction_powered_ranks"]
    assert ranks["n_draws"] == 2000 and ranks["differences"] == "all" and ranks["left_out"] == []
    listed = ranks["systems"]
    assert [s["system"] for s in listed][0] == "best"
    assert [s["rank"] for s in listed] == [1, 2, 3]
    assert listed[0]["rank_probabilities"][0] > 0.95
    assert listed[0]["rank_low"] == listed[0]["rank_high"] == 1
    table = np.array([s["rank_probabilities"] for s in listed])
    assert table.sum(axis=1) == pytest.approx(np.ones(3))
    assert table.sum(axis=0) == pytest.approx(np.ones(3))
    for s in listed:
        assert s["estimate"] == _row(found, "J", SKILL, s["system"])["estimate"]
    assert len(found["prediction_powered_differences"]) == 3  # every pair of 3


def test_the_rank_covariance_sums_the_influences_by_item() -> None:
    human, judge = _report(np.random.default_rng(5), items=30, systems={"a": 3.0, "b": 3.1})
    found = prediction_powered(human, judge, draws=500, seed=7)
    [ranks] = found["prediction_powered_ranks"]
    shares: dict[str, dict[int, float]] = {}
    estimates = []
    for system in ("a", "b"):
        y, yhat, unlabeled, _ = _arrays(human, judge, "J", SKILL, system)
        row = _row(found, "J", SKILL, system)
        estimates.append(row["estimate"])
        psi, psi_u = ppi.ppi_influence(y, yhat, unlabeled, row["lambda"])
        labeled_items = [
            r[1]
            for r in judge
            if r[2] == system and any(h[0] == r[0] for h in human) and r[5] is not None
        ]
        unlabeled_items = [
            r[1] for r in judge if r[2] == system and not any(h[0] == r[0] for h in human)
        ]
        by_item: dict[int, float] = defaultdict(float)
        for item, share in zip(labeled_items + unlabeled_items, np.r_[psi, psi_u], strict=True):
            by_item[item] += share
        shares[system] = by_item
    items = sorted(set(shares["a"]) | set(shares["b"]))
    matrix = np.array([[shares[s].get(i, 0.0) for i in items] for s in ("a", "b")])
    expected = ppi.rank_probabilities(estimates, matrix @ matrix.T, draws=500, seed=7)
    by_system = {s["system"]: s for s in ranks["systems"]}
    for k, system in enumerate(("a", "b")):
        assert by_system[system]["rank_probabilities"] == pytest.approx(
            expected.probabilities[k], abs=1e-12
        )
    # a system's variance in the matrix is its own se^2 (one response per item)
    assert (matrix[0] ** 2).sum() == pytest.approx(_row(found, "J", SKILL, "a")["se"] ** 2)


def test_too_few_labels_are_flagged() -> None:
    rng = np.random.default_rng(6)
    human, judge = _report(rng, items=30, labeled=0.0)
    # system a: 9 labeled responses, system b: 10
    for system, count in (("a", 9), ("b", 10)):
        chosen = sorted({r[0] for r in judge if r[2] == system})[:count]
        human += [(rid, rid // 100, system, SKILL, "ann", 3 + rid % 2) for rid in chosen]
    found = prediction_powered(human, judge)
    assert _row(found, "J", SKILL, "a")["too_few"] == (
        "too few: n = 9 (at least 10 labeled responses)"
    )
    assert _row(found, "J", SKILL, "b")["too_few"] is None
    assert _row(found, "J", SKILL, None)["too_few"] is None
    [diff] = found["prediction_powered_differences"]
    assert diff["n_labeled"] == 9  # the first 9 items have both labeled
    assert diff["too_few"] == "too few: n = 9 (at least 10 labeled items)"
    # no labels at all: no estimate, no interval, and nothing that is not JSON
    bare = prediction_powered([], judge)
    row = _row(bare, "J", SKILL, "a")
    assert row["estimate"] is None and row["ci_low"] is None and row["width_ratio"] is None
    assert row["n_labeled"] == 0 and row["n_unlabeled"] == 30
    assert row["judge_mean"] is not None
    [ranks] = bare["prediction_powered_ranks"]
    assert ranks["systems"] == [] and ranks["left_out"] == ["a", "b"]
    json.dumps(bare, allow_nan=False)


def test_the_active_method_uses_the_sampling_design() -> None:
    rng = np.random.default_rng(8)
    human, judge = _report(rng, items=60, labeled=1.0)  # people could score any response
    rids_a = sorted({r[0] for r in judge if r[2] == "a"})
    pi = {rid: float(rng.uniform(0.2, 0.9)) for rid in rids_a}
    drawn = {rid: bool(rng.random() < pi[rid]) for rid in rids_a}
    design = {rid: (pi[rid], drawn[rid]) for rid in rids_a}
    # the people's scores of responses not drawn exist (another campaign), and are not used
    found = prediction_powered(human, judge, design=design)
    row = _row(found, "J", SKILL, "a")
    assert row["method"] == "active"
    assert _row(found, "J", SKILL, "b")["method"] == "ppi++"
    assert _row(found, "J", SKILL, "b")["n_outside_frame"] == 0
    # all systems together: a's labels were drawn with unequal probabilities, so the row is
    # active over the frame (a's responses) and b's responses, outside it, are left out
    together = _row(found, "J", SKILL, None)
    assert together["method"] == "active"
    assert together["n_outside_frame"] == len({r[0] for r in judge if r[2] == "b"}) > 0
    assert together["estimate"] == pytest.approx(row["estimate"], abs=1e-12)
    assert row["n_outside_frame"] == 0
    yhat = {r[0]: r[5] for r in judge}
    y: dict[int, list[int]] = defaultdict(list)
    for r in human:
        y[r[0]].append(r[5])
    args = (
        [yhat[rid] for rid in rids_a],
        [pi[rid] for rid in rids_a],
        [drawn[rid] for rid in rids_a],
        [np.mean(y[rid]) for rid in rids_a],
    )
    expected = ppi.active_mean(*args)
    people = ppi.active_mean(*args, lam=0.0)
    for key, value in (
        ("estimate", expected.estimate),
        ("ci_low", expected.ci_low),
        ("ci_high", expected.ci_high),
        ("se", expected.se),
        ("lambda", expected.lam),
        ("human_only_estimate", people.estimate),
        ("human_only_ci_low", people.ci_low),
        ("human_only_ci_high", people.ci_high),
    ):
        assert row[key] == pytest.approx(value, abs=1e-12), key
    assert row["n_labeled"] == expected.n_labeled == sum(drawn.values())
    assert row["n_unlabeled"] == expected.n_frame - expected.n_labeled
    assert row["effective_n"] > 0
    # the errors' shares the ranks sum by item: their squares sum to se^2
    from analytics.report import prediction_powered as module

    figures = module._Figures.empty(1, np.array([True]), 1.96)
    segment = np.zeros(len(rids_a), np.int64)
    shares = module._active_many(
        segment,
        *(np.array(a) for a in args[:2]),
        np.array(args[2]),
        np.array(args[3]),
        figures,
        0.05,
    )
    assert float((shares**2).sum()) == pytest.approx(expected.se**2, rel=1e-12)
    assert figures.estimate[0] == pytest.approx(expected.estimate, abs=1e-12)
    # the whole project in the frame: every row is active
    everything = {r[0]: (0.5, r[0] % 2 == 0) for r in judge}
    found = prediction_powered(human, judge, design=everything)
    assert {r["method"] for r in found["prediction_powered"]} == {"active"}


def test_many_systems_compare_neighbours_only() -> None:
    systems = {f"s{k:02d}": 2.0 + 0.15 * k for k in range(ALL_PAIRS_UP_TO + 1)}
    human, judge = _report(np.random.default_rng(9), items=30, systems=systems)
    found = prediction_powered(human, judge, draws=200)
    [ranks] = found["prediction_powered_ranks"]
    assert ranks["differences"] == "adjacent"
    diffs = found["prediction_powered_differences"]
    assert len(diffs) == ALL_PAIRS_UP_TO
    order = [s["system"] for s in ranks["systems"]]
    assert [(d["system_a"], d["system_b"]) for d in diffs] == list(itertools.pairwise(order))
    # with 12 systems, every pair
    fewer = {k: v for k, v in systems.items() if k != "s00"}
    human, judge = _report(np.random.default_rng(9), items=10, systems=fewer)
    found = prediction_powered(human, judge, draws=200)
    assert len(found["prediction_powered_differences"]) == 66
    assert found["prediction_powered_ranks"][0]["differences"] == "all"


def test_every_row_of_random_reports_equals_ppi_one_at_a_time() -> None:
    """Random reports (several judges and skills, N/A on both sides, a judge that scored a
    response twice, responses without a judge score, part of the project in a frame): every
    row equals analytics.ppi's function on that row's arrays."""
    for seed in range(6):
        rng = np.random.default_rng(100 + seed)
        systems = {name: float(rng.uniform(2, 4)) for name in ("x", "y", "z")[: 2 + seed % 2]}
        human, judge = _report(
            rng,
            items=int(rng.integers(5, 40)),
            systems=systems,
            labeled=float(rng.uniform(0.05, 0.9)),
            judges=("J1", "J2"),
            skills=("S1", "S2"),
        )
        human = [(*r[:5], None) if rng.random() < 0.1 else r for r in human]
        judge = [(*r[:5], None) if rng.random() < 0.05 else r for r in judge]
        judge = [r for r in judge if rng.random() > 0.05]
        if judge:  # a second score of one response: the mean counts
            first = judge[0]
            judge.append((*first[:5], 1.0 if first[5] is None else first[5] + 1.0))
        design = None
        if seed % 3 == 2:
            design = {
                r[0]: (float(rng.uniform(0.3, 1.0)), bool(rng.random() < 0.5))
                for r in judge
                if r[2] == "x"
            }
        found = prediction_powered(human, judge, design=design)
        json.dumps(found, allow_nan=False)
        deduplicated = _deduplicated(judge)
        for row in found["prediction_powered"]:
            where = (row["judge"], row["skill"], row["system"])
            if row["method"] == "active":
                assert design is not None and row["system"] in ("x", None)
                frame = _frame_arrays(human, deduplicated, design, *where)
                active = ppi.active_mean(*frame)
                people = ppi.active_mean(*frame, lam=0.0)
                assert row["estimate"] == pytest.approx(active.estimate, abs=1e-11)
                assert row["se"] == pytest.approx(active.se, abs=1e-11)
                assert row["lambda"] == pytest.approx(active.lam, abs=1e-11)
                assert row["human_only_estimate"] == pytest.approx(people.estimate, abs=1e-11)
                assert row["human_only_ci_high"] == pytest.approx(people.ci_high, abs=1e-11)
                assert row["n_labeled"] == active.n_labeled
                assert row["n_unlabeled"] == active.n_frame - active.n_labeled
                continue
            y, yhat, unlabeled, na = _arrays(human, deduplicated, *where)
            expected = ppi.ppi_mean(y, yhat, unlabeled)
            _assert_equals_ppi_mean(row, expected, 1e-11)
            assert row["n_human_na"] == na
            too_few = row["too_few"] is not None
            assert too_few == (row["n_labeled"] < 10)


def _frame_arrays(
    human: list[Row],
    judge: list[Row],
    design: dict[int, tuple[float, bool]],
    name: str,
    skill: str,
    system: str | None,
) -> tuple[list[float], list[float], list[bool], list[float]]:
    """`ppi.active_mean`'s (yhat, pi, labeled, y) of an active row, the plain way: the
    judge's scored responses of the row but the human-N/A ones; labeled = drawn and with
    a Y."""
    scores: dict[int, list[float]] = defaultdict(list)
    with_rows = set()
    for rid, _item, _system, s, _rater, value in human:
        if s == skill:
            with_rows.add(rid)
            if value is not None:
                scores[rid].append(value)
    yhat, pi, labeled, y = [], [], [], []
    for rid, _item, sys_, s, rater, value in judge:
        if rater != name or s != skill or value is None or system not in (None, sys_):
            continue
        if rid in with_rows and not scores.get(rid):
            continue
        if rid not in design:  # outside the frame: left out of an active row
            continue
        known = bool(scores.get(rid)) and design[rid][1]
        yhat.append(value)
        pi.append(design[rid][0])
        labeled.append(known)
        y.append(sum(scores[rid]) / len(scores[rid]) if known else 0.0)
    return yhat, pi, labeled, y


def _deduplicated(judge: list[Row]) -> list[Row]:
    """A judge's two scores of one (response, skill) as one row with their mean (None
    left out)."""
    values: dict[tuple, list[float]] = defaultdict(list)
    heads: dict[tuple, Row] = {}
    for r in judge:
        key = (r[0], r[3], r[4])
        heads.setdefault(key, r)
        if r[5] is not None:
            values[key].append(r[5])
    return [
        (*head[:5], (sum(values[k]) / len(values[k])) if values[k] else None)
        for k, head in heads.items()
    ]


def test_skills_narrow_the_rows_and_order_them() -> None:
    human, judge = _report(np.random.default_rng(10), skills=("S1", "S2", "S3"), judges=("J", "K"))
    found = prediction_powered(human, judge, skills=["S3", "S1"])
    keys = [(r["judge"], r["skill"]) for r in found["prediction_powered"]]
    assert list(dict.fromkeys(keys)) == [("J", "S3"), ("J", "S1"), ("K", "S3"), ("K", "S1")]
    empty = {
        "prediction_powered": [],
        "prediction_powered_differences": [],
        "prediction_powered_ranks": [],
    }
    assert prediction_powered([], []) == prediction_powered(human, []) == empty
    only_na = [(*r[:5], None) for r in judge]
    assert prediction_powered(human, only_na) == empty
    with pytest.raises(ValueError, match="alpha"):
        prediction_powered(human, judge, alpha=1.5)


# --- the project report and its API ---------------------------------------------------------


def test_the_project_report_and_its_api_carry_the_rows(project, researcher) -> None:
    from analytics.imports.services import scores_import
    from analytics.report.selectors import project_report
    from analytics.selectors import report_rows
    from tests.analytics.snapshot_worker import report_via_api
    from tests.clients import token_client

    rng = np.random.default_rng(11)
    lines = ["item,system,rater,rater_kind,skill,score"]
    for item in range(1, 15):
        for system, level in (("a", 4), ("b", 2)):
            quality = level + int(rng.integers(-1, 2))
            if item <= 11:  # items 12-14 are unlabeled
                lines.append(f"q{item},{system},p1,human,{SKILL},{quality}")
                lines.append(f"q{item},{system},p2,human,{SKILL},{max(1, quality - 1)}")
            lines.append(f"q{item},{system},J,judge,{SKILL},{min(5, quality + 1)}")
    scores_import(project_slug=project.slug, files=[("scores.csv", "\n".join(lines).encode())])
    report = project_report(project=project, resamples=0, with_breakdowns=False)
    rows = report_rows(project=project)
    assert {k: report[k] for k in _KEYS} == prediction_powered(rows.human, rows.judge)
    assert [(r["system"], r["n_labeled"], r["n_unlabeled"]) for r in report[_KEYS[0]]] == [
        (None, 22, 6),
        ("a", 11, 3),
        ("b", 11, 3),
    ]
    assert report["prediction_powered_differences"][0]["n_labeled"] == 11
    url = f"/api/v1/projects/{project.slug}/analytics/report"
    served = report_via_api(token_client(researcher), url, {"resamples": 0})
    assert {k: served[k] for k in _KEYS} == {k: report[k] for k in _KEYS}


_KEYS = (
    "prediction_powered",
    "prediction_powered_differences",
    "prediction_powered_ranks",
)
