"""`manage.py serve` (docs/SERVING.md) on a fresh embedded install: gunicorn with DEBUG off
and the worker beside it, the first admin from the environment, and SIGTERM stopping every
process it started."""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO, wait_for

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _started_by(var_dir: Path) -> dict[int, str]:
    """Processes whose command line names this install's var dir: the worker (its beat
    schedule) and every gunicorn process (its control socket)."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(var_dir) in cmdline and state != "Z":
            found[int(pid)] = cmdline
    return found


def _get(url: str) -> tuple[int, str]:
    # as the reverse proxy sends it: the request came in over HTTPS
    request = urllib.request.Request(url, headers={"X-Forwarded-Proto": "https"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_serve_runs_gunicorn_and_the_worker_without_debug_and_sigterm_stops_both(tmp_path):
    # given: a fresh var dir, no terminal, the first admin given in the environment
    var = tmp_path / "var"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_", "REDIS_", "CELERY_", "FLASKWEB_"))
    }
    env.update(
        FLASKWEB_VAR_DIR=str(var),
        DJANGO_STATIC_ROOT=str(tmp_path / "static"),
        DJANGO_SUPERUSER_USERNAME="siteadmin",
        DJANGO_SUPERUSER_PASSWORD="pw-siteadmin-serve",
        DJANGO_SUPERUSER_EMAIL="siteadmin@example.org",
    )
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--workers", "1"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        # when it is up
        def up():
            try:
                return _get(f"{base}/login/")[0] == 200
            except OSError:
                assert serve.poll() is None, serve.communicate()[0]
                return False

        wait_for(up, timeout=60, interval=0.3)

        # then pages answer without debug, static files come from whitenoise
        status, page = _get(f"{base}/login/")
        css = re.search(r'href="(/static/css/[^"]+\.css)"', page)
        assert css, page[:500]
        assert _get(base + css[1])[0] == 200  # the hashed name collectstatic made
        status, missing = _get(f"{base}/no-such-page/")
        assert status == 404
        assert "Traceback" not in missing and "URLconf" not in missing
        assert "DEBUG = True" not in missing
        # a plain-HTTP request straight to gunicorn is sent to HTTPS (DEBUG off)
        with pytest.raises(urllib.error.HTTPError) as redirected:
            opener = urllib.request.build_opener(_NoRedirect)
            opener.open(f"{base}/login/", timeout=5)
        assert redirected.value.code == 301
        assert redirected.value.headers["Location"].startswith("https://")
        # the worker (beat embedded) and gunicorn run beside it, SQLite is in WAL mode
        running = _started_by(var)
        assert any(" celery " in c and " worker " in c for c in running.values()), running
        assert any(" gunicorn " in c for c in running.values()), running
        with sqlite3.connect(var / "flaskweb.sqlite3") as db:
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            admins = db.execute("SELECT username FROM auth_user WHERE is_superuser").fetchall()
        assert admins == [("siteadmin",)]
        assert (var / "secret_key").is_file()

        # when it gets SIGTERM
        serve.send_signal(signal.SIGTERM)
        output, _ = serve.communicate(timeout=45)
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.communicate()

    # then it stopped cleanly and left no process behind
    assert serve.returncode == 0, output
    assert "stopping (on SIGTERM)" in output and "stopped" in output
    wait_for(lambda: not _started_by(var), timeout=5)
    # and the demo's data is not there
    with sqlite3.connect(var / "flaskweb.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM annotation_project").fetchone() == (0,)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.mark.parametrize(
    ("remote", "forwarded", "seen"),
    [
        ("127.0.0.1", "203.0.113.7", "203.0.113.7"),  # through the proxy
        ("127.0.0.1", "10.9.9.9, 203.0.113.7", "203.0.113.7"),  # a client's own value ignored
        ("127.0.0.1", "203.0.113.7, 127.0.0.1", "203.0.113.7"),  # trusted hops skipped
        ("127.0.0.1", "not-an-address", "127.0.0.1"),
        ("127.0.0.1", "", "127.0.0.1"),
        ("198.51.100.4", "203.0.113.7", "198.51.100.4"),  # not from a trusted proxy
    ],
)
def test_the_client_address_comes_from_a_trusted_proxy_only(settings, remote, forwarded, seen):
    from django.test import RequestFactory

    from flaskweb.proxy import ForwardedForMiddleware

    settings.FLASKWEB_TRUSTED_PROXIES = ["127.0.0.1", "::1"]
    request = RequestFactory().get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)
    ForwardedForMiddleware(lambda r: r.META["REMOTE_ADDR"])(request)
    assert request.META["REMOTE_ADDR"] == seen
