"""REST API of the judging app: token and session auth, JSON errors with field details, the
run lifecycle (estimate, create, start on commit, pause/resume/cancel, 409 for a wrong
state), progress and counts, paginated judgments with per-skill scores from a real judge
call against the local fake server, and API keys never accepted nor shown."""

from __future__ import annotations

import os
from decimal import Decimal

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import Response
from devtools.openai_server import FakeOpenAIServer
from judging.models import JudgeConfig, JudgeRun, JudgmentStatus, RunStatus
from judging.services import judge_response, judge_run_create
from tests.judging.providers import provider_for
from tests.judging.test_views import add_judgment, make_dataset, make_judge, set_status

API = "/api/v1/judging"


def _api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=user).key)
    return client


@pytest.fixture
def api(researcher):
    return _api(researcher)


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path)


@pytest.fixture
def judge(project):
    return make_judge(project)


@pytest.fixture
def run(judge, dataset):
    return judge_run_create(judge=judge, dataset=dataset, budget=Decimal("2"))


@pytest.fixture
def dispatched(monkeypatch):
    calls = []
    monkeypatch.setattr(
        "judging.tasks.judge_run_dispatch_task.delay", lambda *args: calls.append(args)
    )
    return calls


# --- auth and access ------------------------------------------------------------------------------


def test_anonymous_requests_get_a_json_401(db, project):
    response = APIClient().get(f"{API}/projects/{project.slug}/judges/")
    assert response.status_code == 401 and "detail" in response.json()


def test_a_session_works_as_well_as_a_token(researcher, project, judge):
    client = APIClient()
    client.force_login(researcher)
    body = client.get(f"{API}/projects/{project.slug}/judges/").json()
    assert body["count"] == 1 and body["results"][0]["name"] == judge.name


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/projects/{slug}/judges/"),
        ("post", "/projects/{slug}/judges/create/"),
        ("get", "/judges/{judge}/"),
        ("post", "/judges/{judge}/estimate/"),
        ("post", "/judges/{judge}/runs/create/"),
        ("get", "/runs/{run}/"),
        ("post", "/runs/{run}/start/"),
        ("post", "/runs/{run}/pause/"),
        ("post", "/runs/{run}/resume/"),
        ("post", "/runs/{run}/cancel/"),
        ("get", "/runs/{run}/judgments/"),
        ("get", "/runs/{run}/scores/"),
    ],
)
def test_annotators_get_403_and_outsiders_404_in_json(
    annotator, outsider, project, judge, run, method, path, dispatched
):
    target = API + path.format(slug=project.slug, judge=judge.pk, run=run.pk)
    refused = getattr(_api(annotator), method)(target, {}, format="json")
    unknown = getattr(_api(outsider), method)(target, {}, format="json")
    assert refused.status_code == 403 and "detail" in refused.json()
    assert unknown.status_code == 404 and "detail" in unknown.json()
    run.refresh_from_db()
    assert run.status == RunStatus.PENDING


def test_the_wrong_method_is_405(api, run):
    assert api.get(f"{API}/runs/{run.pk}/start/").status_code == 405
    assert api.post(f"{API}/runs/{run.pk}/", {}).status_code == 405


# --- judges ---------------------------------------------------------------------------------------


def llm_body(**extra):
    body = {
        "name": "API judge",
        "kind": "llm",
        "provider": provider_for("http://127.0.0.1:8089/v1", key_env="FLASK_JUDGE_KEY").name,
        "model": "fake-judge",
        "use_reference": False,
        "extra_params": {"top_p": 0.5},
        "samples": 3,
        "requests_per_minute": 120,
        "price_per_1k_prompt": "0.25",
    }
    body.update(extra)
    return body


def test_a_judge_is_created_and_shown_with_its_provider_only(api, project, monkeypatch):
    # given the key is in the environment of this process
    monkeypatch.setenv("FLASK_JUDGE_KEY", "sk-very-secret-value")
    # when
    created = api.post(f"{API}/projects/{project.slug}/judges/create/", llm_body(), format="json")
    # then
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["provider"].startswith("test-") and body["samples"] == 3
    assert body["base_url"] == "http://127.0.0.1:8089/v1" and "api_key_env" not in body
    assert body["extra_params"] == {"top_p": 0.5} and body["price_per_1k_prompt"] == "0.250000"
    assert body["prompt_template"]["key"] == "flask-no-reference"
    detail = api.get(f"{API}/judges/{body['id']}/")
    assert detail.json() == body
    assert "sk-very-secret-value" not in created.content.decode() + detail.content.decode()


