"""Child processes of the one-machine commands (`rundemo`, `serve`): the Celery worker that
takes every queue, the web server, and stopping them so that none outlives the command.

Each child runs in its own process group, so a terminal's Ctrl-C reaches only the command,
which then stops its children in order (a worker given SIGINT twice would stop cold). The
group is what is stopped: the worker's embedded beat is a child process of its own. On
Linux each child also gets SIGTERM if the command is killed outright (SIGKILL), so no
worker is left running without its web server.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

# every queue the app routes tasks to (settings.CELERY_TASK_ROUTES, the default queue)
WORKER_QUEUES = "default,imports,judging,analytics"
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover (runs in the child between fork and exec)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start_child(command: list[str], *, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`command` in its own process group, stopped with its parent on Linux."""
    return subprocess.Popen(
        command,
        env=env if env is not None else os.environ.copy(),
        cwd=settings.BASE_DIR,
        process_group=0,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,  # noqa: PLW1509
    )


def worker_command(*, concurrency: int = 4) -> list[str]:
    """One Celery worker for every queue with beat embedded, as the one-machine install
    runs it: threads, so a few tasks run at once (a judge batch on the judging engine, an
    import, an export) in the one process (docs/JUDGING.md)."""
    var: Path = settings.VAR_DIR
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "flaskweb",
        "worker",
        "-B",
        "-Q",
        WORKER_QUEUES,
        "-P",
        "threads",
        "--concurrency",
        str(concurrency),
        "--loglevel",
        "WARNING",
        "--schedule",
        str(var / "celerybeat-schedule"),
    ]


def start_worker(*, env: dict[str, str] | None = None) -> subprocess.Popen:
    return start_child(worker_command(), env=env)


def stop_children(children: list[subprocess.Popen], *, timeout: float) -> None:
    """SIGTERM to each child's group (a warm shutdown: running requests and tasks finish),
    up to `timeout` seconds for them to exit, then SIGKILL to whatever of a group is left.
    A second Ctrl-C or SIGTERM meanwhile is ignored, so the stop is not cut short."""
    with _signals_ignored():
        _stop(children, timeout)


def _stop(children: list[subprocess.Popen], timeout: float) -> None:
    for child in children:
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGTERM)
    for child in children:
        try:
            child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        # the group may outlive its leader (beat's process, a gunicorn worker)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in _STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (and SIGHUP) raise KeyboardInterrupt in the main thread, as Ctrl-C does, so
    `finally` blocks that stop the children run when the command is stopped by a service
    manager or `kill` (by default SIGTERM ends Python without unwinding)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
