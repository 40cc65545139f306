"""A verified change of an item's metadata does not change a running campaign: each campaign
pins its tasks' item skills when it is activated, what annotators are asked and what gold
and screening compare against stay as pinned, a researcher applies verified metadata to a
running campaign explicitly (the affected tasks and gold listed first, applied all or
nothing), and a gold or screening task whose known scores name skills its task does not ask
is refused with a reason, never passed vacuously (docs/CAMPAIGNS.md "Pinned skills",
docs/METADATA.md, docs/SCREENING.md)."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from annotation.annotate.selectors import gold_feedback_for_assignment
from annotation.campaigns.selectors import campaign_rubric_pins, campaign_skill_progress
from annotation.campaigns.services import campaign_activate, campaign_create, gold_task_set
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.metadata.selectors import item_metadata, metadata_verification_effects
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignItemPin,
    GoldScore,
    Item,
    MetadataProposal,
    QualificationRule,
    Response,
    Screening,
    ScreeningPhase,
    Skill,
    Task,
    TaskKind,
    UploadSource,
    UploadStatus,
)
from annotation.screening.selectors import NOTE_NOTHING_COMPARED, screening_results
from annotation.screening.services import qualification_decide, screening_settings_update
from annotation.screening.setup import screening_task_list, screening_task_set
from annotation.selectors import campaign_metadata_plan, skills_for_response
from annotation.services.assignments import (
    ScoreInput,
    assignment_claim_next,
    human_score_submit,
    task_skills,
)
from annotation.services.metadata import ProposalSpec, metadata_proposals_record, metadata_verify
from annotation.services.pins import MetadataPlanStale, campaign_metadata_apply

pytestmark = pytest.mark.django_db

#: Each item's skills as imported: i0 and i2 share the three; i1 asks two others, so a
#: campaign over the dataset pins rubrics for five skills.
ITEMS = {
    "i0": ["Factuality", "Comprehension", "Readability"],
    "i1": ["Completeness", "Conciseness", "Factuality"],
    "i2": ["Factuality", "Comprehension", "Readability"],
}
OLD = ITEMS["i0"]
#: What a model proposes for i0 and a researcher accepts: two skills the campaign's rubrics
#: cover (from i1), one (Readability) kept.
NEW_KEYS = ["completeness", "conciseness", "readability"]
NEW = ["Completeness", "Conciseness", "Readability"]


def make_dataset(project, tmp_path, name="Pins"):
    rows = [
        {
            "id": external_id,
            "instruction": f"Question {external_id}",
            "skills": skills,
            "domains": ["History"],
            "difficulty": 2,
            "checklist": (
                {"Readability": [f"short sentences in {external_id}"]}
                if "Readability" in skills
                else {}
            ),
            "responses": [{"model": m, "text": f"{m} on {external_id}"} for m in ("m1", "m2")],
        }
        for external_id, skills in ITEMS.items()
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


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path)


def make_campaign(project, dataset, annotators=(), *, name="Running", activate=True, **options):
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name=name,
        overlap=options.pop("overlap", 1),
        annotators=annotators,
        **options,
    )
    if activate:
        campaign_activate(campaign=campaign)
    campaign.refresh_from_db()
    return campaign


def item(dataset, external_id="i0") -> Item:
    return dataset.items.get(external_id=external_id)


def response(dataset, external_id="i0", model="m1") -> Response:
    return Response.objects.get(
        item__dataset=dataset, item__external_id=external_id, model_name=model
    )


def skill_ids(*names: str) -> list[int]:
    found = dict(Skill.objects.filter(name__in=names, project=None).values_list("name", "pk"))
    return [found[n] for n in names]


def verify(dataset, user, external_id="i0", skills=NEW_KEYS, run_id=5):
    """A model proposes `skills` for the item; a researcher accepts it (one keypress)."""
    target = item(dataset, external_id)
    metadata_proposals_record(
        run_id=run_id,
        label="Meta",
        proposals=[
            ProposalSpec(
                item_id=target.pk, status="ok", domains=["math"], skills=skills, difficulty=3
            )
        ],
    )
    proposal = MetadataProposal.objects.get(item=target, origin=f"run:{run_id}")
    return metadata_verify(proposal=proposal, verdict="accepted", user=user)


def task_on(campaign, external_id="i0", model="m1", kind=TaskKind.NORMAL) -> Task:
    return Task.objects.get(
        campaign=campaign,
        response__item__external_id=external_id,
        response__model_name=model,
        kind=kind,
    )


def asked(campaign, task: Task) -> list[str]:
    return [s.name for s in task_skills(assignment=Assignment(task=task, campaign=campaign))]


def answer_all(assignment, annotator, values: dict[str, int] | None = None, default=3):
    values = values or {}
    human_score_submit(
        assignment_id=assignment.pk,
        annotator=annotator,
        scores=[
            ScoreInput(s.skill_id, values.get(s.name, default))
            for s in task_skills(assignment=assignment)
        ],
    )


# --- what a running campaign asks ---------------------------------------------------------------


def test_accepting_a_proposal_does_not_change_what_a_running_campaign_asks(
    project, dataset, annotator, researcher
):
    # given an active campaign asking i0's three skills
    campaign = make_campaign(project, dataset, [annotator])
    assert asked(campaign, task_on(campaign)) == OLD
    # when a researcher accepts a model's proposal for i0 (the item's skills change)
    verify(dataset, researcher)
    assert item_metadata(item=item(dataset))["skills"] == NEW_KEYS
    # then the running campaign still asks what it pinned: the card, the submission's check,
    # judge prompts tied to the campaign, and the per-skill progress alike
    lease = assignment_claim_next(campaign=campaign, annotator=annotator)
    assert lease.task.response.item.external_id == "i0"
    assert asked(campaign, lease.task) == OLD
    answer_all(lease, annotator)
    assert sorted(lease.scores.values_list("skill__name", flat=True)) == sorted(OLD)
    assert [s.name for s in skills_for_response(response=response(dataset), campaign=campaign)] == (
        OLD
    )
    needed = {
        p.name: p.needed
        for p in campaign_skill_progress(
            campaign=campaign, pins=campaign_rubric_pins(campaign=campaign)
        )
    }
    assert needed["Comprehension"] == 4 and needed["Completeness"] == 2  # i0, i2 / i1
    # and its checklists are the ones pinned too
    readability = next(s for s in task_skills(assignment=lease) if s.name == "Readability")
    assert readability.checklist == ["short sentences in i0"]


def test_a_draft_reads_the_verified_metadata_and_pins_it_when_activated(
    project, dataset, researcher
):
    draft = make_campaign(project, dataset, name="Draft", activate=False)
    verify(dataset, researcher)
    assert [s.name for s in skills_for_response(response=response(dataset), campaign=None)] == NEW
    campaign_activate(campaign=draft)
    assert asked(draft, task_on(draft)) == NEW
    pin = CampaignItemPin.objects.get(campaign=draft, item=item(dataset))
    assert pin.skill_ids == skill_ids(*NEW) and pin.verification is None
    # a second verification after activation no longer reaches it
    verify(dataset, researcher, skills=["factuality", "comprehension", "readability"], run_id=6)
    assert asked(draft, task_on(draft)) == NEW


def test_a_task_added_to_a_running_campaign_is_pinned_when_it_is_added(
    project, dataset, researcher
):
    # given a running campaign of model m1's responses only: no task on m2's
    campaign = make_campaign(project, dataset, model_names=["m1"])
    CampaignItemPin.objects.filter(campaign=campaign, item=item(dataset, "i1")).delete()
    # when a gold task is added on i1 (its item not pinned yet), then i1's skills change
    gold_task_set(
        campaign=campaign,
        response=response(dataset, "i1", "m2"),
        scores={skill_ids("Completeness")[0]: 4},
    )
    verify(
        dataset, researcher, external_id="i1", skills=["factuality", "comprehension", "readability"]
    )
    # then the gold task asks what i1 listed when it was added
    assert asked(campaign, task_on(campaign, "i1", "m2", TaskKind.GOLD)) == ITEMS["i1"]


# --- gold and screening compare against the pinned skills ---------------------------------------


@pytest.fixture
def screened(project, dataset, annotator):
    """A running crowd campaign whose training task is on i0 (m1) and whose qualification
    task is on i2 (m1), both with known scores for two of the item's skills."""
    campaign = make_campaign(project, dataset, [annotator], name="Crowd", activate=False)
    screening_settings_update(
        campaign=campaign, screening=True, pass_mark=0.8, rule=QualificationRule.EXACT
    )
    factuality, comprehension = skill_ids("Factuality", "Comprehension")
    for external_id, kind in (("i0", TaskKind.TRAINING), ("i2", TaskKind.QUALIFICATION)):
        screening_task_set(
            campaign=campaign,
            response=response(dataset, external_id),
            scores={factuality: 2, comprehension: 4},
            kind=kind,
            explanation="The year is wrong, so **factuality** is low.",
        )
    campaign_activate(campaign=campaign)
    campaign.refresh_from_db()
    return campaign


