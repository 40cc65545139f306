"""Report snapshots: the report is computed by a worker into a stored snapshot that pages and
the API serve at once; it equals `analytics_report` exactly; a refresh is deduplicated while
it runs; changed scores make a snapshot stale and beat recomputes stale default ones, rate
limited; a dead worker's snapshot is failed; no web request computes a report."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from unittest import mock

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from analytics import tasks
from analytics.models import ReportSnapshot, SnapshotPart, SnapshotStatus
from analytics.report import snapshots
from analytics.report.snapshots import (
    SnapshotRefused,
    report_snapshot_compute,
    report_snapshots_fail_stale,
    report_snapshots_refresh_stale,
    report_snapshots_request_first,
    snapshot_params,
    snapshot_request,
)
from annotation.models import HumanScore
from annotation.services.assignments import human_score_edit
from tests.analytics.snapshot_worker import compute_pending, report_via_api
from tests.analytics.test_report import scored_project  # noqa: F401 (fixture)
from tests.clients import token_client

pytestmark = pytest.mark.django_db


def command_json(project, *args) -> str:
    out = StringIO()
    call_command("analytics_report", "--project", project.slug, *args, stdout=out)
    return out.getvalue()


def api_url(project) -> str:
    return f"/api/v1/projects/{project.slug}/analytics/report"


def dashboard_url(project) -> str:
    return reverse("analytics:dashboard", args=[project.slug])


def staff_client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# --- the snapshot is the command's report --------------------------------------------------


@pytest.mark.parametrize(
    "args, params",
    [
        ((), {}),
        (("--resamples", "0"), {"resamples": 0}),
        (
            ("--skill", "Readability", "--system", "m1", "--resamples", "200"),
            {"skill": "Readability", "system": "m1", "resamples": 200},
        ),
    ],
)
def test_the_snapshot_equals_the_command_exactly(scored_project, researcher, args, params):  # noqa: F811
    # given: the command's JSON, computed in-process
    expected = json.loads(command_json(scored_project, *args))

    # when: the API asks, a worker computes, the API serves the stored snapshot
    served = report_via_api(token_client(researcher), api_url(scored_project), params)

    # then: the same keys in the same order and the same floats, bit for bit
    assert json.dumps(served) == json.dumps(expected)


def test_the_stored_report_is_the_commands_json_text_and_its_size_is_recorded(scored_project):  # noqa: F811
    snapshot, created = snapshot_request(project=scored_project, params=snapshot_params())
    assert created and snapshot.status == SnapshotStatus.PENDING
    done = report_snapshot_compute(snapshot_id=snapshot.pk)
    assert done is not None and done.status == SnapshotStatus.DONE
    stored = snapshots.snapshot_part(done, "report")
    assert stored == json.loads(command_json(scored_project))
    assert done.size_bytes == len(json.dumps(stored, separators=(",", ":")).encode())
    assert done.duration_seconds is not None and done.duration_seconds >= 0
    assert done.progress == 1.0 and done.finished_at is not None
    assert done.watermark["human"] > 0 and done.watermark["judges"] == ["rouge"]
    names = set(SnapshotPart.objects.filter(snapshot=done).values_list("name", flat=True))
    assert {"report", "tables", "charts", "heatmaps.0", "options", "summary"} <= names
    assert "headline.item.spearman" in names


def test_a_second_compute_of_the_same_snapshot_does_nothing(scored_project):  # noqa: F811
    snapshot, _ = snapshot_request(project=scored_project, params=snapshot_params(resamples=0))
    assert report_snapshot_compute(snapshot_id=snapshot.pk) is not None
    assert report_snapshot_compute(snapshot_id=snapshot.pk) is None  # redelivered message
    assert SnapshotPart.objects.filter(snapshot=snapshot, name="report").count() == 1


def test_a_failure_is_recorded_on_the_snapshot_and_said_on_the_page(scored_project, researcher):  # noqa: F811
    snapshot, _ = snapshot_request(project=scored_project, params=snapshot_params())
    with mock.patch.object(snapshots, "project_report", side_effect=MemoryError("too big")):
        failed = report_snapshot_compute(snapshot_id=snapshot.pk)
    assert failed is not None and failed.status == SnapshotStatus.FAILED
    assert "MemoryError: too big" in failed.error
    assert not SnapshotPart.objects.filter(snapshot=snapshot).exists()
    page = staff_client(researcher).get(dashboard_url(scored_project))
    assert "Computing the report failed: MemoryError: too big" in page.content.decode()


# --- no web request computes a report -------------------------------------------------------


def test_the_page_and_the_api_never_compute_a_report(scored_project, researcher):  # noqa: F811
    client = staff_client(researcher)
    with mock.patch.object(snapshots, "project_report", side_effect=AssertionError("computed")):
        page = client.get(dashboard_url(scored_project))
        api = token_client(researcher).get(api_url(scored_project), {"resamples": 0})
    assert page.status_code == 200 and api.status_code == 202
    assert "Waiting for a worker to compute the report" in page.content.decode()
    # one pending snapshot per params: the page's default and the API's resamples=0
    assert ReportSnapshot.objects.filter(status=SnapshotStatus.PENDING).count() == 2
    assert not SnapshotPart.objects.exists()


def test_the_compute_task_is_routed_to_the_analytics_queue(settings):
    router = tasks.report_snapshot_compute_task.app.amqp.router
    route = router.route({}, tasks.report_snapshot_compute_task.name)
    assert route["queue"].name == "analytics"
    assert "report-snapshots-refresh" in settings.CELERY_BEAT_SCHEDULE


# --- requests and refreshes -----------------------------------------------------------------


def test_a_refresh_while_one_computes_finds_that_one(scored_project):  # noqa: F811
    params = snapshot_params(skills=["Readability"])
    first, created = snapshot_request(project=scored_project, params=params)
    again, created_again = snapshot_request(project=scored_project, params=params)
    assert created and not created_again and again.pk == first.pk
    # the same params in another order are the same key
    same = snapshot_params(skills=["Readability", "Readability"], compare=[("b", "a")])
    assert snapshots.snapshot_key(same) == snapshots.snapshot_key(
        snapshot_params(skills=["Readability"], compare=[("a", "b")])
    )


def test_the_database_keeps_one_snapshot_in_flight_per_key(scored_project):  # noqa: F811
    from django.db import IntegrityError, transaction

    params = snapshot_params()
    key = snapshots.snapshot_key(params)
    ReportSnapshot.objects.create(project=scored_project, key=key, params=params)
    with pytest.raises(IntegrityError), transaction.atomic():
        ReportSnapshot.objects.create(project=scored_project, key=key, params=params)
    # a request racing the first one's insert finds it instead of failing
    with mock.patch.object(snapshots, "snapshot_in_flight", side_effect=[None, "found"]):
        assert snapshot_request(project=scored_project, params=params) == ("found", False)


def test_too_many_reports_computing_in_a_project_are_refused(scored_project, researcher, settings):  # noqa: F811
    settings.FLASKWEB_REPORT_MAX_IN_FLIGHT = 2
    for n in (0, 200):
        snapshot_request(project=scored_project, params=snapshot_params(resamples=n))
    with pytest.raises(SnapshotRefused, match="2 reports of this project"):
        snapshot_request(project=scored_project, params=snapshot_params(resamples=1000))
    answer = token_client(researcher).get(api_url(scored_project), {"resamples": 2000})
    assert answer.status_code == 429 and "2 reports" in answer.json()["detail"]
    assert ReportSnapshot.objects.count() == 2  # the refused request left nothing


def test_the_refresh_button_posts_once_and_polls_until_done(scored_project, researcher):  # noqa: F811
    client = staff_client(researcher)
    client.get(dashboard_url(scored_project))
    compute_pending()
    first = ReportSnapshot.objects.get(status=SnapshotStatus.DONE)

    # when: refresh twice through htmx while nothing computes it
    refresh = reverse("analytics:report-refresh", args=[scored_project.slug])
    one = client.post(refresh, HTTP_HX_REQUEST="true")
    two = client.post(refresh, HTTP_HX_REQUEST="true")

    # then: one new snapshot, its progress polled
    pending = ReportSnapshot.objects.get(status=SnapshotStatus.PENDING)
    assert one.status_code == two.status_code == 200
    status_url = reverse("analytics:snapshot-status", args=[scored_project.slug, pending.pk])
    assert status_url in one.content.decode() and "data-snapshot-progress" in one.content.decode()
    poll = client.get(status_url, HTTP_HX_REQUEST="true")
    assert "Waiting for a worker" in poll.content.decode()
    compute_pending()
    done = client.get(status_url, HTTP_HX_REQUEST="true")
    assert done["HX-Refresh"] == "true"
    # the new snapshot replaced the old one
    assert not ReportSnapshot.objects.filter(pk=first.pk).exists()
    # without htmx the refresh redirects to the same filters
    plain = client.post(refresh, {"skill": "Readability"})
    assert plain.status_code == 302 and plain["Location"].endswith("?skill=Readability")


def test_the_pages_and_the_api_are_for_the_projects_staff_only(
    scored_project,  # noqa: F811
    researcher,
    annotator,
    outsider,
):
    snapshot, _ = snapshot_request(project=scored_project, params=snapshot_params())
    refresh = reverse("analytics:report-refresh", args=[scored_project.slug])
    status = reverse("analytics:snapshot-status", args=[scored_project.slug, snapshot.pk])
    api_status = f"/api/v1/projects/{scored_project.slug}/analytics/snapshots/{snapshot.pk}"
    for user, code in ((annotator, 403), (outsider, 404)):
        client = staff_client(user)
        assert client.post(refresh).status_code == code
        assert client.get(status).status_code == code
        assert token_client(user).get(api_status).status_code == code
        assert token_client(user).post(api_url(scored_project) + "/refresh").status_code == code
    assert ReportSnapshot.objects.count() == 1
    # another project's snapshot id is not found through this project
    from annotation.services.projects import project_create

    other = project_create(slug="other", name="Other")
    assert staff_client(researcher).get(
        reverse("analytics:snapshot-status", args=[other.slug, snapshot.pk])
    ).status_code in (403, 404)


def test_the_api_says_the_snapshots_state_and_drops_breakdowns_on_request(
    scored_project,  # noqa: F811
    researcher,
):
    client = token_client(researcher)
    asked = client.get(api_url(scored_project), {"resamples": 0})
    assert asked.status_code == 202
    state = asked.json()["snapshot"]
    assert state["status"] == "pending" and state["params"]["resamples"] == 0
    assert client.get(state["url"]).json()["snapshot"]["id"] == state["id"]
    compute_pending()
    served = client.get(api_url(scored_project), {"resamples": 0, "breakdowns": 0}).json()
    assert "breakdowns" not in served and served["resamples"] == 0
    assert served["snapshot"]["status"] == "done" and served["snapshot"]["stale"] is False
    assert served["snapshot"]["changes_since"]["summary"] == ""
    # a refresh through the API: 202, then the same one while it computes
    one = client.post(api_url(scored_project) + "/refresh?resamples=0")
    two = client.post(api_url(scored_project) + "/refresh", {"resamples": 0}, format="json")
    assert one.status_code == two.status_code == 202
    assert one.json()["snapshot"]["id"] == two.json()["snapshot"]["id"]
    bad = client.post(api_url(scored_project) + "/refresh", {"compare_a": ["x"]}, format="json")
    assert bad.status_code == 400 and "compare_b" in bad.json()


# --- freshness ------------------------------------------------------------------------------


def test_changed_scores_make_the_snapshot_stale_and_the_page_says_what_changed(
    scored_project,  # noqa: F811
    researcher,
    admin_user,
):
    client = staff_client(researcher)
    client.get(dashboard_url(scored_project))
    compute_pending()
    page = client.get(dashboard_url(scored_project)).content.decode()
    assert "Up to date." in page

    # when: a researcher corrects two human scores
    for row in HumanScore.objects.filter(score__lt=5)[:2]:
        human_score_edit(score_id=row.pk, editor=admin_user, score=row.score + 1)

    # then: the page serves the same snapshot and says what changed since
    page = client.get(dashboard_url(scored_project)).content.decode()
    assert "Since then: 2 new or changed human scores." in page
    snapshot = ReportSnapshot.objects.get(status=SnapshotStatus.DONE)
    assert snapshot.stale
    api = token_client(researcher).get(api_url(scored_project)).json()["snapshot"]
    assert api["stale"] and api["changes_since"]["human_scores"] == 2


def test_imported_scores_and_finished_runs_count_as_changes(scored_project):  # noqa: F811
    from analytics.imports.services import scores_import
    from judging.models import JudgeRun

    snapshot, _ = snapshot_request(project=scored_project, params=snapshot_params(resamples=0))
    snapshot = report_snapshot_compute(snapshot_id=snapshot.pk)
    assert not snapshots.snapshot_changes(project=scored_project, snapshot=snapshot).any

    run = JudgeRun.objects.get()
    JudgeRun.objects.filter(pk=run.pk).update(finished_at=timezone.now() + timedelta(seconds=1))
    rows = "item,system,rater,rater_kind,skill,score\nq-new,m9,p1,human,Readability,4\n"
    scores_import(
        project_slug=scored_project.slug, files=[("more.csv", rows.encode())], create_project=False
    )
    changes = snapshots.snapshot_changes(project=scored_project, snapshot=snapshot)
    assert changes.judge_runs == (("rouge", run.done),) and changes.imported_scores == 1
    assert changes.summary() == "1 judge run finished, 1 imported score"


def _finished_run_after(snapshot, **fields):
    """A run of the project's judge, finished one second after the snapshot read its inputs."""
    from judging.models import JudgeRun, RunStatus

    base = JudgeRun.objects.get(pairwise_against="", probe="")
    finished = snapshots.snapshot_as_of(snapshot) + timedelta(seconds=1)
    return JudgeRun.objects.create(
        judge=base.judge,
        dataset=base.dataset,
        status=RunStatus.DONE,
        done=7,
        finished_at=finished,
        **fields,
    )


