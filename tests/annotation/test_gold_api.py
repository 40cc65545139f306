"""The gold tasks API of a campaign (GET/POST campaigns/{id}/gold/, GET/DELETE
campaigns/{id}/gold/{task_id}/): both modes, names resolved, specific 400s that write
nothing, other projects' responses refused, 409 for a task someone answered."""

from __future__ import annotations

import pytest

from annotation.campaigns.services import (
    campaign_activate,
    campaign_create,
    gold_pair_set,
    gold_task_set,
)
from annotation.models import (
    Assignment,
    AssignmentStatus,
    GoldPreference,
    GoldScore,
    Response,
    Skill,
    Task,
    TaskKind,
)
from annotation.services.projects import membership_set, project_create
from tests.annotation.test_annotate_api import make_dataset
from tests.annotation.test_gold_pairs import MODELS, make_pairwise, pair_of, task_expiry
from tests.clients import token_client

pytestmark = pytest.mark.django_db

BASE = "/api/v1/annotation"


@pytest.fixture
def rita(researcher):
    return token_client(researcher)


@pytest.fixture
def pairs(project, tmp_path, annotator):
    return make_pairwise(project, tmp_path, [annotator])


@pytest.fixture
def scores_campaign(project, tmp_path, annotator):
    dataset = make_dataset(project, tmp_path, items=2, models=("m1", "m2"), name="Points")
    campaign = campaign_create(
        project=project, dataset=dataset, name="Points", overlap=1, annotators=[annotator]
    )
    campaign_activate(campaign=campaign)
    return campaign


def gold_url(campaign, task_id=None) -> str:
    tail = f"{task_id}/" if task_id is not None else ""
    return f"{BASE}/campaigns/{campaign.pk}/gold/{tail}"


def known_tasks():
    return sorted(Task.objects.exclude(kind=TaskKind.NORMAL).values_list("pk", "kind"))


def test_a_gold_pair_is_created_replaced_listed_and_deleted(rita, pairs):
    zulu, alpha = pair_of(pairs)
    # when zulu is named A: better overall, and B (alpha) shown on the left
    body = {
        "response_a": zulu.pk,
        "response_b": alpha.pk,
        "choices": {"overall": "a", "Factuality": "tie"},
        "b_left": True,
        "explanation": "Zulu is exact.",
    }
    created = rita.post(gold_url(pairs), body, format="json")
    # then the row is in the pair's canonical terms (A = alpha), the choices turned with it
    assert created.status_code == 201, created.json()
    row = created.json()
    assert (row["response"], row["model"]) == (alpha.pk, MODELS[1])
    assert (row["response_b"], row["model_b"], row["b_left"]) == (zulu.pk, MODELS[0], False)
    assert row["known"] == {"Factuality": "tie", "overall": "b"}
    assert row["kind"] == "gold" and row["explanation"] == "Zulu is exact."
    assert (row["served"], row["answers"], row["accuracy"]) == (0, 0, None)
    # replacing it answers 200 with the same task
    again = rita.post(
        gold_url(pairs),
        {"response_a": alpha.pk, "response_b": zulu.pk, "choices": {"overall": "b"}},
        format="json",
    )
    assert again.status_code == 200 and again.json()["task_id"] == row["task_id"]
    assert again.json()["known"] == {"overall": "b"}
    assert again.json()["b_left"] is False  # kept: b_left was not given
    listed = rita.get(gold_url(pairs)).json()
    assert listed["count"] == 1 and [r["task_id"] for r in listed["results"]] == [row["task_id"]]
    assert rita.get(gold_url(pairs, row["task_id"])).json()["known"] == {"overall": "b"}
    # deleting it
    assert rita.delete(gold_url(pairs, row["task_id"])).status_code == 204
    assert known_tasks() == []
    assert rita.get(gold_url(pairs, row["task_id"])).status_code == 404


