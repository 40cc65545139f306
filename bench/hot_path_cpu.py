"""The web process's CPU per next + submit cycle, in one process (bench/README.md "Hot-path CPU").

N cycles of the annotator loop run through Django's test client against PostgreSQL with the
production settings (DEBUG off, the whole middleware stack), one annotator, no contention:

- plain: CPU time of this process per cycle (`time.process_time`, median of `--repeat`
  blocks) and SQL statements per cycle;
- under callgrind: instructions per cycle, counted only over the cycles (the harness turns
  instrumentation on and off itself through `callgrind_control`), which the host's load
  cannot move:

      valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=bench/out/hot_path/cg.out \\
          .venv/bin/python bench/hot_path_cpu.py --cycles 100 --reuse-db

- `--cprofile N`: the top N functions by own time over the cycles (cProfile).

`--path api` is the JSON API (POST …/next/ then …/submit/ with a token). Each path is one
function taking (client, campaign, cycles) below; `PATHS` maps the name. The participants'
page path (a study session posting the htmx form, answered by the next card) is measured by
bench/_page_path.py, side by side with the API.

The database (`--db`, default `flaskweb_hotpath` on 127.0.0.1:5432, user root) is dropped,
migrated and loaded with a small generated dataset (`--items` × 2 responses) unless
`--reuse-db` finds it loaded; each run makes a new campaign (K = 3) with a fresh annotator.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import random
import re
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "hot_path"
PYTHON = sys.executable
PROJECT = "hotpath"
DATASET = "hot"
MODELS = 2
API = "/api/v1/annotation"


def log(message: str) -> None:
    print(message, flush=True)


# --- environment and database ---------------------------------------------------------------


def environment(db: str) -> dict[str, str]:
    """The production settings as bench/annotate_load.py serves them: DEBUG off (no query
    recording), no HTTPS redirect (plain test client), no Redis (the file cache)."""
    env = dict(os.environ)
    env.update(
        DATABASE_URL=f"postgres://root@127.0.0.1:5432/{db}",
        DJANGO_DEBUG="false",
        DJANGO_SECURE_SSL_REDIRECT="false",
        DJANGO_ALLOWED_HOSTS="testserver",
        DJANGO_SECRET_KEY="hotpath-bench-only-not-a-secret",
        FLASKWEB_VAR_DIR=str(OUT / "var"),
        DJANGO_LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="flaskweb.settings",
    )
    env.pop("REDIS_URL", None)
    return env


def pg(sql: str, db: str = "postgres"):
    import psycopg

    with psycopg.connect(f"postgresql://root@127.0.0.1:5432/{db}", autocommit=True) as conn:
        cursor = conn.execute(sql)
        return cursor.fetchall() if cursor.description else None


def database_ready(db: str, items: int) -> bool:
    if not pg(f"SELECT 1 FROM pg_database WHERE datname = '{db}'"):
        return False
    try:
        rows = pg(
            "SELECT count(*) FROM annotation_response r JOIN annotation_item i "
            "ON i.id = r.item_id JOIN annotation_dataset d ON d.id = i.dataset_id "
            f"WHERE d.name = '{DATASET}'",
            db,
        )
    except Exception:
        return False
    return bool(rows) and rows[0][0] == items * MODELS


def database_build(db: str, items: int) -> None:
    """Migrate and import in child processes (not traced by valgrind)."""
    pg(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
    pg(f"CREATE DATABASE {db}")
    path = OUT / f"dataset-{items}.jsonl"
    rng = random.Random(7)
    words = [
        "the",
        "model",
        "answers",
        "clearly",
        "with",
        "steps",
        "and",
        "a",
        "short",
        "check",
        "of",
        "each",
        "result",
    ]
    sys.path.insert(0, str(ROOT))
    from annotation.catalogue_text import SKILLS  # pure data, no Django

    skills = [s.name for s in SKILLS]
    OUT.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        for i in range(items):
            row = {
                "id": f"hot-{i:05d}",
                "instruction": " ".join(rng.choices(words, k=40)),
                "reference": " ".join(rng.choices(words, k=30)),
                "skills": rng.sample(skills, 3),
                "responses": [
                    {"model": f"model-{m}", "text": " ".join(rng.choices(words, k=60))}
                    for m in range(MODELS)
                ],
            }
            out.write(json.dumps(row) + "\n")
    env = {**environment(db), "DJANGO_DEBUG": "true"}
    for command in (
        ["migrate", "--noinput", "-v", "0"],
        ["import_dataset", str(path), "--project", PROJECT, "--create-project"]
        + ["--dataset", DATASET, "--quiet-problems"],
    ):
        done = subprocess.run(
            [PYTHON, "manage.py", *command], cwd=ROOT, env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            sys.exit(f"manage.py {command[0]} failed:\n{done.stdout}\n{done.stderr}")


def campaign_setup():
    """A new active campaign (K = 3, the items' own skills) and a new annotator in its pool,
    with an API token."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from rest_framework.authtoken.models import Token

    from annotation.campaigns.services import campaign_activate, campaign_create
    from annotation.models import Campaign, CampaignStatus, Dataset

    dataset = Dataset.objects.select_related("project").get(project__slug=PROJECT, name=DATASET)
    Campaign.objects.filter(project=dataset.project, status=CampaignStatus.ACTIVE).update(
        status=CampaignStatus.FINISHED
    )
    user = get_user_model().objects.create(username=f"hot-{time.time_ns()}")
    token = Token.objects.create(user=user).key
    campaign = campaign_create(
        project=dataset.project,
        dataset=dataset,
        name=f"hot path {time.strftime('%Y-%m-%d %H:%M:%S')} {os.getpid()}",
        overlap=3,
        annotators=[user],
    )
    campaign_activate(campaign=campaign)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return campaign, user, token


# --- the paths: each runs `cycles` next + submit cycles -------------------------------------


class WsgiClient:
    """Calls the WSGI application as gunicorn does (one environ per request, the body read
    from a stream, the answer's chunks joined), without the test client's extras (its
    signals, template capture and response decoration are not part of a production request).
    Keeps cookies, for the page path."""

    def __init__(self, headers: dict[str, str] | None = None) -> None:
        from django.core.wsgi import get_wsgi_application

        self.app = get_wsgi_application()
        self.headers = {
            f"HTTP_{k.upper().replace('-', '_')}": v for k, v in (headers or {}).items()
        }
        self.cookies: dict[str, str] = {}

    def request(
        self, method: str, path: str, body: bytes = b"", content_type: str = "", **headers: str
    ) -> tuple[int, dict[str, str], bytes]:
        import io
        from http.cookies import SimpleCookie

        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "SCRIPT_NAME": "",
            "QUERY_STRING": "",
            "SERVER_NAME": "testserver",
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "HTTP_HOST": "testserver",
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.url_scheme": "http",
            "wsgi.version": (1, 0),
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
            **self.headers,
            **{f"HTTP_{k.upper()}": v for k, v in headers.items()},
        }
        if content_type:
            environ["CONTENT_TYPE"] = content_type
        if self.cookies:
            environ["HTTP_COOKIE"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        answer: dict = {}

        def start_response(status, response_headers, exc_info=None):
            answer["status"] = int(status.split(" ", 1)[0])
            answer["headers"] = response_headers

        chunks = self.app(environ, start_response)
        try:
            content = b"".join(chunks)
        finally:
            if hasattr(chunks, "close"):
                chunks.close()
        for name, value in answer["headers"]:
            if name.lower() == "set-cookie":
                for key, morsel in SimpleCookie(value).items():
                    self.cookies[key] = morsel.value
        return answer["status"], dict(answer["headers"]), content


def api_client(user, token: str) -> WsgiClient:
    return WsgiClient({"Authorization": f"Token {token}"})


def api_cycles(client, campaign, cycles: int) -> None:
    """POST …/next/, then …/submit/ with a score per asked skill (as bench/annotate_load.py)."""
    next_url = f"{API}/campaigns/{campaign.pk}/next/"
    for _ in range(cycles):
        status, _headers, content = client.request("POST", next_url)
        assert status == 200, (status, content[:300])
        task = json.loads(content)
        body = {"scores": [{"skill_id": s["skill_id"], "score": 3} for s in task["skills"]]}
        status, _headers, content = client.request(
            "POST",
            f"{API}/assignments/{task['assignment_id']}/submit/",
            json.dumps(body).encode(),
            "application/json",
        )
        assert status == 201, (status, content[:300])


#: path name -> (make a client for the annotator, run N cycles with it)
PATHS: dict[str, tuple[Callable, Callable[..., None]]] = {
    "api": (api_client, api_cycles),
    # the participants' page path is measured by bench/_page_path.py (--path page)
}


# --- measuring ------------------------------------------------------------------------------


def under_callgrind() -> bool:
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return False
    return "vgpreload" in maps or "callgrind" in maps


def callgrind(*args: str) -> str:
    done = subprocess.run(
        ["callgrind_control", *args, str(os.getpid())], capture_output=True, text=True
    )
    return done.stdout


def callgrind_total() -> int:
    """Instructions counted since the last zeroing (every thread)."""
    return sum(int(n.replace(",", "")) for n in re.findall(r"Th\s+\d+\s+([\d,]+)", callgrind("-e")))


def queries_per_cycle(run: Callable[[int], None]) -> float:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        run(5)
    return len(ctx) / 5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", choices=sorted(PATHS), default="api")
    parser.add_argument("--cycles", type=int, default=200, help="measured cycles per block")
    parser.add_argument("--warmup", type=int, default=30, help="cycles before measuring")
    parser.add_argument("--repeat", type=int, default=3, help="blocks (plain timing only)")
    parser.add_argument("--db", default="flaskweb_hotpath")
    parser.add_argument("--items", type=int, default=1000, help="items (x2 responses = tasks)")
    parser.add_argument("--reuse-db", action="store_true")
    parser.add_argument("--cprofile", type=int, default=0, metavar="N", help="top N functions")
    args = parser.parse_args()

    traced = under_callgrind()
    blocks = 1 if (traced or args.cprofile) else args.repeat
    needed = args.warmup + 5 + args.cycles * blocks
    if needed > args.items * MODELS:
        parser.error(f"{needed} cycles need --items >= {needed // MODELS + 1}")
    if not (args.reuse_db and database_ready(args.db, args.items)):
        database_build(args.db, args.items)
    os.environ.update(environment(args.db))
    sys.path.insert(0, str(ROOT))
    import django

    # whitenoise warns once that STATIC_ROOT was never collected: nothing here serves a file
    warnings.filterwarnings("ignore", message="No directory at", category=UserWarning)
    django.setup()
    campaign, user, token = campaign_setup()
    make_client, cycles = PATHS[args.path]
    client = make_client(user, token)

    def run(n: int) -> None:
        cycles(client, campaign, n)

    run(args.warmup)
    statements = queries_per_cycle(run)
    log(f"path {args.path}: campaign {campaign.pk}, {statements:g} SQL statements per cycle")
    if traced:
        callgrind("-i", "on")
        callgrind("-z")
        run(args.cycles)
        total = callgrind_total()
        callgrind("-i", "off")
        log(f"instructions per cycle: {total / args.cycles / 1e6:.3f} M ({args.cycles} cycles)")
        return 0
    if args.cprofile:
        profiler = cProfile.Profile(time.process_time)  # CPU, not waits
        profiler.enable()
        run(args.cycles)
        profiler.disable()
        stats = pstats.Stats(profiler).sort_stats("tottime")
        stats.print_stats(args.cprofile)
        stats.sort_stats("cumulative").print_stats(args.cprofile)
        return 0
    per_cycle = []
    for _ in range(blocks):
        t0 = time.process_time()
        run(args.cycles)
        per_cycle.append((time.process_time() - t0) / args.cycles * 1000)
    log(
        f"CPU per cycle (process time): median {statistics.median(per_cycle):.2f} ms "
        f"({', '.join(f'{v:.2f}' for v in per_cycle)}; {blocks} x {args.cycles} cycles)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
