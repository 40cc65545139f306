"""Load benchmark of the annotation JSON API: many annotators claiming and submitting at once.

    .venv/bin/python bench/annotate_load.py [--annotators 32] [--duration 30] [--rate 0]
    .venv/bin/python bench/annotate_load.py --compare serve,runserver --repeat 3 [--links]

Not a test: it prints figures and exits 1 only when a request failed or an invariant of the
claim/submit workflow does not hold afterwards. Steps:

1. the PostgreSQL database `flaskweb_loadbench` on 127.0.0.1:5432: dropped, created and
   migrated, then 2,500 items x 4 models = 10,000 responses imported with
   `manage.py import_dataset` from a generated generic JSONL file (reused with --reuse-db
   when it already holds that dataset);
2. a new campaign (K = 3, every response a task) with N annotators and their API tokens;
3. gunicorn on 127.0.0.1 (gthread workers; production settings with DEBUG off and no HTTPS
   redirect) and N annotator threads on keep-alive `http.client` connections, each looping
   `POST .../next/` -> `POST .../submit/` (3 skills), for --duration seconds or until
   --max-submissions; --rate paces the whole crowd to that many submissions/s (0 = as fast
   as the server answers: a closed loop without think time);
4. figures (submissions/s, p50/p95/p99 of next and of submit, errors) and the invariants
   checked in the database, including that no claim answered "no task" while that annotator
   still had an open task (checked at each such answer); --profile adds the queries per
   request, the in-process cost of one next/submit, and EXPLAIN ANALYZE of the claim query.

--db sqlite serves the embedded default instead (SQLite in bench/out/annotate_load/sqlite/,
no DATABASE_URL); --server serve runs `manage.py serve` (docs/SERVING.md) and --server
runserver Django's development server with DEBUG on, as `make demo` does; --compare runs
several servers in turn, --repeat times, and prints their medians side by side. --links makes
the annotators through a study link (GET /study/<token>/?PROLIFIC_PID=...) as a recruiting
platform sends them, each from its own client address (X-Forwarded-For, the bench standing
in for the reverse proxy); --html then has them score on the annotate pages with their study
sessions, as a participant's browser does, instead of the JSON API.

--mode pairwise runs the crowd on a pairwise campaign instead (every pair of the 4 models on
every item, K the same, the pair task compared on its 3 skills and overall, choices A, B, tie,
both bad with a strength); --mode both runs a pointwise and a pairwise campaign in turn in
each round, on the same server, and prints their medians side by side.

Standard library plus the project's own virtualenv (Django, psycopg, gunicorn) only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import resource
import runpy
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "annotate_load"
PYTHON = str(ROOT / ".venv" / "bin" / "python")
GUNICORN = str(ROOT / ".venv" / "bin" / "gunicorn")
SQLITE_VAR = OUT / "sqlite"  # FLASKWEB_VAR_DIR of --db sqlite: the database, cache and broker
SQLITE_FILE = SQLITE_VAR / "flaskweb.sqlite3"
PG_DB = "flaskweb_loadbench"
SERVERS = ("gunicorn", "serve", "runserver")
DATABASE_URL = f"postgres://root@127.0.0.1:5432/{PG_DB}"
PROJECT, DATASET = "loadbench", "load"
API = "/api/v1/annotation"

sys.path.insert(0, str(ROOT))
from annotation.catalogue_text import DOMAINS, SKILLS  # noqa: E402 (pure data, no Django)

SKILL_NAMES = [s.name for s in SKILLS]
DOMAIN_NAMES = [name for _key, name, _subdomains in DOMAINS]
WORDS = [
    "the",
    "a",
    "model",
    "answer",
    "question",
    "because",
    "therefore",
    "however",
    "result",
    "value",
    "data",
    "system",
    "user",
    "function",
    "time",
    "energy",
    "cell",
    "protein",
    "market",
    "price",
    "history",
    "war",
    "culture",
    "language",
    "grammar",
    "sentence",
    "number",
    "prime",
    "equation",
    "integral",
    "matrix",
    "vector",
    "code",
    "loop",
    "array",
    "memory",
    "health",
    "diet",
    "sleep",
    "heart",
    "patient",
    "river",
    "climate",
    "policy",
]


# --db of this run: "postgres" or "sqlite" (set once by main)
DB = {"kind": "postgres"}


def sqlite() -> bool:
    return DB["kind"] == "sqlite"


def log(message: str) -> None:
    print(message, flush=True)


# --- environment and database ---------------------------------------------------------------


def base_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=DATABASE_URL,
        DJANGO_SECRET_KEY="loadbench-only-not-a-secret",
        FLASKWEB_VAR_DIR=str(OUT / "var"),  # file cache and media stay out of the repo's var/
        DJANGO_LOG_LEVEL="WARNING",
        PYTHONDONTWRITEBYTECODE="1",
    )
    if sqlite():  # the embedded default: no DATABASE_URL, everything in its var dir
        del env["DATABASE_URL"]
        env["FLASKWEB_VAR_DIR"] = str(SQLITE_VAR)
    env.pop("REDIS_URL", None)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


def setup_env() -> dict[str, str]:
    """Migrate, import and the checks: DEBUG only to skip the production HTTPS redirect."""
    return {**base_env(), "DJANGO_DEBUG": "true"}


def server_env(settings_file: str = "") -> dict[str, str]:
    """gunicorn runs the production settings (DEBUG off: no per-query recording) without
    the HTTPS redirect, since it serves plain HTTP on 127.0.0.1. `settings_file` (a .py
    that does `from flaskweb.settings import *` and changes a few) tries a tuning."""
    env = {
        **base_env(),
        "DJANGO_DEBUG": "false",
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        # the crowd sends X-Forwarded-For as a reverse proxy would (--links)
        "FLASKWEB_TRUSTED_PROXIES": "127.0.0.1",
    }
    if settings_file:
        path = Path(settings_file).resolve()
        env["DJANGO_SETTINGS_MODULE"] = path.stem
        env["PYTHONPATH"] = os.pathsep.join([str(path.parent), str(ROOT)])
    return env


def pg(sql: str, db: str = "postgres"):
    import psycopg

    with psycopg.connect(f"postgresql://root@127.0.0.1:5432/{db}", autocommit=True) as conn:
        cursor = conn.execute(sql)
        return cursor.fetchall() if cursor.description else None


def database_ready(items: int, models: int) -> bool:
    if sqlite():
        return sqlite_ready(items * models)
    if not pg(f"SELECT 1 FROM pg_database WHERE datname = '{PG_DB}'"):
        return False
    try:
        rows = pg(
            "SELECT count(*) FROM annotation_response r JOIN annotation_item i "
            "ON i.id = r.item_id JOIN annotation_dataset d ON d.id = i.dataset_id "
            f"WHERE d.name = '{DATASET}'",
            PG_DB,
        )
    except Exception:
        return False
    return rows[0][0] == items * models


def sqlite_ready(responses: int) -> bool:
    import sqlite3

    if not SQLITE_FILE.exists():
        return False
    try:
        with sqlite3.connect(SQLITE_FILE) as db:
            rows = db.execute(
                "SELECT count(*) FROM annotation_response r JOIN annotation_item i "
                "ON i.id = r.item_id JOIN annotation_dataset d ON d.id = i.dataset_id "
                "WHERE d.name = ?",
                [DATASET],
            ).fetchone()
    except sqlite3.Error:
        return False
    return rows[0] == responses


def write_dataset(path: Path, items: int, models: int, seed: int) -> None:
    rng = random.Random(seed)

    def text(low: int, high: int) -> str:
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < rng.randint(low, high):
            words.append(rng.choice(WORDS))
        return " ".join(words).capitalize() + "."

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        for i in range(items):
            row = {
                "id": f"load-{i:05d}",
                "instruction": text(80, 400),
                "reference": text(60, 300),
                "skills": rng.sample(SKILL_NAMES, 3),
                "domains": rng.sample(DOMAIN_NAMES, 1),
                "difficulty": rng.randint(1, 5),
                "responses": [
                    {"model": f"model-{m}", "text": text(150, 450)} for m in range(models)
                ],
            }
            out.write(json.dumps(row) + "\n")


def build_database(items: int, models: int, seed: int) -> None:
    t0 = time.perf_counter()
    if sqlite():
        for path in SQLITE_VAR.glob("flaskweb.sqlite3*"):  # the database, its -wal and -shm
            path.unlink()
    else:
        pg(f"DROP DATABASE IF EXISTS {PG_DB} WITH (FORCE)")
        pg(f"CREATE DATABASE {PG_DB}")
    run([PYTHON, "manage.py", "migrate", "--noinput", "-v", "0"])
    path = OUT / f"dataset-{items}x{models}-seed{seed}.jsonl"
    if not path.exists():
        write_dataset(path, items, models, seed)
    run(
        [
            PYTHON,
            "manage.py",
            "import_dataset",
            str(path),
            "--project",
            PROJECT,
            "--create-project",
            "--dataset",
            DATASET,
            "--quiet-problems",
        ]
    )
    log(
        f"database {db_name()}: migrated and {items * models:,} responses imported "
        f"in {time.perf_counter() - t0:.1f} s"
    )


def db_name() -> str:
    return str(SQLITE_FILE.relative_to(ROOT)) if sqlite() else PG_DB


def run(command: list[str]) -> None:
    result = subprocess.run(command, cwd=ROOT, env=setup_env(), capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command[:3])} failed:\n{result.stdout}\n{result.stderr}")


def django_setup() -> None:
    os.environ.update(setup_env())
    os.environ["DJANGO_SETTINGS_MODULE"] = "flaskweb.settings"
    import django

    django.setup()


def campaign_setup(annotators: int, overlap: int, links: bool = False, mode: str = "pointwise"):
    """A fresh campaign on the imported dataset, its pool of annotators and their tokens.
    Users and tokens are kept between runs; the campaign is new every run. With `links` the
    pool starts empty and the campaign gets a Prolific study link instead (its token is
    returned in place of the tokens): the crowd comes in through it (enter_through_link)."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from rest_framework.authtoken.models import Token

    from annotation.campaigns.services import campaign_activate, campaign_create
    from annotation.models import Campaign, CampaignStatus, Dataset

    dataset = Dataset.objects.select_related("project").get(project__slug=PROJECT, name=DATASET)
    Campaign.objects.filter(project=dataset.project, status=CampaignStatus.ACTIVE).update(
        status=CampaignStatus.FINISHED
    )
    users = []
    for i in range(0 if links else annotators):
        user, created = get_user_model().objects.get_or_create(username=f"load-{i:03d}")
        if created:
            user.set_unusable_password()
            user.save()
        users.append(user)
    tokens = [Token.objects.get_or_create(user=u)[0].key for u in users]
    pairwise = {}
    if mode == "pairwise":
        pairwise = {
            "mode": "pairwise",
            "pair_choices": ["a", "b", "tie", "both_bad"],
            "pair_strength": True,
        }
    campaign = campaign_create(
        project=dataset.project,
        dataset=dataset,
        name=f"load {mode} {time.strftime('%Y-%m-%d %H:%M:%S')} {os.getpid()}",
        overlap=overlap,
        annotators=users,
        **pairwise,
    )
    tasks = campaign_activate(campaign=campaign)
    with connection.cursor() as cursor:
        # the steady state autovacuum keeps: planner statistics, and no dead rows of the
        # earlier runs (a server with autovacuum off would otherwise make each run of a
        # series slower than the one before)
        cursor.execute("VACUUM (ANALYZE)" if connection.vendor == "postgresql" else "ANALYZE")
    log(f"campaign {campaign.pk} ({mode}): {tasks:,} tasks, K = {overlap}, {annotators} annotators")
    if links:
        from annotation.models import Platform
        from annotation.study.services import study_link_create

        link = study_link_create(campaign=campaign, platform=Platform.PROLIFIC)
        return campaign, [link.token], []
    return campaign, tokens, [u.pk for u in users]


