"""The annotator's pages: "My tasks" and the scoring card (htmx), blind by construction."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from annotation.campaigns.services import (
    campaign_activate,
    campaign_create,
    campaign_set_status,
    gold_task_set,
)
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import (
    AnnotatorExpertise,
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignStatus,
    Domain,
    HumanScore,
    Response,
    Task,
    TaskKind,
    UploadSource,
    UploadStatus,
)
from annotation.services.assignments import assignment_claim_next, task_skills

SKILLS = ["Factuality", "Comprehension", "Readability"]
# Never shown to annotators; the texts below do not contain it, so any hit is a leak.
MODEL = "secret-model-7b"
HX = {"HX-Request": "true"}


def build_dataset(project, tmp_path, *, texts: list[str], name: str = "Annotate set"):
    """One item per text, each answered once by MODEL, with a reference and a checklist."""
    rows = [
        {
            "id": f"q{i}",
            "instruction": f"Question **number {i}**",
            "reference": f"Reference answer {i}",
            "skills": SKILLS,
            "domains": ["History"],
            "difficulty": 2,
            "checklist": {"Factuality": [f"names the year of event {i}"]},
            "responses": [{"model": MODEL, "text": text}],
        }
        for i, text in enumerate(texts)
    ]
    path = tmp_path / f"{name.replace(' ', '-')}.jsonl"
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


def build_campaign(project, dataset, *, annotators=(), groups=(), activate=True, **options):
    options.setdefault("overlap", 2)
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name=options.pop("name", "Scoring round"),
        annotators=annotators,
        groups=groups,
        instructions=options.pop("instructions", "Read the **whole** response first."),
        **options,
    )
    if activate:
        campaign_activate(campaign=campaign)
    campaign.refresh_from_db()
    return campaign


def score_post(assignment, value="4", *, skip=(), active_ms="12345"):
    data = {"active_ms": active_ms}
    for skill in task_skills(assignment=assignment):
        if skill.skill_id in skip:
            continue
        data[f"score-{skill.skill_id}"] = value
        data[f"rationale-{skill.skill_id}"] = f"because {skill.name}"
        data[f"time-{skill.skill_id}"] = "2500"
    return data


def card_assignment_id(response) -> int | None:
    """The assignment a card posts its scores for (htmx partials carry no test context)."""
    found = re.search(rb'hx-post="/assignments/(\d+)/submit/"', response.content)
    return int(found.group(1)) if found else None


def current(campaign, user) -> Assignment:
    return Assignment.objects.get(campaign=campaign, annotator=user, status=AssignmentStatus.ACTIVE)


@pytest.fixture
def dataset(project, tmp_path):
    return build_dataset(project, tmp_path, texts=[f"Answer text {i}" for i in range(4)])


@pytest.fixture
def campaign(project, dataset, annotator):
    return build_campaign(project, dataset, annotators=[annotator])


@pytest.fixture
def bob(django_user_model, project):
    """Another annotator of the project who is not in the campaign's pool."""
    from annotation.models import ProjectRole
    from annotation.services.projects import membership_set

    user = django_user_model.objects.create_user("bob", password="pw-bob")
    membership_set(project=project, user=user, role=ProjectRole.ANNOTATOR)
    return user


@pytest.fixture
def bob_client(client, bob):
    client.force_login(bob)
    return client


def annotate_url(campaign):
    return reverse("annotation:annotate", args=[campaign.pk])


def submit_url(assignment):
    return reverse("annotation:annotate-submit", args=[assignment.pk])


def skip_url(assignment):
    return reverse("annotation:annotate-skip", args=[assignment.pk])


# --- My tasks --------------------------------------------------------------------------------


