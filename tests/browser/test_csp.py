"""The Content-Security-Policy (flaskweb.security) allows no inline script: the pages that
depend on script — Django's admin, the project's htmx pages, the browsable API — must not
need one. Chromium reports every refused script or style on the console."""

from __future__ import annotations

import pytest

from analytics import tasks
from analytics.report import snapshots
from tests.analytics.snapshot_worker import compute_pending
from tests.analytics.test_dashboard import import_scores, score_lines
from tests.browser.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_admin_and_the_app_run_under_the_policy(
    page, live_server, admin_user, project, monkeypatch
):
    # the dashboard with its report computed, so that its charts' script runs too (5 items:
    # enough responses for the charts to draw, docs/SMALL_SAMPLES.md)
    monkeypatch.setattr(tasks.report_snapshot_compute_task, "delay", lambda *args, **kw: None)
    import_scores(project, score_lines(items=5))
    snapshots.snapshot_request(project=project, params=snapshots.snapshot_params())
    compute_pending()
    refused: list[str] = []
    page.route("**/favicon.ico", lambda route: route.fulfill(status=204, body=""))
    page.on(
        "console",
        lambda m: (
            refused.append(f"{page.url}: {m.text}") if "Content Security Policy" in m.text else None
        ),
    )
    page.on("pageerror", lambda e: refused.append(f"{page.url}: {e}"))
    login(page, live_server, "admin", "pw-admin")
    for path in (
        "/",
        f"/projects/{project.slug}/",
        f"/projects/{project.slug}/analytics/",
        "/catalogue/",
        "/admin/",
        "/admin/annotation/skill/",
        "/admin/annotation/skill/add/",
        "/admin/annotation/project/",
        "/api/v1/annotation/projects/",
    ):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        if path.endswith("/analytics/"):  # the headline is drawn; a section loads when opened
            page.wait_for_function(
                "() => window.Chart && Chart.getChart("
                "document.querySelector('canvas[data-chart=headline]'))"
            )
            page.click("details[data-section=leaderboards] > summary")
            page.wait_for_selector("[data-section-body=leaderboards] canvas")
    # the admin's own script runs: its "select all" box ticks the rows
    page.goto(f"{live_server.url}/admin/annotation/skill/")
    page.check("#action-toggle")
    assert page.locator("input.action-select:checked").count() > 0
    assert refused == []