def test_training_after_a_verified_change_shows_the_pinned_skills_with_their_scores(
    screened, annotator, researcher, dataset
):
    # given i0's skills changed after the crowd campaign started
    verify(dataset, researcher)
    # when the worker answers the training task with the known scores
    lease = assignment_claim_next(campaign=screened, annotator=annotator)
    assert lease.task.kind == TaskKind.TRAINING
    assert asked(screened, lease.task) == OLD
    answer_all(lease, annotator, {"Factuality": 2, "Comprehension": 4})
    # then the feedback compares both known scores, and they match
    feedback = gold_feedback_for_assignment(assignment=lease)
    assert feedback is not None
    assert [r.skill_name for r in feedback.rows] == ["Factuality", "Comprehension"]
    assert feedback.compared and feedback.all_agree and feedback.explanations


def _known_scores_moved_to(task: Task, names: list[str]) -> None:
    """A known-answer task whose known scores name skills its task does not ask: what the
    unpinned code left behind when an item's skills changed under a running campaign."""
    for gold, skill_id in zip(
        GoldScore.objects.filter(task=task).order_by("pk"), skill_ids(*names), strict=True
    ):
        GoldScore.objects.filter(pk=gold.pk).update(skill_id=skill_id)


def test_feedback_with_no_overlapping_skill_never_says_the_scores_match(
    screened, annotator, annotator_client
):
    # given a training task whose known scores name no skill its task asks
    training = task_on(screened, kind=TaskKind.TRAINING)
    _known_scores_moved_to(training, ["Completeness", "Conciseness"])
    # when the worker answers it on the annotate page
    annotator_client.get(reverse("annotation:annotate", args=[screened.pk]))
    lease = Assignment.objects.get(annotator=annotator, status=AssignmentStatus.ACTIVE)
    post = {"active_ms": "1000"}
    for skill in task_skills(assignment=lease):
        post[f"score-{skill.skill_id}"] = "3"
    page = annotator_client.post(
        reverse("annotation:annotate-submit", args=[lease.pk]), post, headers={"HX-Request": "true"}
    ).content.decode()
    # then nothing was compared, and the card says so instead of "your scores match"
    feedback = gold_feedback_for_assignment(assignment=lease)
    assert feedback is not None and not feedback.all_agree and not feedback.compared
    assert feedback.unasked == ["Completeness", "Conciseness"] and feedback.explanations == []
    assert "Well done" not in page and "data-gold-feedback" not in page
    assert "Nothing to compare on this task" in page and "Completeness, Conciseness" in page


