"""python manage.py rundemo — the whole app on embedded defaults, in one command.

Migrates, seeds the demo data, starts a Celery worker (with beat) as a separate process on
the file-system broker, and serves http://127.0.0.1:8000 until Ctrl-C or SIGTERM, which
stop the worker too. For real use on one machine: `manage.py serve` (docs/SERVING.md).
"""

from __future__ import annotations

from django.core.management import call_command
from django.core.management.base import BaseCommand

from flaskweb.management.processes import sigterm_as_interrupt, start_worker, stop_children


class Command(BaseCommand):
    help = "Run the demo: migrate, seed, worker process and web server on 127.0.0.1:8000."

    def add_arguments(self, parser):
        parser.add_argument("--port", default="8000")
        parser.add_argument("--no-worker", action="store_true")

    def handle(self, *args, **opts):
        call_command("migrate", interactive=False, verbosity=0)
        call_command("seed_demo", base_url=f"http://127.0.0.1:{opts['port']}")
        children = []
        try:
            with sigterm_as_interrupt():
                if not opts["no_worker"]:
                    worker = start_worker()
                    children.append(worker)
                    self.stdout.write(f"worker process started (pid {worker.pid})")
                self.stdout.write(
                    f"open http://127.0.0.1:{opts['port']}/ and log in with a demo login"
                )
                call_command("runserver", f"127.0.0.1:{opts['port']}", use_reloader=False)
        except KeyboardInterrupt:
            pass
        finally:
            stop_children(children, timeout=10)
