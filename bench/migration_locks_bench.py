"""Migration-lock benchmark: how long each migration added since the previous release blocks
the large tables on PostgreSQL. Prints figures; it is not a test. See bench/README.md.

    .venv/bin/python bench/migration_locks_bench.py [--scores 1000000] [--keep-db]

1. A scratch database (flaskweb_locks_bench) gets the previous release's own database: the
   PostgreSQL dump of the upgrade fixture (tests/fixtures/upgrade/, made by that release's
   code with scripts/make_upgrade_fixture), so its schema and migration state are exactly
   the release's.
2. The large tables are filled with SQL (generate_series, rows cloned from the fixture's
   own rows, so every column is what the release writes): --scores human scores (default
   1,000,000) of responses scored by 3 annotators on 3 skills, and in proportion items,
   item skills and domains, responses, tasks, assignments, three judge runs' judgments and
   judge scores, cache entries, imported scores, pair tasks, their assignments and
   preferences, pair judgments. Then ANALYZE.
3. Each migration this code has and the database has not is applied alone, in plan order
   (`migrate APP NAME` in this process), while one probe thread per large table reads a
   row and updates a row by primary key every --probe-ms (20 ms) on its own connection,
   and a sampler reads pg_locks every 10 ms for the locks the migrating backend holds
   and the probes wait on.
4. Per migration: its duration, the longest a probe waited per table, and the locks it
   held on the large tables (mode and for how long they were seen). Last, control rows:
   what the harness shows for a plain CREATE INDEX on the human scores, the same index
   built CONCURRENTLY, and a column added with a volatile default (a table rewrite).

Figures go to standard output and bench/out/migration_locks_bench.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
FIXTURES = ROOT / "tests" / "fixtures" / "upgrade"
APPS = ("annotation", "judging", "analytics")
DB_NAME = "flaskweb_locks_bench"
#: A probe that waited longer than this was blocked (the goal: none over ~1 s).
BLOCK_GOAL_S = 1.0
#: Lock modes that stop a probe: its reads (AccessExclusive) or its writes (the rest).
#: What a lock-taking migration looks like here (and the same index built concurrently).
CONTROLS = [
    (
        "CREATE INDEX on humanscore (not CONCURRENTLY)",
        [
            "CREATE INDEX bench_control ON annotation_humanscore (response_id, annotator_id)",
            "DROP INDEX bench_control",
        ],
    ),
    (
        "CREATE INDEX CONCURRENTLY on humanscore (the fix)",
        [
            "CREATE INDEX CONCURRENTLY bench_control ON annotation_humanscore "
            "(response_id, annotator_id)",
            "DROP INDEX CONCURRENTLY bench_control",
        ],
    ),
    (
        "ADD COLUMN with a volatile default on humanscore (a rewrite)",
        [
            "ALTER TABLE annotation_humanscore ADD COLUMN bench_control uuid "
            "NOT NULL DEFAULT gen_random_uuid()",
            "ALTER TABLE annotation_humanscore DROP COLUMN bench_control",
        ],
    ),
]
BLOCKING = {
    "AccessExclusiveLock": "reads and writes",
    "ExclusiveLock": "writes",
    "ShareRowExclusiveLock": "writes",
    "ShareLock": "writes",
}


# --- the database -------------------------------------------------------------------------------


def _url(server: str, dbname: str) -> str:
    head, _, _ = server.rstrip("/").rpartition("/")
    if "://" not in head:  # a server URL without a database name
        head = server.rstrip("/")
    return f"{head}/{dbname}"


def database_create(server: str) -> str:
    admin = _url(server, "postgres")
    with psycopg.connect(admin, autocommit=True) as db:
        db.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB_NAME))
        )
        db.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB_NAME)))
    url = _url(server, DB_NAME)
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    with gzip.open(FIXTURES / manifest["files"]["postgresql"]) as dump:
        # without pg_dump's \\restrict lines, which older psql programs do not know
        lines = dump.read().splitlines(keepends=True)
    subprocess.run(
        ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", "-"],
        input=b"".join(x for x in lines if not x.startswith((b"\\restrict ", b"\\unrestrict "))),
        check=True,
        capture_output=True,
    )
    print(f"loaded the fixture of {manifest['ref']} ({manifest['commit'][:10]}) into {DB_NAME}")
    return url


def database_drop(server: str) -> None:
    with psycopg.connect(_url(server, "postgres"), autocommit=True) as db:
        db.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB_NAME))
        )


# --- filling the large tables -------------------------------------------------------------------


class Filler:
    """INSERT … SELECT over generate_series, each new row a copy of one of the release's
    own rows (`template`) with the columns that make it new replaced by SQL expressions of
    g (1..n) and of the id bases of the tables filled before it."""

    def __init__(self, db: psycopg.Connection) -> None:
        self.db = db
        self.base: dict[str, int] = {}

    def one(self, query: str, *args) -> object:
        return self.db.execute(query, args).fetchone()[0]

    def clone(self, table: str, n: int, template: str, **overrides: str) -> int:
        """Copy the row `template` selects n times; returns the id before the first new one."""
        columns = [
            name
            for (name,) in self.db.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = 'public' AND table_name = %s ORDER BY ordinal_position",
                [table],
            )
        ]
        base = int(self.one(f"SELECT COALESCE(MAX(id), 0) FROM {table}"))
        exprs = []
        for name in columns:
            if name == "id":
                exprs.append(f"{base} + g")
            elif name in overrides:
                exprs.append(f"({overrides[name]})")
            else:
                exprs.append(f'r."{name}"')
        quoted = ", ".join(f'"{c}"' for c in columns)
        started = time.monotonic()
        self.db.execute(
            f"INSERT INTO {table} ({quoted}) SELECT {', '.join(exprs)} "
            f"FROM generate_series(1, {n}) AS g, ({template} LIMIT 1) AS r, bench_skills AS b"
        )
        self.db.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), {base + n})")
        print(f"  {table:<32} {n:>10,} rows  {time.monotonic() - started:6.1f} s", flush=True)
        self.base[table] = base
        return base


def fill(url: str, scores: int) -> dict[str, int]:
    """The large tables at `scores` human scores; returns each table's rows."""
    responses = max(scores // 9, 8)  # 3 annotators x 3 skills a response
    responses -= responses % 8
    items = responses // 4
    with psycopg.connect(url, autocommit=True) as db:
        f = Filler(db)
        campaign = f.one("SELECT id FROM annotation_campaign WHERE name = 'Demo campaign'")
        pair_campaign = f.one("SELECT id FROM annotation_campaign WHERE mode = 'pairwise' LIMIT 1")
        llm_run = f.one(
            "SELECT r.id FROM judging_judgerun r JOIN judging_judgeconfig j ON j.id = r.judge_id "
            "WHERE j.kind = 'llm' AND r.pairwise_against = '' AND r.probe = '' "
            "ORDER BY r.id LIMIT 1"
        )
        pair_run = f.one(
            "SELECT id FROM judging_judgerun WHERE pairwise_against <> '' ORDER BY id LIMIT 1"
        )
        item = f.one(
            "SELECT item_id FROM annotation_itemskill GROUP BY item_id "
            "HAVING COUNT(*) = 3 ORDER BY item_id LIMIT 1"
        )
        skills = (
            f"ARRAY(SELECT skill_id FROM annotation_itemskill WHERE item_id = {item} ORDER BY rank)"
        )
        rubrics = (
            "ARRAY(SELECT (SELECT MAX(id) FROM annotation_rubric u WHERE u.skill_id = s.skill_id) "
            f"FROM annotation_itemskill s WHERE s.item_id = {item} ORDER BY s.rank)"
        )
        db.execute(f"CREATE TEMP TABLE bench_skills AS SELECT {skills} AS s, {rubrics} AS r")
        skill = "b.s[{i}]"
        rubric = "b.r[{i}]"
        # The rows are consistent by construction: no foreign-key trigger per row (superuser)
        db.execute("SET session_replication_role = replica")

        print(f"filling: {scores:,} human scores, {responses:,} responses, {items:,} items")
        users = f.clone(
            "auth_user",
            30,
            "SELECT * FROM auth_user WHERE username = 'annotator1'",
            username="'bench-annotator-' || g",
        )
        annotator = f"{users} + 1 + ((g - 1) % 30)"
        dataset = f.clone(
            "annotation_dataset", 1, "SELECT * FROM annotation_dataset", name="'Bench set'"
        )
        bench_campaign = f.clone(
            "annotation_campaign",
            1,
            f"SELECT * FROM annotation_campaign WHERE id = {campaign}",
            name="'Bench campaign'",
            dataset_id=f"{dataset} + 1",
        )
        bench_pairs = f.clone(
            "annotation_campaign",
            1,
            f"SELECT * FROM annotation_campaign WHERE id = {pair_campaign}",
            name="'Bench pairwise'",
            dataset_id=f"{dataset} + 1",
        )
        C, PC = bench_campaign + 1, bench_pairs + 1
        item_base = f.clone(
            "annotation_item",
            items,
            f"SELECT * FROM annotation_item WHERE id = {item}",
            dataset_id=f"{dataset} + 1",
            external_id="'bench-' || g",
        )
        f.clone(
            "annotation_itemskill",
            items * 3,
            f"SELECT * FROM annotation_itemskill WHERE item_id = {item}",
            item_id=f"{item_base} + 1 + (g - 1) / 3",
            skill_id=skill.format(i="1 + (g - 1) % 3"),
            rank="1 + (g - 1) % 3",
        )
        f.clone(
            "annotation_itemdomain",
            items,
            "SELECT * FROM annotation_itemdomain",
            item_id=f"{item_base} + g",
        )
        rb = f.clone(
            "annotation_response",
            responses,
            f"SELECT * FROM annotation_response WHERE item_id = {item}",
            item_id=f"{item_base} + 1 + (g - 1) / 4",
            model_name="'bench-model-' || ((g - 1) % 4)",
        )
        tb = f.clone(
            "annotation_task",
            responses,
            f"SELECT * FROM annotation_task WHERE campaign_id = {campaign} AND kind = 'normal'",
            campaign_id=str(C),
            response_id=f"{rb} + g",
            response_b_id="NULL",
            overlap="3",
            assigned="3",
            submitted="3",
        )
        ab = f.clone(
            "annotation_assignment",
            responses * 3,
            f"SELECT * FROM annotation_assignment WHERE campaign_id = {campaign} "
            "AND status = 'submitted'",
            task_id=f"{tb} + 1 + (g - 1) / 3",
            campaign_id=str(C),
            annotator_id=annotator,
            status="'submitted'",
            kind="'normal'",
        )
        f.clone(
            "annotation_humanscore",
            responses * 9,
            f"SELECT * FROM annotation_humanscore WHERE campaign_id = {campaign} AND NOT is_na",
            assignment_id=f"{ab} + 1 + (g - 1) / 3",
            campaign_id=str(C),
            response_id=f"{rb} + 1 + (g - 1) / 9",
            annotator_id=f"{users} + 1 + (((g - 1) / 3) % 30)",
            skill_id=skill.format(i="1 + (g - 1) % 3"),
            rubric_id=rubric.format(i="1 + (g - 1) % 3"),
            score="1 + (g::bigint * 7919) % 5",
        )
        runs = f.clone(
            "judging_judgerun",
            3,
            f"SELECT * FROM judging_judgerun WHERE id = {llm_run}",
            campaign_id=str(C),
            dataset_id=f"{dataset} + 1",
        )
        jb = f.clone(
            "judging_judgment",
            responses * 3,
            f"SELECT * FROM judging_judgment WHERE run_id = {llm_run}",
            run_id=f"{runs} + 1 + (g - 1) / {responses}",
            response_id=f"{rb} + 1 + (g - 1) % {responses}",
            sample_index="0",
            request="'{}'::jsonb",
        )
        f.clone(
            "judging_judgescore",
            responses * 9,
            f"SELECT * FROM judging_judgescore WHERE run_id = {llm_run} AND NOT is_na",
            judgment_id=f"{jb} + 1 + (g - 1) / 3",
            run_id=f"{runs} + 1 + ((g - 1) / 3) / {responses}",
            response_id=f"{rb} + 1 + ((g - 1) / 3) % {responses}",
            skill_id=skill.format(i="1 + (g - 1) % 3"),
            rubric_id=rubric.format(i="1 + (g - 1) % 3"),
            score="1 + (g::bigint * 104729) % 5",
        )
        f.clone(
            "judging_llmcacheentry",
            responses,
            "SELECT * FROM judging_llmcacheentry",
            key="md5('bench' || g) || md5('entry' || g)",
        )
        f.clone(
            "analytics_importedscore",
            responses * 3,
            "SELECT * FROM analytics_importedscore WHERE NOT is_na",
            response_id=f"{rb} + 1 + (g - 1) / 3",
            skill_id=skill.format(i="1 + (g - 1) % 3"),
        )
        pairs = responses // 2
        ptb = f.clone(
            "annotation_task",
            pairs,
            f"SELECT * FROM annotation_task WHERE campaign_id = {pair_campaign} "
            "AND response_b_id IS NOT NULL",
            campaign_id=str(PC),
            response_id=f"{rb} + 2 * g - 1",
            response_b_id=f"{rb} + 2 * g",
            kind="'normal'",
            overlap="2",
            assigned="2",
            submitted="2",
        )
        pab = f.clone(
            "annotation_assignment",
            pairs * 2,
            f"SELECT * FROM annotation_assignment WHERE campaign_id = {pair_campaign} "
            "AND status = 'submitted'",
            task_id=f"{ptb} + 1 + (g - 1) / 2",
            campaign_id=str(PC),
            annotator_id=annotator,
            status="'submitted'",
            kind="'normal'",
        )
        f.clone(
            "annotation_humanpreference",
            pairs * 4,
            f"SELECT * FROM annotation_humanpreference WHERE campaign_id = {pair_campaign} "
            "AND skill_id IS NOT NULL AND choice = 'a'",
            assignment_id=f"{pab} + 1 + (g - 1) / 2",
            campaign_id=str(PC),
            response_a_id=f"{rb} + 2 * (1 + (g - 1) / 4) - 1",
            response_b_id=f"{rb} + 2 * (1 + (g - 1) / 4)",
            annotator_id=f"{users} + 1 + (((g - 1) / 2) % 30)",
            skill_id=f"CASE WHEN g % 2 = 1 THEN {skill.format(i=1)} END",
            rubric_id=f"CASE WHEN g % 2 = 1 THEN {rubric.format(i=1)} END",
        )
        f.clone(
            "judging_pairjudgment",
            pairs * 2,
            f"SELECT * FROM judging_pairjudgment WHERE run_id = {pair_run}",
            response_id=f"{rb} + 1 + (g - 1) / 2",
            order="(g - 1) % 2",
            request="'{}'::jsonb",
        )
        db.execute("SET session_replication_role = DEFAULT")
        started = time.monotonic()
        db.execute("ANALYZE")
        print(f"  ANALYZE {time.monotonic() - started:.1f} s")
        tables = [
            "annotation_item",
            "annotation_itemskill",
            "annotation_itemdomain",
            "annotation_response",
            "annotation_task",
            "annotation_assignment",
            "annotation_humanscore",
            "annotation_humanpreference",
            "judging_judgment",
            "judging_judgescore",
            "judging_llmcacheentry",
            "judging_pairjudgment",
            "analytics_importedscore",
        ]
        return {t: int(f.one(f"SELECT COUNT(*) FROM {t}")) for t in tables}


# --- probes and the lock sampler ----------------------------------------------------------------


@dataclass
class Probe:
    """Reads a row and updates a row of one table by primary key, every `every` seconds."""

    url: str
    table: str
    max_id: int
    every: float
    ops: list[tuple[float, float]] = field(default_factory=list)  # (start, seconds)
    pid: int = 0
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        rng = random.Random(self.table)
        # no prepared statements: a migration may change the table under them
        with psycopg.connect(self.url, autocommit=True, prepare_threshold=None) as db:
            self.pid = db.info.backend_pid
            read = f"SELECT id, pg_column_size(t.*) FROM {self.table} t WHERE id = %s"
            write = f"UPDATE {self.table} SET id = id WHERE id = %s"
            while not self.stop.is_set():
                started = time.monotonic()
                row = rng.randint(1, self.max_id)
                try:
                    db.execute(read, [row]).fetchall()
                    db.execute(write, [row])
                except psycopg.Error as exc:  # counted, and the probe goes on
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                self.ops.append((started, time.monotonic() - started))
                self.stop.wait(max(0.0, self.every - (time.monotonic() - started)))

    def longest(self, start: float, end: float) -> float:
        """The longest operation that ran during [start, end]."""
        return max((s for t, s in self.ops if t <= end and t + s >= start), default=0.0)


@dataclass
class Sampler:
    """Every 10 ms: the relation locks the migrating backend holds or waits for."""

    url: str
    pid: int = 0
    seen: list[tuple[float, str, str, bool]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as db:
            while not self.stop.is_set():
                if self.pid:
                    now = time.monotonic()
                    for table, mode, granted in db.execute(
                        "SELECT c.relname, l.mode, l.granted FROM pg_locks l "
                        "JOIN pg_class c ON c.oid = l.relation "
                        "WHERE l.pid = %s AND l.locktype = 'relation' AND c.relkind = 'r'",
                        [self.pid],
                    ):
                        self.seen.append((now, table, mode, granted))
                self.stop.wait(0.01)

    def held(self, start: float, end: float, tables) -> dict[str, dict[str, float]]:
        """{table: {mode: seconds seen}} on `tables` during [start, end]."""
        first: dict[tuple[str, str], float] = {}
        last: dict[tuple[str, str], float] = {}
        for t, table, mode, _ in self.seen:
            if start <= t <= end and table in tables:
                first.setdefault((table, mode), t)
                last[(table, mode)] = t
        out: dict[str, dict[str, float]] = {}
        for (table, mode), t0 in first.items():
            out.setdefault(table, {})[mode] = last[(table, mode)] - t0 + 0.01
        return out


# --- applying the migrations ----------------------------------------------------------------------


def django_setup(url: str) -> None:
    os.environ.update(
        DATABASE_URL=url,
        DJANGO_DEBUG="true",
        DJANGO_SETTINGS_MODULE="flaskweb.settings",
        FLASKWEB_VAR_DIR=str(OUT / "var-locks"),
    )
    for name in ("REDIS_URL", "CELERY_BROKER_URL"):
        os.environ.pop(name, None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def pending() -> list[tuple[str, str]]:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return [(m.app_label, m.name) for m, backwards in plan if not backwards]


def measure(name: str, action, probes: list[Probe], sampler: Sampler, tables) -> dict:
    from django.db import connection

    connection.ensure_connection()
    sampler.pid = connection.connection.info.backend_pid
    time.sleep(0.2)  # the probes' quiet figures just before
    started = time.monotonic()
    action()
    ended = time.monotonic()
    time.sleep(0.1)
    sampler.pid = 0
    waits = {p.table: p.longest(started, ended) for p in probes}
    held = sampler.held(started, ended, tables)
    return {
        "migration": name,
        "seconds": round(ended - started, 3),
        "longest_wait": {t: round(s, 3) for t, s in waits.items()},
        "locks": {t: {m: round(s, 3) for m, s in modes.items()} for t, modes in held.items()},
    }


def report_row(row: dict) -> str:
    worst_table, worst = max(row["longest_wait"].items(), key=lambda kv: kv[1])
    strong = sorted(
        f"{t.split('_', 1)[1]} {m.removesuffix('Lock')} {s:.2f}s"
        for t, modes in row["locks"].items()
        for m, s in modes.items()
        if m in BLOCKING
    )
    flag = "BLOCKS" if worst > BLOCK_GOAL_S else "ok"
    return (
        f"{row['migration']:<60} {row['seconds']:>8.2f} s  {worst * 1000:>8.0f} ms "
        f"{worst_table.split('_', 1)[1]:<16} {flag:<6}  {', '.join(strong) or '-'}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scores", type=int, default=1_000_000, help="human scores to fill")
    parser.add_argument("--probe-ms", type=float, default=20.0, help="pause between probes")
    parser.add_argument(
        "--server",
        default=os.environ.get("TEST_DATABASE_URL", "postgres://root@127.0.0.1:5432/postgres"),
        help="a PostgreSQL URL; its server gets the scratch database",
    )
    parser.add_argument("--keep-db", action="store_true", help="keep the scratch database")
    parser.add_argument("--no-control", action="store_true", help="skip the control rows")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)

    url = database_create(args.server)
    try:
        started = time.monotonic()
        rows = fill(url, args.scores)
        fill_seconds = time.monotonic() - started
        django_setup(url)
        todo = pending()
        print(f"\n{len(todo)} migrations to apply: {', '.join(f'{a}.{n}' for a, n in todo)}")

        with psycopg.connect(url, autocommit=True) as db:
            top = {t: db.execute(f"SELECT MAX(id) FROM {t}").fetchone()[0] for t in rows}
        probes = [Probe(url, t, top[t], args.probe_ms / 1000) for t in rows]
        sampler = Sampler(url)
        threads = [threading.Thread(target=x.run, daemon=True) for x in [*probes, sampler]]
        for t in threads:
            t.start()
        time.sleep(1.0)
        quiet = {p.table: max((s for _, s in p.ops), default=0.0) for p in probes}

        from django.core.management import call_command

        results = []
        header = (
            f"{'migration':<60} {'duration':>10}  {'longest probe wait':>27} {'':<6}  "
            "blocking locks held on large tables"
        )
        print("\n" + header + "\n" + "-" * len(header))
        for app, name in todo:

            def apply(app=app, name=name) -> None:
                call_command("migrate", app, name, verbosity=0, interactive=False)

            row = measure(f"{app}.{name}", apply, probes, sampler, set(rows))
            results.append(row)
            print(report_row(row), flush=True)
        if not args.no_control:
            for name, statements in CONTROLS:

                def control(statements=statements) -> None:
                    from django.db import connection

                    with connection.cursor() as cursor:
                        for statement in statements:
                            cursor.execute(statement)

                row = measure(f"control: {name}", control, probes, sampler, set(rows))
                results.append(row)
                print(report_row(row), flush=True)
        for x in [*probes, sampler]:
            x.stop.set()
        for t in threads:
            t.join(timeout=30)
        ops = sum(len(p.ops) for p in probes)
        for p in probes:
            for error in sorted(set(p.errors)):
                print(f"probe error on {p.table}: {error}")
        print(
            f"\nprobes: {len(probes)} tables, {ops:,} reads+writes, every {args.probe_ms:.0f} ms; "
            f"longest wait with no migration running: {max(quiet.values()) * 1000:.0f} ms"
        )
        print(
            f"fill: {fill_seconds:.0f} s; rows: " + ", ".join(f"{t} {n:,}" for t, n in rows.items())
        )
        blocked = [
            r["migration"] for r in results if max(r["longest_wait"].values()) > BLOCK_GOAL_S
        ]
        blocked = [m for m in blocked if not m.startswith("control")]
        print(
            "no migration blocked a probe for more than 1 s"
            if not blocked
            else f"migrations that blocked a probe for more than 1 s: {', '.join(blocked)}"
        )
        (OUT / "migration_locks_bench.json").write_text(
            json.dumps(
                {
                    "machine": platform.node(),
                    "scores": args.scores,
                    "rows": rows,
                    "fill_seconds": round(fill_seconds, 1),
                    "quiet_longest_wait": quiet,
                    "migrations": results,
                },
                indent=1,
            )
        )
    finally:
        if "django" in sys.modules:
            from django.db import connections

            connections.close_all()
        if not args.keep_db:
            database_drop(args.server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
