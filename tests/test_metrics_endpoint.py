"""/metrics (docs/OPERATIONS.md): who may scrape it, what the request counters count, and
what is read at scrape time, also while Redis or the database is gone."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from analytics.models import ExportJob, ExportStatus, ReportSnapshot, SnapshotStatus
from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import DatasetUpload, UploadSource
from flaskweb import metrics_dir
from flaskweb.celery import app as celery_app
from flaskweb.metrics import queue_depths
from judging.llm import activity
from judging.models import Provider
from tests.annotation.test_assignments import make_dataset
from tests.judging.test_activity import a_provider

TOKEN = "metrics-token-0123456789"
#: how Prometheus scrapes a web process: its own address, plain HTTP, the bearer token
SCRAPE = {"HTTP_HOST": "10.11.12.13:8000", "HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} of an exposition text."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found, name: str, **labels) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def token(settings):
    settings.FLASKWEB_METRICS_TOKEN = TOKEN


@pytest.fixture
def production(settings):
    """HTTPS redirect on and a host list the scrape's address is not in."""
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = ["study.example.org", "testserver"]


@pytest.fixture
def scrape(client, token):
    def get() -> dict:
        response = client.get("/metrics", **SCRAPE)
        assert response.status_code == 200, response.content[:300]
        return samples(response.content.decode())

    return get


# --- who may scrape -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_without_a_token_only_a_site_admin_sees_it_and_others_get_404(
    client, annotator_client, admin_client
):
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer guess").status_code == 404
    assert annotator_client.get("/metrics").status_code == 404
    response = admin_client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    assert b"flaskweb_up" in response.content


@pytest.mark.django_db
def test_with_a_token_a_scrape_needs_it_on_any_host_over_plain_http(
    client, admin_client, token, production, settings
):
    refused = client.get("/metrics", secure=True)
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"] == 'Bearer realm="metrics"'
    wrong = {**SCRAPE, "HTTP_AUTHORIZATION": "Bearer " + TOKEN[:-1] + "x"}
    assert client.get("/metrics", **wrong).status_code == 401
    response = client.get("/metrics", **SCRAPE)
    assert response.status_code == 200
    assert not response.cookies
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
    assert client.post("/metrics", secure=True, **bearer).status_code == 405
    # a signed-in site admin reads it through the site, as any page
    assert admin_client.get("/metrics", secure=True).status_code == 200


