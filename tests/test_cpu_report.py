"""The CPU report plugin (tests/cpu_report.py) counts a test's own CPU and its processes'."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.cpu_report import costliest

pytestmark = pytest.mark.slow

BURN = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"
TESTS = f"""
import subprocess, sys

def test_works_itself():
{"".join("    " + line + chr(10) for line in BURN.splitlines())}
def test_has_a_process_work():
    subprocess.run([sys.executable, "-c", {BURN!r}], check=True)
"""


def test_a_tests_own_cpu_and_its_processes_are_counted_apart(tmp_path):
    # given a test that works and one whose process works, each 0.4 s of CPU
    (tmp_path / "test_work.py").write_text(TESTS)
    report = tmp_path / "report"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST_"))}
    # when they run with the plugin
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.cpu_report", f"--cpu-report={report}"]
        + ["-p", "no:django", "-p", "no:cacheprovider", "-c", os.devnull]
        + ["--rootdir", str(tmp_path), str(tmp_path / "test_work.py")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = {
        line["test"].split("::")[1]: line
        for line in map(json.loads, (report / "main.jsonl").read_text().splitlines())
    }
    # then the first one's CPU is its own, the second one's its process's
    own, spawned = lines["test_works_itself"], lines["test_has_a_process_work"]
    assert own["self"] >= 0.35 and own["children"] < 0.1, own
    assert spawned["children"] >= 0.35 and spawned["self"] < 0.3, spawned
    # and the table is printed at the end
    assert "CPU seconds by test file" in done.stdout
    assert "test_work.py" in done.stdout


def test_the_table_puts_the_costliest_file_first_and_sums_all():
    lines = [
        {"test": "a.py::x", "self": 1.0, "children": 0.0, "pg": 0.5, "wall": 2.0},
        {"test": "b.py::y", "self": 0.5, "children": 3.0, "pg": 0.0, "wall": 4.0},
        {"test": "a.py::z", "self": 1.0, "children": 0.0, "pg": 0.0, "wall": 1.0},
    ]
    table = costliest(lines).splitlines()
    assert table[1].split() == ["3.5", "0.5", "3.0", "0.0", "4.0", "1", "b.py"]
    assert table[2].split() == ["2.5", "2.0", "0.0", "0.5", "3.0", "2", "a.py"]
    assert table[3].split()[:6] == ["6.0", "2.5", "3.0", "0.5", "7.0", "3"]
    assert len(costliest(lines, shown=1).splitlines()) == 3  # the heading, one file, the sums
