"""Dashboard benchmark: the analytics pages' server time with a fresh report snapshot,
against the number of judges.

    .venv/bin/python bench/dashboard_bench.py                      # 2, 10 and 72 judges
    .venv/bin/python bench/dashboard_bench.py --judges 2 100 --requests 50

For each judge count J it imports synthetic scores into a project of its own on PostgreSQL
(10 systems x 100 items x 6 skills; 3 people per response and skill; J judges, each the
people's mean plus its own noise, on the 1-5 scale: J x 6,000 judge scores), computes the
default report snapshot as the analytics worker does (analytics.report.snapshots, in this
process; its duration and size are printed), then times requests through Django's test
client in this process (server time: URL resolution, middleware, views, queries, template
rendering; no network): the dashboard page, each of its on-demand sections, and the API's
report. Prints median and 90th percentile per request kind; asserts nothing.

The database `flaskweb_bench_dashboard` on 127.0.0.1:5432 (user root, trust) is dropped and
made again; `--keep-db` keeps it at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB = "flaskweb_bench_dashboard"
SKILLS = (
    "Logical Correctness",
    "Factuality",
    "Commonsense Understanding",
    "Comprehension",
    "Completeness",
    "Readability",
)


def scores_csv(judges: int, systems: int, items: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    lines = ["item,system,rater,rater_kind,skill,score"]
    noise = rng.uniform(0.3, 1.5, size=judges)
    for item in range(items):
        for s in range(systems):
            for skill in SKILLS:
                truth = rng.uniform(1, 5)
                people = np.clip(np.rint(truth + rng.normal(0, 0.7, 3)), 1, 5).astype(int)
                for p, value in enumerate(people):
                    lines.append(f"q{item},sys-{s},person-{p},human,{skill},{value}")
                said = np.clip(np.rint(truth + rng.normal(0, noise)), 1, 5).astype(int)
                for j, value in enumerate(said):
                    lines.append(f"q{item},sys-{s},judge-{j:03d},judge,{skill},{value}")
    return ("\n".join(lines) + "\n").encode()


def timed(client, url: str, n: int, expect: bytes = b"", **headers) -> list[float]:
    """Server times of `n` GETs (ms); each must answer 200 with `expect` in its body."""
    times = []
    for _ in range(n):
        start = time.perf_counter()
        answer = client.get(url, **headers)
        times.append((time.perf_counter() - start) * 1000)
        if answer.status_code != 200 or expect not in answer.content:
            raise SystemExit(f"{url}: {answer.status_code} {answer.content[:300]!r}")
    return times


def figures(times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return f"{statistics.median(times):8.1f} {p90:8.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--judges", type=int, nargs="+", default=[2, 10, 72])
    parser.add_argument("--systems", type=int, default=10)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument(
        "--resamples", type=int, default=1000, help="one the page offers: 0, 200, 1000, 2000, 10000"
    )
    parser.add_argument("--requests", type=int, default=30, help="requests per kind")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args()

    import psycopg

    with psycopg.connect("postgresql://root@127.0.0.1:5432/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")
    os.environ["DATABASE_URL"] = f"postgres://root@127.0.0.1:5432/{DB}"
    os.environ["DJANGO_DEBUG"] = "true"
    os.environ.pop("REDIS_URL", None)
    os.environ["FLASKWEB_VAR_DIR"] = str(ROOT / "bench" / "out" / "var")
    os.environ["DJANGO_SETTINGS_MODULE"] = "flaskweb.settings"
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.test import Client
    from django.urls import reverse

    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)

    from django.contrib.auth import get_user_model

    from analytics.imports.services import scores_import
    from analytics.report import snapshots
    from annotation.models import Project, ProjectRole
    from annotation.services.projects import membership_set

    rita = get_user_model().objects.create_user("rita", password="x")
    results = []
    print(
        f"{'judges':>6} {'scores':>9} {'compute s':>9} {'report MB':>9} "
        f"{'page med':>8} {'p90':>8} {'sect med':>8} {'p90':>8} {'api med':>8} {'p90':>8}  (ms)"
    )
    for judges in args.judges:
        slug = f"bench-{judges}"
        data = scores_csv(judges, args.systems, args.items, args.seed)
        scores_import(project_slug=slug, files=[("s.csv", data)], create_project=True)
        project = Project.objects.get(slug=slug)
        membership_set(project=project, user=rita, role=ProjectRole.RESEARCHER)
        params = snapshots.snapshot_params(resamples=args.resamples)
        snapshot, _ = snapshots.snapshot_request(project=project, params=params)
        start = time.perf_counter()
        done = snapshots.report_snapshot_compute(snapshot_id=snapshot.pk)
        compute = time.perf_counter() - start
        if done is None or done.status != "done":
            raise SystemExit(f"snapshot failed: {done and done.error}")
        client = Client()
        client.force_login(rita)
        query = "" if args.resamples == 1000 else f"?resamples={args.resamples}"
        page = reverse("analytics:dashboard", args=[slug]) + query
        client.get(page)  # warm: templates, the session
        # the headline table of a done snapshot, not a filter error or a "computing" page
        page_times = timed(client, page, args.requests, expect=b'id="headline-table"')
        section_times: list[float] = []
        from analytics.report import views

        per_section: dict[str, float] = {}
        for name in getattr(views, "SECTIONS", ()):
            url = reverse("analytics:report-section", args=[slug, name]) + query
            times = timed(client, url, max(3, args.requests // 3), HTTP_HX_REQUEST="true")
            per_section[name] = statistics.median(times)
            section_times += times
        api_times = timed(
            client, f"/api/v1/projects/{slug}/analytics/report{query}", max(5, args.requests // 3)
        )
        rows = len(data.splitlines()) - 1
        row = {
            "judges": judges,
            "scores": rows,
            "compute_seconds": round(compute, 2),
            "report_bytes": done.size_bytes,
            "page_ms": statistics.median(page_times),
            "section_ms": statistics.median(section_times) if section_times else None,
            "api_ms": statistics.median(api_times),
            "section_ms_by_name": per_section,
        }
        results.append(row)
        print(
            f"{judges:>6} {rows:>9,} {compute:>9.1f} {done.size_bytes / 1e6:>9.2f} "
            f"{figures(page_times)} "
            f"{figures(section_times) if section_times else '       -        -'} "
            f"{figures(api_times)}",
            flush=True,
        )
        print(
            "        sections (median ms): "
            + ", ".join(f"{k} {v:.0f}" for k, v in per_section.items())
        )
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "dashboard_bench.json").write_text(json.dumps(results, indent=2))
    if not args.keep_db:
        from django.db import connections

        connections.close_all()
        with psycopg.connect("postgresql://root@127.0.0.1:5432/postgres", autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")


if __name__ == "__main__":
    main()
