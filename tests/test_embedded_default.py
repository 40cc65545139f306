"""README command 1 on embedded defaults: SQLite, no Redis, a file-system broker and a
separate worker process. Runs `manage.py rundemo` as a newcomer would and uses the app."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

import pytest

from devtools.openai_server import FakeOpenAIServer
from tests.conftest import REPO, wait_for

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(var_dir) -> dict:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "REDIS_", "CELERY_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="flaskweb.settings",
        DJANGO_DEBUG="true",
        FLASKWEB_VAR_DIR=str(var_dir),
    )
    env.pop("DJANGO_MEDIA_ROOT", None)
    return env


def _shell(env: dict, code: str) -> str:
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return out.splitlines()[-1] if out else ""


LLM_RUN = """
from annotation.models import Dataset
from judging.models import JudgeKind, Provider
from judging.services import judge_config_create, judge_run_create, judge_run_start
dataset = Dataset.objects.get(name="Demo set")
provider = Provider.objects.create(
    name="local-fake", base_urls=["{url}"], is_local=True, approved=True,
    requests_per_minute=1200,
)
judge = judge_config_create(
    project=dataset.project, name="fake judge", kind=JudgeKind.LLM, provider=provider,
    base_url="{url}", model="fake-judge", use_reference=False,
)
run = judge_run_create(judge=judge, dataset=dataset)
judge_run_start(run=run)
print(run.pk, run.total)
"""
RUN_STATUS = """
from judging.models import JudgeRun
run = JudgeRun.objects.get(pk={pk})
print(run.status, run.done, run.failed)
"""


def _multipart(fields: dict, files: dict) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    out = []
    for name, value in fields.items():
        out.append(
            f"--{boundary}\r\nContent-Disposition: form-data; "
            f'name="{name}"\r\n\r\n{value}\r\n'.encode()
        )
    for name, (filename, data) in files.items():
        out.append(
            f"--{boundary}\r\nContent-Disposition: form-data; "
            f'name="{name}"; filename="{filename}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n".encode()
            + data
            + b"\r\n"
        )
    out.append(f"--{boundary}--\r\n".encode())
    return b"".join(out), f"multipart/form-data; boundary={boundary}"


def test_the_demo_runs_on_sqlite_without_redis_and_imports_in_a_worker(tmp_path):
    # given: the one-command demo on a fresh var dir
    env = _env(tmp_path / "var")
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "rundemo", "--port", str(port)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"

        def up():
            try:
                return urllib.request.urlopen(f"{base}/login/", timeout=2).status == 200
            except OSError:
                return False

        wait_for(up, timeout=90, interval=0.5)
        assert (tmp_path / "var" / "flaskweb.sqlite3").exists()
        token = subprocess.run(
            [sys.executable, "manage.py", "drf_create_token", "admin"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()[2]
        headers = {"Authorization": f"Token {token}"}
        # the demo dataset is there
        req = urllib.request.Request(
            f"{base}/api/v1/annotation/projects/demo/datasets/", headers=headers
        )
        datasets = json.load(urllib.request.urlopen(req))["results"]
        assert [(d["name"], d["item_count"]) for d in datasets] == [("Demo set", 16)]
        # when: an import goes through the web process, the file broker and the worker
        rows = b'{"item": "demo-001", "model": "echo-1", "text": "A new answer."}\n'
        body, ctype = _multipart(
            {"project": "demo", "dataset": "Demo set"}, {"files": ("echo.jsonl", rows)}
        )
        req = urllib.request.Request(
            f"{base}/api/v1/annotation/uploads/",
            data=body,
            headers={**headers, "Content-Type": ctype},
        )
        created = json.load(urllib.request.urlopen(req))
        assert created["status"] == "pending"

        def finished():
            req = urllib.request.Request(
                f"{base}/api/v1/annotation/uploads/{created['id']}/", headers=headers
            )
            data = json.load(urllib.request.urlopen(req))
            return data if data["status"] not in ("pending", "running") else None

        # then
        result = wait_for(finished, timeout=60, interval=0.5)
        assert result["status"] == "succeeded", result
        assert result["responses_created"] == 1
        # and the demo's offline baseline judge run was done by the worker in the background

        def judge_run_status():
            out = (
                subprocess.run(
                    [
                        sys.executable,
                        "manage.py",
                        "shell",
                        "-c",
                        "from judging.models import JudgeRun; r = JudgeRun.objects.get(); "
                        "print(r.status, r.done, r.total)",
                    ],
                    cwd=REPO,
                    env=env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                .stdout.strip()
                .splitlines()[-1:]
            )
            fields = out[0].split() if out else []
            return fields if fields and fields[0] == "done" else None

        status, done, total = wait_for(judge_run_status, timeout=60, interval=1)
        assert int(done) == int(total) == 64
        # and an LLM judge run goes at its limit from the one worker, with no Redis: calls
        # leave at 20 a second (the in-process limiter) and ~20 are on the wire at once
        with FakeOpenAIServer(style="json", latency=1.0, rpm=1260) as srv:
            started = _shell(env, LLM_RUN.format(url=srv.url)).split()
            assert started[-1] == "65"  # the demo's 64 responses and the one imported

            def llm_run_done():
                fields = _shell(env, RUN_STATUS.format(pk=started[-2])).split()
                return fields if fields[0] == "done" else None

            status, done, failed = wait_for(llm_run_done, timeout=90, interval=1)
            stats = srv.stats()
        assert (int(done), int(failed)) == (65, 0)
        assert stats["rate_limited"] == 0 and stats["completions"] == 65
        assert stats["max_concurrent"] >= 10  # one call at a time before the engine
        # and the analytics report is computed by the same worker (queue "analytics") into
        # a snapshot that the API asks for (202) and then serves (200)
        report_url = f"{base}/api/v1/projects/demo/analytics/report?resamples=100"

        def report():
            answer = urllib.request.urlopen(urllib.request.Request(report_url, headers=headers))
            return json.load(answer) if answer.status == 200 else None

        assert report() is None  # 202: asked, computing
        served = wait_for(report, timeout=90, interval=1)
        assert served["snapshot"]["status"] == "done" and served["resamples"] == 100
        assert served["agreement"] and served["correlation"]
    finally:
        # SIGTERM to rundemo alone (as a service manager or `kill` stops it): it stops its
        # worker, which runs in a process group of its own
        server.send_signal(signal.SIGTERM)
        try:
            output, _ = server.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            output, _ = server.communicate()
    assert "admin       / admin-demo" in output  # demo logins are printed
    # and no worker was left behind (its command line names the var dir: --schedule)
    wait_for(lambda: not _running_with(str(tmp_path / "var")), timeout=15, interval=0.5)


def _running_with(text: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(cmdline)
    return found
