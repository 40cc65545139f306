"""What PostgreSQL does per next + submit cycle, in one process (bench/README.md
"PostgreSQL per submission").

usage: bench/hot_path_pg.py TREE DBNAME setup|api|api-quota|page CYCLES
       (env PG_PORT, default 55433)

TREE is the checkout to measure (this one, or a worktree of an earlier build). Against a
private PostgreSQL cluster started with pg_stat_statements preloaded (the README gives the
commands; never the shared server): `setup` makes DBNAME (migrated, 4,000 responses);
`api` and `page` make a campaign (K = 3, 4 annotators: tokens, or study-link sessions for the
page path), warm up 20 cycles, then run CYCLES cycles round robin through the Django test
client with DEBUG off, each request between close_old_connections() calls as a WSGI server
makes them. Prints per cycle: the backend's CPU (/proc/PID/stat), every statement the server
ran (pg_stat_statements, nested foreign-key checks included) with its execution and planning
time. `api-quota` is `api` on a campaign with a quota per annotator (too large to be met), so
every claim goes through the claim policy's quota check.
"""

import importlib.util
import os
import re
import sys
import time

root, dbname, mode, cycles = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
PORT = int(os.environ.get("PG_PORT", "55433"))
os.chdir(root)
sys.path.insert(0, root)
os.environ.update(
    DATABASE_URL=f"postgres://root@127.0.0.1:{PORT}/{dbname}",
    DJANGO_SECRET_KEY="hot-path-pg-only-not-a-secret",
    FLASKWEB_VAR_DIR=f"{root}/bench/out/hot_path_pg/var-{dbname}",
    DJANGO_LOG_LEVEL="WARNING",
    DJANGO_DEBUG="false",
    DJANGO_SECURE_SSL_REDIRECT="false",
    DJANGO_ALLOWED_HOSTS="testserver,127.0.0.1",
    FLASKWEB_TRUSTED_PROXIES="127.0.0.1",
    DJANGO_SETTINGS_MODULE="flaskweb.settings",
    DATABASE_CONN_MAX_AGE="3600",
    DJANGO_STATIC_ROOT=f"{root}/bench/out/hot_path_pg/static-{dbname}",
)
os.environ.pop("REDIS_URL", None)
import psycopg  # noqa: E402


def admin(sql, params=None):
    with psycopg.connect(f"postgresql://root@127.0.0.1:{PORT}/postgres", autocommit=True) as c:
        cur = c.execute(sql, params)
        return cur.fetchall() if cur.description else None


if mode == "setup":
    admin(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)")
    admin(f"CREATE DATABASE {dbname}")
    import subprocess

    py = f"{root}/.venv/bin/python"
    env = {**os.environ, "DJANGO_DEBUG": "true"}
    subprocess.run([py, "manage.py", "migrate", "--noinput", "-v", "0"], check=True, env=env)
    spec = importlib.util.spec_from_file_location("al", f"{root}/bench/annotate_load.py")
    al = importlib.util.module_from_spec(spec)
    sys.modules["al"] = al
    spec.loader.exec_module(al)
    from pathlib import Path

    path = Path(f"{root}/bench/out/hot_path_pg/dataset-1000x4.jsonl")
    if not path.exists():
        al.write_dataset(path, 1000, 4, 1234)
    subprocess.run(
        [py, "manage.py", "import_dataset", str(path), "--project", "loadbench",
         "--create-project", "--dataset", "load", "--quiet-problems"],
        check=True, env=env, capture_output=True,
    )  # fmt: skip
    # the page path renders with the production static storage (a manifest)
    subprocess.run(
        [py, "manage.py", "collectstatic", "--noinput", "-v", "0"], check=True, env=os.environ
    )
    print("setup done")
    sys.exit(0)

import django  # noqa: E402

django.setup()
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

spec = importlib.util.spec_from_file_location("al", f"{root}/bench/annotate_load.py")
al = importlib.util.module_from_spec(spec)
sys.modules["al"] = al
spec.loader.exec_module(al)
al.log = lambda m: None

API = "/api/v1/annotation"
N = 4
campaign, tokens, users = al.campaign_setup(N, 3, links=(mode == "page"))
if mode == "api-quota":
    type(campaign).objects.filter(pk=campaign.pk).update(quota_per_annotator=10**6)
    mode = "api"


