"""Run the whole suite in its groups, on every core, and print what each group took.

`make test` runs this with the checkout's venv (`.venv/bin/python scripts/test_suite.py`).
The groups, in order (tests/README.md says why each exists):

- checks    ruff format, ruff lint, mypy and the import layers; one process at a time, so
            when the postgres group runs too they run beside it (on the core mypy leaves
            idle) and print when that group is done;
- postgres  every test not marked `alone`, on PostgreSQL and Redis, one pytest-xdist worker
            per core and one more (`-n <cores + 1> --dist worksteal`: many tests wait on a
            browser, a server or a worker process): a test database, cache/broker key prefix,
            Chromium and free ports per worker;
- sqlite    the annotation workflow's tests again on SQLite (the embedded default of
            `make demo`), in parallel too; none may be skipped;
- alone     tests marked `alone` (timing-sensitive: they assert how long something takes),
            one at a time with the machine to themselves.

Arguments after the options go to every pytest group (`make test PYTEST_ARGS="-x"`); a
selection (`-k`, `-m`, test paths) leaves the SQLite group out unless it is asked for with
`--groups`. The process exits non-zero when any group failed; every group runs regardless,
so one run tells all.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
GROUPS = ("checks", "postgres", "sqlite", "alone")

#: The workflow that runs fixed SQL on its hot path (flaskweb/db.py), written for PostgreSQL
#: and SQLite alike: its tests run on both.
SQLITE_TESTS = [
    "tests/annotation/test_assignments.py",
    "tests/annotation/test_annotate_api.py",
    "tests/annotation/test_annotate_views.py",
    # the progress counts: a LATERAL join of the card on PostgreSQL, two statements on SQLite
    "tests/annotation/test_annotate_pace.py",
    "tests/annotation/test_campaign_views.py",
    "tests/annotation/test_screening.py",
    "tests/annotation/test_pairwise_campaigns.py",
    "tests/annotation/test_pairwise_submit.py",
    "tests/annotation/test_pairwise_pages.py",
    "tests/annotation/test_page_path_reads.py",
    "tests/annotation/test_rendered_texts.py",
    # the import writes its rows with each database's own statements (datasets/services.py)
    "tests/annotation/test_imports.py",
]
#: Fewer passing SQLite tests than this means the group lost its tests (a bad selection).
SQLITE_MINIMUM = 100

CHECKS = [
    ["ruff", "format", "--check", "."],
    ["ruff", "check", "."],
    ["mypy"],
    ["lint-imports", "--no-cache"],
]


@dataclass
class Outcome:
    group: str
    seconds: float
    ok: bool
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    note: str = ""


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def junit_counts(path: Path) -> tuple[int, int, int]:
    """(passed, failed, skipped) from pytest's JUnit XML; errors count as failures."""
    if not path.is_file():
        return 0, 0, 0
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = failed = skipped = 0
    for suite in suites:
        total += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
    return total - failed - skipped, failed, skipped


def alone_modules() -> list[str]:
    """The test modules that mark any test `alone` (a decorator or a module's pytestmark)."""
    return sorted(
        path.relative_to(REPO).as_posix()
        for path in (REPO / "tests").rglob("test_*.py")
        if "mark.alone" in path.read_text()
    )


def is_selection(args: list[str]) -> bool:
    """Does the caller pick tests (-k, -m, paths or node ids) rather than set options?"""
    taking_value = {"-k", "-m", "-p", "-n", "--dist", "--ds", "--durations", "--maxfail", "-c"}
    previous = ""
    for arg in args:
        if arg in ("-k", "-m") or arg.startswith(("-k", "-m")) and len(arg) > 2:
            return True
        if not arg.startswith("-") and previous not in taking_value:
            return True
        previous = arg
    return False


def run_checks(*, capture: bool) -> tuple[Outcome, str]:
    """The checks one after the other, stopping at the first that fails; with `capture`,
    their output is returned instead of printed."""
    started = time.monotonic()
    output: list[str] = []
    ok = True
    for check in CHECKS:
        done = subprocess.run(
            [str(BIN / check[0]), *check[1:]],
            cwd=REPO,
            stdout=subprocess.PIPE if capture else None,
            stderr=subprocess.STDOUT if capture else None,
            text=True,
        )
        output.append(done.stdout or "")
        if done.returncode != 0:
            ok = False
            break
    return Outcome("checks", time.monotonic() - started, ok, note="4 checks"), "".join(output)


