"""Run `manage.py import_dataset ARGS` with timers around the import's phases.

    python bench/_phases.py PHASES.json import_dataset FILE ... (same arguments as manage.py)

Used by import_bench.py --phases. It changes nothing in the import: it wraps (by module
attribute) the functions annotation.services.imports calls per phase and records how long
each took, plus every SQL statement slower than 50 ms (Django logs them under DEBUG). The
parent passes its spawn time in BENCH_T0 (time.time()) so start-up is included. With
BENCH_CPROFILE=PATH the command also runs under cProfile and the stats go to PATH.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

T0 = float(os.environ.get("BENCH_T0") or time.time())
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flaskweb.settings")

times: dict[str, float] = {}
marks: dict[str, float] = {}


def _add(key: str, seconds: float) -> None:
    times[key] = times.get(key, 0.0) + seconds


def _timed(module, name: str, key: str) -> None:
    inner = getattr(module, name)

    def wrapper(*args, **kwargs):
        t = time.time()
        try:
            return inner(*args, **kwargs)
        finally:
            _add(key, time.time() - t)
            marks[f"{key}_end"] = time.time() - T0

    setattr(module, name, wrapper)


def _install() -> None:
    import django

    django.setup()
    from annotation.datasets import services as imports
    from annotation.management.commands import import_dataset

    _timed(imports, "_stage_rows", "stage_rows")
    _timed(imports._Stager, "flush", "copy")
    _timed(imports, "_check_sets", "check")
    _timed(imports, "_apply", "apply")
    _timed(imports, "_model_coverage", "coverage")
    _timed(imports, "_import_in_transaction", "in_transaction")
    _timed(imports, "_finish", "finish")

    handle = import_dataset.Command.handle

    def timed_handle(self, *args, **kwargs):
        marks["handle_start"] = time.time() - T0
        try:
            return handle(self, *args, **kwargs)
        finally:
            marks["handle_end"] = time.time() - T0

    import_dataset.Command.handle = timed_handle

    original_txn = imports._import_in_transaction

    def first_enter(*args, **kwargs):
        marks.setdefault("transaction_start", time.time() - T0)
        return original_txn(*args, **kwargs)

    imports._import_in_transaction = first_enter


def _report(path: str) -> None:
    from django.db import connection

    result = {"startup": marks.get("handle_start", 0.0)}
    if "transaction_start" in marks:
        result["setup"] = marks["transaction_start"] - marks["handle_start"]
    copy = times.get("copy", 0.0)
    result["parse"] = times.get("stage_rows", 0.0) - copy  # flushes happen inside _stage_rows
    result["copy"] = copy
    for key in ("check", "apply", "coverage"):
        result[key] = times.get(key, 0.0)
    if "in_transaction_end" in marks and "finish_end" in marks:
        # _import_in_transaction returns inside transaction.atomic(); its exit is the commit.
        result["commit"] = max(
            marks["finish_end"] - times.get("finish", 0.0) - marks["in_transaction_end"], 0.0
        )
    result["finish"] = times.get("finish", 0.0)
    result["handle_end"] = marks.get("handle_end", 0.0)
    slow = []
    for q in connection.queries:
        seconds = float(q.get("time") or 0)
        if seconds >= 0.05:
            slow.append((re.sub(r"\s+", " ", q["sql"])[:110], seconds))
    result["slow_sql"] = sorted(slow, key=lambda x: -x[1])
    Path(path).write_text(json.dumps(result, indent=2) + "\n")


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    _install()
    from django.core.management import execute_from_command_line

    profile_path = os.environ.get("BENCH_CPROFILE")
    code = 0
    try:
        if profile_path:
            import cProfile

            profiler = cProfile.Profile()
            try:
                profiler.runcall(execute_from_command_line, ["manage.py", *args])
            finally:
                profiler.dump_stats(profile_path)
        else:
            execute_from_command_line(["manage.py", *args])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        _report(out)
    sys.exit(code)


if __name__ == "__main__":
    main()
