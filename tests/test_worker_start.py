"""gunicorn.conf.py's post_worker_init: a worker loads the URLs ahead and freezes what start-up
made, so the garbage collector's full passes no longer scan it (bench/README.md, "Fourth
pass"). Run in a child process: gc.freeze would hold this test process's objects too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import gc, json, logging, os, runpy, sys
from types import SimpleNamespace
os.environ["DJANGO_SETTINGS_MODULE"] = "flaskweb.settings_test"
if len(sys.argv) > 1:
    os.environ["BROKEN_URLS"] = "1"
import django
django.setup()
from django.conf import settings
if os.environ.get("BROKEN_URLS"):
    settings.ROOT_URLCONF = "no_such_urls_module"
conf = runpy.run_path("gunicorn.conf.py")
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
log = logging.getLogger("worker-start-test")
log.addHandler(Keep())
before = "annotation.annotate.apis" in sys.modules
conf["post_worker_init"](SimpleNamespace(log=log))
print(json.dumps({
    "frozen": gc.get_freeze_count(),
    "urls_before": before,
    "urls_after": "annotation.annotate.apis" in sys.modules,
    "logged": records,
}))
"""


def _start(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_worker_loads_its_urls_and_freezes_what_start_up_made():
    found = _start()
    assert (found["urls_before"], found["urls_after"]) == (False, True)
    # Django, DRF and the project: far more than a bare interpreter's few thousand objects
    assert found["frozen"] > 50_000, found
    assert found["logged"] == []


def test_a_broken_url_module_does_not_stop_the_worker_starting():
    found = _start("broken")
    assert found["logged"] == ["the URLs could not be loaded ahead"]
    assert found["frozen"] > 50_000, found
