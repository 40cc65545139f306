"""The judge trust report in the analytics report (snapshot, API, analytics_report), its page,
the selectors it reads (judge samples, hidden repeats) and a judge run's calibrated copy."""

from __future__ import annotations

import json
from io import StringIO
from unittest import mock

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from analytics.models import ReportSnapshot
from analytics.report import selectors as report_selectors
from analytics.report.selectors import project_report
from analytics.report.snapshots import snapshot_params, snapshot_request
from analytics.report.trust import calibrated_copy_make
from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import AssignmentKind, HumanScore
from annotation.selectors import retest_score_rows
from annotation.services.assignments import (
    ScoreInput,
    assignment_claim_next,
    human_score_submit,
    task_skills,
)
from devtools.openai_server import FakeOpenAIServer
from judging.models import JudgeConfig, JudgeKind, JudgeRun, JudgeScore, RunStatus
from judging.selectors import judge_sample_rows, judge_score_rows
from judging.services import judge_batch, judge_run_create
from judging.services.calibrated import (
    CalibrationRefused,
    judge_run_calibrated_copy,
    map_value,
    rounded,
)
from tests.analytics.snapshot_worker import compute_pending, report_via_api
from tests.analytics.test_report import scored_project  # noqa: F401 (fixture)
from tests.annotation.test_assignments import make_dataset
from tests.clients import token_client
from tests.judging.test_runs import llm_judge, response_ids, running

pytestmark = pytest.mark.django_db


def _report_without_trust(project, **kwargs):
    with mock.patch.object(report_selectors, "_trust", return_value={}):
        report = project_report(project=project, **kwargs)
    assert report.pop("trust") == {}
    return report


def test_the_report_has_trust_and_its_other_keys_are_unchanged(scored_project):  # noqa: F811
    report = project_report(project=scored_project, resamples=200)
    trust = report.pop("trust")
    assert report == _report_without_trust(scored_project, resamples=200)
    assert list(trust) == ["rouge"]
    figures = trust["rouge"]
    assert set(figures) == {"calibration", "strata", "na", "stochasticity", "probes"}
    # the probes' figures, as analytics.trust.probes.probe_figures gives them for the judge
    assert set(figures["calibration"]) == {"Factuality", "Readability", "Comprehension"}
    for skill, cal in figures["calibration"].items():
        assert cal["n"] == 8, skill
        assert cal["offset"]["resamples"] > 0
        assert sum(map(sum, cal["confusion"]["counts"])) == 8
    json.dumps(trust, allow_nan=False)


def test_the_command_and_the_api_carry_trust(scored_project, researcher):  # noqa: F811
    out = StringIO()
    call_command(
        "analytics_report", "--project", scored_project.slug, "--resamples", "100", stdout=out
    )
    from_command = json.loads(out.getvalue())
    assert "trust" in from_command and "rouge" in from_command["trust"]
    url = f"/api/v1/projects/{scored_project.slug}/analytics/report"
    assert report_via_api(token_client(researcher), url, {"resamples": 100}) == from_command


@pytest.fixture
def sampled_project(project, tmp_path, django_user_model):
    """Two annotators with hidden repeats on a 12-response campaign; a judge with two samples
    per response."""
    people = [django_user_model.objects.create_user(f"p{i}", password="x") for i in range(2)]
    dataset = make_dataset(project, tmp_path, items=6, models=("m1", "m2"))
    campaign = campaign_create(
        project=project, dataset=dataset, name="C", overlap=2, annotators=people, repeat_rate=0.5
    )
    campaign_activate(campaign=campaign)
    for n, person in enumerate(people):
        while (a := assignment_claim_next(campaign=campaign, annotator=person)) is not None:
            shift = 1 if a.kind == AssignmentKind.REPEAT and a.task_id % 2 else 0
            scores = [
                ScoreInput(s.skill_id, 1 + (a.task_id * 7 + s.skill_id * 3 + n + shift) % 5)
                for s in task_skills(assignment=a)
            ]
            human_score_submit(assignment_id=a.pk, annotator=person, scores=scores)
    with FakeOpenAIServer(style="json") as server:
        judge = llm_judge(project, server, name="sampled", samples=2)
        run = running(judge_run_create(judge=judge, dataset=dataset))
        # every response in one batch, as a worker's task judges them: one engine round trip
        judge_batch(run_id=run.pk, response_ids=response_ids(run))
    return project


def test_samples_and_hidden_repeats_are_read_and_figured(sampled_project):
    samples = judge_sample_rows(project=sampled_project)
    assert list(samples) == ["sampled"]
    assert {r[3] for r in samples["sampled"]} == {0, 1}
    retest = retest_score_rows(project=sampled_project)
    repeats = HumanScore.objects.filter(
        campaign__project=sampled_project, assignment__kind=AssignmentKind.REPEAT
    ).count()
    assert retest and len(retest) == repeats
    shifted = [r for r in retest if r[3] != r[4]]
    assert shifted and len(shifted) < len(retest)  # odd tasks' repeats were moved by one
    trust = project_report(project=sampled_project, resamples=100)["trust"]["sampled"]
    found = trust["stochasticity"]
    assert found
    for skill, s in found.items():
        assert s["judge"]["samples"] == 2, skill
        assert s["judge"]["responses"] == 12
    assert sum(s["people"]["pairs"] for s in found.values() if s["people"]) == len(retest)


