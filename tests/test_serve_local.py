"""`manage.py serve --local` (a trial over plain HTTP on one's own machine) and SIGHUP's
reload without downtime (docs/SERVING.md "Trying it on your own machine", "Deploying a new
release with `serve`"). Without --local, plain HTTP is still sent to https://
(tests/test_serve_command.py)."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from django.core.management import CommandError, call_command

from tests.conftest import REPO, wait_for
from tests.test_serve_command import _free_port, _started_by

ADMIN, PASSWORD = "siteadmin", "pw-siteadmin-local"
DATASET = (
    '{"id": "q1", "instruction": "Say hello", "skills": ["Readability", "Harmlessness", '
    '"Conciseness"], "domains": ["Language"], "difficulty": 1, '
    '"responses": [{"model": "m1", "text": "Hello."}]}\n'
)


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "example.org"])
def test_local_mode_refuses_an_address_other_machines_reach(settings, host):
    settings.DEBUG = False
    with pytest.raises(CommandError, match=f"cannot listen on {re.escape(host)}"):
        call_command("serve", "--local", "--host", host)


def test_local_mode_refuses_a_public_host_name(settings):
    settings.DEBUG = False
    settings.ALLOWED_HOSTS = ["study.example.org", "localhost"]
    with pytest.raises(CommandError, match="DJANGO_ALLOWED_HOSTS names study.example.org"):
        call_command("serve", "--local")


# the security settings under three environments, in one process (settings read the
# environment when imported: each case imports them again)
SETTINGS_CASES = """
import importlib, os, sys
import flaskweb.settings as s
for case in ({}, {"FLASKWEB_LOCAL_TRIAL": "true"},
             {"FLASKWEB_LOCAL_TRIAL": "true", "DJANGO_ALLOWED_HOSTS": "study.example.org"}):
    os.environ.update(case)
    try:
        importlib.reload(s)
    except Exception as exc:
        print(type(exc).__name__, exc)
    else:
        print(s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE,
              s.SECURE_HSTS_SECONDS > 0)
"""


def test_only_the_local_trial_turns_off_https_secure_cookies_and_hsts(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_", "REDIS_", "FLASKWEB_"))
    }
    env["FLASKWEB_VAR_DIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", SETTINGS_CASES], cwd=REPO, env=env, capture_output=True, text=True
    )
    served, local, public = done.stdout.splitlines()
    assert served.split() == ["True", "True", "True", "True"], done.stderr
    assert local.split() == ["False", "False", "False", "False"]
    assert public == ("ImproperlyConfigured FLASKWEB_LOCAL_TRIAL serves loopback host names only")


class _Lines:
    """serve's output, read as it comes, each line with the moment it came."""

    def __init__(self, stream):
        self.lines: list[str] = []
        self.times: list[float] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream):
        for line in stream:
            self.times.append(time.monotonic())
            self.lines.append(line)

    def find(self, pattern: str) -> re.Match | None:
        return next(filter(None, (re.search(pattern, line) for line in self.lines)), None)

    def when(self, pattern: str) -> float:
        return next(
            t for t, line in zip(self.times, self.lines, strict=False) if re.search(pattern, line)
        )

    @property
    def text(self) -> str:
        return "".join(self.lines)


def _gunicorn_workers(master: int) -> set[int]:
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(stat[1]) == master and stat[0] != "Z":
            found.add(int(pid))
    return found


def _csrf(client: httpx.Client, url: str) -> str:
    page = client.get(url)
    assert page.status_code == 200, (url, page.status_code, page.headers.get("location"))
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]


class _Load(threading.Thread):
    """A signed-in admin's GETs and POSTs, each on a fresh connection, until stopped: every
    POST creates a project, so an acknowledged one must be in the database."""

    def __init__(self, base: str, cookies: httpx.Cookies, csrf: str):
        super().__init__(daemon=True)
        self.base, self.cookies, self.csrf = base, cookies, csrf
        self.stop = threading.Event()
        # (what, status or error, expected status, when it was sent, how long it took)
        self.answers: list[tuple[str, int | str, int, float, float]] = []
        self.created: list[str] = []

    def run(self):
        n = 0
        while not self.stop.is_set():
            n += 1
            # no connection kept: each request meets whichever web worker accepts it
            with httpx.Client(base_url=self.base, cookies=self.cookies, timeout=60) as c:
                self._ask("GET /", lambda: c.get("/"), 200)
                slug = f"load-{n}"
                form = {"csrfmiddlewaretoken": self.csrf, "name": f"Load {n}", "slug": slug}
                posted = self._ask(
                    "POST /projects/new/",
                    lambda form=form: c.post(
                        "/projects/new/", data=form, headers={"Origin": self.base}
                    ),
                    302,
                )
                if posted:
                    self.created.append(slug)
            self.stop.wait(0.05)  # a person's pace, not a benchmark's

    def _ask(self, what: str, request, expected: int) -> bool:
        sent = time.monotonic()
        try:
            status: int | str = request().status_code
        except httpx.HTTPError as exc:
            status = f"{type(exc).__name__}: {exc}"
        self.answers.append((what, status, expected, sent, time.monotonic() - sent))
        return status == expected

    def failures(self) -> list[tuple]:
        return [answer for answer in self.answers if answer[1] != answer[2]]

    def sent_between(self, start: float, end: float) -> list[tuple]:
        return [answer for answer in self.answers if start <= answer[3] <= end]