def test_a_qualification_that_compared_nothing_is_never_a_pass(
    screened, annotator, researcher_client
):
    # given a qualification task whose known scores name no skill its task asks
    _known_scores_moved_to(
        task_on(screened, "i2", kind=TaskKind.QUALIFICATION), ["Completeness", "Conciseness"]
    )
    # when the worker does the training and the test, whatever they enter
    for _ in range(2):
        lease = assignment_claim_next(campaign=screened, annotator=annotator)
        assert lease is not None and lease.task.kind != TaskKind.NORMAL
        answer_all(lease, annotator, default=1)
    # then they are not passed (nor failed): the test compared nothing
    assert assignment_claim_next(campaign=screened, annotator=annotator) is None
    screening = Screening.objects.get(campaign=screened, annotator=annotator)
    assert screening.phase == ScreeningPhase.QUALIFICATION and screening.decided_at is None
    [row] = screening_results(campaign=screened)
    assert row.note == NOTE_NOTHING_COMPARED
    # and the screening page says why, for the annotator and for the task
    page = researcher_client.get(reverse("annotation:screening", args=[screened.pk]))
    body = page.content.decode()
    assert "Passed" not in body.split('id="screening-result-list"')[1]
    assert "none compared a skill it asked" in body
    assert "Refused: compares nothing" in body
    [_, qualification] = screening_task_list(campaign=screened)
    assert qualification.unasked == ["Completeness", "Conciseness"] and not qualification.compares


