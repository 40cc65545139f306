"""Fault benchmark: what a database restart, a Redis restart and a rolling restart of the
app's processes cost, measured from outside on the production recipe. Prints figures; it is
not a test. See bench/README.md ("Faults and restarts").

    .venv/bin/python bench/fault_bench.py                         # every scenario, this checkout
    .venv/bin/python bench/fault_bench.py --scenario a,c          # some of them (letter or name)
    .venv/bin/python bench/fault_bench.py --repo /tmp/flaskweb-before --label before

Every scenario runs in a child process of its own against a private PostgreSQL cluster and a
private Redis (tests/infra.py: free ports on 127.0.0.1, never the machine's shared servers),
set up from scratch: `manage.py migrate` and two imported datasets (2,000 items x 4 models for
the crowd, 150 x 4 for the judge), by the checkout under test (--repo; its code, this
checkout's virtualenv), or loaded from the dump its first scenario kept. Then the production
recipe, each process started from that checkout as the README runs it: gunicorn with its
gunicorn.conf.py (DEBUG off, 3 workers x 2 threads on 2 cores), `celery worker -Q
default,imports --concurrency 2`, `celery worker -Q judging -P threads --concurrency 8
--prefetch-multiplier 1`, `celery beat`; the judge provider is the project's OpenAI-compatible
server (devtools/openai_server) answering in 1 s with a limit of 600 requests a minute, and the
judge declares the same limit.

The crowd is bench/annotate_load.py's (N threads on keep-alive connections, next -> submit
over the JSON API, its invariant checks afterwards), with a client that retries what a
browser or the pages would: a 503 with Retry-After (after that many seconds, at most 5), and a
request whose connection closed or was refused before any response (after 0.25-2 s), each
for at most 30 s; anything else (a 500, a 4xx) fails the submission. Scenarios:

  a pg-annotate     PostgreSQL restart (pg_ctl restart -m fast) 8 s into 16 annotators' work
  b redis-annotate  Redis down for 10 s, 8 s into 16 annotators' work
  c pg-judge        PostgreSQL restart at judgment 350 of a 600-response run at 600/min
  d redis-judge     Redis down for 10 s at judgment 350 of the same run
  e rolling         32 annotators and a 600-response run: gunicorn HUP (workers replaced
                    gracefully), then each Celery process in turn warm-stopped (SIGTERM, wait
                    for the exit up to its service's stop_grace_period in the checkout's
                    docker-compose.yml or --stop-grace, then SIGKILL) and started again
  e2 rolling-usr2   the same with a binary upgrade of gunicorn: USR2 (a new master and
                    workers), TERM to the old master once the new workers serve
  f serve-hup       `manage.py serve` on SQLite: 32 annotators and the same run, SIGHUP
                    to serve (a build without the reload stops on it: reported as such)

Figures per scenario: HTTP statuses by request kind (500s and 503s apart), client retries,
submissions failed after the retries, acknowledged scores lost or duplicated, the longest
time without an acknowledged submission, the annotation invariants; for the judge run: the
longest stall (no new judgment while the provider had no call in flight), time to finish,
judgments lost or duplicated, provider calls wasted (answers whose judgment was not written:
200 answers minus judgments with an answer), ERROR lines in the workers' logs, and a Celery
process that exited on its own. JSON in
bench/out/fault_bench/<label>.json, logs in bench/out/fault_bench/<label>-<scenario>/.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import importlib.util
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "fault_bench"
PYTHON = str(ROOT / ".venv" / "bin" / "python")
GUNICORN = str(ROOT / ".venv" / "bin" / "gunicorn")
API = "/api/v1/annotation"

CROWD_ITEMS, JUDGE_ITEMS, MODELS = 2000, 150, 4
LATENCY, RPM = 1.0, 600  # the provider's latency and limit; the judge declares the same limit
RETRY_SECONDS = 30.0  # how long the crowd's client keeps retrying one request


@dataclass(frozen=True)
class Scenario:
    letter: str
    name: str
    about: str
    annotators: int = 0
    judge: int = 0  # responses judged (0: no judge run)
    fault: str = ""  # pg | redis | rolling | rolling-usr2 | serve-hup
    at_judgment: int = 0  # the fault when the run has this many judgments (else at_seconds)
    serve: bool = False


SCENARIOS = [
    Scenario("a", "pg-annotate", "PostgreSQL restart during annotation", 16, fault="pg"),
    Scenario("b", "redis-annotate", "Redis down 10 s during annotation", 16, fault="redis"),
    Scenario("c", "pg-judge", "PostgreSQL restart during a judge run", 0, 600, "pg", 350),
    Scenario("d", "redis-judge", "Redis down 10 s during a judge run", 0, 600, "redis", 350),
    Scenario("e", "rolling", "rolling restart: gunicorn HUP, warm worker restarts", 32, 600,
             "rolling"),
    Scenario("e2", "rolling-usr2", "rolling restart: gunicorn USR2, warm worker restarts",
             32, 600, "rolling-usr2"),
    Scenario("f", "serve-hup", "manage.py serve on SQLite: SIGHUP under load", 32, 600,
             "serve-hup", serve=True),
]  # fmt: skip
BY_KEY = {s.letter: s for s in SCENARIOS} | {s.name: s for s in SCENARIOS}


def log(message: str = "") -> None:
    print(message, flush=True)


def load_infra():
    """tests/infra.py of this checkout, loaded by path (the checkout under test may have no
    such module, and its `tests` package must not shadow this one's)."""
    spec = importlib.util.spec_from_file_location("fault_infra", ROOT / "tests" / "infra.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


infra = load_infra()


# --- the parent: one child process per scenario, then the table ------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="all", help="comma-separated letters or names")
    parser.add_argument("--repo", default=str(ROOT), help="the checkout to run (default: this)")
    parser.add_argument("--label", default="", help="names the output (default: the repo's)")
    parser.add_argument(
        "--stop-grace",
        type=float,
        default=0.0,
        help="seconds a warm-stopped Celery process may take before SIGKILL (default: its "
        "service's stop_grace_period in the checkout's docker-compose.yml, else compose's 10 s)",
    )
    parser.add_argument(
        "--judge-cap",
        type=float,
        default=780.0,
        help="seconds a judge run may take before the scenario gives up "
        "(the stall sweep acts after 600 s without progress)",
    )
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--result", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.repo = str(Path(args.repo).resolve())
    args.label = args.label or Path(args.repo).name
    if args.child:
        figures = run_scenario(BY_KEY[args.child], args)
        Path(args.result).write_text(json.dumps(figures, indent=2) + "\n")
        return 0
    keys = [k.strip() for k in args.scenario.split(",") if k.strip()]
    chosen = SCENARIOS if keys == ["all"] else []
    for key in [] if keys == ["all"] else keys:
        if key not in BY_KEY:
            parser.error(f"unknown scenario {key!r}; choose from {[s.name for s in SCENARIOS]}")
        chosen.append(BY_KEY[key])
    OUT.mkdir(parents=True, exist_ok=True)
    out_path = OUT / f"{args.label}.json"
    results = json.loads(out_path.read_text()) if out_path.exists() else {}
    for scenario in chosen:
        log(f"\n=== {scenario.letter} {scenario.name}: {scenario.about} ({args.label}) ===")
        with tempfile.NamedTemporaryFile(suffix=".json") as result:
            command = [PYTHON, __file__, "--child", scenario.name, "--result", result.name]
            command += ["--repo", args.repo, "--label", args.label]
            command += ["--stop-grace", str(args.stop_grace), "--judge-cap", str(args.judge_cap)]
            # in the checkout: Celery puts the working directory first on sys.path
            code = subprocess.run(command, cwd=args.repo).returncode
            text = Path(result.name).read_text()
        if code != 0 or not text:
            results[scenario.name] = {"scenario": scenario.name, "crashed": code}
            log(f"  the scenario's process failed ({code})")
        else:
            results[scenario.name] = json.loads(text)
        out_path.write_text(json.dumps(results, indent=2) + "\n")
    summary(results, args.label)
    log(f"\nfigures written to {out_path.relative_to(ROOT)}")
    return 0


def summary(results: dict, label: str) -> None:
    log(f"\nsummary ({label}):")
    head = (
        f"  {'scenario':<15} {'500s':>5} {'503s':>5} {'failed':>6} {'lost':>5} {'dup':>4}"
        f" {'gap s':>6} {'inv':>4}  {'stall s':>7} {'finish s':>8} {'j lost':>6} {'j dup':>5}"
        f" {'wasted':>6} {'load':>5}  note"
    )
    log(head)
    for name, r in results.items():
        if "crashed" in r:
            log(f"  {name:<15} crashed ({r['crashed']})")
            continue
        crowd, judge = r.get("crowd") or {}, r.get("judge") or {}

        def c(key, fmt="{}", src=crowd):
            return fmt.format(src[key]) if key in src and src[key] is not None else "-"

        log(
            f"  {name:<15} {c('http_500'):>5} {c('http_503'):>5} {c('failed_submissions'):>6}"
            f" {c('scores_lost'):>5} {c('scores_duplicated'):>4}"
            f" {c('longest_gap_s', '{:.1f}'):>6} {c('invariants'):>4}"
            f"  {c('stall_s', '{:.1f}', judge):>7} {c('finish_s', '{:.1f}', judge):>8}"
            f" {c('lost', src=judge):>6} {c('duplicated', src=judge):>5}"
            f" {c('calls_wasted', src=judge):>6} {c('load_average_start', '{:.1f}', r):>5}"
            f"  {r.get('note', '')}"
        )


# --- the child: one scenario -----------------------------------------------------------------


def run_scenario(scenario: Scenario, args) -> dict:
    repo = Path(args.repo)
    os.chdir(repo)  # Celery puts the working directory first on sys.path
    work = OUT / f"{args.label}-{scenario.name}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    stack: Stack | None = None
    try:
        if scenario.serve:
            stack = Serve(scenario, args, repo, work)
            return stack.run()
        with infra.private_postgres() as pg, infra.private_redis(persist=True) as redis:
            stack = Recipe(scenario, args, repo, work, pg, redis)
            return stack.run()
    finally:
        if stack is not None and stack.provider is not None:
            infra.stop_process(stack.provider, grace=10)


class Stack:
    """What every scenario does: datasets, the campaign, the provider, the crowd, the judge
    run and their figures. Subclasses start the processes and make the fault."""

    def __init__(self, scenario: Scenario, args, repo: Path, work: Path) -> None:
        self.scenario, self.args, self.repo, self.work = scenario, args, repo, work
        self.var = work / "var"
        self.var.mkdir()
        self.events: list[tuple[float, str]] = []
        self.provider: subprocess.Popen | None = None
        self.t0 = time.monotonic()
        self.figures: dict = {
            "scenario": scenario.name,
            "repo": str(repo),
            "label": args.label,
            "load_average_start": round(os.getloadavg()[0], 2),  # the machine's, 1 minute
        }

    # the environment of the app's processes

    def app_env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DJANGO_", "DATABASE_", "REDIS_", "CELERY_", "FLASKWEB_"))
            and k not in ("PYTHONPATH", "WEB_CONCURRENCY", "GUNICORN_THREADS")
        }
        env.update(
            DJANGO_SETTINGS_MODULE="flaskweb.settings",
            DJANGO_DEBUG="false",
            DJANGO_SECURE_SSL_REDIRECT="false",
            DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
            DJANGO_LOG_LEVEL="WARNING",
            FLASKWEB_VAR_DIR=str(self.var),
            DJANGO_MEDIA_ROOT=str(self.var / "media"),
            GUNICORN_ACCESS_LOG="",  # the crowd counts every answer itself
            PYTHONDONTWRITEBYTECODE="1",
            PYTHONPATH=str(self.repo),
        )
        return env

    def manage(self, *command: str) -> str:
        env = {**self.app_env(), "DJANGO_DEBUG": "true"}  # no HTTPS redirect, no key needed
        result = subprocess.run(
            [PYTHON, "manage.py", *command], cwd=self.repo, env=env, capture_output=True, text=True
        )
        if result.returncode != 0:
            sys.exit(f"manage.py {command[0]} failed:\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def mark(self, what: str) -> None:
        now = time.monotonic() - self.t0
        self.events.append((round(now, 2), what))
        log(f"  {now:7.1f} s  {what}")

    # data

    def prepare(self) -> None:
        """The database: migrated by the checkout and the datasets imported, or restored from
        the copy the first scenario of this checkout kept (bench/out/fault_bench/template-*);
        then Django in this process (the checkout's code) for the campaign, the judge and the
        checks."""
        global annotate_load
        annotate_load = import_annotate_load(self.repo)
        template = self.template_path()
        t0 = time.monotonic()
        if template.exists():
            self.restore(template)
            log(f"  database restored from {template.name} in {time.monotonic() - t0:.1f} s")
        else:
            self.manage("migrate", "--noinput", "-v", "0")
            t1 = time.monotonic()
            for name, items in (("load", CROWD_ITEMS), ("judge", JUDGE_ITEMS)):
                path = OUT / f"dataset-{items}x{MODELS}.jsonl"
                if not path.exists():
                    annotate_load.write_dataset(path, items, MODELS, seed=1234)
                self.manage(
                    "import_dataset", str(path), "--project", annotate_load.PROJECT,
                    "--create-project", "--dataset", name, "--quiet-problems",
                )  # fmt: skip
            self.keep(template)
            log(
                f"  migrated in {t1 - t0:.1f} s, datasets imported in "
                f"{time.monotonic() - t1:.1f} s (kept as {template.name})"
            )
        env = {**self.app_env(), "DJANGO_DEBUG": "true"}
        os.environ.clear()
        os.environ.update(env)
        sys.path.insert(0, str(self.repo))
        import django

        django.setup()
        self.campaign_id, self.tokens, self.annotator_ids = None, [], []
        if self.scenario.annotators:
            campaign, self.tokens, self.annotator_ids = annotate_load.campaign_setup(
                self.scenario.annotators, 3
            )
            self.campaign_id = campaign.pk
        from django.db import connection

        connection.close()

    def template_path(self) -> Path:
        """Where the migrated database with the datasets is kept: one per checkout, kind of
        store, migrations (names and sizes) and dataset size."""
        import hashlib

        key = hashlib.sha256(f"{self.repo}|{CROWD_ITEMS}|{JUDGE_ITEMS}|{MODELS}".encode())
        for path in sorted(self.repo.glob("*/migrations/*.py")):
            key.update(f"{path.relative_to(self.repo)}:{path.stat().st_size}".encode())
        suffix = "sqlite3" if isinstance(self, Serve) else "sql"
        return OUT / f"template-{self.args.label}-{key.hexdigest()[:12]}.{suffix}"

    def restore(self, template: Path) -> None:
        raise NotImplementedError

    def keep(self, template: Path) -> None:
        raise NotImplementedError

    def start_provider(self) -> None:
        self.provider_log = self.work / "provider.log"
        command = [PYTHON, "-m", "devtools.openai_server", "--port", "0", "--latency"]
        command += [str(LATENCY), "--rpm", str(RPM), "--style", "json"]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.provider = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=open(self.provider_log, "w"),  # noqa: SIM115 (lives as long as the server)
            text=True,
        )
        assert self.provider.stdout is not None
        self.provider_url = self.provider.stdout.readline().strip()
        if not self.provider_url.startswith("http://127.0.0.1:"):
            sys.exit(f"the judge server did not start; see {self.provider_log}")

    def provider_stats(self) -> dict:
        base = self.provider_url.removesuffix("/v1")
        with urllib.request.urlopen(f"{base}/_admin/stats", timeout=5) as answer:
            return json.loads(answer.read())

    def start_judge_run(self) -> int:
        """A judge as a site admin and a researcher would declare it, and a run over the judge
        dataset, started (its dispatch goes through the broker to the judging worker)."""
        from django.db import connection

        from annotation.models import Dataset
        from judging.models import JudgeKind, Provider
        from judging.services import judge_config_create, judge_run_create, judge_run_start

        dataset = Dataset.objects.get(project__slug=annotate_load.PROJECT, name="judge")
        provider, _ = Provider.objects.update_or_create(
            name="fault-bench",
            defaults={"base_urls": [self.provider_url], "is_local": True, "approved": True},
        )
        judge = judge_config_create(
            project=dataset.project,
            name=f"fault bench {time.time_ns()}",
            kind=JudgeKind.LLM,
            provider=provider,
            base_url=self.provider_url,
            model=f"fake-judge-{time.time_ns()}",  # nothing answered from an earlier cache
            requests_per_minute=RPM,
            timeout_seconds=30,
            max_attempts=4,
        )
        run = judge_run_create(judge=judge, dataset=dataset)
        if self.scenario.judge != run.total:
            sys.exit(f"the judge dataset has {run.total} responses, not {self.scenario.judge}")
        assert judge_run_start(run=run)
        connection.close()
        self.run_id = run.pk
        self.samples: list[tuple[float, int | None, int]] = []
        self.mark(f"judge run {run.pk} started: {run.total} responses")
        return run.pk

    # reading the store from outside (plain SQL on a new connection: survives restarts)

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        raise NotImplementedError

    def run_state(self) -> tuple[str, int] | None:
        try:
            ((status, completed),) = self.rows(
                "SELECT status, done + failed + parse_failed FROM judging_judgerun WHERE id = %s",
                (self.run_id,),
            )
        except Exception:
            return None  # the database is away
        return status, completed

    # the crowd

    def start_crowd(self, port: int) -> None:
        self.tally = FaultTally()
        self.stop_crowd_event = threading.Event()
        budget = annotate_load.Budget(0)
        annotator = type("RetryingAnnotator", (RetryMixin, annotate_load.Annotator), {})
        self.crowd = [
            annotator(
                port=port,
                token=token,
                annotator_id=annotator_id,
                campaign_id=self.campaign_id,
                tally=self.tally,
                stop=self.stop_crowd_event,
                budget=budget,
                pace=0.0,
                seed=1234 + i,
                chained=False,
                t0=self.t0,
            )
            for i, (token, annotator_id) in enumerate(
                zip(self.tokens, self.annotator_ids, strict=True)
            )
        ]
        self.crowd_started = time.monotonic()
        for annotator in self.crowd:
            annotator.start()
        self.mark(f"crowd of {len(self.crowd)} annotators started")

    def stop_crowd(self) -> None:
        self.stop_crowd_event.set()
        for annotator in self.crowd:
            annotator.join(RETRY_SECONDS + 35)
        self.crowd_elapsed = time.monotonic() - self.crowd_started
        self.mark(f"crowd stopped: {len(self.tally.accepted):,} submissions acknowledged")

    def crowd_figures(self) -> dict:
        from django.db import connection

        connection.close()
        tally = self.tally
        statuses = Counter()
        for (kind, status), n in tally.statuses.items():
            statuses[f"{kind} {status}"] += n
        by_status = Counter()
        for (_kind, status), n in tally.statuses.items():
            by_status[status] += n
        lost, duplicated = scores_lost_duplicated(self.campaign_id, tally)
        problems = annotate_load.check_invariants(self.campaign_id, 3, tally)
        # from the crowd's start to its stop, so that a server gone for good shows too
        end = self.crowd_started - self.t0 + self.crowd_elapsed
        times = [self.crowd_started - self.t0, *sorted(tally.accepted_at), end]
        gaps = [(b - a, a) for a, b in zip(times, times[1:], strict=False)]
        gap, gap_at = max(gaps, default=(0.0, 0.0))
        figures = {
            "annotators": len(self.crowd),
            "elapsed_s": round(self.crowd_elapsed, 1),
            "submissions": len(tally.accepted),
            "submissions_per_s": round(len(tally.accepted) / self.crowd_elapsed, 1),
            "statuses": dict(sorted(statuses.items())),
            "http_500": by_status.get(500, 0),
            "http_503": by_status.get(503, 0),
            "retries": {f"{k} {why}": n for (k, why), n in sorted(tally.retries.items())},
            "failed_submissions": tally.failed["submit"],
            "failed_next": tally.failed["next"],
            "failures": tally.errors[:10],
            "scores_lost": lost,
            "scores_duplicated": duplicated,
            "longest_gap_s": round(gap, 2),
            "longest_gap_at_s": round(gap_at, 1),
            "invariants": "OK" if not problems else "FAIL",
            "invariant_problems": problems,
        }
        log("")
        log(
            f"crowd: {figures['annotators']} annotators, {figures['elapsed_s']} s, "
            f"{figures['submissions']:,} submissions acknowledged "
            f"({figures['submissions_per_s']}/s)"
        )
        log(f"  statuses            {figures['statuses']}")
        log(f"  HTTP 500 / 503      {figures['http_500']} / {figures['http_503']}")
        log(f"  client retries      {figures['retries'] or 0}")
        log(
            f"  failed after the client's retries: submit {figures['failed_submissions']}, "
            f"next {figures['failed_next']}"
        )
        for line in figures["failures"][:5]:
            log(f"    {line}")
        log(f"  acknowledged scores lost {lost}, duplicated {duplicated}")
        log(
            f"  longest time without an acknowledged submission {figures['longest_gap_s']} s "
            f"(from {figures['longest_gap_at_s']} s)"
        )
        return figures

    # the judge run

    def watch_judge(self, *, fault=None, until=None) -> None:
        """Sample the run (every 0.25 s) until it is no longer running or the cap is reached;
        call `fault` once when the run has the scenario's trigger count of judgments, and
        return early when `until()` is true (the crowd's part of a scenario)."""
        started = time.monotonic()
        done_fault = fault is None
        next_print = started + 10
        while True:
            state = self.run_state()
            try:
                in_flight = self.provider_stats()["in_flight"]
            except OSError:
                in_flight = -1
            now = time.monotonic() - self.t0
            completed = state[1] if state else None
            self.samples.append((now, completed, in_flight))
            self.check_exits()
            if time.monotonic() >= next_print:
                log(f"  {now:7.1f} s  judgments {completed}, calls in flight {in_flight}")
                next_print += 10
            if state and state[0] != "running" and not self.faulting():
                self.mark(f"judge run {state[0]} with {state[1]} judgments")
                return
            if not done_fault and state and state[1] >= self.scenario.at_judgment:
                self.mark(f"judgment {state[1]}: fault")
                # in a thread: the run is sampled while the service is away
                self.fault_thread = threading.Thread(target=fault, daemon=True)
                self.fault_thread.start()
                done_fault = True
            if until is not None and until():
                return
            if time.monotonic() - started > self.args.judge_cap:
                self.mark(f"judge run still running after {self.args.judge_cap:.0f} s: given up")
                return
            time.sleep(0.25)

    def check_exits(self) -> None:
        """Processes of the stack that exited on their own (the recipe's Celery processes)."""

    def faulting(self) -> bool:
        thread = getattr(self, "fault_thread", None)
        return thread is not None and thread.is_alive()

    def judge_figures(self) -> dict:
        ((status, total, done, failed, parse_failed, started_at, finished_at),) = self.rows(
            "SELECT status, total, done, failed, parse_failed, started_at, finished_at"
            " FROM judging_judgerun WHERE id = %s",
            (self.run_id,),
        )
        ((rows, distinct, answered),) = self.rows(
            "SELECT count(*), count(DISTINCT (response_id, sample_index)),"
            " count(*) FILTER (WHERE status IN ('ok', 'partial', 'parse_failed'))"
            " FROM judging_judgment WHERE run_id = %s",
            (self.run_id,),
        )
        stats = self.provider_stats()
        finish = None
        if started_at and finished_at and status == "done":
            finish = (as_time(finished_at) - as_time(started_at)).total_seconds()
        figures = {
            "run": self.run_id,
            "status": status,
            "responses": total,
            "completed": done + failed + parse_failed,
            "failed": failed,
            "parse_failed": parse_failed,
            "finish_s": round(finish, 1) if finish is not None else None,
            "stall_s": round(stall_seconds(self.samples), 1),
            "lost": total - distinct if status == "done" else None,
            "missing": total - distinct,
            "duplicated": rows - distinct,
            "provider_answers": stats["completions"],
            "provider_requests": stats["requests"],
            "provider_429": stats["rate_limited"],
            "calls_wasted": stats["completions"] - answered,
            "worker_errors": worker_errors(self.work),
        }
        log("")
        log(
            f"judge run {self.run_id}: {status}, {figures['completed']}/{total} judgments, "
            f"finished in {figures['finish_s']} s"
        )
        log(f"  longest stall with the provider idle {figures['stall_s']} s")
        log(
            f"  judgments missing {figures['missing']}, duplicated {figures['duplicated']}; "
            f"provider answers {stats['completions']}, wasted {figures['calls_wasted']}, "
            f"429s {stats['rate_limited']}"
        )
        log(f"  ERROR lines in the workers' logs {figures['worker_errors']}")
        return figures

    def finish(self) -> dict:
        exited = self.figures.get("exited")
        if exited:
            gone = ", ".join(f"{name} (status {code})" for name, code in exited.items())
            note = self.figures.get("note", "")
            self.figures["note"] = f"{note}; exited on its own: {gone}".lstrip("; ")
        self.figures["events"] = self.events
        self.figures["load_average_end"] = round(os.getloadavg()[0], 2)
        return self.figures


class Recipe(Stack):
    """The PostgreSQL + Redis recipe: gunicorn, the two workers and beat."""

    def __init__(self, scenario, args, repo, work, pg, redis) -> None:
        super().__init__(scenario, args, repo, work)
        self.pg, self.redis = pg, redis
        self.database_url = pg.create_database("flaskweb")
        self.celery: dict[str, subprocess.Popen] = {}
        self.restarting: set[str] = set()  # stopped on purpose by a rolling restart

    def app_env(self) -> dict[str, str]:
        return super().app_env() | {
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis.url,
            "DJANGO_SECRET_KEY": "faultbench-only-not-a-secret",
        }

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        return self.pg.execute(sql, params, database="flaskweb")

    def restore(self, template: Path) -> None:
        self.pg.load("flaskweb", template)

    def keep(self, template: Path) -> None:
        part = template.with_suffix(".part")
        self.pg.dump("flaskweb", part)
        part.rename(template)

    #: as docker-compose.yml runs them; a rolling restart takes them in this order (the
    #: judging worker first, while the run is surely in flight)
    CELERY = {
        "worker-judging": ["worker", "-Q", "judging", "-P", "threads", "--concurrency", "8",
                           "--prefetch-multiplier", "1", "-n", "judging@%h"],
        "worker": ["worker", "-Q", "default,imports", "--concurrency", "2", "-n", "default@%h"],
        "beat": ["beat"],
    }  # fmt: skip

    def start_celery(self, name: str) -> None:
        command = [PYTHON, "-m", "celery", "-A", "flaskweb", *self.CELERY[name]]
        if name == "beat":
            command += ["--schedule", str(self.var / "celerybeat-schedule")]
        command += ["--loglevel", "INFO"]
        ready = b"beat: Starting" if name == "beat" else b" ready."
        log_path = self.work / f"{name}.log"
        self.celery[name] = infra.start_logged(
            command, cwd=self.repo, env=self.app_env(), log=log_path, ready=ready
        )

    def warm_restart(self, name: str) -> float:
        self.restarting.add(name)
        grace = self.args.stop_grace or compose_grace(self.repo, name)
        took = infra.stop_process(self.celery[name], grace=grace)
        killed = self.celery[name].returncode == -signal.SIGKILL
        self.mark(
            f"{name} stopped in {took:.1f} s"
            + (f" (SIGKILL after its {grace:g} s)" if killed else "")
        )
        self.start_celery(name)
        self.restarting.discard(name)
        self.mark(f"{name} started again")
        stops = self.figures.setdefault("stops", {})
        stops[name] = {"seconds": round(took, 1), "killed": killed, "grace": grace}
        return took

    def run(self) -> dict:
        s = self.scenario
        self.prepare()
        self.web = None
        try:
            if s.annotators:
                self.web = infra.Gunicorn(
                    gunicorn=GUNICORN,
                    repo=self.repo,
                    env=self.app_env(),
                    port=infra.free_port(),
                    log=self.work / "gunicorn.log",
                )
                self.web.start()
                annotate_load.warm_up(self.web.port, self.tokens[0])
            for name in self.CELERY:
                self.start_celery(name)
            if s.judge:
                self.start_provider()
            self.mark("processes up")
            annotate_load.DATABASE_URL = self.database_url  # its "no task" check reads it
            if s.fault in ("pg", "redis") and not s.judge:
                self.start_crowd(self.web.port)
                time.sleep(8)
                self.fault()
                time.sleep(10)
                self.stop_crowd()
            elif s.fault in ("pg", "redis"):
                self.start_judge_run()
                self.watch_judge(fault=self.fault)
            else:
                self.start_crowd(self.web.port)
                self.start_judge_run()
                restart = threading.Thread(target=self.rolling, daemon=True)
                self.rolled = threading.Event()
                restart.start()
                self.watch_judge(until=self.rolled.is_set)
                restart.join()
                self.stop_crowd()
                self.watch_judge()
        finally:
            self.stop_all()
        if s.annotators:
            self.figures["crowd"] = self.crowd_figures()
        if s.judge:
            self.figures["judge"] = self.judge_figures()
        return self.finish()

    def fault(self) -> None:
        if self.scenario.fault == "pg":
            took = self.pg.restart(mode="fast")
            self.mark(f"PostgreSQL restarted (-m fast) in {took:.1f} s")
            self.figures["restart_s"] = round(took, 2)
        else:
            self.mark("Redis stopped")
            took = self.redis.restart(down=10.0)
            self.mark(f"Redis back after {took:.1f} s")
            self.figures["restart_s"] = round(took, 2)

    def rolling(self) -> None:
        """8 s of load, the web processes, then each Celery process in turn, then 8 s more."""
        try:
            time.sleep(8)
            if self.scenario.fault == "rolling":
                took = self.web.hup()
                self.mark(f"gunicorn HUP: workers replaced in {took:.1f} s")
            else:
                took = self.web.upgrade()
                self.mark(f"gunicorn USR2, then TERM to the old master: done in {took:.1f} s")
            self.figures["web_restart_s"] = round(took, 2)
            for name in self.CELERY:
                time.sleep(2)
                self.warm_restart(name)
            time.sleep(8)
        finally:
            self.rolled.set()

    def check_exits(self) -> None:
        """Mark a Celery process that exited on its own (none is expected to)."""
        exited = self.figures.setdefault("exited", {})
        for name, proc in self.celery.items():
            if proc.poll() is not None and name not in exited and name not in self.restarting:
                exited[name] = proc.returncode
                self.mark(f"{name} exited on its own (status {proc.returncode})")

    def stop_all(self) -> None:
        if self.scenario.judge:  # a worker that dies after its last task: give it a moment
            time.sleep(3)
        self.check_exits()
        if self.web is not None:
            self.web.stop()
        for proc in self.celery.values():
            infra.stop_process(proc, grace=10)


class Serve(Stack):
    """`manage.py serve` on the embedded default: SQLite and the file-system broker in a
    scratch FLASKWEB_VAR_DIR, gunicorn and the worker as serve starts them."""

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        sql = sql.replace("%s", "?").replace(
            "count(DISTINCT (response_id, sample_index))",
            "count(DISTINCT response_id || ':' || sample_index)",
        )
        with contextlib.closing(sqlite3.connect(self.var / "flaskweb.sqlite3", timeout=30)) as db:
            return db.execute(sql, params).fetchall()

    def restore(self, template: Path) -> None:
        shutil.copyfile(template, self.var / "flaskweb.sqlite3")

    def keep(self, template: Path) -> None:
        part = template.with_suffix(".part")
        part.unlink(missing_ok=True)
        with contextlib.closing(sqlite3.connect(self.var / "flaskweb.sqlite3")) as db:
            db.execute("VACUUM INTO ?", [str(part)])
        part.rename(template)

    def run(self) -> dict:
        self.prepare()
        annotate_load.DB["kind"] = "sqlite"
        annotate_load.SQLITE_FILE = self.var / "flaskweb.sqlite3"
        self.start_provider()
        port = infra.free_port()
        env = self.app_env() | {
            "DJANGO_STATIC_ROOT": str(self.work / "static"),
            "DJANGO_SUPERUSER_USERNAME": "faultbench-admin",
            "DJANGO_SUPERUSER_PASSWORD": "faultbench-only-not-a-secret",
            "DJANGO_SUPERUSER_EMAIL": "faultbench-admin@example.org",
        }
        serve_log = self.work / "serve.log"
        self.serve = infra.start_logged(
            [PYTHON, "manage.py", "serve", "--port", str(port)],
            cwd=self.repo,
            env=env,
            log=serve_log,
        )
        try:
            infra.wait_until(
                lambda: self.serve.poll() is not None or answers(port), timeout=120, what="serve"
            )
            if self.serve.poll() is not None:
                sys.exit(f"serve exited at start; see {serve_log}")
            annotate_load.warm_up(port, self.tokens[0])
            self.mark("serve up")
            self.start_crowd(port)
            self.start_judge_run()
            self.rolled = threading.Event()
            threading.Thread(target=self.hup, daemon=True).start()
            self.watch_judge(until=self.rolled.is_set)
            self.stop_crowd()
            if self.serve.poll() is None:
                self.watch_judge()
        finally:
            infra.stop_process(self.serve, grace=45)
        self.figures["crowd"] = self.crowd_figures()
        self.figures["judge"] = self.judge_figures()
        return self.finish()

    def hup(self) -> None:
        """8 s of load, SIGHUP to serve, the reload to its end ("reloaded" or "reload
        refused" in serve's output), 8 s more. A build whose serve stops on SIGHUP is
        reported as such at once."""
        log_path = self.work / "serve.log"
        try:
            time.sleep(8)
            before = descendants(self.serve.pid)
            start = log_path.stat().st_size
            t0 = time.monotonic()
            os.kill(self.serve.pid, signal.SIGHUP)
            self.mark("SIGHUP to serve")

            def said(text: bytes) -> bool:
                return text in log_path.read_bytes()[start:]

            with contextlib.suppress(TimeoutError):
                infra.wait_until(
                    lambda: (
                        self.serve.poll() is not None
                        or said(b"reloaded")
                        or said(b"reload refused")
                    ),
                    timeout=(self.args.stop_grace or 300) + 120,
                    interval=0.2,
                    what="the reload",
                )
            if self.serve.poll() is not None:
                self.figures["note"] = "not supported by this build: serve stopped on SIGHUP"
                self.mark(f"serve exited ({self.serve.returncode}): {self.figures['note']}")
                return
            took = time.monotonic() - t0
            replaced = len(before - descendants(self.serve.pid))
            self.figures["reload_s"] = round(took, 1)
            self.figures["processes_replaced"] = replaced
            outcome = "refused" if said(b"reload refused") else "reloaded"
            self.figures["note"] = f"serve {outcome} in {took:.1f} s, {replaced} processes replaced"
            self.mark(self.figures["note"])
            time.sleep(8)
        finally:
            self.rolled.set()


# --- the crowd's client ----------------------------------------------------------------------


def import_annotate_load(repo: Path):
    """bench/annotate_load.py of this checkout, with the apps of the checkout under test: its
    `annotation` package is imported first (annotate_load puts this checkout on the path)."""
    sys.path.insert(0, str(repo))
    import annotate_load as module

    import annotation.catalogue_text  # noqa: F401 (from the checkout under test)

    while str(ROOT) in sys.path:
        sys.path.remove(str(ROOT))
    sys.path.insert(0, str(repo))
    return module


annotate_load = None  # set by Stack.prepare


@dataclass
class FaultTally:
    """annotate_load's Tally, plus retries, failures after retries and when each submission
    was acknowledged."""

    latencies: dict = field(default_factory=lambda: defaultdict(list))
    statuses: Counter = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    accepted: dict[int, int] = field(default_factory=dict)
    accepted_at: list[float] = field(default_factory=list)
    no_task: Counter = field(default_factory=Counter)
    open_at_no_task: list[int] = field(default_factory=list)
    retries: Counter = field(default_factory=Counter)
    failed: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, seconds: float, status: int) -> None:
        with self.lock:
            self.latencies[kind].append(seconds)
            self.statuses[(kind, status)] += 1


