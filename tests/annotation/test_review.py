"""Review (docs/REVIEW.md): the queue selector against a hand-made campaign, the adjudication
service's validation and idempotency, the reviewer role's access, the pages, and adaptive
overlap (budget cap, per-response cap, idempotency, the campaign's K)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from annotation.campaigns.services import campaign_activate, campaign_create, gold_task_set
from annotation.models import (
    AdjudicatedScore,
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignRubric,
    HumanScore,
    ProjectRole,
    Response,
    Skill,
    Task,
    TaskKind,
)
from annotation.review import selectors as rs
from annotation.review.services import (
    adaptive_overlap_apply,
    adaptive_overlap_sweep,
    adjudicated_score_set,
    review_settings_update,
)
from annotation.selectors import task_skills
from annotation.services.assignments import (
    ScoreInput,
    assignment_claim_next,
    human_score_submit,
)
from annotation.services.projects import membership_set
from annotation.tasks import adaptive_overlap_task
from tests.annotation.test_assignments import make_dataset

SKILLS = ["Factuality", "Comprehension", "Readability"]


@pytest.fixture
def people(django_user_model, project):
    found = []
    for name in ("ann", "ben", "cat", "dan", "eve"):
        user = django_user_model.objects.create_user(name, password="pw-" + name)
        membership_set(project=project, user=user, role=ProjectRole.ANNOTATOR)
        found.append(user)
    return found


@pytest.fixture
def reviewer(django_user_model, project):
    user = django_user_model.objects.create_user("rex", password="pw-rex")
    membership_set(project=project, user=user, role=ProjectRole.REVIEWER)
    return user


@pytest.fixture
def reviewer_client(client, reviewer):
    client.force_login(reviewer)
    return client


def rid(model: str, item: str) -> int:
    return Response.objects.get(item__external_id=item, model_name=model).pk


def skill(name: str) -> Skill:
    return Skill.objects.get(name=name, project__isnull=True)


def score_all(campaign, people, plan: dict) -> None:
    """Each person claims until done; `plan[(response id, person index)]` gives their scores
    per skill name (None = N/A), 3 elsewhere."""
    for n, person in enumerate(people):
        while (a := assignment_claim_next(campaign=campaign, annotator=person)) is not None:
            wanted = plan.get((a.task.response_id, n), {})
            scores = [
                ScoreInput(s.skill_id, wanted.get(s.name, 3), rationale=f"{person.username} why")
                for s in task_skills(assignment=a)
            ]
            human_score_submit(assignment_id=a.pk, annotator=person, scores=scores)


@pytest.fixture
def scored(project, tmp_path, people):
    """Overlap 3 (ann, ben, cat) over 6 responses; all scored 3 except:
    m1/i0 Factuality 1, 3, 5 (spread 4); m1/i1 Comprehension 2, 3, 3 (spread 1);
    m2/i0 Readability N/A, 3, 3 (N/A beside numbers); m2/i1 Factuality 2, 3, 4 (spread 2)."""
    dataset = make_dataset(project, tmp_path)
    campaign = campaign_create(
        project=project, dataset=dataset, name="C", overlap=3, annotators=people[:3]
    )
    campaign_activate(campaign=campaign)
    plan = {
        (rid("m1", "i0"), 0): {"Factuality": 1},
        (rid("m1", "i0"), 2): {"Factuality": 5},
        (rid("m1", "i1"), 0): {"Comprehension": 2},
        (rid("m2", "i0"), 1): {"Readability": None},
        (rid("m2", "i1"), 0): {"Factuality": 2},
        (rid("m2", "i1"), 1): {"Factuality": 4},
    }
    score_all(campaign, people[:3], plan)
    campaign.refresh_from_db()
    return campaign


def _reasons(queue) -> dict[int, list[tuple[str, str]]]:
    return {e.response_id: [(r.kind, r.skill) for r in e.reasons] for e in queue}


# --- the queue -----------------------------------------------------------------------------


def test_the_queue_holds_spreads_at_the_threshold_and_na_beside_numbers(scored):
    # when (review_spread 2, the default)
    queue = rs.review_queue(campaign=scored)
    # then: widest first (N/A beside a number counts as the widest), the spread of 1 left out
    assert _reasons(queue) == {
        rid("m1", "i0"): [("spread", "Factuality")],
        rid("m2", "i0"): [("spread", "Readability")],
        rid("m2", "i1"): [("spread", "Factuality")],
    }
    assert [e.response_id for e in queue][-1] == rid("m2", "i1")
    first = next(e for e in queue if e.response_id == rid("m1", "i0"))
    reason = first.reasons[0]
    assert (reason.low, reason.high, reason.scores, reason.na) == (1, 5, 3, 0)
    assert reason.text == "scores 1–5 (3 annotators)"


def test_a_lower_threshold_takes_in_the_spread_of_one(scored):
    review_settings_update(
        campaign=scored,
        review_spread=1,
        adaptive_spread=None,
        adaptive_max_extra=2,
        adaptive_budget=None,
    )
    assert rid("m1", "i1") in _reasons(rs.review_queue(campaign=scored))


def test_adjudicated_entries_go_after_the_waiting_ones(scored, reviewer):
    # given the widest entry is adjudicated
    response = Response.objects.get(pk=rid("m1", "i0"))
    adjudicated_score_set(
        campaign=scored,
        response=response,
        skill=skill("Factuality"),
        value=4,
        note="",
        reviewer=reviewer,
    )
    # when
    queue = rs.review_queue(campaign=scored)
    # then it is last, not pending, and next skips it
    assert queue[-1].response_id == response.pk and not queue[-1].pending
    assert rs.queue_next(campaign=scored) != response.pk


def test_the_queue_reads_aggregates_in_a_fixed_number_of_queries(scored, django_assert_num_queries):
    with django_assert_num_queries(4):
        rs.review_queue(campaign=scored)


def test_a_gold_miss_is_in_the_queue_and_a_hit_is_not(scored, people):
    # given a gold task with known Factuality 4 (±0), answered 2 by dan and 4 by eve
    response = Response.objects.get(pk=rid("m1", "i2"))
    factuality = skill("Factuality")
    task = gold_task_set(campaign=scored, response=response, scores={factuality.pk: 4})
    rubric = CampaignRubric.objects.get(campaign=scored, skill=factuality).rubric
    for person, value in ((people[3], 2), (people[4], 4)):
        a = Assignment.objects.create(
            task=task,
            campaign=scored,
            annotator=person,
            status=AssignmentStatus.SUBMITTED,
            expires_at=timezone.now(),
            submitted_at=timezone.now(),
        )
        HumanScore.objects.create(
            assignment=a,
            campaign=scored,
            response=response,
            annotator=person,
            skill=factuality,
            rubric=rubric,
            score=value,
        )
    # when
    queue = rs.review_queue(campaign=scored)
    # then
    entry = next(e for e in queue if e.response_id == response.pk)
    assert [(r.kind, r.skill, r.misses, r.scores) for r in entry.reasons] == [
        ("gold_miss", "Factuality", 1, 2)
    ]
    assert entry.reasons[0].text == "1 of 2 answers miss the known score"


# --- adjudication --------------------------------------------------------------------------


def test_adjudication_is_kept_apart_and_idempotent(scored, reviewer):
    # given
    response = Response.objects.get(pk=rid("m1", "i0"))
    raw = list(HumanScore.objects.order_by("pk").values_list("pk", "score", "is_na", "updated_at"))
    # when set twice with the same value and note
    first = adjudicated_score_set(
        campaign=scored,
        response=response,
        skill=skill("Factuality"),
        value=4,
        note="two of three read it as mostly right",
        reviewer=reviewer,
    )
    again = adjudicated_score_set(
        campaign=scored,
        response=response,
        skill=skill("Factuality"),
        value="4",
        note="two of three read it as mostly right",
        reviewer=reviewer,
    )
    # then one row, the second call a no-op, the raw scores untouched
    assert first.changed and not again.changed
    assert AdjudicatedScore.objects.count() == 1
    assert again.score.updated_at == first.score.updated_at
    assert raw == list(
        HumanScore.objects.order_by("pk").values_list("pk", "score", "is_na", "updated_at")
    )
    # and a new value replaces it, N/A included
    changed = adjudicated_score_set(
        campaign=scored,
        response=response,
        skill=skill("Factuality"),
        value="na",
        note="",
        reviewer=reviewer,
    )
    assert changed.changed and changed.score.is_na and changed.score.score is None
    assert AdjudicatedScore.objects.count() == 1


@pytest.mark.parametrize(
    ("value", "skill_name", "field"),
    [
        (0, "Factuality", "value"),
        (6, "Factuality", "value"),
        ("x", "Factuality", "value"),
        (True, "Factuality", "value"),
        (3, "Harmlessness", "skill"),  # not one of the item's skills
    ],
)
def test_adjudication_refuses_what_is_not_valid(scored, reviewer, value, skill_name, field):
    response = Response.objects.get(pk=rid("m1", "i0"))
    with pytest.raises(ValidationError) as caught:
        adjudicated_score_set(
            campaign=scored,
            response=response,
            skill=skill(skill_name),
            value=value,
            note="",
            reviewer=reviewer,
        )
    assert field in caught.value.message_dict
    assert AdjudicatedScore.objects.count() == 0


def test_adjudication_refuses_a_response_the_campaign_does_not_score(scored, reviewer, project):
    # given a campaign of the same dataset that scores m1's responses only
    other = campaign_create(
        project=project, dataset=scored.dataset, name="Only m1", overlap=1, model_names=["m1"]
    )
    campaign_activate(campaign=other)
    other.refresh_from_db()
    response = Response.objects.get(pk=rid("m2", "i0"))
    # when / then
    with pytest.raises(ValidationError) as caught:
        adjudicated_score_set(
            campaign=other,
            response=response,
            skill=skill("Factuality"),
            value=3,
            note="",
            reviewer=reviewer,
        )
    assert "response" in caught.value.message_dict
    assert not AdjudicatedScore.objects.exists()


# --- access and pages ----------------------------------------------------------------------


def test_a_reviewer_sees_the_queue_but_not_the_staff_pages(scored, reviewer_client):
    queue = reviewer_client.get(reverse("annotation:review-queue", args=[scored.pk]))
    assert queue.status_code == 200
    assert b"data-queue-entry" in queue.content
    for name, args in (
        ("annotation:campaign-detail", [scored.pk]),
        ("annotation:review-settings", [scored.pk]),
        ("annotation:project-detail", [scored.project.slug]),
        ("analytics:dashboard", [scored.project.slug]),
        ("analytics:exports", [scored.project.slug]),
        ("judging:judge-list", [scored.project.slug]),
    ):
        assert reviewer_client.get(reverse(name, args=args)).status_code == 403, name


def test_annotators_get_403_and_outsiders_404(scored, annotator_client, outsider_client):
    url = reverse("annotation:review-queue", args=[scored.pk])
    assert annotator_client.get(url).status_code == 403
    assert outsider_client.get(url).status_code == 404


def test_reviewers_see_annotators_numbered_and_researchers_by_name(
    scored, reviewer_client, researcher_client
):
    url = reverse("annotation:review-response", args=[scored.pk, rid("m1", "i0")])
    seen = reviewer_client.get(url).content.decode()
    assert "Annotator 1" in seen and "Annotator 3" in seen
    assert "ann why" in seen  # rationales are shown
    assert ">ann<" not in seen and "ben" not in seen.replace("ben why", "")
    staff = researcher_client.get(url).content.decode()
    assert "Annotator 1" not in staff and "ann" in staff


def test_the_adjudication_page_posts_and_moves_to_the_next(scored, reviewer_client):
    # given
    first = rid("m1", "i0")
    url = reverse("annotation:review-response", args=[scored.pk, first])
    factuality = skill("Factuality")
    # when (htmx)
    response = reviewer_client.post(
        url,
        {f"value-{factuality.pk}": "4", f"note-{factuality.pk}": "majority"},
        headers={"HX-Request": "true"},
    )
    # then the next response's card, its URL pushed; the score stored
    assert response.status_code == 200
    assert b"<html" not in response.content
    assert response["HX-Push-Url"] != url
    stored = AdjudicatedScore.objects.get()
    assert (stored.response_id, stored.score, stored.note) == (first, 4, "majority")


def test_the_adjudication_page_answers_errors_with_200_and_saves_nothing(scored, reviewer_client):
    url = reverse("annotation:review-response", args=[scored.pk, rid("m1", "i0")])
    response = reviewer_client.post(url, {}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert b"at least one skill" in response.content
    assert not AdjudicatedScore.objects.exists()


def test_the_review_pages_refuse_the_wrong_method(scored, reviewer_client):
    assert (
        reviewer_client.post(reverse("annotation:review-queue", args=[scored.pk])).status_code
        == 405
    )


def test_the_queue_page_answers_htmx_with_the_table(scored, reviewer_client):
    url = reverse("annotation:review-queue", args=[scored.pk])
    assert b"<html" in reviewer_client.get(url).content
    partial = reviewer_client.get(url, headers={"HX-Request": "true"}).content
    assert b"<html" not in partial and b'id="queue-table"' in partial


def test_the_api_adjudicates_and_says_when_nothing_changed(scored, reviewer_client):
    url = reverse("annotation-api:api-review-adjudicate", args=[scored.pk, rid("m1", "i0")])
    body = {"skill_id": skill("Factuality").pk, "value": "na", "note": "unclear"}
    first = reviewer_client.post(url, body, content_type="application/json")
    again = reviewer_client.post(url, body, content_type="application/json")
    assert (first.status_code, first.json()["changed"]) == (200, True)
    assert (again.status_code, again.json()["changed"]) == (200, False)
    bad = reviewer_client.post(url, {**body, "value": "9"}, content_type="application/json")
    assert bad.status_code == 400
    queue = reviewer_client.get(reverse("annotation-api:api-review-queue", args=[scored.pk]))
    assert queue.status_code == 200 and queue.json()["count"] == 3


def test_a_project_admin_makes_someone_a_reviewer_on_the_members_page(
    project, outsider, admin_client
):
    response = admin_client.post(
        reverse("annotation:member-list", args=[project.slug]),
        {"username": outsider.username, "role": "reviewer"},
    )
    assert response.status_code in (200, 302)
    assert project.memberships.get(user=outsider).role == ProjectRole.REVIEWER


def test_the_campaign_page_loads_its_review_section(scored, researcher_client, reviewer_client):
    page = researcher_client.get(reverse("annotation:campaign-detail", args=[scored.pk]))
    summary = reverse("annotation:review-summary", args=[scored.pk])
    assert summary.encode() in page.content
    partial = researcher_client.get(summary, headers={"HX-Request": "true"})
    assert b"<html" not in partial.content and b"3</b> responses waiting" in partial.content
    assert b"Review settings" in partial.content
    # a reviewer gets the section without the settings link
    assert b"Review settings" not in reviewer_client.get(summary).content


def test_the_review_settings_page_saves_and_refuses_out_of_range(scored, researcher_client):
    url = reverse("annotation:review-settings", args=[scored.pk])
    data = {"review_spread": "3", "adaptive_spread": "2", "adaptive_max_extra": "1"}
    assert researcher_client.post(url, {**data, "adaptive_budget": "10"}).status_code == 302
    scored.refresh_from_db()
    assert (scored.review_spread, scored.adaptive_spread, scored.adaptive_budget) == (3, 2, 10)
    refused = researcher_client.post(url, {**data, "adaptive_max_extra": "9"})
    assert refused.status_code == 200 and b"form-error" in refused.content
    scored.refresh_from_db()
    assert scored.adaptive_max_extra == 1


# --- adaptive overlap ----------------------------------------------------------------------


def _adaptive(campaign, *, spread=2, max_extra=1, budget=None) -> Campaign:
    return review_settings_update(
        campaign=campaign,
        review_spread=2,
        adaptive_spread=spread,
        adaptive_max_extra=max_extra,
        adaptive_budget=budget,
    )


def _overlaps(campaign) -> dict[int, tuple[int, int]]:
    return {
        t.response_id: (t.overlap, t.adaptive_extra)
        for t in Task.objects.filter(campaign=campaign, kind=TaskKind.NORMAL)
    }


def test_adaptive_overlap_raises_disagreeing_complete_tasks_once(scored):
    # given adaptive overlap at spread 2 and the pool has dan... no: ann, ben, cat had all
    scored.annotators.add(*type(scored.annotators.first()).objects.filter(username="dan"))
    _adaptive(scored)
    # when run twice
    first = adaptive_overlap_apply(campaign_id=scored.pk)
    again = adaptive_overlap_apply(campaign_id=scored.pk)
    # then the three disagreeing responses got one more slot, once; K follows
    raised = {rid("m1", "i0"), rid("m2", "i0"), rid("m2", "i1")}
    assert {Task.objects.get(pk=t).response_id for t in first.raised} == raised
    assert again.raised == ()
    overlaps = _overlaps(scored)
    assert {r for r, (k, extra) in overlaps.items() if (k, extra) == (4, 1)} == raised
    assert {v for r, v in overlaps.items() if r not in raised} == {(3, 0)}
    scored.refresh_from_db()
    assert scored.overlap == 4
    # and dan is served a raised task
    dan = scored.annotators.get(username="dan")
    lease = assignment_claim_next(campaign=scored, annotator=dan)
    assert lease is not None and lease.task.response_id in raised


def test_adaptive_overlap_keeps_within_the_budget_and_the_per_response_cap(scored, people):
    scored.annotators.add(people[3], people[4])
    _adaptive(scored, budget=2, max_extra=1)
    assert len(adaptive_overlap_apply(campaign_id=scored.pk).raised) == 2
    assert adaptive_overlap_apply(campaign_id=scored.pk).skipped == "budget spent"
    summary = rs.adaptive_summary(campaign=scored)
    assert (summary.used, summary.left, summary.tasks_raised) == (2, 0, 2)
    # given the budget is lifted and the raised tasks complete with the same disagreement
    _adaptive(scored, budget=None, max_extra=1)
    score_all(scored, [people[3]], {})
    # when
    run = adaptive_overlap_apply(campaign_id=scored.pk)
    # then only the third one is raised: the first two reached their per-response cap of 1
    assert len(run.raised) == 1
    assert sum(extra for _, extra in _overlaps(scored).values()) == 3


def test_adaptive_overlap_raises_nothing_nobody_could_serve(scored):
    # the pool's three annotators all had every task
    _adaptive(scored)
    assert adaptive_overlap_apply(campaign_id=scored.pk).raised == ()


def test_adaptive_overlap_is_off_without_a_spread_and_for_paused_campaigns(scored, people):
    scored.annotators.add(people[3])
    assert adaptive_overlap_apply(campaign_id=scored.pk).skipped == "off"
    _adaptive(scored)
    Campaign.objects.filter(pk=scored.pk).update(status="paused")
    assert adaptive_overlap_apply(campaign_id=scored.pk).skipped == "off"


def test_the_adaptive_task_sweeps_every_campaign_and_is_idempotent(scored, people):
    scored.annotators.add(people[3])
    _adaptive(scored)
    assert adaptive_overlap_task() == 3
    assert adaptive_overlap_task() == 0
    assert [r.raised for r in adaptive_overlap_sweep()] == [()]


@pytest.mark.parametrize("tolerance", [0, 1])
def test_the_sql_gold_rule_and_the_python_one_agree_on_every_answer(
    scored, django_user_model, project, tolerance
):
    """annotation/gold.py: the query annotation (quality control, gold misses) and
    answer_correct (screening) judge every (given, known) pair alike: N/A only for N/A, a
    score within the tolerance; screening's score_agrees is the same rule."""
    from annotation.gold import answer_correct, gold_correct_annotations
    from annotation.screening.services import score_agrees

    response = Response.objects.get(pk=rid("m1", "i2"))
    known = {"Factuality": 3, "Comprehension": None, "Readability": 5}
    skills = {name: skill(name) for name in known}
    task = gold_task_set(
        campaign=scored,
        response=response,
        scores={skills[name].pk: value for name, value in known.items()},
        tolerance=tolerance,
    )
    answers = [None, 1, 2, 3, 4, 5]
    for n, given in enumerate(answers):
        person = django_user_model.objects.create_user(f"gold{tolerance}{n}", password="x")
        a = Assignment.objects.create(
            task=task,
            campaign=scored,
            annotator=person,
            status=AssignmentStatus.SUBMITTED,
            expires_at=timezone.now(),
            submitted_at=timezone.now(),
        )
        for s in skills.values():
            HumanScore.objects.create(
                assignment=a,
                campaign=scored,
                response=response,
                annotator=person,
                skill=s,
                rubric=CampaignRubric.objects.get(campaign=scored, skill=s).rubric,
                score=given,
                is_na=given is None,
            )
    gold = "assignment__task__gold_scores"
    rows = (
        HumanScore.objects.filter(assignment__task=task, **{f"{gold}__skill_id": F("skill_id")})
        .annotate(**gold_correct_annotations(gold))
        .values_list("score", "is_na", "skill__name", "correct")
    )
    seen = 0
    for score, is_na, name, correct in rows:
        given = None if is_na else score
        expected = answer_correct(given=given, known=known[name], tolerance=tolerance)
        assert bool(correct) == expected, (given, known[name], tolerance)
        rule = "within1" if tolerance else "exact"
        assert score_agrees(given=given, known=known[name], rule=rule) == expected
        seen += 1
    assert seen == len(answers) * len(known)