def test_a_pointwise_gold_task_takes_scores_by_skill_name(rita, scores_campaign):
    response = Response.objects.get(
        item__dataset=scores_campaign.dataset, item__external_id="i1", model_name="m2"
    )
    created = rita.post(
        gold_url(scores_campaign),
        {
            "response": response.pk,
            "scores": {"Factuality": 4, "Readability": "N/A"},
            "tolerance": 1,
            "kind": "attention",
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    row = created.json()
    assert row["known"] == {"Factuality": "4", "Readability": "N/A"}
    assert (row["tolerance"], row["kind"], row["response_b"], row["b_left"]) == (
        1,
        "attention",
        None,
        None,
    )
    known = dict(GoldScore.objects.values_list("skill__name", "score"))
    assert known == {"Factuality": 4, "Readability": None}


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"choices": {"overall": "a"}}, "response_a", "This field is required."),
        (
            {"response": 1, "choices": {"overall": "a"}},
            "response",
            "not for a pairwise campaign",
        ),
        ({"scores": {"Factuality": 3}}, "scores", "not for a pairwise campaign"),
        ({"tolerance": 1}, "tolerance", "not for a pairwise campaign"),
        ({"choices": {"Nope": "a"}}, "choices", "not a skill of this campaign: Nope"),
        ({"choices": {"overall": "maybe"}}, "choices", "not a valid choice"),
        ({"choices": {}}, "choices", "may not be empty"),
        ({"kind": "training"}, "kind", "screening compares the scores of single responses"),
        ({"kind": "qualification"}, "kind", "gold pair or an attention check"),
        ({"b_left": "sideways"}, "b_left", "valid boolean"),
        ({"explanation": "x" * 2001}, "explanation", "no more than 2000"),
    ],
)
def test_a_bad_gold_pair_is_a_400_on_its_field_and_writes_nothing(
    rita, pairs, body, field, message
):
    zulu, alpha = pair_of(pairs)
    full = {"response_a": zulu.pk, "response_b": alpha.pk, "choices": {"overall": "a"}} | body
    if field == "response_a":
        full.pop("response_a")
    before = known_tasks()
    answer = rita.post(gold_url(pairs), full, format="json")
    assert answer.status_code == 400, answer.json()
    assert answer.json()["code"] == "invalid"
    assert message in str(answer.json()["fields"][field]), answer.json()
    assert known_tasks() == before and not GoldPreference.objects.exists()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"choices": {"overall": "a"}, "same": True}, "two different responses"),
        ({"choices": {"overall": "a"}, "other_item": True}, "same item"),
    ],
)
def test_a_pair_the_service_refuses_is_a_400_that_writes_nothing(rita, pairs, body, message):
    zulu, alpha = pair_of(pairs)
    if body.pop("same", False):
        alpha = zulu
    if body.pop("other_item", False):
        alpha = pair_of(pairs, "i1")[1]
    answer = rita.post(
        gold_url(pairs), {"response_a": zulu.pk, "response_b": alpha.pk, **body}, format="json"
    )
    assert answer.status_code == 400 and message in answer.json()["detail"]
    assert known_tasks() == []


def test_the_campaign_must_offer_the_known_choice(rita, project, tmp_path):
    campaign = make_pairwise(project, tmp_path, pair_choices=["a", "b"])
    zulu, alpha = pair_of(campaign)
    answer = rita.post(
        gold_url(campaign),
        {"response_a": zulu.pk, "response_b": alpha.pk, "choices": {"overall": "both_bad"}},
        format="json",
    )
    assert answer.status_code == 400
    assert (
        answer.json()["detail"] == "the campaign does not offer 'both_bad'; its choices are: a, b"
    )


def test_another_projects_responses_are_refused(rita, pairs, tmp_path, django_user_model):
    other = project_create(slug="elsewhere", name="Elsewhere")
    foreign = make_dataset(other, tmp_path, items=1, models=MODELS, name="Theirs")
    theirs = list(Response.objects.filter(item__dataset=foreign).order_by("model_name"))
    zulu, _ = pair_of(pairs)
    answer = rita.post(
        gold_url(pairs),
        {"response_a": zulu.pk, "response_b": theirs[0].pk, "choices": {"overall": "a"}},
        format="json",
    )
    assert answer.status_code == 400
    assert answer.json()["fields"] == {
        "response_b": ["no response with this id in the campaign's dataset"]
    }
    assert known_tasks() == []


def test_a_pointwise_campaign_refuses_pair_fields_and_screening_kinds(rita, scores_campaign):
    response = Response.objects.filter(item__dataset=scores_campaign.dataset).first()
    pair = rita.post(
        gold_url(scores_campaign),
        {"response": response.pk, "scores": {"Factuality": 3}, "choices": {"overall": "a"}},
        format="json",
    )
    assert pair.status_code == 400 and "choices" in pair.json()["fields"]
    training = rita.post(
        gold_url(scores_campaign),
        {"response": response.pk, "scores": {"Factuality": 3}, "kind": "training"},
        format="json",
    )
    assert training.status_code == 400
    assert "screening page" in training.json()["fields"]["kind"][0]
    bad_score = rita.post(
        gold_url(scores_campaign),
        {"response": response.pk, "scores": {"Factuality": 7}},
        format="json",
    )
    assert bad_score.status_code == 400 and "scores" in bad_score.json()["fields"]
    assert known_tasks() == []


def test_an_answered_gold_task_is_kept_with_a_409(rita, pairs, annotator):
    zulu, alpha = pair_of(pairs)
    task = gold_pair_set(campaign=pairs, response_a=zulu, response_b=alpha, choices={None: "a"})
    Assignment.objects.create(
        task=task,
        campaign=pairs,
        annotator=annotator,
        expires_at=task_expiry(),
        status=AssignmentStatus.SUBMITTED,
    )
    answer = rita.delete(gold_url(pairs, task.pk))
    assert answer.status_code == 409
    assert answer.json() == {
        "detail": f"task {task.pk} was already answered by 1 annotator; it is kept with their "
        "answers",
        "code": "gold_task_kept",
    }
    assert Task.objects.filter(pk=task.pk).exists()
    [listed] = rita.get(gold_url(pairs)).json()["results"]
    assert listed["served"] == 1 and listed["submitted"] == 1


