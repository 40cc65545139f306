"""A judge's pairwise accuracy on a preference set (judging/preference.py, docs/JUDGING.md
"Accuracy on a preference set"): the docs' example set imported through the dataset import,
a pairwise run against `chosen` on the project's local OpenAI-compatible server, and the
accuracy per subset checked against the server's own verdicts (expected_pair_choices),
counted here by hand. The formulas are checked on hand-made verdicts first."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import UploadSource, UploadStatus
from devtools.openai_server import FakeOpenAIServer, detect_skills, expected_pair_choices
from judging.models import PairJudgment, RunStatus
from judging.preference import Verdict, bootstrap_interval, preference_accuracy
from judging.selectors import preference_accuracy as run_accuracy
from judging.services import judge_response, judge_run_create
from tests.clients import token_client
from tests.judging.test_runs import llm_judge, running

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "preference_set.jsonl"


# --- the formulas, by hand ------------------------------------------------------------------------


def test_accuracy_counts_ties_as_half_per_subset_order_and_overall():
    verdicts = [
        Verdict(1, "A", 0, "anchor"),  # chosen preferred: 1
        Verdict(1, "A", 1, "anchor"),  # 1
        Verdict(2, "A", 0, "tie"),  # 0.5
        Verdict(2, "A", 1, "challenger"),  # rejected preferred: 0
        Verdict(3, "B", 0, "challenger"),  # 0
        Verdict(3, "B", 1, None),  # not read: left out
    ]
    result = preference_accuracy(verdicts, resamples=200)
    a, b = result.subsets
    assert (a.name, a.judgments, a.accuracy) == ("A", 4, 2.5 / 4)
    assert a.accuracy_by_order == (1.5 / 2, 1 / 2)
    assert (a.pairs, a.consistent, a.consistency) == (2, 1, 0.5)
    assert (a.chosen, a.rejected, a.ties, a.unread) == (2, 1, 1, 0)
    assert (b.judgments, b.unread, b.accuracy, b.pairs) == (1, 1, 0.0, 0)
    assert result.overall.accuracy == 2.5 / 5 and result.overall.items == 3
    assert result.macro == (0.625 + 0.0) / 2
    assert preference_accuracy([]) is None


def test_the_bootstrap_interval_of_two_items():
    # items with credits 1 and 0 (one judgment each): a resample draws two items, so its
    # accuracy is 1 (p 1/4), 0.5 (p 1/2) or 0 (p 1/4): the 2.5th and 97.5th percentiles
    # are 0 and 1
    assert bootstrap_interval([1.0, 0.0], [1, 1], resamples=2000) == (0.0, 1.0)
    # every item right: no spread
    assert bootstrap_interval([2.0, 2.0, 1.0], [2, 2, 1]) == (1.0, 1.0)
    assert bootstrap_interval([], []) == (None, None)
    low, high = bootstrap_interval([1.0] * 30 + [0.0] * 10, [1] * 40, seed=3)
    assert low < 0.75 < high and low > 0.5 and high < 0.95


# --- end to end -----------------------------------------------------------------------------------


@pytest.fixture
def preference_set(project):
    upload = dataset_upload_create(
        project=project,
        dataset_name="Preferences",
        source=UploadSource.CLI,
        files=[(FileSpec(EXAMPLE.name), str(EXAMPLE))],
    )
    upload = dataset_import(upload_id=upload.pk)
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    return upload.dataset


def _run(project, dataset, bias: float):
    from annotation.selectors import pair_challenger_ids

    with FakeOpenAIServer(style="json", position_bias=bias) as server:
        run = running(
            judge_run_create(
                judge=llm_judge(project, server), dataset=dataset, pairwise_against="chosen"
            )
        )
        for rid in pair_challenger_ids(dataset_id=dataset.pk, anchor_model="chosen"):
            judge_response(run_id=run.pk, response_id=rid)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.done == 12  # 6 pairs x 2 orders
    return run


def _by_hand(run, bias: float) -> dict[str, list[float]]:
    """subset -> the credit of each (item, order): the server's verdict, read from the
    prompt it was sent, 1 when it named the chosen response, 0.5 for a tie."""
    credits: dict[str, list[float]] = {}
    for j in PairJudgment.objects.filter(run=run).select_related("response__item", "anchor"):
        prompt = j.request["messages"][-1]["content"]
        choice = expected_pair_choices(prompt, detect_skills(prompt), bias)["Overall"]
        chosen_position = "2" if j.order == 0 else "1"  # order 0 shows rejected first
        credit = 0.5 if choice == "tie" else 1.0 if choice == chosen_position else 0.0
        assert j.anchor.model_name == "chosen" and j.response.model_name == "rejected"
        credits.setdefault(j.response.item.metadata["subset"], []).append(credit)
    return credits


@pytest.mark.parametrize("bias", [0.0, 0.5])
def test_accuracy_per_subset_matches_the_servers_verdicts(project, preference_set, bias):
    run = _run(project, preference_set, bias)
    credits = _by_hand(run, bias)
    assert sorted(credits) == ["chat", "reasoning", "safety"]
    result = run_accuracy(run=run)
    assert [r.name for r in result.subsets] == ["chat", "reasoning", "safety"]
    for row in result.subsets:
        mine = credits[row.name]
        assert row.judgments == len(mine) == 4 and row.items == 2
        assert row.accuracy == pytest.approx(sum(mine) / len(mine))
        assert row.low <= row.accuracy <= row.high
    every = [c for values in credits.values() for c in values]
    assert result.overall.accuracy == pytest.approx(sum(every) / len(every))
    assert result.overall.judgments == 12 and result.overall.pairs == 6
    if bias == 0.0:  # the server's unbiased verdicts depend on the pair, not the order
        assert result.overall.consistent == 6


def test_the_run_page_and_api_show_the_accuracy(
    project, preference_set, researcher, annotator, outsider, researcher_client
):
    run = _run(project, preference_set, 0.0)
    html = researcher_client.get(reverse("judging:run-detail", args=[run.pk])).content.decode()
    assert 'id="run-preference-accuracy"' in html and "safety" in html
    url = f"/api/v1/judging/runs/{run.pk}/pairwise/"
    body = token_client(researcher).get(url).json()
    found = body["preference_accuracy"]
    expected = run_accuracy(run=run)
    assert found["overall"]["accuracy"] == pytest.approx(expected.overall.accuracy)
    assert [s["name"] for s in found["subsets"]] == ["chat", "reasoning", "safety"]
    assert found["tie_credit"] == 0.5 and found["resamples"] == 1000
    assert {"anchor_model", "rows", "by_model"} <= set(body)
    assert token_client(annotator).get(url).status_code == 403
    assert token_client(outsider).get(url).status_code == 404


def test_other_pairwise_runs_have_no_accuracy(project, preference_set, tmp_path):
    from tests.annotation.test_assignments import make_dataset

    assert run_accuracy(run=_run(project, preference_set, 0.0)) is not None
    with FakeOpenAIServer() as server:
        judge = llm_judge(project, server, name="other")
    dataset = make_dataset(project, tmp_path, items=1, models=("m1", "m2"))
    run = judge_run_create(judge=judge, dataset=dataset, pairwise_against="m1")
    assert run_accuracy(run=run) is None
