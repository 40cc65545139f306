"""A researcher opens a judge's trust page from the dashboard in a real Chromium: the
calibration table, the Bland-Altman charts, the confusion matrices, the strata, N/A and
stochasticity sections render from the stored snapshot, the judge chooser swaps the page
body by htmx, names that carry markup stay text, nothing logs an error, and the page does
not scroll sideways at 1440 px."""

from __future__ import annotations

import pytest

from tests.browser.layout import LAPTOP, overflow
from tests.browser.test_analytics_dashboard import (  # noqa: F401 (fixtures)
    JUDGE,
    hostile_project,
    no_worker,
    open_dashboard,
    shots,
    watch,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_trust_page_renders_its_figures_and_fits_a_laptop(
    page,
    live_server,
    hostile_project,  # noqa: F811
    tmp_path,
):
    page.set_viewport_size(LAPTOP)
    problems = watch(page)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    open_dashboard(page, live_server, hostile_project)
    links = page.locator("a[data-trust-link]")
    assert links.count() == 2
    page.click("a[data-trust-link]:text-is('judge-x')")
    page.wait_for_selector("#trust-calibration-table")
    assert page.locator("h1 .name").inner_text() == "judge-x"
    rows = page.locator("#trust-calibration-table tbody tr")
    assert rows.count() == 3  # one per skill
    assert page.locator("svg.bland-altman").count() == 3
    assert page.locator("svg.bland-altman circle.point").count() > 0
    assert page.locator("svg.bland-altman line.bias").count() == 3
    assert page.locator("table.confusion").count() == 3
    # the skills' cards sit side by side at 1440 px: charts no wider than a column
    boxes = [page.locator("svg.bland-altman").nth(i).bounding_box() for i in range(3)]
    assert all(box and box["width"] <= 440 for box in boxes), boxes
    first, second = boxes[0], boxes[1]
    assert second["x"] > first["x"] + first["width"], boxes  # in the next column
    assert abs(second["y"] - first["y"]) < first["height"] / 2, boxes  # on the same row
    assert (
        page.locator("table.confusion").first.locator("thead th").count() == 7
    )  # corner + 1-5 + N/A
    assert page.locator("table.strata").count() == 3
    assert page.locator("#trust-na-table tbody tr").count() == 3
    assert page.locator("#trust-probes-empty").is_visible()
    assert page.locator("#stochasticity").is_visible()
    found = overflow(page)
    assert found["scrollWidth"] <= found["innerWidth"], found["offenders"]
    page.screenshot(path=str(shots(tmp_path) / "trust.png"), full_page=True)

    # the chooser: the other judge's figures, swapped in by htmx, its markup shown as text
    page.select_option("select[name=trust_judge]", JUDGE)
    page.click("form.trust-judge button[type=submit]")
    page.wait_for_function(
        "name => document.querySelector('select[name=trust_judge]').value === name"
        " && document.querySelector('#trust-calibration-table')",
        arg=JUDGE,
    )
    page.wait_for_url("**trust_judge=*")
    assert page.locator("#trust-calibration-table tbody tr").count() == 3
    found = overflow(page)
    assert found["scrollWidth"] <= found["innerWidth"], found["offenders"]
    assert not dialogs, dialogs
    assert not problems, problems