def test_a_normal_task_or_another_campaigns_gold_task_is_not_found(rita, pairs, scores_campaign):
    normal = Task.objects.filter(campaign=pairs, kind=TaskKind.NORMAL).first()
    response = Response.objects.filter(item__dataset=scores_campaign.dataset).first()
    theirs = gold_task_set(
        campaign=scores_campaign,
        response=response,
        scores={Skill.objects.get(name="Factuality", project__isnull=True).pk: 3},
    )
    for task_id in (normal.pk, theirs.pk, 2**70):
        assert rita.get(gold_url(pairs, task_id)).status_code == 404
        assert rita.delete(gold_url(pairs, task_id)).status_code == 404
    assert Task.objects.filter(pk__in=[normal.pk, theirs.pk]).count() == 2


def test_annotators_get_403_and_other_projects_404(pairs, annotator, django_user_model):
    olga = django_user_model.objects.create_user("olga", password="pw")
    membership_set(project=project_create(slug="hers", name="Hers"), user=olga, role="researcher")
    zulu, alpha = pair_of(pairs)
    task = gold_pair_set(campaign=pairs, response_a=alpha, response_b=zulu, choices={None: "a"})
    body = {"response_a": alpha.pk, "response_b": zulu.pk, "choices": {"overall": "b"}}
    for client, expected in ((token_client(annotator), 403), (token_client(olga), 404)):
        assert client.get(gold_url(pairs)).status_code == expected
        posted = client.post(gold_url(pairs), body, format="json")
        assert posted.status_code == expected, posted.json()
        assert client.get(gold_url(pairs, task.pk)).status_code == expected
        assert client.delete(gold_url(pairs, task.pk)).status_code == expected
    assert list(GoldPreference.objects.values_list("choice", flat=True)) == ["a"]


def test_the_gold_endpoints_are_in_the_schema(rita):
    schema = rita.get("/api/schema/", {"format": "json"}).json()
    paths = schema["paths"]
    assert {"get", "post"} <= set(paths["/api/v1/annotation/campaigns/{id}/gold/"])
    assert {"get", "delete"} <= set(paths["/api/v1/annotation/campaigns/{id}/gold/{task_id}/"])
    fields = schema["components"]["schemas"]["CampaignGoldTaskInput"]["properties"]
    assert {"response", "scores", "response_a", "response_b", "choices", "b_left"} <= set(fields)


def test_a_pointwise_gold_task_lists_its_accuracy_and_is_removed_until_answered(
    rita, project, tmp_path, annotator
):
    from annotation.services.assignments import (
        ScoreInput,
        assignment_claim_next,
        human_score_submit,
        task_skills,
    )

    dataset = make_dataset(project, tmp_path, items=2, models=("m1", "m2"), name="Acc")
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name="Acc",
        overlap=1,
        annotators=[annotator],
        gold_rate=0.5,
    )
    campaign_activate(campaign=campaign)
    response = Response.objects.filter(item__dataset=dataset).order_by("pk").last()
    factuality = Skill.objects.get(name="Factuality", project__isnull=True).pk
    readability = Skill.objects.get(name="Readability", project__isnull=True).pk
    task = gold_task_set(
        campaign=campaign, response=response, scores={factuality: 4, readability: 2}
    )
    spare = gold_task_set(
        campaign=campaign,
        response=Response.objects.filter(item__dataset=dataset).order_by("pk").first(),
        scores={factuality: 1},
        kind=TaskKind.ATTENTION,
    )
    for _ in range(2):  # a normal task, then the gold one: 4 everywhere
        lease = assignment_claim_next(campaign=campaign, annotator=annotator)
        human_score_submit(
            assignment_id=lease.pk,
            annotator=annotator,
            scores=[ScoreInput(s.skill_id, 4) for s in task_skills(assignment=lease)],
        )
    rows = {r["task_id"]: r for r in rita.get(gold_url(campaign)).json()["results"]}
    assert (rows[task.pk]["answers"], rows[task.pk]["correct"]) == (2, 1)
    assert rows[task.pk]["accuracy"] == 0.5
    assert rows[spare.pk]["answers"] == 0 and rows[spare.pk]["accuracy"] is None
    assert rita.delete(gold_url(campaign, task.pk)).status_code == 409
    assert rita.delete(gold_url(campaign, spare.pk)).status_code == 204
    assert list(Task.objects.filter(campaign=campaign).exclude(kind="normal")) == [task]


def test_a_known_score_for_a_skill_the_item_does_not_ask_is_refused(scores_campaign):
    from django.core.exceptions import ValidationError

    response = Response.objects.filter(item__dataset=scores_campaign.dataset).first()
    other = Skill.objects.exclude(name__in=["Factuality", "Comprehension", "Readability"]).first()
    with pytest.raises(ValidationError, match=f"this item is not scored on: {other.name}"):
        gold_task_set(campaign=scores_campaign, response=response, scores={other.pk: 3})
    assert known_tasks() == []
