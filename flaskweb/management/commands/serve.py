"""python manage.py serve — the app for real use on one machine (docs/SERVING.md).

The embedded default (SQLite in WAL mode, the file-system broker and cache in var/, the
secret key made once in var/secret_key) behind gunicorn with threads and DEBUG off, and one
Celery worker for every queue (beat embedded) beside it. Migrates and collects the static
files first, asks for the first site admin when there is none, then runs until Ctrl-C or
SIGTERM, which stop both processes. HTTPS comes from a reverse proxy in front (Caddy, nginx).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from flaskweb.management.processes import start_child, start_worker, stop_children

# the variables Django's createsuperuser reads with --noinput
ADMIN_VARIABLES = (
    "DJANGO_SUPERUSER_USERNAME",
    "DJANGO_SUPERUSER_PASSWORD",
    "DJANGO_SUPERUSER_EMAIL",
)
# how long requests in progress and running tasks may finish after a stop (gunicorn's own
# graceful timeout is 30 s)
STOP_SECONDS = 35
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
LOOPBACK = {"127.0.0.1", "::1", "[::1]", "localhost"}
# The web shape on SQLite (bench/README.md "manage.py serve on SQLite"): one process with 8
# threads. Every transaction that writes takes SQLite's one write lock, and a writer that
# finds it taken sleeps and retries; across processes those waits grow the tail and cut the
# throughput (3 x 2, the PostgreSQL recipe, gave 40-52 submissions/s with p99 near 1 s where
# 1 x 8 gave 68-71/s with p99 0.55-0.69 s).
SQLITE_WORKERS, SQLITE_THREADS = 1, 8


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(value)
    return number


class Command(BaseCommand):
    help = (
        "Serve for real use on one machine: migrate, collect static files, create the first "
        "site admin, then gunicorn (DEBUG off) and a Celery worker until Ctrl-C or SIGTERM."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)"
        )
        parser.add_argument("--port", type=_positive, default=8000, help="default: 8000")
        parser.add_argument(
            "--workers",
            type=_positive,
            default=None,
            help="web processes (default: WEB_CONCURRENCY, else 1 on SQLite and "
            "gunicorn.conf.py's on PostgreSQL)",
        )
        parser.add_argument(
            "--threads",
            type=_positive,
            default=None,
            help="threads per web process (default: GUNICORN_THREADS, else 8 on SQLite "
            "and gunicorn.conf.py's on PostgreSQL)",
        )

    def handle(self, *args, **opts):
        if settings.DEBUG:
            raise CommandError(
                "serve is for real use and runs with DEBUG off: unset DJANGO_DEBUG "
                "(`make demo` is the development server)"
            )
        call_command("migrate", interactive=False, verbosity=0)
        self._report_database()
        call_command("collectstatic", interactive=False, verbosity=0)
        self.stdout.write(f"static files collected in {settings.STATIC_ROOT}")
        self._first_admin()
        connection.close()  # the children open their own

        env = os.environ.copy()
        if not settings.ALLOWED_HOSTS:
            env["DJANGO_ALLOWED_HOSTS"] = "localhost,127.0.0.1"
            self.stdout.write(
                "DJANGO_ALLOWED_HOSTS is not set: answering only to localhost and 127.0.0.1. "
                "Set it to the name your reverse proxy serves (docs/SERVING.md)."
            )
        if not settings.FLASKWEB_TRUSTED_PROXIES and opts["host"] in LOOPBACK:
            # only a process of this machine reaches a loopback address: the proxy in front
            env["FLASKWEB_TRUSTED_PROXIES"] = "127.0.0.1,::1"
        web_command = [
            sys.executable,
            "-m",
            "gunicorn",
            "flaskweb.wsgi:application",
            "--config",
            str(settings.BASE_DIR / "gunicorn.conf.py"),
            "--bind",
            f"{opts['host']}:{opts['port']}",
            # gunicornc's socket: this install's own, not one per user shared by every gunicorn
            "--control-socket",
            str(settings.VAR_DIR / "gunicorn.ctl"),
        ]
        workers, threads = opts["workers"], opts["threads"]
        if connection.vendor == "sqlite" and not (workers or os.environ.get("WEB_CONCURRENCY")):
            workers = SQLITE_WORKERS
            if not (threads or os.environ.get("GUNICORN_THREADS")):
                threads = SQLITE_THREADS
        if workers:
            web_command += ["--workers", str(workers)]
        if threads:
            web_command += ["--threads", str(threads)]
        opts["shape"] = (
            f"{workers or 'recipe'} process(es) x {threads or 'recipe'} threads"
            if workers or threads
            else "gunicorn.conf.py's processes and threads"
        )
        return self._run(web_command, env, opts)

    def _report_database(self) -> None:
        db = settings.DATABASES["default"]
        if connection.vendor != "sqlite":
            self.stdout.write(f"database: {connection.vendor} {db.get('NAME')} (migrated)")
            return
        with connection.cursor() as cursor:
            mode = cursor.execute("PRAGMA journal_mode").fetchone()[0]
            wait = cursor.execute("PRAGMA busy_timeout").fetchone()[0]
        if mode != "wal":
            raise CommandError(f"SQLite is in {mode!r} journal mode, not WAL: {db['NAME']}")
        self.stdout.write(
            f"database: SQLite {db['NAME']} (migrated; WAL, waits {wait / 1000:g} s for a lock)"
        )

    def _first_admin(self) -> None:
        users = get_user_model().objects
        if users.filter(is_superuser=True, is_active=True).exists():
            return
        if all(os.environ.get(name) for name in ADMIN_VARIABLES):
            call_command("createsuperuser", interactive=False, verbosity=0)
            self.stdout.write(
                f"site admin {os.environ['DJANGO_SUPERUSER_USERNAME']!r} created from "
                "DJANGO_SUPERUSER_USERNAME, _PASSWORD and _EMAIL"
            )
        elif sys.stdin.isatty():
            self.stdout.write("There is no site admin yet. Create the first one:")
            call_command("createsuperuser")
        else:
            self.stderr.write(
                "There is no site admin yet, and no terminal to ask for one. Create it with "
                "`.venv/bin/python manage.py createsuperuser`, or start serve with "
                "DJANGO_SUPERUSER_USERNAME, DJANGO_SUPERUSER_PASSWORD and "
                "DJANGO_SUPERUSER_EMAIL set. Serving meanwhile."
            )

    def _run(self, web_command: list[str], env: dict[str, str], opts: dict) -> None:
        stop = threading.Event()
        reason: list[str] = []

        def on_signal(signum, frame):
            reason.append(signal.Signals(signum).name)
            stop.set()

        previous = {s: signal.signal(s, on_signal) for s in _STOP_SIGNALS}
        children: list[subprocess.Popen] = []
        failed = ""
        try:
            worker = start_worker(env=env)
            children.append(worker)
            web = start_child(web_command, env=env)
            children.append(web)
            self.stdout.write(
                f"serving on http://{opts['host']}:{opts['port']}/ (gunicorn pid {web.pid}: "
                f"{opts['shape']}; worker pid {worker.pid}); Ctrl-C or SIGTERM stops both",
            )
            self.stdout.flush()
            while not stop.wait(0.5):
                for name, child in (("web server", web), ("worker", worker)):
                    if child.poll() is not None:
                        failed = f"the {name} exited (status {child.returncode})"
                        stop.set()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self.stdout.write(
                f"stopping ({failed or 'on ' + (reason[0] if reason else 'exit')}) ..."
            )
            self.stdout.flush()
            stop_children(children, timeout=STOP_SECONDS)
            self.stdout.write("stopped")
        if failed:
            raise CommandError(failed)
