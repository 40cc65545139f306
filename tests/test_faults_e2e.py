"""Faults and restarts of the production recipe, seen from outside (issue: run it for a year).

One stack per module, on a private PostgreSQL cluster and a private Redis (tests/infra.py;
the machine's shared servers are never restarted): gunicorn with gunicorn.conf.py (1 worker
x 4 threads), the documented judging worker (`celery worker -Q judging -P threads
--concurrency 8 --prefetch-multiplier 1`), the project's OpenAI-compatible server as the
judge's provider, and one Django process that makes each test's data (a campaign with its
annotators' tokens, a judge run) through the app's services. The private database starts as a
copy of this session's migrated test database (pg_dump, a second) rather than being migrated
again (six).

- a PostgreSQL restart (`pg_ctl restart -m fast`) under annotators: every answer is 200, 201,
  204 or 503 (never 500), the client that retries a 503 after its Retry-After loses no
  submission, and every acknowledged score is stored;
- a PostgreSQL restart in the middle of a judge run: the run goes on within seconds and
  finishes with one judgment per response (no stall sweep runs here: there is no beat);
- a rolling restart under load (gunicorn HUP while the judging worker is warm-stopped and
  started again): no failed submission, no lost judgment. The warm stop is given 8 s before
  SIGKILL, far less than the run has left, so a worker that waited for its whole batch
  instead of handing the rest on would be killed with its batch.

The same at scale, with figures before and after: bench/fault_bench.py (bench/README.md
"Faults and restarts").
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from devtools.openai_server import FakeOpenAIServer
from tests.conftest import REPO, wait_for
from tests.infra import (
    Gunicorn,
    free_port,
    private_postgres,
    private_redis,
    start_logged,
    stop_process,
)

# django_db: the private database starts as a copy of this session's test database, which
# pytest-django makes only when a collected test asks for one (these never touch it)
pytestmark = [pytest.mark.slow, pytest.mark.postgres_only, pytest.mark.django_db]

API = "/api/v1/annotation"
RETRY_SECONDS = 20.0  # how long the crowd's client retries one request
WORKER_GRACE = 8.0  # seconds a warm-stopped worker gets before SIGKILL
LATENCY = 0.2  # the provider's, unless a test changes it for a while

#: The data of each test, made through the app's services in one long-lived Django process
#: of the stack (a command per line on stdin, its answer as one JSON line on stdout).
CONTROL = r"""
import json, sys, traceback
from pathlib import Path

import django

django.setup()
from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework.authtoken.models import Token

from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.catalogue.services import catalogue_sync_builtins
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import Skill, UploadSource, UploadStatus
from annotation.services.projects import project_create
from judging.models import JudgeKind, Provider
from judging.services import judge_config_create, judge_run_create, judge_run_start

SKILLS = ["Factuality", "Comprehension", "Readability"]
MODELS = ["m1", "m2", "m3", "m4"]


def dataset(slug, items):
    if not Skill.objects.filter(project__isnull=True).exists():
        catalogue_sync_builtins()
    project = project_create(slug=slug, name=slug)
    path = Path(sys.argv[1]) / f"{slug}.jsonl"
    with open(path, "w") as out:
        for i in range(items):
            row = {
                "id": f"i{i}", "instruction": f"Question {i} of {slug}", "skills": SKILLS,
                "domains": ["History"], "difficulty": 2,
                "responses": [{"model": m, "text": f"{m} says {i}"} for m in MODELS],
            }
            out.write(json.dumps(row) + "\n")
    upload = dataset_upload_create(
        project=project, dataset_name="D", source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )
    upload = dataset_import(upload_id=upload.pk)
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    return project, upload.dataset


def campaign(slug, items, annotators):
    project, data = dataset(slug, items)
    users = [get_user_model().objects.create_user(f"{slug}-{n}") for n in range(annotators)]
    made = campaign_create(project=project, dataset=data, name=slug, overlap=2, annotators=users)
    campaign_activate(campaign=made)
    tokens = [Token.objects.create(user=u).key for u in users]
    return {"campaign": made.pk, "tokens": tokens}


def judge_run(slug, items, url, rpm):
    project, data = dataset(slug, items)
    provider, _ = Provider.objects.get_or_create(
        name=f"local-{slug}", defaults={"base_urls": [url], "is_local": True, "approved": True}
    )
    judge = judge_config_create(
        project=project, name="J", kind=JudgeKind.LLM, provider=provider, base_url=url,
        model=f"fake-judge-{slug}", use_reference=False, requests_per_minute=rpm,
    )
    run = judge_run_create(judge=judge, dataset=data)
    assert judge_run_start(run=run)
    return {"run": run.pk, "total": run.total}