# --- counted per request ------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_annotators_claims_and_submit_are_counted_under_their_view_names(
    project, annotator, annotator_client, tmp_path, scrape
):
    # given: one task for the annotator
    dataset = make_dataset(project, tmp_path, items=1, models=("m1",))
    campaign = campaign_create(
        project=project, dataset=dataset, name="C", overlap=1, annotators=[annotator]
    )
    assert campaign_activate(campaign=campaign) == 1
    api = "/api/v1/annotation"
    before = scrape()
    # when: a claim, its submission, and a claim that finds nothing left
    task = annotator_client.post(f"{api}/campaigns/{campaign.pk}/next/").json()
    scores = [{"skill_id": s["skill_id"], "score": 4} for s in task["skills"]]
    submitted = annotator_client.post(
        f"{api}/assignments/{task['assignment_id']}/submit/",
        {"scores": scores},
        content_type="application/json",
    )
    assert submitted.status_code == 201, submitted.content
    assert annotator_client.post(f"{api}/campaigns/{campaign.pk}/next/").status_code == 204
    after = scrape()

    # then
    def grew(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    submit = "annotation-api:api-assignment-submit"
    nxt = "annotation-api:api-assignment-next"
    requests = "flaskweb_http_requests_total"
    assert grew(requests, view=submit, method="POST", status="2xx") == 1
    assert grew(requests, view=nxt, method="POST", status="2xx") == 2
    assert grew("flaskweb_http_responses_total", code="204") == 1
    assert grew("flaskweb_http_request_duration_seconds_count", view=submit) == 1
    assert grew("flaskweb_annotation_submissions_total", via="api") == 1
    assert grew("flaskweb_annotation_claims_total", outcome="task") == 1
    assert grew("flaskweb_annotation_claims_total", outcome="no_task") == 1


@pytest.mark.django_db
def test_no_label_holds_a_raw_path(client, project, researcher_client, scrape):
    researcher_client.get(f"/projects/{project.slug}/")
    client.get("/no/such/page/8675309/")
    client.get("/static/no-such-file-8675309.css")
    text = client.get("/metrics", **SCRAPE).content.decode()
    views = {
        sample.labels["view"]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if "view" in sample.labels
    }
    assert "annotation:project-detail" in views
    assert {"unresolved", "static"} <= views
    assert "8675309" not in text
    assert f"/projects/{project.slug}/" not in text


# --- read at scrape time ------------------------------------------------------------------------


@pytest.mark.django_db
def test_queue_depth_appears_per_queue(scrape):
    before = scrape()
    celery_app.send_task("flaskweb.never-run", queue="analytics")  # nobody consumes it
    try:
        after = scrape()
    finally:
        with celery_app.connection_for_write() as conn:
            conn.default_channel.queue_purge("analytics")
    for queue in ("default", "imports", "judging", "analytics"):
        assert ("flaskweb_celery_queue_messages", (("queue", queue),)) in after
    assert value(after, "flaskweb_celery_queue_messages", queue="analytics") == (
        value(before, "flaskweb_celery_queue_messages", queue="analytics") + 1
    )
    assert value(after, "flaskweb_up", component="broker") == 1


def test_the_file_system_brokers_depth_is_its_message_files(settings, tmp_path):
    settings.CELERY_BROKER_URL = "filesystem://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"data_folder_in": str(tmp_path)}
    for name in ("1_a.judging.msg", "2_b.judging.msg", "3_c.imports.msg", "4_d.other.msg"):
        (tmp_path / name).write_text("{}")
    assert queue_depths() == {"analytics": 0, "default": 0, "imports": 1, "judging": 2}


@pytest.mark.django_db
def test_jobs_judge_runs_and_report_lag_are_read_at_scrape_time(project, scrape):
    # given: a failed export, a waiting import and a stale default report
    now = timezone.now()
    ExportJob.objects.create(
        project=project, kind="long", format="csv", status=ExportStatus.FAILED, finished_at=now
    )
    DatasetUpload.objects.create(project=project, dataset_name="D", source=UploadSource.CLI)
    ReportSnapshot.objects.create(
        project=project,
        key="k" * 64,
        is_default=True,
        status=SnapshotStatus.DONE,
        stale=True,
        finished_at=now - timedelta(minutes=30),
    )
    # when
    found = scrape()
    # then
    assert value(found, "flaskweb_jobs_failed_last_hour", kind="export") == 1
    assert value(found, "flaskweb_jobs", kind="dataset_import", status="pending") == 1
    assert value(found, "flaskweb_report_snapshots_stale") == 1
    assert 1790 < value(found, "flaskweb_report_snapshot_stale_seconds") < 1900
    assert ("flaskweb_judge_runs", (("status", "running"),)) in found
    assert value(found, "flaskweb_up", component="database") == 1


@pytest.mark.django_db
def test_judge_calls_per_provider_come_from_the_workers_activity(scrape):
    # an id no other test could have recorded calls for (as tests/judging/test_activity.py
    # does): the counts live as long as the process, under a key prefix that the worker
    # processes its tests start share, some of them on databases of their own whose
    # providers' ids start again at 1
    provider = Provider.objects.create(
        pk=int(a_provider()),
        name="metrics-provider",
        base_urls=["http://127.0.0.1:9/"],
    )
    activity.record_call_start(provider.pk)
    activity.record_call_start(provider.pk)
    activity.record_call_end(provider.pk, outcome="throttled", latency_s=None, cost_usd=None)
    activity.record_retry(provider.pk)
    activity.record_call_end(provider.pk, outcome="ok", latency_s=0.2, cost_usd=0.25)
    activity.record_call_start(provider.pk)
    try:
        found = scrape()
    finally:
        activity.record_call_end(provider.pk, outcome="ok", latency_s=0.1, cost_usd=None)
    labels = {"provider": "metrics-provider"}
    assert value(found, "flaskweb_judge_calls_in_flight", **labels) == 1
    assert value(found, "flaskweb_judge_calls_total", **labels) == 3
    assert value(found, "flaskweb_judge_throttled_total", **labels) == 1
    assert value(found, "flaskweb_judge_retries_total", **labels) == 1
    assert value(found, "flaskweb_judge_cost_usd_total", **labels) == 0.25
    assert value(found, "flaskweb_up", component="judge_activity") == 1


@pytest.mark.django_db
def test_a_scrape_survives_redis_down_and_says_so(scrape, settings):
    closed = f"redis://127.0.0.1:{_closed_port()}/0"
    settings.REDIS_URL = closed
    settings.CELERY_BROKER_URL = closed
    settings.CACHES = {
        "default": {**settings.CACHES["default"], "LOCATION": closed, "KEY_PREFIX": "down"}
    }
    found = scrape()
    assert value(found, "flaskweb_up", component="redis") == 0
    assert value(found, "flaskweb_up", component="broker") == 0
    assert value(found, "flaskweb_up", component="judge_activity") == 0
    assert value(found, "flaskweb_up", component="database") == 1
    assert not any(name == "flaskweb_celery_queue_messages" for name, _ in found)


@pytest.mark.django_db
def test_a_scrape_survives_the_database_down_and_says_so(scrape, monkeypatch):
    monkeypatch.setitem(connection.settings_dict, "PORT", str(_closed_port()))
    found = scrape()
    assert value(found, "flaskweb_up", component="database") == 0
    assert value(found, "flaskweb_up", component="broker") == 1
    assert not any(name == "flaskweb_jobs" for name, _ in found)


# --- several web processes ----------------------------------------------------------------------


def _write(path, pid: int, kind: str, entries: dict[tuple, float]) -> None:
    """Counts as a web process with this pid leaves them (prometheus-client's file format)."""
    out = MmapedDict(str(path / f"{kind}_{pid}.db"))
    for (metric, sample, labels), amount in entries.items():
        names, values = zip(*labels, strict=True)
        key = mmap_key(metric, sample, list(names), list(values), "help")
        out.write_value(key, amount, 0.0)
    out.close()


def _collected(path) -> dict:
    found = {}
    for family in MultiProcessCollector(None, path=str(path)).collect():
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


def test_a_web_process_that_exits_is_folded_into_the_archive_and_nothing_is_lost(tmp_path):
    # given: two processes' requests (a counter and a histogram), one of them gone
    hist = "flaskweb_http_request_duration_seconds"
    view = {"view": "login"}
    for pid, n in ((101, 3.0), (102, 5.0)):
        _write(tmp_path, pid, "counter", {("flaskweb_x", "flaskweb_x_total", (("v", "a"),)): n})
        _write(
            tmp_path,
            pid,
            "histogram",
            {
                (hist, f"{hist}_bucket", (("view", "login"), ("le", "0.1"))): n,
                (hist, f"{hist}_bucket", (("view", "login"), ("le", "+Inf"))): 0.0,
                (hist, f"{hist}_sum", (("view", "login"),)): n / 100,
            },
        )
    before = _collected(tmp_path)
    assert before[("flaskweb_x_total", (("v", "a"),))] == 8
    # when: both exit, one after the other
    metrics_dir.archive_process(101, str(tmp_path))
    metrics_dir.archive_process(102, str(tmp_path))
    # then: the same totals from one file per kind
    assert _collected(tmp_path) == before
    assert sorted(p.name for p in tmp_path.glob("*.db")) == [
        "counter_archive.db",
        "histogram_archive.db",
    ]
    assert before[(f"{hist}_count", tuple(view.items()))] == 8


def test_a_directory_that_cannot_be_made_turns_the_mode_off_instead_of_failing(
    tmp_path, monkeypatch
):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(metrics_dir.ENV, str(blocker / "prometheus"))
    assert metrics_dir.directory_usable() is None
    assert metrics_dir.ENV not in os.environ
    monkeypatch.setenv(metrics_dir.ENV, str(tmp_path / "made"))
    assert metrics_dir.directory_usable() == str(tmp_path / "made")
    assert (tmp_path / "made").is_dir()


def test_a_killed_masters_private_directory_is_removed_by_the_next(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid is free now
    dead = tmp_path / f"{metrics_dir.PRIVATE_PREFIX}{gone.pid}-abc"
    alive = tmp_path / f"{metrics_dir.PRIVATE_PREFIX}{os.getpid()}-def"
    dead.mkdir()
    alive.mkdir()
    assert metrics_dir.remove_orphans() == 1
    assert not dead.exists()
    assert alive.exists()