def test_per_skill_agreement_with_nothing_known_is_no_pass():
    nothing = {"3": {"agreed": 0, "total": 0}}
    held = qualification_decide(per_skill=nothing, pass_mark=0.8, answered=2)
    assert not held.passed and not held.decided
    # no qualification task at all: training alone was required
    assert qualification_decide(per_skill={}, pass_mark=0.8, answered=0).passed
    # a skill with total 0 is left out; the others decide
    mixed = {"1": {"agreed": 1, "total": 2}, "3": {"agreed": 0, "total": 0}}
    assert not qualification_decide(per_skill=mixed, pass_mark=0.8, answered=2).passed


def test_known_scores_for_a_skill_the_task_does_not_ask_are_refused_with_the_reason(
    project, dataset, researcher
):
    # given a running campaign, and i0 verified to skills the campaign has rubrics for
    campaign = make_campaign(project, dataset)
    verify(dataset, researcher)
    completeness, comprehension = skill_ids("Completeness", "Comprehension")
    # when a researcher gives known scores for one of i0's new skills
    with pytest.raises(ValidationError) as refused:
        gold_task_set(campaign=campaign, response=response(dataset), scores={completeness: 4})
    # then it is refused, naming what i0's tasks ask; a pinned skill is accepted
    message = " ".join(refused.value.messages)
    assert "not scored on: Completeness" in message
    assert "Factuality, Comprehension, Readability" in message and "pinned" in message
    task = gold_task_set(campaign=campaign, response=response(dataset), scores={comprehension: 4})
    assert task.kind == TaskKind.GOLD


def test_activation_refuses_a_draft_whose_gold_names_a_skill_its_item_no_longer_lists(
    project, dataset, researcher
):
    # given a draft with a gold task on i0 known on Comprehension, which i0 then drops
    draft = make_campaign(project, dataset, name="Draft", activate=False)
    (comprehension,) = skill_ids("Comprehension")
    gold = gold_task_set(campaign=draft, response=response(dataset), scores={comprehension: 4})
    verify(dataset, researcher)
    # when it is activated, then it is refused with the reason, and nothing changed
    with pytest.raises(ValidationError, match=f"gold task {gold.pk} .*Comprehension"):
        campaign_activate(campaign=draft)
    draft.refresh_from_db()
    assert draft.status == "draft"
    assert not CampaignItemPin.objects.filter(campaign=draft).exists()
    assert Task.objects.filter(campaign=draft).count() == 1


# --- applying verified metadata to a running campaign -------------------------------------------