def enter_through_link(port: int, campaign, link_token: str, annotators: int, tally):
    """N workers open the study link as Prolific sends them, each from its own address
    (X-Forwarded-For from the trusted proxy, as Caddy or nginx would write it): the link
    makes each a password-less account in the campaign's pool and signs it in (a session
    cookie); the study page then sends that session on to the campaign's annotate page.

    A study session reaches only its study's pages (annotation/study/middleware.py: the
    JSON API answers it 403), so for the API loop each account made by the link is given an
    API token here, as a site admin could. Returns the tokens and the users' ids."""
    from rest_framework.authtoken.models import Token

    from annotation.models import Participant

    sessions: dict[str, tuple[str, str]] = {}  # worker id -> (session cookie, address)
    for i in range(annotators):
        address = f"10.77.{i // 250}.{i % 250 + 1}"
        query = (
            f"PROLIFIC_PID=load{campaign.pk}w{i:03d}&STUDY_ID=loadstudy{campaign.pk}"
            f"&SESSION_ID=s{i:03d}"
        )
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        t0 = time.perf_counter()
        conn.request("GET", f"/study/{link_token}/?{query}", headers={"X-Forwarded-For": address})
        answer = conn.getresponse()
        answer.read()
        tally.record("enter", time.perf_counter() - t0, answer.status)
        cookies = [v.split(";", 1)[0] for k, v in answer.getheaders() if k == "Set-Cookie"]
        session = next((c for c in cookies if c.startswith("sessionid=")), None)
        if answer.status != 302 or session is None:
            sys.exit(f"the study link answered {answer.status} without a session: {cookies}")
        conn.request("GET", "/study/", headers={"Cookie": session, "X-Forwarded-For": address})
        resume = conn.getresponse()
        resume.read()
        annotate = f"/campaigns/{campaign.pk}/annotate/"
        if resume.status != 302 or not resume.getheader("Location", "").endswith(annotate):
            sys.exit(f"the study session did not lead to {annotate}: {resume.status}")
        conn.close()
        sessions[f"load{campaign.pk}w{i:03d}"] = (session, address)
    made = dict(Participant.objects.filter(campaign=campaign).values_list("worker_id", "user"))
    if sorted(made) != sorted(sessions):
        sys.exit(f"{len(made)} participants made by the link, not {annotators}")
    users = [made[worker] for worker in sessions]
    tokens = [Token.objects.get_or_create(user_id=u)[0].key for u in users]
    log(f"{annotators} annotators entered through the study link (accounts, sessions, tokens)")
    return tokens, users, list(sessions.values())


