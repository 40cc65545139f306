"""Judge runs against the project's local OpenAI-compatible server (real HTTP on 127.0.0.1):
idempotent judgments, accounting, cache, retries, permanent failures, parse failures,
budget, baselines; and a run end to end through a real Celery worker on Redis."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.selectors import skills_for_response
from devtools.openai_server import FakeOpenAIServer, expected_scores
from judging import prompts
from judging.models import JudgeKind, JudgeRun, JudgeScore, Judgment, JudgmentStatus, RunStatus
from judging.services import (
    judge_batch,
    judge_batch_range,
    judge_config_create,
    judge_response,
    judge_run_create,
    judge_run_set_status,
    judge_run_start,
    prompt_template_create,
)
from tests.annotation.test_assignments import make_dataset
from tests.conftest import wait_for
from tests.judging.providers import llm_fields


@pytest.fixture
def server():
    with FakeOpenAIServer(style="python_dict") as srv:
        yield srv


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path, items=3, models=("m1", "m2"))


def llm_judge(project, server, **extra):
    name = extra.pop("name", "J")
    fields = {
        **llm_fields(server.url, api_key_env=extra.pop("api_key_env", "")),
        "model": "fake-judge",
        "use_reference": False,
    }
    fields.update(extra)
    return judge_config_create(project=project, name=name, kind=JudgeKind.LLM, **fields)


def running(run):
    JudgeRun.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    run.refresh_from_db()
    return run


def response_ids(run):
    return list(run.dataset.items.values_list("responses__pk", flat=True).order_by("responses__pk"))


def test_a_judge_needs_an_endpoint_and_baselines_a_known_metric(project):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="needs a provider"):
        judge_config_create(project=project, name="x", kind=JudgeKind.LLM)
    with pytest.raises(ValidationError, match="baseline must be"):
        judge_config_create(project=project, name="y", kind=JudgeKind.BASELINE, baseline="bleu9")


def test_a_run_scores_every_response_like_the_server_says_and_accounts_for_it(
    project, dataset, server
):
    # given
    judge = llm_judge(project, server)
    run = running(judge_run_create(judge=judge, dataset=dataset))
    assert run.total == 6 and run.estimate["calls"] == 6
    # when
    for rid in response_ids(run):
        judge_response(run_id=run.pk, response_id=rid)
    # then every judgment holds exactly what the server computed from the prompt it got
    run.refresh_from_db()
    assert (run.done, run.failed, run.parse_failed, run.status) == (6, 0, 0, RunStatus.DONE)
    assert run.prompt_tokens > 0 and run.completion_tokens > 0
    for judgment in Judgment.objects.filter(run=run).select_related("response__item"):
        prompt = judgment.request["messages"][-1]["content"]
        skills = [s.name for s in skills_for_response(response=judgment.response, campaign=None)]
        assert prompts.skill_names_from_prompt(prompt) == skills
        want = expected_scores(prompt, skills)
        got = {s.skill.name: s.score for s in JudgeScore.objects.filter(judgment=judgment)}
        assert got == {k: (None if v == "N/A" else v) for k, v in want.items()}
        assert judgment.status == JudgmentStatus.OK and judgment.attempts == 1
        assert "api_key" not in str(judgment.request).lower()
        assert judgment.request["model"] == "fake-judge"


def test_judging_twice_changes_nothing_and_a_rerun_comes_from_the_cache(project, dataset, server):
    judge = llm_judge(project, server)
    run = running(judge_run_create(judge=judge, dataset=dataset))
    for rid in response_ids(run):
        judge_response(run_id=run.pk, response_id=rid)
        judge_response(run_id=run.pk, response_id=rid)  # redelivered
    assert Judgment.objects.filter(run=run).count() == 6
    calls = server.stats()["completions"]
    # a second run of the same judge: identical requests, answered from the cache
    rerun = running(judge_run_create(judge=judge, dataset=dataset))
    for rid in response_ids(rerun):
        judge_response(run_id=rerun.pk, response_id=rid)
    rerun.refresh_from_db()
    assert rerun.cached == 6 and rerun.prompt_tokens == 0 and rerun.cost == 0
    assert server.stats()["completions"] == calls == 6


def test_retryable_errors_are_retried_after_retry_after_then_recorded_as_failed(
    project, dataset, server
):
    # given a server answering 503 with Retry-After: 1 to every call
    server.configure(fail_first=100, fail_first_kind="http_503")
    judge = llm_judge(project, server, max_attempts=2)
    run = running(judge_run_create(judge=judge, dataset=dataset))
    # when one response is judged
    started = time.monotonic()
    judge_response(run_id=run.pk, response_id=response_ids(run)[0])
    # then the second attempt waited for the server's Retry-After, and the last error is kept
    assert time.monotonic() - started >= 0.95
    judgment = Judgment.objects.get(run=run)
    assert judgment.status == JudgmentStatus.FAILED and "503" in judgment.error
    assert judgment.attempts == 2 and server.stats()["requests"] == 2
    assert JudgeRun.objects.get(pk=run.pk).failed == 1


def test_a_retry_that_succeeds_is_recorded_once_with_its_attempts(project, dataset, server):
    server.configure(fail_first=1, fail_first_kind="http_500")
    judge = llm_judge(project, server, max_attempts=3)
    run = running(judge_run_create(judge=judge, dataset=dataset))
    judge_response(run_id=run.pk, response_id=response_ids(run)[0])
    judgment = Judgment.objects.get(run=run)
    assert judgment.status == JudgmentStatus.OK and judgment.attempts == 2


def test_permanent_errors_are_recorded_without_retry(project, dataset, server):
    server.configure(api_key="right-key")
    judge = llm_judge(project, server, api_key_env="FLASKWEB_TEST_JUDGE_KEY")
    run = running(judge_run_create(judge=judge, dataset=dataset))
    import os

    os.environ["FLASKWEB_TEST_JUDGE_KEY"] = "wrong-key"
    try:
        judge_response(run_id=run.pk, response_id=response_ids(run)[0])
    finally:
        del os.environ["FLASKWEB_TEST_JUDGE_KEY"]
    judgment = Judgment.objects.get(run=run)
    assert judgment.status == JudgmentStatus.FAILED and "401" in judgment.error
    assert "wrong-key" not in judgment.error and "wrong-key" not in str(judgment.request)


def test_unparseable_answers_are_kept_raw_and_never_coerced(project, dataset, server):
    server.configure(faults={"garbage": 1.0})
    judge = llm_judge(project, server)
    run = running(judge_run_create(judge=judge, dataset=dataset))
    judge_response(run_id=run.pk, response_id=response_ids(run)[0])
    judgment = Judgment.objects.get(run=run)
    assert judgment.status == JudgmentStatus.PARSE_FAILED
    assert judgment.raw_output and not JudgeScore.objects.filter(judgment=judgment).exists()
    assert JudgeRun.objects.get(pk=run.pk).parse_failed == 1


def test_a_budget_stops_the_run_cleanly(project, dataset, server):
    judge = llm_judge(project, server, price_per_1k_prompt=Decimal("1.0"))
    run = running(judge_run_create(judge=judge, dataset=dataset, budget=Decimal("0.000001")))
    for rid in response_ids(run):
        judge_response(run_id=run.pk, response_id=rid)
    run.refresh_from_db()
    assert run.status == RunStatus.PAUSED and "budget" in run.error
    assert Judgment.objects.filter(run=run).count() == 1


def test_a_baseline_judge_scores_offline(project, dataset):
    judge = judge_config_create(
        project=project, name="F1", kind=JudgeKind.BASELINE, baseline="token-f1"
    )
    run = running(judge_run_create(judge=judge, dataset=dataset))
    for rid in response_ids(run):
        judge_response(run_id=run.pk, response_id=rid)
    run.refresh_from_db()
    assert run.done == 6 and run.status == RunStatus.DONE
    # make_dataset items have no reference answer: every skill is N/A, with the reason
    scores = JudgeScore.objects.filter(run=run)
    assert scores.count() == 18 and all(s.is_na for s in scores)


def test_a_campaign_run_prompts_with_the_campaigns_pinned_rubrics(project, dataset, server):
    campaign = campaign_create(project=project, dataset=dataset, name="C", overlap=1)
    campaign_activate(campaign=campaign)
    judge = llm_judge(project, server)
    run = running(judge_run_create(judge=judge, campaign=campaign))
    judge_response(run_id=run.pk, response_id=response_ids(run)[0])
    score = JudgeScore.objects.filter(run=run).first()
    pins = dict(campaign.rubrics.values_list("skill_id", "rubric_id"))
    assert score.rubric_id == pins[score.skill_id]


@pytest.mark.slow
def test_a_run_completes_through_a_real_worker(celery_worker_process, project, tmp_path):
    # given a judge with some injected faults behind the local server
    dataset = make_dataset(project, tmp_path, items=4, models=("m1", "m2", "m3"))
    with FakeOpenAIServer(style="json", faults={"http_500": 0.2}, fault_seed=7) as srv:
        judge = llm_judge(project, srv, max_attempts=6)
        run = judge_run_create(judge=judge, dataset=dataset)
        # when
        assert judge_run_start(run=run)
        # then every response ends judged or recorded, exactly once
        wait_for(lambda: JudgeRun.objects.get(pk=run.pk).status == RunStatus.DONE, timeout=60)
    assert Judgment.objects.filter(run=run).count() == 12
    assert Judgment.objects.filter(run=run).values("response").distinct().count() == 12


def test_a_shared_rate_limit_paces_a_batch_without_using_attempts(project, dataset, server):
    # given a judge allowed 120 requests per minute (a Redis bucket shared by all workers,
    # holding one second of requests) and a server refusing more than 4 in any second
    server.configure(rpm=4, rate_window=1.0)
    judge = llm_judge(project, server, requests_per_minute=120)
    run = running(judge_run_create(judge=judge, dataset=dataset))
    # when six responses are judged in one batch
    started = time.monotonic()
    judge_batch(run_id=run.pk, response_ids=response_ids(run))
    # then two leave at once and the others at 2 per second: never refused, no attempt spent
    assert time.monotonic() - started >= 1.8
    assert server.stats()["rate_limited"] == 0 and server.stats()["completions"] == 6
    judgments = Judgment.objects.filter(run=run)
    assert judgments.count() == 6 and {j.attempts for j in judgments} == {1}


def test_a_prompt_that_cannot_be_built_is_refused_up_front_and_recorded_at_run_time(
    project, dataset, server
):
    # make_dataset items have no reference answer; this judge's template needs one
    judge = llm_judge(project, server, use_reference=True)
    with pytest.raises(prompts.PromptError, match="reference"):
        judge_run_create(judge=judge, dataset=dataset)
    # a run that exists anyway (e.g. created before the template changed) still completes
    run = JudgeRun.objects.create(judge=judge, dataset=dataset, total=6, status=RunStatus.RUNNING)
    for rid in response_ids(run):
        judge_response(run_id=run.pk, response_id=rid)
    run.refresh_from_db()
    assert run.status == RunStatus.DONE and run.failed == 6
    assert server.stats()["completions"] == 0
    assert all("reference" in j.error for j in Judgment.objects.filter(run=run))


def test_a_run_keeps_the_settings_its_judge_had_when_it_was_created(project, dataset, server):
    # given a run made with one model, temperature, template and price
    judge = llm_judge(project, server, temperature=0.0, price_per_1k_prompt=Decimal("1"))
    first_template = judge.prompt_template
    run = running(judge_run_create(judge=judge, dataset=dataset))
    # when the judge is edited afterwards (another model, temperature, template, price)
    terse, _ = prompt_template_create(
        project=project,
        key="terse",
        name="Terse",
        user_template="{skills}\n{instruction}\n{response}",
    )
    type(judge).objects.filter(pk=judge.pk).update(
        model="edited-model",
        temperature=0.9,
        prompt_template=terse,
        price_per_1k_prompt=Decimal("1000"),
    )
    for rid in response_ids(run):
        judge_response(run_id=run.pk, response_id=rid)
    # then the run asked exactly what it was created with, and costs at its own prices
    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    for judgment in Judgment.objects.filter(run=run):
        assert judgment.request["model"] == "fake-judge"
        assert judgment.request["temperature"] == 0.0
        assert judgment.prompt_template_id == first_template.pk
    assert run.cost == Decimal(run.prompt_tokens) / 1000
    # and a new run takes the edited settings
    rerun = running(judge_run_create(judge=type(judge).objects.get(pk=judge.pk), dataset=dataset))
    judge_response(run_id=rerun.pk, response_id=response_ids(rerun)[0])
    assert Judgment.objects.get(run=rerun).request["model"] == "edited-model"


def test_a_batch_past_its_time_hands_what_it_did_not_start_to_a_follow_up(
    project, dataset, server, settings
):
    # given a judge paced to one call a second, and batches that may launch for no time
    settings.FLASKWEB_JUDGE_TASK_SECONDS = 0
    judge = llm_judge(project, server, requests_per_minute=60)
    run = running(judge_run_create(judge=judge, dataset=dataset))
    ids = response_ids(run)
    # when the batch over all six responses runs
    rest = judge_batch_range(run_id=run.pk, after_id=ids[0] - 1, last_id=ids[-1])
    # then it stopped launching at once, recorded what it had started, and names the rest
    made = Judgment.objects.filter(run=run).count()
    assert 1 <= made < 6 and rest is not None and ids[0] - 1 <= rest < ids[-1]
    # and the follow-up (with time) makes exactly the missing judgments
    settings.FLASKWEB_JUDGE_TASK_SECONDS = 300
    assert judge_batch_range(run_id=run.pk, after_id=rest, last_id=ids[-1]) is None
    assert Judgment.objects.filter(run=run).count() == 6
    assert server.stats()["completions"] == 6
    assert JudgeRun.objects.get(pk=run.pk).status == RunStatus.DONE


def test_pausing_a_run_stops_its_batch_within_seconds(transactional_db, project, dataset, server):
    import threading

    # given a batch of slow calls (2 s each), paced so that they leave one by one
    server.configure(latency=2.0)
    judge = llm_judge(project, server, requests_per_minute=120)
    run = running(judge_run_create(judge=judge, dataset=dataset))
    worker = threading.Thread(
        target=judge_batch, kwargs={"run_id": run.pk, "response_ids": response_ids(run)}
    )
    worker.start()
    wait_for(lambda: server.stats()["in_flight"] >= 1, timeout=10, interval=0.01)
    # when the run is paused
    paused_at = time.monotonic()
    assert judge_run_set_status(run=run, status=RunStatus.PAUSED)
    # then the batch ends within seconds (it reads its run every second; the calls on the
    # wire get the stop grace) and launches nothing more
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert time.monotonic() - paused_at < 6
    requests = server.stats()["requests"]
    assert requests < 6
    time.sleep(0.5)
    assert server.stats()["requests"] == requests
    assert JudgeRun.objects.get(pk=run.pk).status == RunStatus.PAUSED


def test_the_same_request_twice_in_a_batch_is_asked_once(project, dataset, server):
    # given two models that gave the same answer to the same item (the same prompt)
    first, second = (
        dataset.items.order_by("pk").first().responses.order_by("pk")[:2]  # m1 and m2
    )
    type(second).objects.filter(pk=second.pk).update(text=first.text)
    judge = llm_judge(project, server)
    run = running(judge_run_create(judge=judge, dataset=dataset))
    # when both are judged in one batch
    judge_batch(run_id=run.pk, response_ids=[first.pk, second.pk])
    # then the provider was asked once, and both are judged alike, the second as the cache
    # would have answered it
    assert server.stats()["completions"] == 1
    one, two = Judgment.objects.filter(run=run).order_by("response_id")
    assert (one.from_cache, two.from_cache) == (False, True)
    assert one.raw_output == two.raw_output and one.cache_key == two.cache_key
    assert two.prompt_tokens == 0 and JudgeRun.objects.get(pk=run.pk).cached == 1