def _default_snapshot_done(project, settings):
    settings.FLASKWEB_REPORT_REFRESH_MIN_SECONDS = 0
    snapshot, _ = snapshot_request(project=project, params=snapshot_params())
    snapshot = report_snapshot_compute(snapshot_id=snapshot.pk)
    assert not snapshots.snapshot_changes(project=project, snapshot=snapshot).any
    assert report_snapshots_refresh_stale() == []
    return snapshot


def test_a_finished_pairwise_run_makes_the_report_stale_and_beat_refreshes_it(
    scored_project,  # noqa: F811
    settings,
    researcher,
):
    # given: a done default snapshot with nothing changed since
    snapshot = _default_snapshot_done(scored_project, settings)

    # when: a pairwise run of the judge finishes (its verdicts feed the preference figures)
    _finished_run_after(snapshot, pairwise_against="m1")

    # then: beat marks the snapshot stale and queues a fresh one; the changes name the run
    queued = report_snapshots_refresh_stale()
    assert len(queued) == 1 and ReportSnapshot.objects.get(pk=snapshot.pk).stale
    changes = snapshots.snapshot_changes(project=scored_project, snapshot=snapshot)
    assert changes.pairwise_runs == (("rouge", 7),) and changes.judge_runs == ()
    assert changes.summary() == "1 pairwise judge run finished"
    api = token_client(researcher).get(api_url(scored_project)).json()["snapshot"]
    assert api["changes_since"]["pairwise_runs"] == [{"judge": "rouge", "judgments": 7}]
    page = staff_client(researcher).get(dashboard_url(scored_project)).content.decode()
    assert "Since then: 1 pairwise judge run finished." in page


