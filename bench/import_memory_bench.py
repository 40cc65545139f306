#!/usr/bin/env python
"""Peak memory of the score import and the judge-output import against file size.

For each size (MB) it generates, into a temporary directory, a FLASK review file set
(judge outputs, 4 models) and a long-format score table of about that size, from
invented data, and runs each import in a fresh child process on PostgreSQL:

- `job`: the background path the web and the API now use: a job row pointing at the file,
  run by the worker's function (judging.output_imports.jobs / analytics.imports.jobs);
- `request` (with --old REV): the code of git revision REV, checked out in a temporary
  worktree, called the way its web request did (judge outputs: every file read into
  bytes; scores: the upload stream), for a side-by-side figure.

The figure is the child's own peak resident set (ru_maxrss from os.wait4), exact, not
sampled; `base` is a child that only sets Django up. Not a test; it asserts nothing but
exits 1 if an import does not succeed.

    .venv/bin/python bench/import_memory_bench.py                 # 20, 80 and 200 MB
    .venv/bin/python bench/import_memory_bench.py --sizes 20 80 --old 69be166
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
PG = {"host": "127.0.0.1", "port": "5432", "user": "root"}
DB = "flaskweb_membench"
MODELS = ["kestrel", "osprey", "heron", "plover"]
SKILLS = ["Factuality", "Readability", "Conciseness"]
#: Words of the invented reviews and rationales, some outside ASCII.
WORDS = """the answer names a planet correctly but says nothing of its orbit while the
reference gives both so the response is concise yet incomplete and shallow über façade
naïve 東京 данные ἀλήθεια 🙂""".split()  # noqa: SIM905 - a text reads better than a list


def psql(sql: str, db: str = "postgres") -> None:
    subprocess.run(
        [
            "psql",
            "-h",
            PG["host"],
            "-p",
            PG["port"],
            "-U",
            PG["user"],
            "-d",
            db,
            "-v",
            "ON_ERROR_STOP=1",
            "-Atqc",
            sql,
        ],
        check=True,
        capture_output=True,
        text=True,
    )


def child_env(var_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL"}}
    env.update(
        DATABASE_URL=f"postgres://{PG['user']}@{PG['host']}:{PG['port']}/{DB}",
        # DEBUG off: with it on, Django keeps the text of the last 9,000 queries, and a
        # batch INSERT of judgments holds every review it writes
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY="membench-only-not-a-secret",
        DJANGO_ALLOWED_HOSTS="localhost",
        FLASKWEB_VAR_DIR=str(var_dir),
        FLASKWEB_MAX_LINE_BYTES=str(4 * 1024 * 1024),
    )
    return env


def run_child(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, float, float, str]:
    """(exit status, peak RSS in MB, wall seconds, output) of `python this-file --child …`."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [PYTHON, str(Path(__file__).resolve()), "--child", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss / 1024, time.perf_counter() - t0, out