def test_my_tasks_lists_the_pool_campaigns_with_own_progress(annotator_client, campaign):
    response = annotator_client.get(reverse("annotation:my-campaigns"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "Scoring round" in body and annotate_url(campaign) in body and "Start" in body
    assert MODEL not in body
    rows = response.context["rows"]
    assert [(r.done, r.available, r.quota) for r in rows] == [(0, 4, None)]


def test_my_tasks_counts_submissions_and_offers_to_continue(annotator_client, annotator, campaign):
    # given one task submitted and the next one open
    annotator_client.get(annotate_url(campaign))
    first = current(campaign, annotator)
    annotator_client.post(submit_url(first), score_post(first), headers=HX)
    # when
    rows = annotator_client.get(reverse("annotation:my-campaigns")).context["rows"]
    # then
    assert (rows[0].done, rows[0].available, rows[0].has_open_task) == (1, 2, True)
    assert b"Continue" in annotator_client.get(reverse("annotation:my-campaigns")).content


def test_my_tasks_caps_availability_at_the_quota(annotator_client, project, dataset, annotator):
    build_campaign(project, dataset, annotators=[annotator], quota_per_annotator=2)
    rows = annotator_client.get(reverse("annotation:my-campaigns")).context["rows"]
    assert (rows[0].quota, rows[0].available) == (2, 2)


def test_my_tasks_counts_only_routed_tasks_for_domain_experts(
    annotator_client, project, dataset, annotator
):
    # given alice declared Math only, and the items are all History
    AnnotatorExpertise.objects.create(
        user=annotator, domain=Domain.objects.get(name="Math", project__isnull=True)
    )
    build_campaign(project, dataset, annotators=[annotator], name="Routed", route_by_domain=True)
    build_campaign(project, dataset, annotators=[annotator], name="Open to all")
    # when
    rows = annotator_client.get(reverse("annotation:my-campaigns")).context["rows"]
    # then
    assert {r.name: (r.available, r.can_start) for r in rows} == {
        "Routed": (0, False),
        "Open to all": (4, True),
    }


def test_my_tasks_hides_campaigns_of_other_pools_and_drafts(
    bob_client, annotator_client, project, dataset, campaign
):
    # bob is an annotator of the project, but not in the pool: a role alone is not enough
    assert b"Scoring round" not in bob_client.get(reverse("annotation:my-campaigns")).content
    build_campaign(
        project, dataset, annotators=[campaign.annotators.get()], name="Draft one", activate=False
    )
    assert b"Draft one" not in annotator_client.get(reverse("annotation:my-campaigns")).content


def test_my_tasks_includes_campaigns_reached_through_a_group(bob, bob_client, project, dataset):
    group = Group.objects.create(name="crowd")
    bob.groups.add(group)
    build_campaign(project, dataset, groups=[group], name="Group round")
    assert b"Group round" in bob_client.get(reverse("annotation:my-campaigns")).content


def test_my_tasks_refuses_post(annotator_client, campaign):
    assert annotator_client.post(reverse("annotation:my-campaigns")).status_code == 405


def test_my_tasks_renders_the_list_as_a_partial_for_htmx(annotator_client, campaign):
    url = reverse("annotation:my-campaigns")
    full = annotator_client.get(url)
    partial = annotator_client.get(url, headers=HX)
    assert b"<html" in full.content and b'id="campaign-list"' in full.content
    assert b"<html" not in partial.content and b'id="campaign-list"' in partial.content


def test_my_tasks_query_count_does_not_grow_with_campaigns(
    annotator_client, project, dataset, annotator, django_assert_max_num_queries
):
    for n in range(5):
        build_campaign(project, dataset, annotators=[annotator], name=f"Round {n}")
    with django_assert_max_num_queries(5):  # 4 today, whatever the number of campaigns
        response = annotator_client.get(reverse("annotation:my-campaigns"))
    assert len(response.context["rows"]) == 5


# --- the scoring page ----------------------------------------------------------------------


def test_the_scoring_page_shows_the_task_and_leases_it(annotator_client, annotator, campaign):
    # when
    response = annotator_client.get(annotate_url(campaign))
    # then
    assert response.status_code == 200
    body = response.content.decode()
    assignment = current(campaign, annotator)
    assert "<strong>number 0</strong>" in body  # the item's instruction, as Markdown
    assert "Answer text 0" in body and "Reference answer 0" in body
    assert "names the year of event 0" in body  # the item's checklist
    assert "Read the <strong>whole</strong> response first." in body  # campaign instructions
    for skill in task_skills(assignment=assignment):
        assert skill.name in body and skill.criterion in body
        assert f'name="score-{skill.skill_id}" value="na"' in body
        assert f'name="rationale-{skill.skill_id}"' in body
    assert f'hx-post="{submit_url(assignment)}"' in body


def test_the_scoring_page_is_404_outside_the_pool(
    bob_client, outsider_client, admin_client, campaign
):
    assert bob_client.get(annotate_url(campaign)).status_code == 404
    assert outsider_client.get(annotate_url(campaign)).status_code == 404
    assert admin_client.get(annotate_url(campaign)).status_code == 404
    assert not Assignment.objects.exists()


def test_the_scoring_page_sends_anonymous_visitors_to_login(client, campaign):
    response = client.get(annotate_url(campaign))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_the_scoring_page_refuses_post(annotator_client, campaign):
    assert annotator_client.post(annotate_url(campaign)).status_code == 405


def test_the_scoring_page_renders_only_the_card_for_htmx(annotator_client, campaign):
    full = annotator_client.get(annotate_url(campaign))
    partial = annotator_client.get(annotate_url(campaign), headers=HX)
    assert b"<html" in full.content and b"Campaign instructions" in full.content
    assert b"<html" not in partial.content and b"Campaign instructions" not in partial.content
    assert partial.content.lstrip().startswith(b'<section id="task-card"')
    # a reload resumes the same lease
    assert card_assignment_id(full) == card_assignment_id(partial) is not None


def test_the_scoring_page_is_blind_to_models_and_judges(annotator_client, annotator, campaign):
    body = annotator_client.get(annotate_url(campaign)).content.decode()
    assert MODEL not in body
    response = Response.objects.get(pk=current(campaign, annotator).task.response_id)
    assert response.model_name == MODEL  # the name is really there to leak
    for word in ("gold", "attention", "repeat", "judge", "model"):
        assert word not in body.lower(), word


def test_the_reference_answer_is_hidden_when_the_campaign_says_so(
    annotator_client, project, dataset, annotator
):
    campaign = build_campaign(project, dataset, annotators=[annotator], show_reference=False)
    body = annotator_client.get(annotate_url(campaign)).content.decode()
    assert "Reference answer 0" not in body and "Answer text 0" in body


def test_a_hostile_response_renders_inert(annotator_client, project, tmp_path, annotator):
    hostile = "<script>alert(1)</script> <img src=x onerror=alert(1)> [x](javascript:alert(1))"
    dataset = build_dataset(project, tmp_path, texts=[hostile], name="Hostile")
    campaign = build_campaign(project, dataset, annotators=[annotator])
    body = annotator_client.get(annotate_url(campaign)).content.decode()
    box = body[body.index("data-response>") : body.index("</section>", body.index("data-response"))]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in box
    assert "<script" not in box and "<img" not in box and 'href="javascript' not in box


def test_the_scoring_page_query_count_is_bounded(
    annotator_client, annotator, campaign, django_assert_max_num_queries
):
    # the first visit claims a task (lock, slot, lease), a reload resumes it
    with django_assert_max_num_queries(20):  # 18 today, 2 of them savepoints
        assert annotator_client.get(annotate_url(campaign)).status_code == 200
    with django_assert_max_num_queries(13):  # 12 today
        assert annotator_client.get(annotate_url(campaign), headers=HX).status_code == 200


def test_a_page_submission_and_its_next_card_run_a_fixed_number_of_statements(
    annotator_client, annotator, campaign
):
    """The participants' hot path (issue 33): the submit and the next card in one request.
    The next card is read as the JSON API's card is (one statement with its pinned skills),
    not through the ORM plus the skills' own statement."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    annotator_client.get(annotate_url(campaign))  # the first card (warm caches)
    annotator_client.post(
        submit_url(current(campaign, annotator)),
        score_post(current(campaign, annotator)),
        headers=HX,
    )
    task = current(campaign, annotator)
    data = score_post(task)
    with CaptureQueriesContext(connection) as counted:
        response = annotator_client.post(submit_url(task), data, headers=HX)
    assert b"Saved." in response.content and card_assignment_id(response) is not None
    sqls = [q["sql"] for q in counted.captured_queries]
    # no ORM read of the claimed assignment and no separate read of its pinned skills
    assert connection.vendor != "postgresql" or not any(
        "campaignitempin" in q.lower() and q.lstrip().upper().startswith("SELECT SKILLS")
        for q in sqls
    ), sqls
    # the submission's first round takes the assignment as the view read it: read once
    assert not any(q.lstrip().startswith("SELECT a.annotator_id, a.status") for q in sqls), sqls
    limit = PAGE_SUBMIT_STATEMENTS[connection.vendor]
    assert len(sqls) <= limit, sqls


#: session, user, the assignment (which the submission's first round reads too), the
#: submission's write (savepoints in a test), the claim, the card with the progress's counts
#: (PostgreSQL: 14, then 13 with the submission's own read and 12 with the progress's own);
#: SQLite runs its steps as separate statements, the progress's counts too
PAGE_SUBMIT_STATEMENTS = {"postgresql": 10, "sqlite": 17}


def test_a_campaign_with_nothing_left_shows_the_all_done_card(
    annotator_client, project, tmp_path, annotator
):
    dataset = build_dataset(project, tmp_path, texts=["only one"], name="Tiny")
    campaign = build_campaign(project, dataset, annotators=[annotator])
    annotator_client.get(annotate_url(campaign))
    first = current(campaign, annotator)
    # when the last task is submitted
    response = annotator_client.post(submit_url(first), score_post(first), headers=HX)
    # then
    assert response.status_code == 200
    assert b"All done for now" in response.content and b"data-annotate-form" not in response.content


def test_a_paused_campaign_says_so(annotator_client, campaign):
    campaign_set_status(campaign=campaign, status=CampaignStatus.PAUSED)
    body = annotator_client.get(annotate_url(campaign)).content
    assert b"paused" in body and b"data-annotate-form" not in body


# --- submit --------------------------------------------------------------------------------


def test_submit_records_the_scores_and_returns_the_next_card(annotator_client, annotator, campaign):
    annotator_client.get(annotate_url(campaign))
    first = current(campaign, annotator)
    data = score_post(first)
    na_skill = task_skills(assignment=first)[1].skill_id
    data[f"score-{na_skill}"] = "na"
    # when
    response = annotator_client.post(submit_url(first), data, headers=HX)
    # then the scores are stored with their times
    assert response.status_code == 200
    rows = HumanScore.objects.filter(assignment=first)
    assert rows.count() == 3
    assert {(r.score, r.is_na) for r in rows} == {(4, False), (None, True)}
    assert all(r.time_ms == 2500 and r.rationale.startswith("because") for r in rows)
    first.refresh_from_db()
    assert first.status == AssignmentStatus.SUBMITTED and first.active_ms == 12345
    # and the answer is the next task's card, not a page
    nxt = current(campaign, annotator)
    assert nxt.pk != first.pk
    assert b"<html" not in response.content
    assert f'hx-post="{submit_url(nxt)}"'.encode() in response.content
    assert b"Saved." in response.content


def test_an_incomplete_submission_is_answered_on_the_card_and_saves_nothing(
    annotator_client, annotator, campaign
):
    annotator_client.get(annotate_url(campaign))
    first = current(campaign, annotator)
    missing = task_skills(assignment=first)[2]
    # when
    response = annotator_client.post(
        submit_url(first), score_post(first, "2", skip={missing.skill_id}), headers=HX
    )
    # then
    assert response.status_code == 200
    assert f"Please score: {missing.name}".encode() in response.content
    assert not HumanScore.objects.exists()
    assert Assignment.objects.get(pk=first.pk).status == AssignmentStatus.ACTIVE
    # and what was already chosen and written is still there
    assert response.content.count(b'value="2" checked') == 2
    assert b"because" in response.content
    assert f'hx-post="{submit_url(first)}"'.encode() in response.content


def test_an_out_of_range_score_is_refused_on_the_card(annotator_client, annotator, campaign):
    annotator_client.get(annotate_url(campaign))
    first = current(campaign, annotator)
    response = annotator_client.post(submit_url(first), score_post(first, "7"), headers=HX)
    assert response.status_code == 200 and b"1 to 5, or N/A" in response.content
    response = annotator_client.post(submit_url(first), score_post(first, "x"), headers=HX)
    assert response.status_code == 200 and b"1 to 5, or N/A" in response.content
    assert not HumanScore.objects.exists()


def test_a_double_submit_is_idempotent(annotator_client, annotator, campaign):
    annotator_client.get(annotate_url(campaign))
    first = current(campaign, annotator)
    data = score_post(first)
    # when the same submission arrives twice
    one = annotator_client.post(submit_url(first), data, headers=HX)
    two = annotator_client.post(submit_url(first), data, headers=HX)
    # then it counts once, and both answers show the same next task
    assert one.status_code == two.status_code == 200
    assert HumanScore.objects.filter(assignment=first).count() == 3
    assert Task.objects.get(pk=first.task_id).submitted == 1
    assert card_assignment_id(one) == card_assignment_id(two) != first.pk


def test_a_lost_lease_moves_on_with_a_message(annotator_client, annotator, campaign):
    annotator_client.get(annotate_url(campaign))
    first = current(campaign, annotator)
    # given the lease lapsed and others filled the task
    Assignment.objects.filter(pk=first.pk).update(status=AssignmentStatus.EXPIRED)
    Task.objects.filter(pk=first.task_id).update(assigned=2)
    # when
    response = annotator_client.post(submit_url(first), score_post(first), headers=HX)
    # then
    assert response.status_code == 200
    assert b"this submission was not recorded" in response.content
    assert card_assignment_id(response) not in (None, first.pk)
    assert not HumanScore.objects.exists()


def test_submit_is_404_for_another_annotators_task(annotator, campaign, bob, bob_client):
    Campaign.annotators.through.objects.create(campaign=campaign, user=bob)
    mine = assignment_claim_next(campaign=campaign, annotator=annotator)
    response = bob_client.post(submit_url(mine), score_post(mine), headers=HX)
    assert response.status_code == 404
    assert not HumanScore.objects.exists()


def test_submit_refuses_get(annotator_client, annotator, campaign):
    mine = assignment_claim_next(campaign=campaign, annotator=annotator)
    assert annotator_client.get(submit_url(mine)).status_code == 405


def test_submit_without_htmx_answers_the_full_page(annotator_client, annotator, campaign):
    mine = assignment_claim_next(campaign=campaign, annotator=annotator)
    response = annotator_client.post(submit_url(mine), score_post(mine))
    assert response.status_code == 200 and b"<html" in response.content
    assert HumanScore.objects.filter(assignment=mine).count() == 3


# --- skip and flag ------------------------------------------------------------------------------


def test_skip_needs_a_reason_and_keeps_the_scores_on_the_card(
    annotator_client, annotator, campaign
):
    mine = assignment_claim_next(campaign=campaign, annotator=annotator)
    data = {**score_post(mine, "3"), "reason": "  ", "action": "skip"}
    response = annotator_client.post(skip_url(mine), data, headers=HX)
    assert response.status_code == 200
    assert b"Please say why you skip this task." in response.content
    assert response.content.count(b'value="3" checked') == 3
    assert Assignment.objects.get(pk=mine.pk).status == AssignmentStatus.ACTIVE


def test_skip_gives_the_task_back_and_serves_another(annotator_client, annotator, campaign):
    mine = assignment_claim_next(campaign=campaign, annotator=annotator)
    response = annotator_client.post(
        skip_url(mine), {"reason": "I do not know this topic", "action": "skip"}, headers=HX
    )
    assert response.status_code == 200 and b"Task skipped." in response.content
    mine.refresh_from_db()
    assert (mine.status, mine.skip_reason, mine.flagged) == (
        AssignmentStatus.SKIPPED,
        "I do not know this topic",
        False,
    )
    assert Task.objects.get(pk=mine.task_id).assigned == 0
    nxt = Assignment.objects.get(pk=card_assignment_id(response))
    assert nxt.task_id != mine.task_id


def test_flag_marks_a_broken_item(annotator_client, annotator, campaign):
    mine = assignment_claim_next(campaign=campaign, annotator=annotator)
    response = annotator_client.post(
        skip_url(mine), {"reason": "the response is cut off", "action": "flag"}, headers=HX
    )
    assert response.status_code == 200 and b"flagged" in response.content
    mine.refresh_from_db()
    assert mine.status == AssignmentStatus.SKIPPED
    assert (mine.flagged, mine.flag_reason) == (True, "the response is cut off")


def test_skip_is_404_for_another_annotators_task_and_refuses_get(
    annotator_client, annotator, campaign, bob, bob_client
):
    mine = assignment_claim_next(campaign=campaign, annotator=annotator)
    response = bob_client.post(skip_url(mine), {"reason": "mine now"}, headers=HX)
    assert response.status_code == 404
    assert annotator_client.get(skip_url(mine)).status_code == 405
    assert Assignment.objects.get(pk=mine.pk).status == AssignmentStatus.ACTIVE


def test_skip_renders_the_full_page_without_htmx(annotator_client, annotator, campaign):
    mine = assignment_claim_next(campaign=campaign, annotator=annotator)
    response = annotator_client.post(skip_url(mine), {"reason": "no idea", "action": "skip"})
    assert response.status_code == 200 and b"<html" in response.content


# --- gold tasks ---------------------------------------------------------------------------------


@pytest.fixture
def gold_campaign_factory(project, dataset, annotator):
    """A campaign serving a gold task second (gold_rate 0.5: every 2nd task)."""

    def make(*, feedback: bool) -> Campaign:
        campaign = build_campaign(
            project, dataset, annotators=[annotator], gold_rate=0.5, gold_feedback=feedback
        )
        response = Response.objects.filter(item__dataset=dataset).order_by("pk").last()
        gold_task_set(
            campaign=campaign,
            response=response,
            scores={i.skill_id: 5 for i in response.item.item_skills.all()},
            explanation="The answer is complete and exact.",
        )
        return campaign

    return make


def _reach_the_gold_task(client, campaign, annotator):
    client.get(annotate_url(campaign))
    first = current(campaign, annotator)
    card = client.post(submit_url(first), score_post(first), headers=HX)
    gold = current(campaign, annotator)
    assert gold.task.kind == TaskKind.GOLD
    return card, gold


def test_a_gold_task_looks_like_any_other(annotator_client, annotator, gold_campaign_factory):
    campaign = gold_campaign_factory(feedback=True)
    card, gold = _reach_the_gold_task(annotator_client, campaign, annotator)
    body = card.content.decode().lower()
    for word in ("gold", "attention", "known", "expected", "explanation", "check task"):
        assert word not in body, word
    assert "the answer is complete and exact" not in body


def test_gold_feedback_shows_the_known_scores_after_submit(
    annotator_client, annotator, gold_campaign_factory
):
    campaign = gold_campaign_factory(feedback=True)
    _, gold = _reach_the_gold_task(annotator_client, campaign, annotator)
    # when the annotator gives 4 where 5 is known
    response = annotator_client.post(submit_url(gold), score_post(gold, "4"), headers=HX)
    # then the feedback is shown before anything else
    body = response.content.decode()
    assert response.status_code == 200
    assert "The answer is complete and exact." in body and "Expected" in body
    assert body.count("✗ differs") == 3
    assert f'hx-get="{annotate_url(campaign)}"' in body
    assert HumanScore.objects.filter(assignment=gold).count() == 3
    # and "next task" then serves a normal card
    nxt = annotator_client.get(annotate_url(campaign), headers=HX)
    assert b"data-annotate-form" in nxt.content


def test_without_gold_feedback_the_next_task_follows_directly(
    annotator_client, annotator, gold_campaign_factory
):
    campaign = gold_campaign_factory(feedback=False)
    _, gold = _reach_the_gold_task(annotator_client, campaign, annotator)
    response = annotator_client.post(submit_url(gold), score_post(gold, "4"), headers=HX)
    body = response.content.decode()
    assert "The answer is complete and exact." not in body and "Expected" not in body
    assert "data-annotate-form" in body
    assert HumanScore.objects.filter(assignment=gold).count() == 3


@pytest.mark.parametrize("value", ["5 ", "５", "٥", "+4", "4.0", "1e0"])
def test_a_score_that_only_looks_like_a_whole_number_is_refused_on_the_card(
    annotator_client, annotator, campaign, value
):
    # was: "5 " stored as 5, and "٥" as 5 (str.isdigit takes any Unicode digit)
    annotator_client.get(annotate_url(campaign))
    first = current(campaign, annotator)
    response = annotator_client.post(submit_url(first), score_post(first, value), headers=HX)
    assert response.status_code == 200 and b"1 to 5, or N/A" in response.content
    assert not HumanScore.objects.exists()
