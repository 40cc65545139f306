"""Where the suite's CPU goes, per test file: a pytest plugin for finding what to make cheaper.

    .venv/bin/python -m pytest -n auto -m "not alone" -p tests.cpu_report --cpu-report=/tmp/cpu

On a machine whose cores are all busy (the whole suite), `--durations` shows how long each
test waited as much as how much it worked; this counts CPU seconds instead, three ways:

- `self`: the test process's own (the test, its fixtures, a live server's threads);
- `children`: the processes it started (commands, servers, Celery workers, Chromium),
  counted when they end: a process that outlives its test (a session's browser) lands on
  the test that was running when it ended, or on none;
- `pg`: its own PostgreSQL session's, read from /proc when the server runs on this machine,
  when the session was open before the test and still is after it (the first test of a
  process opens it; the sessions of the processes it started are not counted).

Each process writes a line per test to DIR/<worker>.jsonl (DIR is emptied at the start); at
the end, the process that started the run prints the files that cost the most.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import time
from collections import defaultdict
from pathlib import Path

import pytest

SHOWN = 25


def pytest_addoption(parser) -> None:
    parser.addoption(
        "--cpu-report",
        default="",
        metavar="DIR",
        help="write each test's CPU seconds to DIR and print the costliest files",
    )


def _folder(config) -> Path | None:
    value = config.getoption("--cpu-report")
    return Path(value) if value else None


def pytest_configure(config) -> None:
    folder = _folder(config)
    if folder is not None and not hasattr(config, "workerinput"):  # the run's first process
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)


def _cpu(usage) -> float:
    return usage.ru_utime + usage.ru_stime


def _session_cpu() -> tuple[int | None, float]:
    """The test database session's server process and its CPU seconds so far."""
    try:
        from django.db import connection

        if connection.vendor != "postgresql" or connection.connection is None:
            return None, 0.0
        pid = connection.connection.info.backend_pid
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return pid, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except Exception:  # no Django, no connection, a server elsewhere
        return None, 0.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    folder = _folder(item.config)
    if folder is None:
        yield
        return
    started = time.monotonic()
    own = _cpu(resource.getrusage(resource.RUSAGE_SELF))
    children = _cpu(resource.getrusage(resource.RUSAGE_CHILDREN))
    session, pg = _session_cpu()
    yield
    session_after, pg_after = _session_cpu()
    line = {
        "test": item.nodeid,
        "wall": time.monotonic() - started,
        "self": _cpu(resource.getrusage(resource.RUSAGE_SELF)) - own,
        "children": _cpu(resource.getrusage(resource.RUSAGE_CHILDREN)) - children,
        # the same session before and after: a test that closed it is not counted
        "pg": pg_after - pg if session is not None and session == session_after else 0.0,
    }
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(folder / f"{worker}.jsonl", "a") as out:
        out.write(json.dumps(line) + "\n")


def costliest(lines: list[dict], shown: int = SHOWN) -> str:
    """A table of the test files by CPU seconds (self + children + pg), costliest first."""
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0])
    for line in lines:
        total = files[line["test"].split("::")[0]]
        for i, key in enumerate(("self", "children", "pg", "wall")):
            total[i] += line[key]
        total[4] += 1
    rows = sorted(files.items(), key=lambda kv: -sum(kv[1][:3]))
    sums = [sum(line[key] for line in lines) for key in ("self", "children", "pg", "wall")]
    out = [f"{'cpu':>8}{'self':>8}{'children':>9}{'pg':>7}{'wall':>8}{'tests':>7}  file"]
    for name, (own, children, pg, wall, count) in rows[:shown]:
        out.append(
            f"{own + children + pg:8.1f}{own:8.1f}{children:9.1f}{pg:7.1f}{wall:8.1f}"
            f"{count:7d}  {name}"
        )
    out.append(
        f"{sum(sums[:3]):8.1f}{sums[0]:8.1f}{sums[1]:9.1f}{sums[2]:7.1f}{sums[3]:8.1f}"
        f"{len(lines):7d}  all {len(files)} files"
    )
    return "\n".join(out)


def pytest_terminal_summary(terminalreporter, config) -> None:
    folder = _folder(config)
    if folder is None or hasattr(config, "workerinput"):
        return
    lines = [json.loads(text) for path in folder.glob("*.jsonl") for text in path.open()]
    terminalreporter.section("CPU seconds by test file (tests/cpu_report.py)")
    terminalreporter.write_line(costliest(lines))
