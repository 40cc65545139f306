"""The campaign management API: create, list, read, edit, activate, pause/resume/finish —
names resolved to objects, each bad name reported under its field, nothing written when a
request is refused, state conflicts as 409 with the campaign's status, and a campaign made
through the API served to annotators through theirs."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from annotation.access import campaign_in_pool
from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import Campaign, CampaignStatus, ProjectRole, Task
from annotation.services.projects import membership_set, project_create
from tests.annotation.test_campaign_selectors import SKILLS, make_annotator, make_dataset, submit
from tests.clients import token_client

BASE = "/api/v1/annotation"


api = token_client


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path)  # 3 items × models m1, m2, on SKILLS


@pytest.fixture
def rita(researcher):
    return api(researcher)


def create(client, project, **body):
    return client.post(f"{BASE}/projects/{project.slug}/campaigns/", body, format="json")


# --- create -----------------------------------------------------------------------------------


def test_create_resolves_names_and_answers_the_campaign(rita, project, dataset, annotator):
    # when
    response = create(
        rita,
        project,
        name="  Pilot  ",
        dataset=dataset.pk,
        model_names=["m2"],
        skill_mode="fixed",
        fixed_skills=["Readability", "Factuality"],
        overlap=2,
        annotators=[annotator.username],
        lease_seconds=120,
        gold_rate=0.1,
        instructions="Read **carefully**.",
    )
    # then
    assert response.status_code == 201, response.json()
    body = response.json()
    campaign = Campaign.objects.get(pk=body["id"])
    assert body["name"] == campaign.name == "Pilot"
    assert body["status"] == "draft" and body["project"] == project.slug
    assert body["dataset"] == {"id": dataset.pk, "name": dataset.name}
    assert body["model_names"] == ["m2"] and body["skill_mode"] == "fixed"
    assert sorted(body["fixed_skills"]) == ["Factuality", "Readability"]
    assert set(campaign.fixed_skills.values_list("name", flat=True)) == {
        "Factuality",
        "Readability",
    }
    assert body["annotators"] == [annotator.username]
    assert body["lease_seconds"] == 120 and body["gold_rate"] == 0.1
    assert body["instructions"] == "Read **carefully**."
    assert body["show_reference"] is True  # a default, not a missing-boolean False
    assert body["progress"]["tasks"] == 0 and body["progress"]["eta_seconds"] == 0.0
    assert campaign.created_by.username == "rita"


def test_every_bad_name_is_reported_under_its_field_and_nothing_is_written(
    rita, project, dataset, researcher, outsider, tmp_path
):
    # given a dataset of another project
    elsewhere = project_create(slug="elsewhere")
    # when
    response = create(
        rita,
        project,
        name="Bad",
        dataset=dataset.pk,
        model_names=["m1", "nope"],
        fixed_skills=["Factuality", "Telepathy"],
        annotators=[researcher.username, outsider.username, "ghost"],
        groups=["nobody"],
    )
    other = create(
        rita, project, name="Bad", dataset=make_dataset(elsewhere, tmp_path, name="E").pk
    )
    # then
    assert response.status_code == 400
    fields = response.json()["fields"]
    assert fields["model_names"] == ["not a model of the dataset: nope"]
    assert fields["fixed_skills"] == ["no such skill: Telepathy"]
    assert fields["annotators"] == ["not an annotator of this project: rita, charlie, ghost"]
    assert fields["groups"] == ["no group of that name with a member in this project: nobody"]
    assert response.json()["code"] == "invalid"
    assert other.status_code == 400
    assert other.json()["fields"] == {"dataset": ["no dataset with this id in the project"]}
    assert not Campaign.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"overlap": 0}, "overlap"),
        ({"overlap": 51}, "overlap"),
        ({"lease_seconds": 29}, "lease_seconds"),
        ({"lease_seconds": 24 * 3600 + 1}, "lease_seconds"),
        ({"gold_rate": 0.6}, "gold_rate"),
        ({"repeat_rate": -0.1}, "repeat_rate"),
        ({"skill_mode": "sometimes"}, "skill_mode"),
        ({"quota_per_annotator": 0}, "quota_per_annotator"),
        ({"name": ""}, "name"),
        ({"dataset": "one"}, "dataset"),
        ({"annotators": "alice"}, "annotators"),
    ],
)
def test_out_of_range_settings_are_400s_naming_the_field(rita, project, dataset, body, field):
    response = create(rita, project, **{"name": "X", "dataset": dataset.pk, **body})
    assert response.status_code == 400
    assert field in response.json()["fields"], response.json()
    assert not Campaign.objects.exists()


def test_a_fixed_set_needs_skills_and_names_are_unique(rita, project, dataset):
    fixed = create(rita, project, name="F", dataset=dataset.pk, skill_mode="fixed")
    assert fixed.status_code == 400
    assert fixed.json()["fields"] == {
        "non_field_errors": ["a fixed-skill campaign needs at least one skill"]
    }
    assert create(rita, project, name="Same", dataset=dataset.pk).status_code == 201
    again = create(rita, project, name=" Same ", dataset=dataset.pk)
    assert again.status_code == 400
    assert again.json()["fields"] == {
        "name": ["this project already has a campaign with that name"]
    }
    assert Campaign.objects.count() == 1


def test_bodies_are_json_only(rita, project, dataset):
    """A form body would read a missing checkbox as false; the API takes JSON only."""
    url = f"{BASE}/projects/{project.slug}/campaigns/"
    response = rita.post(url, {"name": "Form", "dataset": dataset.pk})  # multipart
    assert response.status_code == 415 and response.json()["code"] == "unsupported_media_type"


# --- list and read -------------------------------------------------------------------------------


def test_the_list_is_paged_and_filters_by_status(rita, project, dataset, annotator):
    active = campaign_create(project=project, dataset=dataset, name="A", annotators=[annotator])
    campaign_activate(campaign=active)
    campaign_create(project=project, dataset=dataset, name="B")
    url = f"{BASE}/projects/{project.slug}/campaigns/"
    everything = rita.get(url).json()
    assert everything["count"] == 2
    assert [r["name"] for r in everything["results"]] == ["B", "A"]  # newest first
    row = rita.get(url, {"status": "active"}).json()["results"]
    assert row == [
        {
            "id": active.pk,
            "name": "A",
            "status": "active",
            "dataset": {"id": dataset.pk, "name": dataset.name},
            "overlap": 3,
            "tasks": 6,
            "slots_done": 0,
            "slots_needed": 18,
            "percent": 0,
            "created_at": row[0]["created_at"],
        }
    ]
    assert rita.get(url, {"limit": 1}).json()["next"]
    bad = rita.get(url, {"status": "sleeping"})
    assert bad.status_code == 400 and "status" in bad.json()["fields"]


def test_read_shows_settings_and_live_progress(
    rita, project, dataset, annotator, django_user_model
):
    bob = make_annotator(django_user_model, project, "bob")
    campaign = campaign_create(
        project=project, dataset=dataset, name="P", overlap=2, annotators=[annotator, bob]
    )
    campaign_activate(campaign=campaign)
    submit(campaign, annotator)
    submit(campaign, bob)
    body = rita.get(f"{BASE}/campaigns/{campaign.pk}/").json()
    assert body["status"] == "active" and body["annotators"] == ["alice", "bob"]
    progress = body["progress"]
    assert progress["tasks"] == 6 and progress["slots_needed"] == 12
    assert progress["slots_done"] == 2 and progress["per_hour"] == 2
    assert progress["percent"] == 17  # round(100 * 2 / 12)
    assert progress["eta_seconds"] == pytest.approx(10 / 2 * 3600)


def test_staff_only_annotators_403_others_404(project, dataset, annotator, outsider):
    campaign = campaign_create(project=project, dataset=dataset, name="P")
    assert api(annotator).get(f"{BASE}/campaigns/{campaign.pk}/").status_code == 403
    assert api(outsider).get(f"{BASE}/campaigns/{campaign.pk}/").status_code == 404
    refused = api(outsider).patch(f"{BASE}/campaigns/{campaign.pk}/", {"overlap": 5}, format="json")
    assert refused.status_code == 404
    campaign.refresh_from_db()
    assert campaign.overlap == 3


# --- edit ----------------------------------------------------------------------------------------


def test_a_draft_changes_anything_and_a_patch_changes_only_what_it_names(
    rita, project, dataset, annotator
):
    campaign = campaign_create(
        project=project, dataset=dataset, name="P", annotators=[annotator], show_reference=False
    )
    response = rita.patch(
        f"{BASE}/campaigns/{campaign.pk}/",
        {"overlap": 5, "model_names": ["m1"], "annotators": []},
        format="json",
    )
    assert response.status_code == 200, response.json()
    campaign.refresh_from_db()
    assert (campaign.overlap, campaign.model_names) == (5, ["m1"])
    assert not campaign.annotators.exists()
    assert campaign.show_reference is False and campaign.name == "P"  # untouched


def test_a_running_campaign_keeps_its_structure_409(rita, project, dataset, annotator):
    campaign = campaign_create(project=project, dataset=dataset, name="P", annotators=[annotator])
    campaign_activate(campaign=campaign)
    url = f"{BASE}/campaigns/{campaign.pk}/"
    # when
    locked = rita.patch(url, {"overlap": 5, "lease_seconds": 60}, format="json")
    same = rita.patch(url, {"overlap": 3, "lease_seconds": 60}, format="json")
    # then
    assert locked.status_code == 409
    assert locked.json() == {
        "detail": "only a draft campaign can change overlap; this one is active",
        "code": "campaign_state",
        "status": "active",
    }
    assert same.status_code == 200 and same.json()["lease_seconds"] == 60
    campaign.refresh_from_db()
    assert campaign.overlap == 3


def test_a_finished_campaign_cannot_be_edited_activated_or_resumed(rita, project, dataset):
    campaign = campaign_create(project=project, dataset=dataset, name="P")
    campaign_activate(campaign=campaign)
    url = f"{BASE}/campaigns/{campaign.pk}"
    assert rita.post(f"{url}/status/", {"status": "finished"}, format="json").status_code == 200
    for response in (
        rita.patch(f"{url}/", {"instructions": "more"}, format="json"),
        rita.post(f"{url}/activate/"),
        rita.post(f"{url}/status/", {"status": "active"}, format="json"),
    ):
        assert response.status_code == 409, response.json()
        assert response.json()["code"] == "campaign_state"
        assert response.json()["status"] == "finished"
    campaign.refresh_from_db()
    assert campaign.instructions == "" and campaign.status == CampaignStatus.FINISHED


# --- lifecycle and the annotators' side ----------------------------------------------------------


def test_created_activated_and_paused_through_the_api_as_annotators_see_it(
    rita, project, dataset, annotator, django_user_model
):
    # given a campaign made and activated through the API
    bob = make_annotator(django_user_model, project, "bob")
    body = {"name": "Live", "dataset": dataset.pk, "annotators": ["alice", "bob"]}
    made = create(rita, project, **body).json()
    url = f"{BASE}/campaigns/{made['id']}"
    activated = rita.post(f"{url}/activate/")
    again = rita.post(f"{url}/activate/")
    alice, bob_api = api(annotator), api(bob)
    # then the annotator claims a task of it
    assert activated.status_code == 200 and activated.json()["tasks_created"] == 6
    assert activated.json()["campaign"]["status"] == "active"
    assert again.json()["tasks_created"] == 0  # idempotent
    assert Task.objects.filter(campaign_id=made["id"]).count() == 6
    lease = alice.post(f"{url}/next/")
    assert lease.status_code == 200
    # when paused, no new task is served (alice keeps her open lease); resumed, it is
    paused = rita.post(f"{url}/status/", {"status": "paused"}, format="json")
    assert paused.status_code == 200 and paused.json()["status"] == "paused"
    assert bob_api.post(f"{url}/next/").status_code == 204
    kept = alice.post(f"{url}/next/").json()
    assert kept["assignment_id"] == lease.json()["assignment_id"]
    pause_again = rita.post(f"{url}/status/", {"status": "paused"}, format="json")
    assert pause_again.status_code == 409 and pause_again.json()["status"] == "paused"
    assert rita.post(f"{url}/status/", {"status": "active"}, format="json").status_code == 200
    assert bob_api.post(f"{url}/next/").status_code == 200


def test_status_takes_only_pause_resume_finish(rita, project, dataset):
    campaign = campaign_create(project=project, dataset=dataset, name="P")
    url = f"{BASE}/campaigns/{campaign.pk}/status/"
    assert rita.post(url, {"status": "draft"}, format="json").status_code == 400
    draft = rita.post(url, {"status": "paused"}, format="json")
    assert draft.status_code == 409 and draft.json()["status"] == "draft"


def test_activation_without_a_rubric_is_a_400_that_changes_nothing(rita, project, dataset):
    from annotation.models import Rubric

    Rubric.objects.filter(skill__name="Readability").delete()
    campaign = campaign_create(project=project, dataset=dataset, name="P")
    response = rita.post(f"{BASE}/campaigns/{campaign.pk}/activate/")
    assert response.status_code == 400
    assert response.json()["detail"] == "no rubric for: Readability"
    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.DRAFT and not campaign.tasks.exists()


# --- groups: a site-wide group admits only its members who hold a project role -----------------


def test_groups_offered_and_admitted_are_limited_to_project_members(
    rita, project, dataset, annotator, outsider
):
    # given a group with a project annotator and an outsider, and one with outsiders only
    mixed = Group.objects.create(name="mixed")
    mixed.user_set.add(annotator, outsider)
    Group.objects.create(name="strangers").user_set.add(outsider)
    # when
    refused = create(rita, project, name="S", dataset=dataset.pk, groups=["strangers"])
    made = create(rita, project, name="M", dataset=dataset.pk, groups=["mixed"])
    # then
    assert refused.status_code == 400 and "groups" in refused.json()["fields"]
    assert made.status_code == 201 and made.json()["groups"] == ["mixed"]
    campaign = Campaign.objects.get(pk=made.json()["id"])
    campaign_activate(campaign=campaign)
    assert campaign_in_pool(user=annotator, campaign_id=campaign.pk)
    assert not campaign_in_pool(user=outsider, campaign_id=campaign.pk)
    assert api(outsider).post(f"{BASE}/campaigns/{campaign.pk}/next/").status_code == 404
    # once the outsider joins the project (any role), the group admits them
    membership_set(project=project, user=outsider, role=ProjectRole.ANNOTATOR)
    assert campaign_in_pool(user=outsider, campaign_id=campaign.pk)


def test_an_edit_keeps_a_group_that_no_longer_qualifies(rita, project, dataset, annotator):
    group = Group.objects.create(name="crowd")
    group.user_set.add(annotator)
    campaign = campaign_create(project=project, dataset=dataset, name="P", groups=[group])
    group.user_set.remove(annotator)  # now it has no member in the project
    response = rita.patch(
        f"{BASE}/campaigns/{campaign.pk}/", {"groups": ["crowd"], "overlap": 2}, format="json"
    )
    assert response.status_code == 200 and response.json()["groups"] == ["crowd"]


def test_skills_names_match_the_catalogue(rita, project, dataset):
    assert len(SKILLS) == 3
    response = create(
        rita, project, name="All", dataset=dataset.pk, skill_mode="fixed", fixed_skills=SKILLS
    )
    assert response.status_code == 201
    assert sorted(response.json()["fixed_skills"]) == sorted(SKILLS)
