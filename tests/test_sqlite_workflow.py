"""The annotation workflow runs fixed SQL on its hot path (flaskweb/db.py), written for
PostgreSQL and SQLite alike. The suite runs on PostgreSQL; this test runs the workflow's
own tests again on SQLite, the embedded default of `make demo`, in a subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

WORKFLOW_TESTS = [
    "tests/annotation/test_assignments.py",
    "tests/annotation/test_annotate_api.py",
    "tests/annotation/test_annotate_views.py",
    "tests/annotation/test_campaign_views.py",
    "tests/annotation/test_screening.py",
    "tests/annotation/test_pairwise_campaigns.py",
    "tests/annotation/test_pairwise_submit.py",
    "tests/annotation/test_pairwise_pages.py",
]


def test_the_annotation_workflow_tests_pass_on_sqlite(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "PYTEST_"))}
    env["TEST_DATABASE_URL"] = f"sqlite:///{tmp_path / 'workflow.sqlite3'}"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:logging",
            "-m",
            "not postgres_only",
            *WORKFLOW_TESTS,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 100, summary
    assert "skipped" not in summary and "failed" not in summary, summary
