"""A researcher opens the analytics dashboard in a real Chromium: it opens with the headline
chart (a dataset per judge and the human ceiling, with intervals), each section loads by htmx
when it is opened and Chart.js draws its charts, a refresh shows its progress while a real
worker computes the report and then the page shows the new one; nothing logs an error, and
names that carry markup stay text."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.urls import reverse

from analytics import tasks
from analytics.report import snapshots
from tests.analytics.snapshot_worker import compute_pending
from tests.analytics.test_dashboard import XSS, import_scores, score_lines
from tests.browser.conftest import login
from tests.browser.layout import LAPTOP, overflow

pytestmark = [pytest.mark.browser, pytest.mark.slow]

JUDGE = "</script><script>alert(2)</script>"
CHARTS_DRAWN = """() => {
  const canvases = [...document.querySelectorAll('canvas[data-chart]')];
  return window.Chart && canvases.length > 0 && canvases.every(c => Chart.getChart(c));
}"""
HEADLINE = """() => {
  const canvas = document.querySelector('canvas[data-chart=headline]');
  const chart = canvas && window.Chart && Chart.getChart(canvas);
  if (!chart) return null;
  return {
    type: chart.config.type, width: canvas.clientWidth, height: canvas.clientHeight,
    labels: chart.data.labels,
    datasets: chart.data.datasets.map(d => ({
      label: d.label, type: d.type || chart.config.type, data: d.data,
      intervals: (d.errors || []).filter(e => e).length,
    })),
    errorBars: chart.config.plugins.some(p => p.id === 'flaskwebErrorBars'),
  };
}"""


@pytest.fixture
def no_worker(monkeypatch):
    """The pages ask for snapshots; these tests compute them in-process (compute_pending)
    instead of sending them to a worker that is not there."""
    monkeypatch.setattr(tasks.report_snapshot_compute_task, "delay", lambda *args, **kw: None)


@pytest.fixture
def hostile_project(live_server, project, researcher, no_worker):
    # 15 items: enough for the intervals and the breakdowns to be drawn (docs/SMALL_SAMPLES.md)
    import_scores(
        project,
        score_lines(
            systems=("sys-a", XSS),
            skills=("Factuality", "Readability", XSS),
            judges=("judge-x", JUDGE),
            items=15,
        ),
    )
    snapshot, _ = snapshots.snapshot_request(project=project, params=snapshots.snapshot_params())
    compute_pending()
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


def open_section(page, name: str) -> None:
    page.click(f"details[data-section={name}] > summary")
    page.wait_for_selector(f"[data-section-body={name}]")


def test_the_headline_chart_is_drawn_with_intervals_and_names_stay_text(
    page, live_server, hostile_project
):
    # given
    problems = watch(page)

    # when
    open_dashboard(page, live_server, hostile_project)
    headline = page.wait_for_function(HEADLINE).json_value()

    # then: one bar dataset per judge, best ranked first, and the human ceiling, with intervals
    table = page.eval_on_selector_all(
        "#headline-table tbody th", "ths => ths.map(t => t.textContent)"
    )
    assert table[0] == "Human ceiling" and sorted(table[1:]) == sorted(["judge-x", JUDGE])
    assert headline["type"] == "bar" and headline["width"] > 0 and headline["height"] > 0
    assert sorted(headline["labels"]) == sorted(["Factuality", "Readability", XSS])  # as text
    judges, ceiling = headline["datasets"][:-1], headline["datasets"][-1]
    assert [d["label"] for d in judges] == table[1:]
    assert all(d["type"] == "bar" and d["intervals"] > 0 for d in judges)
    assert ceiling["label"].startswith("Human ceiling") and ceiling["type"] == "line"
    assert ceiling["intervals"] > 0 and headline["errorBars"]
    # another coefficient: the chart and the table swap in without a page load
    page.click("nav[aria-label='Correlation coefficient'] >> text=Kendall τ-b")
    page.wait_for_url("**measure=kendall**")
    kendall = page.wait_for_function(
        HEADLINE.replace(
            "if (!chart) return null;",
            "if (!chart || chart.data.datasets.length !== 2) return null;",
        )
    ).json_value()
    assert [d["label"] for d in kendall["datasets"]] == table[1:]  # no ceiling for Kendall
    assert page.dialogs == [] and problems == []


def test_the_sections_load_when_opened_and_draw_their_charts(page, live_server, hostile_project):
    problems = watch(page)
    open_dashboard(page, live_server, hostile_project)
    page.wait_for_function(CHARTS_DRAWN)
    assert page.locator("#agreement-table").count() == 0  # not loaded until opened

    # when
    for name in (
        "agreement",
        "correlation",
        "comparison",
        "leaderboards",
        "breakdowns",
        "heatmaps",
    ):
        open_section(page, name)
    page.wait_for_function(CHARTS_DRAWN)

    # then: radar per system (2), bars per skill by domain (3) and difficulty (3), the headline
    charts = page.evaluate(
        """() => [...document.querySelectorAll('canvas[data-chart]')].map(c => {
          const chart = Chart.getChart(c);
          const r = chart.options.scales.r;
          return {kind: c.dataset.chart, type: chart.config.type, width: c.clientWidth,
                  datasets: chart.data.datasets.length, labels: chart.data.labels,
                  pointLabels: r ? chart.data.labels.map(l => r.pointLabels.callback(l)) : null};
        })"""
    )
    kinds = [c["kind"] for c in charts]
    assert kinds.count("radar") == 2 and kinds.count("domain") == 3
    assert kinds.count("difficulty") == 3 and kinds.count("headline") == 1
    assert all(c["width"] > 0 for c in charts)
    radar = [c for c in charts if c["kind"] == "radar"]
    assert {c["type"] for c in radar} == {"radar"} and radar[0]["datasets"] == 3
    assert XSS in radar[0]["labels"]  # drawn as text on the canvas, cut so labels do not meet
    shown = dict(zip(radar[0]["labels"], radar[0]["pointLabels"], strict=True))
    assert shown == {XSS: XSS[:17] + "…", "Factuality": "Factuality", "Readability": "Readability"}
    # the payloads are text everywhere: no alert, no injected element
    assert page.dialogs == []
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.locator("#agreement-table th", has_text=XSS).count() == 1
    assert page.locator("#heatmap-1 caption").inner_text().startswith(JUDGE)
    assert page.locator("#correlation-1").count() == 1
    assert problems == []


def test_wide_tables_scroll_in_their_box_with_the_first_column_in_view(
    page, live_server, project, researcher, no_worker
):
    # given twelve judges with long names
    judges = tuple(f"a-rather-long-automatic-metric-name-{n:02}" for n in range(12))
    import_scores(project, score_lines(judges=judges, items=5))
    snapshots.snapshot_request(project=project, params=snapshots.snapshot_params())
    compute_pending()
    problems = watch(page)

    # when
    open_dashboard(page, live_server, project)
    page.wait_for_function(CHARTS_DRAWN)
    open_section(page, "leaderboards")

    # then: the table scrolls inside its box, the page does not; names stay on one line
    found = page.evaluate(
        """() => {
          const table = document.querySelector('#leaderboard-1');
          const box = table.closest('.table-scroll');
          const first = table.querySelector('tbody th');
          const name = table.querySelector('thead th.name');
          box.scrollLeft = 400;
          return {scrolls: box.scrollWidth > box.clientWidth,
                  page: document.documentElement.scrollWidth <= window.innerWidth,
                  sticky: getComputedStyle(first).position,
                  firstLeft: first.getBoundingClientRect().left - box.getBoundingClientRect().left,
                  nameLines: (() => {
                    const range = document.createRange();
                    range.selectNodeContents(name);
                    return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
                  })()};
        }"""
    )
    assert found["scrolls"] and found["page"] and found["sticky"] == "sticky"
    assert abs(found["firstLeft"]) < 2 and found["nameLines"] == 1
    # the filters are chips; a long list of judges is folded
    assert page.locator("details.filter-long summary", has_text="Judge").count() == 1
    assert page.locator("select[multiple]").count() == 0
    assert problems == []


def test_a_chip_filters_the_report_which_is_asked_for_and_shown(page, live_server, hostile_project):
    problems = watch(page)
    open_dashboard(page, live_server, hostile_project)
    page.wait_for_function(HEADLINE)

    # when: a chip is clicked and the filters applied
    page.click("details.filters-panel > summary")
    page.click("fieldset.chips label:has(input[name=skill][value=Readability])")
    page.click("form.analytics-filters button[type=submit]")
    page.wait_for_url("**skill=Readability**")
    page.wait_for_selector("[data-snapshot-progress]")
    compute_pending()  # the worker's part: the page polls, then reloads itself

    # then
    page.wait_for_selector("#headline-table")
    headline = page.wait_for_function(HEADLINE).json_value()
    assert headline["labels"] == ["Readability"]
    assert page.is_checked("input[name=skill][value=Readability]")
    assert page.dialogs == [] and problems == []


def test_a_refresh_shows_its_progress_while_a_worker_computes_it(
    page, live_server, project, researcher, celery_worker_process
):
    # given a computed report, then a third judge's scores imported
    from tests.conftest import wait_for

    import_scores(project, score_lines(items=5))
    first, _ = snapshots.snapshot_request(project=project, params=snapshots.snapshot_params())
    wait_for(lambda: snapshots.snapshot_get(project=project, snapshot_id=first.pk).status == "done")
    problems = watch(page)
    open_dashboard(page, live_server, project)
    page.wait_for_function(HEADLINE)
    import_scores(project, score_lines(items=5, judges=("judge-z",)))
    page.reload()
    assert "imported score" in page.inner_text("[data-stale]")

    # when
    page.click("button[data-refresh]")

    # then: the progress, then the page with the new snapshot (the worker computed it)
    page.wait_for_selector("[data-snapshot-progress]", state="attached")
    page.wait_for_selector("text=Up to date.", timeout=60_000)
    headline = page.wait_for_function(HEADLINE).json_value()
    assert "judge-z" in [d["label"] for d in headline["datasets"]]
    assert page.locator("#headline-table th", has_text="judge-z").count() == 1
    assert page.locator("[data-stale]").count() == 0
    assert page.dialogs == [] and problems == []


def test_an_empty_project_shows_its_empty_state(page, live_server, project, researcher, no_worker):
    problems = watch(page)
    open_dashboard(page, live_server, project)
    page.wait_for_selector("[data-snapshot-progress]")
    compute_pending()
    page.wait_for_selector("text=No scores yet")
    assert page.locator("canvas").count() == 0
    assert problems == []


#: Where the screenshots of the small-sample pages go to be looked at (FLASKWEB_TEST_SHOTS).
def shots(tmp_path) -> Path:
    where = Path(os.environ.get("FLASKWEB_TEST_SHOTS") or tmp_path / "shots")
    where.mkdir(parents=True, exist_ok=True)
    return where


CUT_LABELS = """() => {
  const canvas = document.querySelector('canvas[data-chart=headline]');
  canvas.scrollIntoView({block: 'center'});
  const chart = Chart.getChart(canvas);
  const box = canvas.getBoundingClientRect();
  const x = chart.scales.x;
  const at = chart.data.labels.map((label, i) => ({
    label, x: box.left + x.getPixelForTick(i), y: box.top + (x.top + x.bottom) / 2,
  }));
  const legend = chart.legend.legendItems.map((item, k) => {
    const hit = chart.legend.legendHitBoxes[k];
    return {text: item.text, label: chart.data.datasets[item.datasetIndex].label,
            x: box.left + hit.left + hit.width / 2, y: box.top + hit.top + hit.height / 2};
  });
  return {ticks: at, legend, name: canvas.getAttribute('aria-label')};
}"""


def test_cut_chart_labels_keep_their_full_names(page, live_server, hostile_project, tmp_path):
    # given
    problems = watch(page)
    open_dashboard(page, live_server, hostile_project)
    page.wait_for_function(HEADLINE)
    page.locator("#headline").screenshot(path=str(shots(tmp_path) / "headline.png"))
    found = page.evaluate(CUT_LABELS)

    # then: a skill's name longer than the axis allows is cut on the canvas, and pointing at
    # it shows it whole; so does a judge's name cut in the legend
    tick = next(t for t in found["ticks"] if t["label"] == XSS)
    page.mouse.move(tick["x"], tick["y"])
    page.wait_for_function(
        "name => document.querySelector('canvas[data-chart=headline]').title === name", arg=XSS
    )
    entry = next(e for e in found["legend"] if e["label"] == JUDGE)
    assert entry["text"] != JUDGE and entry["text"].endswith("…")
    page.mouse.move(entry["x"], entry["y"])
    page.wait_for_function(
        "name => document.querySelector('canvas[data-chart=headline]').title === name", arg=JUDGE
    )
    # the human ceiling's entry is not cut any more
    ceiling = next(e for e in found["legend"] if e["label"].startswith("Human ceiling"))
    assert ceiling["text"] == "Human ceiling (leave-one-out)"
    page.locator("#headline").screenshot(path=str(shots(tmp_path) / "headline-legend-hover.png"))
    # away from the labels there is no title
    page.mouse.move(5, 5)
    page.wait_for_function("() => !document.querySelector('canvas[data-chart=headline]').title")
    # the accessible name lists every cut name in full
    assert f"Names cut on the chart, in full: {XSS}; {JUDGE}." in found["name"]
    assert page.dialogs == [] and problems == []


def test_figures_on_too_few_data_say_so_on_the_dashboard_and_the_trust_page(
    page, live_server, project, researcher, no_worker, tmp_path
):
    # given three items of two systems: too few responses for a correlation, too few items
    # for an interval, two systems for the system level
    import_scores(project, score_lines(items=3))
    snapshots.snapshot_request(project=project, params=snapshots.snapshot_params())
    compute_pending()
    page.set_viewport_size(LAPTOP)
    problems = watch(page)
    where = shots(tmp_path)

    # when
    open_dashboard(page, live_server, project)
    page.wait_for_selector("#headline-table")

    # then: the headline's cells say "too few" and why, and there is no chart to draw
    assert page.locator("canvas[data-chart=headline]").count() == 0
    assert "Nothing to draw" in page.inner_text("[data-chart-empty]")
    cells = page.locator("#headline-table td[data-too-few]")
    assert cells.count() == 2 * 3 + 3  # two judges and the ceiling, three skills
    assert cells.first.inner_text().split() == ["too", "few", "n", "=", "6", "(at", "least",
                                                "10", "responses)"]  # fmt: skip
    assert "[" not in page.inner_text("#headline-table")  # no interval at all
    page.screenshot(path=str(where / "dashboard-too-few.png"), full_page=True)
    for name in ("agreement", "correlation", "leaderboards", "breakdowns", "heatmaps"):
        open_section(page, name)
    assert page.locator("#correlation-1 td[data-too-few]").count() > 0
    assert page.locator("#agreement-table td[data-too-few]").count() > 0
    assert page.locator("[data-no-interval]").count() > 0  # ICC: 6 units, 3 items
    assert page.locator("[data-heat-legend]").is_visible()
    # the breakdowns' groups (3 to 6 responses) and the systems' means (3 responses): no chart
    assert page.locator("canvas[data-chart=domain], canvas[data-chart=radar]").count() == 0
    assert page.locator("#domain-1 td[data-too-few]").count() > 0
    found = overflow(page)
    assert found["scrollWidth"] <= found["innerWidth"], found["offenders"]
    page.screenshot(path=str(where / "dashboard-sections-too-few.png"), full_page=True)
    for name in ("agreement", "correlation", "leaderboards", "breakdowns", "heatmaps"):
        page.locator(f"details[data-section={name}]").screenshot(
            path=str(where / f"section-{name}-too-few.png")
        )

    # the trust page: every stratum and the calibration say too few
    page.click("a[data-trust-link]:text-is('judge-x')")
    page.wait_for_selector("#trust-calibration-table")
    assert page.locator("#trust-calibration-table td[data-too-few]").count() == 0  # 6 >= 5
    assert page.locator("table.strata td[data-too-few]").count() > 0
    found = overflow(page)
    assert found["scrollWidth"] <= found["innerWidth"], found["offenders"]
    page.screenshot(path=str(where / "trust-too-few.png"), full_page=True)
    assert page.dialogs == [] and problems == []
