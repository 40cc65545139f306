"""The access log of gunicorn.conf.py: gunicorn's own line for any access_log_format, with
the fields read only when the format asks for them, and the health probes' successes left out
(docs/OPERATIONS.md)."""

from __future__ import annotations

import datetime
import logging
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger

ROOT = Path(__file__).resolve().parent.parent
FORMATS = [
    None,  # gunicorn's default (the recipe's)
    '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(b)s "%(f)s" "%(a)s" %(m)s %(U)s %(q)s %(H)s %(B)s',
    "%(T)s %(D)s %(M)s %(L)s %(p)s %(Z)s %(_)s",
    '%({x-request-id}i)s %({X-Request-Id}i)s %({content-type}o)s %({REMOTE_ADDR}e)s "%({q}e)s"',
    "%({missing}i)s %({set-cookie}o)s %({wsgi.url_scheme}e)s %({x-twice}i)s %({bad}x)s",
]


class Recorder:
    """Stands in for the access logger: the message logging would write."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, msg, *args) -> None:
        self.lines.append(logging.LogRecord("a", logging.INFO, "", 0, msg, args, None).getMessage())


@pytest.fixture
def recipe_logger(tmp_path, monkeypatch):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # the conf makes one if unset
    monkeypatch.setattr(Logger, "now", lambda self: "[07/Dec/2026:05:40:00 +0000]")
    conf = runpy.run_path(str(ROOT / "gunicorn.conf.py"))

    def make(access_log_format: str | None, accesslog: str | None = "-"):
        cfg = Config()
        cfg.set("accesslog", accesslog)
        if access_log_format is not None:
            cfg.set("access_log_format", access_log_format)
        ours, theirs = conf["logger_class"](cfg), Logger(cfg)
        ours.access_log, theirs.access_log = Recorder(), Recorder()
        return ours, theirs

    return make


def exchange(path: str = "/api/v1/annotation/campaigns/3/next/", status: str = "200 OK"):
    environ = {
        "REQUEST_METHOD": "POST",
        "RAW_URI": path + "?a=%22b%22",
        "PATH_INFO": path,
        "QUERY_STRING": 'a="b"',
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "10.0.0.7",
        "HTTP_REFERER": 'https://example.org/"quoted"',
        "HTTP_USER_AGENT": 'crowd/1.0 "x"',
        "HTTP_AUTHORIZATION": "Basic dXNlcjpwYXNz",  # user:pass
        "q": 'a "quoted" value',
        "wsgi.url_scheme": "http",
    }
    req = SimpleNamespace(
        headers=[
            ("X-REQUEST-ID", 'r-1 "a"'),
            ("X-TWICE", "first"),
            ("X-TWICE", "second"),
            ("CONTENT-TYPE", "application/json"),
        ]
    )
    resp = SimpleNamespace(
        status=status,
        headers=[("Content-Type", "application/json"), ("Set-Cookie", 'k="v"')],
        sent=1234,
    )
    return resp, req, environ, datetime.timedelta(seconds=2, microseconds=34567)


@pytest.mark.parametrize("access_log_format", FORMATS)
def test_the_access_line_is_gunicorns_own_for_every_format(recipe_logger, access_log_format):
    ours, theirs = recipe_logger(access_log_format)
    for status in ("200 OK", "404 Not Found", 500):
        resp, req, environ, took = exchange(status=status)
        ours.access(resp, req, environ, took)
        theirs.access(resp, req, environ, took)
    assert ours.access_log.lines == theirs.access_log.lines
    assert len(ours.access_log.lines) == 3 and "-" not in ours.access_log.lines


def test_the_default_line_names_the_request_and_escapes_quotes(recipe_logger):
    ours, _ = recipe_logger(None)
    ours.access(*exchange())
    assert ours.access_log.lines == [
        '10.0.0.7 - user [07/Dec/2026:05:40:00 +0000] "POST /api/v1/annotation/campaigns/3/next/'
        '?a=%22b%22 HTTP/1.1" 200 1234 "https://example.org/\\"quoted\\"" "crowd/1.0 \\"x\\""'
    ]


def test_probe_successes_are_left_out_and_their_failures_kept(recipe_logger):
    ours, _ = recipe_logger(None)
    ours.access(*exchange("/healthz"))
    ours.access(*exchange("/readyz", "200 OK"))
    ours.access(*exchange("/readyz", "503 Service Unavailable"))
    assert len(ours.access_log.lines) == 1 and '"POST /readyz' in ours.access_log.lines[0]


def test_no_line_is_built_when_the_access_log_is_off(recipe_logger):
    ours, _ = recipe_logger(None, accesslog=None)
    ours.access(*exchange())
    assert ours.access_log.lines == []
