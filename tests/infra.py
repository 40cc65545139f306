"""Private services and processes for the tests and benchmarks that restart them.

A test that restarts PostgreSQL or Redis must not touch the machine's shared servers
(127.0.0.1:5432 and 6379): other test runs use them at the same time. So it starts its own:

    with private_postgres() as pg, private_redis() as redis:
        pg.create_database("flaskweb")
        ... DATABASE_URL=pg.url("flaskweb"), REDIS_URL=redis.url ...
        pg.restart(mode="fast")      # seconds it took, as `pg_ctlcluster ... restart -m fast`
        redis.restart(down=10.0)     # down for 10 s, then back with its data

PostgreSQL runs from the Debian binaries (/usr/lib/postgresql/*/bin, the newest; or
FLASKWEB_PG_BIN) as the `postgres` user when this runs as root (`runuser -u postgres --`),
with its data directory, socket and log in a temporary directory, on a free port of
127.0.0.1, trust authentication for the user `postgres`, and fsync off (a scratch cluster
need not survive a power cut). Redis is `redis-server` on a free port with its files in a
temporary directory. Both are stopped and their directories removed at the end.

Also the process helpers the fault tests and bench/fault_bench.py share: gunicorn run by the
web recipe (HUP, USR2 + WINCH), Celery processes started and warm-stopped, and the children of
a process. Standard library only at import time (psycopg and redis are imported when used),
so a benchmark loads this file from any checkout.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, *, timeout: float, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not met within {timeout:g} s")
        time.sleep(interval)


# --- PostgreSQL ------------------------------------------------------------------------------


def pg_bin_dir() -> Path:
    """The PostgreSQL server binaries: FLASKWEB_PG_BIN, else Debian's newest version."""
    if os.environ.get("FLASKWEB_PG_BIN"):
        return Path(os.environ["FLASKWEB_PG_BIN"])
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if not found:
        raise RuntimeError("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin")
    return found[-1].parent