# --- server ---------------------------------------------------------------------------------


def recipe_env(args) -> dict[str, str]:
    """The web recipe's environment (gunicorn.conf.py): what the run overrides of it."""
    env = {"GUNICORN_BIND": f"127.0.0.1:{args.port}"}
    if args.workers is not None:
        env["WEB_CONCURRENCY"] = str(args.workers)
    if args.threads is not None:
        env["GUNICORN_THREADS"] = str(args.threads)
    return env


def recipe_shape(args) -> dict:
    """Workers, threads and worker class the run serves with: gunicorn.conf.py as the
    README documents it, read with this run's overrides (--worker-class aside)."""
    saved = dict(os.environ)
    os.environ.update(recipe_env(args))
    try:
        conf = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    workers, threads = conf["workers"], conf["threads"]
    if args.server == "serve" and sqlite() and args.workers is None:
        # serve's own shape on SQLite (flaskweb/management/commands/serve.py)
        workers, threads = 1, args.threads or 8
    return {
        "workers": workers,
        "threads": threads,
        "worker_class": args.worker_class or conf["worker_class"],
    }


def server_command(args) -> tuple[list[str], dict[str, str]]:
    """The command and environment of --server:
    - gunicorn as the README runs it: `gunicorn flaskweb.wsgi:application` in the checkout,
      so it reads gunicorn.conf.py (the one web recipe), plus this run's overrides;
    - serve: `manage.py serve` (docs/SERVING.md: migrate, collectstatic, the worker process
      beside gunicorn with the same recipe), --workers and --threads passed on;
    - runserver: Django's development server with DEBUG on, as `make demo` serves."""
    port = args.port
    if args.server == "runserver":
        command = [PYTHON, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
        env = {**server_env(args.settings_file), "DJANGO_DEBUG": "true"}
        return command, env
    if args.server == "serve":
        command = [PYTHON, "manage.py", "serve", "--port", str(port)]
        if args.workers is not None:
            command += ["--workers", str(args.workers)]
        if args.threads is not None:
            command += ["--threads", str(args.threads)]
        env = {
            **server_env(args.settings_file),
            "DJANGO_STATIC_ROOT": str(OUT / "static"),
            "DJANGO_SUPERUSER_USERNAME": "loadbench-admin",
            "DJANGO_SUPERUSER_PASSWORD": "loadbench-only-not-a-secret",
            "DJANGO_SUPERUSER_EMAIL": "loadbench-admin@example.org",
        }
        return command, env
    command = [GUNICORN, "flaskweb.wsgi:application", "--log-level", "warning"]
    if args.worker_class:
        command += ["--worker-class", args.worker_class]
    env = {**server_env(args.settings_file), **recipe_env(args)}
    if args.html:
        # plain HTTP on 127.0.0.1: the session and CSRF cookies may not be secure-only, or the
        # crowd (a browser would too) never sends them back and every page answers 403
        env["FLASKWEB_LOCAL_TRIAL"] = "true"
        # the pages name their static files by the manifest, as `serve` collects them
        env["DJANGO_STATIC_ROOT"] = str(OUT / "static")
        subprocess.run(
            [PYTHON, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
            cwd=ROOT,
            env=env,
            check=True,
        )
    return command, env


def start_server(args) -> subprocess.Popen:
    port = args.port
    with socket.socket() as probe:  # a server left over from an interrupted run would answer
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            sys.exit(f"port {port} is taken (a server from an earlier run?): stop it first")
    command, env = server_command(args)
    OUT.mkdir(parents=True, exist_ok=True)
    log_path = OUT / f"{args.server}.log"
    log_file = open(log_path, "w")  # noqa: SIM115 (lives as long as the server)
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120  # serve migrates and collects static files first
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"{args.server} exited at start; see {log_path}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", f"{API}/campaigns/")
            if conn.getresponse().status == 401:  # up, and asking for a token
                conn.close()
                return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    sys.exit(f"{args.server} did not answer within 120 s")


def stop_server(server: subprocess.Popen) -> None:
    server.send_signal(signal.SIGTERM)  # serve stops its gunicorn and worker with it
    try:
        server.wait(timeout=45)
    except subprocess.TimeoutExpired:
        server.kill()


# --- the crowd ------------------------------------------------------------------------------


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    accepted: dict[int, int] = field(default_factory=dict)  # assignment id -> skills scored
    no_task: Counter = field(default_factory=Counter)
    # per "no_task_available" answer: tasks still open to that annotator right after it
    open_at_no_task: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, seconds: float, status: int) -> None:
        with self.lock:
            self.latencies[kind].append(seconds)
            self.statuses[(kind, status)] += 1


