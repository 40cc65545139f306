"""Study participants stay out of the staff's pickers and member lists: a crowd study makes
an account per worker (annotation/study/), and with 2,000 of them the campaign form, the
members page and the expertise panel list the staff and regular annotators, with each study
as one line (a count); a study's participants are listed when asked, a page at a time. The
APIs keep listing them by default, with a `participants` filter. A campaign's own
participants stay in its pool through every edit."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import (
    AnnotatorExpertise,
    Campaign,
    Domain,
    MembershipChange,
    Participant,
    ParticipantState,
    ProjectMembership,
    ProjectRole,
    StudyLink,
)
from annotation.services.projects import membership_set
from tests.annotation.test_campaign_selectors import make_dataset
from tests.clients import token_client

CROWD = 2_000
HX = {"HX-Request": "true"}
#: Above what the pages weigh (10-15 KB; 87 KB for a project admin's page of 50
#: participants, each with its role and remove forms) and far below what they weighed when
#: they listed 2,000 participants (230-830 KB).
PAGE_BYTES = 100_000


def crowd_join(
    campaign: Campaign, *, n: int, platforms: Sequence[str] = ("prolific",), declined: int = 0
) -> list:
    """What `participant_enter` leaves behind for `n` workers, in five bulk inserts: the
    study links, password-less accounts, annotator memberships (and their log rows), places
    in the campaign's pool, Participant rows; the first `declined` declined consent (out of
    the pool, as participant_consent leaves them)."""
    User = get_user_model()
    links = [
        StudyLink.objects.create(campaign=campaign, platform=p, token=secrets.token_urlsafe(32))
        for p in platforms
    ]
    first = Participant.objects.filter(campaign=campaign).count()
    users = User.objects.bulk_create(
        User(username=f"p{campaign.pk}-{first + i:016x}", password="!unusable") for i in range(n)
    )
    ProjectMembership.objects.bulk_create(
        ProjectMembership(project_id=campaign.project_id, user=u, role=ProjectRole.ANNOTATOR)
        for u in users
    )
    MembershipChange.objects.bulk_create(
        MembershipChange(
            project_id=campaign.project_id,
            username=u.username,
            action=MembershipChange.Action.ADDED,
            role_after=ProjectRole.ANNOTATOR,
        )
        for u in users
    )
    pool = Campaign.annotators.through
    pool.objects.bulk_create(pool(campaign_id=campaign.pk, user_id=u.pk) for u in users[declined:])
    Participant.objects.bulk_create(
        Participant(
            link=links[i % len(links)],
            campaign=campaign,
            user=u,
            platform=links[i % len(links)].platform,
            worker_id=f"w{first + i}",
            state=ParticipantState.DECLINED if i < declined else ParticipantState.WORKING,
        )
        for i, u in enumerate(users)
    )
    return users


@pytest.fixture
def dataset(project, tmp_path):
    return make_dataset(project, tmp_path)


@pytest.fixture
def paula(django_user_model, project):
    """A project admin: her members page has every row's role and remove forms."""
    user = django_user_model.objects.create_user("paula", password="pw")
    membership_set(project=project, user=user, role=ProjectRole.ADMIN)
    return user


@pytest.fixture
def paula_client(client, paula):
    client.force_login(paula)
    return client


@pytest.fixture
def crowd(project, dataset, annotator) -> Campaign:
    """An active campaign whose Prolific and MTurk links brought in 2,000 workers."""
    campaign = campaign_create(project=project, dataset=dataset, name="Crowd", overlap=1)
    campaign_activate(campaign=campaign)
    crowd_join(campaign, n=CROWD, platforms=("prolific", "mturk"))
    return campaign


@pytest.fixture
def follow_up(project, dataset) -> Campaign:
    """A second study: five workers, two of whom declined consent."""
    campaign = campaign_create(project=project, dataset=dataset, name="Follow-up", overlap=1)
    crowd_join(campaign, n=5, platforms=("generic",), declined=2)
    return campaign


@pytest.fixture
def staff_round(project, dataset, annotator) -> Campaign:
    return campaign_create(
        project=project, dataset=dataset, name="Staff round", overlap=1, annotators=[annotator]
    )


def url(name: str, *args) -> str:
    return reverse(f"annotation:{name}", args=args)


def participant_names(body: bytes, campaign: Campaign) -> int:
    return body.count(f"p{campaign.pk}-".encode())


def pool_ids(campaign: Campaign) -> set[int]:
    return set(campaign.annotators.values_list("pk", flat=True))


