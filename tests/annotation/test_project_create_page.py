"""The new-project page (site admins), the home page's first steps on a server with no
project, and the empty project's first steps (docs/ACCESS.md, docs/SERVING.md)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Project, ProjectMembership

pytestmark = pytest.mark.django_db

URL = "/projects/new/"


def test_the_page_is_at_projects_new():
    assert reverse("annotation:project-create") == URL


def test_a_site_admin_on_a_fresh_server_is_shown_how_to_start(admin_client):
    # given no project at all
    assert not Project.objects.exists()
    # when
    html = admin_client.get(reverse("annotation:home")).content.decode()
    # then
    assert "You are not a member of any project yet" not in html
    assert "There is no project on this server yet" in html
    assert f'href="{URL}"' in html


def test_a_site_admin_with_projects_finds_the_new_project_button_on_the_list(admin_client, project):
    html = admin_client.get(reverse("annotation:home")).content.decode()
    assert project.name in html
    assert f'href="{URL}"' in html


def test_a_user_of_no_project_is_told_who_adds_them_and_gets_no_create_button(outsider_client):
    html = outsider_client.get(reverse("annotation:home")).content.decode()
    assert "You are not a member of any project yet" in html
    assert "a site admin of this server can add you" in html
    assert URL not in html


def test_a_site_admin_creates_a_project_with_the_slug_made_from_its_name(admin_client):
    # when
    answer = admin_client.post(
        URL, {"name": "Summer Study 2025", "slug": "", "description": "Pilot <b>one</b>"}
    )
    # then
    project = Project.objects.get()
    assert (project.slug, project.name) == ("summer-study-2025", "Summer Study 2025")
    assert project.description == "Pilot <b>one</b>"
    assert answer.status_code == 302
    assert answer["Location"] == reverse("annotation:project-detail", args=[project.slug])
    # site admins are admins of every project: the project starts without members
    assert not ProjectMembership.objects.exists()


def test_the_new_projects_page_shows_the_first_steps(admin_client):
    admin_client.post(URL, {"name": "Pilot", "slug": "pilot-1"})
    html = admin_client.get("/projects/pilot-1/").content.decode()
    assert "Project Pilot created." in html
    steps = html[html.index('id="first-steps"') :]
    assert 'href="/projects/pilot-1/uploads/new/"' in steps
    assert 'href="/projects/pilot-1/members/"' in steps


def test_the_project_name_and_description_are_escaped(admin_client):
    admin_client.post(URL, {"name": "<i>x</i> study", "slug": "x-study", "description": "<b>y</b>"})
    html = admin_client.get("/projects/x-study/").content.decode()
    assert "<i>x</i>" not in html and "&lt;i&gt;x&lt;/i&gt; study" in html
    assert "<b>y</b>" not in html


@pytest.mark.parametrize(
    ("slug", "problem"),
    [
        (
            "Bad Slug!",
            "a slug has only lower-case letters, digits, hyphens and underscores: "
            "bad-slug would do",
        ),
        ("new", "new is the name of a page of the site: choose another slug"),
        ("demo-project", "a project with the slug demo-project exists: choose another slug"),
        ("", "type a slug: letters, digits and hyphens"),  # the name has no letters to use
    ],
)
def test_a_bad_or_taken_slug_is_refused_with_its_reason_and_nothing_is_created(
    admin_client, project, slug, problem
):
    # when
    answer = admin_client.post(URL, {"name": "¿¿¿" if not slug else "Another", "slug": slug})
    # then: the form again, with the reason beside the slug
    assert answer.status_code == 200
    html = answer.content.decode()
    assert problem in html.replace("&#x27;", "'")
    assert list(Project.objects.values_list("slug", flat=True)) == ["demo-project"]


def test_a_name_like_another_projects_is_refused(admin_client, project):
    answer = admin_client.post(URL, {"name": "demo  PROJECT", "slug": "other"})
    assert answer.status_code == 200
    assert Project.objects.count() == 1
    assert "Demo project" in answer.content.decode()  # the name it looks like


def test_people_who_are_not_site_admins_can_neither_open_nor_post_the_page(
    client, researcher_client, annotator_client, outsider_client
):
    for who in (researcher_client, annotator_client, outsider_client):
        assert who.get(URL).status_code == 403
        assert who.post(URL, {"name": "Mine", "slug": "mine"}).status_code == 403
    assert client.get(URL).status_code == 302  # to the login page
    assert not Project.objects.filter(slug="mine").exists()


def test_a_project_admin_is_not_a_site_admin_here(django_user_model, project, client):
    from annotation.services.projects import membership_set

    boss = django_user_model.objects.create_user(username="boss", password="pw-boss")
    membership_set(project=project, user=boss, role="admin")
    client.force_login(boss)
    assert client.get(URL).status_code == 403


def test_the_page_refuses_other_methods(admin_client):
    assert admin_client.put(URL).status_code == 405
    assert admin_client.delete(URL).status_code == 405


def test_the_full_page_and_the_htmx_slug_hint(admin_client, project):
    # the page
    full = admin_client.get(URL).content.decode()
    assert "<html" in full and 'id="project-form"' in full and 'id="slug-hint"' in full
    # the hint alone, as the form asks for it while the name is typed
    hint = admin_client.get(URL, {"name": "My Study", "slug": ""}, headers={"HX-Request": "true"})
    body = hint.content.decode()
    assert "<html" not in body and "<form" not in body
    assert 'id="slug-hint"' in body and "/projects/my-study/" in body and "from the name" in body
    # a taken slug is said before the form is sent
    taken = admin_client.get(URL, {"name": "x", "slug": project.slug}, HTTP_HX_REQUEST="true")
    assert "a project with the slug demo-project exists" in taken.content.decode()


def test_an_htmx_post_is_redirected_by_the_client(admin_client):
    answer = admin_client.post(URL, {"name": "Via htmx"}, headers={"HX-Request": "true"})
    assert answer.status_code == 200
    assert answer["HX-Redirect"] == "/projects/via-htmx/"


def test_the_api_refuses_the_reserved_slug_too(admin_client):
    answer = admin_client.post(
        "/api/v1/annotation/projects/", {"slug": "new"}, content_type="application/json"
    )
    assert answer.status_code == 400
    assert "name of a page of the site" in answer.content.decode()
    assert not Project.objects.exists()
