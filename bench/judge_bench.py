"""Judge-run benchmark: how close a model-judge run gets to the provider's limit, by worker
shape and build, with its bookkeeping checked. Prints figures; it is not a test. See
bench/README.md ("Judge-run benchmark").

    .venv/bin/python bench/judge_bench.py --series K [--scenarios A,B,...]
        [--shape production,embedded,previous] [--previous-build PATH] [--build PATH]
    .venv/bin/python bench/judge_bench.py --quick [--shape ...]
    .venv/bin/python bench/judge_bench.py [--limit N | --synthetic N] [--latency L] [--rpm R]
        [--concurrency C] [--workers W] [--passes clean,faults] [--fault-rate F]
    .venv/bin/python bench/judge_bench.py --probe-server [--latency L]

Every pass (one scenario on one worker shape):
- the local OpenAI-compatible server in a subprocess (`python -m devtools.openai_server
  --latency L --rpm R ...`, this checkout's), rate-limited server side like a provider;
- the worker processes of the shape, started from its build's tree (cwd and PYTHONPATH):
  `production`: W (default 1) `celery -A flaskweb worker -Q judging -P threads
  --concurrency C --prefetch-multiplier 1` on PostgreSQL and a private Redis database;
  `embedded`: one `celery -A flaskweb worker -B -Q default,imports,judging -P threads
  --concurrency 4` as `manage.py rundemo` starts it, on the embedded default: SQLite and the
  file-system broker in a scratch FLASKWEB_VAR_DIR, no DATABASE_URL, no REDIS_URL (the judge
  limit is kept inside the worker process);
  `previous`: the previous build (--previous-build, a `git worktree` of an older commit) in
  its documented shape `celery -A flaskweb worker -Q judging --concurrency 8
  --prefetch-multiplier 1` (prefork), on its own PostgreSQL database migrated by its tree;
- a judge with requests_per_minute R (none when the scenario has no limit) and a new run of
  it over a dataset of N responses, created and started by a `python -c` in the build's tree
  (so its models are the build's own); the bench polls the run's counters in SQL until it is
  done, or until the pass's time cap (a shape far below the bound: the rate is then the slope
  of the completions after the first one, and the run is cancelled).

Figures per pass: judgments/s = completed / (finished_at - started_at) and its share of the
bound R/60; the provider calls the server accepted per second against the same bound (with
faults, retries are calls too); server 429s, attempts, the longest stretch without a
completion; peak memory of the worker processes (VmHWM from /proc, polled; summed over a
prefork pool's processes) and the most calls the server saw at once; CPU per judgment of
workers, server and PostgreSQL. Bookkeeping in SQL: exactly one judgment per response and
sample, every one with a recorded outcome (ok/partial/parse_failed/failed), the run's
counters equal to the rows. --series K runs each scenario K times, alternating the shapes,
and prints the medians with each shape's ratio to the previous build. JSON in
bench/out/judge_bench.json; logs in bench/out/judge_bench/.

Exit status 1 when a run that should have finished did not, a judgment is missing or
duplicated, or a counter disagrees with the rows.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import resource
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
WORK = OUT / "judge_bench"
PYTHON = str(ROOT / ".venv" / "bin" / "python")
FLASK_DIR = (ROOT / ".." / "shared" / "data" / "flask").resolve()

PG_PREFIX = "flaskweb_judgebench"
PROJECT = "judgebench"
TARGET = 0.95  # of the bound, clean passes of the single-build mode
FAULT_KINDS = "http_500,http_503,http_429,timeout,disconnect,truncated,garbage,wrong_json,empty"
OUTCOMES = ("ok", "partial", "parse_failed", "failed")
#: responses/s assumed for a scenario without a limit when sizing its run and its time cap
UNLIMITED_RATE = 150.0

#: --db-reuse-max: Celery's Django fix-up closes the task thread's database connection
#: before and after every task (CONN_MAX_AGE is not used by workers), unless the Celery
#: setting CELERY_DB_REUSE_MAX is set; this starts the worker with it, to measure the cost.
REUSE_WORKER = (
    "import os, sys\n"
    "from flaskweb.celery import app\n"
    "app.conf.CELERY_DB_REUSE_MAX = int(os.environ['JUDGEBENCH_DB_REUSE_MAX'])\n"
    "app.worker_main(sys.argv[3:])\n"
)

#: Run inside a build's tree (python -c, cwd = the tree): a local provider and a judge as a
#: site admin would declare them, a run over the dataset, started; prints the run as JSON.
START_RUN = """
import json, sys
import django
django.setup()
from annotation.models import Dataset
from judging.models import JudgeKind, Provider
from judging.services import judge_config_create, judge_run_create, judge_run_start
spec = json.loads(sys.argv[1])
dataset = Dataset.objects.get(project__slug=spec["project"], name=spec["dataset"])
provider, _ = Provider.objects.update_or_create(
    name=spec["provider"],
    defaults={"base_urls": [spec["url"]], "is_local": True, "approved": True},
)
judge = judge_config_create(
    project=dataset.project, name=spec["judge"], kind=JudgeKind.LLM, provider=provider,
    base_url=spec["url"], model=spec["model"], requests_per_minute=spec["rpm"],
    timeout_seconds=spec["timeout"], max_attempts=spec["max_attempts"],
)
run = judge_run_create(judge=judge, dataset=dataset)
started = judge_run_start(run=run)
print(json.dumps({"run": run.pk, "total": run.total, "started": started}))
"""

sys.path.insert(0, str(ROOT))


def log(message: str = "") -> None:
    print(message, flush=True)


# --- shapes and scenarios -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Shape:
    """Worker processes of one build on one kind of store."""

    name: str
    build: Path
    embedded: bool  # SQLite + file-system broker, no Redis
    pool: str
    concurrency: int
    processes: int
    queues: str
    prefetch: int | None
    beat: bool
    redis_url: str | None
    database: str | None  # PostgreSQL database (None: embedded SQLite)

    @property
    def var_dir(self) -> Path:
        return WORK / (f"var-{self.name}" if self.embedded else f"var-{self.database}")

    @property
    def store(self) -> str:
        """Where its data lives; shapes with the same store share the imported datasets."""
        return str(self.var_dir) if self.embedded else str(self.database)

    def describe(self) -> str:
        where = "SQLite + file-system broker" if self.embedded else f"PostgreSQL {self.database}"
        build = "this checkout" if self.build == ROOT else str(self.build)
        return (
            f"{self.processes} x celery -Q {self.queues} -P {self.pool} --concurrency "
            f"{self.concurrency}"
            + (f" --prefetch-multiplier {self.prefetch}" if self.prefetch else "")
            + (" -B" if self.beat else "")
            + f"; {where}; build {build}"
        )


@dataclasses.dataclass(frozen=True)
class Scenario:
    """What the provider does and what the judge asks of it."""

    name: str
    latency: float
    rpm: int | None  # the judge's requests_per_minute and the server's limit (None: none)
    size: int  # responses judged
    server_rpm: int | None = None  # the server's limit if not rpm
    latency_jitter: float = 0.0
    fault_rate: float = 0.0
    fault_kinds: str = FAULT_KINDS
    hang_seconds: float = 20.0
    judge_timeout: float | None = None  # default: max(30, 3 x latency)
    max_attempts: int = 4
    max_in_flight: int | None = None  # FLASKWEB_JUDGE_MAX_IN_FLIGHT of the workers
    about: str = ""

    @property
    def bound(self) -> float | None:
        return self.rpm / 60 if self.rpm else None

    @property
    def timeout(self) -> float:
        return self.judge_timeout or max(30.0, 3 * self.latency)

    @property
    def latency_spec(self) -> str:
        j = self.latency_jitter
        return f"{self.latency - j:g},{self.latency + j:g}" if j else f"{self.latency:g}"

    def expected_rate(self, shape: Shape | None) -> float:
        """What the pass is sized for: the bound, or UNLIMITED_RATE without one; a shape of
        one call per worker slot (the previous build) at most C / L."""
        rate = self.bound or UNLIMITED_RATE
        if self.max_in_flight:
            rate = min(rate, self.max_in_flight / self.latency)
        if shape is not None and shape.name == "previous":
            rate = min(rate, shape.concurrency * shape.processes / self.latency)
            if self.fault_rate:
                # its slots wait out hangs and backoffs: measured 2.8/s of 8 slots at 1 s
                rate *= 0.4
        return rate


#: The issue's scenarios; sizes give runs of about 20-40 latencies at the bound.
SCENARIOS = {
    s.name: s
    for s in (
        Scenario("rpm600", 1.0, 600, 400, about="R = 600/min, L = 1.0 s (bound 10/s)"),
        Scenario("rpm3000", 1.0, 3000, 2000, about="R = 3000/min, L = 1.0 s (bound 50/s)"),
        Scenario("rpm600-l10", 10.0, 600, 1800, about="R = 600/min, L = 10 s: 100 calls in flight"),
        Scenario("unlimited", 1.0, None, 6000, about="no limit, L = 1.0 s: responses/s"),
        Scenario(
            "faults",
            1.0,
            600,
            600,
            fault_rate=0.3,
            hang_seconds=20.0,
            judge_timeout=30.0,
            about="R = 600/min, 30 % faults incl. 20 s hangs, judge timeout 30 s",
        ),
        Scenario(
            "faults3000",
            1.0,
            3000,
            1000,
            fault_rate=0.3,
            hang_seconds=20.0,
            judge_timeout=30.0,
            about="R = 3000/min, 30 % faults incl. 20 s hangs, judge timeout 30 s: the tail",
        ),
        Scenario(
            "faults-no429",
            1.0,
            600,
            600,
            fault_rate=0.3 * 8 / 9,
            fault_kinds=",".join(k for k in FAULT_KINDS.split(",") if k != "http_429"),
            hang_seconds=20.0,
            judge_timeout=30.0,
            about="the same faults but injected 429s (26.7 % of calls, each kind 3.3 %)",
        ),
        Scenario(
            "inflight100",
            5.0,
            None,
            600,
            max_in_flight=100,
            about="no limit, L = 5 s, FLASKWEB_JUDGE_MAX_IN_FLIGHT=100: memory",
        ),
        Scenario(
            "inflight500",
            5.0,
            None,
            3000,
            max_in_flight=500,
            about="no limit, L = 5 s, FLASKWEB_JUDGE_MAX_IN_FLIGHT=500: memory",
        ),
    )
}
#: what --series runs by default, and which shapes each scenario is run on
DEFAULT_SCENARIOS = "rpm600,rpm3000,rpm600-l10,unlimited,faults,inflight100,inflight500"
SCENARIO_SHAPES = {
    "unlimited": ("production", "previous"),
    "faults": ("production", "previous"),
    "faults3000": ("production", "embedded"),
    "faults-no429": ("production",),
    "inflight100": ("production",),
    "inflight500": ("production",),
}
QUICK_SCENARIOS = "rpm600,rpm3000,unlimited,faults"
QUICK_SCALE = 0.3


def make_shapes(args) -> dict[str, Shape]:
    build = Path(args.build).resolve()
    shapes = {
        "production": Shape(
            "production",
            build,
            embedded=False,
            pool=args.pool,
            concurrency=args.concurrency,
            processes=args.workers,
            queues="judging",
            prefetch=1,
            beat=False,
            redis_url=args.redis_url,
            database=PG_PREFIX,
        ),
        "embedded": Shape(
            "embedded",
            build,
            embedded=True,
            pool=args.embedded_pool,
            concurrency=args.embedded_concurrency,
            processes=1,
            queues="default,imports,judging",
            prefetch=None,
            beat=not args.embedded_no_beat,
            redis_url=None,
            database=None,
        ),
    }
    if args.previous_build:
        shapes["previous"] = Shape(
            "previous",
            Path(args.previous_build).resolve(),
            embedded=False,
            pool=args.previous_pool,
            concurrency=args.previous_concurrency,
            processes=1,
            queues="judging",
            prefetch=1,
            beat=False,
            redis_url=args.previous_redis_url,
            database=f"{PG_PREFIX}_previous",
        )
    return shapes


# --- environment and databases --------------------------------------------------------------


def child_env(shape: Shape, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Production settings (DEBUG off: no query recording) of the shape's build, on its
    store: a bench PostgreSQL database and private Redis database, or the embedded default
    (no DATABASE_URL, no REDIS_URL) in a scratch FLASKWEB_VAR_DIR."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "PYTHONPATH")
        and not k.startswith("FLASKWEB_")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="flaskweb.settings",
        DJANGO_DEBUG="false",
        DJANGO_LOG_LEVEL="WARNING",
        FLASKWEB_CACHE_PREFIX="judgebench",
        FLASKWEB_VAR_DIR=str(shape.var_dir),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONPATH=str(shape.build),
    )
    if not shape.embedded:
        assert shape.redis_url
        env.update(
            DATABASE_URL=f"postgres://root@127.0.0.1:5432/{shape.database}",
            REDIS_URL=shape.redis_url,
            CELERY_BROKER_URL=shape.redis_url,
            DJANGO_SECRET_KEY="judgebench-only-not-a-secret",
        )
    env.update(extra or {})
    return env


def pg(sql: str, db: str = "postgres", params: tuple = ()):
    import psycopg

    with psycopg.connect(f"postgresql://root@127.0.0.1:5432/{db}", autocommit=True) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else None


class Store:
    """SQL reads of a shape's database, PostgreSQL or the embedded SQLite file."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        if self.shape.embedded:
            path = self.shape.var_dir / "flaskweb.sqlite3"
            with sqlite3.connect(path, timeout=30) as conn:
                return conn.execute(sql.replace("%s", "?"), params).fetchall()
        return pg(sql, str(self.shape.database), params) or []

    def execute(self, sql: str, params: tuple = ()) -> None:
        if self.shape.embedded:
            path = self.shape.var_dir / "flaskweb.sqlite3"
            conn = sqlite3.connect(path, timeout=30)
            try:
                with conn:
                    conn.execute(sql.replace("%s", "?"), params)
            finally:
                conn.close()
        else:
            pg(sql, str(self.shape.database), params)


