"""python manage.py serve — the app for real use on one machine (docs/SERVING.md).

The embedded default (SQLite in WAL mode, the file-system broker and cache in var/, the
secret key made once in var/secret_key) behind gunicorn with threads and DEBUG off, and one
Celery worker for every queue (beat embedded) beside it. Migrates and collects the static
files first, asks for the first site admin when there is none, then runs until Ctrl-C or
SIGTERM, which stop both processes. SIGHUP reloads a new release without downtime: gunicorn
starts new web workers while the old ones finish their requests, then the Celery worker is
restarted warm. HTTPS comes from a reverse proxy in front (Caddy, nginx); `--local` serves
plain HTTP for a trial on one's own machine.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import subprocess
import sys
import threading
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

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
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
LOOPBACK = {"127.0.0.1", "::1", "[::1]", "localhost"}
# how long a reload waits for the new web workers to answer before it restarts the worker
WEB_BOOT_SECONDS = 60
# How long a reload lets the worker's running tasks finish before it kills what is left: the
# site serves meanwhile and queued tasks wait in the broker, so an import or export of a few
# minutes is let finish rather than cut off (judge and metadata batches hand their remaining
# responses over within FLASKWEB_JUDGE_SHUTDOWN_GRACE_SECONDS).
RELOAD_WORKER_SECONDS = 300
# What a reload runs before it replaces a process: `serve --check-release` in a process of
# its own, so that it runs the new release's code (this process still holds the old one).
RELEASE_CHECK = ("serve", "--check-release")
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
        parser.add_argument(
            "--check-release",
            action="store_true",
            help="check the code on disk as a reload does (system checks, every migration "
            "applied), collect its static files, and exit",
        )
        parser.add_argument(
            "--local",
            action="store_true",
            help="a trial on this machine without a proxy: plain HTTP, no redirect to HTTPS, "
            "no secure-only cookies, no HSTS (a loopback --host only; never expose it)",
        )

    def handle(self, *args, **opts):
        if settings.DEBUG:
            raise CommandError(
                "serve is for real use and runs with DEBUG off: unset DJANGO_DEBUG "
                "(`make demo` is the development server)"
            )
        if opts["check_release"]:
            return self._check_release()
        if opts["local"]:
            self._check_local(opts["host"])
        call_command("migrate", interactive=False, verbosity=0)
        self._report_database()
        call_command("collectstatic", interactive=False, verbosity=0)
        self.stdout.write(f"static files collected in {settings.STATIC_ROOT}")
        self._first_admin()
        connection.close()  # the children open their own

        env = os.environ.copy()
        # the web processes add up their request counters there (docs/OPERATIONS.md)
        env.setdefault("PROMETHEUS_MULTIPROC_DIR", str(settings.VAR_DIR / "prometheus"))
        if not settings.ALLOWED_HOSTS:
            env["DJANGO_ALLOWED_HOSTS"] = "localhost,127.0.0.1"
            self.stdout.write(
                "DJANGO_ALLOWED_HOSTS is not set: answering only to localhost and 127.0.0.1. "
                "Set it to the name your reverse proxy serves (docs/SERVING.md)."
            )
            if not opts["local"] and opts["host"] in LOOPBACK:
                self.stdout.write(
                    "Trying it on this machine without a proxy? Plain HTTP is sent to "
                    "https:// here; `manage.py serve --local` serves plain HTTP instead."
                )
        if opts["local"]:
            # for the children only: this process serves nothing
            env["FLASKWEB_LOCAL_TRIAL"] = "true"
            host = f"[{opts['host']}]" if ":" in opts["host"] else opts["host"]
            self.stdout.write(
                f"Local trial mode: plain HTTP on http://{host}:{opts['port']}, do not expose it"
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

    def _check_release(self) -> None:
        """What a reload checks, in the release on disk. Django's system checks have run
        before this (a release that does not import, or whose URLs do not resolve, stops
        there); then every migration must be applied, since the new code would meet a
        database it does not know; then the static files are collected: the new hashed
        names are written beside the old ones, which the old web workers keep serving."""
        executor = MigrationExecutor(connection)
        conflicts = executor.loader.detect_conflicts()
        if conflicts:
            names = "; ".join(f"{app}: {', '.join(m)}" for app, m in conflicts.items())
            raise CommandError(f"the release has conflicting migrations ({names})")
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        if plan:
            pending = ", ".join(f"{m.app_label}.{m.name}" for m, _ in plan)
            raise CommandError(
                "the release has migrations that are not applied; run `manage.py migrate`, "
                f"then reload again. Not applied: {pending}"
            )
        call_command("collectstatic", interactive=False, verbosity=0, skip_checks=True)
        self.stdout.write("release checked: every migration applied, static files collected")

    def _check_local(self, host: str) -> None:
        """--local turns off what protects sign-ins on the network (HTTPS, secure cookies):
        only for an address no other machine reaches, and no public host name."""
        if host not in LOOPBACK:
            raise CommandError(
                f"--local serves plain HTTP to this machine only and cannot listen on {host}: "
                "use --host 127.0.0.1, or serve behind a reverse proxy with HTTPS without "
                "--local (docs/SERVING.md)"
            )
        public = [name for name in settings.ALLOWED_HOSTS if name not in LOOPBACK]
        if public:
            raise CommandError(
                f"--local serves plain HTTP to this machine only, but DJANGO_ALLOWED_HOSTS "
                f"names {', '.join(public)}: unset it for a trial, or serve that name behind "
                "a reverse proxy with HTTPS without --local (docs/SERVING.md)"
            )

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
        self._bind = ("::1" if opts["host"] in ("::1", "[::1]") else opts["host"], opts["port"])
        stop = threading.Event()
        reload_asked = threading.Event()
        reason: list[str] = []

        def on_signal(signum, frame):
            reason.append(signal.Signals(signum).name)
            stop.set()

        def on_hangup(signum, frame):
            reload_asked.set()

        previous = {s: signal.signal(s, on_signal) for s in _STOP_SIGNALS}
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, on_hangup)
        pid_file = settings.VAR_DIR / "serve.pid"
        children: list[subprocess.Popen] = []
        failed = ""
        try:
            pid_file.parent.mkdir(parents=True, exist_ok=True)
            pid_file.write_text(f"{os.getpid()}\n")
            worker = start_worker(env=env)
            children.append(worker)
            web = start_child(web_command, env=env)
            children.append(web)
            self._say(
                f"serving on http://{opts['host']}:{opts['port']}/ (gunicorn pid {web.pid}: "
                f"{opts['shape']}; worker pid {worker.pid}); Ctrl-C or SIGTERM stops both, "
                f"`kill -HUP {os.getpid()}` (the pid is in {pid_file}) reloads a new release",
            )
            while not stop.wait(0.5):
                if reload_asked.is_set():
                    reload_asked.clear()
                    worker = self._reload(web, worker, children, env, stop, reason)
                for name, child in (("web server", web), ("worker", worker)):
                    if child.poll() is None or stop.is_set():
                        continue
                    failed = f"the {name} exited (status {child.returncode})"
                    stop.set()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self._say(f"stopping ({failed or 'on ' + (reason[0] if reason else 'exit')}) ...")
            stop_children(children, timeout=STOP_SECONDS)
            with contextlib.suppress(OSError):
                pid_file.unlink()
            self._say("stopped")
        if failed:
            raise CommandError(failed)

    def _reload(
        self,
        web: subprocess.Popen,
        worker: subprocess.Popen,
        children: list[subprocess.Popen],
        env: dict[str, str],
        stop: threading.Event,
        reason: list[str],
    ) -> subprocess.Popen:
        """SIGHUP: check the release on disk, then gunicorn's graceful reload (new web
        workers on the new code; the old ones stop taking connections and finish their
        requests, while the listening socket stays open, so a client sees no refusal), then a
        warm restart of the worker (its running tasks finish or hand their rest over; queued
        ones wait in the broker). Returns the worker now running. A release that fails its
        checks is not loaded: the running one goes on serving."""
        if not self._say("reloading (SIGHUP): checking the release ..."):
            # the terminal serve ran in has closed (its hangup is a SIGHUP too): stop
            reason.append("SIGHUP from a closed terminal")
            stop.set()
            return worker
        problem = self._release_problem(env)
        if stop.is_set():
            return worker
        if problem:
            self._say(f"reload refused, the running release goes on serving: {problem}")
            return worker
        os.kill(web.pid, signal.SIGHUP)
        self._say(f"gunicorn (pid {web.pid}) starts new web workers; the old ones finish")
        # The new web workers import the app before they take a connection (meanwhile
        # connections wait in the listening socket's queue): the worker is restarted once they
        # answer, so that its own start does not slow theirs.
        started = time.monotonic()
        if self._web_answers(stop):
            self._say(f"the new web workers answer ({time.monotonic() - started:.1f} s)")
        self._say(
            f"restarting the worker (pid {worker.pid}): its running tasks finish first "
            f"(up to {RELOAD_WORKER_SECONDS} s), queued ones wait"
        )
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGTERM)
        deadline = time.monotonic() + RELOAD_WORKER_SECONDS
        while worker.poll() is None and time.monotonic() < deadline:
            if stop.wait(0.2):
                return worker  # stopping meanwhile: the stop takes the old worker down
        # what is left of its group (the embedded beat), as a stop does
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
        new = start_worker(env=env)
        children[children.index(worker)] = new
        self._say(f"reloaded: worker pid {worker.pid} stopped, pid {new.pid} started")
        return new

    def _web_answers(self, stop: threading.Event) -> bool:
        """Wait (up to gunicorn's boot allowance) until a request on a new connection gets an
        HTTP answer: any status, as a request without the proxy's headers may get a
        redirect or a 400."""
        host, port = self._bind
        stop.wait(0.3)  # for gunicorn to act on the HUP: the old workers stop accepting
        deadline = time.monotonic() + WEB_BOOT_SECONDS
        while time.monotonic() < deadline and not stop.is_set():
            probe = http.client.HTTPConnection(host, port, timeout=WEB_BOOT_SECONDS)
            try:
                probe.request("GET", "/healthz")
                probe.getresponse()
                return True
            except (OSError, http.client.HTTPException):
                stop.wait(0.2)
            finally:
                probe.close()
        return False

    def _release_problem(self, env: dict[str, str]) -> str:
        command = [sys.executable, "manage.py", *RELEASE_CHECK]
        done = subprocess.run(
            command, cwd=settings.BASE_DIR, env=env, capture_output=True, text=True
        )
        if done.returncode == 0:
            return ""
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()
        return "\n".join(said[-8:]).removeprefix("CommandError: ")

    def _say(self, line: str) -> bool:
        """Write a line of serve's own log; False when its output is gone (a closed terminal)."""
        try:
            self.stdout.write(line)
            self.stdout.flush()
        except OSError:
            return False
        return True
