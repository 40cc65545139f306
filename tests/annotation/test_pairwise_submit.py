"""Submitting preferences for pair tasks: the same gating as scores (live lease, repeat
idempotent, late only with a free slot), the questions asked, and what is refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from annotation.campaigns.selectors import (
    campaign_quality,
    campaign_rubric_pins,
    campaign_skill_progress,
)
from annotation.campaigns.services import campaign_activate, campaign_create, gold_pair_set
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignMode,
    HumanPreference,
    HumanScore,
    Task,
    TaskKind,
)
from annotation.selectors import human_preference_rows
from annotation.services.assignments import (
    AssignmentError,
    ScoreInput,
    assignment_claim_next,
    assignments_expire_stale,
    human_score_submit,
)
from annotation.services.preferences import (
    PreferenceInput,
    human_preference_submit,
    pair_questions,
)
from tests.annotation.test_annotate_api import make_dataset

pytestmark = pytest.mark.django_db

MODELS = ("m-one", "m-two")


@pytest.fixture
def people(django_user_model):
    return [django_user_model.objects.create_user(f"p{i}", password="x") for i in range(4)]


def make(project, tmp_path, people, *, items=2, overlap=2, name="Pairs", **options) -> Campaign:
    dataset = make_dataset(project, tmp_path, items=items, models=MODELS, name=name)
    options.setdefault("pair_choices", ["a", "b", "tie", "both_bad"])
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name=name,
        overlap=overlap,
        annotators=people,
        mode=CampaignMode.PAIRWISE,
        **options,
    )
    campaign_activate(campaign=campaign)
    return Campaign.objects.get(pk=campaign.pk)


def questions_of(assignment):
    task = Task.objects.select_related("response", "campaign").get(pk=assignment.task_id)
    return pair_questions(campaign=task.campaign, item_id=task.response.item_id)


def answers(assignment, choice="a", **extra) -> list[PreferenceInput]:
    q = questions_of(assignment)
    asked = [s.skill_id for s in q.skills] + ([None] if q.overall else [])
    return [PreferenceInput(skill_id, choice, **extra) for skill_id in asked]


def test_a_submission_writes_one_preference_per_question_in_the_pairs_terms(
    project, tmp_path, people
):
    campaign = make(project, tmp_path, people, pair_strength=True, pair_rationale=True)
    lease = assignment_claim_next(campaign=campaign, annotator=people[0])
    q = questions_of(lease)
    assert [s.name for s in q.skills] == ["Factuality", "Comprehension", "Readability"]
    assert q.overall and q.choices == ["a", "b", "tie", "both_bad"]
    given = [
        PreferenceInput(q.skills[0].skill_id, "a", strength=2, rationale="cites the year"),
        PreferenceInput(q.skills[1].skill_id, "tie", time_ms=800),
        PreferenceInput(q.skills[2].skill_id, "both_bad"),
        PreferenceInput(None, "b", strength=1),
    ]
    result = human_preference_submit(
        assignment_id=lease.pk, annotator=people[0], preferences=given, active_ms=4200
    )
    assert result.created and not result.late
    task = Task.objects.get(pk=lease.task_id)
    assert (task.assigned, task.submitted) == (1, 1)
    rows = list(
        HumanPreference.objects.filter(assignment_id=lease.pk)
        .order_by("pk")
        .values_list(
            "response_a_id",
            "response_b_id",
            "skill_id",
            "rubric_id",
            "choice",
            "strength",
            "rationale",
            "time_ms",
        )
    )
    pins = {s.skill_id: s.rubric_id for s in q.skills}
    assert rows == [
        (
            task.response_id,
            task.response_b_id,
            q.skills[0].skill_id,
            pins[q.skills[0].skill_id],
            "a",
            2,
            "cites the year",
            None,
        ),
        (
            task.response_id,
            task.response_b_id,
            q.skills[1].skill_id,
            pins[q.skills[1].skill_id],
            "tie",
            None,
            "",
            800,
        ),
        (
            task.response_id,
            task.response_b_id,
            q.skills[2].skill_id,
            pins[q.skills[2].skill_id],
            "both_bad",
            None,
            "",
            None,
        ),
        (task.response_id, task.response_b_id, None, None, "b", 1, "", None),
    ]
    assert Assignment.objects.get(pk=lease.pk).active_ms == 4200
    # and analytics sees them, overall last
    assert [r.skill for r in human_preference_rows(project=project)] == [
        "Factuality",
        "Comprehension",
        "Readability",
        None,
    ]


def test_a_repeated_submission_changes_nothing(project, tmp_path, people):
    campaign = make(project, tmp_path, people)
    lease = assignment_claim_next(campaign=campaign, annotator=people[0])
    first = human_preference_submit(
        assignment_id=lease.pk, annotator=people[0], preferences=answers(lease)
    )
    again = human_preference_submit(
        assignment_id=lease.pk, annotator=people[0], preferences=answers(lease, "b")
    )
    assert first.created and not again.created
    assert set(HumanPreference.objects.values_list("choice", flat=True)) == {"a"}
    assert Task.objects.get(pk=lease.task_id).submitted == 1


@pytest.mark.parametrize(
    ("change", "code", "message"),
    [
        (lambda a: a[:-1], "incomplete", "please choose for: overall"),
        (lambda a: a + a[:1], "invalid", "answered twice"),
        (
            lambda a: [PreferenceInput(a[0].skill_id, "maybe"), *a[1:]],
            "invalid",
            "choose one of a, b, tie",
        ),
        (
            lambda a: [PreferenceInput(a[0].skill_id, "a", strength=2), *a[1:]],
            "invalid",
            "does not ask how much",
        ),
        (
            lambda a: [PreferenceInput(a[0].skill_id, "a", rationale="x"), *a[1:]],
            "invalid",
            "asks no rationale",
        ),
        (lambda a: [*a, PreferenceInput(999999, "a")], "invalid", "does not ask"),
    ],
)
def test_bad_answers_are_refused_and_nothing_is_written(
    project, tmp_path, people, change, code, message
):
    campaign = make(project, tmp_path, people, pair_choices=["a", "b", "tie"])
    lease = assignment_claim_next(campaign=campaign, annotator=people[0])
    with pytest.raises(AssignmentError) as caught:
        human_preference_submit(
            assignment_id=lease.pk, annotator=people[0], preferences=change(answers(lease))
        )
    assert caught.value.code == code and message in str(caught.value)
    assert not HumanPreference.objects.exists()
    assert Assignment.objects.get(pk=lease.pk).status == AssignmentStatus.ACTIVE
    assert Task.objects.get(pk=lease.task_id).submitted == 0


def test_strength_belongs_to_a_or_b_only(project, tmp_path, people):
    campaign = make(project, tmp_path, people, pair_strength=True)
    lease = assignment_claim_next(campaign=campaign, annotator=people[0])
    with pytest.raises(AssignmentError, match="only a choice of A or B has a strength"):
        human_preference_submit(
            assignment_id=lease.pk,
            annotator=people[0],
            preferences=answers(lease, "tie", strength=1),
        )
    with pytest.raises(AssignmentError, match="strength is 1"):
        human_preference_submit(
            assignment_id=lease.pk, annotator=people[0], preferences=answers(lease, "a", strength=3)
        )


def test_scores_and_preferences_do_not_mix(project, tmp_path, people):
    campaign = make(project, tmp_path, people)
    lease = assignment_claim_next(campaign=campaign, annotator=people[0])
    with pytest.raises(AssignmentError, match="submit a preference"):
        human_score_submit(assignment_id=lease.pk, annotator=people[0], scores=[ScoreInput(1, 3)])
    assert not HumanScore.objects.exists()


def test_overall_only_asks_one_question(project, tmp_path, people):
    campaign = make(project, tmp_path, people, pair_ask="overall")
    lease = assignment_claim_next(campaign=campaign, annotator=people[0])
    q = questions_of(lease)
    assert q.skills == [] and q.overall
    human_preference_submit(
        assignment_id=lease.pk, annotator=people[0], preferences=[PreferenceInput(None, "tie")]
    )
    assert list(HumanPreference.objects.values_list("skill_id", "choice")) == [(None, "tie")]


def test_skills_only_asks_no_overall_question(project, tmp_path, people):
    campaign = make(project, tmp_path, people, pair_ask="skills")
    lease = assignment_claim_next(campaign=campaign, annotator=people[0])
    q = questions_of(lease)
    assert len(q.skills) == 3 and not q.overall


def test_a_late_submission_counts_while_a_slot_is_free_and_is_refused_once_taken(
    project, tmp_path, people
):
    # one pair (one item, two models), K = 1
    campaign = make(project, tmp_path, people, items=1, overlap=1)
    late = assignment_claim_next(campaign=campaign, annotator=people[0])
    with time_machine.travel(timezone.now() + timedelta(hours=1), tick=False):
        assert assignments_expire_stale(campaign_id=campaign.pk) == 1
        result = human_preference_submit(
            assignment_id=late.pk, annotator=people[0], preferences=answers(late)
        )
        assert result.created and result.late
    task = Task.objects.get(pk=late.task_id)
    assert (task.assigned, task.submitted) == (1, 1)
    # now a second campaign where the freed slot is taken before the late submission
    other = make(project, tmp_path, people, items=1, overlap=1, name="Second")
    lapsed = assignment_claim_next(campaign=other, annotator=people[0])
    with time_machine.travel(timezone.now() + timedelta(hours=1), tick=False):
        assignments_expire_stale(campaign_id=other.pk)
        taker = assignment_claim_next(campaign=other, annotator=people[1])
        assert taker is not None and taker.task_id == lapsed.task_id
        with pytest.raises(AssignmentError) as caught:
            human_preference_submit(
                assignment_id=lapsed.pk, annotator=people[0], preferences=answers(lapsed)
            )
    assert caught.value.code == "lease_lost"
    assert not HumanPreference.objects.filter(assignment_id=lapsed.pk).exists()
    task = Task.objects.get(pk=lapsed.task_id)
    assert (task.assigned, task.submitted) == (1, 0)


def test_someone_elses_assignment_is_not_found(project, tmp_path, people):
    campaign = make(project, tmp_path, people)
    lease = assignment_claim_next(campaign=campaign, annotator=people[0])
    with pytest.raises(AssignmentError) as caught:
        human_preference_submit(
            assignment_id=lease.pk, annotator=people[1], preferences=answers(lease)
        )
    assert caught.value.code == "not_found"


def test_gold_pairs_are_served_at_the_gold_rate_and_their_answers_are_not_data(
    project, tmp_path, people
):
    campaign = make(project, tmp_path, people, items=6, overlap=1, gold_rate=0.5)
    task = Task.objects.filter(campaign=campaign).order_by("pk").first()
    gold = gold_pair_set(
        campaign=campaign,
        response_a=task.response,
        response_b=task.response_b,
        choices={None: "a"},
        kind=TaskKind.ATTENTION,
    )
    kinds = []
    for _ in range(4):
        lease = assignment_claim_next(campaign=campaign, annotator=people[0])
        kinds.append(Task.objects.get(pk=lease.task_id).kind)
        human_preference_submit(
            assignment_id=lease.pk, annotator=people[0], preferences=answers(lease)
        )
    assert kinds.count(TaskKind.ATTENTION) == 1
    assert Task.objects.get(pk=gold.pk).submitted == 0  # known-answer tasks have no slots
    rows = human_preference_rows(project=project)
    assert len({(r.response_a_id, r.response_b_id) for r in rows}) == 3
    assert gold.response_id not in {
        r.response_a_id for r in rows if r.response_b_id == gold.response_b_id
    }


def test_gold_pair_answers_feed_the_campaigns_quality_figures(project, tmp_path, people):
    campaign = make(project, tmp_path, people, items=3, overlap=1, gold_rate=0.5)
    task = Task.objects.filter(campaign=campaign).order_by("pk").first()
    gold_pair_set(
        campaign=campaign,
        response_a=task.response,
        response_b=task.response_b,
        choices={None: "a"},  # overall: A is better; the skills are not checked
        kind=TaskKind.ATTENTION,
    )
    for person, side in ((people[0], "left"), (people[1], "right")):
        for _ in range(2):
            lease = assignment_claim_next(campaign=campaign, annotator=person)
            b_left = Task.objects.get(pk=lease.task_id).b_left
            # the side where A was shown: "left" picks A unless B was on the left
            shown_a = "right" if b_left else "left"
            choice = shown_a if side == "left" else ("left" if shown_a == "right" else "right")
            human_preference_submit(
                assignment_id=lease.pk,
                annotator=person,
                preferences=[PreferenceInput(p.skill_id, choice) for p in answers(lease)],
                shown=True,
            )
    quality = {q.username: q for q in campaign_quality(campaign=campaign)}
    assert (quality["p0"].gold_scores, quality["p0"].gold_correct) == (1, 1)
    assert (quality["p0"].attention_passed, quality["p0"].attention_failed) == (1, 0)
    assert (quality["p1"].gold_scores, quality["p1"].gold_correct) == (1, 0)
    assert (quality["p1"].attention_passed, quality["p1"].attention_failed) == (0, 1)


def test_pair_progress_per_skill_and_hidden_repeats_feed_the_campaign_page(
    project, tmp_path, people
):
    campaign = make(project, tmp_path, people, items=10, overlap=1, repeat_rate=0.5)
    person = people[0]
    repeats = 0
    while (lease := assignment_claim_next(campaign=campaign, annotator=person)) is not None:
        repeat = Assignment.objects.get(pk=lease.pk).kind == "repeat"
        repeats += repeat
        given = [
            PreferenceInput(p.skill_id, "b" if repeat and p.skill_id is None else "a")
            for p in answers(lease)
        ]
        human_preference_submit(assignment_id=lease.pk, annotator=person, preferences=given)
    assert repeats >= 1
    (quality,) = campaign_quality(campaign=campaign)
    # each repeat: three skills answered the same, the overall question not
    assert (quality.retest_pairs, quality.retest_exact) == (4 * repeats, 3 * repeats)
    assert quality.retest_agreement == 0.75
    pins = campaign_rubric_pins(campaign=campaign)
    progress = campaign_skill_progress(campaign=campaign, pins=pins)
    assert {p.name: (p.collected, p.needed) for p in progress} == {
        "Factuality": (10, 10),
        "Comprehension": (10, 10),
        "Readability": (10, 10),
    }
