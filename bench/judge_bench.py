"""Judge-run benchmark: throughput and bookkeeping of a model-judge run on the production path.
Prints figures; it is not a test. See bench/README.md ("Judge-run benchmark").

    .venv/bin/python bench/judge_bench.py [--limit N | --synthetic N] [--latency L]
        [--concurrency C] [--workers W] [--rpm R] [--fault-rate F] [--reuse-db]

1. A fresh PostgreSQL database `flaskweb_judgebench` (dropped, created, migrated), and the
   real FLASK release (../shared/data/flask: flask_evaluation.jsonl + model_outputs/*.jsonl,
   about 25,500 responses) imported with `manage.py import_dataset ... --preset
   flask-release` as dataset FLASK. With --limit N, the first N responses (items in file
   order, models by name) are also imported as dataset FLASK-first-N, and the runs judge
   that. Without ../shared the FLASK part is skipped with a message; --synthetic N imports a
   generated dataset of N responses instead.
2. For each pass (clean, then with --fault-rate injected faults):
   - the local OpenAI-compatible server in a subprocess
     (`python -m devtools.openai_server --latency L --rpm R ...`), rate-limited server side;
   - W Celery worker subprocesses (`celery -A flaskweb worker -Q judging -P threads -c C/W`)
     on the bench database and a private Redis database (--redis-url, default db 11);
   - a judge with requests_per_minute=R, so the shared Redis limiter paces the calls, and a
     new run started from this process; it waits until the run is done.
3. Figures: completed judgments / (finished_at - started_at) against the bound
   min(R/60, C/L); 429s, retries, CPU per judgment of workers, server and PostgreSQL; and
   the bookkeeping checked in SQL (one judgment per response and sample, none missing,
   counters equal to the rows). JSON in bench/out/judge_bench.json; logs in
   bench/out/judge_bench/.

Exit status 1 when a run did not finish, a judgment is missing or duplicated, or a counter
disagrees with the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
WORK = OUT / "judge_bench"
PYTHON = str(ROOT / ".venv" / "bin" / "python")
FLASK_DIR = (ROOT / ".." / "shared" / "data" / "flask").resolve()

PG_DB = "flaskweb_judgebench"
DATABASE_URL = f"postgres://root@127.0.0.1:5432/{PG_DB}"
PROJECT = "judgebench"
TARGET = 0.95  # of the bound
FAULT_KINDS = "http_500,http_503,http_429,timeout,disconnect,truncated,garbage,wrong_json,empty"

#: --db-reuse-max: Celery's Django fix-up closes the task thread's database connection
#: before and after every task (CONN_MAX_AGE is not used by workers), unless the Celery
#: setting CELERY_DB_REUSE_MAX is set; this starts the worker with it, to measure the cost.
REUSE_WORKER = (
    "import os, sys\n"
    "from flaskweb.celery import app\n"
    "app.conf.CELERY_DB_REUSE_MAX = int(os.environ['JUDGEBENCH_DB_REUSE_MAX'])\n"
    "app.worker_main(sys.argv[3:])\n"
)

sys.path.insert(0, str(ROOT))


def log(message: str = "") -> None:
    print(message, flush=True)


# --- environment and database ---------------------------------------------------------------


def child_env(args) -> dict[str, str]:
    """Production settings (DEBUG off: no query recording) on the bench database and a
    private Redis database (broker, cache and the judges' rate limiter)."""
    env = dict(os.environ)
    env.update(
        DATABASE_URL=DATABASE_URL,
        REDIS_URL=args.redis_url,
        CELERY_BROKER_URL=args.redis_url,
        DJANGO_SETTINGS_MODULE="flaskweb.settings",
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY="judgebench-only-not-a-secret",
        DJANGO_LOG_LEVEL="WARNING",
        FLASKWEB_CACHE_PREFIX="judgebench",
        FLASKWEB_VAR_DIR=str(WORK / "var"),
        PYTHONDONTWRITEBYTECODE="1",
    )
    if args.db_reuse_max:
        env["JUDGEBENCH_DB_REUSE_MAX"] = str(args.db_reuse_max)
    return env


def pg(sql: str, db: str = "postgres", params: tuple = ()):
    import psycopg

    with psycopg.connect(f"postgresql://root@127.0.0.1:5432/{db}", autocommit=True) as conn:
        cursor = conn.execute(sql, params)
        return cursor.fetchall() if cursor.description else None


def manage(args, *command: str) -> str:
    result = subprocess.run(
        [PYTHON, "manage.py", *command],
        cwd=ROOT,
        env=child_env(args),
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        sys.exit(f"manage.py {command[0]} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def dataset_size(name: str) -> int | None:
    try:
        rows = pg(
            "SELECT count(*) FROM annotation_response r JOIN annotation_item i ON i.id = r.item_id"
            " JOIN annotation_dataset d ON d.id = i.dataset_id JOIN annotation_project p"
            " ON p.id = d.project_id WHERE p.slug = %s AND d.name = %s",
            PG_DB,
            (PROJECT, name),
        )
    except Exception:
        return None
    return rows[0][0] or None


def fresh_database(args) -> None:
    t0 = time.perf_counter()
    pg(f"DROP DATABASE IF EXISTS {PG_DB} WITH (FORCE)")
    pg(f"CREATE DATABASE {PG_DB}")
    manage(args, "migrate", "--noinput", "-v", "0")
    log(f"database {PG_DB}: created and migrated in {time.perf_counter() - t0:.1f} s")


def import_files(args, dataset: str, files: list[str], preset: str) -> None:
    t0 = time.perf_counter()
    out = manage(
        args,
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


def _subset_name(args, limit: int) -> str:
    if args.synthetic:
        return f"synthetic-{limit}"
    return f"FLASK-first-{limit}" if limit else "FLASK"


def prepare_data(args) -> dict[str, str] | None:
    """Import what the runs judge; return the dataset of each pass (None: nothing to judge).
    The clean pass judges --limit (or --synthetic) responses, the fault pass the first
    --fault-limit of them (0 = the same set)."""
    WORK.mkdir(parents=True, exist_ok=True)
    if not args.synthetic and not (FLASK_DIR / "flask_evaluation.jsonl").is_file():
        log(f"skipped: the FLASK release is not at {FLASK_DIR} (use --synthetic N instead)")
        return None
    size = args.synthetic or args.limit
    fault_size = args.fault_limit if 0 < args.fault_limit < (size or 10**9) else size
    names = {"clean": _subset_name(args, size), "faults": _subset_name(args, fault_size)}
    if args.reuse_db and all(dataset_size(n) for n in names.values()):
        log(f"database {PG_DB}: reused ({', '.join(sorted(set(names.values())))})")
        return names
    fresh_database(args)
    if args.synthetic:
        for n in sorted({size, fault_size}):
            import_files(args, _subset_name(args, n), write_synthetic(n), "lenient")
        return names
    import_files(args, "FLASK", flask_files(), "flask-release")
    for n in sorted({size, fault_size} - {0}):
        import_files(args, _subset_name(args, n), write_flask_subset(n), "flask-release")
    return names


def django_setup(args) -> None:
    os.environ.update(child_env(args))
    import django

    django.setup()


# --- processes ------------------------------------------------------------------------------


def start_server(args, name: str, faults: bool) -> tuple[subprocess.Popen, str, Path]:
    command = [
        PYTHON,
        "-m",
        "devtools.openai_server",
        "--port",
        "0",
        "--latency",
        args.latency_spec,
        "--rpm",
        str(args.server_rpm or args.rpm),
        "--fault-seed",
        str(args.seed),
        "--hang-seconds",
        str(args.hang_seconds),
    ]
    if faults:
        command += ["--fault-rate", str(args.fault_rate), "--fault-kinds", args.fault_kinds]
    stderr = WORK / f"server-{name}.log"
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        env=child_env(args),
        stdout=subprocess.PIPE,
        stderr=open(stderr, "w"),  # noqa: SIM115 (lives as long as the server)
        text=True,
    )
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        sys.exit(f"the judge server did not start; see {stderr}")
    return proc, url, stderr


def start_workers(args, name: str) -> list[subprocess.Popen]:
    procs = []
    per_worker = max(1, args.concurrency // args.workers)
    for old in WORK.glob(f"worker-{name}-*.log"):  # an earlier bench's, maybe more workers
        old.unlink()
    for n in range(args.workers):
        log_path = WORK / f"worker-{name}-{n}.log"
        # `celery -A flaskweb worker`, or the same through app.worker_main to try a setting
        start = [PYTHON, "-c", REUSE_WORKER] if args.db_reuse_max else [PYTHON, "-m", "celery"]
        proc = subprocess.Popen(
            [
                *start,
                "-A",
                "flaskweb",
                "worker",
                "-Q",
                "judging",
                "-n",
                f"judgebench{n}@%h",
                "-P",
                "threads",
                "-c",
                str(per_worker),
                "--without-heartbeat",
                "--without-mingle",
                "--without-gossip",
                "--loglevel",
                "INFO",
            ],
            cwd=ROOT,
            env=child_env(args),
            stdout=open(log_path, "wb"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
        )
        procs.append((proc, log_path))
    deadline = time.monotonic() + 60
    for proc, log_path in procs:
        while b" ready." not in log_path.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"a worker did not start; see {log_path}")
            time.sleep(0.1)
    return [proc for proc, _ in procs]


def stop(procs: list[subprocess.Popen], *, timeout: float = 30) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def purge_broker(args) -> None:
    """Nothing left in the private Redis database from an earlier, interrupted bench."""
    import redis

    client = redis.Redis.from_url(args.redis_url)
    keys = list(client.scan_iter(match="judging*")) + [b"unacked", b"unacked_index"]
    keys += list(client.scan_iter(match="ratelimit:judge:*"))
    client.delete(*keys)
    client.close()


def queue_depth(client) -> int:
    return sum(client.llen(k) for k in client.scan_iter(match="judging*"))


# --- CPU ------------------------------------------------------------------------------------


def cpu_snapshot(groups: dict[str, set[int]]) -> dict:
    """CPU seconds so far of each group's processes, of PostgreSQL, of this process, and of
    the whole machine (busy and total). PostgreSQL counts every database on the server (the
    workers' backends live for one task, so they cannot be told apart by database): the live
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


def run_pass(args, name: str, dataset_name: str, faults: bool) -> dict:
    import redis
    from django.db import close_old_connections

    from annotation.models import Dataset
    from devtools.openai_server import admin_stats
    from judging.models import JudgeKind, JudgeRun, Provider, RunStatus
    from judging.services import judge_config_create, judge_run_create, judge_run_start

    purge_broker(args)
    server, url, server_log = start_server(args, name, faults)
    workers = start_workers(args, name)
    broker = redis.Redis.from_url(args.redis_url)
    try:
        dataset = Dataset.objects.get(project__slug=PROJECT, name=dataset_name)
        # the local server, declared as a site admin would: local, keyless, approved
        provider, _ = Provider.objects.update_or_create(
            name=f"bench-{name}",
            defaults={"base_urls": [url], "is_local": True, "approved": True},
        )
        judge = judge_config_create(
            project=dataset.project,
            name=f"bench {name} {time.strftime('%Y-%m-%d %H:%M:%S')} {os.getpid()}",
            kind=JudgeKind.LLM,
            provider=provider,
            base_url=url,
            # a model name per pass: requests differ from any earlier run's, so none is
            # answered from the LLM cache
            model=f"fake-judge-{name}-{time.time_ns()}",
            requests_per_minute=args.rpm,
            timeout_seconds=args.judge_timeout,
            max_attempts=args.max_attempts,
        )
        run = judge_run_create(judge=judge, dataset=dataset)
        log(
            f"\n[{name}] run {run.pk}: {run.total:,} responses, server {url}"
            + (f", faults {args.fault_rate:.0%} of {args.fault_kinds}" if faults else "")
        )
        groups = {"workers": {p.pid for p in workers}, "server": {server.pid}}
        before = cpu_snapshot(groups)
        t0 = time.monotonic()
        assert judge_run_start(run=run)
        timeline, depth = [], []
        next_print = t0 + 10
        while True:
            time.sleep(0.25)
            close_old_connections()
            row = JudgeRun.objects.values("status", "done", "failed", "parse_failed").get(pk=run.pk)
            completed = row["done"] + row["failed"] + row["parse_failed"]
            now = time.monotonic() - t0
            timeline.append((round(now, 2), completed))
            depth.append(queue_depth(broker))
            if time.monotonic() >= next_print:
                log(f"  {now:6.0f} s  {completed:>7,} / {run.total:,}  queue {depth[-1]:,}")
                next_print += 10
            if row["status"] != RunStatus.RUNNING:
                break
            if now > args.timeout:
                log(f"  !! not done after {args.timeout:g} s: stopping the pass")
                break
        after = cpu_snapshot(groups)
        stats = admin_stats(url)
    finally:
        stop(workers)
        stop([server], timeout=10)
        broker.close()
    return measure(args, name, run.pk, faults, timeline, depth, cpu_used(before, after), stats)


def measure(args, name, run_id, faults, timeline, depth, cpu, stats) -> dict:
    from judging.models import JudgeRun

    run = JudgeRun.objects.get(pk=run_id)
    ((rows, distinct),) = pg(
        "SELECT count(*), count(DISTINCT (response_id, sample_index))"
        " FROM judging_judgment WHERE run_id = %s",
        PG_DB,
        (run_id,),
    )
    by_status = dict(
        pg(
            "SELECT status, count(*) FROM judging_judgment WHERE run_id = %s GROUP BY status",
            PG_DB,
            (run_id,),
        )
    )
    attempts = dict(
        pg(
            "SELECT attempts, count(*) FROM judging_judgment WHERE run_id = %s"
            " GROUP BY attempts ORDER BY attempts",
            PG_DB,
            (run_id,),
        )
    )
    ((cached,),) = pg(
        "SELECT count(*) FROM judging_judgment WHERE run_id = %s AND from_cache", PG_DB, (run_id,)
    )
    completed = run.done + run.failed + run.parse_failed
    wall = (
        (run.finished_at - run.started_at).total_seconds()
        if run.finished_at and run.started_at
        else timeline[-1][0]
    )
    bound = min(args.rpm / 60, args.concurrency / args.latency)
    rate = completed / wall if wall else 0.0
    problems = []
    if run.status != "done":
        problems.append(f"run ended {run.status!r}, not 'done'")
    if rows != distinct:
        problems.append(f"{rows - distinct} duplicated judgments")
    if distinct != run.total:
        problems.append(f"{run.total - distinct} responses without a judgment")
    counters = {
        "done": (run.done, by_status.get("ok", 0) + by_status.get("partial", 0)),
        "failed": (run.failed, by_status.get("failed", 0)),
        "parse_failed": (run.parse_failed, by_status.get("parse_failed", 0)),
        "cached": (run.cached, cached),
    }
    problems += [f"counter {k} = {a} but {b} rows" for k, (a, b) in counters.items() if a != b]
    ((latency_ms,),) = pg(
        "SELECT avg(latency_ms) FROM judging_judgment WHERE run_id = %s AND attempts > 0",
        PG_DB,
        (run_id,),
    )
    tasks = worker_log_figures(name)
    if tasks:
        # re-queues that used an attempt (a failed call) vs. waits for the shared limiter
        tasks["failed_call_retries"] = sum(
            (int(a) - 1) * n for a, n in attempts.items() if int(a) > 1
        )
        tasks["rate_limit_waits"] = tasks["retries"] - tasks["failed_call_retries"]
    # rate over windows of the timeline: how steady the run was
    steady = _window_rates(timeline, 30.0)
    figures = {
        "pass": name,
        "faults": faults,
        "run_id": run_id,
        "responses": run.total,
        "status": run.status,
        "wall_s": round(wall, 2),
        "completed": completed,
        "calls_per_s": round(rate, 2),
        "bound_per_s": round(bound, 2),
        "of_bound": round(rate / bound, 3) if bound else None,
        "rate_30s_windows": steady,
        "timeline_5s": _every(timeline, 5.0),
        "latency_ms_mean": round(float(latency_ms), 1) if latency_ms is not None else None,
        "task_s": tasks,
        # what C slots can do when each task holds its slot for the mean task time
        "slot_bound_per_s": round(args.concurrency / tasks["mean"], 2) if tasks else None,
        "judgments": rows,
        "duplicates": rows - distinct,
        "missing": run.total - distinct,
        "by_status": by_status,
        "attempts": {str(k): v for k, v in attempts.items()},
        "server": {
            k: stats.get(k)
            for k in ("requests", "completions", "rate_limited", "by_status", "by_fault")
        }
        | {"max_concurrent": stats.get("max_concurrent")},
        "queue_depth_max": max(depth) if depth else 0,
        "queue_empty_share": round(sum(1 for d in depth if d == 0) / len(depth), 3)
        if depth
        else None,
        "cpu_s": {k: round(v, 2) for k, v in cpu.items()},
        "cpu_ms_per_judgment": {
            k: round(cpu[k] * 1000 / completed, 2) if completed else None
            for k in ("workers", "server", "postgres")
        },
        "machine_busy": round(cpu["machine_busy"] / cpu["machine_total"], 3)
        if cpu["machine_total"]
        else None,
        "problems": problems,
    }
    report(figures)
    return figures


def worker_log_figures(name: str) -> dict | None:
    """Task run times and retries, from the workers' INFO log of this pass."""
    times, retries = [], 0
    for path in WORK.glob(f"worker-{name}-*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if " succeeded in " in line:
                times.append(float(line.rsplit(" succeeded in ", 1)[1].split("s")[0]))
            elif " retry: Retry in " in line:
                retries += 1
    if not times:
        return None
    times.sort()
    return {
        "count": len(times),
        "retries": retries,
        "mean": round(statistics.fmean(times), 3),
        "p50": round(times[len(times) // 2], 3),
        "p90": round(times[int(len(times) * 0.9)], 3),
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


def report(f: dict) -> None:
    s = f["server"]
    log(f"  status {f['status']}: {f['completed']:,} of {f['responses']:,} in {f['wall_s']} s")
    log(
        f"  rate {f['calls_per_s']:.1f} judgments/s = {f['of_bound']:.1%} of the bound "
        f"{f['bound_per_s']:.1f}/s; per 30 s: {f['rate_30s_windows']}"
    )
    t = f["task_s"]
    if t:
        log(
            f"  tasks: {t['count']:,} run, re-queued {t['failed_call_retries']:,} after a failed"
            f" call and {t['rate_limit_waits']:,} to wait for the shared limiter; run time mean"
            f" {t['mean']} s, p90 {t['p90']} s (call latency mean {f['latency_ms_mean']} ms):"
            f" C slots allow {f['slot_bound_per_s']}/s"
        )
    log(
        f"  server: {s['requests']:,} requests, {s['completions']:,} answers, "
        f"{s['rate_limited']:,} 429 from its limiter, max {s['max_concurrent']} at once"
    )
    if s.get("by_fault"):
        log(f"  faults injected: {s['by_fault']}")
    log(f"  judgments by status {f['by_status']}; attempts {f['attempts']}")
    log(
        f"  SQL: {f['judgments']:,} judgments, {f['duplicates']} duplicated, {f['missing']} missing"
    )
    cpu = f["cpu_ms_per_judgment"]
    log(
        f"  CPU per judgment: workers {cpu['workers']} ms, server {cpu['server']} ms, "
        f"postgres {cpu['postgres']} ms; machine {f['machine_busy']:.0%} busy; "
        f"queue max {f['queue_depth_max']:,}, empty {f['queue_empty_share']:.0%} of samples"
    )
    for problem in f["problems"]:
        log(f"  !! {problem}")


def table(passes: list[dict]) -> None:
    log(
        "\npass     responses   wall s   judgments/s   bound/s   of bound   429s   faults"
        "   recorded   dup   missing"
    )
    for f in passes:
        recorded = (f["responses"] - f["missing"]) / f["responses"] if f["responses"] else 0
        faults = sum((f["server"]["by_fault"] or {}).values())
        log(
            f"{f['pass']:<8} {f['responses']:>9,} {f['wall_s']:>8.1f} {f['calls_per_s']:>13.1f}"
            f" {f['bound_per_s']:>9.1f} {f['of_bound']:>10.1%} {f['server']['rate_limited']:>6}"
            f" {faults:>8,} {recorded:>10.1%} {f['duplicates']:>5} {f['missing']:>9}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--limit",
        type=int,
        default=6000,
        help="judge the first N responses of the release (0 = all ~25,500)",
    )
    parser.add_argument(
        "--synthetic",
        type=int,
        default=0,
        help="judge N generated responses instead of the FLASK release",
    )
    parser.add_argument("--latency", type=float, default=0.5, help="server latency, seconds")
    parser.add_argument(
        "--latency-jitter",
        type=float,
        default=0.0,
        help="latency drawn from L +- this (server --latency MIN,MAX)",
    )
    parser.add_argument("--concurrency", type=int, default=32, help="C: worker slots in all")
    parser.add_argument(
        "--workers", type=int, default=2, help="worker processes sharing the C slots (-c C/W each)"
    )
    parser.add_argument(
        "--rpm",
        type=int,
        default=3000,
        help="R: the judge's requests_per_minute and the server's limit",
    )
    parser.add_argument(
        "--server-rpm", type=int, default=0, help="server limit per minute if not R (0 = R)"
    )
    parser.add_argument("--fault-rate", type=float, default=0.3, help="0 = no fault pass")
    parser.add_argument(
        "--fault-limit",
        type=int,
        default=1500,
        help="the fault pass judges the first N of them (0 = all)",
    )
    parser.add_argument("--fault-kinds", default=FAULT_KINDS)
    parser.add_argument(
        "--hang-seconds",
        type=float,
        default=3.0,
        help="how long a 'timeout' fault hangs (the judge gives up sooner)",
    )
    parser.add_argument("--judge-timeout", type=float, default=2.0, help="seconds per call")
    parser.add_argument("--max-attempts", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=900, help="give up a pass after (s)")
    parser.add_argument("--seed", type=int, default=7, help="fault and latency draws")
    parser.add_argument("--passes", default="clean,faults")
    parser.add_argument(
        "--redis-url",
        default="redis://127.0.0.1:6379/11",
        help="private Redis database: broker, cache, rate limiter",
    )
    parser.add_argument(
        "--db-reuse-max",
        type=int,
        default=0,
        help="experiment: workers keep a database connection for N tasks (CELERY_DB_REUSE_MAX)",
    )
    parser.add_argument(
        "--reuse-db",
        action="store_true",
        help="keep flaskweb_judgebench if it already holds the dataset",
    )
    args = parser.parse_args()
    jitter = args.latency_jitter
    args.latency_spec = (
        f"{args.latency - jitter:g},{args.latency + jitter:g}" if jitter else f"{args.latency:g}"
    )

    datasets = prepare_data(args)
    if datasets is None:
        return 0
    django_setup(args)
    log(
        f"judges: latency {args.latency_spec} s, C = {args.concurrency} slots in "
        f"{args.workers} worker(s), R = {args.rpm}/min; bound min(R/60, C/L) = "
        f"{min(args.rpm / 60, args.concurrency / args.latency):.1f} judgments/s"
    )
    passes = []
    for name in args.passes.split(","):
        faults = name == "faults"
        if faults and not args.fault_rate:
            continue
        passes.append(run_pass(args, name, datasets[name], faults))
    table(passes)
    figures = {
        "settings": {k: v for k, v in vars(args).items() if k not in ("latency_spec",)},
        "datasets": datasets,
        "passes": passes,
        "median_of_windows": {
            p["pass"]: statistics.median(p["rate_30s_windows"]) if p["rate_30s_windows"] else None
            for p in passes
        },
    }
    (OUT / "judge_bench.json").write_text(json.dumps(figures, indent=2) + "\n")
    log(f"\nfigures written to {(OUT / 'judge_bench.json').relative_to(ROOT)}")
    clean = [p for p in passes if not p["faults"]]
    short = [p for p in clean if p["of_bound"] is not None and p["of_bound"] < TARGET]
    for p in short:
        log(f"!! {p['pass']}: {p['of_bound']:.1%} of the bound, target {TARGET:.0%}")
    return 1 if any(p["problems"] for p in passes) else 0


if __name__ == "__main__":
    sys.exit(main())
