"""A researcher reads the prediction-powered estimates in a real Chromium: the dashboard's
section loads by htmx when opened, draws each skill's table and interval plot (server-side
SVG), the judge chooser swaps the section, the trust page shows what people would say with
the judge; names that carry markup stay text, nothing logs an error (the content security
policy included), and neither page scrolls sideways at 1440 px."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.analytics.test_prediction_powered_pages import EVIL_JUDGE, XSS, hand_report, seed
from tests.browser.layout import LAPTOP, overflow
from tests.browser.test_analytics_dashboard import open_dashboard, open_section, shots, watch

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_estimates_render_on_the_dashboard_and_the_trust_page(
    page, live_server, project, researcher, tmp_path
):
    # given: a stored report with two judges' estimates (hostile names among them)
    seed(project, hand_report(judges=("J", EVIL_JUDGE)))
    page.set_viewport_size(LAPTOP)
    problems = watch(page)

    # when: the section is opened
    open_dashboard(page, live_server, project)
    open_section(page, "prediction_powered")

    # then: the first judge by name, its two skills, the plot drawn, names as text
    shown = page.locator("[data-ppi-judge-shown]")
    assert shown.inner_text() == EVIL_JUDGE
    assert page.locator("#ppi-1 tbody tr").count() == 4
    assert page.locator("#ppi-1 tbody th", has_text=XSS).count() == 1
    assert page.locator("#ppi-plot-1 svg.ppi-bars circle.dot").count() == 3 * 2  # + people
    box = page.locator("#ppi-plot-1 svg.ppi-bars").first.bounding_box()
    assert box and box["width"] > 100 and box["height"] > 0
    assert page.locator("#ppi-differences-1 tr.ppi-clear").count() == 1
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    found = overflow(page)
    assert found["scrollWidth"] <= found["innerWidth"], found["offenders"]
    page.screenshot(path=str(shots(tmp_path) / "prediction-powered.png"), full_page=True)

    # when: the other judge is chosen (htmx swaps the section)
    page.select_option("select[name=ppi_judge]", "J")
    page.click("form.ppi-judge button[type=submit]")
    page.wait_for_function(
        "() => document.querySelector('[data-ppi-judge-shown]').textContent === 'J'"
    )

    # then the trust page of that judge
    page.goto(f"{live_server.url}{reverse('analytics:trust', args=[project.slug])}?trust_judge=J")
    page.wait_for_selector("#trust-ppi-1")
    assert page.locator("#trust-ppi-1 tbody tr").count() == 4
    assert page.locator("#trust-ppi-1 td", has_text="outside the interval").count() == 2
    found = overflow(page)
    assert found["scrollWidth"] <= found["innerWidth"], found["offenders"]
    page.locator("#prediction-powered").screenshot(path=str(shots(tmp_path) / "trust-ppi.png"))
    assert page.dialogs == [] and problems == []