def run_pytest(group: str, argv: list[str], env: dict[str, str], junit: Path) -> Outcome:
    command = [str(BIN / "python"), "-m", "pytest", *argv, f"--junitxml={junit}"]
    print(f"\n=== {group}: {shlex.join(command[1:])}", flush=True)
    started = time.monotonic()
    code = subprocess.call(command, cwd=REPO, env=env)
    seconds = time.monotonic() - started
    passed, failed, skipped = junit_counts(junit)
    # 5: nothing was collected (a selection that leaves the group empty)
    return Outcome(group, seconds, code in (0, 5), passed, failed, skipped)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--groups",
        default="",
        help=f"comma-separated groups to run, of {', '.join(GROUPS)} (default: all)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=cores() + 1,
        help="pytest-xdist workers (default: cores + 1)",
    )
    options, pytest_args = parser.parse_known_args()
    asked = [g for g in options.groups.split(",") if g]
    unknown = set(asked) - set(GROUPS)
    if unknown:
        parser.error(f"unknown group(s): {', '.join(sorted(unknown))}")
    selecting = is_selection(pytest_args)
    groups = asked or [g for g in GROUPS if not (g == "sqlite" and selecting)]
    workers = max(1, options.workers)
    parallel = ["-n", str(workers), "--dist", "worksteal"] if workers > 1 else []

    outcomes: list[Outcome] = []
    scratch = Path(tempfile.mkdtemp(prefix="flaskweb-tests-"))
    # Byte-code caches on: each xdist worker and each process a test starts (manage.py
    # commands, Celery workers, servers) would otherwise compile the project again (2-3 s)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    args = list(pytest_args)
    beside: ThreadPoolExecutor | None = None
    checks: Future[tuple[Outcome, str]] | None = None
    if "checks" in groups and "postgres" in groups:
        # one process at a time (mypy, 25 s on a clean clone, the longest) beside the
        # postgres group's workers rather than before them, with a core to itself meanwhile
        beside = ThreadPoolExecutor(max_workers=1)
        checks = beside.submit(run_checks, capture=True)
    for group in groups:
        if group == "checks":
            print("\n=== checks: ruff format, ruff check, mypy, lint-imports", flush=True)
            if checks is None:
                outcomes.append(run_checks(capture=False)[0])
            else:
                print("(beside the postgres group: printed when it is done)", flush=True)
        elif group == "postgres":
            # the slowest tests listed each run: where the time goes, and what grew
            argv = [*parallel, "-m", "not alone", "--durations=15", *args]
            outcome = run_pytest(group, argv, env, scratch / f"{group}.xml")
            if checks is not None and beside is not None:
                checked, output = checks.result()
                beside.shutdown()
                print("\n=== checks: ruff format, ruff check, mypy, lint-imports", flush=True)
                print(output, end="", flush=True)
                outcomes.append(checked)
            outcomes.append(outcome)
            # the run made fresh databases for its workers: later groups reuse them
            args = [a for a in args if a != "--create-db"]
        elif group == "sqlite":
            sqlite_env = {
                k: v for k, v in env.items() if not k.startswith(("DATABASE_", "PYTEST_"))
            }
            sqlite_env["TEST_DATABASE_URL"] = f"sqlite:///{scratch / 'workflow.sqlite3'}"
            paths = [] if selecting else SQLITE_TESTS
            argv = [*parallel, "-m", "not postgres_only and not alone", *args, *paths]
            outcome = run_pytest(group, argv, sqlite_env, scratch / f"{group}.xml")
            if outcome.skipped:
                outcome.ok, outcome.note = False, "no test may be skipped on SQLite"
            elif not selecting and outcome.passed < SQLITE_MINIMUM:
                outcome.ok, outcome.note = False, f"fewer than {SQLITE_MINIMUM} passed"
            outcomes.append(outcome)
        elif group == "alone":
            # one worker: the database the postgres group made for its first worker is reused;
            # only the modules that mark tests `alone` are collected (the whole suite's
            # collection would cost more than these tests)
            paths = [] if selecting else alone_modules()
            argv = ["-n", "1", "-m", "alone", *args, *paths]
            outcomes.append(run_pytest(group, argv, env, scratch / f"{group}.xml"))

    print("\n=== test suite: groups", flush=True)
    print(f"{'group':<10}{'result':<8}{'passed':>8}{'failed':>8}{'skipped':>9}{'seconds':>9}")
    for o in outcomes:
        result = "ok" if o.ok else "FAILED"
        counts = f"{o.passed:>8}{o.failed:>8}{o.skipped:>9}"
        print(f"{o.group:<10}{result:<8}{counts}{o.seconds:>9.1f}  {o.note}".rstrip())
    total = sum(o.seconds for o in outcomes)
    print(f"{'total':<10}{'':<8}{sum(o.passed for o in outcomes):>8}{'':>17}{total:>9.1f}")
    return 0 if outcomes and all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
