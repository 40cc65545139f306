"""k samples per judgment (temperature > 0): every sample is stored, and a response's score
on a skill is the mean of its samples with the spread kept, on the run page and in the
API. Driven through the project's OpenAI-compatible server on 127.0.0.1, whose sampled
answers are a known function of (prompt, skill, seed)."""

from __future__ import annotations

import statistics

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from devtools.openai_server import FakeOpenAIServer, expected_scores
from judging import prompts
from judging.models import Judgment, RunStatus
from judging.selectors import run_score_summaries, run_skill_summaries
from judging.services import judge_response, judge_run_create
from tests.judging.test_runs import llm_judge, response_ids, running

K = 3


@pytest.fixture
def server():
    with FakeOpenAIServer(style="python_dict") as srv:
        yield srv


@pytest.fixture
def sampled_run(project, server, tmp_path):
    from tests.annotation.test_assignments import make_dataset

    dataset = make_dataset(project, tmp_path, items=3, models=("m1", "m2"))
    judge = llm_judge(project, server, samples=K, temperature=0.8)
    run = running(judge_run_create(judge=judge, dataset=dataset))
    for rid in response_ids(run):
        judge_response(run_id=run.pk, response_id=rid)
    run.refresh_from_db()
    return run


def _expected(run, response_id) -> dict[str, list]:
    """skill -> the K scores the server gave, recomputed from the prompts it was sent."""
    out: dict[str, list] = {}
    for judgment in Judgment.objects.filter(run=run, response_id=response_id):
        prompt = judgment.request["messages"][-1]["content"]
        skills = prompts.skill_names_from_prompt(prompt)
        want = expected_scores(prompt, skills, seed=judgment.sample_index, temperature=0.8)
        for skill, value in want.items():
            out.setdefault(skill, []).append(None if value == "N/A" else value)
    return out


def test_every_sample_is_kept_and_aggregated_with_its_spread(sampled_run):
    assert sampled_run.status == RunStatus.DONE and sampled_run.total == 6 * K
    assert Judgment.objects.filter(run=sampled_run).count() == 6 * K
    ids = response_ids(sampled_run)
    rows = run_score_summaries(run=sampled_run, response_ids=ids)
    assert len(rows) == 6 * 3  # six responses, three skills each
    seen_spread = False
    for row in rows:
        values = _expected(sampled_run, row.response_id)[row.skill]
        scored = [v for v in values if v is not None]
        assert row.samples == K and row.na == K - len(scored)
        assert row.mean == pytest.approx(sum(scored) / len(scored))
        assert row.median == statistics.median(scored)
        assert (row.low, row.high) == (min(scored), max(scored))
        if len(scored) > 1:
            assert row.stdev == pytest.approx(statistics.stdev(scored))
        seen_spread |= row.spread > 0
    # temperature 0.8 makes the server's samples differ somewhere: the spread is real
    assert seen_spread


def test_the_skill_summary_counts_responses_whose_samples_disagree(sampled_run):
    rows = run_score_summaries(run=sampled_run, response_ids=response_ids(sampled_run))
    for summary in run_skill_summaries(run=sampled_run):
        mine = [r for r in rows if r.skill == summary.skill]
        assert summary.responses == len(mine)
        assert summary.unstable == sum(1 for r in mine if r.spread)
        assert summary.mean == pytest.approx(statistics.mean(r.mean for r in mine))


def test_the_scores_api_pages_by_response_and_the_run_page_shows_the_spread(
    sampled_run, researcher, researcher_client
):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=researcher).key)
    url = f"/api/v1/judging/runs/{sampled_run.pk}/scores/"
    first = client.get(url, {"limit": 4}).json()
    assert len({r["response"] for r in first["results"]}) == 4
    rest = client.get(url, {"limit": 4, "after": first["next_after"]}).json()
    assert rest["next_after"] is None
    got = {(r["response"], r["skill"]): r for r in first["results"] + rest["results"]}
    assert len(got) == 6 * 3
    for (response_id, skill), row in got.items():
        scored = [v for v in _expected(sampled_run, response_id)[skill] if v is not None]
        assert row["mean"] == pytest.approx(sum(scored) / len(scored))
        assert (row["min"], row["max"], row["samples"]) == (min(scored), max(scored), K)
    assert client.get(url, {"limit": 0}).status_code == 400
    page = researcher_client.get(reverse("judging:run-detail", args=[sampled_run.pk]))
    html = page.content.decode()
    assert 'id="run-skills"' in html and "Samples disagree" in html
