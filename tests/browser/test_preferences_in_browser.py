"""A researcher opens the preference page from the dashboard in a real Chromium: the win
matrix, the strengths chart (dot and whisker per system) and table, agreement and the judges
render from the stored snapshot, the skill chooser swaps the body by htmx, system names that
carry markup stay text, nothing logs an error, and the page does not scroll sideways at
1440 px even with a long system name."""

from __future__ import annotations

import pytest

from analytics.report import snapshots
from annotation.models import Response, Skill
from judging.models import JudgeConfig, JudgeKind, JudgeRun, JudgmentStatus, PairJudgment, RunStatus
from tests.analytics.snapshot_worker import compute_pending
from tests.analytics.test_preference_report import make_preferences
from tests.annotation.test_assignments import make_dataset
from tests.browser.layout import LAPTOP, overflow
from tests.browser.test_analytics_dashboard import (  # noqa: F401 (fixtures)
    JUDGE,
    no_worker,
    open_dashboard,
    watch,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HOSTILE = "<img src=x onerror=alert(1)>"
LONG = "a-system-with-a-very-long-name-that-goes-on-and-on-" + "x" * 60
SYSTEMS = ("sys-a", HOSTILE, LONG)


@pytest.fixture
def pref_project(live_server, project, researcher, tmp_path, django_user_model, no_worker):  # noqa: F811
    people = [django_user_model.objects.create_user(f"r{i}", password="x") for i in range(3)]
    # ten items: the fewest a bootstrap interval is drawn for (analytics.minimums "interval")
    dataset = make_dataset(project, tmp_path, items=10, models=SYSTEMS)
    skill = Skill.objects.get(name="Factuality", project__isnull=True)
    make_preferences(project, dataset, people, skill=skill, models=SYSTEMS)
    # a pairwise judge (its name is markup) that prefers sys-a in both orders
    judge = JudgeConfig.objects.create(project=project, name=JUDGE, kind=JudgeKind.BASELINE)
    run = JudgeRun.objects.create(
        judge=judge, dataset=dataset, status=RunStatus.DONE, pairwise_against="sys-a"
    )
    for item in dataset.items.order_by("pk"):
        responses = {r.model_name: r for r in Response.objects.filter(item=item)}
        for model in SYSTEMS[1:]:
            for order in (0, 1):
                PairJudgment.objects.create(
                    run=run,
                    response=responses[model],
                    anchor=responses["sys-a"],
                    order=order,
                    status=JudgmentStatus.OK,
                    verdicts={"Overall": "anchor"},
                )
    snapshots.snapshot_request(project=project, params=snapshots.snapshot_params())
    (done,) = compute_pending()
    assert done.status == "done", done.error
    return project


def test_the_preference_page_renders_its_figures_and_fits_a_laptop(page, live_server, pref_project):
    page.set_viewport_size(LAPTOP)
    problems = watch(page)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    open_dashboard(page, live_server, pref_project)
    page.click("a[data-preferences-link]")
    page.wait_for_selector("#preference-matrix")
    assert page.locator("#pref-skill-name").inner_text() == "Overall"
    # the matrix: one row per system, names as text
    headers = page.eval_on_selector_all(
        "#preference-matrix tbody th", "ths => ths.map(t => t.getAttribute('title'))"
    )
    assert sorted(headers) == sorted(SYSTEMS)
    assert page.locator("#preference-matrix img").count() == 0
    # the strengths chart: a dot and a whisker per system (1,000 resamples by default)
    chart = page.locator(".strengths-chart")
    assert chart.count() == 1
    assert chart.locator("svg circle.dot").count() == 3
    assert chart.locator("svg line.whisker").count() == 3
    names = chart.locator(".strength-row .name[title]").evaluate_all(
        "els => els.map(e => e.textContent)"
    )
    assert names[0] == "sys-a" and sorted(names) == sorted(SYSTEMS)  # strongest first
    # every row's bar has the same width (one x scale), and the dots are in order
    bars = [chart.locator("svg.strength-bar").nth(i).bounding_box() for i in range(4)]
    assert len({round(b["width"]) for b in bars}) == 1 and 300 < bars[0]["width"] <= 480, bars
    dots = [chart.locator("circle.dot").nth(i).bounding_box()["x"] for i in range(3)]
    assert dots == sorted(dots, reverse=True), dots
    assert page.locator("#preference-strengths-table tbody tr").count() == 3
    assert page.locator("#preference-agreement tbody td").count() == 2
    judges = page.locator("#preference-judges tbody th")
    assert judges.count() == 1 and judges.first.get_attribute("title") == f"{JUDGE} (pairwise)"
    found = overflow(page)
    assert found["scrollWidth"] <= found["innerWidth"], found["offenders"]

    # the chooser: another skill's figures, swapped in by htmx
    page.select_option("select[name=pref_skill]", "Factuality")
    page.click("form.preference-skill button[type=submit]")
    page.wait_for_function(
        "() => document.querySelector('#pref-skill-name')?.textContent === 'Factuality'"
    )
    page.wait_for_url("**pref_skill=Factuality*")
    assert page.locator(".strengths-chart circle.dot").count() == 3
    found = overflow(page)
    assert found["scrollWidth"] <= found["innerWidth"], found["offenders"]
    assert not dialogs, dialogs
    assert not problems, problems
