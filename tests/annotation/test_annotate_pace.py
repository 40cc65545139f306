"""Progress and pace on the annotator's pages and API: "x of y done", time spent, breaks;
unmeasured time is stored as no value (and exported empty), not 0."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from analytics.exports.services import ScoreExport, export_options_clean
from annotation.annotate.selectors import (
    annotator_progress,
    campaign_list_for_annotator,
    spent_label,
    task_card_for_annotator,
)
from annotation.campaigns.services import gold_task_set
from annotation.models import (
    Assignment,
    AssignmentStatus,
    HumanScore,
    QualificationRule,
    Response,
    Task,
    TaskKind,
)
from annotation.pace.services import campaign_pace_update
from annotation.screening.services import screening_settings_update
from annotation.screening.setup import screening_task_set
from annotation.services.assignments import (
    ScoreInput,
    assignment_claim_next,
    human_score_submit,
    task_skills,
)
from flaskweb.db import is_postgres
from tests.annotation.test_annotate_views import (
    HX,
    annotate_url,
    build_campaign,
    build_dataset,
    current,
    score_post,
    submit_url,
)
from tests.annotation.test_screening import make_screening_campaign
from tests.clients import token_client


def submit_one(client, campaign, user, **post):
    client.get(annotate_url(campaign), headers=HX)
    assignment = current(campaign, user)
    data = score_post(assignment)
    data.update(post)
    return assignment, client.post(submit_url(assignment), data, headers=HX)


# --- x of y ----------------------------------------------------------------------------------


def test_the_card_shows_done_of_what_the_annotator_could_do(annotator_client, annotator, campaign):
    # given four tasks, K = 2, nobody else working: all four are open to Alice
    body = annotator_client.get(annotate_url(campaign)).content.decode()
    assert "<b data-progress-done>0</b> of <b data-progress-total>4</b> done" in body
    # when she submits one
    _, response = submit_one(annotator_client, campaign, annotator)
    # then: one of four, a quarter of the bar, the time of the first task
    body = response.content.decode()
    assert "<b data-progress-done>1</b> of <b data-progress-total>4</b> done" in body
    assert 'max="100" value="25"' in body
    assert "Time spent: under a minute" in body  # 12,345 ms


def test_the_total_is_the_quota_when_the_campaign_sets_one(
    annotator_client, annotator, project, dataset
):
    campaign = build_campaign(project, dataset, annotators=[annotator], quota_per_annotator=2)
    body = annotator_client.get(annotate_url(campaign)).content.decode()
    assert "<b data-progress-total>2</b> done" in body and "(your quota)" in body


def test_the_total_shrinks_as_other_annotators_fill_the_tasks(
    annotator, bob, project, dataset, django_assert_num_queries
):
    # given K = 1 and Bob holding one task in the same campaign
    campaign = build_campaign(project, dataset, annotators=[annotator, bob], overlap=1)
    from annotation.services.assignments import assignment_claim_next

    assignment_claim_next(campaign=campaign, annotator=bob)
    # then Alice could do three: her own assignments and the open tasks, two queries
    with django_assert_num_queries(2):
        progress = annotator_progress(campaign=campaign, user=annotator)
    assert (progress.done, progress.total, progress.by_quota) == (0, 3, False)


def test_the_total_is_counted_once_a_minute_and_own_work_keeps_it(
    annotator_client, annotator, campaign, django_assert_num_queries
):
    first = annotator_progress(campaign=campaign, user=annotator)
    submit_one(annotator_client, campaign, annotator)
    # the count of open tasks is reused: the query no longer counts them
    with django_assert_num_queries(1) as ctx:
        again = annotator_progress(campaign=campaign, user=annotator)
    assert "overlap" not in ctx.captured_queries[0]["sql"]
    # and one claimed and submitted task leaves the total as it was
    assert (first.total, again.done, again.total) == (4, 1, 4)


def test_a_check_task_to_come_is_in_the_total_from_the_first_card(
    annotator_client, annotator, project, dataset
):
    # given a gold task served second (gold_rate 0.5) and three normal tasks besides
    campaign = build_campaign(project, dataset, annotators=[annotator], gold_rate=0.5)
    response = Response.objects.filter(item__dataset=dataset).order_by("pk").last()
    gold_task_set(
        campaign=campaign,
        response=response,
        scores={i.skill_id: 5 for i in response.item.item_skills.all()},
    )
    first = annotator_progress(campaign=campaign, user=annotator)
    # when the first task and the gold one are submitted
    submit_one(annotator_client, campaign, annotator)
    gold, _ = submit_one(annotator_client, campaign, annotator)
    assert gold.task.kind == TaskKind.GOLD
    # then the total counted the check before it came: it did not grow when it was served
    after = annotator_progress(campaign=campaign, user=annotator)
    assert (first.done, first.total) == (0, 4)
    assert (after.done, after.total) == (2, 4)


@pytest.mark.parametrize("quota", [9, None])
def test_the_total_stays_put_through_screening_gold_and_repeats(
    project, tmp_path, annotator, quota
):
    """Every card of a campaign with training, a qualification test, gold tasks and hidden
    repeats shows the same total, and it is the number of tasks the annotator does."""
    # given 26 items: 2 training, 2 qualification, 2 gold, 20 normal tasks
    dataset = build_dataset(project, tmp_path, texts=[f"text {i}" for i in range(26)])
    campaign = build_campaign(
        project,
        dataset,
        annotators=[annotator],
        overlap=1,
        gold_rate=0.25,
        repeat_rate=0.2,
        quota_per_annotator=quota,
    )
    screening_settings_update(
        campaign=campaign, screening=True, pass_mark=0.5, rule=QualificationRule.WITHIN_ONE
    )
    responses = list(Response.objects.filter(item__dataset=dataset).order_by("pk"))
    some = Task.objects.filter(campaign=campaign).first()
    skills = [s.skill_id for s in task_skills(assignment=Assignment(task=some, campaign=campaign))]
    known = {skill: 3 for skill in skills}
    phases = [TaskKind.TRAINING] * 2 + [TaskKind.QUALIFICATION] * 2
    for response, kind in zip(responses, phases, strict=False):
        screening_task_set(campaign=campaign, response=response, scores=known, kind=kind)
    for response in responses[4:6]:
        gold_task_set(campaign=campaign, response=response, scores=known)
    campaign.refresh_from_db()
    # when the annotator does every task served, noting the total before each
    totals, kinds = [], []
    while True:
        totals.append(annotator_progress(campaign=campaign, user=annotator).total)
        assignment = assignment_claim_next(campaign=campaign, annotator=annotator)
        if assignment is None:
            break
        kinds.append((assignment.kind, Task.objects.get(pk=assignment.task_id).kind))
        # the scoring page counts the progress with the card's own statement: the same
        card = task_card_for_annotator(
            user=annotator, assignment_id=assignment.pk, progress_of=campaign
        )
        assert card is not None and (card.mine is not None or not is_postgres())
        with_card = annotator_progress(campaign=campaign, user=annotator, mine=card.mine)
        assert with_card == annotator_progress(campaign=campaign, user=annotator)
        human_score_submit(
            assignment_id=assignment.pk,
            annotator=annotator,
            scores=[ScoreInput(s.skill_id, 3) for s in task_skills(assignment=assignment)],
        )
    # then every kind of task came, and the total never moved from the number done
    served = {kind for pair in kinds for kind in pair}
    assert {"training", "qualification", "gold", "repeat", "normal"} <= served
    assert len(kinds) == (9 if quota else 20) + 4 + 2 + sum(k == "repeat" for k, _ in kinds)
    assert set(totals) == {len(kinds)}, totals
    progress = annotator_progress(campaign=campaign, user=annotator)
    assert progress.done == progress.total == len(kinds) and progress.with_checks
    # and My tasks says the same
    (row,) = campaign_list_for_annotator(user=annotator)
    assert (row.done, row.total) == (len(kinds), len(kinds))


def test_checks_count_beside_the_quota_so_done_never_passes_the_total(
    annotator_client, annotator, project, dataset
):
    # given a quota of 2 and a gold task served second (gold_rate 0.5)
    campaign = build_campaign(
        project, dataset, annotators=[annotator], gold_rate=0.5, quota_per_annotator=2
    )
    response = Response.objects.filter(item__dataset=dataset).order_by("pk").last()
    gold_task_set(
        campaign=campaign,
        response=response,
        scores={i.skill_id: 5 for i in response.item.item_skills.all()},
    )
    submit_one(annotator_client, campaign, annotator)
    gold, _ = submit_one(annotator_client, campaign, annotator)
    assert gold.task.kind == TaskKind.GOLD
    submit_one(annotator_client, campaign, annotator)
    # then three done of three (the quota and the check), not "3 of 2"
    progress = annotator_progress(campaign=campaign, user=annotator)
    assert (progress.done, progress.total, progress.by_quota) == (3, 3, True)
    body = annotator_client.get(annotate_url(campaign)).content.decode()
    assert "<b data-progress-done>3</b> of <b data-progress-total>3</b> done" in body
    assert "(your quota and checks)" in body


def test_time_spent_sums_the_focused_time_of_submitted_tasks(annotator_client, annotator, campaign):
    submit_one(annotator_client, campaign, annotator, active_ms="60000")
    submit_one(annotator_client, campaign, annotator, active_ms="3600000")
    progress = annotator_progress(campaign=campaign, user=annotator)
    assert progress.active_ms == 3_660_000 and progress.spent == "1 h 1 min"
    assert spent_label(0) == "under a minute" and spent_label(23 * 60000) == "23 min"


def test_my_tasks_shows_each_campaigns_progress(annotator_client, annotator, campaign):
    submit_one(annotator_client, campaign, annotator, active_ms="120000")
    body = annotator_client.get(reverse("annotation:my-campaigns")).content.decode()
    # one done, one held (the next card), two open
    assert "<b>1</b> of 4 done" in body and "2 min spent" in body


# --- breaks ----------------------------------------------------------------------------------


def test_a_break_is_announced_then_suggested_with_a_continue_button(
    annotator_client, annotator, project, dataset
):
    campaign = build_campaign(project, dataset, annotators=[annotator])
    campaign_pace_update(
        campaign=campaign, break_every=2, break_minutes=7, hourly_wage=None, wage_currency="USD"
    )
    body = annotator_client.get(annotate_url(campaign)).content.decode()
    assert "Break suggested after 2 more tasks" in body
    _, response = submit_one(annotator_client, campaign, annotator)
    assert "Break suggested after 1 more task<" in response.content.decode()
    # when the second task is submitted
    _, response = submit_one(annotator_client, campaign, annotator)
    # then a break card, and no task is held during the break
    body = response.content.decode()
    assert "Time for a break" in body and "about 7 minutes" in body
    assert "data-annotate-form" not in body and "Continue" in body
    assert not Assignment.objects.filter(annotator=annotator, status=AssignmentStatus.ACTIVE)
    # and Continue (a GET of the page) brings the next task
    body = annotator_client.get(annotate_url(campaign), headers=HX).content.decode()
    assert "data-annotate-form" in body and "Time for a break" not in body


def test_screening_tasks_neither_count_toward_a_break_nor_bring_one(
    annotator_client, annotator, project, tmp_path
):
    # given 2 training and 2 qualification tasks, then 2 real ones, and a break every 2
    # tasks (every 3, as the demo study sets it, put one between the qualification tasks)
    campaign = make_screening_campaign(
        project, tmp_path, [annotator], rule=QualificationRule.WITHIN_ONE
    )
    campaign_pace_update(
        campaign=campaign, break_every=2, break_minutes=5, hourly_wage=None, wage_currency="USD"
    )

    def answer() -> tuple[str, str]:
        annotator_client.get(annotate_url(campaign), headers=HX)
        assignment = current(campaign, annotator)
        # 3 is within one of every known score (2 and 4): the annotator passes
        response = annotator_client.post(
            submit_url(assignment), score_post(assignment, "3"), headers=HX
        )
        return Task.objects.get(pk=assignment.task_id).kind, response.content.decode()

    # when the annotator answers the four screening tasks
    answered = [answer() for _ in range(4)]
    # then none brought a break card or a break note, and none counted toward a break
    assert [kind for kind, _ in answered] == ["training"] * 2 + ["qualification"] * 2
    for _, body in answered:
        assert "Time for a break" not in body and "break-card" not in body
    progress = annotator_progress(campaign=campaign, user=annotator)
    assert (progress.done, progress.until_break, progress.break_due) == (4, 2, False)
    # and the break comes after two real tasks
    kind, body = answer()
    assert kind == "normal" and "Break suggested after 1 more task<" in body
    kind, body = answer()
    assert kind == "normal" and "Time for a break" in body and "break-card" in body


def test_no_break_is_mentioned_when_the_campaign_sets_none(annotator_client, annotator, campaign):
    _, response = submit_one(annotator_client, campaign, annotator)
    assert (
        b"Break suggested" not in response.content and b"Time for a break" not in response.content
    )


# --- the API ---------------------------------------------------------------------------------


def test_the_progress_api_answers_the_same_figures(annotator, annotator_client, campaign):
    submit_one(annotator_client, campaign, annotator, active_ms="5000")
    api = token_client(annotator)
    response = api.get(f"/api/v1/annotation/campaigns/{campaign.pk}/progress/")
    assert response.status_code == 200
    assert response.json() == {
        "done": 1,
        "total": 4,
        "total_is_quota": False,
        "remaining": 3,
        "percent": 25,
        "active_ms": 5000,
        "break_every": None,
        "break_minutes": None,
        "tasks_until_break": None,
        "break_due": False,
    }


def test_the_progress_api_is_404_outside_the_pool(bob, campaign):
    response = token_client(bob).get(f"/api/v1/annotation/campaigns/{campaign.pk}/progress/")
    assert response.status_code == 404
    assert token_client(bob).post(
        f"/api/v1/annotation/campaigns/{campaign.pk}/progress/"
    ).status_code in (404, 405)


# --- unmeasured time -------------------------------------------------------------------------


def test_a_zero_time_from_the_page_is_stored_as_no_value_and_exported_empty(
    annotator_client, annotator, project, campaign
):
    # given a submission whose clocks did not run (the page sends 0)
    annotator_client.get(annotate_url(campaign), headers=HX)
    assignment = current(campaign, annotator)
    data = score_post(assignment, active_ms="0")
    skills = task_skills(assignment=assignment)
    data[f"time-{skills[0].skill_id}"] = "0"
    data[f"time-{skills[1].skill_id}"] = ""
    annotator_client.post(submit_url(assignment), data, headers=HX)
    # then the assignment's and those rows' times are NULL, the measured one kept
    assignment.refresh_from_db()
    assert assignment.active_ms is None
    times = dict(
        HumanScore.objects.filter(assignment=assignment).values_list("skill_id", "time_ms")
    )
    assert times == {skills[0].skill_id: None, skills[1].skill_id: None, skills[2].skill_id: 2500}
    # and the export prints no value for them (not 0)
    options = export_options_clean(project=project, kind="long", fmt="csv", filters=None)
    rows = list(csv.DictReader(io.StringIO("".join(ScoreExport(options).chunks()))))
    by_skill = {r["skill"]: r["time_on_task_ms"] for r in rows}
    assert by_skill == {skills[0].name: "", skills[1].name: "", skills[2].name: "2500"}


@pytest.fixture
def dataset(project, tmp_path):
    from tests.annotation.test_annotate_views import build_dataset

    return build_dataset(project, tmp_path, texts=[f"Answer text {i}" for i in range(4)])


@pytest.fixture
def campaign(project, dataset, annotator):
    return build_campaign(project, dataset, annotators=[annotator])


@pytest.fixture
def bob(django_user_model, project):
    from annotation.models import ProjectRole
    from annotation.services.projects import membership_set

    user = django_user_model.objects.create_user("bob", password="pw-bob")
    membership_set(project=project, user=user, role=ProjectRole.ANNOTATOR)
    return user