# --- the calibrated copy ----------------------------------------------------------------------


def _run(project) -> JudgeRun:
    run = JudgeRun.objects.get(judge__project=project, judge__name="rouge")
    run.status = RunStatus.DONE
    run.save(update_fields=["status"])
    return run


def test_map_values_by_hand():
    points = [[1, 2.0], [3, 3.0], [5, 4.5]]
    assert map_value(points, 0.5) == 2.0 and map_value(points, 2) == 2.5
    assert map_value(points, 4) == 3.75 and map_value(points, 9) == 4.5
    assert [rounded(v) for v in (0.2, 2.5, 3.49, 6)] == [1, 3, 3, 5]


def test_a_calibrated_copy_maps_every_score_once_and_is_idempotent(scored_project):  # noqa: F811
    run = _run(scored_project)
    skills = sorted(set(JudgeScore.objects.filter(run=run).values_list("skill__name", flat=True)))
    maps = {skill: [[1, 2.0], [5, 4.0]] for skill in skills[:2]}  # the third has no map
    copy = judge_run_calibrated_copy(run=run, maps=maps, source={"report_snapshot": 7})
    judge = copy.judge
    assert judge.name == "rouge (calibrated)" and judge.kind == JudgeKind.IMPORTED
    assert copy.status == RunStatus.DONE and copy.dataset_id == run.dataset_id
    snap = copy.settings_snapshot
    assert snap["calibrated_from_run"] == run.pk and snap["map"] == maps
    assert snap["skills_without_map"] == [skills[2]] and snap["source"] == {"report_snapshot": 7}
    source = {
        (r, s): v
        for r, s, v in JudgeScore.objects.filter(run=run).values_list(
            "response_id", "skill__name", "score"
        )
    }
    copied = list(
        JudgeScore.objects.filter(run=copy).values_list(
            "response_id", "skill__name", "score", "raw_value", "is_na"
        )
    )
    assert len(copied) == sum(1 for (_, s) in source if s in maps)
    for rid, skill, score, raw, is_na in copied:
        original = source[(rid, skill)]
        if original is None:
            assert is_na and score is None
        else:
            assert raw == pytest.approx(2 + (original - 1) * 0.5)
            assert score == rounded(raw)
    # the copy counts as a judge in the report, with its rounded scores
    assert {r[4] for r in judge_score_rows(project=scored_project)} == {
        "rouge",
        "rouge (calibrated)",
    }

    again = judge_run_calibrated_copy(run=run, maps=maps)
    assert again.pk == copy.pk
    assert JudgeScore.objects.filter(run=copy).count() == len(copied)
    other = judge_run_calibrated_copy(run=run, maps={skills[0]: [[1, 1.0], [5, 5.0]]})
    assert other.pk == copy.pk
    assert JudgeRun.objects.filter(judge=judge).count() == 1
    assert JudgeScore.objects.filter(run=copy).count() == sum(
        1 for (_, s) in source if s == skills[0]
    )
    with pytest.raises(CalibrationRefused, match="calibrated copy already"):
        judge_run_calibrated_copy(run=other, maps=maps)


@pytest.mark.parametrize(
    "maps, message",
    [
        ({}, "no calibration map"),
        ({"Readability": [[2, 2.0], [1, 3.0]]}, "rising judge values"),
        ({"Readability": [[1, 3.0], [2, 2.0]]}, "not monotone"),
        ({"Readability": [[1, 0.0], [2, 2.0]]}, "leaves the 1-5 scale"),
        ({"Readability": [[1, "x"]]}, "not two numbers"),
        ({"Readability": [[1, float("nan")]]}, "not two numbers"),
    ],
)
def test_bad_maps_are_refused_and_nothing_is_written(scored_project, maps, message):  # noqa: F811
    run = _run(scored_project)
    with pytest.raises(CalibrationRefused, match=message):
        judge_run_calibrated_copy(run=run, maps=maps)
    assert not JudgeConfig.objects.filter(name="rouge (calibrated)").exists()


def test_a_judge_of_another_kind_with_the_name_is_not_overwritten(scored_project):  # noqa: F811
    run = _run(scored_project)
    with FakeOpenAIServer(style="json") as server:
        llm_judge(scored_project, server, name="rouge (calibrated)")
    with pytest.raises(CalibrationRefused, match="rename it first"):
        judge_run_calibrated_copy(run=run, maps={"Readability": [[1, 1.0], [5, 5.0]]})


# --- the snapshot, the page, the button and the API ---------------------------------------------


def _snapshot(project) -> ReportSnapshot:
    snapshot_request(project=project, params=snapshot_params(resamples=200))
    (done,) = compute_pending()
    assert done.status == "done", done.error
    return done


