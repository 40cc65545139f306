"""python manage.py rundemo — the whole app on embedded defaults, in one command.

Migrates, seeds the demo data, starts a Celery worker (with beat) as a separate process on
the file-system broker, and serves http://127.0.0.1:8000 until Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Run the demo: migrate, seed, worker process and web server on 127.0.0.1:8000."

    def add_arguments(self, parser):
        parser.add_argument("--port", default="8000")
        parser.add_argument("--no-worker", action="store_true")

    def handle(self, *args, **opts):
        call_command("migrate", interactive=False, verbosity=0)
        call_command("seed_demo")
        worker = None
        if not opts["no_worker"]:
            var = settings.VAR_DIR
            worker = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "flaskweb",
                    "worker",
                    "-B",
                    "-Q",
                    "default,imports,judging,analytics",
                    # threads: a few tasks at once (a judge batch on the judging engine, an
                    # import, an export) in the one process; docs/JUDGING.md
                    "-P",
                    "threads",
                    "--concurrency",
                    "4",
                    "--loglevel",
                    "WARNING",
                    "--schedule",
                    str(var / "celerybeat-schedule"),
                ],
                env=os.environ.copy(),
            )
            self.stdout.write(f"worker process started (pid {worker.pid})")
        self.stdout.write(f"open http://127.0.0.1:{opts['port']}/ and log in with a demo login")
        try:
            call_command("runserver", f"127.0.0.1:{opts['port']}", use_reloader=False)
        finally:
            if worker is not None:
                worker.send_signal(signal.SIGTERM)
                try:
                    worker.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    worker.kill()
