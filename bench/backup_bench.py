"""Backup and restore benchmark: `manage.py backup`, `restore --check` and `restore` on the
demo and on a million human scores (docs/SERVING.md "Backups and restores").

    .venv/bin/python bench/backup_bench.py             # the demo, and 1M scores on PostgreSQL
    .venv/bin/python bench/backup_bench.py --scores 200000 --sqlite

Each scenario runs the commands as an operator would, in child processes, and prints their
wall times, the archive's size and the figures the commands print themselves (copy or dump,
counting and summing the scores, compressing, restoring, comparing). Scenarios:

- demo: `manage.py migrate` + `seed_demo` on SQLite in bench/out/backup/demo, then backup,
  check and restore into a fresh var directory;
- PostgreSQL: the databases flaskweb_backup_bench and flaskweb_backup_bench_restore on
  127.0.0.1:5432 (user root, trust auth) are dropped, created and migrated; SCORES human scores
  are made with two INSERT ... SELECT statements (assignments = tasks x annotators, three
  scores each) on a campaign of 2,500 items x 4 systems; then backup, check and restore into
  the second database. Both are dropped at the end unless --keep-db;
- --sqlite: the same SCORES on SQLite in bench/out/backup/large.

Asserts nothing; exits 1 when a command fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "backup"
PG = "postgres://root@127.0.0.1:5432"
SOURCE_DB, RESTORE_DB = "flaskweb_backup_bench", "flaskweb_backup_bench_restore"

FILL = """
import json, math, os, pathlib
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone
from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import Rubric, Skill, UploadSource
from annotation.services.projects import project_create

scores, items, systems = int(os.environ["BENCH_SCORES"]), 2500, 4
skills = ["Factuality", "Comprehension", "Readability"]
annotators = math.ceil(scores / (3 * items * systems))
User = get_user_model()
people = [User(username=f"bench-{i:03d}") for i in range(annotators)]
for person in people:
    person.set_unusable_password()
User.objects.bulk_create(people)
project = project_create(slug="bench", name="Backup bench")
path = pathlib.Path(os.environ["FLASKWEB_VAR_DIR"]) / "bench-items.jsonl"
with open(path, "w") as out:
    for i in range(items):
        out.write(json.dumps({
            "id": f"i{i}", "instruction": f"Question {i}", "reference": f"Reference {i}",
            "skills": skills, "domains": ["History"], "difficulty": 2,
            "responses": [
                {"model": f"s{m}", "text": f"Answer {i} by s{m}"} for m in range(systems)
            ],
        }) + "\\n")
upload = dataset_upload_create(project=project, dataset_name="bench", source=UploadSource.CLI,
                               files=[(FileSpec(path.name), str(path))])
dataset = dataset_import(upload_id=upload.pk).dataset
campaign = campaign_create(project=project, dataset=dataset, name="bench", overlap=3,
                           annotators=list(User.objects.filter(username__startswith="bench-")))
campaign_activate(campaign=campaign)
pairs = []
for name in skills:
    skill = Skill.objects.get(name=name, project__isnull=True)
    pairs.append((skill.pk, Rubric.objects.filter(skill=skill).order_by("-version")[0].pk))
chosen = " UNION ALL ".join(f"SELECT {s} AS skill_id, {r} AS rubric_id" for s, r in pairs)
now = timezone.now()
with connection.cursor() as cursor:
    cursor.execute(
        "INSERT INTO annotation_assignment (created_at, updated_at, kind, status, expires_at, "
        "submitted_at, active_ms, skip_reason, flagged, flag_reason, annotator_id, campaign_id, "
        "task_id) SELECT %s, %s, 'normal', 'submitted', %s, %s, 1000, '', %s, '', u.id, "
        "t.campaign_id, t.id FROM annotation_task t CROSS JOIN auth_user u "
        "WHERE t.campaign_id = %s AND u.username LIKE 'bench-%%'",
        [now, now, now, now, False, campaign.pk],
    )
    cursor.execute(
        "INSERT INTO annotation_humanscore (created_at, updated_at, score, is_na, rationale, "
        "time_ms, annotator_id, assignment_id, campaign_id, response_id, rubric_id, skill_id) "
        "SELECT %s, %s, 1 + (a.id + s.skill_id) %% 5, %s, '', 1000, a.annotator_id, a.id, "
        "a.campaign_id, t.response_id, s.rubric_id, s.skill_id FROM annotation_assignment a "
        f"JOIN annotation_task t ON t.id = a.task_id CROSS JOIN ({chosen}) s "
        "WHERE a.campaign_id = %s",
        [now, now, False, campaign.pk],
    )
    cursor.execute("SELECT count(*) FROM annotation_humanscore")
    print(json.dumps({"human_scores": cursor.fetchone()[0]}))