def participant_ids(campaign: Campaign, *, pooled: bool = True) -> set[int]:
    rows = Participant.objects.filter(campaign=campaign)
    if pooled:
        rows = rows.exclude(state=ParticipantState.DECLINED)
    return set(rows.values_list("user_id", flat=True))


def form_post(campaign: Campaign | None, dataset, annotators=(), studies=(), **extra) -> dict:
    data = {
        "name": campaign.name if campaign else "Next round",
        "dataset": dataset.pk,
        "skill_mode": "item",
        "overlap": 1,
        "lease_value": 15,
        "lease_unit": "minutes",
        "gold_percent": "0",
        "repeat_percent": "0",
        "annotators": [a.pk for a in annotators],
        "studies": [s.pk for s in studies],
    }
    return data | extra


# --- the campaign form ------------------------------------------------------------------------


def test_the_new_campaign_form_offers_staff_annotators_and_each_study_as_a_count(
    crowd, follow_up, project, researcher_client, annotator, django_assert_max_num_queries
):
    # was: one checkbox per participant, 233 KB with 2,000 of them
    target = url("campaign-create", project.slug)
    researcher_client.get(target)  # warm the session and the site's caches
    # when
    with django_assert_max_num_queries(14):
        page = researcher_client.get(target)
    # then
    body = page.content
    assert page.status_code == 200 and len(body) < PAGE_BYTES
    assert participant_names(body, crowd) == 0 and participant_names(body, follow_up) == 0
    assert f'value="{annotator.pk}"'.encode() in body  # alice, a regular annotator
    studies = body.split(b'id="study-participants"')[1]
    assert b"Crowd (2,000 participants)" in studies
    assert b"Follow-up (5 participants)" in studies  # declined ones are members still


def test_ticking_a_study_puts_its_participants_in_the_pool_and_unticking_takes_them_out(
    crowd, follow_up, project, dataset, researcher_client, annotator
):
    # when a new campaign takes alice and the follow-up's participants
    created = researcher_client.post(
        url("campaign-create", project.slug),
        form_post(None, dataset, annotators=[annotator], studies=[follow_up]),
    )
    # then the pool has alice and the three who did not decline
    assert created.status_code == 302
    campaign = Campaign.objects.get(name="Next round")
    assert pool_ids(campaign) == {annotator.pk} | participant_ids(follow_up)
    # and its edit form shows the study ticked, as a count
    edit = researcher_client.get(url("campaign-update", campaign.pk)).content.decode()
    studies = edit.split('id="study-participants"')[1].split("</details>")[0]
    box = studies.split(f'value="{follow_up.pk}"')[1].split(">")[0]
    assert "checked" in box and participant_names(edit.encode(), follow_up) == 0
    # when both studies are ticked, then every participant of both is in
    researcher_client.post(
        url("campaign-update", campaign.pk),
        form_post(campaign, dataset, annotators=[annotator], studies=[follow_up, crowd]),
    )
    everyone = {annotator.pk} | participant_ids(follow_up) | participant_ids(crowd)
    assert pool_ids(campaign) == everyone and len(everyone) == 1 + 3 + CROWD
    # when neither is, then only alice stays
    researcher_client.post(
        url("campaign-update", campaign.pk), form_post(campaign, dataset, annotators=[annotator])
    )
    assert pool_ids(campaign) == {annotator.pk}


def test_a_participant_cannot_be_ticked_one_by_one(
    crowd, project, dataset, researcher_client, annotator
):
    one = Participant.objects.filter(campaign=crowd).first()
    data = form_post(None, dataset, annotators=[annotator])
    data["annotators"].append(one.user_id)
    page = researcher_client.post(url("campaign-create", project.slug), data)
    assert page.status_code == 200 and b"Select a valid choice" in page.content


def test_editing_a_crowd_campaign_keeps_its_own_participants_in_its_pool(
    crowd, dataset, researcher_client, annotator, django_assert_max_num_queries
):
    # given the crowd campaign's edit form: its participants are a count, not checkboxes
    target = url("campaign-update", crowd.pk)
    researcher_client.get(target)
    with django_assert_max_num_queries(20):
        form = researcher_client.get(target)
    assert len(form.content) < PAGE_BYTES and participant_names(form.content, crowd) == 0
    own = form.content.split(b'id="own-participants"')[1].split(b"</p>")[0]
    assert b"2,000" in own and url("campaign-study", crowd.pk).encode() in own
    # when the researcher saves the pool with alice ticked
    saved = researcher_client.post(target, form_post(crowd, dataset, annotators=[annotator]))
    # then the 2,000 participants are still in it, with alice
    assert saved.status_code == 302
    assert pool_ids(crowd) == {annotator.pk} | participant_ids(crowd)
    # and unticking alice takes out only her
    researcher_client.post(target, form_post(crowd, dataset))
    assert pool_ids(crowd) == participant_ids(crowd)


