"""A researcher starts a bias probe from a finished run's page in Chromium: a probe the
server refuses says why in the form (its 400 answer is swapped in by the project's htmx
response handling, base.html; htmx swaps no 4xx by default, and the page said nothing), and
a valid one goes to the new probe run's page, which names the probe and its base run."""

from __future__ import annotations

import pytest

from devtools.openai_server import FakeOpenAIServer
from judging.models import JudgeRun, RunStatus
from tests.browser.conftest import login
from tests.judging.test_probes import base_run, make_probe_dataset
from tests.judging.test_runs import llm_judge

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_probe_is_refused_with_its_reason_then_started(
    page, live_server, project, researcher, tmp_path
):
    dataset = make_probe_dataset(project, tmp_path, items=4)
    with FakeOpenAIServer(content_scores=True) as server:
        base = base_run(llm_judge(project, server), dataset)
        errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        login(page, live_server, "rita", "pw-rita")
        page.goto(f"{live_server.url}/judge-runs/{base.pk}/")
        form = page.locator("#probe-form")
        # when the judge's provider is withdrawn for approval before the probe is asked
        provider = base.judge.provider
        provider.approved = False
        provider.save()
        form.locator("select[name=probe]").select_option("truncate")
        form.locator("input[name=share]").fill("0.5")
        form.locator("button[type=submit]").click()
        # then the form comes back in place with the reason, and nothing was started
        page.wait_for_selector("#probe-form .error")
        assert "approval" in page.locator("#probe-form .error").first.inner_text()
        assert page.url.endswith(f"/judge-runs/{base.pk}/")
        assert not JudgeRun.objects.filter(base_run=base).exists()
        provider.approved = True
        provider.save()
        # when a valid probe is asked for a sample of 3 responses
        form.locator("input[name=share]").fill("0.5")
        form.locator("input[name=limit]").fill("3")
        form.locator("button[type=submit]").click()
        # then the new probe run's page opens
        page.wait_for_selector("#probe-of")
        probe = JudgeRun.objects.get(base_run=base)
        assert page.url.endswith(f"/judge-runs/{probe.pk}/")
        assert probe.probe == "truncate" and probe.total == 3
        assert probe.status in (RunStatus.RUNNING, RunStatus.DONE)
        assert f"#{base.pk}" in page.locator("#probe-of").inner_text()
        # the refusal's own 400 is logged by the browser as a failed resource, nothing else
        assert [e for e in errors if "status of 400" not in e] == []
