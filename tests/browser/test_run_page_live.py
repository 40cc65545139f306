"""A researcher watches a running judge run's page in Chromium: while it runs the page says
what its calls are doing, and when it is done the page follows without a reload (htmx's
last poll, answered 286, brings the status, the buttons and the probe form, which lives
outside the polled panel; it used to say "A run can be probed once it is done" until a
reload)."""

from __future__ import annotations

import pytest

from devtools.openai_server import FakeOpenAIServer
from judging.models import RunStatus
from judging.services import judge_batch, judge_run_create
from tests.annotation.test_assignments import make_dataset
from tests.browser.conftest import login
from tests.judging.test_runs import llm_judge, response_ids, running

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_run_page_follows_the_run_to_done_without_a_reload(
    page, live_server, project, researcher, tmp_path
):
    dataset = make_dataset(project, tmp_path, items=2, models=("m1", "m2"))
    with FakeOpenAIServer(style="python_dict") as server:
        run = running(judge_run_create(judge=llm_judge(project, server), dataset=dataset))
        errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        login(page, live_server, "rita", "pw-rita")
        page.goto(f"{live_server.url}/judge-runs/{run.pk}/")
        # given the page of a running run: live figures, Pause, and no probe form yet
        assert page.locator("#run-live").is_visible()
        assert "ETA" in page.locator("#live-eta").inner_text()
        assert page.locator("#run-actions button", has_text="Pause").count() == 1
        assert "once it is done" in page.locator("#run-probes").inner_text()
        # when its judgments are made (as its workers would make them) and it is done
        judge_batch(run_id=run.pk, response_ids=response_ids(run))
        run.refresh_from_db()
        assert run.status == RunStatus.DONE
        # then the page follows within a poll: the probe form, the status, no Pause, and
        # no more polling or live figures
        page.wait_for_selector("#probe-form")
    assert page.locator("#run-progress [data-status]").get_attribute("data-status") == "done"
    assert page.locator("#run-actions button", has_text="Pause").count() == 0
    assert page.locator("#run-live").count() == 0
    assert page.locator("#run-progress[hx-get]").count() == 0
    assert "once it is done" not in page.locator("#run-probes").inner_text()
    assert errors == []