class PrivatePostgres:
    """A PostgreSQL cluster of its own: `url(db)`, `restart()`, `stop()`, `start()`."""

    user = "postgres"

    def __init__(self, root: Path, port: int, bin_dir: Path) -> None:
        self.root = root
        self.port = port
        self.bin = bin_dir
        self.data = root / "data"
        self.log = root / "postgres.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{database}"

    def _as_owner(self, *command: str, timeout: float = 120) -> None:
        """Run a server program as the cluster's owner. Its output goes to a file, not a
        pipe: a server that pg_ctl starts inherits them, and would hold a pipe open."""
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        with tempfile.TemporaryFile() as out:
            code = subprocess.run(
                [*prefix, *command], stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                cwd=self.root,
            ).returncode  # fmt: skip
            if code != 0:
                out.seek(0)
                raise RuntimeError(
                    f"{Path(command[0]).name} failed ({code}):\n"
                    f"{out.read().decode(errors='replace')}\n{self.log_tail()}"
                )

    def init(self) -> None:
        self._as_owner(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            self.user,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale",
            "C",
            "--no-sync",
            "--no-instructions",
        )

    def start(self) -> None:
        options = " ".join(
            [
                f"-p {self.port}",
                "-c listen_addresses=127.0.0.1",
                f"-c unix_socket_directories={self.root}",
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                "-c max_connections=200",
            ]
        )
        self._as_owner(
            str(self.bin / "pg_ctl"), "start", "-w", "-D", str(self.data), "-l", str(self.log),
            "-o", options,
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self._as_owner(str(self.bin / "pg_ctl"), "stop", "-w", "-D", str(self.data), "-m", mode)

    def restart(self, mode: str = "fast") -> float:
        """`pg_ctl restart -m MODE`: every connection is cut (`fast`: terminated as by an
        administrator, open transactions rolled back), the server stops and starts with the
        same options. Returns the seconds it took, until the server accepts connections."""
        t0 = time.monotonic()
        self._as_owner(
            str(self.bin / "pg_ctl"), "restart", "-w", "-D", str(self.data), "-l", str(self.log),
            "-m", mode,
        )  # fmt: skip
        return time.monotonic() - t0

    @property
    def running(self) -> bool:
        result = subprocess.run(
            [str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-q"],
            capture_output=True,
        )
        return result.returncode == 0

    def connect(self, database: str = "postgres", **kwargs):
        import psycopg

        return psycopg.connect(
            f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}", **kwargs
        )

    def execute(self, sql: str, params=None, database: str = "postgres") -> list[tuple]:
        """One statement in autocommit on a new connection; its rows (or [])."""
        with self.connect(database, autocommit=True) as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    def create_database(self, name: str) -> str:
        self.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def dump(self, database: str, path: Path) -> None:
        """`pg_dump` of a database (schema and data) into a plain SQL file."""
        self._client("pg_dump", "--no-owner", "-f", str(path), database)

    def load(self, database: str, path: Path) -> None:
        """Run a plain SQL dump into a database (made first with create_database)."""
        self._client("psql", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(path), database)

    def _client(self, program: str, *args: str) -> None:
        command = [str(self.bin / program), "-h", "127.0.0.1", "-p", str(self.port)]
        result = subprocess.run(
            [*command, "-U", self.user, *args], capture_output=True, text=True, timeout=300
        )
        if result.returncode != 0:
            raise RuntimeError(f"{program} failed:\n{result.stdout}\n{result.stderr}")

    def log_tail(self, size: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-size:]
        except OSError:
            return ""


@contextlib.contextmanager
def private_postgres(bin_dir: Path | None = None) -> Iterator[PrivatePostgres]:
    """A fresh PostgreSQL cluster on a free port, stopped and removed at the end."""
    root = Path(tempfile.mkdtemp(prefix="flaskweb-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    server = PrivatePostgres(root, free_port(), bin_dir or pg_bin_dir())
    try:
        server.init()
        server.start()
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.stop(mode="immediate")
        shutil.rmtree(root, ignore_errors=True)


# --- Redis -----------------------------------------------------------------------------------


class PrivateRedis:
    """A redis-server of its own: `url`, `restart()`, `stop()`, `start()`. With `persist`
    it keeps its data across a restart in an append-only file, as docker-compose.yml runs
    Redis (`--appendonly yes`); without, a restart empties it."""

    def __init__(self, root: Path, port: int, persist: bool) -> None:
        self.root = root
        self.port = port
        self.persist = persist
        self.log = root / "redis.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "yes" if self.persist else "no"]
        command += ["--dir", str(self.root), "--logfile", str(self.log)]
        self.proc = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        wait_until(self._pings, timeout=15, what="redis-server answering PING")

    def _pings(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"redis-server exited:\n{tail(self.log)}")
        try:
            return self._command(b"PING").startswith(b"+PONG")
        except OSError:
            return False

    def _command(self, command: bytes) -> bytes:
        """One inline command on a new connection: its answer, or b"" when the server
        closed the connection (SHUTDOWN). No client library: its reconnecting retries
        would wait out a server that is meant to be gone."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(command + b"\r\n")
            return s.recv(64)

    def stop(self) -> None:
        """SHUTDOWN: the append-only file is flushed (with `persist`), then the server exits."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(OSError):
            self._command(b"SHUTDOWN" if self.persist else b"SHUTDOWN NOSAVE")
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def restart(self, down: float = 0.0) -> float:
        """Stop, stay down for `down` seconds, start. Returns the seconds it was away."""
        t0 = time.monotonic()
        self.stop()
        time.sleep(down)
        self.start()
        return time.monotonic() - t0

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@contextlib.contextmanager
def private_redis(*, persist: bool = False) -> Iterator[PrivateRedis]:
    """A fresh redis-server on a free port, stopped and removed at the end."""
    root = Path(tempfile.mkdtemp(prefix="flaskweb-redis-"))
    server = PrivateRedis(root, free_port(), persist)
    try:
        server.start()
        yield server
    finally:
        server.kill()
        shutil.rmtree(root, ignore_errors=True)


# --- processes -------------------------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _heartbeat_started(pid: int) -> bool:
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            path = f"/proc/{pid}/fd/{fd}"
            if "/wgunicorn-" in os.readlink(path):
                return os.stat(path).st_mtime < time.time() / 2  # monotonic, not wall clock
    except OSError:
        pass
    return False


def children(pid: int) -> set[int]:
    """The live child processes of `pid`, from /proc."""
    found = set()
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(entry))
    return found


def start_logged(
    command: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    log: Path,
    ready: bytes | None = None,
    timeout: float = 90,
) -> subprocess.Popen:
    """Start `command` in its own process group with its output appended to `log`; with
    `ready`, wait until the process has written it there (and fail if it exits first)."""
    with open(log, "ab") as out:
        start = out.tell()  # a log may hold an earlier process's lines: read after them
        proc = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    if ready is not None:
        try:
            wait_until(
                lambda: proc.poll() is not None or ready in log.read_bytes()[start:],
                timeout=timeout,
                what=f"{ready!r} in {log.name}",
            )
        except TimeoutError:
            stop_process(proc, grace=5)
            raise
        if proc.poll() is not None:
            raise RuntimeError(f"{command[:4]} exited at start:\n{tail(log)}")
    return proc


def stop_process(proc: subprocess.Popen, *, grace: float, sig: int = signal.SIGTERM) -> float:
    """Send `sig` (SIGTERM: gunicorn's graceful stop, Celery's warm shutdown), wait up to
    `grace` seconds for the exit, then SIGKILL the process group. Returns the seconds until
    the process exited."""
    t0 = time.monotonic()
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.kill()
            proc.wait()
    return time.monotonic() - t0


def tail(path: Path, size: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError:
        return ""


class Gunicorn:
    """gunicorn as the README runs it (`gunicorn flaskweb.wsgi:application` in the checkout,
    which reads its gunicorn.conf.py), on `port`, with a pid file for USR2 upgrades."""

    def __init__(
        self, *, gunicorn: str, repo: Path, env: dict[str, str], port: int, log: Path
    ) -> None:
        self.repo, self.port, self.log = repo, port, log
        self.pidfile = log.with_suffix(".pid")
        self.command = [gunicorn, "flaskweb.wsgi:application", "--pid", str(self.pidfile)]
        self.env = {**env, "GUNICORN_BIND": f"127.0.0.1:{port}"}
        self.proc: subprocess.Popen | None = None
        self.master: int | None = None

    def start(self, *, timeout: float = 90) -> None:
        self.proc = start_logged(self.command, cwd=self.repo, env=self.env, log=self.log)
        self.master = self.proc.pid
        workers = int(self.env.get("WEB_CONCURRENCY", "0")) or 1
        wait_until(
            lambda: len(self.ready_workers()) >= workers and self._answers(),
            timeout=timeout,
            interval=0.1,
            what="gunicorn answering",
        )
        if self.proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited at start:\n{tail(self.log)}")

    def _answers(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"gunicorn exited:\n{tail(self.log)}")
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"GET /login/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                return s.recv(12).startswith(b"HTTP/1")
        except OSError:
            return False

    def workers(self) -> set[int]:
        assert self.master is not None
        return children(self.master)

    def ready_workers(self, master: int | None = None) -> set[int]:
        """The workers of `master` (this server's by default) that serve: they have loaded
        the app and entered their accept loop. Seen from outside: a gunicorn worker's
        heartbeat file (an unlinked `wgunicorn-*` it holds open) is stamped with the wall
        clock when the master makes it, and with the monotonic clock by the worker's loop."""
        master = master or self.master
        assert master is not None
        return {pid for pid in children(master) if _heartbeat_started(pid)}

    def hup(self, *, timeout: float = 60) -> float:
        """SIGHUP to the master: it re-reads its configuration, starts new workers (which
        load the code anew) and at once stops the old ones gracefully (they finish the
        requests in progress); until the new ones have imported the app, requests wait in
        the listening socket's queue. Returns the seconds until every old worker was gone
        and as many new ones had loaded the app."""
        assert self.master is not None
        old = self.workers()
        t0 = time.monotonic()
        os.kill(self.master, signal.SIGHUP)
        wait_until(
            lambda: not (self.workers() & old) and len(self.ready_workers() - old) >= len(old),
            timeout=timeout,
            interval=0.05,
            what="gunicorn's workers replaced",
        )
        return time.monotonic() - t0

    def upgrade(self, *, timeout: float = 90) -> float:
        """A binary upgrade: USR2 starts a new master from the same command (new code, new
        gunicorn, new Python), sharing the listening socket; once its workers have loaded the
        app, TERM to the old master stops it and its workers gracefully (they finish the
        requests in progress). WINCH, the documented way to stop only the old workers first,
        is ignored by a master that is not daemonized (as under systemd or compose). Returns
        the seconds it took."""
        assert self.master is not None
        old_master, old_workers = self.master, self.workers()
        t0 = time.monotonic()
        os.kill(old_master, signal.SIGUSR2)

        def new_master() -> int | None:
            # the new master writes PIDFILE.2 while the old one lives (which renamed its own
            # to PIDFILE.oldbin), and renames it to PIDFILE once promoted
            for path in (Path(f"{self.pidfile}.2"), self.pidfile):
                try:
                    pid = int(path.read_text().strip())
                except (OSError, ValueError):
                    continue
                if pid != old_master and _alive(pid):
                    return pid
            return None

        master = wait_until(new_master, timeout=timeout, what="a new gunicorn master")
        want = len(old_workers)
        wait_until(
            lambda: len(self.ready_workers(master)) >= want,
            timeout=timeout,
            what="the new workers loaded",
        )
        os.kill(old_master, signal.SIGTERM)
        wait_until(lambda: not _alive(old_master), timeout=timeout, what="the old master gone")
        if self.proc is not None and self.proc.pid == old_master:
            self.proc.wait(timeout=timeout)
            self.proc = None  # the new master is not this process's child
        self.master = master
        return time.monotonic() - t0

    def kill(self) -> None:
        """SIGKILL to the whole process group (masters and workers, after an upgrade too)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        elif self.master is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(self.master), signal.SIGKILL)

    def stop(self, *, grace: float = 35, quick: bool = False) -> None:
        """TERM (graceful: requests in progress finish) or, `quick`, QUIT (at once)."""
        if self.master is not None and _alive(self.master):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.master, signal.SIGQUIT if quick else signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                wait_until(lambda: not _alive(self.master), timeout=grace, what="gunicorn exit")
            if _alive(self.master):
                for pid in self.workers() | {self.master}:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        if self.proc is not None and self.proc.poll() is None:
            stop_process(self.proc, grace=5)
        elif self.proc is not None:
            self.proc.wait()