class Annotator(threading.Thread):
    def __init__(
        self, *, port, token, annotator_id, campaign_id, tally, stop, budget, pace, seed, chained
    ):
        super().__init__(daemon=True)
        self.annotator_id = annotator_id
        self.chained = chained
        self.submit_kind = "submit+next" if chained else "submit"
        self.port, self.campaign_id = port, campaign_id
        self.tally, self.stop, self.budget, self.pace = tally, stop, budget, pace
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.rng = random.Random(seed)
        self.conn: http.client.HTTPConnection | None = None

    def call(self, kind: str, path: str, body: dict | None):
        data = json.dumps(body).encode() if body is not None else b""
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            t0 = time.perf_counter()
            try:
                self.conn.request("POST", path, body=data, headers=self.headers)
                response = self.conn.getresponse()
                payload = response.read()
            except (OSError, http.client.HTTPException) as exc:
                self.conn.close()
                self.conn = None
                if attempt == 2:  # a dropped keep-alive connection is retried once
                    with self.tally.lock:
                        self.tally.errors.append(f"{kind}: {exc!r}")
                    return None, None, None
                continue
            self.tally.record(kind, time.perf_counter() - t0, response.status)
            return response.status, response, payload
        return None, None, None

    def run(self) -> None:
        next_path = f"{API}/campaigns/{self.campaign_id}/next/"
        due = time.perf_counter()
        task = None  # with --chained, the next task as the last submit returned it
        while not self.stop.is_set() and self.budget.take():
            if self.pace:
                due += self.pace * self.rng.uniform(0.5, 1.5)  # think time, jittered
                time.sleep(max(0.0, due - time.perf_counter()))
            if task is None:
                status, response, payload = self.call("next", next_path, None)
                if status == 204:
                    self.no_task(response.getheader("No-Task-Reason"))
                    break
                if status != 200:
                    self.error("next", status, payload)
                    self.budget.give_back()
                    continue
                task = json.loads(payload)
            if "pair" in task:  # a pairwise campaign's task: one choice per question
                scores = [self.preference(q, task["pair"]) for q in task["pair"]["questions"]]
                body = {"preferences": scores, "active_ms": self.rng.randint(5_000, 120_000)}
            else:
                scores = [
                    {
                        "skill_id": s["skill_id"],
                        "score": self.rng.choice([1, 2, 3, 4, 5, None]),
                        "time_ms": self.rng.randint(2_000, 60_000),
                    }
                    for s in task["skills"]
                ]
                body = {"scores": scores, "active_ms": self.rng.randint(5_000, 120_000)}
            if self.chained:
                body["next"] = True
            path = f"{API}/assignments/{task['assignment_id']}/submit/"
            status, _, payload = self.call(self.submit_kind, path, body)
            # 200 is the idempotent answer to a repeat (a retried request whose first answer
            # was lost): recorded once either way, so both count
            if status in (200, 201):
                with self.tally.lock:
                    self.tally.accepted[task["assignment_id"]] = len(scores)
                answer = json.loads(payload) if self.chained else {}
                task = answer.get("next")
                if self.chained and task is None:
                    self.no_task(answer.get("next_reason"), give_back=False)
                    break
            else:
                self.error("submit", status, payload)
                self.budget.give_back()
                task = None
        if self.conn is not None:
            self.conn.close()

    def preference(self, question: dict, pair: dict) -> dict:
        choice = self.rng.choice(pair["choices"])
        directed = choice in ("left", "right") and pair["strength"]
        return {
            "skill_id": question["skill_id"],
            "choice": choice,
            "strength": self.rng.choice([1, 2]) if directed else None,
            "time_ms": self.rng.randint(2_000, 60_000),
        }

    def no_task(self, reason, *, give_back: bool = True) -> None:
        open_now = None
        if reason == "no_task_available":
            open_now = tasks_open_to(self.campaign_id, self.annotator_id)
        with self.tally.lock:
            self.tally.no_task[reason] += 1
            if open_now is not None:
                self.tally.open_at_no_task.append(open_now)
        if give_back:
            self.budget.give_back()

    def error(self, kind: str, status, payload) -> None:
        if status is None:
            return  # already recorded as a connection error
        with self.tally.lock:
            self.tally.errors.append(f"{kind}: HTTP {status} {payload[:200]!r}")


SUBMIT_FORM = re.compile(r'hx-post="/assignments/(\d+)/submit/"')
SCORE_FIELD = re.compile(r'name="score-(\d+)"')
CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


