"""A pairwise campaign with eight labels (tests/analytics/test_preference_small_n.py's EIGHT,
whose unpenalised fit ran off): the report JSON, the API and the preference page carry n,
"too few" and the flags, and the page shows no figure below its minimum as a number with an
interval."""

from __future__ import annotations

import json
import math
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from analytics.report.selectors import project_report
from analytics.report.snapshots import snapshot_params, snapshot_request
from annotation.campaigns.services import campaign_create
from annotation.models import (
    Assignment,
    AssignmentStatus,
    CampaignMode,
    HumanPreference,
    Response,
    Task,
)
from tests.analytics.snapshot_worker import compute_pending, report_via_api
from tests.analytics.test_preference_small_n import EIGHT
from tests.annotation.test_assignments import make_dataset
from tests.clients import token_client

SYSTEMS = ("m0", "m1", "m2", "m3")
FLIP = {"a": "b", "b": "a"}


def make_labels(project, dataset, users, labels):
    """A pairwise campaign of `dataset` holding exactly `labels` (preferences.Label, `item`
    the index of the dataset's item, `rater` a key of `users`), accepted: one task per item
    and pair (in the orientation of its first label; a label the other way round is stored
    with A and B swapped)."""
    campaign = campaign_create(project=project, dataset=dataset, name="Eight", overlap=3)
    campaign.mode = CampaignMode.PAIRWISE
    campaign.save(update_fields=["mode"])
    items = list(dataset.items.order_by("pk"))
    now = timezone.now()
    tasks: dict[tuple, Task] = {}
    for n, label in enumerate(labels):
        item = items[label.item]
        key = (item.pk, *sorted((label.model_a, label.model_b)))
        if key not in tasks:
            responses = {r.model_name: r for r in Response.objects.filter(item=item)}
            tasks[key] = Task.objects.create(
                campaign=campaign,
                response=responses[label.model_a],
                response_b=responses[label.model_b],
                b_left=len(tasks) % 2 == 1,
                overlap=3,
                assigned=0,
                submitted=0,
            )
        task = tasks[key]
        same_way = task.response.model_name == label.model_a
        task.assigned += 1
        task.submitted += 1
        task.save(update_fields=["assigned", "submitted"])
        assignment = Assignment.objects.create(
            task=task,
            campaign=campaign,
            annotator=users[label.rater],
            status=AssignmentStatus.SUBMITTED,
            expires_at=now + timedelta(hours=1),
            submitted_at=now,
        )
        HumanPreference.objects.create(
            assignment=assignment,
            campaign=campaign,
            response_a=task.response,
            response_b=task.response_b,
            annotator=users[label.rater],
            skill=None,
            choice=label.choice if same_way else FLIP.get(label.choice, label.choice),
            strength=1,
            rationale=f"label {n}",
        )
    return campaign


@pytest.fixture
def eight(project, tmp_path, django_user_model):
    users = {
        name: django_user_model.objects.create_user(name, password="x")
        for name in sorted({label.rater for label in EIGHT})
    }
    dataset = make_dataset(project, tmp_path, items=2, models=SYSTEMS)
    make_labels(project, dataset, users, EIGHT)
    return project


def _cells(html: str, table: str) -> list[str]:
    body = re.search(rf'<table[^>]*id="{table}".*?</table>', html, re.S)
    assert body, table
    return re.findall(r"<td[^>]*>(.*?)</td>", body.group(0), re.S)


def test_the_report_of_eight_labels_is_bounded_flagged_and_too_few(eight, researcher):
    report = project_report(project=eight, resamples=1000)
    overall = report["preferences"]["skills"]["Overall"]
    assert overall["labels"] == 8
    bt = overall["bradley_terry"]
    assert bt["too_few"] == "too few: n = 8 (at least 20 labels)" and bt["n"] == 8
    assert "separation" in bt["flags"] and "m0" in bt["separation"]["never_lost"]
    assert all(abs(s["estimate"]) < 4 for s in bt["strengths"].values())
    assert bt["nu"]["estimate"] < 10
    for s in [*bt["strengths"].values(), bt["nu"]]:
        if s["low"] is not None:
            assert s["low"] <= s["estimate"] <= s["high"]
    agreement = overall["agreement"]
    assert agreement["n"] == agreement["units_pairable"] == 2
    assert agreement["fleiss_kappa"]["too_few"] == "too few: n = 2 (at least 10 units)"
    assert report["preferences"]["prior_scale"] == 2.5
    assert report["preferences"]["minimums"]["bradley_terry"] == 20
    # the API carries the same
    url = f"/api/v1/projects/{eight.slug}/analytics/report"
    found = report_via_api(token_client(researcher), url, {"resamples": 1000})
    assert found["preferences"]["skills"]["Overall"]["bradley_terry"]["flags"] == bt["flags"]
    json.dumps(found, allow_nan=False)


def test_the_page_of_eight_labels_says_too_few_beside_every_figure(eight, researcher):
    snapshot_request(project=eight, params=snapshot_params())
    (done,) = compute_pending()
    assert done.status == "done", done.error
    client = Client()
    client.force_login(researcher)
    html = client.get(reverse("analytics:preferences", args=[eight.slug])).content.decode()
    # strengths: no chart, no number, no interval: the reason (with n) on every row
    assert 'id="preference-strengths"' not in html  # the chart
    strengths = _cells(html, "preference-strengths-table")
    assert len(strengths) == 4
    for cell in strengths:
        assert "too few: n = 8 (at least 20 labels)" in cell
        assert 'class="ci"' not in cell and "pref-estimate" not in cell
    assert "Too few labels for strengths" in html
    # nu too: the reason, not 17,222.78 with an interval
    nu = re.search(r'<span id="pref-nu">(.*?)</span>\.', html, re.S).group(1)
    assert "too few: n = 8 (at least 20 labels)" in nu and 'class="ci"' not in nu
    # separation said with who never lost
    separation = re.search(r'<p id="pref-separation">(.*?)</p>', html, re.S).group(1)
    assert "never lost" in separation and "m0" in separation
    # agreement: too few units rated twice
    for cell in _cells(html, "preference-agreement"):
        assert "too few: n = 2 (at least 10 units)" in cell
    assert 'class="ci"' not in html  # no interval anywhere on the page


def test_a_figure_cell_says_n_too_few_degenerate_resamples_and_withheld_intervals():
    from django.template.loader import render_to_string

    from analytics import preferences as prefs

    def cell(figure):
        html = render_to_string(
            "analytics/report/_preference_figure.html", {"f": figure, "resamples": 1000}
        )
        return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()

    held = prefs.figure(0.412, (0.2, 0.6, 1000), kind="bradley_terry", n=40, items=40)
    assert cell(held) == "0.412 [0.200, 0.600] n = 40"
    too_few = prefs.figure(5.346, (0.0, 5.345, 1000), kind="bradley_terry", n=8, items=8)
    assert cell(too_few) == "too few: n = 8 (at least 20 labels)"
    degenerate = prefs.figure(
        0.3, (-math.inf, math.inf, 950), kind="bradley_terry", n=60, items=20, degenerate=50
    )
    assert cell(degenerate) == (
        "0.300 n = 60 no interval: the degenerate resamples could fill a tail "
        "degenerate resamples: 50 of 1,000"
    )
    few_items = prefs.figure(
        0.5, (0.1, 0.7, 1000), kind="agreement", n=12, items=6, flags=["separation"]
    )
    assert cell(few_items) == (
        "0.500 n = 12 no interval: too few: n = 6 (at least 10 units) separation: prior-regularised"
    )