def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


from django.db import close_old_connections  # noqa: E402


def request(call, *a, **kw):
    # as a WSGI server does: request_started and request_finished both run
    # close_old_connections (the health check flag is reset there); the test client skips it
    close_old_connections()
    try:
        return call(*a, **kw)
    finally:
        close_old_connections()


turn = {"i": 0}
if mode == "api":
    clients = [Client(HTTP_AUTHORIZATION=f"Token {t}") for t in tokens]

    def cycle():
        client = clients[turn["i"] % N]
        turn["i"] += 1
        task = request(client.post, f"{API}/campaigns/{campaign.pk}/next/").json()
        body = {"scores": [{"skill_id": s["skill_id"], "score": 3} for s in task["skills"]]}
        r = request(
            client.post, f"{API}/assignments/{task['assignment_id']}/submit/", body,
            content_type="application/json",
        )  # fmt: skip
        assert r.status_code == 201, r.content
else:
    clients, cards = [], []
    for i in range(N):
        client = Client(enforce_csrf_checks=True, REMOTE_ADDR="127.0.0.1")
        fwd = {"HTTP_X_FORWARDED_FOR": f"10.77.0.{i + 1}"}
        q = f"PROLIFIC_PID=hp{campaign.pk}w{i}&STUDY_ID=st{campaign.pk}&SESSION_ID=s{i}"
        r = request(client.get, f"/study/{tokens[0]}/?{q}", **fwd)
        assert r.status_code == 302, r.status_code
        page = request(client.get, f"/campaigns/{campaign.pk}/annotate/", **fwd)
        clients.append((client, fwd))
        cards.append(page.content.decode())

    def cycle():
        k = turn["i"] % N
        turn["i"] += 1
        client, fwd = clients[k]
        card = cards[k]
        assignment = int(al.SUBMIT_FORM.search(card)[1])
        skills = sorted(set(al.SCORE_FIELD.findall(card)), key=int)
        fields = {"csrfmiddlewaretoken": al.CSRF_FIELD.search(card)[1], "active_ms": "9000"}
        for s in skills:
            fields[f"score-{s}"] = "3"
            fields[f"time-{s}"] = "3000"
        r = request(
            client.post, f"/assignments/{assignment}/submit/", fields,
            HTTP_HX_REQUEST="true", **fwd,
        )  # fmt: skip
        text = r.content.decode()
        assert r.status_code == 200 and "Saved." in text, (r.status_code, text[:500])
        cards[k] = text


for _ in range(20):  # warm: prepared statements, caches
    cycle()
connection.ensure_connection()
pid = connection.connection.info.backend_pid
dbid = admin("SELECT oid FROM pg_database WHERE datname = %s", [dbname])[0][0]
admin("SELECT pg_stat_statements_reset()")
c0, t0 = cpu(pid), time.perf_counter()
for _ in range(cycles):
    cycle()
c1, t1 = cpu(pid), time.perf_counter()
rows = admin(
    "SELECT query, calls, total_exec_time, total_plan_time, plans FROM pg_stat_statements "
    "WHERE dbid = %s ORDER BY calls DESC",
    [dbid],
)
print(
    f"{sys.argv[3]} {dbname} cycles={cycles} backend_cpu_ms/cycle={(c1 - c0) * 1000 / cycles:.3f} "
    f"wall_ms/cycle={(t1 - t0) * 1000 / cycles:.2f}"
)
total_calls = sum(r[1] for r in rows)
exec_ms = sum(r[2] for r in rows)
plan_ms = sum(r[3] for r in rows)
print(
    f"statements/cycle={total_calls / cycles:.2f} exec_ms/cycle={exec_ms / cycles:.3f} "
    f"plan_ms/cycle={plan_ms / cycles:.3f}"
)
for query, calls, ex, pl, plans in rows:
    q = re.sub(r"\s+", " ", query)[:150]
    print(
        f"  {calls / cycles:6.2f}/c exec {ex / calls:.3f} ms plan {pl / max(calls, 1):.3f} "
        f"plans {plans}  {q}"
    )