# --- generating files -------------------------------------------------------------------------


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def reviews_write(folder: Path, megabytes: int, seed: int) -> tuple[int, list[Path]]:
    """One FLASK review file per model; returns (items, paths)."""
    rng = random.Random(seed)
    per_line = 1700  # bytes per review line, about
    items = max(1, megabytes * 1024 * 1024 // (per_line * len(MODELS)))
    paths = []
    for model in MODELS:
        path = folder / f"{model}_review.jsonl"
        with path.open("w", encoding="utf-8") as out:
            for i in range(items):
                scores = {s.lower(): rng.choice([1, 2, 3, 4, 5, "N/A"]) for s in SKILLS}
                line = {
                    "question_id": i,
                    "text": f"Question {i}",
                    "review": sentence(rng, 220) + f" {scores}",
                    "score": scores,
                    "target_txt": f"Answer of {model} to question {i}.",
                    "total_tokens_step4": rng.randint(300, 900),
                }
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
        paths.append(path)
    return items, paths


def scores_write(folder: Path, megabytes: int, seed: int) -> Path:
    rng = random.Random(seed)
    path = folder / "scores.csv"
    target = megabytes * 1024 * 1024
    with path.open("w", encoding="utf-8", newline="") as out:
        out.write("item,system,rater,rater_kind,skill,score,rationale\n")
        i = 0
        while out.tell() < target:
            for model in MODELS:
                for rater, kind in (
                    ("ann1", "human"),
                    ("ann2", "human"),
                    ("ann3", "human"),
                    ("gpt-judge", "judge"),
                ):
                    for skill in SKILLS:
                        score = rng.choice(["1", "2", "3", "4", "5", "N/A"])
                        out.write(
                            f'q{i},{model},{rater},{kind},{skill},{score},"{sentence(rng, 18)}"\n'
                        )
            i += 1
    return path


# --- the child processes -----------------------------------------------------------------------


def child(argv: list[str]) -> int:
    sys.path.insert(0, os.getcwd())
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flaskweb.settings")
    import django

    django.setup()
    what = argv[0]
    if what == "base":
        return 0
    if what == "setup":
        return child_setup(argv[1], int(argv[2]))
    kind, impl, project_slug, *paths = argv
    if kind == "judge":
        return child_judge(impl, project_slug, paths)
    return child_scores(impl, project_slug, paths)


def child_setup(slug: str, items: int) -> int:
    """A project with a dataset of `items` items, each answered by every model."""
    from annotation.models import Dataset, Item, Project, Response

    project = Project.objects.create(slug=slug, name=slug)
    dataset = Dataset.objects.create(project=project, name="Bench")
    for start in range(0, items, 5000):
        rows = Item.objects.bulk_create(
            Item(dataset=dataset, external_id=str(i), instruction=f"Question {i}")
            for i in range(start, min(items, start + 5000))
        )
        Response.objects.bulk_create(
            Response(
                item=row, model_name=model, text=f"Answer of {model} to question {row.external_id}."
            )
            for row in rows
            for model in MODELS
        )
    from django.db import connection

    with connection.cursor() as cursor:  # steady-state statistics, as autovacuum would give
        cursor.execute("ANALYZE annotation_item")
        cursor.execute("ANALYZE annotation_response")
    print(f"set up {slug}: {items} items x {len(MODELS)} models")
    return 0


def _described(paths: list[str]) -> list[dict]:
    return [{"name": Path(p).name, "path": p, "bytes": Path(p).stat().st_size} for p in paths]


def child_judge(impl: str, slug: str, paths: list[str]) -> int:
    from annotation.models import Dataset, Project

    project = Project.objects.get(slug=slug)
    dataset = Dataset.objects.get(project=project, name="Bench")
    if impl == "job":
        from judging.models import JudgeOutputImportJob
        from judging.output_imports.jobs import judge_output_import_job_run

        job = JudgeOutputImportJob.objects.create(
            project=project,
            dataset=dataset,
            options={"judge": "job judge"},
            files=_described(paths),
        )
        job = judge_output_import_job_run(job_id=job.pk)
        print(job.status, job.error, job.problem_count, job.result.get("runs"))
        return 0 if job.status == "succeeded" else 1
    from judging.output_imports.services import judge_outputs_import

    # as the old API did: every upload read into bytes in the request
    result = judge_outputs_import(
        project=project,
        dataset=dataset,
        judge_name="request judge",
        files=[(Path(p).name, Path(p).read_bytes()) for p in paths],
    )
    print("succeeded", [(r.judgments, r.scores) for r in result.runs])
    return 0


def child_scores(impl: str, slug: str, paths: list[str]) -> int:
    if impl == "job":
        from analytics.imports.jobs import score_import_job_run
        from analytics.models import ScoreImportJob

        job = ScoreImportJob.objects.create(
            options={"project": slug, "dataset": "Bench", "create_project": True},
            files=_described(paths),
        )
        job = score_import_job_run(job_id=job.pk)
        print(job.status, job.error, job.problem_count, job.batch and job.batch.scores_created)
        return 0 if job.status == "succeeded" else 1
    from analytics.imports.services import scores_import

    with open(paths[0], "rb") as stream:  # as the old page and API did: the upload stream
        result = scores_import(
            project_slug=slug,
            files=[(Path(paths[0]).name, stream)],
            dataset_name="Bench",
            create_project=True,
        )
    print("succeeded", result.batch.scores_created)
    return 0


# --- the driver --------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 80, 200], metavar="MB")
    parser.add_argument("--old", default="", metavar="REV", help="also run REV's request path")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--keep-db", action="store_true")
    parser.add_argument("--only", choices=["judge", "scores"], default=None)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="import-memory-bench-"))
    env = child_env(tmp / "var")
    old_tree = None
    try:
        psql(f"DROP DATABASE IF EXISTS {DB}")
        psql(f"CREATE DATABASE {DB}")
        subprocess.run(
            [PYTHON, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT,
            env=env,
            check=True,
        )
        if args.old:
            old_tree = tmp / "old"
            subprocess.run(
                ["git", "worktree", "add", "--detach", str(old_tree), args.old],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
        impls = [("job", ROOT)] + ([("request", old_tree)] if old_tree else [])
        status, base, _, out = run_child(["base"], env, ROOT)
        print(f"Django alone (base): peak RSS {base:.0f} MB")
        rows = []
        failed = False
        for size in args.sizes:
            folder = tmp / f"{size}mb"
            folder.mkdir()
            kinds = [args.only] if args.only else ["judge", "scores"]
            for kind in kinds:
                if kind == "judge":
                    items, paths = reviews_write(folder, size, args.seed)
                    slug = f"jo-{size}"
                    code, _, _, out = run_child(["setup", slug, str(items)], env, ROOT)
                    if code:
                        print(out)
                        return 1
                else:
                    paths = [scores_write(folder, size, args.seed)]
                mb = sum(p.stat().st_size for p in paths) / 1024 / 1024
                for impl, cwd in impls:
                    project = slug if kind == "judge" else f"sc-{size}-{impl}"
                    code, rss, wall, out = run_child(
                        [kind, impl, project, *map(str, paths)], env, cwd
                    )
                    failed |= code != 0
                    rows.append(
                        (kind, f"{mb:.0f}", impl, rss, wall, "ok" if code == 0 else "FAILED")
                    )
                    outcome = "ok" if code == 0 else "FAILED: " + out[-2000:]
                    print(
                        f"{kind:7} {mb:6.0f} MB  {impl:8} peak RSS {rss:7.0f} MB  {wall:7.1f} s  "
                        f"{outcome}",
                        flush=True,
                    )
                for p in paths:
                    p.unlink()
        print("\n| import | file MB | path | peak RSS MB | wall s |\n|---|---|---|---|---|")
        for kind, mb, impl, rss, wall, ok in rows:
            mark = "" if ok == "ok" else " FAILED"
            print(f"| {kind} | {mb} | {impl} | {rss:.0f} | {wall:.1f} |{mark}")
        return 1 if failed else 0
    finally:
        if old_tree is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(old_tree)], cwd=ROOT)
        shutil.rmtree(tmp, ignore_errors=True)
        if not args.keep_db:
            subprocess.run(
                [
                    "psql",
                    "-h",
                    PG["host"],
                    "-U",
                    PG["user"],
                    "-d",
                    "postgres",
                    "-qc",
                    f"DROP DATABASE IF EXISTS {DB}",
                ],
                capture_output=True,
            )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(child(sys.argv[2:]))
    sys.exit(main())
