"""Analytics report benchmark with many judges: point estimates against the default report.

    .venv/bin/python bench/analytics_judges_bench.py                 # 100 judges, 3 runs each
    .venv/bin/python bench/analytics_judges_bench.py --judges 72 --repeat 1
    .venv/bin/python bench/analytics_judges_bench.py --all-resamples 100   # all pairs cheaper

Synthetic data of the issue's shape: J judges x 10 systems x 100 items x 6 skills (432,000
judge scores at J = 72), three people per response and skill from a crowd of 30 (1-5).
Three judges in four are automatic metrics with raw continuous values (off the skill's
scale, as imported metric scores are), one in four an LLM judge on the 1-5 scale; each
judge has its own noise. Items have one or two of ten domains and a difficulty.

Each run is its own spawned process, computing what `project_report` computes by default
(`build_report` and `breakdowns`) on rows made in that process:

- point: resamples=0 (point estimates, no judge comparison);
- default: --resamples (1,000), each judge against the best per skill;
- all: every pair of judges (`compare_all`), --all-resamples (default: --resamples).

Point and default runs alternate --repeat times; the medians and their ratio are printed,
with the peak RSS (ru_maxrss) of each process and the JSON size. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SKILLS = ("Correctness", "Factuality", "Completeness", "Readability", "Conciseness", "Harmlessness")


def make_rows(judges: int, systems: int = 10, items: int = 100, people: int = 3, seed: int = 1):
    """(human rows, judge rows, item facets, off-scale (judge, skill) pairs)."""
    rng = np.random.default_rng(seed)
    system_names = [f"model-{s:02d}" for s in range(systems)]
    crowd = [f"ann{i:02d}" for i in range(30)]
    names = [f"llm-{k:03d}" if k % 4 == 0 else f"metric-{k:03d}" for k in range(judges)]
    noise = rng.uniform(0.3, 2.0, size=judges)
    domains = [f"domain-{d}" for d in range(10)]
    facets = {
        item: {
            "domains": sorted(rng.choice(domains, size=rng.integers(1, 3), replace=False)),
            "difficulty": int(rng.integers(1, 6)),
        }
        for item in range(items)
    }
    human, judge, off_scale = [], [], set()
    for skill in SKILLS:
        truth = rng.integers(1, 6, size=(items, systems))
        for item in range(items):
            for s in range(systems):
                for p in rng.choice(len(crowd), size=people, replace=False):
                    value = int(np.clip(truth[item, s] + rng.integers(-1, 2), 1, 5))
                    human.append(
                        (item * systems + s, item, system_names[s], skill, crowd[p], value)
                    )
        raw = truth[None] + rng.normal(size=(judges, items, systems)) * noise[:, None, None]
        for k, name in enumerate(names):
            if name.startswith("llm"):
                values = np.clip(np.rint(raw[k]), 1, 5).astype(int).tolist()
            else:
                values = np.round(raw[k], 4).tolist()
                off_scale.add((name, skill))
            for item in range(items):
                for s in range(systems):
                    rid = item * systems + s
                    judge.append((rid, item, system_names[s], skill, name, values[item][s]))
    return human, judge, facets, off_scale


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(mode: str, judges: int, resamples: int, queue) -> None:
    from analytics.report.build import breakdowns, build_report

    human, judge, facets, off_scale = make_rows(judges)
    before = _rss_mb()
    t0 = time.perf_counter()
    report = build_report(
        human, judge, resamples=resamples, off_scale=off_scale, compare_all=mode == "all"
    )
    t1 = time.perf_counter()
    report["breakdowns"] = breakdowns(human, judge, facets, off_scale=off_scale)
    t2 = time.perf_counter()
    size = len(json.dumps(report))
    queue.put(
        {
            "mode": mode,
            "resamples": resamples,
            "seconds": t2 - t0,
            "report_seconds": t1 - t0,
            "breakdowns_seconds": t2 - t1,
            "rss_mb": _rss_mb(),
            "rows_rss_mb": before,
            "judge_scores": len(judge),
            "pairs": sum(map(len, report.get("judge_comparison", {}).values())),
            "json_mb": size / 1e6,
        }
    )


def in_process(*args):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=run, args=(*args, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def show(r: dict) -> str:
    return (
        f"{r['seconds']:7.1f} s (report {r['report_seconds']:.1f} s + breakdowns "
        f"{r['breakdowns_seconds']:.1f} s), peak RSS {r['rss_mb']:.0f} MB "
        f"(rows {r['rows_rss_mb']:.0f} MB), {r['pairs']:,} pairs, JSON {r['json_mb']:.1f} MB"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", type=int, default=100)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--all-resamples", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-all", action="store_true", help="leave out the all-pairs run")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flaskweb.settings")
    os.environ.setdefault("DJANGO_DEBUG", "true")
    runs: dict[str, list[dict]] = {"point": [], "default": []}
    for k in range(args.repeat):
        for mode, resamples in (("point", 0), ("default", args.resamples)):
            found = in_process(mode, args.judges, resamples)
            runs[mode].append(found)
            print(f"[{k + 1}/{args.repeat}] {mode:7} {show(found)}", flush=True)
    scores = runs["point"][0]["judge_scores"]
    print(f"\n{args.judges} judges x 10 systems x 100 items x 6 skills = {scores:,} judge scores")
    medians = {}
    for mode, found in runs.items():
        medians[mode] = statistics.median(r["seconds"] for r in found)
        peak = max(r["rss_mb"] for r in found)
        print(f"{mode:7} median {medians[mode]:.1f} s, peak RSS {peak:.0f} MB")
    print(f"ratio default / point: {medians['default'] / medians['point']:.2f}x")
    figures = {"judges": args.judges, "runs": runs}
    if not args.skip_all:
        every = in_process("all", args.judges, args.all_resamples or args.resamples)
        print(f"all pairs ({every['resamples']} resamples): {show(every)}")
        figures["all"] = every
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "analytics_judges_bench.json").write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
