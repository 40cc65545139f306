"""Pairwise judging against the project's OpenAI-compatible server on 127.0.0.1: every other
model's response is compared with the anchor model's response to the same item, in both
orders; verdicts are stored as challenger/anchor; position-inconsistent verdicts are
reported. The server's verdicts are a known function of the pair (and, with
position_bias, of the position), so every count below is checked against it."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from devtools.openai_server import FakeOpenAIServer, expected_pair_choices
from judging.models import JudgeKind, JudgeRun, JudgmentStatus, PairJudgment, RunStatus
from judging.prompts import pairwise
from judging.selectors import pairwise_report, run_problem_list
from judging.services import judge_config_create, judge_response, judge_run_create
from tests.annotation.test_assignments import make_dataset
from tests.judging.test_runs import llm_judge, running

MODELS = ("m1", "m2", "m3")


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path, items=4, models=MODELS)


def _run_all(run):
    from annotation.selectors import pair_challenger_ids

    for rid in pair_challenger_ids(dataset_id=run.dataset_id, anchor_model=run.pairwise_against):
        judge_response(run_id=run.pk, response_id=rid)
    run.refresh_from_db()
    return run


def _expected(judgment: PairJudgment, bias: float) -> dict[str, str]:
    prompt = judgment.request["messages"][-1]["content"]
    from devtools.openai_server import detect_skills

    choices = expected_pair_choices(prompt, detect_skills(prompt), bias)
    return pairwise.to_verdicts(choices, judgment.order)


@pytest.mark.parametrize("bias", [0.0, 0.6])
def test_both_orders_are_asked_and_stored_as_challenger_or_anchor(project, dataset, bias):
    with FakeOpenAIServer(style="json", position_bias=bias) as server:
        judge = llm_judge(project, server)
        run = running(judge_run_create(judge=judge, dataset=dataset, pairwise_against="m1"))
        assert run.total == 4 * 2 * 2  # 4 items x 2 challengers x 2 orders
        _run_all(run)
        _run_all(run)  # redelivered tasks change nothing
    assert run.status == RunStatus.DONE and run.done == 16
    judgments = list(PairJudgment.objects.filter(run=run).select_related("response", "anchor"))
    assert len(judgments) == 16
    for j in judgments:
        assert j.anchor.model_name == "m1" and j.response.model_name in ("m2", "m3")
        assert j.anchor.item_id == j.response.item_id
        assert j.status == JudgmentStatus.OK
        assert j.verdicts == _expected(j, bias)
        content = j.request["messages"][-1]["content"]
        first = content.split(pairwise.FIRST_MARK)[1].split(pairwise.FIRST_END)[0].strip()
        assert first == (j.response.text if j.order == 0 else j.anchor.text)


def test_the_report_counts_position_inconsistency_and_outcomes(project, dataset):
    with FakeOpenAIServer(style="python_dict", position_bias=0.5) as server:
        run = _run_all(
            running(
                judge_run_create(
                    judge=llm_judge(project, server), dataset=dataset, pairwise_against="m1"
                )
            )
        )
    report = pairwise_report(run=run)
    assert report.anchor_model == "m1" and report.rows[-1].name == pairwise.OVERALL
    by_pair: dict[int, dict[int, dict]] = {}
    for j in PairJudgment.objects.filter(run=run):
        by_pair.setdefault(j.response_id, {})[j.order] = _expected(j, 0.5)
    for row in report.rows:
        both = [(p[0][row.name], p[1][row.name]) for p in by_pair.values() if row.name in p[0]]
        agree = [a for a, b in both if a == b]
        assert row.pairs == len(both) == 8
        assert row.consistent == len(agree)
        assert row.challenger_wins == agree.count("challenger")
        assert row.anchor_wins == agree.count("anchor")
        assert row.ties == agree.count("tie")
    # a judge that often picks "Response 1" whatever it is: the report must show it
    overall = report.rows[-1]
    total_inconsistent = sum(r.inconsistent for r in report.rows)
    assert total_inconsistent > 0
    assert overall.first_position_share is None or overall.first_position_share >= 0.5
    assert [m for m, _ in report.by_model] == ["m2", "m3"]
    assert sum(r.pairs for _, r in report.by_model) == overall.pairs


def test_an_unbiased_judge_is_position_consistent(project, dataset):
    with FakeOpenAIServer(style="lines") as server:
        run = _run_all(
            running(
                judge_run_create(
                    judge=llm_judge(project, server), dataset=dataset, pairwise_against="m2"
                )
            )
        )
    for row in pairwise_report(run=run).rows:
        assert row.pairs == 8 and row.inconsistent == 0


def test_pairwise_needs_an_llm_judge_and_a_model_of_the_dataset(project, dataset):
    baseline = judge_config_create(
        project=project, name="b", kind=JudgeKind.BASELINE, baseline="rouge-l"
    )
    with pytest.raises(ValidationError, match="only an LLM judge"):
        judge_run_create(judge=baseline, dataset=dataset, pairwise_against="m1")
    with FakeOpenAIServer() as server:
        judge = llm_judge(project, server)
    with pytest.raises(ValidationError, match="no responses of model 'nope'"):
        judge_run_create(judge=judge, dataset=dataset, pairwise_against="nope")
    assert not JudgeRun.objects.exists()


def test_an_unreadable_verdict_is_kept_raw(project, dataset):
    with FakeOpenAIServer(style="json", faults={"garbage": 1.0}) as server:
        run = _run_all(
            running(
                judge_run_create(
                    judge=llm_judge(project, server), dataset=dataset, pairwise_against="m1"
                )
            )
        )
    judgment = PairJudgment.objects.filter(run=run).first()
    assert judgment.status == JudgmentStatus.PARSE_FAILED and judgment.raw_output
    assert judgment.verdicts == {} and run.parse_failed == 16
    problems = run_problem_list(run=run)
    assert len(problems) == 16 and all(p["pair"] and p["raw_output"] for p in problems)


def test_the_run_page_and_api_show_the_report(project, dataset, researcher, researcher_client):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    with FakeOpenAIServer(style="json", position_bias=0.5) as server:
        run = _run_all(
            running(
                judge_run_create(
                    judge=llm_judge(project, server), dataset=dataset, pairwise_against="m1"
                )
            )
        )
    html = researcher_client.get(reverse("judging:run-detail", args=[run.pk])).content.decode()
    assert 'id="run-pairwise"' in html and "position" in html.lower()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=researcher).key)
    body = client.get(f"/api/v1/judging/runs/{run.pk}/pairwise/").json()
    report = pairwise_report(run=run)
    assert body["anchor_model"] == "m1"
    assert [r["name"] for r in body["rows"]] == [r.name for r in report.rows]
    assert [r["inconsistent"] for r in body["rows"]] == [r.inconsistent for r in report.rows]


def test_a_pairwise_run_is_created_from_the_api_and_the_form(
    project, dataset, researcher, researcher_client
):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    with FakeOpenAIServer() as server:
        judge = llm_judge(project, server)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=researcher).key)
        url = f"/api/v1/judging/judges/{judge.pk}/runs/create/"
        bad = client.post(url, {"dataset": dataset.pk, "pairwise_against": "zz"}, format="json")
        assert bad.status_code == 400 and "zz" in str(bad.json())
        made = client.post(url, {"dataset": dataset.pk, "pairwise_against": "m3"}, format="json")
        assert made.status_code == 201
        run = JudgeRun.objects.get(pk=made.json()["id"])
        assert run.pairwise_against == "m3" and run.total == 16
        form_url = reverse("judging:run-create", args=[judge.pk])
        page = researcher_client.get(form_url, {"dataset": dataset.pk, "pairwise_against": "m3"})
        assert page.status_code == 200 and "Pairwise against model" in page.content.decode()
        posted = researcher_client.post(form_url, {"dataset": dataset.pk, "pairwise_against": "m2"})
        assert posted.status_code in (302, 200)
        assert JudgeRun.objects.filter(pairwise_against="m2", total=16).exists()


def test_a_finished_pairwise_runs_counts_split_its_pair_judgments(
    project, dataset, researcher, researcher_client
):
    """The run page and API split a pairwise run's finished judgments into ok, partial,
    not parseable and failed from its pair judgments (they once read the pointwise
    judgments: "ok 0 partial 0" beside "16 of 16")."""
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    from judging.selectors import run_progress

    with FakeOpenAIServer(style="json", faults={"garbage": 0.25}, fault_seed=3) as server:
        run = _run_all(
            running(
                judge_run_create(
                    judge=llm_judge(project, server), dataset=dataset, pairwise_against="m1"
                )
            )
        )
    statuses = list(PairJudgment.objects.filter(run=run).values_list("status", flat=True))
    ok = statuses.count(JudgmentStatus.OK)
    assert 0 < ok < 16 and statuses.count(JudgmentStatus.PARSE_FAILED) == 16 - ok
    progress = run_progress(run=run)
    assert (progress.ok, progress.partial, progress.parse_failed) == (ok, 0, 16 - ok)
    assert progress.ok + progress.partial + progress.parse_failed + progress.failed == 16
    html = researcher_client.get(reverse("judging:run-detail", args=[run.pk])).content.decode()
    assert f"ok {ok}<" in html and f"parse failed {16 - ok}<" in html
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=researcher).key)
    body = client.get(f"/api/v1/judging/runs/{run.pk}/").json()
    found = body.get("progress", body)
    assert (found["ok"], found["parse_failed"]) == (ok, 16 - ok)
