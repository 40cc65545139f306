"""Preferences in the analytics report (snapshot, API, analytics_report) on PostgreSQL: the
people's labels of a pairwise campaign, a pairwise judge run and pointwise judge scores
made preferences, the page that reads the snapshot, and the selectors it reads."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from analytics import preferences as prefs
from analytics.models import ReportSnapshot
from analytics.report.selectors import project_report
from analytics.report.snapshots import snapshot_changes, snapshot_params, snapshot_request
from annotation.campaigns.services import campaign_create
from annotation.models import (
    Assignment,
    AssignmentStatus,
    CampaignMode,
    HumanPreference,
    Response,
    Skill,
    Task,
)
from annotation.selectors import human_preference_rows
from judging.models import JudgeConfig, JudgeKind, JudgeRun, JudgmentStatus, PairJudgment, RunStatus
from judging.selectors import pair_judgment_rows
from tests.analytics.snapshot_worker import compute_pending, report_via_api
from tests.annotation.test_assignments import make_dataset
from tests.clients import token_client

pytestmark = pytest.mark.django_db

MODELS = ("m1", "m2", "m<b>3</b>")
#: choice per (rater, pair index); A = the first system of the pair as created
PLAN = {
    "r0": ["a", "a", "b", "tie", "a", "both_bad"],
    "r1": ["a", "b", "b", "tie", "a", "a"],
    "r2": ["a", "a", "tie", "b", "b", "a"],
}


def make_preferences(project, dataset, people, *, skill=None, plan=PLAN, models=MODELS):
    """A pairwise campaign whose tasks are every pair of the dataset's systems per item,
    each labelled by every person (accepted) following `plan` in turn."""
    campaign = campaign_create(project=project, dataset=dataset, name="Pairs", overlap=3)
    campaign.mode = CampaignMode.PAIRWISE
    campaign.save(update_fields=["mode"])
    now = timezone.now()
    tasks = []
    for item in dataset.items.order_by("pk"):
        responses = {r.model_name: r for r in Response.objects.filter(item=item)}
        for i, a in enumerate(models):
            for b in models[i + 1 :]:
                tasks.append(
                    Task.objects.create(
                        campaign=campaign,
                        response=responses[a],
                        response_b=responses[b],
                        b_left=len(tasks) % 2 == 1,
                        overlap=3,
                        assigned=3,
                        submitted=3,
                    )
                )
    for person in people:
        choices = plan[person.username]
        for n, task in enumerate(tasks):
            assignment = Assignment.objects.create(
                task=task,
                campaign=campaign,
                annotator=person,
                status=AssignmentStatus.SUBMITTED,
                expires_at=now + timedelta(hours=1),
                submitted_at=now,
            )
            for s in (skill, None):
                HumanPreference.objects.create(
                    assignment=assignment,
                    campaign=campaign,
                    response_a=task.response,
                    response_b=task.response_b,
                    annotator=person,
                    skill=s,
                    choice=choices[n % len(choices)],
                    strength=1 + n % 2,
                    rationale=f"because {n}",
                )
    return campaign, tasks


@pytest.fixture
def pref_project(project, tmp_path, django_user_model):
    people = [django_user_model.objects.create_user(f"r{i}", password="x") for i in range(3)]
    dataset = make_dataset(project, tmp_path, items=4, models=MODELS)
    skill = Skill.objects.get(name="Factuality", project__isnull=True)
    campaign, tasks = make_preferences(project, dataset, people, skill=skill)
    # a pairwise judge run: every system against m1, both orders
    judge = JudgeConfig.objects.create(project=project, name="pj", kind=JudgeKind.BASELINE)
    run = JudgeRun.objects.create(
        judge=judge, dataset=dataset, status=RunStatus.DONE, pairwise_against="m1"
    )
    for item in dataset.items.order_by("pk"):
        responses = {r.model_name: r for r in Response.objects.filter(item=item)}
        for model in MODELS[1:]:
            for order in (0, 1):
                PairJudgment.objects.create(
                    run=run,
                    response=responses[model],
                    anchor=responses["m1"],
                    order=order,
                    status=JudgmentStatus.OK,
                    verdicts={"Overall": "anchor", "Factuality": "anchor" if order else "tie"},
                )
    return project


def test_the_selectors_read_accepted_preferences_and_pair_judgments(pref_project):
    rows = human_preference_rows(project=pref_project)
    assert len(rows) == 3 * 4 * 3 * 2  # people x items x pairs x (skill, overall)
    assert {r.skill for r in rows} == {"Factuality", None}
    assert {r.rationale for r in rows} >= {"because 0", "because 1"}
    # an assignment that is not submitted does not count
    Assignment.objects.filter(pk=HumanPreference.objects.first().assignment_id).update(
        status=AssignmentStatus.ACTIVE
    )
    assert len(human_preference_rows(project=pref_project)) == len(rows) - 2
    judged = pair_judgment_rows(project=pref_project)
    assert len(judged) == 4 * 2 * 2 and {r[0] for r in judged} == {"pj"}


def test_the_report_has_preferences_computed_from_the_labels(pref_project):
    report = project_report(project=pref_project, resamples=100)
    found = report["preferences"]
    assert list(found["skills"]) == ["Factuality", "Overall"]
    overall = found["skills"]["Overall"]
    assert overall["models"] == sorted(MODELS)
    assert overall["labels"] == 3 * 4 * 3 and overall["raters"] == 3 and overall["items"] == 4
    # the same figures as the pure report of the same labels
    labels = [
        prefs.Label(r.item_id, r.model_a, r.model_b, r.annotator,
                    r.skill or "Overall", r.choice, r.strength)
        for r in human_preference_rows(project=pref_project)
    ]  # fmt: skip
    pure = prefs.preference_report([lb for lb in labels if lb.skill == "Overall"])
    expected = pure["skills"]["Overall"]
    assert overall["wins"] == expected["wins"] and overall["ties"] == expected["ties"]
    for name, s in overall["bradley_terry"]["strengths"].items():
        assert s["estimate"] == pytest.approx(
            expected["bradley_terry"]["strengths"][name]["estimate"]
        )
        assert s["resamples"] == 100
    assert overall["agreement"]["alpha_nominal"]["estimate"] == pytest.approx(
        expected["agreement"]["alpha_nominal"]["estimate"]
    )
    # the pairwise judge said "anchor" (m1 better) on Overall in both orders
    judge = overall["judges"]["pj (pairwise)"]
    m1_pairs = [
        (lb.item, lb.model_a, lb.model_b)
        for lb in labels
        if lb.skill == "Overall" and "m1" in (lb.model_a, lb.model_b)
    ]
    assert 0 < judge["units"] <= len(set(m1_pairs))
    wins = np.array(overall["wins"])
    assert wins.sum() + np.array(overall["ties"]).sum() / 2 == overall["labels"]
    json.dumps(found, allow_nan=False)


def test_the_command_and_the_api_carry_preferences(pref_project, researcher):
    out = StringIO()
    call_command(
        "analytics_report", "--project", pref_project.slug, "--resamples", "50", stdout=out
    )
    from_command = json.loads(out.getvalue())
    assert "Overall" in from_command["preferences"]["skills"]
    url = f"/api/v1/projects/{pref_project.slug}/analytics/report"
    assert report_via_api(token_client(researcher), url, {"resamples": 50}) == from_command


def test_filters_narrow_the_preferences(pref_project):
    report = project_report(project=pref_project, resamples=0, systems=["m1", "m2"])
    overall = report["preferences"]["skills"]["Overall"]
    assert overall["models"] == ["m1", "m2"] and overall["labels"] == 3 * 4
    only = project_report(project=pref_project, resamples=0, skills=["Readability"])
    assert list(only["preferences"]["skills"]) == ["Overall"]


def test_the_preference_page_reads_the_snapshot_only(pref_project, researcher, annotator, outsider):
    url = reverse("analytics:preferences", args=[pref_project.slug]) + "?resamples=200"
    client = Client()
    client.force_login(researcher)
    empty = client.get(url)
    assert empty.status_code == 200 and b"no report of these filters yet" in empty.content
    assert not ReportSnapshot.objects.exists()
    snapshot_request(project=pref_project, params=snapshot_params(resamples=200))
    (done,) = compute_pending()
    assert done.status == "done", done.error
    html = client.get(url).content.decode()
    for part in (
        "preference-matrix",
        "preference-strengths",
        "preference-strengths-table",
        "preference-agreement",
        "preference-judges",
        "pj (pairwise)",
        "m&lt;b&gt;3&lt;/b&gt;",
    ):
        assert part in html, part
    assert "<b>3</b>" not in html  # a system's name is text, never markup
    skill = client.get(url + "&pref_skill=Factuality", HTTP_HX_REQUEST="true")
    assert b"<html" not in skill.content and b"Factuality" in skill.content
    dashboard = client.get(
        reverse("analytics:dashboard", args=[pref_project.slug]) + "?resamples=200"
    )
    assert b"data-preferences-link" in dashboard.content
    for user, code in ((annotator, 403), (outsider, 404)):
        other = Client()
        other.force_login(user)
        assert other.get(url).status_code == code
    assert client.post(url).status_code == 405


def test_new_preferences_make_the_snapshot_stale(pref_project):
    snapshot_request(project=pref_project, params=snapshot_params(resamples=0))
    (done,) = compute_pending()
    assert not snapshot_changes(project=pref_project, snapshot=done).any
    HumanPreference.objects.filter(skill__isnull=True).first().save()  # edited: updated_at
    changes = snapshot_changes(project=pref_project, snapshot=done)
    assert changes.preferences == 1 and changes.any
    assert "1 new or changed preference" in changes.summary()
    assert changes.as_dict()["preferences"] == 1
