"""A researcher opens the preference page of a pairwise campaign with eight labels (one system
won every comparison: its unpenalised fit ran off to nu = 38,140) in a real Chromium: every
figure below its minimum says "too few" with its n instead of a number with an interval, the
separation is said with who never lost, no interval is drawn, nothing logs an error, and the
page fits a laptop and a phone. Screenshots go to FLASKWEB_TEST_SHOTS (else a temp dir) to be
looked at."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from analytics.report import snapshots
from annotation.models import Response
from judging.models import JudgeConfig, JudgeKind, JudgeRun, JudgmentStatus, PairJudgment, RunStatus
from tests.analytics.snapshot_worker import compute_pending
from tests.analytics.test_preference_page_small_n import SYSTEMS, make_labels
from tests.analytics.test_preference_small_n import EIGHT
from tests.annotation.test_assignments import make_dataset
from tests.browser.layout import LAPTOP, PHONE, overflow
from tests.browser.test_analytics_dashboard import (  # noqa: F401 (fixtures)
    no_worker,
    open_dashboard,
    watch,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TOO_FEW_LABELS = "too few: n = 8 (at least 20 labels)"


@pytest.fixture
def eight(live_server, project, researcher, tmp_path, django_user_model, no_worker):  # noqa: F811
    users = {
        name: django_user_model.objects.create_user(name, password="x")
        for name in sorted({label.rater for label in EIGHT})
    }
    dataset = make_dataset(project, tmp_path, items=2, models=SYSTEMS)
    make_labels(project, dataset, users, EIGHT)
    # a pairwise judge that prefers m0 in both orders: two decided pairs to compare
    judge = JudgeConfig.objects.create(project=project, name="pj", kind=JudgeKind.BASELINE)
    run = JudgeRun.objects.create(
        judge=judge, dataset=dataset, status=RunStatus.DONE, pairwise_against="m0"
    )
    for item in dataset.items.order_by("pk"):
        responses = {r.model_name: r for r in Response.objects.filter(item=item)}
        for model in SYSTEMS[1:]:
            for order in (0, 1):
                PairJudgment.objects.create(
                    run=run,
                    response=responses[model],
                    anchor=responses["m0"],
                    order=order,
                    status=JudgmentStatus.OK,
                    verdicts={"Overall": "anchor"},
                )
    snapshots.snapshot_request(project=project, params=snapshots.snapshot_params())
    (done,) = compute_pending()
    assert done.status == "done", done.error
    return project


def _shots(tmp_path) -> Path:
    where = Path(os.environ.get("FLASKWEB_TEST_SHOTS") or tmp_path / "shots")
    where.mkdir(parents=True, exist_ok=True)
    return where


def test_eight_labels_show_too_few_and_the_separation_not_runaway_numbers(
    page, live_server, eight, tmp_path
):
    shots = _shots(tmp_path)
    page.set_viewport_size(LAPTOP)
    problems = watch(page)
    open_dashboard(page, live_server, eight)
    page.click("a[data-preferences-link]")
    page.wait_for_selector("#preference-matrix")
    assert page.locator("#pref-counts").inner_text().startswith("8 labels by 3 raters")
    # the strengths: no chart, no whisker, no number: the reason with n on every row
    assert page.locator(".strengths-chart").count() == 0
    assert page.locator("line.whisker").count() == 0
    rows = page.locator("#preference-strengths-table tbody td")
    assert rows.count() == 4
    for i in range(4):
        assert rows.nth(i).inner_text().strip().startswith(TOO_FEW_LABELS)
    assert TOO_FEW_LABELS in page.locator("#pref-bt-too-few").inner_text()
    # nu: the reason too, never a five-digit number with an interval
    nu = page.locator("#pref-nu").inner_text()
    assert TOO_FEW_LABELS in nu and "17" not in nu and "38" not in nu
    # the separation, with who never lost
    separation = page.locator("#pref-separation").inner_text()
    assert "never lost: m0" in separation and "prior-regularised" in separation
    # agreement and the judge: too few units and decisions, with their n
    for cell in page.locator("#preference-agreement td").all_inner_texts():
        assert cell.strip().startswith("too few: n = 2 (at least 10 units)")
    judge = page.locator("#preference-judges tbody td").all_inner_texts()
    assert judge[0].strip() == "2"  # the pairs compared
    for cell in judge[1:]:
        assert cell.strip().startswith("too few: n = "), judge
        assert "(at least 10 decisions)" in cell
    assert page.locator(".ci").count() == 0  # no interval anywhere
    found = overflow(page)
    assert found["scrollWidth"] <= found["innerWidth"], found["offenders"]
    page.screenshot(path=str(shots / "preferences-8-labels-laptop.png"), full_page=True)
    page.set_viewport_size(PHONE)
    found = overflow(page)
    assert found["scrollWidth"] <= found["innerWidth"], found["offenders"]
    page.screenshot(path=str(shots / "preferences-8-labels-phone.png"), full_page=True)
    assert not page.dialogs and not problems, (page.dialogs, problems)