# --- the members page -------------------------------------------------------------------------


def test_the_members_page_lists_the_staff_and_annotators_and_each_study_as_one_line(
    crowd, follow_up, project, paula_client, annotator, researcher, django_assert_max_num_queries
):
    # was: 2,000 rows with their role and remove forms, 331 KB for a researcher
    target = url("member-list", project.slug)
    paula_client.get(target)
    # when
    with django_assert_max_num_queries(10):
        page = paula_client.get(target)
    # then
    body = page.content
    assert page.status_code == 200 and len(body) < PAGE_BYTES
    assert participant_names(body, crowd) == 0 and participant_names(body, follow_up) == 0
    members = body.split(b'id="member-list"')[1].split(b"</table>")[0]
    assert members.count(b"<tr data-member=") == 3  # paula, rita, alice
    studies = body.decode().split('id="member-studies"')[1].split("</table>")[0]
    row = studies.split(f'data-study="{crowd.pk}"')[1].split("</tr>")[0]
    assert url("campaign-study", crowd.pk) in row and ">Crowd</a>" in row
    assert '<td class="num">2</td><td class="num">2,000</td>' in row  # links, participants
    assert f"?study={crowd.pk}" in row
    assert f'data-study="{follow_up.pk}"' in studies
    # the recent changes are the people's, not the study arrivals
    changes = body.split(b'id="member-changes"')[1]
    assert b"paula" in changes and b"alice" in changes


def test_a_studys_participants_are_listed_a_page_at_a_time(
    crowd, project, paula_client, django_assert_max_num_queries
):
    target = url("member-list", project.slug)
    paula_client.get(target)
    # when
    with django_assert_max_num_queries(10):
        page = paula_client.get(f"{target}?study={crowd.pk}&page=2")
    # then 50 of them, with the pager
    body = page.content.decode()
    assert page.status_code == 200 and len(page.content) < PAGE_BYTES
    assert body.count("<tr data-member=") == 50
    assert "page 2 of 40 (2,000 participants)" in body
    assert f"?study={crowd.pk}&amp;page=3" in body and f"?study={crowd.pk}&amp;page=1" in body
    assert 'id="member-studies"' not in body and 'id="member-add"' not in body
    # the pager swaps only the section
    partial = paula_client.get(f"{target}?study={crowd.pk}&page=40", headers=HX)
    assert b"<html" not in partial.content and partial.content.count(b"<tr data-member=") == 50
    # an unknown study lists nobody and says so
    unknown = paula_client.get(f"{target}?study=987654").content
    assert b"No campaign of this project has that id" in unknown
    assert b"<tr data-member=" not in unknown


def test_a_change_made_from_a_study_list_comes_back_to_that_list(crowd, project, paula_client):
    # given the third page of the study's participants
    last = Participant.objects.filter(campaign=crowd).order_by("user__username")[120].user
    change = url("member-update", project.slug, last.username)
    data = {"role": "reviewer", "study": crowd.pk, "page": 3}
    # when paula changes one's role, without htmx
    answer = paula_client.post(change, data)
    # then she is back on that page
    assert answer.status_code == 302
    assert answer["Location"] == f"{url('member-list', project.slug)}?study={crowd.pk}&page=3"
    assert ProjectMembership.objects.get(user=last).role == "reviewer"
    # and with htmx the section shows that page again
    swapped = paula_client.post(change, data | {"role": "annotator"}, headers=HX)
    body = swapped.content.decode()
    assert swapped.status_code == 200 and f"{last.username} is now annotator" in body
    assert "page 3 of 40" in body


def test_the_members_api_lists_participants_by_default_and_filters_them(
    crowd, follow_up, project, researcher
):
    api = token_client(researcher)
    base = f"/api/v1/annotation/projects/{project.slug}/members/"
    # the default is unchanged: everyone
    assert api.get(base).json()["count"] == 2 + CROWD + 5  # rita, alice
    excluded = api.get(f"{base}?participants=exclude").json()
    assert [m["username"] for m in excluded["results"]] == ["rita", "alice"]
    assert api.get(f"{base}?participants=only").json()["count"] == CROWD + 5
    assert api.get(f"{base}?participants=include").json()["count"] == 2 + CROWD + 5
    one_study = api.get(f"{base}?study={follow_up.pk}").json()
    assert one_study["count"] == 5
    assert all(m["username"].startswith(f"p{follow_up.pk}-") for m in one_study["results"])
    bad = api.get(f"{base}?participants=some")
    assert bad.status_code == 400 and "participants" in bad.json()["fields"]


