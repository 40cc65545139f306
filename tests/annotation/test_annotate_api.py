"""The annotation workflow JSON API: campaigns, next, submit, skip (token and session auth)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import Group
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.campaigns.services import (
    campaign_activate,
    campaign_create,
    campaign_set_status,
    gold_task_set,
)
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignStatus,
    HumanScore,
    Response,
    Task,
    UploadSource,
    UploadStatus,
)
from annotation.services.assignments import assignments_expire_stale, process_caches_clear
from flaskweb.db import is_postgres
from tests.clients import token_client

SKILLS = ["Factuality", "Comprehension", "Readability"]
# Names that must never reach an annotator: asserted absent from every response body.
MODELS = ("secret-model-alpha", "secret-model-beta")
BASE = "/api/v1/annotation"


def make_dataset(project, tmp_path, *, items=3, models=MODELS, name="D"):
    """A generic-JSONL dataset whose texts do not mention the model names."""
    rows = [
        {
            "id": f"i{i}",
            "instruction": f"Question {i}",
            "reference": f"Reference answer {i}",
            "skills": SKILLS,
            "domains": ["History"],
            "difficulty": 2,
            "checklist": {"Factuality": [f"names the year of event {i}"]},
            "responses": [
                {"model": m, "text": f"Answer number {j} to question {i}"}
                for j, m in enumerate(models)
            ],
        }
        for i in range(items)
    ]
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    upload = dataset_upload_create(
        project=project,
        dataset_name=name,
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )
    upload = dataset_import(upload_id=upload.pk)
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    return upload.dataset


class BlindClient(APIClient):
    """Checks that no response it receives gives away what annotators must not see."""

    def request(self, **kwargs):
        response = super().request(**kwargs)
        assert_blind(response)
        return response


def api(user) -> APIClient:
    return token_client(user, client_class=BlindClient)


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob", password="pw-bob")


@pytest.fixture
def carol(django_user_model):
    return django_user_model.objects.create_user("carol", password="pw-carol")


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path)


@pytest.fixture
def campaign(project, dataset, annotator, bob, carol):
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name="C",
        overlap=2,
        annotators=[annotator, bob, carol],
        lease_seconds=60,
        instructions="Score carefully.",
    )
    assert campaign_activate(campaign=campaign) == 6
    return campaign


@pytest.fixture
def alice_api(annotator):
    return api(annotator)


def next_url(campaign) -> str:
    return f"{BASE}/campaigns/{campaign.pk}/next/"


def submit_url(assignment_id) -> str:
    return f"{BASE}/assignments/{assignment_id}/submit/"


def skip_url(assignment_id) -> str:
    return f"{BASE}/assignments/{assignment_id}/skip/"


def scores_for(task: dict, value=4) -> dict:
    return {"scores": [{"skill_id": s["skill_id"], "score": value} for s in task["skills"]]}


def claim(client, campaign) -> dict:
    response = client.post(next_url(campaign))
    assert response.status_code == 200, response.content
    return response.json()


FORBIDDEN_KEYS = {"model", "model_name", "kind", "task_kind", "gold", "is_gold", "annotator"}


def assert_blind(response) -> None:
    """No model name anywhere in the body, and no key that tells a task's kind or whose
    work it is."""
    body = response.content.decode()
    for name in MODELS:
        assert name not in body, f"{name!r} leaked in {body[:300]}"

    def keys(value):
        if isinstance(value, dict):
            for key, child in value.items():
                yield key
                yield from keys(child)
        elif isinstance(value, list):
            for child in value:
                yield from keys(child)

    if body:
        leaked = FORBIDDEN_KEYS & set(keys(json.loads(body)))
        assert not leaked, f"{leaked} in {body[:300]}"


# --- auth -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/campaigns/"),
        ("post", "/campaigns/1/next/"),
        ("post", "/assignments/1/submit/"),
        ("post", "/assignments/1/skip/"),
    ],
)
def test_anonymous_requests_get_a_json_401(db, method, path):
    response = getattr(APIClient(), method)(BASE + path, {}, format="json")
    assert response.status_code == 401
    assert "detail" in response.json()


def test_a_logged_in_session_works_too(campaign, annotator):
    client = BlindClient()
    client.force_login(annotator)
    assert client.get(f"{BASE}/campaigns/").json()["count"] == 1
    assert client.post(next_url(campaign)).status_code == 200


def test_next_only_answers_post(campaign, alice_api):
    assert alice_api.get(next_url(campaign)).status_code == 405


# --- campaigns --------------------------------------------------------------------------------


def test_campaigns_lists_the_callers_pools_with_own_counts_and_quota(
    project, dataset, campaign, annotator, alice_api, outsider
):
    # given a campaign reached through a group, a draft, and one alice is not in
    group = Group.objects.create(name="crowd")
    annotator.groups.add(group)
    by_group = campaign_create(
        project=project, dataset=dataset, name="By group", groups=[group], quota_per_annotator=5
    )
    campaign_activate(campaign=by_group)
    campaign_create(project=project, dataset=dataset, name="Draft", annotators=[annotator])
    other = campaign_create(project=project, dataset=dataset, name="Other", annotators=[outsider])
    campaign_activate(campaign=other)
    task = claim(alice_api, campaign)
    assert alice_api.post(submit_url(task["assignment_id"]), scores_for(task), format="json")
    # when
    body = alice_api.get(f"{BASE}/campaigns/").json()
    # then
    rows = {r["name"]: r for r in body["results"]}
    assert set(rows) == {"C", "By group"}
    assert rows["C"] == {
        "id": campaign.pk,
        "name": "C",
        "project": project.name,
        "status": "active",
        "instructions": "Score carefully.",
        "submitted": 1,
        "quota": None,
        "available": 5,
        "has_open_task": False,
    }
    assert rows["By group"]["submitted"] == 0 and rows["By group"]["quota"] == 5


# --- next -------------------------------------------------------------------------------------


def test_next_claims_a_lease_and_shows_the_task_blind(campaign, alice_api):
    # when
    response = alice_api.post(next_url(campaign))
    # then (every client here also checks that no response body names a model)
    assert response.status_code == 200
    task = response.json()
    assignment = Assignment.objects.select_related("task__response__item").get()
    item = assignment.task.response.item
    assert task["assignment_id"] == assignment.pk
    assert task["instruction"] == item.instruction
    assert task["reference"] == item.reference_answer
    assert task["response"] == assignment.task.response.text
    assert [s["name"] for s in task["skills"]] == SKILLS
    factuality = task["skills"][0]
    assert set(factuality) == {"skill_id", "name", "criterion", "anchors", "checklist"}
    assert len(factuality["anchors"]) == 5 and factuality["criterion"]
    assert factuality["checklist"] == [f"names the year of event {item.external_id[1:]}"]
    assert task["skills"][1]["checklist"] == []
    expires = timezone.datetime.fromisoformat(task["expires_at"])
    assert abs((expires - assignment.expires_at).total_seconds()) < 1


def test_next_resumes_the_open_lease(campaign, alice_api):
    first = claim(alice_api, campaign)
    again = claim(alice_api, campaign)
    assert first["assignment_id"] == again["assignment_id"]
    assert Task.objects.get(assignments__pk=first["assignment_id"]).assigned == 1


def test_the_reference_is_left_out_when_the_campaign_hides_it(campaign, alice_api):
    Campaign.objects.filter(pk=campaign.pk).update(show_reference=False)
    task = claim(alice_api, campaign)
    assert "reference" not in task


def test_gold_tasks_look_like_any_other_task(campaign, annotator, alice_api):
    # given every second task is gold
    response = Response.objects.filter(item__dataset=campaign.dataset).first()
    skills = {s: 3 for s in campaign.rubrics.values_list("skill_id", flat=True)}
    gold_task_set(campaign=campaign, response=response, scores=skills)
    Campaign.objects.filter(pk=campaign.pk).update(gold_rate=0.5)
    # when alice takes two tasks
    seen = []
    for _ in range(2):
        reply = alice_api.post(next_url(campaign))
        task = reply.json()
        seen.append(task["assignment_id"])
        assert set(task) == {
            "assignment_id",
            "expires_at",
            "instruction",
            "reference",
            "response",
            "skills",
        }
        done = alice_api.post(submit_url(task["assignment_id"]), scores_for(task), format="json")
        assert done.status_code == 201
    # then one of them was the gold task
    kinds = set(Assignment.objects.filter(pk__in=seen).values_list("task__kind", flat=True))
    assert kinds == {"normal", "gold"}


def test_next_answers_204_with_a_reason_when_nothing_is_left(campaign, alice_api):
    # given alice has scored every response she may (one per task, 6 tasks)
    for _ in range(6):
        task = claim(alice_api, campaign)
        alice_api.post(submit_url(task["assignment_id"]), scores_for(task), format="json")
    # when
    response = alice_api.post(next_url(campaign))
    # then
    assert response.status_code == 204
    assert response["No-Task-Reason"] == "no_task_available"
    assert not response.content


def test_next_answers_204_when_the_quota_is_reached(campaign, alice_api):
    Campaign.objects.filter(pk=campaign.pk).update(quota_per_annotator=1)
    task = claim(alice_api, campaign)
    alice_api.post(submit_url(task["assignment_id"]), scores_for(task), format="json")
    response = alice_api.post(next_url(campaign))
    assert response.status_code == 204
    assert response["No-Task-Reason"] == "quota_reached"


def test_next_answers_204_while_the_campaign_is_paused(campaign, alice_api):
    campaign_set_status(campaign=campaign, status=CampaignStatus.PAUSED)
    response = alice_api.post(next_url(campaign))
    assert response.status_code == 204
    assert response["No-Task-Reason"] == "campaign_paused"
    assert not Assignment.objects.exists()


def test_next_answers_204_before_the_campaign_starts(project, dataset, annotator):
    draft = campaign_create(project=project, dataset=dataset, name="Draft", annotators=[annotator])
    response = api(annotator).post(next_url(draft))
    assert response.status_code == 204
    assert response["No-Task-Reason"] == "campaign_draft"


def test_next_answers_404_for_campaigns_the_caller_is_not_in(campaign, annotator, outsider):
    for client, campaign_id in [
        (api(outsider), campaign.pk),  # not in the pool
        (api(annotator), 999_999),  # does not exist
    ]:
        response = client.post(f"{BASE}/campaigns/{campaign_id}/next/")
        assert response.status_code == 404
        assert response.json() == {"detail": "no such campaign", "code": "not_found"}
    assert not Assignment.objects.exists()


# --- submit -----------------------------------------------------------------------------------


def test_submit_records_the_scores_then_a_repeat_is_a_no_op(campaign, alice_api):
    # given
    task = claim(alice_api, campaign)
    payload = scores_for(task)
    payload["scores"][0].update(score=None, rationale="does not apply", time_ms=1200)
    payload["active_ms"] = 9000
    # when
    first = alice_api.post(submit_url(task["assignment_id"]), payload, format="json")
    again = alice_api.post(submit_url(task["assignment_id"]), payload, format="json")
    # then
    assert first.status_code == 201
    assert first.json() == {
        "assignment_id": task["assignment_id"],
        "status": "submitted",
        "late": False,
    }
    assert again.status_code == 200
    assert again.json() == {"assignment_id": task["assignment_id"], "duplicate": True}
    rows = HumanScore.objects.filter(assignment_id=task["assignment_id"])
    assert rows.count() == 3
    na = rows.get(skill_id=task["skills"][0]["skill_id"])
    assert na.is_na and na.score is None and na.rationale == "does not apply"
    assert na.time_ms == 1200
    assignment = Assignment.objects.get(pk=task["assignment_id"])
    assert assignment.status == AssignmentStatus.SUBMITTED and assignment.active_ms == 9000
    assert (assignment.task.assigned, assignment.task.submitted) == (1, 1)


def test_a_chained_submit_returns_the_next_task_until_none_is_left(campaign, alice_api):
    # given alice holds her first task
    task = claim(alice_api, campaign)
    seen = [task["assignment_id"]]
    # when she submits each with next=true, taking the next task from the answer
    for _ in range(5):
        answer = alice_api.post(
            submit_url(task["assignment_id"]), {**scores_for(task), "next": True}, format="json"
        )
        assert answer.status_code == 201
        body = answer.json()
        assert body["status"] == "submitted" and "next_reason" not in body
        task = body["next"]
        # then the next task is a fresh lease, shown as POST …/next/ shows it
        assert task["assignment_id"] not in seen
        assert task == claim(alice_api, campaign)  # resuming it gives the same card
        seen.append(task["assignment_id"])
    # and after the sixth (last) one, next is null with the reason
    last = alice_api.post(
        submit_url(task["assignment_id"]), {**scores_for(task), "next": True}, format="json"
    )
    assert last.status_code == 201
    assert last.json()["next"] is None and last.json()["next_reason"] == "no_task_available"
    assert HumanScore.objects.filter(annotator__username="alice").count() == 6 * 3
    assert not Assignment.objects.filter(status=AssignmentStatus.ACTIVE).exists()


def test_a_retried_chained_submit_returns_the_same_next_task(campaign, alice_api):
    task = claim(alice_api, campaign)
    payload = {**scores_for(task), "next": True}
    first = alice_api.post(submit_url(task["assignment_id"]), payload, format="json").json()
    again = alice_api.post(submit_url(task["assignment_id"]), payload, format="json")
    assert again.status_code == 200
    assert again.json()["duplicate"] is True
    assert again.json()["next"]["assignment_id"] == first["next"]["assignment_id"]


@pytest.mark.parametrize(
    ("change", "field_hint"),
    [
        (lambda p: p["scores"][0].update(score=7), "outside the scale 1 to 5"),
        (lambda p: p["scores"][0].update(score="great"), "not a whole number"),
        (lambda p: p["scores"][0].pop("skill_id"), "required"),
        (lambda p: p.update(scores=[]), "empty"),
        (lambda p: p.pop("scores"), "required"),
        (lambda p: p.update(active_ms=-5), "greater than or equal to 0"),
        (lambda p: p["scores"][0].update(rationale="x" * 2001), "2000"),
    ],
)
def test_an_invalid_submission_gets_field_details_and_changes_nothing(
    campaign, alice_api, change, field_hint
):
    task = claim(alice_api, campaign)
    payload = scores_for(task)
    change(payload)
    response = alice_api.post(submit_url(task["assignment_id"]), payload, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid"
    assert {"scores", "active_ms"} & set(body)
    assert field_hint in json.dumps(body)
    assert not HumanScore.objects.exists()


def test_an_incomplete_or_mismatched_submission_is_refused_with_a_message(campaign, alice_api):
    task = claim(alice_api, campaign)
    url = submit_url(task["assignment_id"])
    payload = scores_for(task)
    missing = {"scores": payload["scores"][:2]}
    response = alice_api.post(url, missing, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "detail": "scores: please score: Readability",
        "code": "incomplete",
        "fields": {"scores": ["please score: Readability"]},
        "scores": ["please score: Readability"],  # where v1 clients read it
    }
    extra = {"scores": [*payload["scores"], {"skill_id": 999_999, "score": 3}]}
    refused = alice_api.post(url, extra, format="json")
    assert refused.status_code == 400
    assert refused.json() == {
        "detail": "scores: a score was given for a skill this task does not ask",
        "code": "invalid",
        "fields": {"scores": ["a score was given for a skill this task does not ask"]},
        "scores": ["a score was given for a skill this task does not ask"],
    }
    twice = {"scores": [*payload["scores"], payload["scores"][0]]}
    refused = alice_api.post(url, twice, format="json")
    assert refused.status_code == 400
    assert refused.json()["fields"] == {"scores": ["a skill was scored twice"]}
    assert not HumanScore.objects.exists()
    assert Assignment.objects.get().status == AssignmentStatus.ACTIVE


def test_submit_answers_404_for_another_annotators_assignment(campaign, alice_api, bob):
    task = claim(alice_api, campaign)
    for assignment_id in (task["assignment_id"], 999_999):
        response = api(bob).post(submit_url(assignment_id), scores_for(task), format="json")
        assert response.status_code == 404
        assert response.json() == {"detail": "no such task", "code": "not_found"}
    assert not HumanScore.objects.exists()


def test_a_late_submission_is_accepted_while_a_slot_is_free(campaign, alice_api):
    task = claim(alice_api, campaign)
    with time_machine.travel(timezone.now() + timedelta(seconds=120)):
        assert assignments_expire_stale(campaign_id=campaign.pk) == 1
        response = alice_api.post(
            submit_url(task["assignment_id"]), scores_for(task), format="json"
        )
    assert response.status_code == 201
    assert response.json()["late"] is True


def test_submit_answers_409_when_the_lease_was_lost(campaign, alice_api, bob, carol):
    # given alice's lease lapses and bob and carol complete the task (K = 2)
    task = claim(alice_api, campaign)
    with time_machine.travel(timezone.now() + timedelta(seconds=120)):
        for person in (bob, carol):
            theirs = claim(api(person), campaign)
            assert Assignment.objects.get(pk=theirs["assignment_id"]).task_id == (
                Assignment.objects.get(pk=task["assignment_id"]).task_id
            )
            api(person).post(submit_url(theirs["assignment_id"]), scores_for(theirs), format="json")
        # when alice submits late
        response = alice_api.post(
            submit_url(task["assignment_id"]), scores_for(task), format="json"
        )
    # then
    assert response.status_code == 409
    assert response.json()["code"] == "lease_lost"
    assert "ran out" in response.json()["detail"]
    assert not HumanScore.objects.filter(assignment_id=task["assignment_id"]).exists()


def test_submit_answers_409_for_a_skipped_task(campaign, alice_api):
    task = claim(alice_api, campaign)
    alice_api.post(skip_url(task["assignment_id"]), {"reason": "cannot judge"}, format="json")
    response = alice_api.post(submit_url(task["assignment_id"]), scores_for(task), format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "skipped"


# --- skip -------------------------------------------------------------------------------------


def test_skip_gives_the_task_back_with_a_flag(campaign, alice_api):
    task = claim(alice_api, campaign)
    response = alice_api.post(
        skip_url(task["assignment_id"]), {"reason": "garbled text", "flag": True}, format="json"
    )
    assert response.status_code == 200
    assert response.json() == {
        "assignment_id": task["assignment_id"],
        "status": "skipped",
        "flagged": True,
    }
    assignment = Assignment.objects.get(pk=task["assignment_id"])
    assert assignment.flag_reason == "garbled text" and assignment.task.assigned == 0
    assert claim(alice_api, campaign)["assignment_id"] != task["assignment_id"]


def test_skip_needs_a_reason(campaign, alice_api):
    task = claim(alice_api, campaign)
    response = alice_api.post(skip_url(task["assignment_id"]), {"reason": "  "}, format="json")
    assert response.status_code == 400
    assert "reason" in response.json()
    assert Assignment.objects.get().status == AssignmentStatus.ACTIVE


def test_skip_answers_404_for_others_and_409_once_submitted(campaign, alice_api, bob):
    task = claim(alice_api, campaign)
    url = skip_url(task["assignment_id"])
    for client, path in [(api(bob), url), (alice_api, skip_url(999_999))]:
        response = client.post(path, {"reason": "x"}, format="json")
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"
    alice_api.post(submit_url(task["assignment_id"]), scores_for(task), format="json")
    response = alice_api.post(url, {"reason": "changed my mind"}, format="json")
    assert response.status_code == 409
    assert response.json()["code"] == "not_active"


def test_the_blindness_check_itself_catches_a_leak():
    class Fake:
        content = json.dumps({"skills": [{"name": "x", "kind": "gold"}]}).encode()

    with pytest.raises(AssertionError):
        assert_blind(Fake())
    Fake.content = f'{{"response": "as {MODELS[0]} I think"}}'.encode()
    with pytest.raises(AssertionError):
        assert_blind(Fake())


def test_the_openapi_schema_describes_the_annotation_api(annotator):
    client = APIClient()  # the schema names fields like "kind" of other APIs
    client.force_login(annotator)
    paths = client.get("/api/schema/", {"format": "json"}).json()["paths"]
    assert f"{BASE}/campaigns/{{campaign_id}}/next/" in paths
    assert f"{BASE}/assignments/{{assignment_id}}/submit/" in paths


def test_next_and_submit_use_a_fixed_number_of_queries(
    campaign, alice_api, django_assert_num_queries
):
    # Both run on every task of every annotator (bench/annotate_load.py). Inside the test's
    # transaction each service transaction adds a SAVEPOINT and its RELEASE (2 statements).
    process_caches_clear()
    if is_postgres():
        # next: auth, expiry sweep, the claim in one statement, the card (with the item's
        # skills), rubric pins; in production (autocommit) no savepoint: 5 round trips
        next_queries = 5 + 2
        # submit: auth, the read (assignment, task, item skills), the one writing statement
        submit_queries = 3 + 2
    else:
        # SQLite, the transactional path: auth, expiry sweep, claim state, slot, lease,
        # card, skills, pins / auth, the read, skills, three writes
        next_queries, submit_queries = 8 + 2, 6 + 2
    with django_assert_num_queries(next_queries):
        task = claim(alice_api, campaign)
    with django_assert_num_queries(submit_queries):
        done = alice_api.post(submit_url(task["assignment_id"]), scores_for(task), format="json")
    assert done.status_code == 201


WHY_REFUSED = (
    "not written as a whole number",
    "white space",
    "digits 0-9",
    "plus sign",
    "not a boolean",
)


@pytest.mark.parametrize(
    "written",
    ['"5 "', '"\\uff15"', '"\\u0665"', '"+4"', "1e0", '"4.0"', "true", "false", "4.0"],
    ids=[
        "trailing space",
        "fullwidth",
        "arabic-indic",
        "plus",
        "exponent",
        "decimal text",
        "true",
        "false",
        "float",
    ],
)
def test_submit_refuses_a_score_that_only_looks_like_a_whole_number(campaign, alice_api, written):
    # was: stored as 5 or 4 (DRF's IntegerField strips, takes any Unicode digit and x.0)
    task = claim(alice_api, campaign)
    scores = [{"skill_id": s["skill_id"], "score": 3} for s in task["skills"]]
    body = json.dumps({"scores": scores}).replace('"score": 3', f'"score": {written}', 1)
    # when
    response = alice_api.post(
        submit_url(task["assignment_id"]), body, content_type="application/json"
    )
    # then
    assert response.status_code == 400, response.content
    [message] = response.json()["fields"]["scores"]["0"]["score"]
    assert message.startswith(("score ", "a score must be a whole number")), message
    assert any(why in message for why in WHY_REFUSED), message
    assert not HumanScore.objects.exists()


def test_a_plain_submit_is_validated_without_building_the_serializer(
    campaign, alice_api, monkeypatch
):
    # the hot path (annotation.annotate.apis.submit_body_plain): a plain JSON body is read
    # without DRF's InputSerializer; any other body still goes through it
    from annotation.annotate.apis import AssignmentSubmitApi

    built: list[int] = []
    original = AssignmentSubmitApi.InputSerializer.__init__

    def counting(self, *args, **kwargs):
        built.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(AssignmentSubmitApi.InputSerializer, "__init__", counting)
    task = claim(alice_api, campaign)
    response = alice_api.post(submit_url(task["assignment_id"]), scores_for(task), format="json")
    assert response.status_code == 201, response.content
    assert built == []
    task = claim(alice_api, campaign)
    body = {"scores": [{"skill_id": s["skill_id"], "score": "4"} for s in task["skills"]]}
    response = alice_api.post(submit_url(task["assignment_id"]), body, format="json")
    assert response.status_code == 201, response.content
    assert built == [1]