def test_the_trust_page_reads_the_snapshot_only(scored_project, researcher, annotator, outsider):  # noqa: F811
    _run(scored_project)
    params = snapshot_params(resamples=200)
    url = reverse("analytics:trust", args=[scored_project.slug]) + "?resamples=200"
    client = Client()
    client.force_login(researcher)
    empty = client.get(url)
    assert empty.status_code == 200 and b"no report of these filters yet" in empty.content
    assert not ReportSnapshot.objects.exists()  # the page asks for nothing and computes nothing
    snapshot_request(project=scored_project, params=params)
    compute_pending()
    page = client.get(url + "&trust_judge=rouge")
    html = page.content.decode()
    for part in (
        "trust-calibration-table",
        "bland-altman-1",
        "confusion-1",
        "strata-1",
        "trust-na-table",
        "trust-probe-figures",  # the length figure needs no probe run
        "Make a calibrated copy",
    ):
        assert part in html, part
    partial = client.get(url, HTTP_HX_REQUEST="true")
    assert b"<html" not in partial.content and b"trust-calibration-table" in partial.content
    for user, code in ((annotator, 403), (outsider, 404)):
        other = Client()
        other.force_login(user)
        assert other.get(url).status_code == code
    assert client.post(url).status_code == 405


def test_the_dashboard_links_each_judges_trust_page(scored_project, researcher):  # noqa: F811
    _snapshot(scored_project)
    client = Client()
    client.force_login(researcher)
    html = client.get(
        reverse("analytics:dashboard", args=[scored_project.slug]) + "?resamples=200"
    ).content.decode()
    assert "data-trust-link" in html and "trust_judge=rouge" in html


def test_the_button_and_the_api_make_one_calibrated_copy(
    scored_project,  # noqa: F811
    researcher,
    annotator,
    django_capture_on_commit_callbacks,
):
    run = _run(scored_project)
    snapshot = _snapshot(scored_project)
    client = Client()
    client.force_login(researcher)
    url = reverse("analytics:trust-calibrate", args=[scored_project.slug])
    with (
        mock.patch("analytics.tasks.trust_calibrated_copy_task.delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        answer = client.post(
            url, {"judge": "rouge", "snapshot": snapshot.pk}, HTTP_HX_REQUEST="true"
        )
    assert answer.status_code == 200 and b"rouge (calibrated)" in answer.content
    delay.assert_called_once_with(snapshot.pk, "rouge", run.pk, researcher.pk)
    # the worker's side, twice (a redelivered message): one judge, one run
    for _ in range(2):
        copy = calibrated_copy_make(
            snapshot_id=snapshot.pk, judge="rouge", run_id=run.pk, user_id=researcher.pk
        )
    assert JudgeRun.objects.filter(judge__name="rouge (calibrated)").count() == 1
    assert copy.settings_snapshot["source"]["report_snapshot"] == snapshot.pk
    refused = client.post(url, {"judge": "nobody", "snapshot": snapshot.pk}, HTTP_HX_REQUEST="true")
    assert b"no calibration map" in refused.content

    api = f"/api/v1/projects/{scored_project.slug}/analytics/trust/calibrated-copy"
    with (
        mock.patch("analytics.tasks.trust_calibrated_copy_task.delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        answer = token_client(researcher).post(
            api, {"judge": "rouge", "snapshot": snapshot.pk}, format="json"
        )
    assert answer.status_code == 202, answer.content
    assert answer.json()["calibrated_judge"] == "rouge (calibrated)"
    delay.assert_called_once()
    assert (
        token_client(researcher).post(api, {"judge": "x" * 300}, format="json").status_code == 400
    )
    assert token_client(annotator).post(api, {"judge": "rouge"}, format="json").status_code == 403
    other = Client()
    other.force_login(annotator)
    assert other.post(url, {"judge": "rouge", "snapshot": snapshot.pk}).status_code == 403


def test_the_task_is_idempotent_and_quiet_on_a_missing_snapshot(scored_project):  # noqa: F811
    from analytics.tasks import trust_calibrated_copy_task

    run = _run(scored_project)
    snapshot = _snapshot(scored_project)
    trust_calibrated_copy_task(snapshot.pk, "rouge", run.pk, 0)
    trust_calibrated_copy_task(snapshot.pk, "rouge", run.pk, 0)
    assert JudgeRun.objects.filter(judge__name="rouge (calibrated)").count() == 1
    trust_calibrated_copy_task(snapshot.pk + 1000, "rouge", run.pk, 0)  # logs, writes nothing


def test_the_trust_page_without_intervals_renders(scored_project, researcher):  # noqa: F811
    snapshot_request(project=scored_project, params=snapshot_params(resamples=0))
    (done,) = compute_pending()
    assert done.status == "done", done.error
    client = Client()
    client.force_login(researcher)
    url = reverse("analytics:trust", args=[scored_project.slug]) + "?resamples=0"
    html = client.get(url + "&trust_judge=nobody").content.decode()  # unknown: the first judge
    assert "trust-calibration-table" in html and 'class="ci"' not in html
    assert '<h1>Judge trust: <span class="name">rouge</span></h1>' in html
