"""A site admin's first steps on a fresh server, in the browser: sign in, create the first
project, import its first dataset from the project's first steps, and open it."""

from __future__ import annotations

import pytest

from annotation.models import Project
from tests.browser.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DATASET = (
    '{"id": "q1", "instruction": "Say hello politely", "skills": ["Readability", '
    '"Harmlessness", "Conciseness"], "domains": ["Language"], "difficulty": 1, '
    '"responses": [{"model": "m1", "text": "Hello there."}]}\n'
)


def test_a_site_admin_creates_the_first_project_and_imports_its_first_dataset(
    page, live_server, celery_worker_process, admin_user, tmp_path
):
    # given a fresh server: a site admin and no project
    assert not Project.objects.exists()
    login(page, live_server, "admin", "pw-admin")
    assert "There is no project on this server yet" in page.inner_text("main")

    # when they create a project, the slug made from the name as they type
    page.click("#first-steps >> text=New project")
    page.fill("#id_name", "First Study")
    page.wait_for_selector("#slug-hint >> text=/projects/first-study/")
    page.fill("#id_description", "Our pilot")
    page.click("#project-form button[type=submit]")

    # then its page shows the first steps, and the first one imports a dataset
    page.wait_for_url(f"{live_server.url}/projects/first-study/")
    assert "Project First Study created." in page.inner_text("main")
    page.click("#first-steps >> text=Import the first dataset")
    data = tmp_path / "first.jsonl"
    data.write_text(DATASET)
    page.fill("input[name=dataset]", "Pilot set")
    page.set_input_files("input[name=files]", str(data))
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector("[data-status=succeeded]", timeout=30_000)

    # and the dataset is there, with its item
    page.click("text=Open the dataset")
    page.wait_for_selector("text=q1")
    page.goto(f"{live_server.url}/projects/first-study/")
    assert "Pilot set" in page.inner_text("main")
    assert page.query_selector("#first-steps") is None  # done with the first steps