def test_a_baseline_judge_is_created_with_its_metric(api, project):
    body = {"name": "ROUGE", "kind": "baseline", "baseline": "rouge-l"}
    created = api.post(f"{API}/projects/{project.slug}/judges/create/", body, format="json")
    assert created.status_code == 201
    assert (created.json()["kind"], created.json()["baseline"]) == ("baseline", "rouge-l")


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ({"provider": ""}, "provider", "needs a provider"),
        ({"provider": "nope"}, "provider", "No such provider"),
        ({"base_url": "http://attacker.example/v1"}, "base_url", "declares these base URLs"),
        ({"api_key_env": "DJANGO_SECRET_KEY"}, "api_key_env", "a site admin's decision"),
        ({"api_key_file": "/etc/passwd"}, "api_key_file", "a site admin's decision"),
        ({"api_key": "sk-abc"}, "api_key", "Never send an API key"),
        ({"extra_params": "not an object"}, "extra_params", "must be a JSON object"),
        ({"extra_params": {"messages": []}}, "extra_params", "cannot be set here"),
        ({"kind": "imported"}, "kind", "not a valid choice"),
        ({"prompt_template": 999999}, "prompt_template", "No such template"),
    ],
)
def test_bad_judge_input_gets_json_field_errors_and_creates_nothing(
    api, project, extra, field, message
):
    response = api.post(
        f"{API}/projects/{project.slug}/judges/create/", llm_body(**extra), format="json"
    )
    assert response.status_code == 400
    assert message in " ".join(response.json()[field])
    assert not JudgeConfig.objects.filter(project=project).exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"API_KEY_ENV": "DJANGO_SECRET_KEY"}, "a site admin's decision: choose a provider"),
        ({"Authorization": "Bearer sk-abc"}, "Never send an API key"),
        (
            {"headers": {"X-Api-Key": "sk-abc"}},
            "Unknown field 'headers': it is not one of this request's fields.",
        ),
        (
            {"provider_id": 1},
            "Unknown field 'provider_id': it is not one of this request's fields; "
            "did you mean 'provider'?",
        ),
    ],
)
def test_a_judge_field_the_api_does_not_know_is_refused_by_name(api, project, extra, message):
    # was: 201, the field silently ignored
    response = api.post(
        f"{API}/projects/{project.slug}/judges/create/", llm_body(**extra), format="json"
    )
    assert response.status_code == 400
    [key] = extra
    body = response.json()
    assert message in body["fields"][key][0]
    assert body["detail"].startswith(key) and body["code"] == "invalid"
    assert not JudgeConfig.objects.filter(project=project).exists()


def test_unknown_fields_are_reported_with_the_other_field_errors_in_one_answer(api, project):
    body = {"name": "ROUGE", "kind": "imported", "metric": "rouge-l", "headers": {}}
    response = api.post(f"{API}/projects/{project.slug}/judges/create/", body, format="json")
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"kind", "metric", "headers"}
    assert "(and 2 more; see fields)" in response.json()["detail"]


def test_a_duplicate_judge_name_is_a_field_error(api, project, judge):
    response = api.post(
        f"{API}/projects/{project.slug}/judges/create/", llm_body(name=judge.name), format="json"
    )
    assert response.status_code == 400 and "name" in response.json()


# --- runs -----------------------------------------------------------------------------------------


def test_the_estimate_creates_nothing(api, judge, dataset, dispatched):
    response = api.post(f"{API}/judges/{judge.pk}/estimate/", {"dataset": dataset.pk})
    body = response.json()
    assert response.status_code == 200
    assert body["calls"] == 6 and body["completion_tokens"] == 6 * judge.max_tokens
    assert Decimal(body["cost"]) > 0
    assert not JudgeRun.objects.exists() and dispatched == []


def test_a_run_is_created_pending_then_started_on_commit(
    api, judge, dataset, dispatched, django_capture_on_commit_callbacks
):
    # when
    created = api.post(
        f"{API}/judges/{judge.pk}/runs/create/", {"dataset": dataset.pk, "budget": "1.5"}
    )
    # then
    body = created.json()
    assert created.status_code == 201
    assert (body["status"], body["total"], body["budget"]) == ("pending", 6, "1.500000")
    assert body["estimate"]["calls"] == 6 and dispatched == []
    # when started
    with django_capture_on_commit_callbacks(execute=True):
        started = api.post(f"{API}/runs/{body['id']}/start/")
    # then
    assert started.status_code == 200 and started.json()["status"] == "running"
    assert dispatched == [(body["id"], 0)]
    # and a second start is a conflict
    again = api.post(f"{API}/runs/{body['id']}/start/")
    assert again.status_code == 409
    assert again.json() == {
        "detail": "a running run cannot be started",
        "code": "run_state",
        "status": "running",
    }