"""


def env_for(*, var: Path, database_url: str | None) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "DATABASE_", "REDIS_", "CELERY_", "FLASKWEB_"))
    }
    env.update(FLASKWEB_VAR_DIR=str(var), DJANGO_DEBUG="true")
    if database_url:
        env["DATABASE_URL"] = database_url
    return env


def run(argv: list[str], env: dict[str, str], label: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "manage.py", *argv], cwd=ROOT, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        print(f"{label} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}", file=sys.stderr)
        raise SystemExit(1)
    return seconds, done.stdout


def psql(database: str, sql: str) -> None:
    subprocess.run(
        ["psql", "-X", "-q", "-h", "127.0.0.1", "-U", "root", "-d", database, "-c", sql],
        check=True,
        capture_output=True,
    )


def figures(output: str) -> list[str]:
    """The lines the commands print that carry a time."""
    return [line for line in output.splitlines() if re.search(r"\d s\b", line)]


def scenario(name: str, key: str, *, source: dict, target: dict, fill: list[list[str]]) -> dict:
    print(f"\n== {name}")
    for argv in fill:
        seconds, out = run(argv, source, " ".join(argv[:1]))
        tail = out.strip().splitlines()[-1:] if argv[0] == "shell" else []
        print(f"  {' '.join(argv[:1]):<10} {seconds:7.1f} s  {' '.join(tail)}")
    archive = OUT / f"{key}.tar"
    archive.unlink(missing_ok=True)
    result = {"scenario": name}
    for label, argv, env in (
        ("backup", ["backup", "--output", str(archive)], source),
        ("check", ["restore", "--check", str(archive)], source),
        ("restore", ["restore", str(archive)], target),
    ):
        seconds, out = run(argv, env, label)
        result[label] = round(seconds, 2)
        print(f"  {label:<10} {seconds:7.1f} s")
        for line in figures(out):
            print(f"      {line}")
    result["archive_mb"] = round(archive.stat().st_size / 1e6, 1)
    print(f"  archive    {result['archive_mb']:7.1f} MB")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scores", type=int, default=1_000_000, help="human scores (1M)")
    parser.add_argument("--sqlite", action="store_true", help="also SCORES on SQLite")
    parser.add_argument("--skip-demo", action="store_true")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--keep-db", action="store_true", help="keep the PostgreSQL databases")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    fill_env = {"BENCH_SCORES": str(args.scores)}

    if not args.skip_demo:
        shutil.rmtree(OUT / "demo", ignore_errors=True)
        shutil.rmtree(OUT / "demo-restored", ignore_errors=True)
        results.append(
            scenario(
                "demo (SQLite)",
                "demo",
                source=env_for(var=OUT / "demo", database_url=None),
                target=env_for(var=OUT / "demo-restored", database_url=None),
                fill=[["migrate", "-v0"], ["seed_demo"]],
            )
        )
    if not args.skip_postgres:
        for database in (SOURCE_DB, RESTORE_DB):
            psql("postgres", f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            psql("postgres", f'CREATE DATABASE "{database}"')
        shutil.rmtree(OUT / "pg", ignore_errors=True)
        shutil.rmtree(OUT / "pg-restored", ignore_errors=True)
        try:
            results.append(
                scenario(
                    f"{args.scores:,} scores (PostgreSQL)",
                    "postgres",
                    source={
                        **env_for(var=OUT / "pg", database_url=f"{PG}/{SOURCE_DB}"),
                        **fill_env,
                    },
                    target=env_for(var=OUT / "pg-restored", database_url=f"{PG}/{RESTORE_DB}"),
                    fill=[["migrate", "-v0"], ["shell", "-c", FILL]],
                )
            )
        finally:
            if not args.keep_db:
                for database in (SOURCE_DB, RESTORE_DB):
                    psql("postgres", f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    if args.sqlite:
        shutil.rmtree(OUT / "large", ignore_errors=True)
        shutil.rmtree(OUT / "large-restored", ignore_errors=True)
        results.append(
            scenario(
                f"{args.scores:,} scores (SQLite)",
                "sqlite",
                source={**env_for(var=OUT / "large", database_url=None), **fill_env},
                target=env_for(var=OUT / "large-restored", database_url=None),
                fill=[["migrate", "-v0"], ["shell", "-c", FILL]],
            )
        )
    (OUT / "backup_bench.json").write_text(json.dumps(results, indent=1))
    print(f"\n{'scenario':<32} {'backup s':>9} {'check s':>8} {'restore s':>10} {'archive MB':>11}")
    for r in results:
        print(
            f"{r['scenario']:<32} {r['backup']:>9.1f} {r['check']:>8.1f} {r['restore']:>10.1f} "
            f"{r['archive_mb']:>11.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