class PageAnnotator(Annotator):
    """--html: a participant in the browser, on its study session. It opens the campaign's
    annotate page (the first card, kind "next"), then posts each card's form as htmx does
    (form-encoded, with the form's CSRF token and the HX-Request header), which answers
    with the next card (kind "submit+next")."""

    def __init__(self, *, session, **kwargs):
        super().__init__(token="", chained=True, **kwargs)
        cookie, address = session
        name, value = cookie.split("=", 1)
        self.cookies = {name: value}
        self.headers = {"X-Forwarded-For": address}

    def page(self, kind: str, method: str, path: str, fields: dict | None):
        headers = {**self.headers, "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        body = b""
        if fields is not None:
            body = urllib.parse.urlencode(fields).encode()
            headers |= {
                "Content-Type": "application/x-www-form-urlencoded",
                "HX-Request": "true",
            }
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            t0 = time.perf_counter()
            try:
                self.conn.request(method, path, body=body, headers=headers)
                response = self.conn.getresponse()
                payload = response.read()
            except (OSError, http.client.HTTPException) as exc:
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    with self.tally.lock:
                        self.tally.errors.append(f"{kind}: {exc!r}")
                    return None, ""
                continue
            self.tally.record(kind, time.perf_counter() - t0, response.status)
            for header, value in response.getheaders():
                if header == "Set-Cookie":
                    name, _, rest = value.partition("=")
                    self.cookies[name] = rest.split(";", 1)[0]
            return response.status, payload.decode()
        return None, ""

    def run(self) -> None:
        page_path = f"/campaigns/{self.campaign_id}/annotate/"
        due = time.perf_counter()
        card = None
        while not self.stop.is_set() and self.budget.take():
            if self.pace:
                due += self.pace * self.rng.uniform(0.5, 1.5)
                time.sleep(max(0.0, due - time.perf_counter()))
            if card is None:
                status, card = self.page("next", "GET", page_path, None)
                if status != 200:
                    self.error("next", status, card.encode())
                    self.budget.give_back()
                    card = None
                    continue
            form = SUBMIT_FORM.search(card)
            if form is None:  # the "nothing to do" card
                self.no_task("no card", give_back=True)
                break
            assignment = int(form[1])
            skills = sorted(set(SCORE_FIELD.findall(card)), key=int)
            fields = {
                "csrfmiddlewaretoken": CSRF_FIELD.search(card)[1],
                "active_ms": str(self.rng.randint(5_000, 120_000)),
            }
            for skill in skills:
                fields[f"score-{skill}"] = self.rng.choice(["1", "2", "3", "4", "5", "na"])
                fields[f"time-{skill}"] = str(self.rng.randint(2_000, 60_000))
            path = f"/assignments/{assignment}/submit/"
            status, answer = self.page("submit+next", "POST", path, fields)
            if status == 200 and "Saved." in answer:
                with self.tally.lock:
                    self.tally.accepted[assignment] = len(skills)
                card = answer
            else:
                self.error("submit", status, answer.encode())
                self.budget.give_back()
                card = None
        if self.conn is not None:
            self.conn.close()


_OPEN_TO = """
SELECT count(*) FROM annotation_task t
WHERE t.campaign_id = %s AND t.kind = 'normal' AND t.assigned < t.overlap
  AND NOT EXISTS (SELECT 1 FROM annotation_assignment a
                  WHERE a.task_id = t.id AND a.annotator_id = %s AND a.kind = 'normal')
"""


def tasks_open_to(campaign_id: int, annotator_id: int) -> int:
    """Normal tasks with a free slot that the annotator never had, read just after a claim
    answered "no task". Nothing in this benchmark frees a slot (no skips, 15-minute leases),
    so a task open now was open at that answer: any is a claim that wrongly said none."""
    if sqlite():
        import sqlite3

        with sqlite3.connect(SQLITE_FILE, timeout=30) as db:
            return db.execute(_OPEN_TO.replace("%s", "?"), [campaign_id, annotator_id]).fetchone()[
                0
            ]
    import psycopg

    with psycopg.connect(DATABASE_URL.replace("postgres://", "postgresql://")) as conn:
        return conn.execute(_OPEN_TO, [campaign_id, annotator_id]).fetchone()[0]


class Budget:
    """At most `limit` submissions in flight or done across the crowd (0 = no limit)."""

    def __init__(self, limit: int) -> None:
        self.left = limit if limit > 0 else None
        self.lock = threading.Lock()

    def take(self) -> bool:
        if self.left is None:
            return True
        with self.lock:
            if self.left <= 0:
                return False
            self.left -= 1
            return True

    def give_back(self) -> None:
        if self.left is not None:
            with self.lock:
                self.left += 1


def cpu_snapshot(server_pid: int) -> dict:
    """CPU seconds used so far by the server's processes (gunicorn's master and workers;
    serve's gunicorn and its worker process) and by each PostgreSQL process, each with the
    children it has reaped; by this process (the simulated crowd), and by the whole machine
    (busy, and total incl. idle)."""
    tick = os.sysconf("SC_CLK_TCK")
    used: dict = {"gunicorn": {}, "postgres": {}}
    procs = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue  # exited meanwhile
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        # its own time and that of its children it has reaped: a gunicorn worker replaced
        # mid-run (max_requests) moves its time to the master instead of dropping out
        procs[int(pid)] = (comm, int(fields[1]), sum(map(int, fields[11:15])) / tick)
    server = {server_pid}
    for _ in range(4):  # serve -> gunicorn -> its workers
        server |= {pid for pid, (_c, ppid, _t) in procs.items() if ppid in server}
    for pid, (comm, _ppid, cpu) in procs.items():
        if pid in server:
            used["gunicorn"][str(pid)] = cpu
        elif comm == "postgres":
            used["postgres"][str(pid)] = cpu
    me = resource.getrusage(resource.RUSAGE_SELF)
    used["crowd"] = me.ru_utime + me.ru_stime
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    used["machine_total"] = sum(values[:8]) / tick
    used["machine_busy"] = (sum(values[:8]) - values[3] - values[4]) / tick  # minus idle, iowait
    return used


def cpu_used(before: dict, after: dict) -> dict[str, float]:
    """Per group, the CPU time spent between the snapshots by the processes alive at the
    second one (a process that exited in between is counted in its parent's reaped time, when
    the parent is in the group, and is not counted negative)."""
    result = {}
    for key, value in after.items():
        if isinstance(value, dict):
            result[key] = sum(cpu - before[key].get(pid, 0.0) for pid, cpu in value.items())
        else:
            result[key] = value - before[key]
    return result


def run_crowd(
    args,
    port: int,
    campaign_id: int,
    tokens: list[str],
    annotator_ids: list[int],
    tally: Tally,
    sessions: list[tuple[str, str]],
) -> tuple[Tally, float]:
    stop = threading.Event()
    budget = Budget(args.max_submissions)
    pace = args.annotators / args.rate if args.rate > 0 else 0.0
    crowd = [
        Annotator(
            port=port,
            token=token,
            annotator_id=annotator_id,
            campaign_id=campaign_id,
            tally=tally,
            stop=stop,
            budget=budget,
            pace=pace,
            seed=args.seed + i,
            chained=args.chained,
        )
        if not args.html
        else PageAnnotator(
            port=port,
            session=sessions[i],
            annotator_id=annotator_id,
            campaign_id=campaign_id,
            tally=tally,
            stop=stop,
            budget=budget,
            pace=pace,
            seed=args.seed + i,
        )
        for i, (token, annotator_id) in enumerate(zip(tokens, annotator_ids, strict=True))
    ]
    t0 = time.perf_counter()
    for annotator in crowd:
        annotator.start()
    deadline = t0 + args.duration
    while time.perf_counter() < deadline and any(a.is_alive() for a in crowd):
        time.sleep(0.05)
    stop.set()
    for annotator in crowd:
        annotator.join(60)
    return tally, time.perf_counter() - t0


def warm_up(port: int, token: str) -> None:
    """One request per worker thread-ish, so imports and connections are not measured."""
    headers = {"Authorization": f"Token {token}"}
    for _ in range(20):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", f"{API}/campaigns/", headers=headers)
        conn.getresponse().read()
        conn.close()


# --- figures and checks ---------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def report(args, tally: Tally, elapsed: float) -> dict:
    submitted = len(tally.accepted)
    figures = {
        "server": args.server,
        "db": DB["kind"],
        "links": args.links,
        "annotators": args.annotators,
        **recipe_shape(args),
        "rate_target": args.rate,
        "settings_file": args.settings_file,
        "chained": args.chained,
        "elapsed_s": round(elapsed, 2),
        "submissions": submitted,
        "submissions_per_s": round(submitted / elapsed, 1),
        "errors": len(tally.errors),
        "statuses": {f"{k} {s}": n for (k, s), n in sorted(tally.statuses.items())},
        "no_task": dict(tally.no_task),
        "no_task_with_tasks_open": sum(1 for n in tally.open_at_no_task if n),
    }
    log("")
    mode = f"paced to {args.rate:g} submissions/s" if args.rate else "closed loop"
    if args.chained:
        mode += ", chained (submit returns the next task)"
    log(f"{args.annotators} annotators, {server_label(args)} on {DB['kind']}, {mode}")
    log(f"  elapsed            {elapsed:8.1f} s")
    log(f"  submissions        {submitted:8d}   ({submitted / elapsed:.1f}/s)")
    log(
        f"  requests           {sum(tally.statuses.values()):8d}   "
        f"({sum(tally.statuses.values()) / elapsed:.1f}/s)"
    )
    log("  latency (ms)          n      p50      p95      p99      max")
    kinds = ["next", "submit+next" if args.chained else "submit"]
    for kind in kinds + (["enter"] if args.links else []):
        values = tally.latencies.get(kind, [])
        row = [percentile(values, p) * 1000 for p in (50, 95, 99, 100)]
        figures[f"{kind}_ms"] = {
            "n": len(values),
            "p50": round(row[0], 1),
            "p95": round(row[1], 1),
            "p99": round(row[2], 1),
            "max": round(row[3], 1),
        }
        log(f"  {kind:<10} {len(values):10d} " + " ".join(f"{v:8.1f}" for v in row))
    log(f"  statuses           {figures['statuses']}")
    if tally.no_task:
        log(f"  204 reasons        {dict(tally.no_task)}")
    log(f"  errors             {len(tally.errors)}")
    for line in tally.errors[:10]:
        log(f"    {line}")
    return figures


def server_label(args) -> str:
    if args.server == "runserver":
        return "Django's development server (DEBUG on, as make demo)"
    shape = recipe_shape(args)
    web = f"gunicorn {shape['workers']} workers x {shape['threads']} threads"
    web += f" ({shape['worker_class']})"
    return f"manage.py serve: {web} + worker" if args.server == "serve" else web


def report_cpu(used: dict[str, float], submissions: int) -> dict:
    cores = os.cpu_count() or 1
    busy = used["machine_busy"] / used["machine_total"] if used["machine_total"] else 0.0
    per = 1000 / max(1, submissions)
    # on SQLite the database works inside the server's processes; PostgreSQL's CPU is then
    # someone else's work on the machine
    pg_part = "" if sqlite() else f"postgres {used['postgres']:.1f} s, "
    pg_per = "" if sqlite() else f"postgres {used['postgres'] * per:.1f} ms, "
    log(
        f"  CPU ({cores} cores, {busy:.0%} busy)   server {used['gunicorn']:.1f} s, "
        f"{pg_part}crowd {used['crowd']:.1f} s"
    )
    if submissions:
        log(
            f"  CPU per submission  server {used['gunicorn'] * per:.1f} ms, {pg_per}"
            f"crowd {used['crowd'] * per:.1f} ms"
        )
    else:  # a per-submission figure of nothing would read as a (huge) cost
        log("  CPU per submission  none: no submission went through (see the errors above)")
    return {k: round(v, 2) for k, v in used.items()} | {"machine_busy_share": round(busy, 3)}


def check_invariants(
    campaign_id: int, overlap: int, tally: Tally, mode: str = "pointwise"
) -> list[str]:
    """What annotation/locks.py promises, checked on the whole campaign with a few queries.
    A pairwise campaign's answers are its preferences (one per question), kept per pair."""
    from django.db.models import Count, F, Q

    from annotation.models import (
        Assignment,
        AssignmentKind,
        AssignmentStatus,
        HumanPreference,
        HumanScore,
        Task,
        TaskKind,
    )

    answers = HumanPreference if mode == "pairwise" else HumanScore

    problems: list[str] = []
    tasks = Task.objects.filter(campaign_id=campaign_id, kind=TaskKind.NORMAL)
    over = tasks.filter(Q(assigned__gt=F("overlap")) | Q(submitted__gt=F("overlap"))).count()
    if over:
        problems.append(f"{over} tasks over K")
    normal = Q(assignments__kind=AssignmentKind.NORMAL)
    drift = (
        tasks.annotate(
            real_held=Count(
                "assignments",
                filter=normal
                & Q(assignments__status__in=[AssignmentStatus.ACTIVE, AssignmentStatus.SUBMITTED]),
            ),
            real_submitted=Count(
                "assignments", filter=normal & Q(assignments__status=AssignmentStatus.SUBMITTED)
            ),
        )
        .exclude(assigned=F("real_held"), submitted=F("real_submitted"))
        .count()
    )
    if drift:
        problems.append(f"{drift} tasks whose counters differ from the real counts")
    twice = (
        Assignment.objects.filter(campaign_id=campaign_id, kind=AssignmentKind.NORMAL)
        .values("task_id", "annotator_id")
        .annotate(n=Count("pk"))
        .filter(n__gt=1)
        .count()
    )
    if twice:
        problems.append(f"{twice} (task, annotator) pairs assigned twice")
    stored = dict(
        answers.objects.filter(campaign_id=campaign_id)
        .values("assignment_id")
        .annotate(n=Count("pk"))
        .values_list("assignment_id", "n")
    )
    missing = [a for a, n in tally.accepted.items() if stored.get(a) != n]
    if missing:
        problems.append(f"{len(missing)} accepted submissions without their scores: {missing[:5]}")
    phantom = set(stored) - set(tally.accepted)
    if phantom:
        problems.append(f"{len(phantom)} assignments with scores no 201 reported")
    submitted = Assignment.objects.filter(
        campaign_id=campaign_id, status=AssignmentStatus.SUBMITTED
    ).count()
    if submitted != len(tally.accepted):
        problems.append(f"{submitted} submitted assignments but {len(tally.accepted)} 201s")
    if mode == "pairwise":
        complete_tasks = tasks.filter(submitted=F("overlap")).values("pk")
        per_skill = set(
            HumanPreference.objects.filter(
                campaign_id=campaign_id, assignment__task_id__in=complete_tasks
            )
            .values("assignment__task_id", "skill_id")
            .annotate(n=Count("pk"))
            .values_list("n", flat=True)
        )
    else:
        complete = tasks.filter(submitted=F("overlap")).values("response_id")
        per_skill = set(
            HumanScore.objects.filter(campaign_id=campaign_id, response_id__in=complete)
            .values("response_id", "skill_id")
            .annotate(n=Count("pk"))
            .values_list("n", flat=True)
        )
    if per_skill - {overlap}:
        problems.append(f"complete tasks with score counts per skill {sorted(per_skill)}")
    wrong = [n for n in tally.open_at_no_task if n]
    if wrong:
        problems.append(
            f"{len(wrong)} claims answered no task while the annotator had tasks open "
            f"({sorted(wrong)[:5]} open)"
        )
    counts = tasks.aggregate(
        complete=Count("pk", filter=Q(submitted=F("overlap"))),
        partial=Count("pk", filter=Q(submitted__gt=0, submitted__lt=F("overlap"))),
    )
    log("")
    verdict = "FAILED" if problems else "OK"
    log(
        f"invariants: {verdict}  (tasks complete {counts['complete']:,}, partly done "
        f"{counts['partial']:,}; {'preferences' if mode == 'pairwise' else 'scores'} "
        f"{sum(stored.values()):,})"
    )
    for problem in problems:
        log(f"  - {problem}")
    return problems


# --- profile --------------------------------------------------------------------------------


def profile(campaign_id: int, token: str) -> dict:
    """Costs with no contention, in this process: SQL statements and wall time per request
    (median of 30), and the plan of the claim query at the campaign's current state."""
    from django.db import connection, transaction
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.test.utils import override_settings as override

    from annotation.models import Campaign
    from annotation.services.assignments import assignment_claim_next

    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    url = f"{API}/campaigns/{campaign_id}/next/"
    timings: dict[str, list[float]] = defaultdict(list)
    queries: dict[str, int] = {}
    with override(ALLOWED_HOSTS=["testserver"]):
        for _ in range(30):
            with CaptureQueriesContext(connection) as ctx:
                t0 = time.perf_counter()
                task = client.post(url).json()
                timings["next"].append(time.perf_counter() - t0)
            queries["next"] = len(ctx)
            body = {"scores": [{"skill_id": s["skill_id"], "score": 3} for s in task["skills"]]}
            path = f"{API}/assignments/{task['assignment_id']}/submit/"
            with CaptureQueriesContext(connection) as ctx:
                t0 = time.perf_counter()
                status = client.post(path, body, content_type="application/json").status_code
                timings["submit"].append(time.perf_counter() - t0)
            assert status == 201, status
            queries["submit"] = len(ctx)
    log("")
    log("profile (one client, in process, DEBUG on):")
    for kind in ("next", "submit"):
        log(
            f"  {kind:<7} {queries[kind]:3d} SQL statements (BEGIN, COMMIT included), "
            f"median {statistics.median(timings[kind]) * 1000:.1f} ms"
        )
    # the claim's SELECT ... FOR UPDATE SKIP LOCKED, as executed, then EXPLAIN ANALYZE'd
    campaign = Campaign.objects.get(pk=campaign_id)
    someone = campaign.annotators.order_by("pk").first()
    # (the statement with its parameters: with server-side binding the logged SQL has $n
    # placeholders, not values)
    ran: list[tuple[str, object]] = []

    def keep(execute, sql, params, many, context):
        ran.append((sql, params))
        return execute(sql, params, many, context)

    with transaction.atomic():
        with connection.execute_wrapper(keep):
            assignment_claim_next(campaign=campaign, annotator=someone)
        claim_sql, params = next((sql, p) for sql, p in ran if "SKIP LOCKED" in sql)
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + claim_sql, params)
            plan = [row[0] for row in cursor.fetchall()]
        transaction.set_rollback(True)
    log("  claim query plan:")
    for line in plan:
        log(f"    {line}")
    return {
        "queries": queries,
        "median_ms": {k: round(statistics.median(v) * 1000, 2) for k, v in timings.items()},
        "claim_plan": plan,
    }