def test_a_campaign_run_takes_the_campaigns_dataset_and_models(api, project, judge, dataset):
    campaign = campaign_create(project=project, dataset=dataset, name="C", model_names=["m2"])
    draft = api.post(f"{API}/judges/{judge.pk}/runs/create/", {"campaign": campaign.pk})
    assert draft.status_code == 400 and "campaign" in draft.json()
    campaign_activate(campaign=campaign)
    created = api.post(f"{API}/judges/{judge.pk}/runs/create/", {"campaign": campaign.pk})
    body = created.json()
    assert created.status_code == 201
    assert (body["campaign"], body["dataset"], body["total"]) == (campaign.pk, dataset.pk, 3)


def test_run_scopes_are_checked_against_the_judges_project(api, judge, dataset, tmp_path):
    from annotation.services.projects import project_create

    other = project_create(slug="elsewhere", name="Elsewhere")
    foreign = make_dataset(other, tmp_path, name="Foreign")
    missing = api.post(f"{API}/judges/{judge.pk}/runs/create/", {})
    wrong = api.post(f"{API}/judges/{judge.pk}/runs/create/", {"dataset": foreign.pk})
    assert missing.status_code == 400 and "non_field_errors" in missing.json()
    assert wrong.status_code == 400 and "No such dataset" in wrong.json()["dataset"][0]
    assert not JudgeRun.objects.exists()


def test_a_reference_judge_on_items_without_references_is_a_400(api, project, dataset):
    judge = make_judge(project, name="Ref", use_reference=True)
    response = api.post(f"{API}/judges/{judge.pk}/estimate/", {"dataset": dataset.pk})
    assert response.status_code == 400
    assert "needs a reference answer" in response.json()["non_field_errors"][0]


def test_pause_resume_and_cancel_move_the_run_or_answer_409(
    api, run, dispatched, django_capture_on_commit_callbacks
):
    pending = api.post(f"{API}/runs/{run.pk}/pause/")
    assert pending.status_code == 409
    assert pending.json() == {
        "detail": "a pending run cannot be paused",
        "code": "run_state",
        "status": "pending",
    }
    set_status(run, RunStatus.RUNNING)
    paused = api.post(f"{API}/runs/{run.pk}/pause/")
    assert paused.status_code == 200 and paused.json()["status"] == "paused"
    with django_capture_on_commit_callbacks(execute=True):
        resumed = api.post(f"{API}/runs/{run.pk}/resume/", {"budget": None}, format="json")
    assert resumed.json()["status"] == "running" and resumed.json()["budget"] is None
    assert dispatched == [(run.pk, 0)]
    cancelled = api.post(f"{API}/runs/{run.pk}/cancel/")
    assert cancelled.json()["status"] == "cancelled" and cancelled.json()["finished_at"]
    refused = api.post(f"{API}/runs/{run.pk}/resume/")
    assert refused.status_code == 409
    assert refused.json() == {
        "detail": "a cancelled run cannot be resumed",
        "code": "run_state",
        "status": "cancelled",
    }


def test_a_bad_budget_is_a_field_error(api, run):
    set_status(run, RunStatus.PAUSED)
    response = api.post(f"{API}/runs/{run.pk}/resume/", {"budget": "-1"}, format="json")
    assert response.status_code == 400 and "budget" in response.json()
    assert JudgeRun.objects.get(pk=run.pk).status == RunStatus.PAUSED


def test_the_run_detail_has_progress_counts_and_spending(api, run, dataset):
    responses = list(Response.objects.filter(item__dataset=dataset).order_by("pk"))
    add_judgment(run, responses[0], status=JudgmentStatus.OK)
    add_judgment(run, responses[1], status=JudgmentStatus.PARTIAL)
    add_judgment(run, responses[2], status=JudgmentStatus.FAILED)
    set_status(run, RunStatus.RUNNING, done=2, failed=1, cost=Decimal("0.5"), prompt_tokens=900)
    body = api.get(f"{API}/runs/{run.pk}/").json()
    assert (body["finished"], body["percent"], body["ok"], body["partial"]) == (3, 50, 1, 1)
    assert (body["failed"], body["parse_failed"], body["cost"]) == (1, 0, "0.500000")
    assert body["prompt_tokens"] == 900 and body["estimate"]["calls"] == 6
    assert body["settings_snapshot"]["model"] == "judge-model"


