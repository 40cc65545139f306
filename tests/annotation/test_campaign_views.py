"""Campaign pages: for each view the happy path, ownership (404 non-members, 403
annotators), the wrong method (405) and htmx partial vs full page; plus the create →
activate flow, pause/resume against the real claim, and the campaign page's query count."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import (
    AnnotatorExpertise,
    Campaign,
    CampaignStatus,
    Domain,
    GoldScore,
    Rubric,
    Task,
    TaskKind,
)
from annotation.services.assignments import assignment_claim_next, assignment_skip
from tests.annotation.test_campaign_selectors import (
    SKILLS,
    make_annotator,
    make_dataset,
    skill_ids,
    submit,
)

HX = {"HX-Request": "true"}


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path)


@pytest.fixture
def draft(project, dataset, annotator):
    return campaign_create(
        project=project, dataset=dataset, name="Pilot", overlap=2, annotators=[annotator]
    )


@pytest.fixture
def active(draft):
    campaign_activate(campaign=draft)
    draft.refresh_from_db()
    return draft


def url(name, *args):
    return reverse(f"annotation:{name}", args=args)


def is_full_page(response) -> bool:
    return b"<html" in response.content


# --- the list and the project page ----------------------------------------------------------------


def test_the_campaign_list_shows_status_and_progress(researcher_client, active, project):
    response = researcher_client.get(url("campaign-list", project.slug))
    assert response.status_code == 200 and is_full_page(response)
    body = response.content.decode()
    assert "Pilot" in body and 'data-status="active"' in body
    assert "0 / 12 annotations" in body


def test_the_campaign_list_is_404_for_non_members_and_403_for_annotators(
    outsider_client, annotator_client, project
):
    assert outsider_client.get(url("campaign-list", project.slug)).status_code == 404
    assert annotator_client.get(url("campaign-list", project.slug)).status_code == 403


def test_the_campaign_list_refuses_post(researcher_client, project):
    assert researcher_client.post(url("campaign-list", project.slug)).status_code == 405


def test_the_campaign_list_answers_htmx_with_the_table_only(researcher_client, active, project):
    response = researcher_client.get(url("campaign-list", project.slug), headers=HX)
    assert response.status_code == 200 and not is_full_page(response)
    assert b'id="campaign-table"' in response.content and b"Pilot" in response.content


def test_the_project_page_lists_its_campaigns(researcher_client, project, tmp_path):
    from annotation.campaigns.services import campaign_create

    from .test_assignments import make_dataset

    campaign_create(project=project, dataset=make_dataset(project, tmp_path), name="Round 7")
    body = researcher_client.get(url("project-detail", project.slug)).content.decode()
    assert "<h2>Campaigns</h2>" in body
    assert url("campaign-create", project.slug) in body
    assert "Round 7" in body and 'id="campaign-table"' in body


# --- create and edit ------------------------------------------------------------------------------


def create_data(dataset, **extra):
    data = {
        "name": "Round 1",
        "dataset": dataset.pk,
        "skill_mode": "item",
        "overlap": 2,
        "show_reference": "on",
        "lease_value": 90,
        "lease_unit": "seconds",
        "instructions": "Read the **whole** answer.",
        "gold_percent": "10",
        "repeat_percent": "5",
    }
    data.update(extra)
    return data


def test_creating_a_campaign_makes_a_draft_and_activating_creates_tasks_and_pins_rubrics(
    researcher_client, project, dataset, annotator
):
    # given a create form posted by a researcher
    data = create_data(dataset, model_names=["m1"], annotators=[annotator.pk])
    # when
    response = researcher_client.post(url("campaign-create", project.slug), data)
    # then a draft exists with the settings translated
    campaign = Campaign.objects.get(name="Round 1")
    assert response.status_code == 302 and response["Location"] == url(
        "campaign-detail", campaign.pk
    )
    assert campaign.status == CampaignStatus.DRAFT
    assert (campaign.lease_seconds, campaign.gold_rate, campaign.repeat_rate) == (90, 0.1, 0.05)
    assert campaign.model_names == ["m1"] and list(campaign.annotators.all()) == [annotator]
    assert not Task.objects.filter(campaign=campaign).exists()
    # when it is activated
    response = researcher_client.post(url("campaign-activate", campaign.pk))
    # then one task per m1 response, and the rubric in force of every item skill is pinned
    assert response.status_code == 302
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.ACTIVE
    assert Task.objects.filter(campaign=campaign, kind=TaskKind.NORMAL).count() == 3
    pins = dict(campaign.rubrics.values_list("skill__name", "rubric_id"))
    assert sorted(pins) == sorted(SKILLS)
    current = Rubric.objects.filter(skill__name="Factuality", project__isnull=True)
    assert pins["Factuality"] == current.order_by("-version").first().pk
    # and the campaign page shows the pinned versions
    page = researcher_client.get(url("campaign-detail", campaign.pk)).content.decode()
    assert 'id="pinned-rubrics"' in page and "Factuality" in page


def test_a_fixed_skill_campaign_needs_skills_and_errors_are_answered_200(
    researcher_client, project, dataset
):
    data = create_data(dataset, skill_mode="fixed", lease_value=10)
    response = researcher_client.post(url("campaign-create", project.slug), data)
    assert response.status_code == 200
    body = response.content.decode()
    assert "tick at least one skill" in body and "between 30 seconds and 24 hours" in body
    assert not Campaign.objects.exists()


def test_the_create_form_offers_the_datasets_models_and_the_projects_annotators(
    researcher_client, project, dataset, annotator
):
    response = researcher_client.get(url("campaign-create", project.slug))
    assert response.status_code == 200 and is_full_page(response)
    body = response.content.decode()
    assert 'value="m1"' in body and 'value="m2"' in body
    assert "alice" in body


def test_the_create_form_is_404_for_non_members_and_403_for_annotators(
    outsider_client, annotator_client, project
):
    assert outsider_client.get(url("campaign-create", project.slug)).status_code == 404
    assert annotator_client.post(url("campaign-create", project.slug)).status_code == 403


def test_the_create_form_refuses_put(researcher_client, project):
    assert researcher_client.put(url("campaign-create", project.slug)).status_code == 405


def test_choosing_a_dataset_with_htmx_reloads_only_the_model_checkboxes(
    researcher_client, project, dataset, tmp_path
):
    other = make_dataset(project, tmp_path, models=("gpt-x",), name="Other")
    response = researcher_client.get(
        url("campaign-create", project.slug), {"dataset": other.pk}, headers=HX
    )
    assert response.status_code == 200 and not is_full_page(response)
    assert b'id="model-field"' in response.content
    assert b'value="gpt-x"' in response.content and b'value="m1"' not in response.content


def test_a_draft_can_be_edited(researcher_client, draft, dataset):
    data = create_data(dataset, name="Pilot 2", overlap=4)
    response = researcher_client.post(url("campaign-update", draft.pk), data)
    assert response.status_code == 302
    draft.refresh_from_db()
    assert (draft.name, draft.overlap, draft.lease_seconds) == ("Pilot 2", 4, 90)


def test_an_active_campaign_keeps_its_structure_but_may_change_its_pool(
    researcher_client, active, dataset, project, django_user_model
):
    # given a new annotator and a post that also tries to change K
    bob = make_annotator(django_user_model, project, "bob")
    data = create_data(
        dataset, name="Pilot", overlap=5, annotators=[bob.pk], lease_value=2, lease_unit="minutes"
    )
    # when
    response = researcher_client.post(url("campaign-update", active.pk), data)
    # then the pool and lease changed, K did not (the field is locked)
    assert response.status_code == 302
    active.refresh_from_db()
    assert active.overlap == 2 and active.lease_seconds == 120
    assert list(active.annotators.all()) == [bob]
    form = researcher_client.get(url("campaign-update", active.pk)).content.decode()
    assert 'name="overlap"' in form and "disabled" in form


def test_the_edit_page_is_404_for_non_members_403_for_annotators_and_refuses_put(
    outsider_client, annotator_client, researcher_client, draft
):
    assert outsider_client.get(url("campaign-update", draft.pk)).status_code == 404
    assert annotator_client.get(url("campaign-update", draft.pk)).status_code == 403
    assert researcher_client.put(url("campaign-update", draft.pk)).status_code == 405


def test_the_edit_page_answers_htmx_dataset_changes_with_the_model_field(researcher_client, draft):
    response = researcher_client.get(
        url("campaign-update", draft.pk), {"dataset": draft.dataset_id}, headers=HX
    )
    assert response.status_code == 200 and not is_full_page(response)
    assert b'id="model-field"' in response.content


# --- the campaign page ----------------------------------------------------------------------------


def test_the_campaign_page_shows_progress_annotators_quality_and_leases(
    researcher_client, active, annotator
):
    # given alice submitted one task and holds another
    submit(active, annotator, active_ms=4000)
    held = assignment_claim_next(campaign=active, annotator=annotator)
    # when
    response = researcher_client.get(url("campaign-detail", active.pk))
    # then
    assert response.status_code == 200 and is_full_page(response)
    body = response.content.decode()
    assert "1 of 12 annotations" in body  # 6 tasks × K=2
    assert 'id="skill-progress"' in body and 'id="annotator-progress"' in body
    assert 'id="quality"' in body and 'id="gold-tasks"' in body and 'id="expertise"' in body
    assert 'id="lease-list"' in body and f">{held.task_id}<" in body
    assert 'hx-trigger="every 5s"' in body


def test_the_campaign_page_is_404_for_non_members_and_403_for_annotators(
    outsider_client, annotator_client, active
):
    assert outsider_client.get(url("campaign-detail", active.pk)).status_code == 404
    assert annotator_client.get(url("campaign-detail", active.pk)).status_code == 403
    assert outsider_client.get(url("campaign-detail", 987654)).status_code == 404


def test_the_campaign_page_refuses_post(researcher_client, active):
    assert researcher_client.post(url("campaign-detail", active.pk)).status_code == 405


def test_htmx_polls_get_only_the_live_panel_and_286_once_nothing_can_change(
    researcher_client, active
):
    live = researcher_client.get(url("campaign-detail", active.pk), headers=HX)
    assert live.status_code == 200 and not is_full_page(live)
    assert b'id="campaign-live"' in live.content and b'id="quality"' not in live.content
    Campaign.objects.filter(pk=active.pk).update(status=CampaignStatus.FINISHED)
    done = researcher_client.get(url("campaign-detail", active.pk), headers=HX)
    assert done.status_code == 286 and b'hx-trigger="every 5s"' not in done.content


def test_the_campaign_page_costs_a_fixed_number_of_queries(
    researcher_client, active, annotator, project, django_user_model, tmp_path
):
    def page_queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert researcher_client.get(url("campaign-detail", active.pk)).status_code == 200
        return len(ctx.captured_queries)

    # given a campaign with one annotator's work
    submit(active, annotator, active_ms=1000)
    small = page_queries()
    # when more annotators work, skip, flag, hold leases, and gold tasks exist
    others = [make_annotator(django_user_model, project, f"user{i}") for i in range(3)]
    active.annotators.add(*others)
    for person in others:
        submit(active, person, active_ms=2000)
    flagged = assignment_claim_next(campaign=active, annotator=others[0])
    assignment_skip(assignment_id=flagged.pk, annotator=others[0], reason="broken", flag=True)
    assignment_claim_next(campaign=active, annotator=others[1])
    ids = skill_ids()
    response = active.dataset.items.get(external_id="i2").responses.get(model_name="m2")
    researcher_client.post(
        url("campaign-gold-set", active.pk),
        {
            "item": "i2",
            "model_name": response.model_name,
            "kind": "gold",
            "tolerance": 0,
            f"skill_{ids['Factuality']}": "3",
        },
    )
    big = page_queries()
    # then the count does not grow with the data, and stays small (SQLite reads the
    # annotators' active times for their medians in one more query: _median_active_ms;
    # two read the study participants: which of them to list, and their count per study)
    assert big == small
    assert big <= 32 + (connection.vendor == "sqlite")


# --- lifecycle buttons ----------------------------------------------------------------------------


def test_pause_stops_claims_and_resume_restores_them(researcher_client, active, annotator):
    # when paused
    response = researcher_client.post(url("campaign-status", active.pk), {"status": "paused"})
    # then no claim is served
    assert response.status_code == 302
    assert Campaign.objects.get(pk=active.pk).status == CampaignStatus.PAUSED
    assert assignment_claim_next(campaign=active, annotator=annotator) is None
    # when resumed, claims are served again
    researcher_client.post(url("campaign-status", active.pk), {"status": "active"})
    assert assignment_claim_next(campaign=active, annotator=annotator) is not None
    # and finishing ends it for good
    researcher_client.post(url("campaign-status", active.pk), {"status": "finished"})
    page = researcher_client.post(url("campaign-status", active.pk), {"status": "active"})
    assert Campaign.objects.get(pk=active.pk).status == CampaignStatus.FINISHED
    assert page.status_code == 302


def test_lifecycle_buttons_are_404_for_non_members_and_403_for_annotators(
    outsider_client, annotator_client, active, draft
):
    for name in ("campaign-activate", "campaign-status"):
        assert outsider_client.post(url(name, active.pk), {"status": "paused"}).status_code == 404
        assert annotator_client.post(url(name, active.pk), {"status": "paused"}).status_code == 403
    assert Campaign.objects.get(pk=active.pk).status == CampaignStatus.ACTIVE


def test_lifecycle_buttons_refuse_get(researcher_client, draft):
    assert researcher_client.get(url("campaign-activate", draft.pk)).status_code == 405
    assert researcher_client.get(url("campaign-status", draft.pk)).status_code == 405
    assert Campaign.objects.get(pk=draft.pk).status == CampaignStatus.DRAFT


def test_lifecycle_buttons_answer_htmx_with_a_client_redirect(researcher_client, draft):
    response = researcher_client.post(url("campaign-activate", draft.pk), headers=HX)
    assert response.status_code == 200
    assert response["HX-Redirect"] == url("campaign-detail", draft.pk)
    response = researcher_client.post(
        url("campaign-status", draft.pk), {"status": "paused"}, headers=HX
    )
    assert response["HX-Redirect"] == url("campaign-detail", draft.pk)
    assert Campaign.objects.get(pk=draft.pk).status == CampaignStatus.PAUSED


def test_a_draft_cannot_be_resumed_only_activated(researcher_client, draft):
    response = researcher_client.post(
        url("campaign-status", draft.pk), {"status": "active"}, follow=True
    )
    assert b"cannot become active" in response.content
    assert Campaign.objects.get(pk=draft.pk).status == CampaignStatus.DRAFT


# --- gold tasks -----------------------------------------------------------------------------------


def gold_data(**extra):
    ids = skill_ids()
    data = {
        "item": "i1",
        "model_name": "m2",
        "kind": "attention",
        "tolerance": 1,
        "explanation": "The answer is off-topic.",
        f"skill_{ids['Factuality']}": "1",
        f"skill_{ids['Readability']}": "na",
    }
    data.update(extra)
    return data


def test_a_response_is_marked_gold_with_its_known_scores(researcher_client, active):
    response = researcher_client.post(url("campaign-gold-set", active.pk), gold_data())
    assert response.status_code == 302
    task = Task.objects.get(campaign=active, kind=TaskKind.ATTENTION)
    assert (task.response.item.external_id, task.response.model_name) == ("i1", "m2")
    known = {g.skill.name: (g.score, g.is_na, g.tolerance) for g in GoldScore.objects.all()}
    assert known == {"Factuality": (1, False, 1), "Readability": (None, True, 1)}
    page = researcher_client.get(url("campaign-detail", active.pk)).content.decode()
    assert 'id="gold-list"' in page and "Readability: N/A" in page


def test_gold_form_errors_are_answered_200_and_nothing_is_saved(researcher_client, active):
    no_item = gold_data(item="nope")
    no_scores = {k: v for k, v in gold_data().items() if not k.startswith("skill_")}
    bad_tolerance = gold_data(tolerance=9)
    for data, message in [
        (no_item, b"no response of this model"),
        (no_scores, b"at least one skill"),
        (bad_tolerance, b"less than or equal to 4"),
    ]:
        response = researcher_client.post(url("campaign-gold-set", active.pk), data)
        assert response.status_code == 200 and is_full_page(response)
        assert message in response.content
    assert not Task.objects.filter(campaign=active).exclude(kind=TaskKind.NORMAL).exists()


def test_the_gold_form_is_404_for_non_members_403_for_annotators_and_refuses_get(
    outsider_client, annotator_client, researcher_client, active
):
    target = url("campaign-gold-set", active.pk)
    assert outsider_client.post(target, gold_data()).status_code == 404
    assert annotator_client.post(target, gold_data()).status_code == 403
    assert researcher_client.get(target).status_code == 405
    assert not GoldScore.objects.exists()


def test_the_gold_form_answers_htmx_with_its_section(researcher_client, active):
    response = researcher_client.post(url("campaign-gold-set", active.pk), gold_data(), headers=HX)
    assert response.status_code == 200 and not is_full_page(response)
    body = response.content.decode()
    assert 'id="gold-tasks"' in body and 'id="gold-list"' in body and "is now a attention" in body
    bad = researcher_client.post(
        url("campaign-gold-set", active.pk), gold_data(item="nope"), headers=HX
    )
    assert bad.status_code == 200 and b"no response of this model" in bad.content
    assert not is_full_page(bad)


# --- expertise ------------------------------------------------------------------------------------


def test_an_annotators_domains_are_set_and_listed(researcher_client, active, annotator):
    history, math = Domain.objects.filter(name__in=["History", "Math"]).order_by("name")
    response = researcher_client.post(
        url("campaign-expertise-set", active.pk),
        {"annotator": annotator.pk, "domains": [history.pk, math.pk]},
    )
    assert response.status_code == 302
    declared = AnnotatorExpertise.objects.filter(user=annotator)
    assert set(declared.values_list("domain__name", flat=True)) == {"History", "Math"}
    # and setting fewer replaces them
    researcher_client.post(
        url("campaign-expertise-set", active.pk), {"annotator": annotator.pk, "domains": [math.pk]}
    )
    assert list(
        AnnotatorExpertise.objects.filter(user=annotator).values_list("domain__name", flat=True)
    ) == ["Math"]


def test_routing_by_domain_serves_only_the_declared_domain(
    researcher_client, project, dataset, annotator
):
    campaign = campaign_create(
        project=project,
        dataset=dataset,
        name="Routed",
        annotators=[annotator],
        route_by_domain=True,
    )
    campaign_activate(campaign=campaign)
    math = Domain.objects.get(name="Math", project__isnull=True)
    researcher_client.post(
        url("campaign-expertise-set", campaign.pk),
        {"annotator": annotator.pk, "domains": [math.pk]},
    )
    a = assignment_claim_next(campaign=campaign, annotator=annotator)
    assert a.task.response.item.external_id == "i1"  # the only Math item


def test_the_expertise_form_is_404_for_non_members_403_for_annotators_and_refuses_get(
    outsider_client, annotator_client, researcher_client, active, annotator
):
    target = url("campaign-expertise-set", active.pk)
    assert outsider_client.post(target, {"annotator": annotator.pk}).status_code == 404
    assert annotator_client.post(target, {"annotator": annotator.pk}).status_code == 403
    assert researcher_client.get(target).status_code == 405


def test_the_expertise_form_answers_htmx_with_its_section(
    researcher_client, active, annotator, outsider
):
    math = Domain.objects.get(name="Math", project__isnull=True)
    target = url("campaign-expertise-set", active.pk)
    response = researcher_client.post(
        target, {"annotator": annotator.pk, "domains": [math.pk]}, headers=HX
    )
    assert response.status_code == 200 and not is_full_page(response)
    assert b'id="expertise"' in response.content and b"Domains of alice saved" in response.content
    # a non-member is not offered, so the form is answered 200 with the error
    bad = researcher_client.post(target, {"annotator": outsider.pk}, headers=HX)
    assert bad.status_code == 200 and b"Select a valid choice" in bad.content


def test_the_live_panel_shows_the_eta_from_the_recent_rate(researcher_client, active, annotator):
    now = timezone.now()
    with time_machine.travel(now - timedelta(minutes=20), tick=False):
        submit(active, annotator)
        submit(active, annotator)
    with time_machine.travel(now, tick=False):
        body = researcher_client.get(url("campaign-detail", active.pk), headers=HX).content
    # 10 open slots at 2 per hour: 5 hours
    assert b'<span id="eta">5\xc2\xa0hours</span>' in body


def test_the_form_offers_only_groups_with_a_member_in_the_project(
    researcher_client, project, dataset, annotator, outsider
):
    """Groups are site-wide: the form does not show the project's staff other groups, nor
    take them when posted."""
    from django.contrib.auth.models import Group

    crowd = Group.objects.create(name="crowd-here")
    crowd.user_set.add(annotator)
    strangers = Group.objects.create(name="strangers-elsewhere")
    strangers.user_set.add(outsider)
    page = researcher_client.get(url("campaign-create", project.slug)).content.decode()
    assert "crowd-here" in page and "strangers-elsewhere" not in page
    refused = researcher_client.post(
        url("campaign-create", project.slug), create_data(dataset, groups=[strangers.pk])
    )
    assert refused.status_code == 200 and not Campaign.objects.exists()
    assert "groups" in refused.context["form"].errors
    made = researcher_client.post(
        url("campaign-create", project.slug), create_data(dataset, groups=[crowd.pk])
    )
    assert made.status_code == 302
    assert list(Campaign.objects.get().groups.all()) == [crowd]