# --- main -----------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--annotators", type=int, default=32)
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load")
    parser.add_argument("--max-submissions", type=int, default=0, help="0 = no limit")
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="pace the crowd to N submissions/s (0 = closed loop)",
    )
    parser.add_argument("--overlap", type=int, default=3, help="K annotators per response")
    parser.add_argument("--items", type=int, default=2500)
    parser.add_argument("--models", type=int, default=4)
    parser.add_argument(
        "--workers", type=int, default=None, help="gunicorn workers (default: gunicorn.conf.py's)"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="threads per worker (default: gunicorn.conf.py's)"
    )
    parser.add_argument(
        "--worker-class",
        choices=["gthread", "sync"],
        default=None,
        help="gunicorn worker class (default: gunicorn.conf.py's; sync ignores --threads)",
    )
    parser.add_argument(
        "--server",
        choices=SERVERS,
        default="gunicorn",
        help="gunicorn (the web recipe), serve (manage.py serve) or runserver (make demo's)",
    )
    parser.add_argument(
        "--compare",
        default="",
        help="comma-separated servers run in turn in one series, e.g. serve,runserver",
    )
    parser.add_argument("--repeat", type=int, default=1, help="rounds of --compare (medians)")
    parser.add_argument(
        "--db",
        choices=["postgres", "sqlite"],
        default=None,
        help="postgres (flaskweb_loadbench) or sqlite (the embedded default); default: "
        "sqlite for serve and runserver, postgres for gunicorn",
    )
    parser.add_argument(
        "--links",
        action="store_true",
        help="annotators come in through a Prolific study link (accounts made by the link)",
    )
    parser.add_argument(
        "--html",
        action="store_true",
        help="with --links: score on the annotate pages with the study session, as a "
        "participant's browser does, instead of the JSON API with tokens",
    )
    parser.add_argument(
        "--mode",
        choices=["pointwise", "pairwise", "both"],
        default="pointwise",
        help="score responses (pointwise), compare pairs (pairwise), or both in turn in "
        "every round, medians side by side",
    )
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--settings-file", default="", help="serve with this settings module file (to try a tuning)"
    )
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument(
        "--reuse-db",
        action="store_true",
        help="keep flaskweb_loadbench if it already holds the dataset",
    )
    parser.add_argument(
        "--drop-db",
        action="store_true",
        help="drop flaskweb_loadbench at the end (kept by default)",
    )
    parser.add_argument(
        "--chained",
        action="store_true",
        help="submit with next=true: one request per task after the first",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="the framework's floor: next and submit answered by views that do no work "
        "(bench/floor_urls.py); nothing is recorded, so no invariants are checked",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also print queries per request and the claim query plan",
    )
    args = parser.parse_args()
    servers = [s.strip() for s in args.compare.split(",") if s.strip()] or [args.server]
    if unknown := set(servers) - set(SERVERS):
        parser.error(f"--compare: unknown servers {sorted(unknown)}; choose from {SERVERS}")
    DB["kind"] = args.db or ("postgres" if servers == ["gunicorn"] else "sqlite")
    if args.html and not args.links:
        parser.error("--html drives the pages with the study sessions that --links makes")
    if args.html and args.mode != "pointwise":
        parser.error("--html scores on the pointwise pages: use the JSON API for pairwise")
    modes = ["pointwise", "pairwise"] if args.mode == "both" else [args.mode]
    args.chained = args.chained or args.html  # each page answer is the next card
    if sqlite() and args.profile:
        parser.error("--profile reads PostgreSQL's plans: use it with --db postgres")
    if args.floor:
        if args.links or args.chained or args.settings_file or args.mode != "pointwise":
            parser.error("--floor stands in for the work of the pointwise JSON API's next + submit")
        if args.profile:
            parser.error("--floor records nothing to profile")
        args.settings_file = str(ROOT / "bench" / "floor_settings.py")

    if args.reuse_db and database_ready(args.items, args.models):
        run([PYTHON, "manage.py", "migrate", "--noinput", "-v", "0"])  # the code's schema
        log(f"database {db_name()}: reused (migrated to the current schema)")
    else:
        build_database(args.items, args.models, args.seed)
    django_setup()
    runs, failed = [], False
    for round_ in range(max(1, args.repeat)):
        for server in servers:
            for mode in modes:
                args.server = server
                if len(servers) > 1 or args.repeat > 1 or len(modes) > 1:
                    log(f"\n=== round {round_ + 1}: {server}, {mode} ===")
                figures, bad = run_once(args, mode)
                runs.append(figures)
                failed |= bad
    figures = {"runs": runs, "medians": report_medians(runs)} if len(runs) > 1 else runs[0]
    (OUT / "annotate_load.json").write_text(json.dumps(figures, indent=2) + "\n")
    log(f"\nfigures written to {(OUT / 'annotate_load.json').relative_to(ROOT)}")
    if args.drop_db and not sqlite():
        from django.db import connection

        connection.close()
        pg(f"DROP DATABASE IF EXISTS {PG_DB} WITH (FORCE)")
    return 1 if failed else 0