def test_a_runs_judgments_are_paginated_with_scores_per_skill(api, project, dataset):
    # given a real judge run against the local fake server
    with FakeOpenAIServer(style="json") as server:
        judge = make_judge(project, name="Fake", base_url=server.url, api_key_env="")
        run = set_status(judge_run_create(judge=judge, dataset=dataset), RunStatus.RUNNING)
        for response in Response.objects.filter(item__dataset=dataset).order_by("pk"):
            judge_response(run_id=run.pk, response_id=response.pk)
    # when
    page = api.get(f"{API}/runs/{run.pk}/judgments/", {"limit": 4}).json()
    rest = api.get(f"{API}/runs/{run.pk}/judgments/", {"limit": 4, "offset": 4}).json()
    # then
    assert page["count"] == 6 and len(page["results"]) == 4 and len(rest["results"]) == 2
    first = page["results"][0]
    assert first["status"] == "ok" and first["item"] == "i0" and first["attempts"] == 1
    assert set(first["scores"]) == {"Factuality", "Comprehension", "Readability"}
    assert all(v == "N/A" or 1 <= v <= 5 for v in first["scores"].values())
    assert first["raw_output"] and first["prompt_tokens"] > 0
    assert api.get(f"{API}/runs/{run.pk}/").json()["status"] == "done"


def test_judgments_filter_by_status_and_refuse_unknown_ones(api, run, dataset):
    responses = list(Response.objects.filter(item__dataset=dataset))
    add_judgment(run, responses[0], status=JudgmentStatus.OK)
    add_judgment(run, responses[1], status=JudgmentStatus.PARSE_FAILED)
    parse_failed = api.get(f"{API}/runs/{run.pk}/judgments/", {"status": "parse_failed"}).json()
    assert parse_failed["count"] == 1 and parse_failed["results"][0]["scores"] == {}
    bad = api.get(f"{API}/runs/{run.pk}/judgments/", {"status": "great"})
    assert bad.status_code == 400 and "status" in bad.json()


def test_the_schema_names_every_judging_component_uniquely(api):
    schema = api.get("/api/schema/", {"format": "json"}).json()
    names = [n for n in schema["components"]["schemas"] if n.startswith("Judging")]
    assert {"JudgingJudge", "JudgingJudgeCreate", "JudgingRun", "JudgingJudgment"} <= set(names)
    assert f"{API}/runs/{{id}}/judgments/" in schema["paths"]


def test_no_key_in_the_environment_never_leaks_into_a_stored_request(api, project, dataset):
    os.environ["FLASKWEB_JUDGEUI_KEY"] = "sk-should-never-be-stored"
    try:
        with FakeOpenAIServer(style="json") as server:
            judge = make_judge(
                project, name="Keyed", base_url=server.url, api_key_env="FLASKWEB_JUDGEUI_KEY"
            )
            run = set_status(judge_run_create(judge=judge, dataset=dataset), RunStatus.RUNNING)
            first = Response.objects.filter(item__dataset=dataset).order_by("pk").first()
            judge_response(run_id=run.pk, response_id=first.pk)
    finally:
        del os.environ["FLASKWEB_JUDGEUI_KEY"]
    body = api.get(f"{API}/runs/{run.pk}/judgments/").content.decode()
    body += api.get(f"{API}/judges/{judge.pk}/").content.decode()
    assert "sk-should-never-be-stored" not in body and "FLASKWEB_JUDGEUI_KEY" not in body
    assert judge.provider.name in body


@pytest.mark.parametrize(
    "name, message",
    [
        ("ROUGE", "'ROUGE' looks like the existing judge 'Rouge'"),
        ("Rоuge", "looks like the existing judge 'Rouge'"),  # Cyrillic о
        ("Ro\u200buge", "contains an invisible character U+200B at position 2"),
        ("Rouge\u202e", "contains a bidirectional control character U+202E"),
    ],
)
def test_a_judge_name_that_looks_like_another_or_hides_characters_is_a_field_error(
    api, project, name, message
):
    # was: a second judge "ROUGE" or "Rоuge" beside "Rouge", told apart by nobody
    body = {"kind": "baseline", "baseline": "rouge-l"}
    url = f"{API}/projects/{project.slug}/judges/create/"
    assert api.post(url, {**body, "name": "Rouge"}, format="json").status_code == 201
    response = api.post(url, {**body, "name": name}, format="json")
    assert response.status_code == 400
    assert message in response.json()["fields"]["name"][0]
    assert JudgeConfig.objects.filter(project=project).count() == 1
