"""An admin imports a dataset from the browser and watches the progress bar finish; the
hostile response of the imported data renders inert."""

from __future__ import annotations

import pytest

from annotation.models import DatasetUpload, UploadStatus
from tests.browser.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HOSTILE = (
    "Here you go <script>alert('xss-script')</script> "
    "<img src=x onerror=\\\"alert('xss-img')\\\"> [click](javascript:alert('xss-link'))"
)


def _file(tmp_path, n=300):
    lines = [
        '{"id": "h1", "instruction": "Write a greeting", "skills": ["Readability", '
        '"Harmlessness", "Conciseness"], "domains": ["Language"], "difficulty": 1, '
        f'"responses": [{{"model": "evil-bot", "text": "{HOSTILE}"}}]}}'
    ]
    for i in range(n):
        lines.append(
            f'{{"id": "b{i}", "instruction": "Item {i}", "skills": ["Factuality", '
            f'"Comprehension", "Readability"], "domains": ["Math"], "difficulty": 2, '
            f'"responses": [{{"model": "m1", "text": "answer {i}"}}]}}'
        )
    path = tmp_path / "browser.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_an_admin_uploads_a_file_and_sees_the_import_finish(
    page, live_server, celery_worker_process, admin_user, project, tmp_path
):
    # given
    login(page, live_server, "admin", "pw-admin")
    page.goto(f"{live_server.url}/projects/{project.slug}/uploads/new/")
    # when
    page.fill("input[name=dataset]", "Browser set")
    page.set_input_files("input[name=files]", str(_file(tmp_path)))
    page.click("#upload-form button[type=submit]")
    # then: the status panel polls itself to the end without a page reload
    page.wait_for_selector("[data-status=succeeded]", timeout=30_000)
    assert "301" in page.inner_text("#upload-status")  # 301 new items
    assert DatasetUpload.objects.get().status == UploadStatus.SUCCEEDED
    # and the hostile response renders inert on the item page
    page.click("text=Open the dataset")
    page.click("text=h1")
    page.wait_for_selector("text=evil-bot")
    body = page.inner_text("section.response")
    assert "<script>alert('xss-script')</script>" in body  # shown as text
    assert page.eval_on_selector_all("section.response script", "els => els.length") == 0
    assert page.eval_on_selector_all("section.response img", "els => els.length") == 0
    assert page.eval_on_selector_all("a[href^=javascript]", "els => els.length") == 0
    assert page.dialogs == []


def test_a_rejected_upload_shows_its_problems_in_the_browser(
    page, live_server, celery_worker_process, admin_user, project, tmp_path
):
    login(page, live_server, "admin", "pw-admin")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"id": "x1", "instruction": "ok", "skills": ["Factuality", "Readability", '
        '"Conciseness"], "difficulty": -1}\nnot json\n'
    )
    page.goto(f"{live_server.url}/projects/{project.slug}/uploads/new/")
    page.fill("input[name=dataset]", "Bad set")
    page.set_input_files("input[name=files]", str(bad))
    page.click("#upload-form button[type=submit]")
    page.wait_for_selector("[data-status=rejected]", timeout=30_000)
    text = page.inner_text("#upload-status")
    assert "nothing was written" in text
    assert "difficulty -1 is not a level 1-5" in text and "invalid_json" in text