def test_a_finished_probe_run_makes_the_report_stale_and_beat_refreshes_it(
    scored_project,  # noqa: F811
    settings,
):
    from judging.models import JudgeRun

    snapshot = _default_snapshot_done(scored_project, settings)

    # when: a bias probe of the judge's run finishes (it feeds the trust report)
    base = JudgeRun.objects.get()
    _finished_run_after(snapshot, probe="pad", base_run=base)

    assert len(report_snapshots_refresh_stale()) == 1
    assert ReportSnapshot.objects.get(pk=snapshot.pk).stale
    changes = snapshots.snapshot_changes(project=scored_project, snapshot=snapshot)
    assert changes.probe_runs == (("rouge", 7),) and changes.judge_runs == ()
    assert changes.summary() == "1 bias probe run finished"


def test_beat_refreshes_stale_default_snapshots_rate_limited(scored_project, settings):  # noqa: F811
    settings.FLASKWEB_REPORT_REFRESH_MIN_SECONDS = 300
    default, _ = snapshot_request(project=scored_project, params=snapshot_params())
    filtered, _ = snapshot_request(
        project=scored_project, params=snapshot_params(skills=["Readability"])
    )
    compute_pending()
    assert report_snapshots_refresh_stale() == []  # nothing changed

    HumanScore.objects.filter(pk=HumanScore.objects.first().pk).update(
        updated_at=timezone.now() + timedelta(seconds=1)
    )
    # changed, but computed less than 300 s ago: marked stale, not recomputed yet
    assert report_snapshots_refresh_stale() == []
    assert set(ReportSnapshot.objects.values_list("stale", flat=True)) == {True}

    ReportSnapshot.objects.update(finished_at=timezone.now() - timedelta(seconds=301))
    queued = report_snapshots_refresh_stale()
    assert len(queued) == 1  # the default one only; filtered ones wait for a person
    fresh = ReportSnapshot.objects.get(pk=queued[0])
    assert fresh.is_default and fresh.reason == "beat" and fresh.status == SnapshotStatus.PENDING
    assert report_snapshots_refresh_stale() == []  # deduplicated while it is pending
    compute_pending()
    assert not ReportSnapshot.objects.get(is_default=True, status="done").stale
    assert ReportSnapshot.objects.filter(pk=filtered.pk).exists()


