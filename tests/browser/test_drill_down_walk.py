"""A researcher follows a number of the dashboard to the responses behind it, in a real
Chromium (docs/ANALYTICS.md, "Every number links to its responses"): a bar of the headline
chart by mouse, a heat-map cell by mouse and, after "back to the figure", the same cell by
keyboard; each lands on the drill-down page with as many responses as the figure counts,
showing their instruction, response and scores, and the keys move between the entries."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from analytics import tasks
from analytics.report import snapshots
from tests.analytics.snapshot_worker import compute_pending
from tests.analytics.test_dashboard import import_scores
from tests.analytics.test_figure_links import whole_score_lines
from tests.browser.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# the point of the tallest bar that has a link, in the canvas's CSS pixels
TALLEST_BAR = """() => {
  const canvas = document.querySelector('canvas[data-chart=headline]');
  const chart = canvas && window.Chart && Chart.getChart(canvas);
  if (!chart) return null;
  let best = null;
  chart.data.datasets.forEach((d, i) => {
    if (d.type === 'line' || !d.links) return;
    chart.getDatasetMeta(i).data.forEach((bar, k) => {
      const height = Math.abs(bar.base - bar.y);
      if (d.links[k] && (!best || height > best.height)) {
        best = {x: bar.x, y: (bar.y + bar.base) / 2, height, judge: d.label,
                skill: chart.data.labels[k]};
      }
    });
  });
  return best;
}"""


@pytest.fixture
def built(live_server, project, researcher, monkeypatch):
    # the report is computed here (compute_pending), not by a worker
    monkeypatch.setattr(tasks.report_snapshot_compute_task, "delay", lambda *a, **kw: None)
    import_scores(project, whole_score_lines())
    snapshots.snapshot_request(project=project, params=snapshots.snapshot_params())
    compute_pending()
    return project


def watch(page) -> list[str]:
    problems: list[str] = []
    page.route("**/favicon.ico", lambda route: route.fulfill(status=204, body=""))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    return problems


def shown_count(page) -> int:
    return int(page.inner_text("#items-count strong").replace(",", ""))


def test_a_researcher_follows_figures_to_their_responses_and_back(page, live_server, built):
    problems = watch(page)
    dashboard = reverse("analytics:dashboard", args=[built.slug])
    items = reverse("analytics:items", args=[built.slug])
    login(page, live_server, "rita", "pw-rita")
    page.goto(f"{live_server.url}{dashboard}")

    # a bar of the headline chart, by mouse: the judge's responses of the skill
    bar = page.wait_for_function(TALLEST_BAR).json_value()
    canvas = page.locator("canvas[data-chart=headline]")
    canvas.scroll_into_view_if_needed()
    canvas.click(position={"x": bar["x"], "y": bar["y"]})
    page.wait_for_url(f"**{items}?**")
    query = parse_qs(urlsplit(page.url).query)
    assert query["judge"] == [bar["judge"]] and query["skill"] == [bar["skill"]]
    assert query["from"] == [f"{dashboard}#headline"]
    assert shown_count(page) == 24  # every response of the skill: 12 items x 2 systems

    # back to the figure, then the heat maps: a cell by mouse
    page.click("#items-back")
    page.wait_for_url(f"**{dashboard}#headline")
    page.click("details[data-section=heatmaps] > summary")
    page.wait_for_selector("[data-section-body=heatmaps]")
    cells = page.locator("#heatmap-1 a[data-heat-cell]")
    counts = [int(t) for t in cells.all_inner_texts()]
    pick = max(range(len(counts)), key=counts.__getitem__)  # two entries or more to move
    assert counts[pick] >= 2
    cell = cells.nth(pick)
    href = cell.get_attribute("href")
    cell.click()
    page.wait_for_url(f"**{items}?**")
    query = parse_qs(urlsplit(page.url).query)
    assert shown_count(page) == counts[pick]
    entries = page.locator("[data-entry]")
    assert entries.count() == counts[pick]

    # the keys move between the entries and open one: its instruction, response and scores
    page.keyboard.press("j")
    assert entries.nth(0).evaluate("e => e === document.activeElement")
    page.keyboard.press("Enter")
    first = entries.nth(0)
    assert first.locator("[data-entry-details]").evaluate("d => d.open")
    text = first.inner_text()
    for heading in ("Instruction", "Response", "People", "Judge"):
        assert heading in text
    # the people's consensus and the judge's score of the cell's skill (the scores were
    # imported: no annotation or judgment rows to list under them)
    assert re.search(rf"{query['skill'][0]}: people \d(\.\d+)?, {query['judge'][0]} \d", text)
    page.keyboard.press("j")
    assert entries.nth(1).evaluate("e => e === document.activeElement")
    page.keyboard.press("k")
    assert entries.nth(0).evaluate("e => e === document.activeElement")

    # back to the figure: the dashboard opens its heat maps again
    page.click("#items-back")
    page.wait_for_url(f"**{dashboard}#heatmaps")
    page.wait_for_selector("[data-section-body=heatmaps]")

    # the same cell by keyboard
    again = page.locator(f'#heatmap-1 a[href="{href}"]')
    again.focus()
    page.keyboard.press("Enter")
    page.wait_for_url(f"**{items}?**")
    assert shown_count(page) == counts[pick]
    assert page.dialogs == [] and problems == []
