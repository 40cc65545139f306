"""Metrics benchmark: what the request metrics cost the annotation hot path, what a scrape
costs, and several gunicorn processes adding up their counts. Prints figures; it is not a
test. See bench/README.md ("Metrics benchmark").

    .venv/bin/python bench/metrics_bench.py                 # all three parts
    .venv/bin/python bench/metrics_bench.py --parts middleware --requests 500000
    .venv/bin/python bench/metrics_bench.py --parts files --files 2000
    .venv/bin/python bench/metrics_bench.py --parts gunicorn --database-url postgres://...

- `middleware`: MetricsMiddleware around a view that returns at once, against the same
  view without it, N requests each, in this process (counters in memory) and in a child
  process with PROMETHEUS_MULTIPROC_DIR set (counters in mmap files, as under gunicorn).
  The difference per request is the middleware's cost: the clock, the label lookup and
  four counter writes.
- `files`: the multiprocess directory after F replaced web processes, each having counted
  the app's 40 busiest views: the time of a scrape's read of it, before and after their files
  are folded into the archive (flaskweb/metrics_dir.py).
- `gunicorn`: the web recipe (gunicorn.conf.py) with 2 worker processes on PostgreSQL
  (--database-url, a migrated database): 40 requests, then (after a second and a half, by
  which each process has written its counts) scrapes answered by either process must all
  count 40; one worker is replaced (SIGTERM, as after max_requests) and the
  count must stay. Exit status 1 when a count is wrong.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-metrics-token"
FLUSH_WAIT = 1.5  # flaskweb.metrics.FLUSH_EVERY and some


def _django(multiproc_dir: str | None = None) -> None:
    if multiproc_dir:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = multiproc_dir
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flaskweb.settings_test")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def middleware_cost(requests: int) -> tuple[float, float]:
    """(µs per request without, with the middleware), best of 5 rounds."""
    from django.http import HttpResponse
    from django.test import RequestFactory
    from django.urls import resolve

    from flaskweb.metrics import MetricsMiddleware

    response = HttpResponse(status=201)
    request = RequestFactory().post("/api/v1/annotation/assignments/1/submit/")
    request.resolver_match = resolve("/api/v1/annotation/assignments/1/submit/")

    def view(_request):
        return response

    wrapped = MetricsMiddleware(view)
    rounds = {"bare": [], "metrics": []}
    for _ in range(5):
        for name, handler in (("bare", view), ("metrics", wrapped)):
            started = time.perf_counter()
            for _ in range(requests):
                handler(request)
            rounds[name].append((time.perf_counter() - started) / requests * 1e6)
    return min(rounds["bare"]), min(rounds["metrics"])


def part_middleware(requests: int) -> None:
    print(f"middleware: {requests:,} requests per round, best of 5")
    with tempfile.TemporaryDirectory() as directory:
        for mode, env in (("in memory", {}), ("multiprocess files", {"MULTIPROC": directory})):
            out = subprocess.run(
                [sys.executable, __file__, "--child-middleware", str(requests)],
                env={**os.environ, **env},
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            bare, measured = float(out[-2]), float(out[-1])
            print(
                f"  {mode:<19} without {bare:6.2f} µs   with {measured:6.2f} µs   "
                f"cost {measured - bare:5.2f} µs/request"
            )


def part_files(processes: int) -> None:
    from prometheus_client.mmap_dict import MmapedDict, mmap_key
    from prometheus_client.multiprocess import MultiProcessCollector

    from flaskweb import metrics_dir

    views = [f"annotation:view-{i}" for i in range(40)]
    buckets = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0"]
    hist = "flaskweb_http_request_duration_seconds"
    with tempfile.TemporaryDirectory() as directory:
        for pid in range(1000, 1000 + processes):
            counters = MmapedDict(os.path.join(directory, f"counter_{pid}.db"))
            histograms = MmapedDict(os.path.join(directory, f"histogram_{pid}.db"))
            for view in views:
                key = mmap_key(
                    "flaskweb_http_requests",
                    "flaskweb_http_requests_total",
                    ["view", "method", "status"],
                    [view, "POST", "2xx"],
                    "h",
                )
                counters.write_value(key, 10.0, 0.0)
                for le in [*buckets, "+Inf"]:
                    key = mmap_key(hist, f"{hist}_bucket", ["view", "le"], [view, le], "h")
                    histograms.write_value(key, 1.0, 0.0)
            counters.close()
            histograms.close()

        def scrape_ms() -> float:
            started = time.perf_counter()
            list(MultiProcessCollector(None, path=directory).collect())
            return (time.perf_counter() - started) * 1000

        before = min(scrape_ms() for _ in range(3))
        started = time.perf_counter()
        for pid in range(1000, 1000 + processes):
            metrics_dir.archive_process(pid, directory)
        fold = (time.perf_counter() - started) / processes * 1000
        after = min(scrape_ms() for _ in range(3))
        left = len(list(Path(directory).glob("*.db")))
    print(f"files: {processes:,} replaced web processes x 40 views")
    print(f"  scrape read, files as left    {before:8.1f} ms ({processes * 2:,} files)")
    print(f"  folding, per exited process   {fold:8.2f} ms (in gunicorn's master)")
    print(f"  scrape read, after folding    {after:8.1f} ms ({left} files)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def part_gunicorn(database_url: str) -> bool:
    port = _free_port()
    directory = tempfile.mkdtemp(prefix="metrics-bench-")
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "flaskweb.settings_test",
        "DATABASE_URL": database_url,
        "FLASKWEB_METRICS_TOKEN": TOKEN,
        "PROMETHEUS_MULTIPROC_DIR": directory,
        "GUNICORN_ACCESS_LOG": "",
    }
    command = [sys.executable, "-m", "gunicorn", "flaskweb.wsgi:application"]
    command += ["--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "1"]
    started = time.perf_counter()
    server = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )

    def get(path: str, headers: dict | None = None) -> tuple[int, str]:
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, ""
        except OSError:
            return 0, ""

    def counted() -> float:
        from prometheus_client.parser import text_string_to_metric_families

        _, text = get("/metrics", {"Authorization": f"Bearer {TOKEN}"})
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "flaskweb_http_requests_total" and sample.labels == {
                    "view": "login",
                    "method": "GET",
                    "status": "2xx",
                }:
                    return sample.value
        return 0.0

    ok = True
    try:
        while get("/healthz")[0] != 200:
            if server.poll() is not None or time.perf_counter() - started > 60:
                raise SystemExit("gunicorn did not start")
            time.sleep(0.05)
        print(f"gunicorn: 2 processes up in {time.perf_counter() - started:.1f} s")
        for _ in range(40):
            assert get("/login/")[0] == 200
        time.sleep(FLUSH_WAIT)  # each process writes its counts within a second
        seen = sorted({counted() for _ in range(10)})
        print(f"  40 requests; 10 scrapes counted {seen}")
        ok &= seen == [40.0]
        workers = subprocess.run(
            ["pgrep", "-P", str(server.pid)], capture_output=True, text=True
        ).stdout.split()
        os.kill(int(workers[0]), signal.SIGTERM)
        archive = Path(directory) / "counter_archive.db"
        while not archive.exists():
            time.sleep(0.05)
        get("/login/")
        time.sleep(FLUSH_WAIT)
        seen = sorted({counted() for _ in range(10)})
        print(f"  a process replaced, 1 more request; 10 scrapes counted {seen}")
        ok &= seen == [41.0]
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(directory, ignore_errors=True)
    print("  OK" if ok else "  WRONG COUNTS")
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="middleware,files,gunicorn")
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument(
        "--database-url",
        default=os.environ.get("TEST_DATABASE_URL", "postgres://root@127.0.0.1:5432/flaskweb"),
    )
    parser.add_argument("--child-middleware", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_middleware:
        _django(os.environ.get("MULTIPROC"))
        bare, measured = middleware_cost(args.child_middleware)
        print(bare, measured)
        return
    parts = args.parts.split(",")
    ok = True
    if "middleware" in parts:
        part_middleware(args.requests)
    if "files" in parts:
        _django()
        part_files(args.files)
    if "gunicorn" in parts:
        ok = part_gunicorn(args.database_url)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