def test_beat_refreshes_at_most_its_per_tick_allowance(db, settings):
    from annotation.services.projects import project_create

    settings.FLASKWEB_REPORT_REFRESH_PER_TICK = 2
    for n in range(3):
        project = project_create(slug=f"p{n}", name=f"P{n}")
        ReportSnapshot.objects.create(
            project=project,
            key=snapshots.snapshot_key(snapshot_params()),
            params=snapshot_params(),
            is_default=True,
            status=SnapshotStatus.DONE,
            stale=True,
            finished_at=timezone.now() - timedelta(hours=1, minutes=n),
        )
    queued = report_snapshots_refresh_stale()
    assert len(queued) == 2
    # the two oldest go first
    assert {ReportSnapshot.objects.get(pk=pk).project.slug for pk in queued} == {"p1", "p2"}


def test_the_first_report_is_queued_when_the_data_arrives_not_on_a_visit(project, tmp_path):
    from tests.annotation.test_campaign_selectors import make_dataset

    # given: a project with nothing in it yet, and another one
    assert report_snapshots_request_first() == []
    assert tasks.report_snapshots_refresh_task() == 0

    # when: its first dataset is imported
    make_dataset(project, tmp_path, items=2)

    # then: beat queues its default report, once, before anyone looked
    queued = report_snapshots_request_first()
    assert len(queued) == 1
    first = ReportSnapshot.objects.get(pk=queued[0])
    assert (first.project_id, first.is_default, first.status) == (project.pk, True, "pending")
    assert first.reason == "data arrived" and first.requested_by is None
    assert report_snapshots_request_first() == []  # pending: a second tick does nothing
    assert ReportSnapshot.objects.count() == 1
    compute_pending()
    assert report_snapshots_request_first() == []  # done: beat keeps it fresh from now on
    assert ReportSnapshot.objects.get().status == SnapshotStatus.DONE


