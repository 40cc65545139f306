"""A project admin manages members in Chromium with the keyboard alone: adds a user, changes
a role, and removes a member behind htmx's confirm dialog (dismissed first: nothing
happens), all under the site's Content-Security-Policy."""

from __future__ import annotations

import pytest

from annotation.models import ProjectMembership, ProjectRole
from annotation.services.projects import membership_set
from tests.browser.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _roles(project) -> dict[str, str]:
    return dict(
        ProjectMembership.objects.filter(project=project).values_list("user__username", "role")
    )


def test_a_project_admin_manages_members_by_keyboard(
    chromium, live_server, django_user_model, project, outsider
):
    # given a project admin, and charlie (outsider) who is not a member yet
    paula = django_user_model.objects.create_user("paula", password="pw-paula")
    membership_set(project=project, user=paula, role=ProjectRole.ADMIN)
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    answers = ["dismiss", "accept"]
    asked: list[str] = []

    def on_dialog(dialog):
        asked.append(dialog.message)
        dialog.accept() if answers.pop(0) == "accept" else dialog.dismiss()

    page.on("dialog", on_dialog)
    errors: list[str] = []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    try:
        login(page, live_server, "paula", "pw-paula")
        page.goto(f"{live_server.url}/projects/{project.slug}/members/")
        # when: add charlie as annotator (type, Enter)
        page.focus("#member-add input[name=username]")
        page.keyboard.type("charlie")
        page.keyboard.press("Enter")
        page.wait_for_selector("tr[data-member=charlie]")
        _settled(page)
        assert "charlie added as annotator." in page.inner_text("#members")
        assert _roles(project)["charlie"] == "annotator"
        # change charlie's role: focus the select, pick with the keyboard, Tab to Save, Enter
        page.focus("tr[data-member=charlie] select[name=role]")
        page.select_option("tr[data-member=charlie] select[name=role]", "researcher")
        page.keyboard.press("Tab")
        page.keyboard.press("Enter")
        page.wait_for_selector("tr[data-member=charlie] td[data-role=researcher]")
        _settled(page)
        assert _roles(project)["charlie"] == "researcher"
        # remove: the first confirm is dismissed (nothing changes), the second accepted
        page.focus("tr[data-member=charlie] button.danger")
        page.keyboard.press("Enter")
        page.wait_for_timeout(300)
        _settled(page)
        assert "charlie" in _roles(project)
        page.focus("tr[data-member=charlie] button.danger")
        page.keyboard.press("Enter")
        page.wait_for_selector("tr[data-member=charlie]", state="detached")
        # then
        assert "charlie removed from the project." in page.inner_text("#members")
        assert _roles(project) == {"paula": "admin"}
        assert len(asked) == 2 and all("Remove charlie" in a for a in asked)
        # paula's own row offers nothing to change
        assert page.locator("tr[data-member=paula] select").count() == 0
        assert errors == []
    finally:
        context.close()


def _settled(page) -> None:
    """htmx has finished: no request in flight and the last swap settled, so the next
    keystroke lands on the new rows (a key pressed mid-swap can reach a replaced element)."""
    page.wait_for_function(
        "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')"
    )