def test_applying_lists_the_affected_tasks_then_changes_the_campaign_at_once(
    project, dataset, annotator, researcher
):
    # given a running campaign with one annotation on i0, then i0 verified to new skills
    campaign = make_campaign(project, dataset, [annotator])
    answer_all(assignment_claim_next(campaign=campaign, annotator=annotator), annotator)
    verification = verify(dataset, researcher)
    before = campaign.updated_at
    # when the plan is listed
    plan = campaign_metadata_plan(campaign=campaign)
    [change] = plan.changes
    assert (change.external_id, change.asked_before, change.asked_after) == ("i0", OLD, NEW)
    assert (change.tasks, change.submitted, change.leases, change.refused) == (2, 1, 0, "")
    assert change.verification_id == verification.pk and change.verified_by == "rita"
    # and applied as listed
    campaign_metadata_apply(campaign=campaign, fingerprint=plan.fingerprint, user=researcher)
    # then i0's tasks ask the verified skills, i2's do not change, and the pin says who did it
    campaign.refresh_from_db()
    assert campaign.updated_at > before
    assert asked(campaign, task_on(campaign, "i0", "m2")) == NEW
    assert asked(campaign, task_on(campaign, "i2")) == OLD
    pin = CampaignItemPin.objects.get(campaign=campaign, item=item(dataset))
    assert pin.verification_id == verification.pk and pin.applied_by == researcher
    assert campaign_metadata_plan(campaign=campaign).changes == []


def test_a_new_skill_gets_its_rubric_pinned_when_applied(project, dataset, researcher):
    campaign = make_campaign(project, dataset)
    verify(dataset, researcher, skills=["factuality", "comprehension", "harmlessness"])
    plan = campaign_metadata_plan(campaign=campaign)
    assert plan.changes[0].new_rubrics == ["Harmlessness (built-in v1)"]
    campaign_metadata_apply(campaign=campaign, fingerprint=plan.fingerprint)
    assert "Harmlessness" in [p.skill_name for p in campaign_rubric_pins(campaign=campaign)]
    assert asked(campaign, task_on(campaign)) == ["Factuality", "Comprehension", "Harmlessness"]


def test_a_plan_that_changed_since_it_was_listed_applies_nothing(project, dataset, researcher):
    campaign = make_campaign(project, dataset)
    verify(dataset, researcher)
    listed = campaign_metadata_plan(campaign=campaign)
    # another verification of the same item after the list was shown
    verify(dataset, researcher, skills=["factuality", "conciseness", "readability"], run_id=6)
    with pytest.raises(MetadataPlanStale, match="changed since it was listed"):
        campaign_metadata_apply(campaign=campaign, fingerprint=listed.fingerprint)
    assert asked(campaign, task_on(campaign)) == OLD


def test_an_item_whose_gold_would_compare_a_dropped_skill_is_held_back_with_the_reason(
    project, dataset, researcher
):
    # given a gold task on i0 known on Comprehension, and i0 and i2 verified: i0 drops
    # Comprehension, i2 keeps it
    campaign = make_campaign(project, dataset)
    (comprehension,) = skill_ids("Comprehension")
    gold = gold_task_set(campaign=campaign, response=response(dataset), scores={comprehension: 4})
    verify(dataset, researcher)
    verify(
        dataset, researcher, external_id="i2", skills=["comprehension", "factuality", "readability"]
    )
    # when the plan is listed and applied
    plan = campaign_metadata_plan(campaign=campaign)
    held = {c.external_id: c for c in plan.changes}
    assert held["i0"].refused == (
        f"gold task {gold.pk} (item i0, m1) has known scores for Comprehension, which the "
        "verified metadata drops; the item keeps its pinned skills here until that task's "
        "known scores name only skills the verified metadata lists, or the task is removed"
    )
    assert [t.ok for t in held["i0"].known] == [False]
    campaign_metadata_apply(campaign=campaign, fingerprint=plan.fingerprint)
    # then i2 is applied and i0 keeps its pin: its gold still compares what it asks
    assert asked(campaign, task_on(campaign, "i2")) == [
        "Comprehension",
        "Factuality",
        "Readability",
    ]
    assert asked(campaign, task_on(campaign, "i0", "m2")) == OLD