def test_a_failed_first_report_is_not_asked_for_again_by_beat(project, tmp_path):
    from tests.annotation.test_campaign_selectors import make_dataset

    make_dataset(project, tmp_path, items=2)
    (pk,) = report_snapshots_request_first()
    ReportSnapshot.objects.filter(pk=pk).update(status=SnapshotStatus.FAILED)
    assert report_snapshots_request_first() == []  # a person asks again (no retry loop)


def test_beat_queues_first_reports_within_its_per_tick_allowance(db, settings, tmp_path):
    from annotation.services.projects import project_create
    from tests.annotation.test_campaign_selectors import make_dataset

    settings.FLASKWEB_REPORT_REFRESH_PER_TICK = 2
    for n in range(3):
        make_dataset(project_create(slug=f"p{n}", name=f"P{n}"), tmp_path, name=f"D{n}")
    assert len(report_snapshots_request_first()) == 2
    assert len(report_snapshots_request_first()) == 1  # the next tick takes the third


def test_a_snapshot_whose_worker_died_is_failed_and_can_be_asked_again(scored_project):  # noqa: F811
    params = snapshot_params()
    snapshot, _ = snapshot_request(project=scored_project, params=params)
    ReportSnapshot.objects.filter(pk=snapshot.pk).update(
        status=SnapshotStatus.RUNNING, started_at=timezone.now() - timedelta(hours=2)
    )
    assert report_snapshots_fail_stale(older_than_seconds=3600) == 1
    snapshot.refresh_from_db()
    assert (
        snapshot.status == SnapshotStatus.FAILED and "stopped before it finished" in snapshot.error
    )
    again, created = snapshot_request(project=scored_project, params=params)
    assert created and again.pk != snapshot.pk
    # the late worker finds its snapshot failed and records nothing
    assert report_snapshot_compute(snapshot_id=snapshot.pk) is None