#: no response came: the request was not taken, so sending it again is what a page does
NO_RESPONSE = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    ConnectionRefusedError,
    BrokenPipeError,
)


class RetryMixin:
    """Mixed into annotate_load.Annotator (start_crowd): its loop, with a client that retries
    like the pages: a 503 with Retry-After, a connection closed or refused before any
    response. A failure the client does not retry pauses the annotator for a second, as a
    person reads the error before trying again."""

    def __init__(self, *, t0: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self.t0 = t0

    def call(self, kind: str, path: str, body: dict | None):
        data = json.dumps(body).encode() if body is not None else b""
        deadline = time.monotonic() + RETRY_SECONDS
        pause = 0.25
        while True:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            t0 = time.perf_counter()
            try:
                self.conn.request("POST", path, body=data, headers=self.headers)
                response = self.conn.getresponse()
                payload = response.read()
            except NO_RESPONSE as exc:
                self.conn.close()
                self.conn = None
                if time.monotonic() > deadline:
                    return self._failed(kind, repr(exc))
                self._retry(kind, "no response")
                time.sleep(pause)
                pause = min(2.0, pause * 2)
                continue
            except (OSError, http.client.HTTPException) as exc:  # a timeout, a broken answer
                self.conn.close()
                self.conn = None
                return self._failed(kind, repr(exc))
            self.tally.record(kind, time.perf_counter() - t0, response.status)
            retry_after = response.getheader("Retry-After")
            if response.status == 503 and retry_after and time.monotonic() < deadline:
                self._retry(kind, "503")
                with contextlib.suppress(ValueError):
                    time.sleep(min(5.0, max(0.0, float(retry_after))))
                continue
            if response.status in (200, 201) and kind == "submit":
                with self.tally.lock:
                    self.tally.accepted_at.append(time.monotonic() - self.t0)
            return response.status, response, payload

    def _retry(self, kind: str, why: str) -> None:
        with self.tally.lock:
            self.tally.retries[(kind, why)] += 1

    def _failed(self, kind: str, what: str):
        with self.tally.lock:
            self.tally.errors.append(f"{kind}: {what}")
            self.tally.failed[kind] += 1
        time.sleep(1.0)
        return None, None, None

    def error(self, kind: str, status, payload) -> None:
        if status is None:
            return  # counted by _failed
        with self.tally.lock:
            self.tally.errors.append(f"{kind}: HTTP {status} {payload[:160]!r}")
            self.tally.failed[kind] += 1
        time.sleep(1.0)

    def no_task(self, reason, *, give_back: bool = True) -> None:
        try:
            super().no_task(reason, give_back=give_back)
        except Exception as exc:  # its check reads the database, which may be away
            with self.tally.lock:
                self.tally.errors.append(f"no-task check: {exc!r}")


def scores_lost_duplicated(campaign_id: int, tally: FaultTally) -> tuple[int, int]:
    """Acknowledged submissions whose scores are not all stored, and (assignment, skill)
    pairs stored more than once."""
    from django.db.models import Count

    from annotation.models import HumanScore

    stored = dict(
        HumanScore.objects.filter(campaign_id=campaign_id)
        .values("assignment_id")
        .annotate(n=Count("pk"))
        .values_list("assignment_id", "n")
    )
    lost = sum(1 for a, n in tally.accepted.items() if stored.get(a, 0) < n)
    duplicated = (
        HumanScore.objects.filter(campaign_id=campaign_id)
        .values("assignment_id", "skill_id")
        .annotate(n=Count("pk"))
        .filter(n__gt=1)
        .count()
    )
    return lost, duplicated


# --- helpers ---------------------------------------------------------------------------------


def answers(port: int) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", f"{API}/campaigns/")
        return conn.getresponse().status == 401
    except OSError:
        return False


def descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        for child in infra.children(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def stall_seconds(samples: list[tuple[float, int | None, int]]) -> float:
    """The longest stretch, after the first judgment, in which the count did not grow while
    the provider had no call in flight (a sample the database did not answer counts as no
    growth)."""
    longest, start, last = 0.0, None, None
    seen_first = False
    for t, completed, in_flight in samples:
        if completed is not None and completed > 0:
            seen_first = True
        if not seen_first:
            continue
        grew = completed is not None and last is not None and completed > last
        if completed is not None:
            last = completed if last is None else max(last, completed)
        if not grew and in_flight == 0:
            start = t if start is None else start
            longest = max(longest, t - start)
        else:
            start = None
    return longest


def compose_grace(repo: Path, service: str) -> float:
    """The stop_grace_period of `service` in the checkout's docker-compose.yml, in seconds:
    what a deploy with that file gives the process before SIGKILL (compose's default: 10 s)."""
    import yaml

    try:
        services = yaml.safe_load((repo / "docker-compose.yml").read_text())["services"]
        value = str(services[service].get("stop_grace_period", "10s"))
    except (OSError, KeyError, TypeError):
        return 10.0
    units = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", value)
    return sum(float(n) * units[u] for n, u in parts) or 10.0


def worker_errors(work: Path) -> int:
    count = 0
    for path in list(work.glob("worker*.log")) + list(work.glob("serve.log")):
        count += sum(
            1 for line in path.read_text(errors="replace").splitlines() if " ERROR/" in line
        )
    return count


def as_time(value):
    from datetime import datetime

    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value))


if __name__ == "__main__":
    sys.exit(main())