@pytest.mark.slow
def test_serve_local_takes_plain_http_sign_ins_and_reloads_on_sighup_without_a_failure(
    tmp_path,
):
    # given serve --local on a fresh install, the first admin given in the environment
    var = tmp_path / "var"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_", "REDIS_", "CELERY_", "FLASKWEB_"))
    }
    env.update(
        FLASKWEB_VAR_DIR=str(var),
        DJANGO_STATIC_ROOT=str(tmp_path / "static"),
        DJANGO_SUPERUSER_USERNAME=ADMIN,
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
        DJANGO_SUPERUSER_EMAIL="siteadmin@example.org",
    )
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--local", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    out = _Lines(serve.stdout)
    try:
        wait_for(lambda: out.find(r"serving on ") or serve.poll() is not None, timeout=120)
        assert serve.poll() is None, out.text
        assert f"Local trial mode: plain HTTP on {base}, do not expose it" in out.text
        assert int((var / "serve.pid").read_text()) == serve.pid

        # when the admin signs in over plain HTTP, as a browser on this machine does
        client = httpx.Client(base_url=base, timeout=10)
        wait_for(lambda: _up(client), timeout=30, interval=0.2)
        login = client.get("/login/")
        assert login.status_code == 200  # not sent to https://
        assert "secure" not in login.headers["set-cookie"].lower()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)[1]
        signed_in = client.post(
            "/login/",
            data={"csrfmiddlewaretoken": token, "username": ADMIN, "password": PASSWORD},
            headers={"Origin": base},
        )
        # then CSRF passes and the session cookie comes back over plain HTTP
        assert signed_in.status_code == 302, signed_in.text[:500]
        assert signed_in.headers["location"] == "/"
        home = client.get("/")
        assert "There is no project on this server yet" in home.text
        assert "strict-transport-security" not in home.headers

        # when serve gets SIGHUP while the admin keeps using it
        master = int(out.find(r"gunicorn pid (\d+)")[1])
        old_web = _gunicorn_workers(master)
        old_worker = int(out.find(r"worker pid (\d+)\)")[1])
        load = _Load(base, client.cookies, _csrf(client, "/projects/new/"))
        load.start()
        wait_for(lambda: len(load.answers) >= 4, timeout=30)
        serve.send_signal(signal.SIGHUP)
        wait_for(lambda: out.find(r"reloaded: ") or serve.poll() is not None, timeout=180)
        after = len(load.answers)
        wait_for(lambda: len(load.answers) >= after + 6, timeout=60)
        load.stop.set()
        load.join(timeout=60)

        # then no request failed, those sent while the web workers were replaced included
        assert serve.poll() is None, out.text
        assert load.failures() == [], out.text[-3000:]
        swap = load.sent_between(
            out.when(r"starts new web workers"), out.when(r"new web workers answer")
        )
        assert swap, out.text[-3000:]
        # and the web workers and the worker were replaced
        new_web = _gunicorn_workers(master)
        assert new_web and not (new_web & old_web)
        new_worker = int(out.find(r"reloaded: worker pid \d+ stopped, pid (\d+) started")[1])
        assert new_worker != old_worker
        assert old_worker not in _started_by(var)
        # and every acknowledged POST is in the database
        with sqlite3.connect(var / "flaskweb.sqlite3") as db:
            slugs = {s for (s,) in db.execute("SELECT slug FROM annotation_project")}
        assert set(load.created) <= slugs and len(load.created) >= 5

        # and the new worker takes the tasks: a dataset upload is imported
        uploaded = client.post(
            f"/projects/{load.created[0]}/uploads/new/",
            data={"csrfmiddlewaretoken": _csrf(client, "/projects/new/"), "dataset": "Hello"},
            files={"files": ("hello.jsonl", DATASET.encode(), "application/json")},
            headers={"Origin": base},
        )
        assert uploaded.status_code == 302, uploaded.text[:1000]
        wait_for(lambda: _upload_status(var) == "succeeded", timeout=60, interval=0.3)

        # when it gets SIGTERM
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()

    # then it stopped everything it started, the new worker included
    assert serve.returncode == 0, out.text[-3000:]
    wait_for(lambda: not _started_by(var), timeout=5)
    assert not (var / "serve.pid").exists()


def _up(client: httpx.Client) -> bool:
    try:
        return client.get("/login/").status_code == 200
    except httpx.HTTPError:
        return False


def _upload_status(var: Path) -> str:
    with sqlite3.connect(var / "flaskweb.sqlite3") as db:
        row = db.execute("SELECT status FROM annotation_datasetupload").fetchone()
    return row[0] if row else ""


@pytest.mark.slow
def test_a_reload_is_refused_while_the_release_has_migrations_not_applied(tmp_path):
    # given a database the release's migrations have not reached (a fresh one: none applied)
    from flaskweb.management.commands.serve import Command

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_", "REDIS_", "CELERY_", "FLASKWEB_"))
    }
    env.update(FLASKWEB_VAR_DIR=str(tmp_path), DJANGO_STATIC_ROOT=str(tmp_path / "static"))
    # when serve checks the release before a reload
    problem = Command()._release_problem(env)
    # then it refuses, names the pending migrations and what to do, and collected nothing
    assert problem.startswith(
        "the release has migrations that are not applied; run `manage.py migrate`, "
        "then reload again. Not applied: "
    )
    assert "annotation.0001" in problem
    assert not (tmp_path / "static").exists()