def run_once(args, mode: str = "pointwise") -> tuple[dict, bool]:
    """One load run on a new campaign: setup, server, crowd, figures, invariants."""
    from django.db import connection

    campaign, tokens, annotator_ids = campaign_setup(
        args.annotators, args.overlap, args.links, mode
    )
    connection.close()  # not held open while the server works
    tally = Tally()
    sessions: list[tuple[str, str]] = []
    server = start_server(args)
    try:
        if args.links:
            tokens, annotator_ids, sessions = enter_through_link(
                args.port, campaign, tokens[0], args.annotators, tally
            )
            connection.close()
        warm_up(args.port, tokens[0])
        log(f"load: {args.annotators} annotators for {args.duration:g} s ...")
        before = cpu_snapshot(server.pid)
        tally, elapsed = run_crowd(
            args, args.port, campaign.pk, tokens, annotator_ids, tally, sessions
        )
        after = cpu_snapshot(server.pid)
    finally:
        stop_server(server)
    figures = report(args, tally, elapsed)
    figures["mode"] = mode
    figures["label"] = args.server if mode == "pointwise" else f"{args.server} pairwise"
    figures["cpu"] = report_cpu(cpu_used(before, after), len(tally.accepted))
    if args.floor:
        figures["label"] = "floor"
        log("\ninvariants: not checked (--floor: the views record nothing)")
        return figures, bool(tally.errors)
    problems = check_invariants(campaign.pk, args.overlap, tally, mode)
    if args.profile and mode == "pointwise":  # profile() times the pointwise submit
        figures["profile"] = profile(campaign.pk, tokens[0])
    figures["invariant_problems"] = problems
    return figures, bool(problems or tally.errors)


