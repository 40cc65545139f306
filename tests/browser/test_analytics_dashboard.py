"""A researcher opens the analytics dashboard in a real Chromium: the report arrives by
htmx, Chart.js draws every chart, nothing logs an error, and names that carry markup stay
text."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.analytics.test_dashboard import XSS, import_scores, score_lines
from tests.browser.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.slow]

JUDGE = "</script><script>alert(2)</script>"
CHARTS_DRAWN = """() => {
  const canvases = [...document.querySelectorAll('canvas[data-chart]')];
  return window.Chart && canvases.length > 0 && canvases.every(c => Chart.getChart(c));
}"""


@pytest.fixture
def hostile_project(live_server, project, researcher):
    import_scores(
        project,
        score_lines(
            systems=("sys-a", XSS),
            skills=("Factuality", "Readability", XSS),
            judges=("judge-x", JUDGE),
        ),
    )
    return project


def watch(page) -> list[str]:
    """Console errors and uncaught exceptions of the page, as they happen."""
    problems: list[str] = []
    # the site has no favicon; the browser's request for one is not the page's error
    page.route("**/favicon.ico", lambda route: route.fulfill(status=204, body=""))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    return problems


def open_dashboard(page, live_server, project, query: str = "") -> None:
    login(page, live_server, "rita", "pw-rita")
    path = reverse("analytics:dashboard", args=[project.slug])
    page.goto(f"{live_server.url}{path}{query}")


def test_the_dashboard_draws_its_charts_and_names_stay_text(page, live_server, hostile_project):
    # given
    problems = watch(page)

    # when
    open_dashboard(page, live_server, hostile_project)
    page.wait_for_selector("#report-body #agreement-table")
    page.wait_for_function(CHARTS_DRAWN)

    # then: radar per system (2), bars per skill by domain (3) and difficulty (3), and the
    # Pearson and Spearman correlation bars (2)
    charts = page.evaluate(
        """() => [...document.querySelectorAll('canvas[data-chart]')].map(c => {
          const chart = Chart.getChart(c);
          return {kind: c.dataset.chart, type: chart.config.type, width: c.clientWidth,
                  height: c.clientHeight, datasets: chart.data.datasets.length,
                  labels: chart.data.labels};
        })"""
    )
    kinds = [c["kind"] for c in charts]
    assert kinds.count("radar") == 2 and kinds.count("domain") == 3
    assert kinds.count("difficulty") == 3 and kinds.count("correlation") == 2
    assert all(c["width"] > 0 and c["height"] > 0 for c in charts)
    radar = [c for c in charts if c["kind"] == "radar"]
    assert {c["type"] for c in radar} == {"radar"} and radar[0]["datasets"] == 3
    assert XSS in radar[0]["labels"]  # drawn as text on the canvas
    correlation = [c for c in charts if c["kind"] == "correlation"]
    assert correlation[0]["datasets"] == 3  # two judges and the human ceiling
    # the payloads are text everywhere: no alert, no injected element
    assert page.dialogs == []
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.locator("#agreement-table th", has_text=XSS).count() == 1
    assert page.locator("#heatmap-1 caption").inner_text().startswith(JUDGE)
    assert problems == []


def test_a_filter_reloads_the_report_for_one_skill(page, live_server, hostile_project):
    problems = watch(page)
    open_dashboard(page, live_server, hostile_project)
    page.wait_for_function(CHARTS_DRAWN)

    # when
    page.select_option("select[name=skill]", "Readability")
    page.click("form.analytics-filters button[type=submit]")
    page.wait_for_url("**skill=Readability**")
    page.wait_for_function(CHARTS_DRAWN)

    # then: the report and the charts are of that skill only
    skills = page.eval_on_selector_all(
        "#agreement-table tbody th", "ths => ths.map(t => t.textContent)"
    )
    assert skills == ["Readability"]
    radar_types = page.evaluate(
        "[...document.querySelectorAll('canvas[data-chart=radar]')]"
        ".map(c => Chart.getChart(c).config.type)"
    )
    assert radar_types == ["bar", "bar"]  # one skill: bars, not a radar
    assert page.dialogs == [] and problems == []


def test_an_empty_project_shows_its_empty_state(page, live_server, project, researcher):
    problems = watch(page)
    open_dashboard(page, live_server, project)
    page.wait_for_selector("text=No scores yet")
    assert page.locator("canvas").count() == 0
    assert problems == []