# --- the expertise panel (campaign page) ------------------------------------------------------


def test_the_expertise_panel_lists_the_annotators_and_each_study_as_one_line(
    crowd, staff_round, researcher_client, annotator, django_assert_max_num_queries
):
    # was: 2,000 rows and a 2,000-option select on every campaign page of the project
    target = url("campaign-detail", staff_round.pk)
    researcher_client.get(target)
    with django_assert_max_num_queries(40):
        page = researcher_client.get(target)
    body = page.content
    assert page.status_code == 200 and len(body) < PAGE_BYTES
    assert participant_names(body, crowd) == 0
    panel = body.decode().split('id="expertise"')[1]
    assert '<tr><td>alice</td><td><span class="muted">any</span>' in panel
    assert panel.split('name="annotator"')[1].split("</select>")[0].count("<option") == 2
    row = panel.split(f'data-study="{crowd.pk}"')[1].split("</tr>")[0]
    assert "2,000" in row and f"?study={crowd.pk}#expertise" in row


def test_a_studys_participants_get_their_domains_from_the_panel_a_page_at_a_time(
    crowd, staff_round, researcher_client
):
    # given the panel listing the crowd study's second page
    target = url("campaign-detail", staff_round.pk)
    page = researcher_client.get(f"{target}?study={crowd.pk}&page=2").content.decode()
    panel = page.split('id="expertise"')[1]
    assert panel.count("<tr><td>p") == 50 and "page 2 of 40 (2,000 participants)" in panel
    select = panel.split('name="annotator"')[1].split("</select>")[0]
    assert select.count("<option") == 51  # the empty choice and the 50 listed
    # when the researcher declares one's domain
    worker = Participant.objects.filter(campaign=crowd).order_by("user__username")[60].user
    math = Domain.objects.get(name="Math", project__isnull=True)
    answer = researcher_client.post(
        url("campaign-expertise-set", staff_round.pk),
        {"annotator": worker.pk, "domains": [math.pk], "study": crowd.pk, "page": 2},
        headers=HX,
    )
    # then it is saved, and the panel stays on that page
    assert AnnotatorExpertise.objects.filter(user=worker, domain=math).exists()
    body = answer.content.decode()
    assert f"Domains of {worker.username} saved" in body and "page 2 of 40" in body


# --- the crowd campaign's own page ------------------------------------------------------------


def test_the_crowd_campaign_page_counts_its_participants_in_the_pool(
    crowd, researcher_client, django_assert_max_num_queries
):
    # was: 828 KB (a tag per participant, a throughput row each, the expertise table)
    target = url("campaign-detail", crowd.pk)
    researcher_client.get(target)
    with django_assert_max_num_queries(40):
        page = researcher_client.get(target)
    body = page.content.decode()
    assert page.status_code == 200 and len(page.content) < PAGE_BYTES
    pool = body.split('id="campaign-settings"')[1].split("</section>")[0]
    assert f'data-pool-study="{crowd.pk}">2,000 participants of the study of' in pool
    assert "The pool is empty" not in pool
    assert participant_names(page.content, crowd) == 0  # none has worked yet


# --- the campaign API -------------------------------------------------------------------------


def test_the_campaign_api_narrows_the_pool_it_shows_and_a_patch_keeps_own_participants(
    crowd, researcher, annotator
):
    api = token_client(researcher)
    target = f"/api/v1/annotation/campaigns/{crowd.pk}/"
    # the default is unchanged: the whole pool
    assert len(api.get(target).json()["annotators"]) == CROWD
    api.patch(target, {"annotators": ["alice"]}, format="json")
    assert len(api.get(target).json()["annotators"]) == CROWD + 1
    assert api.get(f"{target}?participants=exclude").json()["annotators"] == ["alice"]
    assert len(api.get(f"{target}?participants=only").json()["annotators"]) == CROWD
    # a patch that leaves them out keeps them: they come and go through the study links
    api.patch(target, {"annotators": []}, format="json")
    assert pool_ids(crowd) == participant_ids(crowd)
    assert api.get(f"{target}?participants=all").status_code == 400
