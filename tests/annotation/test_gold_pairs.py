"""Gold and attention pairs of a pairwise campaign: the service's checks (canonical A/B,
questions asked, choices offered, screening kinds refused), removal, the campaign page's
form and list, and the annotators' feedback by the sides they saw."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from annotation.campaigns.selectors import campaign_gold_task_list
from annotation.campaigns.services import (
    GoldTaskKeptError,
    campaign_activate,
    campaign_create,
    gold_pair_set,
    gold_task_remove,
)
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignMode,
    GoldPreference,
    HumanPreference,
    Response,
    Skill,
    Task,
    TaskKind,
)
from annotation.services.assignments import assignment_claim_next
from annotation.services.preferences import PreferenceInput, human_preference_submit
from tests.annotation.test_annotate_api import make_dataset
from tests.annotation.test_pairwise_submit import answers

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}
# "zulu" sorts after "alpha": picking zulu as A on a form is the pair's B, stored
MODELS = ("zulu-model-secret", "alpha-model-secret")


def make_pairwise(project, tmp_path, annotators=(), **options) -> Campaign:
    dataset = make_dataset(project, tmp_path, items=3, models=MODELS, name="Pairs")
    options.setdefault("pair_choices", ["a", "b", "tie", "both_bad"])
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name="Pairs",
        overlap=1,
        annotators=list(annotators),
        mode=CampaignMode.PAIRWISE,
        **options,
    )
    campaign_activate(campaign=campaign)
    return Campaign.objects.get(pk=campaign.pk)


@pytest.fixture
def campaign(project, tmp_path, annotator) -> Campaign:
    return make_pairwise(project, tmp_path, [annotator])


def pair_of(campaign: Campaign, item: str = "i0") -> tuple[Response, Response]:
    """(zulu's, alpha's) responses to the item: the pair in the order a person might name it."""
    zulu = Response.objects.get(
        item__dataset=campaign.dataset, item__external_id=item, model_name=MODELS[0]
    )
    alpha = Response.objects.get(
        item__dataset=campaign.dataset, item__external_id=item, model_name=MODELS[1]
    )
    return zulu, alpha


def skill(name: str) -> int:
    return Skill.objects.get(name=name, project__isnull=True).pk


def url(name: str, *args) -> str:
    return reverse(f"annotation:{name}", args=args)


# --- the service ----------------------------------------------------------------------------------


def test_a_gold_pair_is_stored_in_canonical_order_with_its_choices_and_side_turned(campaign):
    zulu, alpha = pair_of(campaign)
    # when a researcher names zulu as A, says A is better overall and B on Factuality,
    # and shows B (alpha) on the left
    task = gold_pair_set(
        campaign=campaign,
        response_a=zulu,
        response_b=alpha,
        choices={None: "a", skill("Factuality"): "b", skill("Readability"): "tie"},
        b_left=True,
        explanation="Zulu answers the question.",
    )
    # then the task is stored as every pair task is: A = alpha (sorts first), B = zulu
    assert (task.response_id, task.response_b_id) == (alpha.pk, zulu.pk)
    # the choices and the side turn with it: still zulu better overall, shown on the right
    known = dict(GoldPreference.objects.filter(task=task).values_list("skill_id", "choice"))
    assert known == {None: "b", skill("Factuality"): "a", skill("Readability"): "tie"}
    assert task.b_left is False  # B (zulu) is on the right: alpha, the old B, on the left
    assert not Task.objects.filter(
        campaign=campaign, kind=TaskKind.NORMAL, response=alpha, response_b=zulu
    ).exists()


def test_setting_a_gold_pair_again_replaces_its_known_choices(campaign):
    zulu, alpha = pair_of(campaign)
    first = gold_pair_set(campaign=campaign, response_a=alpha, response_b=zulu, choices={None: "a"})
    again = gold_pair_set(
        campaign=campaign, response_a=zulu, response_b=alpha, choices={None: "tie"}
    )
    assert again.pk == first.pk
    assert list(GoldPreference.objects.filter(task=first).values_list("choice", flat=True)) == [
        "tie"
    ]


@pytest.mark.parametrize(
    ("options", "kwargs", "message"),
    [
        ({}, {"kind": TaskKind.TRAINING}, "cannot be a training task: screening compares"),
        ({}, {"kind": TaskKind.QUALIFICATION}, "cannot be a qualification task"),
        ({"pair_choices": ["a", "b"]}, {"choices": {None: "tie"}}, "does not offer 'tie'"),
        ({"pair_ask": "skills"}, {"choices": {None: "a"}}, "there is no overall question"),
        ({"pair_ask": "overall"}, {"choices": {"Factuality": "a"}}, "does not ask: Factuality"),
        ({}, {"choices": {}}, "at least one known choice"),
    ],
)
def test_a_gold_pair_the_campaign_could_not_ask_is_refused_and_nothing_changes(
    project, tmp_path, options, kwargs, message
):
    campaign = make_pairwise(project, tmp_path, **options)
    zulu, alpha = pair_of(campaign)
    before = list(Task.objects.order_by("pk").values_list("pk", "kind"))
    if "choices" in kwargs and "Factuality" in kwargs["choices"]:
        kwargs = {"choices": {skill("Factuality"): "a"}}
    with pytest.raises(ValidationError, match=message):
        gold_pair_set(
            campaign=campaign,
            response_a=zulu,
            response_b=alpha,
            **{"choices": {None: "a"}, **kwargs},
        )
    assert list(Task.objects.order_by("pk").values_list("pk", "kind")) == before
    assert not GoldPreference.objects.exists()


def test_a_skill_the_pairs_item_does_not_ask_is_refused(campaign, project):
    zulu, alpha = pair_of(campaign)
    other = Skill.objects.exclude(name__in=["Factuality", "Comprehension", "Readability"]).first()
    with pytest.raises(ValidationError, match=f"does not ask: {other.name}"):
        gold_pair_set(campaign=campaign, response_a=zulu, response_b=alpha, choices={other.pk: "a"})


def test_a_pair_is_one_kind_of_known_task_at_a_time(campaign):
    zulu, alpha = pair_of(campaign)
    gold = gold_pair_set(campaign=campaign, response_a=zulu, response_b=alpha, choices={None: "a"})
    with pytest.raises(ValidationError, match=f"already a gold .* \\(task {gold.pk}\\)"):
        gold_pair_set(
            campaign=campaign,
            response_a=alpha,
            response_b=zulu,
            choices={None: "a"},
            kind=TaskKind.ATTENTION,
        )


def test_the_shown_order_of_a_served_gold_pair_is_kept(campaign, annotator):
    zulu, alpha = pair_of(campaign)
    task = gold_pair_set(
        campaign=campaign, response_a=alpha, response_b=zulu, choices={None: "a"}, b_left=False
    )
    Assignment.objects.create(
        task=task, campaign=campaign, annotator=annotator, expires_at=task_expiry()
    )
    with pytest.raises(ValidationError, match="shown order is kept"):
        gold_pair_set(
            campaign=campaign, response_a=alpha, response_b=zulu, choices={None: "a"}, b_left=True
        )
    task.refresh_from_db()
    assert task.b_left is False


def task_expiry():
    from django.utils import timezone

    return timezone.now() + timezone.timedelta(minutes=5)


def test_an_unanswered_gold_pair_is_removed_an_answered_or_held_one_kept(campaign, annotator):
    zulu, alpha = pair_of(campaign)
    task = gold_pair_set(campaign=campaign, response_a=zulu, response_b=alpha, choices={None: "a"})
    lease = Assignment.objects.create(
        task=task, campaign=campaign, annotator=annotator, expires_at=task_expiry()
    )
    with pytest.raises(GoldTaskKeptError, match="working on task"):
        gold_task_remove(campaign=campaign, task_id=task.pk)
    Assignment.objects.filter(pk=lease.pk).update(status=AssignmentStatus.SUBMITTED)
    with pytest.raises(GoldTaskKeptError, match="answered by 1 annotator;"):
        gold_task_remove(campaign=campaign, task_id=task.pk)
    assert Task.objects.filter(pk=task.pk).exists()
    # an expired lease does not keep it
    Assignment.objects.filter(pk=lease.pk).update(status=AssignmentStatus.EXPIRED)
    gold_task_remove(campaign=campaign, task_id=task.pk)
    assert not Task.objects.filter(pk=task.pk).exists()
    # and activating again gives the pair its normal task back
    campaign_activate(campaign=campaign)
    assert Task.objects.filter(
        campaign=campaign, kind=TaskKind.NORMAL, response=alpha, response_b=zulu
    ).exists()


def test_removal_names_only_gold_tasks_of_the_campaign(campaign):
    normal = Task.objects.filter(campaign=campaign).first()
    with pytest.raises(ValidationError, match="no such gold or attention task"):
        gold_task_remove(campaign=campaign, task_id=normal.pk)
    assert Task.objects.filter(pk=normal.pk).exists()


# --- the list: known choices and accuracy so far ------------------------------------------------


def test_the_gold_list_shows_each_pairs_known_choices_and_the_annotators_accuracy(
    project, tmp_path, django_user_model
):
    people = [django_user_model.objects.create_user(f"p{i}", password="x") for i in range(2)]
    campaign = make_pairwise(project, tmp_path, people, gold_rate=0.5)
    zulu, alpha = pair_of(campaign)
    task = gold_pair_set(
        campaign=campaign,
        response_a=alpha,
        response_b=zulu,
        choices={None: "a", skill("Factuality"): "b"},
        kind=TaskKind.ATTENTION,
    )
    # each person answers two tasks: the second is the attention pair; p0 answers "a"
    # everywhere (right overall, wrong on Factuality), p1 "b" (wrong, right)
    for person, choice in zip(people, ("a", "b"), strict=True):
        for _ in range(2):
            lease = assignment_claim_next(campaign=campaign, annotator=person)
            human_preference_submit(
                assignment_id=lease.pk, annotator=person, preferences=answers(lease, choice)
            )
    [row] = campaign_gold_task_list(campaign=campaign)
    assert row.task_id == task.pk and row.is_pair and row.kind == "attention"
    assert (row.model_name, row.model_b) == (MODELS[1], MODELS[0])
    assert row.known == [("Factuality", "b"), ("overall", "a")]
    assert (row.served, row.submitted, row.answers, row.correct) == (2, 2, 4, 2)
    assert row.accuracy == 0.5


# --- the campaign page ----------------------------------------------------------------------------


def pair_data(campaign, **extra):
    data = {
        "item": "i1",
        "model_a": MODELS[0],
        "model_b": MODELS[1],
        "kind": "gold",
        "shown": "b_left",
        "explanation": "Zulu **names** the year.",
        f"choice_{skill('Factuality')}": "a",
        "choice_overall": "a",
    }
    data.update(extra)
    return data


def test_a_pairwise_campaign_page_offers_the_pair_form_and_a_pointwise_one_the_response_form(
    researcher_client, campaign
):
    body = researcher_client.get(url("campaign-detail", campaign.pk)).content.decode()
    assert "Mark a pair as gold or an attention check" in body
    assert 'name="model_a"' in body and 'name="choice_overall"' in body
    assert f'name="choice_{skill("Factuality")}"' in body
    assert 'name="model_name"' not in body and 'name="tolerance"' not in body
    # the choices offered are the campaign's
    assert 'value="both_bad"' in body


def test_a_researcher_sets_a_gold_pair_on_the_page(researcher_client, campaign):
    response = researcher_client.post(url("campaign-gold-set", campaign.pk), pair_data(campaign))
    assert response.status_code == 302
    task = Task.objects.get(campaign=campaign, kind=TaskKind.GOLD)
    zulu, alpha = pair_of(campaign, "i1")
    # zulu was picked as A and shown right of... B on the left: alpha on the left
    assert (task.response_id, task.response_b_id, task.b_left) == (alpha.pk, zulu.pk, False)
    known = dict(GoldPreference.objects.filter(task=task).values_list("skill_id", "choice"))
    assert known == {None: "b", skill("Factuality"): "b"}
    assert GoldPreference.objects.filter(task=task).first().explanation == (
        "Zulu **names** the year."
    )
    page = researcher_client.get(url("campaign-detail", campaign.pk)).content.decode()
    assert 'id="gold-list"' in page and "Factuality: b" in page and "overall: b" in page


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model_b": MODELS[0]}, "pick two different models"),
        ({"item": "nope"}, "no response of"),
        ({"choice_overall": "", "choice_FACT": ""}, "at least one question"),
        ({"kind": "training"}, "training and qualification tasks are single responses"),
        ({"choice_overall": "maybe"}, "Select a valid choice"),
    ],
)
def test_pair_form_errors_are_answered_200_and_nothing_is_saved(
    researcher_client, campaign, changes, message
):
    data = pair_data(campaign)
    if "choice_FACT" in changes:
        changes = {"choice_overall": "", f"choice_{skill('Factuality')}": ""}
    data.update(changes)
    before = list(Task.objects.order_by("pk").values_list("pk", "kind"))
    response = researcher_client.post(url("campaign-gold-set", campaign.pk), data)
    assert response.status_code == 200 and b"<html" in response.content
    assert message in response.content.decode()
    assert list(Task.objects.order_by("pk").values_list("pk", "kind")) == before
    assert not GoldPreference.objects.exists()


def test_a_service_refusal_is_shown_on_the_form(researcher_client, campaign):
    researcher_client.post(url("campaign-gold-set", campaign.pk), pair_data(campaign))
    gold = Task.objects.get(campaign=campaign, kind=TaskKind.GOLD)
    # the same pair again, as an attention check
    data = pair_data(campaign, kind="attention", model_a=MODELS[1], model_b=MODELS[0])
    response = researcher_client.post(url("campaign-gold-set", campaign.pk), data, headers=HX)
    body = response.content.decode()
    assert (
        response.status_code == 200
        and f"already a gold pair of the campaign (task {gold.pk})" in body
    )
    assert not Task.objects.filter(campaign=campaign, kind=TaskKind.ATTENTION).exists()


def test_the_pair_form_answers_htmx_with_its_section(researcher_client, campaign):
    response = researcher_client.post(
        url("campaign-gold-set", campaign.pk), pair_data(campaign), headers=HX
    )
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body
    assert 'id="gold-tasks"' in body and 'id="gold-list"' in body and "is now a gold" in body


def test_the_gold_pages_are_404_for_non_members_403_for_annotators_and_refuse_get(
    outsider_client, annotator_client, researcher_client, campaign
):
    zulu, alpha = pair_of(campaign)
    task = gold_pair_set(campaign=campaign, response_a=zulu, response_b=alpha, choices={None: "a"})
    for name, data in (
        ("campaign-gold-set", pair_data(campaign)),
        ("campaign-gold-remove", {"task": task.pk}),
    ):
        target = url(name, campaign.pk)
        assert outsider_client.post(target, data).status_code == 404
        assert annotator_client.post(target, data).status_code == 403
        assert researcher_client.get(target).status_code == 405
    assert list(Task.objects.filter(campaign=campaign).exclude(kind="normal")) == [task]
    assert GoldPreference.objects.count() == 1


def test_a_gold_pair_is_removed_from_the_page_until_someone_answers_it(
    researcher_client, campaign, annotator
):
    zulu, alpha = pair_of(campaign)
    task = gold_pair_set(campaign=campaign, response_a=zulu, response_b=alpha, choices={None: "a"})
    kept = gold_pair_set(
        campaign=campaign,
        response_a=pair_of(campaign, "i2")[0],
        response_b=pair_of(campaign, "i2")[1],
        choices={None: "b"},
    )
    Assignment.objects.create(
        task=kept,
        campaign=campaign,
        annotator=annotator,
        expires_at=task_expiry(),
        status=AssignmentStatus.SUBMITTED,
    )
    removed = researcher_client.post(
        url("campaign-gold-remove", campaign.pk), {"task": task.pk}, headers=HX
    )
    assert removed.status_code == 200 and f"Task {task.pk} removed." in removed.content.decode()
    assert not Task.objects.filter(pk=task.pk).exists()
    refused = researcher_client.post(
        url("campaign-gold-remove", campaign.pk), {"task": kept.pk}, headers=HX
    )
    assert "already answered by 1 annotator" in refused.content.decode()
    assert Task.objects.filter(pk=kept.pk).exists()
    # without htmx: back to the page, with the reason as a message
    full = researcher_client.post(
        url("campaign-gold-remove", campaign.pk), {"task": kept.pk}, follow=True
    )
    assert b"already answered by 1 annotator" in full.content


def test_another_campaigns_gold_task_cannot_be_removed_through_this_one(
    researcher_client, campaign, project, tmp_path
):
    other = campaign_create(
        project=project, dataset=campaign.dataset, name="Other", mode=CampaignMode.PAIRWISE
    )
    campaign_activate(campaign=other)
    zulu, alpha = pair_of(other)
    task = gold_pair_set(campaign=other, response_a=zulu, response_b=alpha, choices={None: "a"})
    response = researcher_client.post(
        url("campaign-gold-remove", campaign.pk), {"task": task.pk}, follow=True
    )
    assert b"no such gold or attention task" in response.content
    assert Task.objects.filter(pk=task.pk).exists()


# --- feedback to annotators ---------------------------------------------------------------------


def held(campaign, annotator) -> Assignment:
    return Assignment.objects.select_related("task").get(
        campaign=campaign, annotator=annotator, status="active"
    )


def pref_post(assignment, side: str) -> dict:
    q = answers(assignment)
    keys = ["overall" if a.skill_id is None else str(a.skill_id) for a in q]
    return {f"pref-{k}": side for k in keys} | {"active_ms": "4000"}


def reach_gold(client, campaign, annotator) -> Assignment:
    client.get(url("annotate", campaign.pk))
    first = held(campaign, annotator)
    client.post(url("annotate-submit", first.pk), pref_post(first, "tie"), headers=HX)
    gold = held(campaign, annotator)
    assert gold.task.kind == TaskKind.GOLD
    return gold


@pytest.mark.parametrize("b_left", [False, True])
def test_gold_pair_feedback_speaks_of_the_sides_the_annotator_saw(
    annotator_client, annotator, project, tmp_path, b_left
):
    campaign = make_pairwise(project, tmp_path, [annotator], gold_rate=0.5, gold_feedback=True)
    zulu, alpha = pair_of(campaign, "i2")
    # known: alpha (the pair's A) is better overall; zulu on Factuality
    task = gold_pair_set(
        campaign=campaign,
        response_a=alpha,
        response_b=zulu,
        choices={None: "a", skill("Factuality"): "b"},
        b_left=b_left,
        explanation="Alpha names the year<script>alert(1)</script>; zulu's *reasoning* is better.",
    )
    gold = reach_gold(annotator_client, campaign, annotator)
    assert gold.task_id == task.pk
    # when the annotator prefers the left response everywhere
    response = annotator_client.post(
        url("annotate-submit", gold.pk), pref_post(gold, "left"), headers=HX
    )
    body = response.content.decode()
    # then the feedback table names sides: alpha is on the left unless B (zulu) is
    alpha_side, zulu_side = ("Right (B)", "Left (A)") if b_left else ("Left (A)", "Right (B)")
    rows = body[body.index("data-gold-feedback") :]
    overall = rows[rows.index("<td>Overall</td>") :].split("</tr>")[0]
    factuality = rows[rows.index("<td>Factuality</td>") :].split("</tr>")[0]
    assert f"{alpha_side} is better" in overall.split("</td>")[2]  # expected
    assert f"{zulu_side} is better" in factuality.split("</td>")[2]
    assert "Left (A) is better" in overall.split("</td>")[1]  # theirs: the left one
    assert ("✓ matches" in overall) is (not b_left)
    assert ("✓ matches" in factuality) is b_left
    assert "Left and right are the sides you saw" in body
    # the explanation is rendered as sanitised Markdown; no model name anywhere
    assert "<em>reasoning</em>" in body and "<script>alert(1)" not in body
    for name in MODELS:
        assert name not in body
    assert f'hx-get="{url("annotate", campaign.pk)}"' in body
    # their answer is stored in the pair's terms
    overall_pref = HumanPreference.objects.get(assignment=gold, skill=None)
    assert overall_pref.choice == ("b" if b_left else "a")


def test_without_gold_feedback_a_gold_pair_moves_on_like_any_task(
    annotator_client, annotator, project, tmp_path
):
    campaign = make_pairwise(project, tmp_path, [annotator], gold_rate=0.5)
    zulu, alpha = pair_of(campaign, "i2")
    gold_pair_set(
        campaign=campaign,
        response_a=alpha,
        response_b=zulu,
        choices={None: "a"},
        explanation="secret explanation",
    )
    gold = reach_gold(annotator_client, campaign, annotator)
    response = annotator_client.post(
        url("annotate-submit", gold.pk), pref_post(gold, "left"), headers=HX
    )
    body = response.content.decode()
    assert "Saved." in body and "secret explanation" not in body
    assert "data-gold-feedback" not in body


def test_a_normal_pair_never_gets_feedback(annotator_client, annotator, project, tmp_path):
    campaign = make_pairwise(project, tmp_path, [annotator], gold_feedback=True)
    annotator_client.get(url("annotate", campaign.pk))
    lease = held(campaign, annotator)
    response = annotator_client.post(
        url("annotate-submit", lease.pk), pref_post(lease, "left"), headers=HX
    )
    assert "data-gold-feedback" not in response.content.decode()
    assert HumanPreference.objects.filter(assignment=lease).exists()


def test_feedback_compares_only_the_questions_with_a_known_choice(annotator, project, tmp_path):
    from annotation.annotate.selectors import gold_feedback_for_assignment

    campaign = make_pairwise(project, tmp_path, [annotator], gold_rate=1.0 / 2)
    zulu, alpha = pair_of(campaign, "i2")
    task = gold_pair_set(
        campaign=campaign, response_a=alpha, response_b=zulu, choices={None: "tie"}
    )
    lease = Assignment.objects.create(
        task=task, campaign=campaign, annotator=annotator, expires_at=task_expiry()
    )
    human_preference_submit(
        assignment_id=lease.pk,
        annotator=annotator,
        preferences=[PreferenceInput(p.skill_id, "tie") for p in answers(lease)],
    )
    lease.refresh_from_db()
    feedback = gold_feedback_for_assignment(assignment=lease)
    assert feedback is not None and feedback.pair and feedback.all_agree
    assert [(r.skill_name, r.given, r.known) for r in feedback.rows] == [("Overall", "Tie", "Tie")]