def manage(shape: Shape, *command: str) -> str:
    result = subprocess.run(
        [PYTHON, "manage.py", *command],
        cwd=shape.build,
        env=child_env(shape),
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        sys.exit(
            f"manage.py {command[0]} ({shape.build}) failed:\n{result.stdout}\n{result.stderr}"
        )
    return result.stdout


def dataset_size(shape: Shape, name: str) -> int | None:
    try:
        rows = Store(shape).rows(
            "SELECT count(*) FROM annotation_response r JOIN annotation_item i ON i.id = r.item_id"
            " JOIN annotation_dataset d ON d.id = i.dataset_id JOIN annotation_project p"
            " ON p.id = d.project_id WHERE p.slug = %s AND d.name = %s",
            (PROJECT, name),
        )
    except Exception:
        return None
    return rows[0][0] or None


def fresh_store(shape: Shape) -> None:
    t0 = time.perf_counter()
    if shape.embedded:
        shutil.rmtree(shape.var_dir, ignore_errors=True)
    else:
        pg(f"DROP DATABASE IF EXISTS {shape.database} WITH (FORCE)")
        pg(f"CREATE DATABASE {shape.database}")
    shape.var_dir.mkdir(parents=True, exist_ok=True)
    manage(shape, "migrate", "--noinput", "-v", "0")
    log(f"{shape.store}: created and migrated by {shape.build} in {time.perf_counter() - t0:.1f} s")


def import_files(shape: Shape, dataset: str, files: list[str], preset: str) -> None:
    t0 = time.perf_counter()
    out = manage(
        shape,
        "import_dataset",
        *files,
        "--project",
        PROJECT,
        "--create-project",
        "--dataset",
        dataset,
        "--preset",
        preset,
        "--quiet-problems",
    )
    summary = next((line for line in out.splitlines() if "responses:" in line), out.strip())
    log(f"  imported {dataset}: {summary.strip()} ({time.perf_counter() - t0:.1f} s)")


def flask_files() -> list[str]:
    return [str(FLASK_DIR / "flask_evaluation.jsonl")] + sorted(
        str(p) for p in (FLASK_DIR / "model_outputs").glob("*.jsonl")
    )


def write_flask_subset(limit: int) -> list[str]:
    """The first `limit` responses of the release (items in file order, models by name) as
    release-format files: the same texts, fewer of them."""
    directory = WORK / f"flask-first-{limit}"
    (directory / "model_outputs").mkdir(parents=True, exist_ok=True)
    answers: dict[str, dict[int, str]] = {}
    for path in sorted((FLASK_DIR / "model_outputs").glob("*.jsonl")):
        with open(path, encoding="utf-8") as f:
            answers[path.stem] = {json.loads(line)["question_id"]: line for line in f if line}
    chosen: dict[str, list[str]] = {model: [] for model in answers}
    items, left = [], limit
    with open(FLASK_DIR / "flask_evaluation.jsonl", encoding="utf-8") as f:
        for line in f:
            if left <= 0:
                break
            idx = json.loads(line)["idx"]
            taken = 0
            for model in sorted(answers):
                if left > 0 and idx in answers[model]:
                    chosen[model].append(answers[model][idx])
                    left -= 1
                    taken += 1
            if taken:
                items.append(line)
    files = [directory / "flask_evaluation.jsonl"]
    files[0].write_text("".join(items), encoding="utf-8")
    for model, lines in chosen.items():
        if lines:
            path = directory / "model_outputs" / f"{model}.jsonl"
            path.write_text("".join(lines), encoding="utf-8")
            files.append(path)
    return [str(p) for p in files]


def write_synthetic(n: int, seed: int = 1234) -> list[str]:
    """N responses as generic JSONL: items of 5 models, 3 FLASK skills, a reference."""
    from annotation.catalogue_text import DOMAINS, SKILLS

    rng = random.Random(seed)
    words = [
        "the",
        "a",
        "model",
        "answer",
        "question",
        "because",
        "therefore",
        "result",
        "value",
        "data",
        "system",
        "function",
        "time",
        "energy",
        "cell",
        "market",
        "history",
        "language",
        "sentence",
        "number",
        "prime",
        "equation",
        "code",
        "loop",
        "memory",
        "health",
        "river",
        "climate",
        "policy",
        "law",
        "economy",
        "student",
        "book",
        "poem",
        "music",
        "example",
    ]

    def text(low: int, high: int) -> str:
        out: list[str] = []
        size = rng.randint(low, high)
        while sum(len(w) + 1 for w in out) < size:
            out.append(rng.choice(words))
        return " ".join(out).capitalize() + "."

    path = WORK / f"synthetic-{n}.jsonl"
    skills = [s.name for s in SKILLS]
    domains = [name for _key, name, _sub in DOMAINS]
    with open(path, "w", encoding="utf-8") as f:
        left, i = n, 0
        while left > 0:
            k = min(5, left)
            left -= k
            i += 1
            row = {
                "id": f"s{i:06d}",
                "instruction": text(80, 600),
                "reference": text(60, 400),
                "skills": rng.sample(skills, 3),
                "domains": [rng.choice(domains)],
                "difficulty": rng.randint(1, 5),
                "responses": [{"model": f"m{m}", "text": text(150, 900)} for m in range(k)],
            }
            f.write(json.dumps(row) + "\n")
    return [str(path)]


def dataset_name(args, size: int) -> str:
    if args.data == "synthetic":
        return f"synthetic-{size}"
    return f"FLASK-first-{size}" if size else "FLASK"


def prepare_store(args, shape: Shape, sizes: set[int], prepared: set[str]) -> None:
    """The shape's store with a dataset of each size (fresh unless --reuse-db finds them
    all); migrated by the shape's build either way. Once per store and bench."""
    if shape.store in prepared:
        return
    prepared.add(shape.store)
    WORK.mkdir(parents=True, exist_ok=True)
    names = {n: dataset_name(args, n) for n in sorted(sizes)}
    if args.reuse_db and all(dataset_size(shape, name) for name in names.values()):
        manage(shape, "migrate", "--noinput", "-v", "0")
        log(f"{shape.store}: reused ({', '.join(names.values())})")
        return
    fresh_store(shape)
    for size, name in names.items():
        if args.data == "synthetic":
            import_files(shape, name, write_synthetic(size), "lenient")
        elif size == 0:
            import_files(shape, name, flask_files(), "flask-release")
        else:
            import_files(shape, name, write_flask_subset(size), "flask-release")


# --- processes ------------------------------------------------------------------------------


def start_server(scenario: Scenario, tag: str, seed: int) -> tuple[subprocess.Popen, str]:
    rpm = scenario.server_rpm or scenario.rpm
    command = [
        PYTHON,
        "-m",
        "devtools.openai_server",
        "--port",
        "0",
        "--latency",
        scenario.latency_spec,
        "--fault-seed",
        str(seed),
        "--hang-seconds",
        str(scenario.hang_seconds),
    ]
    if rpm:
        command += ["--rpm", str(rpm)]
    if scenario.fault_rate:
        command += ["--fault-rate", str(scenario.fault_rate), "--fault-kinds", scenario.fault_kinds]
    stderr = WORK / f"server-{tag}.log"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=open(stderr, "w"),  # noqa: SIM115 (lives as long as the server)
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        sys.exit(f"the judge server did not start; see {stderr}")
    return proc, url


def worker_command(shape: Shape, n: int, db_reuse_max: int) -> list[str]:
    start = [PYTHON, "-c", REUSE_WORKER] if db_reuse_max else [PYTHON, "-m", "celery"]
    command = [*start, "-A", "flaskweb", "worker"]
    if shape.beat:
        command += ["-B", "--schedule", str(shape.var_dir / "celerybeat-schedule")]
    command += ["-Q", shape.queues, "-n", f"judgebench-{shape.name}{n}@%h"]
    if shape.pool != "prefork":
        command += ["-P", shape.pool]
    command += ["--concurrency", str(shape.concurrency)]
    if shape.prefetch:
        command += ["--prefetch-multiplier", str(shape.prefetch)]
    return [*command, "--loglevel", "INFO"]


def start_workers(
    shape: Shape, tag: str, env: dict[str, str], db_reuse_max: int
) -> list[subprocess.Popen]:
    procs = []
    for old in WORK.glob(f"worker-{tag}-*.log"):  # an earlier bench's, maybe more workers
        old.unlink()
    if db_reuse_max:
        env = env | {"JUDGEBENCH_DB_REUSE_MAX": str(db_reuse_max)}
    for n in range(shape.processes):
        log_path = WORK / f"worker-{tag}-{n}.log"
        proc = subprocess.Popen(
            worker_command(shape, n, db_reuse_max),
            cwd=shape.build,
            env=env,
            stdout=open(log_path, "wb"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a prefork pool goes with it
        )
        procs.append((proc, log_path))
    deadline = time.monotonic() + 90
    for proc, log_path in procs:
        while b" ready." not in log_path.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                stop([p for p, _ in procs])
                sys.exit(f"a worker did not start; see {log_path}")
            time.sleep(0.1)
    return [proc for proc, _ in procs]


def stop(procs: list[subprocess.Popen], *, timeout: float = 30) -> None:
    """SIGTERM (a warm shutdown), then SIGKILL to the process group after `timeout`."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
            proc.wait()


def purge_broker(shape: Shape) -> None:
    """Nothing left from an earlier (or interrupted) pass: the private Redis database is
    emptied (broker, cache, limiter); the file-system broker's queue folder too."""
    if shape.embedded:
        for sub in ("queue", "processed"):
            folder = shape.var_dir / "celery" / sub
            if folder.is_dir():
                for path in folder.iterdir():
                    path.unlink(missing_ok=True)
        return
    import redis

    client = redis.Redis.from_url(str(shape.redis_url))
    client.flushdb()
    client.close()


def queue_depth(shape: Shape, broker) -> int:
    if shape.embedded:
        folder = shape.var_dir / "celery" / "queue"
        return sum(1 for _ in folder.iterdir()) if folder.is_dir() else 0
    try:
        return int(broker.llen("judging"))
    except Exception:
        return -1


def process_tree(roots: list[int]) -> set[int]:
    """The roots and all their descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(pid))
    found, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def memory_kb(pid: int) -> tuple[int, int]:
    """(VmHWM, Pss) of a process in kB; (0, 0) once it is gone. The proportional set size
    shares a page among the processes that map it (a prefork pool's copy-on-write pages), so
    the Pss of a pool adds up, where the high-water marks count shared pages once for each."""
    hwm = pss = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
                break
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
                break
    except OSError:
        pass
    return hwm, pss


def cpu_snapshot(groups: dict[str, set[int]]) -> dict:
    """CPU seconds so far of each group's processes, of PostgreSQL, of this process, and of
    the whole machine (busy and total). PostgreSQL counts every database on the server (the
    workers' backends come and go, so they cannot be told apart by database): the live
    processes plus the postmaster's exited children."""
    tick = os.sysconf("SC_CLK_TCK")
    used: dict = {name: {} for name in groups} | {"postgres": {}}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / tick
        for name, pids in groups.items():
            if int(pid) in pids:
                used[name][pid] = cpu
        if comm == "postgres":
            if fields[1] == "1":  # the postmaster: add its exited backends' CPU
                cpu += (int(fields[13]) + int(fields[14])) / tick
            used["postgres"][pid] = cpu
    me = resource.getrusage(resource.RUSAGE_SELF)
    used["bench"] = me.ru_utime + me.ru_stime
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    used["machine_total"] = sum(values[:8]) / tick
    used["machine_busy"] = (sum(values[:8]) - values[3] - values[4]) / tick
    return used


def cpu_used(before: dict, after: dict) -> dict[str, float]:
    result = {}
    for key, value in after.items():
        if isinstance(value, dict):
            result[key] = sum(cpu - before[key].get(pid, 0.0) for pid, cpu in value.items())
        else:
            result[key] = value - before[key]
    return result


# --- one pass -------------------------------------------------------------------------------


def start_run(shape: Shape, scenario: Scenario, dataset: str, url: str, tag: str) -> dict:
    spec = {
        "project": PROJECT,
        "dataset": dataset,
        "provider": f"bench-{tag}",
        "url": url,
        "judge": f"bench {tag} {time.strftime('%Y-%m-%d %H:%M:%S')} {os.getpid()}",
        # a model name per pass: requests differ from any earlier run's, so none is answered
        # from the LLM cache
        "model": f"fake-judge-{tag}-{time.time_ns()}",
        "rpm": scenario.rpm,
        "timeout": scenario.timeout,
        "max_attempts": scenario.max_attempts,
    }
    result = subprocess.run(
        [PYTHON, "-c", START_RUN, json.dumps(spec)],
        cwd=shape.build,
        env=child_env(shape),
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        sys.exit(f"starting the run failed ({shape.build}):\n{result.stdout}\n{result.stderr}")
    started = json.loads(result.stdout.strip().splitlines()[-1])
    if not started["started"]:
        sys.exit(f"run {started['run']} did not start")
    return started


def cap_seconds(args, shape: Shape, scenario: Scenario, size: int) -> float:
    """When a pass stops waiting: 1.5 x the time at the expected rate, plus two latencies,
    at least 60 s; with faults (where every response must end recorded) 3 x, plus two hangs
    and two minutes of backoff. --timeout is the ceiling."""
    expected = size / scenario.expected_rate(shape)
    if scenario.fault_rate:
        cap = 3 * expected + 2 * scenario.hang_seconds + 120
    else:
        cap = 1.5 * expected + 2 * scenario.latency + 20
    return min(args.timeout, max(60.0, cap))


def run_pass(args, shape: Shape, scenario: Scenario, size: int, tag: str) -> dict:
    import redis

    store = Store(shape)
    purge_broker(shape)
    server, url = start_server(scenario, tag, args.seed)
    extra = {}
    if scenario.max_in_flight:
        extra["FLASKWEB_JUDGE_MAX_IN_FLIGHT"] = str(scenario.max_in_flight)
    workers = start_workers(shape, tag, child_env(shape, extra), args.db_reuse_max)
    broker = None if shape.embedded else redis.Redis.from_url(str(shape.redis_url))
    cap = cap_seconds(args, shape, scenario, size)
    dataset = dataset_name(args, size)
    from devtools.openai_server import admin_stats

    try:
        run = start_run(shape, scenario, dataset, url, tag)
        t0 = time.monotonic()
        log(
            f"\n[{tag}] {scenario.name} on {shape.name}: run {run['run']}, {run['total']:,}"
            f" judgments of {dataset}, server {url}, cap {cap:.0f} s"
        )
        pids = {p.pid for p in workers}
        groups = {"workers": process_tree(list(pids)), "server": {server.pid}}
        before = cpu_snapshot(groups)
        timeline: list[tuple[float, int]] = []
        depth: list[int] = []
        hwm: dict[int, int] = {}
        pss_peak = 0
        calls: list[tuple[float, int]] = []  # (t, requests the server accepted so far)
        next_print = t0 + 10
        capped = False
        polls = 0
        while True:
            time.sleep(0.5)
            polls += 1
            if polls % 4 == 0:
                try:
                    live = admin_stats(url)
                    calls.append((time.monotonic() - t0, live["requests"] - live["rate_limited"]))
                except OSError:
                    pass
            (row,) = store.rows(
                "SELECT status, done, failed, parse_failed FROM judging_judgerun WHERE id = %s",
                (run["run"],),
            )
            completed = row[1] + row[2] + row[3]
            now = time.monotonic() - t0
            timeline.append((round(now, 2), completed))
            depth.append(queue_depth(shape, broker))
            tree = process_tree(list(pids))
            groups["workers"] |= tree
            pss_now = 0
            for pid in tree:
                peak, pss = memory_kb(pid)
                hwm[pid] = max(hwm.get(pid, 0), peak)
                pss_now += pss
            pss_peak = max(pss_peak, pss_now)
            if time.monotonic() >= next_print:
                log(f"  {now:6.0f} s  {completed:>7,} / {run['total']:,}  queue {depth[-1]:,}")
                next_print += 10
            if row[0] != "running":
                break
            if now > cap:
                capped = True
                log(f"  .. {now:.0f} s: time cap of the pass; the rate is the slope so far")
                break
        for pid in process_tree(list(pids)):
            hwm[pid] = max(hwm.get(pid, 0), memory_kb(pid)[0])
        after = cpu_snapshot(groups)
        stats = admin_stats(url)
    finally:
        stop(workers, timeout=5 if capped else 30)
        stop([server], timeout=10)
        if broker is not None:
            broker.close()
    if capped:
        # nothing may redispatch it later (the embedded worker runs beat)
        store.execute(
            "UPDATE judging_judgerun SET status = 'cancelled' WHERE id = %s AND status = 'running'",
            (run["run"],),
        )
    mem = {
        "worker_hwm_mb": round(sum(hwm.values()) / 1024, 1),
        "main_hwm_mb": round(max((hwm.get(p, 0) for p in pids), default=0) / 1024, 1),
        "pss_peak_mb": round(pss_peak / 1024, 1),
        "processes": len(hwm),
    }
    return measure(
        shape,
        scenario,
        tag,
        run["run"],
        capped,
        timeline,
        depth,
        cpu_used(before, after),
        stats,
        mem,
        calls,
    )


def _timestamp(value) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def _at(series: list[tuple[float, int]], t: float) -> float:
    """The value of a sampled counter at time t (linear between samples)."""
    before = [(x, v) for x, v in series if x <= t]
    after = [(x, v) for x, v in series if x >= t]
    if not before:
        return float(after[0][1]) if after else 0.0
    if not after:
        return float(before[-1][1])
    (x0, v0), (x1, v1) = before[-1], after[0]
    return float(v0) if x1 == x0 else v0 + (v1 - v0) * (t - x0) / (x1 - x0)


def steady(timeline, calls, total) -> tuple[float | None, float | None, float | None]:
    """(judgments/s, accepted calls/s, t95) from the first completion until 95 % of the run's
    judgments were made: the run without its start (one latency) and its tail (the last
    retries, hangs and backoffs)."""
    first = next((t for t, n in timeline if n > 0), None)
    t95 = next((t for t, n in timeline if n >= 0.95 * total), None)
    if first is None or t95 is None or t95 - first < 1:
        return None, None, None
    span = t95 - first
    rate = (_at(timeline, t95) - _at(timeline, first)) / span
    call_rate = (_at(calls, t95) - _at(calls, first)) / span if calls else None
    return rate, call_rate, t95


def measure(shape, scenario, tag, run_id, capped, timeline, depth, cpu, stats, mem, calls) -> dict:
    store = Store(shape)
    ((status, total, done, failed, parse_failed, cached, started_at, finished_at),) = store.rows(
        "SELECT status, total, done, failed, parse_failed, cached, started_at, finished_at"
        " FROM judging_judgerun WHERE id = %s",
        (run_id,),
    )
    ((rows, distinct),) = store.rows(
        "SELECT (SELECT count(*) FROM judging_judgment WHERE run_id = %s),"
        " (SELECT count(*) FROM (SELECT DISTINCT response_id, sample_index"
        " FROM judging_judgment WHERE run_id = %s) AS d)",
        (run_id, run_id),
    )
    by_status = dict(
        store.rows(
            "SELECT status, count(*) FROM judging_judgment WHERE run_id = %s GROUP BY status",
            (run_id,),
        )
    )
    attempts = dict(
        store.rows(
            "SELECT attempts, count(*) FROM judging_judgment WHERE run_id = %s"
            " GROUP BY attempts ORDER BY attempts",
            (run_id,),
        )
    )
    ((cached_rows, latency_ms),) = store.rows(
        "SELECT (SELECT count(*) FROM judging_judgment WHERE run_id = %s AND from_cache),"
        " (SELECT avg(latency_ms) FROM judging_judgment WHERE run_id = %s AND attempts > 0)",
        (run_id, run_id),
    )
    completed = done + failed + parse_failed
    started, finished = _timestamp(started_at), _timestamp(finished_at)
    first = next((t for t, n in timeline if n > 0), None)
    if capped or not (started and finished):
        # a slope: completions after the first one, over the time since
        end_t, end_n = timeline[-1]
        first_n = next((n for t, n in timeline if n > 0), 0)
        wall = end_t
        rate = (end_n - first_n) / (end_t - first) if first is not None and end_t > first else 0.0
    else:
        wall = (finished - started).total_seconds()
        rate = completed / wall if wall else 0.0
    bound = scenario.bound
    s_rate, s_calls, t95 = (None, None, None) if capped else steady(timeline, calls, total)
    server = {
        k: stats.get(k)
        for k in ("requests", "completions", "rate_limited", "by_status", "by_fault")
    } | {"max_concurrent": stats.get("max_concurrent")}
    accepted = (server["requests"] or 0) - (server["rate_limited"] or 0)
    call_rate = accepted / wall if wall else 0.0
    problems = []
    if not capped:
        if status != "done":
            problems.append(f"run ended {status!r}, not 'done'")
        if rows != distinct:
            problems.append(f"{rows - distinct} duplicated judgments")
        if distinct != total:
            problems.append(f"{total - distinct} responses without a judgment")
        unknown = sorted(set(by_status) - set(OUTCOMES))
        if unknown:
            problems.append(f"judgments without a recorded outcome: {unknown}")
        counters = {
            "done": (done, by_status.get("ok", 0) + by_status.get("partial", 0)),
            "failed": (failed, by_status.get("failed", 0)),
            "parse_failed": (parse_failed, by_status.get("parse_failed", 0)),
            "cached": (cached, cached_rows),
        }
        problems += [f"counter {k} = {a} but {b} rows" for k, (a, b) in counters.items() if a != b]
    elif rows != distinct:
        problems.append(f"{rows - distinct} duplicated judgments")
    figures = {
        "tag": tag,
        "scenario": scenario.name,
        "shape": shape.name,
        "build": str(shape.build),
        "run_id": run_id,
        "responses": total,
        "status": status,
        "capped": capped,
        "wall_s": round(wall, 2),
        "completed": completed,
        "rate_per_s": round(rate, 2),
        "bound_per_s": round(bound, 2) if bound else None,
        "of_bound": round(rate / bound, 3) if bound else None,
        "calls_per_s": round(call_rate, 2),
        "calls_of_bound": round(call_rate / bound, 3) if bound else None,
        "steady_rate_per_s": round(s_rate, 2) if s_rate is not None else None,
        "steady_of_bound": round(s_rate / bound, 3) if bound and s_rate is not None else None,
        "steady_calls_of_bound": round(s_calls / bound, 3)
        if bound and s_calls is not None
        else None,
        "t95_s": t95,
        "first_completion_s": first,
        "longest_stall_s": _longest_stall(timeline),
        "rate_10s_windows": _window_rates(timeline, 10.0),
        "timeline_5s": _every(timeline, 5.0),
        "latency_ms_mean": round(float(latency_ms), 1) if latency_ms is not None else None,
        "tasks": worker_log_figures(tag),
        "judgments": rows,
        "duplicates": rows - distinct,
        "missing": total - distinct,
        "by_status": by_status,
        "attempts": {str(k): v for k, v in attempts.items()},
        "retried_calls": sum((int(a) - 1) * n for a, n in attempts.items() if int(a or 0) > 1),
        "server": server,
        "memory": mem,
        "queue_depth_max": max(depth) if depth else 0,
        "cpu_s": {k: round(v, 2) for k, v in cpu.items()},
        "cpu_ms_per_judgment": {
            k: round(cpu[k] * 1000 / completed, 2) if completed else None
            for k in ("workers", "server", "postgres")
        },
        "worker_cores": round(cpu["workers"] / wall, 2) if wall else None,
        "machine_busy": round(cpu["machine_busy"] / cpu["machine_total"], 3)
        if cpu["machine_total"]
        else None,
        "problems": problems,
    }
    report(figures)
    return figures


def worker_log_figures(tag: str) -> dict | None:
    """From the workers' INFO log of this pass: Celery task run times and retries, the
    engine's 'provider throttled: window N' lines (its concurrency window after 429s), and
    the lines at WARNING or above."""
    times, retries, windows, warnings = [], 0, [], 0
    for path in WORK.glob(f"worker-{tag}-*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if " succeeded in " in line:
                times.append(float(line.rsplit(" succeeded in ", 1)[1].split("s")[0]))
            elif " retry: Retry in " in line:
                retries += 1
            elif "throttled: window " in line:
                windows.append(int(line.rsplit("window ", 1)[1].split()[0]))
            if ": WARNING/" in line or ": ERROR/" in line or ": CRITICAL/" in line:
                warnings += 1
    if not times:
        return None
    times.sort()
    return {
        "count": len(times),
        "retries": retries,
        "mean": round(statistics.fmean(times), 3),
        "p50": round(times[len(times) // 2], 3),
        "p90": round(times[int(len(times) * 0.9)], 3),
        "max": round(times[-1], 3),
        "throttled": len(windows),
        "window_min": min(windows) if windows else None,
        "warnings": warnings,
    }


def _every(timeline: list[tuple[float, int]], step: float) -> list[tuple[float, int]]:
    out, next_t = [], 0.0
    for t, n in timeline:
        if t >= next_t:
            out.append((t, n))
            next_t = t + step
    return out


def _window_rates(timeline: list[tuple[float, int]], window: float) -> list[float]:
    rates, start = [], 0
    for i, (t, n) in enumerate(timeline):
        t0, n0 = timeline[start]
        if t - t0 >= window:
            rates.append(round((n - n0) / (t - t0), 1))
            start = i
    return rates


def _longest_stall(timeline: list[tuple[float, int]]) -> float:
    """The longest time between two completions after the first one."""
    longest, last_t, last_n = 0.0, None, 0
    for t, n in timeline:
        if n > last_n:
            if last_t is not None:
                longest = max(longest, t - last_t)
            last_t, last_n = t, n
    return round(longest, 1)


def report(f: dict) -> None:
    s, m = f["server"], f["memory"]
    how = "capped, slope" if f["capped"] else f"status {f['status']}"
    log(f"  {how}: {f['completed']:,} of {f['responses']:,} in {f['wall_s']} s")
    bound = (
        f" = {f['of_bound']:.1%} of the bound {f['bound_per_s']:.1f}/s; calls accepted "
        f"{f['calls_per_s']:.1f}/s = {f['calls_of_bound']:.1%}"
        if f["bound_per_s"]
        else f" (no limit); calls accepted {f['calls_per_s']:.1f}/s"
    )
    log(f"  rate {f['rate_per_s']:.1f} judgments/s{bound}; per 10 s: {f['rate_10s_windows']}")
    if f["steady_rate_per_s"] is not None:
        share = (
            f" = {f['steady_of_bound']:.1%} of the bound, calls accepted"
            f" {f['steady_calls_of_bound']:.1%}"
            if f["steady_of_bound"] is not None and f["steady_calls_of_bound"] is not None
            else ""
        )
        log(
            f"  steady (first completion to 95 % done at {f['t95_s']} s):"
            f" {f['steady_rate_per_s']:.1f} judgments/s{share}"
        )
    log(
        f"  server: {s['requests']:,} requests, {s['completions']:,} answers, "
        f"{s['rate_limited']:,} 429 from its limiter, max {s['max_concurrent']} at once; "
        f"first completion {f['first_completion_s']} s, longest stall {f['longest_stall_s']} s"
    )
    if s.get("by_fault"):
        log(f"  faults injected: {s['by_fault']}")
    log(
        f"  judgments by status {f['by_status']}; attempts {f['attempts']}"
        f" (call latency mean {f['latency_ms_mean']} ms)"
    )
    t = f["tasks"]
    if t:
        log(
            f"  celery tasks: {t['count']:,} run, {t['retries']:,} retried; run time mean"
            f" {t['mean']} s, p90 {t['p90']} s, max {t['max']} s; engine throttled"
            f" {t['throttled']} times (window down to {t['window_min']}); {t['warnings']}"
            " warnings or errors logged"
        )
    log(
        f"  SQL: {f['judgments']:,} judgments, {f['duplicates']} duplicated, {f['missing']} missing"
    )
    cpu = f["cpu_ms_per_judgment"]
    log(
        f"  memory: worker VmHWM {m['worker_hwm_mb']} MB ({m['processes']} processes),"
        f" Pss at most {m['pss_peak_mb']} MB (sampled);"
        f" CPU per judgment: workers {cpu['workers']} ms ({f['worker_cores']} cores),"
        f" server {cpu['server']} ms, postgres {cpu['postgres']} ms; machine"
        f" {f['machine_busy']:.0%} busy; queue max {f['queue_depth_max']:,}"
    )
    for problem in f["problems"]:
        log(f"  !! {problem}")


# --- series ---------------------------------------------------------------------------------


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(passes: list[dict]) -> list[dict]:
    """Medians per scenario and shape, in the order first run; ratios to the previous build."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for p in passes:
        groups.setdefault((p["scenario"], p["shape"]), []).append(p)
    rows = []
    for (scenario, shape), ps in groups.items():
        rows.append(
            {
                "scenario": scenario,
                "shape": shape,
                "runs": len(ps),
                "responses": _median([p["responses"] for p in ps]),
                "wall_s": _median([p["wall_s"] for p in ps]),
                "rate_per_s": _median([p["rate_per_s"] for p in ps]),
                "of_bound": _median([p["of_bound"] for p in ps]),
                "calls_of_bound": _median([p["calls_of_bound"] for p in ps]),
                "steady_rate_per_s": _median([p["steady_rate_per_s"] for p in ps]),
                "steady_of_bound": _median([p["steady_of_bound"] for p in ps]),
                "steady_calls_of_bound": _median([p["steady_calls_of_bound"] for p in ps]),
                "rate_429": _median([p["server"]["rate_limited"] for p in ps]),
                "retried_calls": _median([p["retried_calls"] for p in ps]),
                "throttled": _median([(p["tasks"] or {}).get("throttled", 0) for p in ps]),
                "longest_stall_s": _median([p["longest_stall_s"] for p in ps]),
                "max_in_flight": _median([p["server"]["max_concurrent"] for p in ps]),
                "worker_hwm_mb": _median([p["memory"]["worker_hwm_mb"] for p in ps]),
                "pss_peak_mb": _median([p["memory"]["pss_peak_mb"] for p in ps]),
                "worker_cpu_ms": _median([p["cpu_ms_per_judgment"]["workers"] for p in ps]),
                "capped": sum(1 for p in ps if p["capped"]),
                "problems": sum(len(p["problems"]) for p in ps),
                "each_rate": [p["rate_per_s"] for p in ps],
            }
        )
    base = {r["scenario"]: r["rate_per_s"] for r in rows if r["shape"] == "previous"}
    for r in rows:
        b = base.get(r["scenario"])
        r["ratio_to_previous"] = round(r["rate_per_s"] / b, 2) if b and r["rate_per_s"] else None
    return rows


def _pct(x: float | None) -> str:
    return f"{x:.1%}" if x is not None else "-"


def _num(x: float | None, fmt: str = ".1f") -> str:
    return format(x, fmt) if x is not None else "-"


def print_summary(rows: list[dict]) -> None:
    log(
        "\nscenario      shape        runs      N   wall s  judgm./s  of bound  calls/bound"
        "  steady  steady calls  x prev   429s  retried  throttled  stall s  in flight  VmHWM MB"
        "  Pss MB  CPU ms/j  capped  problems"
    )
    for r in rows:
        log(
            f"{r['scenario']:<13} {r['shape']:<11} {r['runs']:>5} {r['responses']:>6.0f}"
            f" {r['wall_s']:>8.1f} {r['rate_per_s']:>9.1f} {_pct(r['of_bound']):>9}"
            f" {_pct(r['calls_of_bound']):>12} {_pct(r['steady_of_bound']):>7}"
            f" {_pct(r['steady_calls_of_bound']):>13} {_num(r['ratio_to_previous'], '.2f'):>7}"
            f" {r['rate_429']:>6.0f} {r['retried_calls']:>8.0f} {r['throttled']:>10.0f}"
            f" {r['longest_stall_s']:>8.1f}"
            f" {r['max_in_flight']:>10.0f} {r['worker_hwm_mb']:>9.1f} {r['pss_peak_mb']:>7.1f}"
            f" {_num(r['worker_cpu_ms'], '.2f'):>9} {r['capped']:>7} {r['problems']:>9}"
        )
    mem = {r["scenario"]: r for r in rows if r["shape"] == "production"}
    if "inflight100" in mem and "inflight500" in mem:
        a, b = mem["inflight100"]["worker_hwm_mb"], mem["inflight500"]["worker_hwm_mb"]
        log(
            f"\npeak memory of the production worker: {a:.1f} MB at "
            f"{mem['inflight100']['max_in_flight']:.0f} in flight, {b:.1f} MB at "
            f"{mem['inflight500']['max_in_flight']:.0f} in flight: x {b / a:.2f}"
        )


def plan(args, shapes: dict[str, Shape]) -> list[tuple[Scenario, list[Shape]]]:
    """(scenario, shapes) in run order, from --scenarios/--shape or the single-build passes."""
    if args.scenarios:
        names = args.scenarios.split(",")
        unknown = [n for n in names if n not in SCENARIOS]
        if unknown:
            sys.exit(f"unknown scenarios {unknown}; known: {', '.join(SCENARIOS)}")
        chosen = [dataclasses.replace(SCENARIOS[n]) for n in names]
        chosen = [dataclasses.replace(s, size=max(20, round(s.size * args.scale))) for s in chosen]
    else:
        # the single-build passes of the command-line settings
        size = args.synthetic or args.limit
        clean = Scenario(
            "clean",
            args.latency,
            args.rpm or None,
            size,
            server_rpm=args.server_rpm or None,
            latency_jitter=args.latency_jitter,
            hang_seconds=args.hang_seconds,
            judge_timeout=args.judge_timeout,
            max_attempts=args.max_attempts,
        )
        fault_size = args.fault_limit if 0 < args.fault_limit < (size or 10**9) else size
        faults = dataclasses.replace(
            clean,
            name="faults",
            size=fault_size,
            fault_rate=args.fault_rate,
            fault_kinds=args.fault_kinds,
        )
        by_name = {"clean": clean, "faults": faults}
        chosen = [
            by_name[n]
            for n in args.passes.split(",")
            if n in by_name and (n != "faults" or args.fault_rate)
        ]
    wanted = args.shape.split(",")
    missing = [s for s in wanted if s not in shapes]
    if missing:
        sys.exit(f"unknown or unavailable shapes {missing} (previous needs --previous-build PATH)")
    out = []
    for scenario in chosen:
        allowed = (
            SCENARIO_SHAPES.get(scenario.name) if args.scenarios and not args.all_shapes else None
        )
        run_on = [shapes[s] for s in wanted if allowed is None or s in allowed]
        if run_on:
            out.append((scenario, run_on))
    return out


def size_for(scenario: Scenario, shape: Shape) -> int:
    """The scenario's N; for a shape of one call per worker slot (the previous build), as
    many as its slots judge in the time the scenario lasts at its expected rate."""
    seconds = scenario.size / scenario.expected_rate(None)
    rate = scenario.expected_rate(shape)
    return max(20, min(scenario.size, math.ceil(rate * seconds * 1.1)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_argument_group("series (scenarios x shapes)")
    mode.add_argument(
        "--series",
        type=int,
        default=0,
        help="run each scenario K times, alternating the shapes; print medians (implies"
        f" --scenarios {DEFAULT_SCENARIOS} unless given)",
    )
    mode.add_argument("--scenarios", default="", help=f"comma list of: {', '.join(SCENARIOS)}")
    mode.add_argument(
        "--series-for",
        default="",
        help="rounds of some scenarios if not K: NAME=K2[,NAME=K3] (long ones once, say)",
    )
    mode.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke test: --scenarios {QUICK_SCENARIOS} at {QUICK_SCALE:g} x their sizes, once",
    )
    mode.add_argument("--scale", type=float, default=1.0, help="multiply the scenarios' sizes")
    mode.add_argument(
        "--shape",
        default="production",
        help="comma list of: production, embedded, previous (default production)",
    )
    mode.add_argument(
        "--all-shapes",
        action="store_true",
        help="run every scenario on every shape (default: no-limit, fault and in-flight"
        " scenarios skip the embedded shape, in-flight ones the previous build)",
    )
    mode.add_argument("--build", default=str(ROOT), help="tree of production and embedded")
    mode.add_argument("--previous-build", default="", help="tree of the previous build")
    mode.add_argument("--previous-pool", default="prefork")
    mode.add_argument("--previous-concurrency", type=int, default=8)
    mode.add_argument("--embedded-pool", default="threads", help="rundemo's pool (or solo)")
    mode.add_argument("--embedded-concurrency", type=int, default=4)
    mode.add_argument("--embedded-no-beat", action="store_true", help="no -B in the worker")
    mode.add_argument(
        "--data",
        choices=("flask", "synthetic"),
        default="",
        help="FLASK release subsets (default when ../shared has it) or generated responses",
    )
    mode.add_argument(
        "--probe-server",
        action="store_true",
        help="measure only the local server's capacity (requests/s at 100, 250, 500 at once)",
    )
    mode.add_argument("--probe-client", nargs=4, help=argparse.SUPPRESS)

    single = parser.add_argument_group("single-build passes (without --scenarios)")
    single.add_argument(
        "--limit",
        type=int,
        default=6000,
        help="judge the first N responses of the release (0 = all ~25,500)",
    )
    single.add_argument(
        "--synthetic",
        type=int,
        default=0,
        help="judge N generated responses instead of the FLASK release",
    )
    single.add_argument("--latency", type=float, default=0.5, help="server latency, seconds")
    single.add_argument(
        "--latency-jitter",
        type=float,
        default=0.0,
        help="latency drawn from L +- this (server --latency MIN,MAX)",
    )
    single.add_argument(
        "--rpm",
        type=int,
        default=3000,
        help="R: the judge's requests_per_minute and the server's limit (0 = none)",
    )
    single.add_argument(
        "--server-rpm", type=int, default=0, help="server limit per minute if not R (0 = R)"
    )
    single.add_argument("--fault-rate", type=float, default=0.3, help="0 = no fault pass")
    single.add_argument(
        "--fault-limit",
        type=int,
        default=1500,
        help="the fault pass judges the first N of them (0 = all)",
    )
    single.add_argument("--fault-kinds", default=FAULT_KINDS)
    single.add_argument(
        "--hang-seconds",
        type=float,
        default=3.0,
        help="how long a 'timeout' fault hangs (the judge gives up sooner)",
    )
    single.add_argument("--judge-timeout", type=float, default=2.0, help="seconds per call")
    single.add_argument("--max-attempts", type=int, default=4)
    single.add_argument("--passes", default="clean,faults")

    common = parser.add_argument_group("both")
    common.add_argument(
        "--concurrency", type=int, default=8, help="production shape: threads per process"
    )
    common.add_argument("--workers", type=int, default=1, help="production shape: processes")
    common.add_argument("--pool", default="threads", help="production shape: Celery pool")
    common.add_argument("--timeout", type=float, default=900, help="give up a pass after (s)")
    common.add_argument("--seed", type=int, default=7, help="fault and latency draws")
    common.add_argument(
        "--redis-url",
        default="redis://127.0.0.1:6379/11",
        help="private Redis database of this build (emptied before every pass)",
    )
    common.add_argument(
        "--previous-redis-url",
        default="redis://127.0.0.1:6379/12",
        help="private Redis database of the previous build (emptied before every pass)",
    )
    common.add_argument(
        "--db-reuse-max",
        type=int,
        default=0,
        help="experiment: workers keep a database connection for N tasks (CELERY_DB_REUSE_MAX)",
    )
    common.add_argument(
        "--reuse-db",
        action="store_true",
        help="keep the bench databases if they already hold the datasets",
    )
    args = parser.parse_args()
    if args.probe_client:
        return probe_client(*args.probe_client)
    if args.probe_server:
        return probe_server(args)
    if args.quick:
        args.scenarios = args.scenarios or QUICK_SCENARIOS
        args.scale = QUICK_SCALE if args.scale == 1.0 else args.scale
        args.series = args.series or 1
    if args.series and not args.scenarios:
        args.scenarios = DEFAULT_SCENARIOS
    args.series = max(1, args.series)
    if not args.data:
        has_flask = (FLASK_DIR / "flask_evaluation.jsonl").is_file()
        args.data = "synthetic" if args.synthetic or not has_flask else "flask"
        if not has_flask and not args.synthetic:
            log(f"the FLASK release is not at {FLASK_DIR}: generated responses instead")

    shapes = make_shapes(args)
    order = plan(args, shapes)
    sizes: dict[str, set[int]] = {}
    for scenario, run_on in order:
        for shape in run_on:
            sizes.setdefault(shape.store, set()).add(size_for(scenario, shape))
    prepared: set[str] = set()
    for _scenario, run_on in order:
        for shape in run_on:
            prepare_store(args, shape, sizes[shape.store], prepared)

    log("\nshapes:")
    for name in {s.name for _, run_on in order for s in run_on}:
        log(f"  {name}: {shapes[name].describe()}")
    log("scenarios:")
    for scenario, run_on in order:
        log(
            f"  {scenario.name}: {scenario.about or scenario.latency_spec}; N = "
            + ", ".join(f"{size_for(scenario, s)} ({s.name})" for s in run_on)
        )

    rounds = {}
    for item in filter(None, args.series_for.split(",")):
        name, _, count = item.partition("=")
        rounds[name.strip()] = int(count)
    passes: list[dict] = []
    t_start = time.monotonic()
    for scenario, run_on in order:
        for k in range(rounds.get(scenario.name, args.series)):
            # alternate the shapes, starting with a different one each round
            rotated = run_on[k % len(run_on) :] + run_on[: k % len(run_on)]
            for shape in rotated:
                tag = f"{scenario.name}-{shape.name}-{k + 1}"
                passes.append(run_pass(args, shape, scenario, size_for(scenario, shape), tag))
    rows = summarize(passes)
    print_summary(rows)
    log(f"\nbench wall time {(time.monotonic() - t_start) / 60:.1f} min (without the imports)")
    figures = {
        "settings": {k: v for k, v in vars(args).items()},
        "shapes": {n: s.describe() for n, s in shapes.items()},
        "scenarios": [dataclasses.asdict(s) for s, _ in order],
        "summary": rows,
        "passes": passes,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "judge_bench.json").write_text(json.dumps(figures, indent=2, default=str) + "\n")
    log(f"figures written to {(OUT / 'judge_bench.json').relative_to(ROOT)}")
    if not args.scenarios:
        for p in passes:
            short = p["of_bound"] is not None and p["of_bound"] < TARGET
            if p["scenario"] == "clean" and not p["capped"] and short:
                log(f"!! {p['tag']}: {p['of_bound']:.1%} of the bound, target {TARGET:.0%}")
    return 1 if any(p["problems"] for p in passes) else 0


# --- the local server's own capacity --------------------------------------------------------


def probe_server(args) -> int:
    """Closed-loop load on the local server (latency L, no limit) from a separate client
    process: C connections each sending its next request when the last is answered, for
    10 s, with a FLASK-sized prompt. `raw` is a minimal asyncio HTTP/1.1 client (the server's
    own capacity); `httpx` is one httpx.AsyncClient with a pool of C connections; `httpx/25`
    the same calls spread over clients of 25 connections each."""
    latency = args.latency if args.latency != 0.5 else 1.0
    scenario = Scenario("probe", latency, None, 0)
    WORK.mkdir(parents=True, exist_ok=True)
    server, url = start_server(scenario, "probe", args.seed)
    log(f"server {url}, latency {latency:g} s; 10 s per line")
    log("client     conns   req/s  p50 s  p99 s  server CPU ms/req  server cores  client cores")
    try:
        for client in ("raw", "httpx", "httpx/25"):
            for conns in (100, 250, 500):
                out = subprocess.run(
                    [PYTHON, __file__, "--probe-client", url, client, str(conns), "10"],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    env=os.environ | {"JUDGEBENCH_SERVER_PID": str(server.pid)},
                )
                if out.returncode != 0:
                    log(out.stderr)
                    return 1
                r = json.loads(out.stdout)
                log(
                    f"{client:<10} {conns:>5} {r['rps']:>7.1f} {r['p50']:>6.2f} {r['p99']:>6.2f}"
                    f" {r['server_cpu_ms']:>18.2f} {r['server_cores']:>13.2f}"
                    f" {r['client_cores']:>13.2f}"
                )
    finally:
        stop([server], timeout=10)
    return 0


def probe_client(url: str, kind: str, conns_text: str, seconds_text: str) -> int:
    import asyncio
    from urllib.parse import urlsplit

    conns, seconds = int(conns_text), float(seconds_text)
    server_pid = int(os.environ["JUDGEBENCH_SERVER_PID"])
    fill = " ".join(["the model answer explains the result because the value of the data"] * 70)

    def body(i: int, n: int) -> bytes:
        prompt = (
            "Skills: Logical Correctness, Readability, Factuality\n[Instruction]\n"
            f"{fill}\n[Response]\n{fill} #{i}-{n}"
        )
        return json.dumps(
            {
                "model": "probe",
                "temperature": 0,
                "max_tokens": 512,
                "messages": [
                    {"role": "system", "content": "You are a fair judge."},
                    {"role": "user", "content": prompt},
                ],
            }
        ).encode()

    def server_cpu() -> float:
        fields = Path(f"/proc/{server_pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    latencies: list[float] = []
    stop_at = 0.0

    async def raw(i: int) -> None:
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            data = body(i, n)
            head = (
                f"POST {parts.path}/chat/completions HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
            )
            t = time.monotonic()
            writer.write(head.encode() + data)
            await writer.drain()
            status = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            await reader.readexactly(length)
            if b" 200 " in status:
                latencies.append(time.monotonic() - t)
        writer.close()

    async def main() -> dict:
        nonlocal stop_at
        import httpx

        shards = max(1, conns // 25) if kind == "httpx/25" else 1
        per = math.ceil(conns / shards)
        limits = httpx.Limits(max_connections=per, max_keepalive_connections=per)
        clients = [httpx.AsyncClient(limits=limits, timeout=60) for _ in range(shards)]

        async def pooled(i: int) -> None:
            n = 0
            while time.monotonic() < stop_at:
                n += 1
                t = time.monotonic()
                response = await clients[i % shards].post(
                    f"{url}/chat/completions",
                    content=body(i, n),
                    headers={"Content-Type": "application/json"},
                )
                if response.status_code == 200:
                    latencies.append(time.monotonic() - t)

        c0, me0, t0 = server_cpu(), time.process_time(), time.monotonic()
        stop_at = t0 + seconds
        one = raw if kind == "raw" else pooled
        await asyncio.gather(*(one(i) for i in range(conns)))
        wall = time.monotonic() - t0
        c1, me1 = server_cpu(), time.process_time()
        for client in clients:
            await client.aclose()
        latencies.sort()
        done = len(latencies)
        return {
            "rps": done / wall,
            "p50": latencies[done // 2] if done else 0.0,
            "p99": latencies[int(done * 0.99)] if done else 0.0,
            "server_cpu_ms": (c1 - c0) * 1000 / max(done, 1),
            "server_cores": (c1 - c0) / wall,
            "client_cores": (me1 - me0) / wall,
        }

    print(json.dumps(asyncio.run(main())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