def report_medians(runs: list[dict]) -> dict:
    """Each server's medians over its runs, printed side by side."""
    by_server: dict[str, list[dict]] = defaultdict(list)
    for figures in runs:
        by_server[figures["label"]].append(figures)
    submit = "submit+next" if "submit+next_ms" in runs[0] else "submit"
    log("")
    log(f"medians of {len(runs) // len(by_server)} runs each ({runs[0]['db']}):")
    log(
        f"  {'server':<18} {'subm/s':>8} {'next p50':>9} {'p95':>7} {'p99':>7}"
        f" {submit + ' p50':>11} {'p95':>7} {'p99':>7}  errors  invariants"
    )
    medians = {}
    for server, group in by_server.items():
        row = {"submissions_per_s": statistics.median(f["submissions_per_s"] for f in group)}
        for kind in ("next", submit):
            for p in ("p50", "p95", "p99"):
                row[f"{kind}_{p}"] = statistics.median(f[f"{kind}_ms"][p] for f in group)
        row["errors"] = sum(f["errors"] for f in group)
        row["invariant_problems"] = sum(len(f["invariant_problems"]) for f in group)
        row["submissions_per_s_runs"] = [f["submissions_per_s"] for f in group]
        medians[server] = row
        log(
            f"  {server:<18} {row['submissions_per_s']:8.1f} "
            + " ".join(
                f"{row[f'{kind}_{p}']:{w}.0f}"
                for kind in ("next", submit)
                for p, w in (("p50", 9 if kind == "next" else 11), ("p95", 7), ("p99", 7))
            )
            + f"  {row['errors']:6d}  {'OK' if not row['invariant_problems'] else 'FAILED'}"
        )
    return medians


if __name__ == "__main__":
    sys.exit(main())