def test_only_a_running_campaign_takes_verified_metadata(project, dataset, researcher):
    draft = make_campaign(project, dataset, name="Draft", activate=False)
    verify(dataset, researcher)
    plan = campaign_metadata_plan(campaign=draft)
    with pytest.raises(ValidationError, match="draft reads the items' own metadata"):
        campaign_metadata_apply(campaign=draft, fingerprint=plan.fingerprint)
    Campaign.objects.filter(pk=draft.pk).update(status="finished")
    with pytest.raises(ValidationError, match="finished one keeps what it asked"):
        campaign_metadata_apply(campaign=draft, fingerprint=plan.fingerprint)


# --- the upgrade path ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_campaigns_activated_before_pins_are_pinned_to_what_they_ask_today(tmp_path):
    # given a database before pins, with an active and a draft campaign over a dataset
    executor = MigrationExecutor(connection)
    executor.migrate([("annotation", "0015_study_integrity")])
    apps = executor.loader.project_state([("annotation", "0015_study_integrity")]).apps
    models = {
        n: apps.get_model("annotation", n)
        for n in (
            "Project",
            "Dataset",
            "Item",
            "ItemSkill",
            "Response",
            "Campaign",
            "Task",
            "Skill",
        )
    }
    project = models["Project"].objects.create(slug="legacy", name="Legacy")
    dataset = models["Dataset"].objects.create(project=project, name="Legacy set")
    skills = list(models["Skill"].objects.filter(project=None).order_by("order")[:3])
    active = models["Campaign"].objects.create(
        project=project, dataset=dataset, name="Active", status="active"
    )
    draft = models["Campaign"].objects.create(
        project=project, dataset=dataset, name="Draft", status="draft"
    )
    for n in range(2):
        legacy_item = models["Item"].objects.create(
            dataset=dataset, external_id=f"x{n}", instruction="Q"
        )
        for rank, skill in enumerate(skills[n:] + skills[:n], start=1):
            models["ItemSkill"].objects.create(
                item=legacy_item, skill=skill, rank=rank, checklist=[f"c{rank}"]
            )
        answer = models["Response"].objects.create(item=legacy_item, model_name="m", text="A")
        models["Task"].objects.create(campaign=active, response=answer, overlap=1)
    # when the pins migration runs
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    # then the active campaign's items are pinned to the skills they ask today, ranked,
    # with their checklists; the draft is not pinned
    pins = {
        pin.item.external_id: pin.skills
        for pin in CampaignItemPin.objects.filter(campaign_id=active.pk).select_related("item")
    }
    ids = [s.pk for s in skills]
    assert pins == {
        "x0": [[ids[0], ["c1"]], [ids[1], ["c2"]], [ids[2], ["c3"]]],
        "x1": [[ids[1], ["c1"]], [ids[2], ["c2"]], [ids[0], ["c3"]]],
    }
    assert not CampaignItemPin.objects.filter(campaign_id=draft.pk).exists()


def test_pinning_a_campaign_of_every_item_takes_few_queries(
    project, dataset, django_assert_max_num_queries
):
    draft = make_campaign(project, dataset, name="Draft", activate=False)
    with django_assert_max_num_queries(20):
        campaign_activate(campaign=draft)
    assert CampaignItemPin.objects.filter(campaign=draft).count() == 3


def test_the_verification_effects_name_the_running_campaigns_and_the_drafts(project, dataset):
    running = make_campaign(project, dataset, name="Running")
    make_campaign(project, dataset, name="Later", activate=False)
    effects = metadata_verification_effects(item=item(dataset))
    assert [(c.campaign_id, c.name) for c in effects.running] == [(running.pk, "Running")]
    assert effects.running[0].pinned == ["factuality", "comprehension", "readability"]
    assert [name for _, name in effects.drafts] == ["Later"]