OPS = {"campaign": campaign, "judge_run": judge_run}
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    connection.close()  # a new connection for each command: the server may have restarted
    request = json.loads(line)
    try:
        print(json.dumps({"ok": OPS[request.pop("op")](**request)}), flush=True)
    except Exception:
        print(json.dumps({"error": traceback.format_exc()}), flush=True)
"""


class Stack:
    """The production recipe on the private services, started once for the module."""

    def __init__(self, pg, redis, provider: FakeOpenAIServer, work: Path) -> None:
        self.pg, self.redis, self.provider, self.work = pg, redis, provider, work
        (work / "var").mkdir()
        keep = ("DJANGO_", "DATABASE_", "REDIS_", "CELERY_", "FLASKWEB_", "GUNICORN_", "WEB_")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(keep)}
        self.env.update(
            DJANGO_SETTINGS_MODULE="flaskweb.settings",
            DATABASE_URL=pg.url("flaskweb"),
            REDIS_URL=redis.url,
            DJANGO_SECRET_KEY="faults-e2e-only-not-a-secret",
            DJANGO_DEBUG="false",
            DJANGO_SECURE_SSL_REDIRECT="false",
            DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
            DJANGO_LOG_LEVEL="WARNING",
            FLASKWEB_VAR_DIR=str(work / "var"),
            DJANGO_MEDIA_ROOT=str(work / "media"),
            GUNICORN_ACCESS_LOG="",
            WEB_CONCURRENCY="1",
            GUNICORN_THREADS="4",
            # calls on the wire per worker process (512 by default): a run's pace is then the
            # provider's latency, which a test can change while the run goes on
            FLASKWEB_JUDGE_MAX_IN_FLIGHT="4",
        )
        self.web = Gunicorn(
            gunicorn=str(Path(sys.executable).with_name("gunicorn")),
            repo=REPO,
            env=self.env,
            port=free_port(),
            log=work / "gunicorn.log",
        )
        self.worker: subprocess.Popen | None = None
        self.workers_started = 0

    def start(self) -> None:
        """gunicorn, the worker and the control process start side by side."""
        self.control = subprocess.Popen(
            [sys.executable, "-c", CONTROL, str(self.work)],
            cwd=REPO,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(self.work / "control.log", "w"),  # noqa: SIM115 (lives with the stack)
            text=True,
        )
        web = threading.Thread(target=self.web.start)
        web.start()
        self.start_worker()
        assert self.control.stdout is not None
        assert json.loads(self.control.stdout.readline() or "{}").get("ready"), self.logs()
        web.join()
        assert self.web.master is not None, self.logs()

    def start_worker(self) -> None:
        self.workers_started += 1
        command = [sys.executable, "-m", "celery", "-A", "flaskweb", "worker", "-Q", "judging"]
        command += ["-P", "threads", "--concurrency", "8", "--prefetch-multiplier", "1"]
        command += ["-n", f"faults{self.workers_started}@%h", "--without-heartbeat"]
        command += ["--without-mingle", "--without-gossip", "--loglevel", "INFO"]
        log = self.work / "worker.log"
        self.worker = start_logged(command, cwd=REPO, env=self.env, log=log, ready=b" ready.")

    def call(self, op: str, **arguments) -> dict:
        assert self.control.stdin is not None and self.control.stdout is not None
        self.control.stdin.write(json.dumps({"op": op, **arguments}) + "\n")
        self.control.stdin.flush()
        answer = json.loads(self.control.stdout.readline() or '{"error": "control exited"}')
        assert "ok" in answer, answer.get("error")
        return answer["ok"]

    def rows(self, sql: str, *params) -> list[tuple]:
        return self.pg.execute(sql, params, database="flaskweb")

    def run(self, run_id: int) -> tuple[str, int, int, int]:
        """(status, judgments, distinct responses judged, judgments with a recorded outcome)."""
        ((status,),) = self.rows("SELECT status FROM judging_judgerun WHERE id = %s", run_id)
        ((rows, distinct, outcome),) = self.rows(
            "SELECT count(*), count(DISTINCT (response_id, sample_index)),"
            " count(*) FILTER (WHERE status IN ('ok', 'partial', 'parse_failed', 'failed'))"
            " FROM judging_judgment WHERE run_id = %s",
            run_id,
        )
        return status, rows, distinct, outcome

    def judgments(self, run_id: int) -> int:
        try:
            return self.run(run_id)[1]
        except Exception:  # the database is restarting
            return 0

    def logs(self) -> str:
        """The end of each process's log, for a failure's message."""
        parts = []
        for name in ("worker.log", "gunicorn.log", "control.log"):
            path = self.work / name
            text = path.read_text(errors="replace")[-3000:] if path.exists() else ""
            parts.append(f"--- {name}\n{text}")
        return "\n".join(parts)

    def stop(self) -> None:
        """At once: nothing is left to finish."""
        self.control.stdin.close()  # type: ignore[union-attr]
        self.web.kill()
        if self.worker is not None and self.worker.poll() is None:
            os.killpg(self.worker.pid, signal.SIGKILL)  # its own process group
            self.worker.wait()
        if self.control.poll() is None:
            self.control.kill()
            self.control.wait()


@pytest.fixture(scope="module")
def stack(django_db_setup, tmp_path_factory):
    from django.db import connection

    work = tmp_path_factory.mktemp("faults")
    source = connection.settings_dict
    with (
        private_postgres() as pg,
        private_redis() as redis,
        FakeOpenAIServer(style="json", latency=LATENCY) as provider,
    ):
        dump = work / "test-database.sql"
        subprocess.run(
            [
                str(pg.bin / "pg_dump"),
                "-h",
                source["HOST"] or "127.0.0.1",
                "-p",
                str(source["PORT"] or 5432),
                "-U",
                source["USER"],
                "--no-owner",
                "-f",
                str(dump),
                source["NAME"],
            ],
            check=True,
        )
        pg.create_database("flaskweb")
        pg.load("flaskweb", dump)
        running = Stack(pg, redis, provider, work)
        try:
            running.start()
            yield running
        finally:
            running.stop()


class Crowd:
    """Annotators on keep-alive connections, next -> submit over the JSON API, with a client
    that retries what the pages retry: a 503 after its Retry-After, a connection closed
    before any response. Anything else that is not a success fails the submission."""

    def __init__(self, port: int, campaign: int, tokens: list[str]) -> None:
        self.port, self.campaign = port, campaign
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.statuses: Counter = Counter()
        self.accepted: dict[int, int] = {}  # assignment -> scores sent
        self.failures: list[str] = []
        self.threads = [threading.Thread(target=self.work, args=(t,)) for t in tokens]

    @property
    def acked(self) -> int:
        return len(self.accepted)

    def start(self) -> Crowd:
        for thread in self.threads:
            thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(RETRY_SECONDS + 35)

    def call(self, conn, path: str, body: dict | None, headers: dict):
        deadline = time.monotonic() + RETRY_SECONDS
        data = json.dumps(body).encode() if body is not None else b""
        while True:
            try:
                conn.request("POST", path, body=data, headers=headers)
                answer = conn.getresponse()
                payload = answer.read()
            except ConnectionError as exc:  # closed, reset or refused before any answer
                conn.close()
                if time.monotonic() > deadline:
                    return None, repr(exc).encode()
                time.sleep(0.2)
                continue
            except (OSError, http.client.HTTPException) as exc:  # a timeout, a broken answer
                conn.close()
                return None, repr(exc).encode()
            with self.lock:
                self.statuses[answer.status] += 1
            retry_after = answer.getheader("Retry-After")
            if answer.status == 503 and retry_after and time.monotonic() < deadline:
                time.sleep(min(2.0, float(retry_after)))
                continue
            return answer.status, payload

    def work(self, token: str) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        while not self.stopping.is_set():
            status, payload = self.call(
                conn, f"{API}/campaigns/{self.campaign}/next/", None, headers
            )
            if status == 204:
                return
            if status != 200:
                self.failed("next", status, payload)
                continue
            task = json.loads(payload)
            scores = [{"skill_id": s["skill_id"], "score": 3} for s in task["skills"]]
            path = f"{API}/assignments/{task['assignment_id']}/submit/"
            status, payload = self.call(conn, path, {"scores": scores}, headers)
            if status in (200, 201):
                with self.lock:
                    self.accepted[task["assignment_id"]] = len(scores)
            else:
                self.failed("submit", status, payload)
        conn.close()

    def failed(self, kind: str, status, payload: bytes) -> None:
        with self.lock:
            self.failures.append(f"{kind}: {status} {payload[:200]!r}")
        time.sleep(0.5)

    def stored(self, stack: Stack) -> dict[int, int]:
        return dict(
            stack.rows(
                "SELECT assignment_id, count(*) FROM annotation_humanscore"
                " WHERE campaign_id = %s GROUP BY assignment_id",
                self.campaign,
            )
        )


def test_a_database_restart_under_annotators_answers_503_never_500_and_keeps_every_score(stack):
    # given four annotators scoring as fast as the server answers
    made = stack.call("campaign", slug="pg-restart-web", items=200, annotators=4)
    crowd = Crowd(stack.web.port, made["campaign"], made["tokens"]).start()
    try:
        wait_for(lambda: crowd.acked >= 12, timeout=30)
        # when PostgreSQL restarts under them (every connection cut, a moment refused)
        stack.pg.restart(mode="fast")
        after = crowd.acked
        # then they go on: the next requests reconnect
        wait_for(lambda: crowd.acked >= after + 12, timeout=30)
    finally:
        crowd.stop()
    assert set(crowd.statuses) <= {200, 201, 204, 503}, (crowd.statuses, stack.logs())
    assert crowd.failures == []
    stored = crowd.stored(stack)
    assert {a: stored.get(a, 0) for a in crowd.accepted} == crowd.accepted
    assert set(stored) == set(crowd.accepted)


def test_a_judge_run_goes_on_within_seconds_of_a_database_restart(stack):
    # given a run of 40 responses at 10 calls a second on the judging worker
    made = stack.call(
        "judge_run", slug="pg-restart-judge", items=10, url=stack.provider.url, rpm=600
    )
    run = made["run"]
    wait_for(lambda: stack.judgments(run) >= 8, timeout=30, interval=0.02)
    # when PostgreSQL restarts in the middle of it
    stack.pg.restart(mode="fast")
    at_restart = stack.judgments(run)
    # then the run goes on within seconds and finishes, each response judged once
    try:
        wait_for(lambda: stack.judgments(run) > at_restart, timeout=15)
        wait_for(lambda: stack.run(run)[0] == "done", timeout=30)
    except AssertionError:
        pytest.fail(f"run stalled at {stack.judgments(run)} judgments\n{stack.logs()}")
    assert stack.run(run) == ("done", made["total"], made["total"], made["total"])


def test_a_rolling_restart_under_load_fails_no_submission_and_loses_no_judgment(stack):
    # given four annotators at work and a run of 80 responses in flight, slowly: 4 calls on
    # the wire (the worker's limit here) of 1 s each, so 19 s of it are left at the restart
    made = stack.call("campaign", slug="rolling-web", items=400, annotators=4)
    crowd = Crowd(stack.web.port, made["campaign"], made["tokens"]).start()
    stack.provider.configure(latency=1.0)
    judged = stack.call(
        "judge_run", slug="rolling-judge", items=20, url=stack.provider.url, rpm=None
    )
    run = judged["run"]
    try:
        wait_for(lambda: stack.judgments(run) >= 4 and crowd.acked >= 8, timeout=30)
        # when gunicorn replaces its workers (HUP) while the judging worker is warm-stopped
        # (SIGTERM, 8 s before SIGKILL: a worker that finished its whole batch first would be
        # killed with it) and a new one started
        hup = threading.Thread(target=stack.web.hup)
        hup.start()
        old = stack.worker
        assert old is not None
        stop_process(old, grace=WORKER_GRACE)
        assert old.returncode != -9, "the warm-stopped worker did not hand its batch on in 8 s"
        stack.provider.configure(latency=0.05)  # the rest need not take long
        stack.start_worker()
        hup.join()
        after = crowd.acked
        # then the run finishes and the crowd goes on
        try:
            wait_for(lambda: stack.run(run)[0] == "done", timeout=30)
        except AssertionError:
            pytest.fail(f"run stalled at {stack.judgments(run)} judgments\n{stack.logs()}")
        wait_for(lambda: crowd.acked >= after + 8, timeout=30)
    finally:
        crowd.stop()
        stack.provider.configure(latency=LATENCY)
    assert stack.run(run) == ("done", judged["total"], judged["total"], judged["total"])
    assert crowd.failures == [], crowd.statuses
    assert set(crowd.statuses) <= {200, 201, 204, 503}, crowd.statuses
    stored = crowd.stored(stack)
    assert {a: stored.get(a, 0) for a in crowd.accepted} == crowd.accepted
