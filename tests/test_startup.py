import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

# What a process loads before it serves a request or takes a task: Django, the URLconf (every
# app's urls, views and apis) and the task modules a Celery worker imports at start.
LOAD_A_PROCESS = """
import json, sys
import django
django.setup()
from django.urls import get_resolver
from flaskweb.celery import app
get_resolver().url_patterns
app.loader.import_default_modules()
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.slow
def test_starting_a_process_does_not_import_the_statistics_libraries(tmp_path):
    # scipy cost every manage.py command, web and Celery worker ~0.5 s of CPU at start,
    # though few of them compute a statistic: the analytics modules import it where used
    # given the embedded default's settings, as manage.py runs them
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_", "REDIS_", "CELERY_"))
    }
    env.update(DJANGO_SETTINGS_MODULE="flaskweb.settings", FLASKWEB_VAR_DIR=str(tmp_path))

    # when a process loads the URLconf and the Celery app's task modules
    result = subprocess.run(
        [sys.executable, "-c", LOAD_A_PROCESS], cwd=REPO, env=env, capture_output=True, text=True
    )

    # then the analytics pages and tasks are loaded, and scipy (nor pandas, nor pyarrow:
    # only columnar exports and Parquet imports need it) is not
    assert result.returncode == 0, result.stderr
    modules = set(json.loads(result.stdout))
    assert {"analytics.urls", "analytics.tasks", "judging.tasks", "annotation.tasks"} <= modules
    heavy = {"scipy", "pandas", "pyarrow"}
    assert sorted(m for m in modules if m.split(".")[0] in heavy) == []
