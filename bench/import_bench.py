"""Dataset-import benchmark: throughput and peak memory of `manage.py import_dataset` on
PostgreSQL. Prints figures; it is not a test. See bench/README.md.

    .venv/bin/python bench/import_bench.py [--synthetic-responses N] [--repeat K]

Every import runs as its own `manage.py import_dataset` subprocess against a fresh
PostgreSQL database (flaskweb_bench); wall time is measured around the subprocess and peak
RSS is the child's own ru_maxrss, from os.wait4().
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
OUT = BENCH / "out"
PYTHON = str(ROOT / ".venv" / "bin" / "python")
FLASK_DIR = (ROOT / ".." / "shared" / "data" / "flask").resolve()
FLASK_POLICIES = ["invalid_difficulty", "invalid_domain", "skill_count", "empty_response"]

PG_HOST, PG_PORT, PG_USER, PG_DB = "127.0.0.1", 5432, "root", "flaskweb_bench"
DATABASE_URL = f"postgres://{PG_USER}@{PG_HOST}:{PG_PORT}/{PG_DB}"
PROJECT = "bench"

TARGET_RESPONSES_PER_S = 20_000
#: Below this, "wall minus start-up" is mostly noise and no import-phase rate is given.
MIN_IMPORT_S = 0.2
#: Start-up baseline runs (median).
BASELINE_RUNS = 5
#: Bump when the synthetic generator changes, so cached files are regenerated.
GENERATOR_VERSION = 1
MODELS = 20

SKILLS = [
    "Logical Robustness",
    "Logical Correctness",
    "Logical Efficiency",
    "Factuality",
    "Commonsense Understanding",
    "Comprehension",
    "Insightfulness",
    "Completeness",
    "Metacognition",
    "Conciseness",
    "Readability",
    "Harmlessness",
]
DOMAINS = [
    "Humanities",
    "Language",
    "Culture",
    "Health",
    "History",
    "Natural Science",
    "Math",
    "Social Science",
    "Technology",
    "Coding",
]


def log(msg: str) -> None:
    print(msg, flush=True)


# --- synthetic data ---------------------------------------------------------------------------

_VOCABULARY = (
    "the a model answer question because therefore however result value data system user "
    "function time energy cell protein market price history war culture language grammar "
    "sentence number prime equation integral matrix vector code python loop array memory "
    "health diet sleep exercise heart patient doctor river mountain climate carbon policy "
    "law court vote economy tax trade student teacher school book poem novel author music "
    "first second finally also which that this these those should could would might will "
    "is are was were be been has have had does did not only very more most less least "
    "example consider step explain because thus hence note important approximately about "
    "café naïve résumé façade über straße — “quoted” 日本語 中文 русский ελληνικά 😀 "
    "x=3 f(x) O(n·log n) <tag> & 100% $5 C++ a/b"
)
_WORDS = _VOCABULARY.split()


def _sentence_pool(rng: random.Random, size: int = 2048) -> list[str]:
    pool = []
    for _ in range(size):
        words = rng.choices(_WORDS, k=rng.randint(5, 16))
        sentence = " ".join(words)
        sentence = sentence[0].upper() + sentence[1:] + rng.choice(".....?!:")
        if rng.random() < 0.08:
            sentence += "\n"
        if rng.random() < 0.03:
            sentence = f'He said "{sentence}" \\ then left.'
        pool.append(sentence)
    return pool


def _text(rng: random.Random, pool: list[str], low: int, high: int) -> str:
    target = rng.randint(low, high)
    parts: list[str] = []
    size = 0
    while size < target:
        sentence = pool[int(rng.random() * len(pool))]
        parts.append(sentence)
        size += len(sentence) + 1
    return " ".join(parts)[:high]


@dataclass
class SyntheticSet:
    responses: int
    items: int
    models: int
    files: list[str]
    bytes: int
    seed: int
    reused: bool = False


def generate_synthetic(n: int, seed: int, regenerate: bool) -> SyntheticSet:
    """Write N responses as generic JSONL into bench/out/synth-N-seedS/ (streaming, seeded).

    items.jsonl: one line per item with its inline response of model m01;
    responses.jsonl: response-only lines for m02..m20, item-major. Items = ceil(N / 20);
    the last item gets fewer models when N is not a multiple of 20.
    """
    directory = OUT / f"synth-{n}-seed{seed}"
    manifest_path = directory / "manifest.json"
    wanted = {"version": GENERATOR_VERSION, "responses": n, "seed": seed, "models": MODELS}
    if not regenerate and manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        files = [directory / f for f in manifest.get("files", [])]
        if {k: manifest.get(k) for k in wanted} == wanted and all(f.exists() for f in files):
            return SyntheticSet(
                n,
                manifest["items"],
                MODELS,
                [str(f) for f in files],
                manifest["bytes"],
                seed,
                reused=True,
            )
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    rng = random.Random(seed)
    pool = _sentence_pool(rng)
    items = math.ceil(n / MODELS)
    models = [f"m{k:02d}" for k in range(1, MODELS + 1)]
    items_path, responses_path = directory / "items.jsonl", directory / "responses.jsonl"
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode
    left = n
    with (
        open(items_path, "w", encoding="utf-8", buffering=1 << 20) as items_out,
        open(responses_path, "w", encoding="utf-8", buffering=1 << 20) as responses_out,
    ):
        for i in range(1, items + 1):
            item_id = f"s-{i:06d}"
            k = min(MODELS, left)
            left -= k
            item = {
                "id": item_id,
                "instruction": _text(rng, pool, 80, 600),
                "reference": _text(rng, pool, 60, 400),
                "skills": rng.sample(SKILLS, 3),
                "domains": rng.sample(DOMAINS, rng.choice((1, 1, 1, 2))),
                "difficulty": rng.randint(1, 5),
                "task": "synthetic",
                "responses": [{"model": models[0], "text": _text(rng, pool, 150, 450)}],
            }
            items_out.write(dumps(item) + "\n")
            for model in models[1:k]:
                line = {"item": item_id, "model": model, "text": _text(rng, pool, 150, 450)}
                responses_out.write(dumps(line) + "\n")
    files = [items_path, responses_path]
    size = sum(f.stat().st_size for f in files)
    manifest = {**wanted, "items": items, "files": [f.name for f in files], "bytes": size}
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return SyntheticSet(n, items, MODELS, [str(f) for f in files], size, seed)


def write_tiny(directory: Path) -> str:
    """One item with one response: measures process + Django start-up and the fixed costs."""
    path = directory / "tiny.jsonl"
    item = {
        "id": "t-1",
        "instruction": "Say hello.",
        "reference": "Hello.",
        "skills": ["Factuality", "Comprehension", "Readability"],
        "domains": ["Language"],
        "difficulty": 1,
        "task": "tiny",
        "responses": [{"model": "m01", "text": "Hello!"}],
    }
    path.write_text(json.dumps(item) + "\n")
    return str(path)


# --- database ---------------------------------------------------------------------------------


def psql(sql: str, db: str = "postgres") -> str:
    result = subprocess.run(
        [
            "psql",
            "-h",
            PG_HOST,
            "-p",
            str(PG_PORT),
            "-U",
            PG_USER,
            "-d",
            db,
            "-v",
            "ON_ERROR_STOP=1",
            "-Atqc",
            sql,
        ],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise RuntimeError(f"psql {sql!r} failed: {result.stderr.strip()}")
    return result.stdout.strip()


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=DATABASE_URL,
        DJANGO_DEBUG="true",
        # keep the file cache (import progress) and media out of the repo's var/
        FLASKWEB_VAR_DIR=str(OUT / "var"),
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.pop("REDIS_URL", None)
    return env


def fresh_database() -> str:
    psql(f"DROP DATABASE IF EXISTS {PG_DB}")
    psql(f"CREATE DATABASE {PG_DB}")
    t0 = time.perf_counter()
    result = subprocess.run(
        [PYTHON, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise RuntimeError(f"migrate failed:\n{result.stdout}\n{result.stderr}")
    return f"{time.perf_counter() - t0:.1f}s"


def database_size() -> int:
    return int(psql(f"SELECT pg_database_size('{PG_DB}')"))


class BackendWatcher(threading.Thread):
    """Samples the private memory (RssAnon) of the PostgreSQL backend serving the import.

    Finds `postgres: ... root flaskweb_bench ...` in /proc (same machine only). A sample
    every 0.1 s; the figure is the largest sample, so it can miss a short spike.
    """

    TITLE = re.compile(rf"^postgres: (?:\S+: )?{PG_USER} {PG_DB} ")

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.peak_kb = 0
        self.pids: set[int] = set()

    def _scan(self) -> set[int]:
        found = set()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    title = f.read(200).decode(errors="replace")
            except OSError:
                continue
            if self.TITLE.match(title):
                found.add(int(entry.name))
        return found

    def _sample(self, pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        self.peak_kb = max(self.peak_kb, int(line.split()[1]))
                        return True
        except OSError:
            pass
        return False

    def run(self) -> None:
        live: set[int] = set()
        while not self.stop.wait(0.1):
            if not live:
                live = self._scan()
                self.pids |= live
            live = {pid for pid in live if self._sample(pid)}


# --- one import -------------------------------------------------------------------------------


@dataclass
class Run:
    label: str
    dataset: str
    responses_in_files: int
    wall_s: float
    peak_rss_kb: int
    backend_anon_kb: int
    exit_code: int
    user_s: float
    sys_s: float
    items_new: int | None = None
    items_unchanged: int | None = None
    responses_new: int | None = None
    responses_unchanged: int | None = None
    log: str = ""
    error: str = ""
    phases: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.error


_COUNTS = re.compile(r"items: (\d+) new, (\d+) unchanged; responses: (\d+) new, (\d+) unchanged")


def run_import(
    label: str,
    files: list[str],
    dataset: str,
    responses: int,
    extra: list[str],
    expect_new: int,
    phases: bool,
    cprofile: bool = False,
) -> Run:
    """Import FILES into DATASET in a subprocess; check it created EXPECT_NEW responses."""
    args = [
        "import_dataset",
        *files,
        "--project",
        PROJECT,
        "--create-project",
        "--dataset",
        dataset,
        "--quiet-problems",
        *extra,
    ]
    env = child_env()
    logs = OUT / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{dataset}.log"
    phases_path = logs / f"{dataset}.phases.json"
    if phases:
        # Same command, through bench/_phases.py, which times the import's phases.
        cmd = [PYTHON, str(BENCH / "_phases.py"), str(phases_path), *args]
        phases_path.unlink(missing_ok=True)
    else:
        cmd = [PYTHON, "manage.py", *args]
    profile_path = OUT / "logs" / f"{dataset}.pstats"
    if phases and cprofile:
        env["BENCH_CPROFILE"] = str(profile_path)
    with open(log_path, "wb") as out:
        watcher = BackendWatcher()
        watcher.start()
        env["BENCH_T0"] = repr(time.time())
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        watcher.stop.set()
        watcher.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = log_path.read_text(errors="replace")
    run = Run(
        label,
        dataset,
        responses,
        wall,
        usage.ru_maxrss,
        watcher.peak_kb,
        proc.returncode,
        usage.ru_utime,
        usage.ru_stime,
        log=str(log_path.relative_to(ROOT)),
    )
    match = _COUNTS.search(text)
    if match:
        run.items_new, run.items_unchanged, run.responses_new, run.responses_unchanged = (
            int(g) for g in match.groups()
        )
    if phases and phases_path.exists():
        run.phases = json.loads(phases_path.read_text())
        run.phases["exit"] = max(wall - run.phases.pop("handle_end", wall), 0.0)
        if cprofile and profile_path.exists():
            run.phases["profile"] = str(profile_path.relative_to(ROOT))
    if proc.returncode != 0 or run.responses_new is None:
        run.error = f"exit status {proc.returncode}"
    elif (run.responses_new, run.responses_new + run.responses_unchanged) != (
        expect_new,
        responses,
    ):
        run.error = (
            f"expected {expect_new} new of {responses} responses, got {run.responses_new} new "
            f"+ {run.responses_unchanged} unchanged"
        )
    if run.error:
        tail = "\n".join(text.splitlines()[-15:])
        log(f"    !! {label} failed: {run.error}; {log_path}:\n{tail}")
    return run


def show(run: Run) -> None:
    rate = run.responses_in_files / run.wall_s if run.wall_s else 0
    pg = f"{run.backend_anon_kb / 1024:5.1f} MB" if run.backend_anon_kb else "   - MB"
    counts = f"{run.responses_new} new, {run.responses_unchanged} unchanged" if run.ok else "FAILED"
    log(
        f"    {run.label:<28} {run.wall_s:7.2f}s {rate:>8,.0f} resp/s  "
        f"RSS {run.peak_rss_kb / 1024:5.1f} MB  pg {pg}  "
        f"cpu {run.user_s + run.sys_s:5.2f}s  [{counts}]"
    )
    if run.phases:
        show_phases(run.phases)


def show_phases(p: dict) -> None:
    order = [
        ("python+django start", "startup"),
        ("job + catalogue", "setup"),
        ("parse + stage (Python)", "parse"),
        ("COPY to staging", "copy"),
        ("set checks (SQL)", "check"),
        ("insert (SQL)", "apply"),
        ("model coverage", "coverage"),
        ("commit", "commit"),
        ("finish + report", "finish"),
        ("exit", "exit"),
    ]
    parts = [f"{name} {max(p[key], 0.0):.2f}s" for name, key in order if key in p]
    log("      phases: " + "; ".join(parts))
    for sql, seconds in p.get("slow_sql", [])[:8]:
        log(f"        {seconds:7.2f}s  {sql}")
    if p.get("profile"):
        import io
        import pstats

        buf = io.StringIO()
        stats = pstats.Stats(str(ROOT / p["profile"]), stream=buf)
        stats.sort_stats("tottime").print_stats(12)
        body = buf.getvalue()
        start = body.find("   ncalls")
        log(f"      cProfile ({p['profile']}), top 12 by own time:")
        for line in body[start:].rstrip().splitlines():
            log(f"        {line[:150]}")


# --- scenarios --------------------------------------------------------------------------------


@dataclass
class Row:
    scenario: str
    responses: int
    file_mb: float
    runs: int
    wall_s: float
    import_s: float | None
    rate_wall: float
    rate_import: float | None
    peak_rss_mb: float
    peak_rss_max_mb: float
    backend_anon_mb: float
    ok: bool


def summarize(scenario: str, runs: list[Run], file_bytes: int, startup: float | None) -> Row:
    """Medians over the runs (all of them; a failed run makes the row FAILED)."""
    wall = statistics.median(r.wall_s for r in runs)
    responses = runs[0].responses_in_files
    import_s = wall - startup if startup is not None else None
    if import_s is not None and import_s < MIN_IMPORT_S:
        import_s = None  # too short to tell apart from start-up noise
    return Row(
        scenario=scenario,
        responses=responses,
        file_mb=file_bytes / 1e6,
        runs=len(runs),
        wall_s=wall,
        import_s=import_s,
        rate_wall=responses / wall,
        rate_import=responses / import_s if import_s else None,
        peak_rss_mb=statistics.median(r.peak_rss_kb for r in runs) / 1024,
        peak_rss_max_mb=max(r.peak_rss_kb for r in runs) / 1024,
        backend_anon_mb=statistics.median(r.backend_anon_kb for r in runs) / 1024,
        ok=all(r.ok for r in runs),
    )


def table(rows: list[Row]) -> str:
    head = (
        f"{'scenario':<33} {'responses':>9} {'file MB':>7} {'runs':>4} {'wall s':>7} "
        f"{'import s':>8} {'resp/s wall':>11} {'resp/s imp':>10} {'RSS MB':>6} {'(max)':>6} "
        f"{'pg MB':>6}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        imp = f"{r.import_s:8.2f}" if r.import_s is not None else f"{'-':>8}"
        rate_imp = f"{r.rate_import:>10,.0f}" if r.rate_import else f"{'-':>10}"
        pg = f"{r.backend_anon_mb:>6.1f}" if r.backend_anon_mb else f"{'-':>6}"
        lines.append(
            f"{r.scenario:<33} {r.responses:>9,} {r.file_mb:>7.1f} {r.runs:>4} {r.wall_s:>7.2f} "
            f"{imp} {r.rate_wall:>11,.0f} {rate_imp} {r.peak_rss_mb:>6.1f} "
            f"{r.peak_rss_max_mb:>6.1f} {pg}" + ("" if r.ok else "  FAILED")
        )
    lines.append(
        "wall = whole `manage.py import_dataset` command (median); import = wall minus the "
        "start-up baseline;\nRSS = importer's peak RSS (ru_maxrss); pg = largest sampled "
        "private memory (RssAnon) of its PostgreSQL backend."
    )
    return "\n".join(lines)


def verdict_lines(rows: list[Row], sizes: list[int]) -> list[str]:
    lines = []
    for r in rows:
        if r.scenario.startswith(("A:", "B:")) and "re-import" not in r.scenario:
            best = r.rate_import or r.rate_wall
            if r.rate_wall >= TARGET_RESPONSES_PER_S:
                mark = "meets"
            elif best >= TARGET_RESPONSES_PER_S:
                mark = "meets only without start-up,"
            else:
                mark = "MISSES"
            imp = f"{r.rate_import:,.0f}/s import" if r.rate_import else "import n/a (too short)"
            lines.append(
                f"throughput {r.scenario}: {r.rate_wall:,.0f}/s wall, {imp} "
                f"-> {mark} the {TARGET_RESPONSES_PER_S:,}/s target"
            )
    by_n = {
        r.responses: r
        for r in rows
        if r.scenario.startswith("B: synthetic") and "re-import" not in r.scenario
    }
    if len(sizes) == 2 and all(n in by_n for n in sizes):
        small, large = by_n[sizes[0]], by_n[sizes[1]]
        ratio = large.peak_rss_mb / small.peak_rss_mb
        mark = "independent of file size" if ratio <= 1.15 else "GROWS with file size"
        lines.append(
            f"memory: importer peak RSS {large.peak_rss_mb:.1f} MB at {large.responses:,} "
            f"responses ({large.file_mb:,.0f} MB of files) vs {small.peak_rss_mb:.1f} MB at "
            f"{small.responses:,} ({small.file_mb:,.0f} MB): ratio {ratio:.2f} -> {mark}"
        )
        if small.backend_anon_mb:
            ratio = large.backend_anon_mb / small.backend_anon_mb
            lines.append(
                f"memory: PostgreSQL backend {large.backend_anon_mb:.1f} MB vs "
                f"{small.backend_anon_mb:.1f} MB: ratio {ratio:.2f}"
            )
    return lines


def flask_files() -> tuple[list[str], int] | None:
    evaluation = FLASK_DIR / "flask_evaluation.jsonl"
    outputs = sorted((FLASK_DIR / "model_outputs").glob("*.jsonl"))
    if not evaluation.is_file() or not outputs:
        return None
    files = [evaluation, *outputs]
    return [str(f) for f in files], sum(f.stat().st_size for f in files)


def count_lines(paths: list[str]) -> int:
    total = 0
    for path in paths:
        with open(path, "rb") as f:
            total += sum(1 for line in f if line.strip())
    return total


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--synthetic-responses",
        "-n",
        type=int,
        default=1_000_000,
        metavar="N",
        help="responses in the large synthetic set (default 1,000,000); a second set has N/10",
    )
    parser.add_argument(
        "--repeat",
        "-k",
        type=int,
        default=1,
        metavar="K",
        help="imports per synthetic size, each into a fresh dataset (medians reported)",
    )
    parser.add_argument("--seed", type=int, default=1234, help="generator seed (default 1234)")
    parser.add_argument("--regenerate", action="store_true", help="rewrite cached synthetic files")
    parser.add_argument("--skip-flask", action="store_true", help="skip scenario A")
    parser.add_argument("--skip-synthetic", action="store_true", help="skip scenario B")
    parser.add_argument(
        "--phases",
        action="store_true",
        help="run imports through bench/_phases.py to time parse/COPY/check/insert/commit",
    )
    parser.add_argument(
        "--cprofile",
        action="store_true",
        help="like --phases, plus cProfile for each import (bench/out/logs/*.pstats)",
    )
    parser.add_argument("--keep-db", action="store_true", help=f"keep {PG_DB} afterwards")
    opts = parser.parse_args(argv)
    if opts.synthetic_responses < 10 or opts.repeat < 1:
        parser.error("need --synthetic-responses >= 10 and --repeat >= 1")
    opts.phases = opts.phases or opts.cprofile
    return opts


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(argv)
    started = time.perf_counter()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "var").mkdir(exist_ok=True)
    try:
        pg_version = psql("SHOW server_version")
    except (RuntimeError, FileNotFoundError) as exc:
        log(f"PostgreSQL at {PG_HOST}:{PG_PORT} is not usable: {exc}")
        return 1
    log(
        f"PostgreSQL {pg_version} at {PG_HOST}:{PG_PORT}, database {PG_DB}; "
        f"{os.cpu_count()} CPUs; Python {platform.python_version()}"
        + ("; --phases (imports run through bench/_phases.py)" if opts.phases else "")
    )

    rows: list[Row] = []
    runs: dict[str, list[Run]] = {}

    # Synthetic files first, so that generating them never overlaps an import.
    synth: list[SyntheticSet] = []
    if not opts.skip_synthetic:
        for n in (opts.synthetic_responses // 10, opts.synthetic_responses):
            t0 = time.perf_counter()
            s = generate_synthetic(n, opts.seed, opts.regenerate)
            how = "reused" if s.reused else f"generated in {time.perf_counter() - t0:.1f}s"
            where = Path(s.files[0]).parent.relative_to(ROOT)
            log(
                f"synthetic N={n:,}: {s.items:,} items x {s.models} models, "
                f"{s.bytes / 1e6:,.1f} MB ({how}) in {where}/"
            )
            synth.append(s)

    log(f"fresh database {PG_DB}: migrated in {fresh_database()}")
    tiny = write_tiny(OUT)

    def once(label, files, dataset, responses, expect_new, extra=()):
        run = run_import(
            label, files, dataset, responses, list(extra), expect_new, opts.phases, opts.cprofile
        )
        runs.setdefault(label, []).append(run)
        show(run)
        return run

    # Start-up baseline: the fixed cost of one import command (interpreter, Django, job rows).
    log(f"start-up baseline: import of 1 item with 1 response, {BASELINE_RUNS} runs")
    base = [
        once("start-up (tiny file)", [tiny], f"tiny-{k}", 1, 1) for k in range(1, BASELINE_RUNS + 1)
    ]
    startup = statistics.median(r.wall_s for r in base)
    rows.append(summarize("start-up baseline (1 resp.)", base, Path(tiny).stat().st_size, None))

    if not opts.skip_flask:
        found = flask_files()
        if found is None:
            log(f"scenario A skipped: no FLASK release at {FLASK_DIR}")
        else:
            files, size = found
            n = count_lines(files[1:])
            extra = [a for p in FLASK_POLICIES for a in ("--on", f"{p}=accept")]
            log(
                f"scenario A: FLASK release, {len(files)} files, {n:,} responses, "
                f"{size / 1e6:.1f} MB"
            )
            first = once("FLASK import", files, "flask", n, n, extra)
            again = once("FLASK re-import (no-op)", files, "flask", n, 0, extra)
            rows.append(summarize("A: FLASK import", [first], size, startup))
            rows.append(summarize("A: FLASK re-import (no-op)", [again], size, startup))

    for s in synth:
        log(f"scenario B: synthetic N={s.responses:,}, {opts.repeat} run(s), fresh dataset each")
        got = [
            once(
                f"synthetic {s.responses:,}",
                s.files,
                f"synth-{s.responses}-r{k}",
                s.responses,
                s.responses,
            )
            for k in range(1, opts.repeat + 1)
        ]
        rows.append(summarize(f"B: synthetic {s.responses:,}", got, s.bytes, startup))
    if synth:
        large = synth[-1]
        log(
            f"scenario B: re-import (no-op) of N={large.responses:,} "
            f"into synth-{large.responses}-r1"
        )
        again = once(
            f"synthetic {large.responses:,} re-imp.",
            large.files,
            f"synth-{large.responses}-r1",
            large.responses,
            0,
        )
        rows.append(
            summarize(f"B: synthetic {large.responses:,} re-import", [again], large.bytes, startup)
        )

    db_bytes = database_size()
    if not opts.keep_db:
        psql(f"DROP DATABASE IF EXISTS {PG_DB}")

    verdicts = verdict_lines(rows, [s.responses for s in synth])
    total = time.perf_counter() - started
    log("")
    log(table(rows))
    log("")
    for line in verdicts:
        log(line)
    log(
        f"(took {total:.0f}s; {PG_DB} reached {db_bytes / 1e9:.2f} GB and was "
        f"{'kept' if opts.keep_db else 'dropped'})"
    )

    result = {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "environment": {
            "postgres": pg_version,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "database": DATABASE_URL,
        },
        "parameters": {
            "synthetic_responses": opts.synthetic_responses,
            "repeat": opts.repeat,
            "seed": opts.seed,
            "phases": opts.phases,
            "models": MODELS,
        },
        "targets": {
            "responses_per_s": TARGET_RESPONSES_PER_S,
            "peak_rss": "independent of file size",
        },
        "startup_s": startup,
        "synthetic": [asdict(s) for s in synth],
        "rows": [asdict(r) for r in rows],
        "verdicts": verdicts,
        "runs": {label: [asdict(r) for r in rs] for label, rs in runs.items()},
        "database_bytes": db_bytes,
        "total_s": total,
    }
    path = OUT / "import_bench.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    log(f"wrote {path.relative_to(ROOT)}")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
