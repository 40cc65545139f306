"""Project membership through the API and the members page: the staff read, project admins
add, change and remove; nobody but a site admin changes their own membership; a removed
member leaves the project's campaign pools and loses their open lease, but not their scores."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import (
    Assignment,
    AssignmentStatus,
    HumanScore,
    ProjectMembership,
    ProjectRole,
    Task,
)
from annotation.services.assignments import assignment_claim_next
from annotation.services.projects import membership_set, project_create
from tests.annotation.test_campaign_selectors import make_dataset, submit
from tests.clients import token_client

BASE = "/api/v1/annotation"
HX = {"HX-Request": "true"}


api = token_client


@pytest.fixture
def paula(django_user_model, project):
    user = django_user_model.objects.create_user("paula", password="pw")
    membership_set(project=project, user=user, role=ProjectRole.ADMIN)
    return user


def members_url(project, username: str = "") -> str:
    return f"{BASE}/projects/{project.slug}/members/" + (f"{username}/" if username else "")


def roles(project) -> dict[str, str]:
    return dict(
        ProjectMembership.objects.filter(project=project).values_list("user__username", "role")
    )


# --- the API ---------------------------------------------------------------------------------


def test_the_staff_read_the_members_admins_first(paula, researcher, annotator, project):
    body = api(researcher).get(members_url(project)).json()
    assert body["count"] == 3
    assert [(m["username"], m["role"]) for m in body["results"]] == [
        ("paula", "admin"),
        ("rita", "researcher"),
        ("alice", "annotator"),
    ]
    one = api(researcher).get(members_url(project, "alice"))
    assert one.status_code == 200 and one.json()["role"] == "annotator"
    assert api(researcher).get(members_url(project, "nobody")).status_code == 404
    assert api(annotator).get(members_url(project)).status_code == 403


def test_a_project_admin_adds_changes_and_removes(paula, annotator, outsider, project):
    client = api(paula)
    added = client.post(
        members_url(project), {"username": "charlie", "role": "researcher"}, format="json"
    )
    assert added.status_code == 201
    assert added.json()["username"] == "charlie" and added.json()["role"] == "researcher"
    changed = client.patch(members_url(project, "charlie"), {"role": "admin"}, format="json")
    assert changed.status_code == 200 and changed.json()["role"] == "admin"
    assert roles(project)["charlie"] == "admin"
    assert client.delete(members_url(project, "charlie")).status_code == 204
    assert "charlie" not in roles(project)
    # charlie no longer sees the project
    assert api(outsider).get(f"{BASE}/projects/{project.slug}/datasets/").status_code == 404


def test_bad_requests_are_specific_and_change_nothing(
    paula, researcher, annotator, django_user_model, project
):
    django_user_model.objects.create_user("gone", password="pw", is_active=False)
    client = api(paula)
    before = roles(project)
    cases = [
        (
            client.post(
                members_url(project), {"username": "ghost", "role": "annotator"}, format="json"
            ),
            400,
            {"username": ["no user named ghost can be added"]},
        ),
        (
            client.post(
                members_url(project), {"username": "gone", "role": "annotator"}, format="json"
            ),
            400,
            {"username": ["no user named gone can be added"]},
        ),
        (
            client.post(
                members_url(project), {"username": "alice", "role": "owner"}, format="json"
            ),
            400,
            None,
        ),
        (client.patch(members_url(project, "alice"), {"role": ""}, format="json"), 400, None),
    ]
    for response, status, fields in cases:
        assert response.status_code == status, response.json()
        assert response.json()["code"] == "invalid"
        if fields:
            assert response.json()["fields"] == fields
    again = client.post(members_url(project), {"username": "alice", "role": "admin"}, format="json")
    assert again.status_code == 409
    assert again.json() == {
        "detail": "alice is already a member of this project",
        "code": "membership_conflict",
    }
    assert roles(project) == before


def test_researchers_read_but_do_not_change_members(researcher, annotator, project):
    client = api(researcher)
    body = {"username": "alice", "role": "admin"}
    assert client.post(members_url(project), body, format="json").status_code == 403
    assert client.patch(members_url(project, "alice"), body, format="json").status_code == 403
    assert client.delete(members_url(project, "alice")).status_code == 403
    assert roles(project)["alice"] == "annotator"


def test_nobody_but_a_site_admin_changes_their_own_membership(paula, admin_user, project):
    client = api(paula)
    demote = client.patch(members_url(project, "paula"), {"role": "annotator"}, format="json")
    leave = client.delete(members_url(project, "paula"))
    for response in (demote, leave):
        assert response.status_code == 409
        assert response.json() == {
            "detail": "you cannot change or remove your own membership",
            "code": "membership_conflict",
        }
    assert roles(project)["paula"] == "admin"
    # a site admin may, even on their own membership
    membership_set(project=project, user=admin_user, role=ProjectRole.ADMIN)
    site = api(admin_user)
    assert site.patch(members_url(project, "admin"), {"role": "researcher"}, format="json")
    assert roles(project)["admin"] == "researcher"


def test_another_projects_admin_cannot_touch_this_project(django_user_model, annotator, project):
    elsewhere = project_create(slug="elsewhere")
    olga = django_user_model.objects.create_user("olga", password="pw")
    membership_set(project=elsewhere, user=olga, role=ProjectRole.ADMIN)
    client = api(olga)
    assert client.get(members_url(project)).status_code == 404
    assert client.delete(members_url(project, "alice")).status_code == 404
    add = client.post(members_url(project), {"username": "olga", "role": "admin"}, format="json")
    assert add.status_code == 404
    assert "olga" not in roles(project)


def test_removing_a_member_ends_their_pools_and_leases_but_keeps_their_scores(
    paula, annotator, project, tmp_path
):
    # given alice in the pools of two campaigns here and one elsewhere, with one submitted
    # task and one open lease here
    dataset = make_dataset(project, tmp_path)
    here = campaign_create(project=project, dataset=dataset, name="A", annotators=[annotator])
    second = campaign_create(project=project, dataset=dataset, name="B", annotators=[annotator])
    elsewhere = project_create(slug="elsewhere")
    membership_set(project=elsewhere, user=annotator, role=ProjectRole.ANNOTATOR)
    other = campaign_create(
        project=elsewhere,
        dataset=make_dataset(elsewhere, tmp_path, name="E"),
        name="C",
        annotators=[annotator],
    )
    campaign_activate(campaign=here)
    submit(here, annotator)
    lease = assignment_claim_next(campaign=here, annotator=annotator)
    assigned = Task.objects.get(pk=lease.task_id).assigned
    scores = HumanScore.objects.filter(assignment__annotator=annotator).count()
    # when
    response = api(paula).delete(members_url(project, "alice"))
    # then
    assert response.status_code == 204
    assert not here.annotators.exists() and not second.annotators.exists()
    assert list(other.annotators.all()) == [annotator]
    lease.refresh_from_db()
    assert lease.status == AssignmentStatus.EXPIRED
    assert Task.objects.get(pk=lease.task_id).assigned == assigned - 1
    assert HumanScore.objects.filter(assignment__annotator=annotator).count() == scores > 0
    assert Assignment.objects.filter(annotator=annotator, status="submitted").count() == 1
    # the lease cannot be used any more
    alice = api(annotator)
    assert alice.post(f"{BASE}/campaigns/{here.pk}/next/").status_code == 404
    assert roles(elsewhere)["alice"] == "annotator"


# --- the members page ----------------------------------------------------------------------------


def page(project):
    return reverse("annotation:member-list", args=[project.slug])


def test_researchers_see_the_list_without_controls(researcher_client, paula, annotator, project):
    response = researcher_client.get(page(project))
    body = response.content.decode()
    assert response.status_code == 200
    assert 'data-member="alice"' in body and 'data-member="paula"' in body
    assert "Add a member" not in body and "Save role" not in body


def test_a_project_admin_adds_a_member_with_htmx(paula, outsider, project, client):
    client.force_login(paula)
    response = client.post(page(project), {"username": "charlie", "role": "annotator"}, headers=HX)
    body = response.content.decode()
    assert response.status_code == 200 and "<html" not in body
    assert "charlie added as annotator." in body and 'data-member="charlie"' in body
    assert roles(project)["charlie"] == "annotator"
    # the own row has no controls
    assert 'data-member="paula"' in body
    paula_row = body.split('data-member="paula"')[1].split("</tr>")[0]
    assert "you" in paula_row and "Save role" not in paula_row


def test_the_add_form_shows_its_errors(paula, annotator, project, client):
    client.force_login(paula)
    unknown = client.post(page(project), {"username": "ghost", "role": "annotator"}, headers=HX)
    member = client.post(page(project), {"username": "alice", "role": "admin"}, headers=HX)
    assert "no user named ghost can be added" in unknown.content.decode()
    assert "alice is already a member of this project" in member.content.decode()
    assert roles(project) == {"paula": "admin", "alice": "annotator"}


def test_a_project_admin_changes_a_role_and_removes_a_member(paula, annotator, project, client):
    client.force_login(paula)
    url = reverse("annotation:member-update", args=[project.slug, "alice"])
    changed = client.post(url, {"role": "researcher"}, headers=HX)
    assert "alice is now researcher." in changed.content.decode()
    assert roles(project)["alice"] == "researcher"
    removed = client.post(url, {"remove": "on"})  # without htmx: back to the page
    assert removed.status_code == 302 and removed["Location"] == page(project)
    assert "alice" not in roles(project)
    assert client.post(url, {"role": "admin"}).status_code == 404  # no longer a member


def test_own_membership_and_an_empty_change_are_refused_on_the_page(paula, project, client):
    client.force_login(paula)
    own = client.post(
        reverse("annotation:member-update", args=[project.slug, "paula"]),
        {"role": "annotator"},
        headers=HX,
    )
    assert "paula: you cannot change or remove your own membership" in own.content.decode()
    empty = client.post(
        reverse("annotation:member-update", args=[project.slug, "paula"]), {}, headers=HX
    )
    assert "choose a role, or remove the member" in empty.content.decode()
    assert roles(project) == {"paula": "admin"}


def test_the_members_page_escapes_usernames(paula, django_user_model, project, client):
    user = django_user_model.objects.create_user("<b>x</b>", password="pw")
    membership_set(project=project, user=user, role=ProjectRole.ANNOTATOR)
    client.force_login(paula)
    body = client.get(page(project)).content.decode()
    assert "<b>x</b>" not in body and "&lt;b&gt;x&lt;/b&gt;" in body


# --- the record of changes ---------------------------------------------------------------------


def test_every_change_is_recorded_with_who_made_it(paula, annotator, outsider, project, client):
    from annotation.models import MembershipChange

    api_client = api(paula)
    api_client.post(
        members_url(project), {"username": "charlie", "role": "annotator"}, format="json"
    )
    api_client.patch(members_url(project, "charlie"), {"role": "researcher"}, format="json")
    api_client.patch(members_url(project, "paula"), {"role": "annotator"}, format="json")  # 409
    api_client.delete(members_url(project, "charlie"))
    rows = list(
        MembershipChange.objects.filter(project=project)
        .order_by("id")
        .values_list("username", "action", "role_before", "role_after", "changed_by__username")
    )
    assert rows == [
        ("paula", "added", "", "admin", None),  # the fixtures' seeding
        ("alice", "added", "", "annotator", None),
        ("charlie", "added", "", "annotator", "paula"),
        ("charlie", "role_changed", "annotator", "researcher", "paula"),
        ("charlie", "removed", "researcher", "", "paula"),
    ]
    # the members page shows them, newest first
    client.force_login(paula)
    body = client.get(page(project)).content.decode()
    table = body.split('id="member-changes"')[1]
    assert table.index("removed (was researcher)") < table.index("annotator → researcher")
    assert "a command" in table


# --- no user enumeration ---------------------------------------------------------------------


def _answers(client, url: str, data: dict, **extra) -> tuple[int, bytes, int]:
    """Status, body (the CSRF token masked afresh on every page aside) and query count."""
    import re

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        response = client.post(url, data, **extra)
    body = re.sub(
        rb'csrf[^"]*":\s*"[^"]+"|name="csrfmiddlewaretoken" value="[^"]+"',
        b"-",
        response.content,
        flags=re.IGNORECASE,
    )
    # the page says how long ago each change was: a slow host crosses a second between states
    body = re.sub(rb"\d+\xc2\xa0?\s?(second|minute)s? ago", b"moments ago", body)
    return response.status_code, body, len(queries)


def test_an_unknown_username_and_one_that_cannot_be_added_get_the_same_answer(
    paula, project, client, django_user_model
):
    # was: the same wording, but saying "no active user": the answers must stay identical
    # whatever makes a username not addable
    client.force_login(paula)
    attempt = {"username": "zoe", "role": "annotator"}
    targets = [
        ("api", lambda: _answers(api(paula), members_url(project), attempt, format="json")),
        ("page", lambda: _answers(client, page(project), attempt)),
        ("htmx", lambda: _answers(client, page(project), attempt, headers=HX)),
    ]
    states = {}
    # given: nobody is called zoe
    states["unknown"] = [answer() for _, answer in targets]
    # given: an active user whose name differs only in case
    django_user_model.objects.create_user("Zoe", password="pw")
    states["another case"] = [answer() for _, answer in targets]
    # given: zoe exists, but is inactive
    zoe = django_user_model.objects.create_user("zoe", password="pw", is_active=False)
    states["inactive"] = [answer() for _, answer in targets]
    # given: zoe is inactive and a member of another project
    membership_set(project=project_create(slug="elsewhere"), user=zoe, role=ProjectRole.ADMIN)
    states["inactive, member elsewhere"] = [answer() for _, answer in targets]

    # then
    first = states["unknown"]
    assert first[0][0] == 400 and b"no user named zoe can be added" in first[0][1]
    assert all(status == 200 for status, _, _ in first[1:])
    for state, answers in states.items():
        for (target, _), answer, expected in zip(targets, answers, first, strict=True):
            assert answer == expected, (state, target)
    assert "zoe" not in roles(project)