# --- a real worker --------------------------------------------------------------------------


@pytest.mark.slow
def test_a_worker_process_computes_the_snapshot_the_api_asked_for(celery_worker_process):
    from django.contrib.auth import get_user_model

    from analytics.imports.services import scores_import
    from annotation.models import ProjectRole
    from annotation.services.projects import membership_set
    from tests.conftest import wait_for

    rows = ["item,system,rater,rater_kind,skill,score"]
    for i in range(6):
        for system in ("a", "b"):
            rows.append(f"q{i},{system},p1,human,Readability,{1 + (i * 3) % 5}")
            rows.append(f"q{i},{system},p2,human,Readability,{1 + (i * 2 + 1) % 5}")
            rows.append(f"q{i},{system},metric,judge,Readability,{(i % 4) / 4}")
    scores_import(
        project_slug="live",
        files=[("s.csv", "\n".join(rows).encode())],
        judge_scale_raw=True,
        create_project=True,
    )
    from annotation.models import Project

    project = Project.objects.get(slug="live")
    rita = get_user_model().objects.create_user("rita-live", password="x")
    membership_set(project=project, user=rita, role=ProjectRole.RESEARCHER)
    client = token_client(rita)
    assert client.get(api_url(project), {"resamples": 100}).status_code == 202
    answer = wait_for(
        lambda: (r := client.get(api_url(project), {"resamples": 100})).status_code == 200 and r,
        timeout=60,
    )
    body = answer.json()
    assert body.pop("snapshot")["status"] == "done"
    assert body == json.loads(command_json(project, "--resamples", "100"))


@pytest.mark.slow
def test_a_worker_computes_the_first_report_after_an_import_without_a_visit(
    celery_worker_process,
):
    """Scores arrive (an import); beat's task, run by the worker, queues the project's
    default report and the worker computes it: the first visit finds it done. A second
    enqueue while it is pending or done adds nothing."""
    from analytics.imports.services import scores_import
    from annotation.models import Project
    from tests.conftest import wait_for

    rows = ["item,system,rater,rater_kind,skill,score"]
    for i in range(6):
        for system in ("a", "b"):
            rows.append(f"q{i},{system},p1,human,Readability,{1 + (i * 3) % 5}")
            rows.append(f"q{i},{system},metric,judge,Readability,{(i % 4) / 4}")
    scores_import(
        project_slug="arrived",
        files=[("s.csv", "\n".join(rows).encode())],
        judge_scale_raw=True,
        create_project=True,
    )
    project = Project.objects.get(slug="arrived")
    assert not ReportSnapshot.objects.filter(project=project).exists()

    tasks.report_snapshots_refresh_task.delay()  # as beat does every minute
    tasks.report_snapshots_refresh_task.delay()  # a second tick while the first is queued
    done = wait_for(
        lambda: ReportSnapshot.objects.filter(project=project, status="done").first(),
        timeout=60,
    )
    assert done.is_default and done.reason == "data arrived" and done.requested_by is None
    assert ReportSnapshot.objects.filter(project=project).count() == 1
    assert snapshots.snapshot_part(done, "report")["correlation"]["metric"]


def test_old_filtered_and_failed_snapshots_are_deleted_and_the_default_stays(scored_project):  # noqa: F811
    from analytics.report.snapshots import report_snapshots_expire

    default, _ = snapshot_request(project=scored_project, params=snapshot_params(resamples=1000))
    filtered, _ = snapshot_request(
        project=scored_project, params=snapshot_params(skills=["Readability"], resamples=0)
    )
    compute_pending()
    failed = ReportSnapshot.objects.create(
        project=scored_project,
        key="f" * 64,
        params=snapshot_params(resamples=200),
        status=SnapshotStatus.FAILED,
        finished_at=timezone.now(),
    )
    assert report_snapshots_expire(older_than_days=7) == 0  # all recent
    ReportSnapshot.objects.update(finished_at=timezone.now() - timedelta(days=8))
    report_snapshots_expire(older_than_days=7)
    assert list(ReportSnapshot.objects.values_list("pk", flat=True)) == [default.pk]
    assert not ReportSnapshot.objects.filter(pk__in=[filtered.pk, failed.pk]).exists()
    assert not SnapshotPart.objects.filter(snapshot_id=filtered.pk).exists()
