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

Point and default runs alternate --repeat times; the medians of wall and CPU seconds
(process time: what a shared machine's load moves least) and their ratios are printed,
with the peak RSS (ru_maxrss) of each process and the JSON size. Asserts nothing.

`--shape metric-table` replaces the synthetic table with one shaped like a real public
table of automatic metrics scored against people (`make_metric_table_rows`): unbalanced
prompts with few systems each, three people who score everything, and metrics whose raw
values tie a lot (zeros, fractions of small counts, rounded or integer values) in ranges
and directions of their own. `--shape synthetic` (the default) is the table above.
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


#: The metric families of `make_metric_table_rows`, cycled over the judges: how each turns a
#: response's latent quality q (about 1-5) into its raw value.
METRIC_KINDS = ("bleu", "rouge", "bertscore", "chrf", "length", "perplexity", "exact", "meteor")


def _metric_values(kind: str, q: np.ndarray, rng: np.random.Generator, noise: float) -> list:
    """Raw values of one metric family for latent qualities `q` (any shape)."""
    z = (q - 3) / 2 + rng.normal(size=q.shape) * noise  # about -1..1, noisy
    if kind == "bleu":  # 0 for most outputs (no 4-gram overlap), else continuous, 4 places
        value = np.where(z + rng.normal(size=q.shape) < 0.6, 0.0, 1 / (1 + np.exp(-2 * z)))
        return np.round(value, 4).tolist()
    if kind == "rouge":  # an F-measure of small token counts: fractions of small integers
        size = rng.integers(4, 25, size=q.shape)
        hits = np.clip(np.rint((z + 1) / 2 * size), 0, size)
        return np.round(hits / size, 4).tolist()
    if kind == "bertscore":  # continuous in a narrow band, 4 places: few exact ties
        return np.round(0.87 + 0.03 * z, 4).tolist()
    if kind == "chrf":  # 0-100 with 2 places: hundreds of distinct values
        return np.round(np.clip(50 + 20 * z, 0, 100), 2).tolist()
    if kind == "length":  # a length ratio in tokens, integer counts (direction unclear)
        return np.rint(np.clip(120 - 40 * z + rng.normal(size=q.shape) * 30, 1, None)).tolist()
    if kind == "perplexity":  # lower is better, long right tail, 2 places
        return np.round(np.exp(2.5 - z + rng.normal(size=q.shape) * 0.3), 2).tolist()
    if kind == "exact":  # exact match: 0 or 1
        return (z > 0.8).astype(float).tolist()
    return np.round(np.clip(0.5 + 0.25 * z, 0, 1), 3).tolist()  # meteor-like: 3 places


def make_metric_table_rows(
    judges: int = 72, items: int = 96, systems: int = 14, responses: int = 1000, seed: int = 1
):
    """Rows shaped like a real public metric table (`make_rows`' tuple). Each property and
    why it is there:

    - ~96 prompts x ~11 systems: every prompt has its own few systems (2 to 14 of 14, about
      `responses` in all), so items have few systems and a system has few items per domain
      (per-item correlations over 2-4 responses, systems missing from many resamples).
    - Three people who score every response (a complete design, as a lab study), 1-5: the
      human means are thirds, 13 distinct values.
    - Every judge is an automatic metric (off the scale, MAE left out) of one of
      METRIC_KINDS: BLEU (0 for most outputs), ROUGE (fractions of small counts), exact
      match (0/1), length (integers), METEOR (3 places), chrF (2 places): many exact ties
      and a few dozen to a few hundred distinct values, so their joint tables with the 13
      human means are not wide (at most 10,000 cells) and are resampled whole, Kendall
      included; BERTScore and perplexity (mostly distinct values) are wide. Ranges differ
      (0-1, 0-100, tokens, perplexities) and so do directions (length and perplexity
      fall as quality rises).
    - Items have one or two of ten domains and a difficulty, as in `make_rows`.
    """
    rng = np.random.default_rng(seed)
    system_names = [f"model-{s:02d}" for s in range(systems)]
    people = ["ann00", "ann01", "ann02"]
    sizes = rng.integers(2, systems + 1, size=items)
    while sizes.sum() != responses:  # nudge the sizes to `responses` in all
        k = int(rng.integers(items))
        step = 1 if sizes.sum() < responses else -1
        if 2 <= sizes[k] + step <= systems:
            sizes[k] += step
    cells = [
        (item, int(s))
        for item in range(items)
        for s in sorted(rng.choice(systems, size=sizes[item], replace=False))
    ]
    names = [f"{METRIC_KINDS[k % len(METRIC_KINDS)]}-{k:03d}" for k in range(judges)]
    noise = rng.uniform(0.3, 1.5, size=judges)
    domains = [f"domain-{d}" for d in range(10)]
    facets = {
        item: {
            "domains": sorted(rng.choice(domains, size=rng.integers(1, 3), replace=False)),
            "difficulty": int(rng.integers(1, 6)),
        }
        for item in range(items)
    }
    skill_of_system = rng.normal(size=systems) * 0.6
    human, judge, off_scale = [], [], set()
    for skill in SKILLS:
        quality = np.array([3.4 + skill_of_system[s] + rng.normal() * 0.8 for _, s in cells])
        for rid, ((item, s), q) in enumerate(zip(cells, quality, strict=True)):
            for person in people:
                value = int(np.clip(np.rint(q + rng.normal() * 0.7), 1, 5))
                human.append((rid, item, system_names[s], skill, person, value))
        for k, name in enumerate(names):
            values = _metric_values(METRIC_KINDS[k % len(METRIC_KINDS)], quality, rng, noise[k])
            off_scale.add((name, skill))
            for rid, (item, s) in enumerate(cells):
                judge.append((rid, item, system_names[s], skill, name, values[rid]))
    return human, judge, facets, off_scale


SHAPES = {"synthetic": make_rows, "metric-table": make_metric_table_rows}


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(mode: str, judges: int, resamples: int, shape: str, queue) -> None:
    from analytics.report.build import breakdowns, build_report

    human, judge, facets, off_scale = SHAPES[shape](judges)
    before = _rss_mb()
    c0 = time.process_time()
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
            "cpu_seconds": time.process_time() - c0,
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
        f"{r['seconds']:7.1f} s, CPU {r['cpu_seconds']:.1f} s "
        f"(report {r['report_seconds']:.1f} s + breakdowns "
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
    parser.add_argument("--shape", choices=sorted(SHAPES), default="synthetic")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flaskweb.settings")
    os.environ.setdefault("DJANGO_DEBUG", "true")
    runs: dict[str, list[dict]] = {"point": [], "default": []}
    for k in range(args.repeat):
        for mode, resamples in (("point", 0), ("default", args.resamples)):
            found = in_process(mode, args.judges, resamples, args.shape)
            runs[mode].append(found)
            print(f"[{k + 1}/{args.repeat}] {mode:7} {show(found)}", flush=True)
    scores = runs["point"][0]["judge_scores"]
    print(f"\n{args.shape}: {args.judges} judges x 6 skills = {scores:,} judge scores")
    medians, cpu = {}, {}
    for mode, found in runs.items():
        medians[mode] = statistics.median(r["seconds"] for r in found)
        cpu[mode] = statistics.median(r["cpu_seconds"] for r in found)
        peak = max(r["rss_mb"] for r in found)
        print(
            f"{mode:7} median {medians[mode]:.1f} s, CPU {cpu[mode]:.1f} s, peak RSS {peak:.0f} MB"
        )
    print(
        f"ratio default / point: {medians['default'] / medians['point']:.2f}x "
        f"(CPU: {cpu['default'] / cpu['point']:.2f}x)"
    )
    figures = {"shape": args.shape, "judges": args.judges, "runs": runs}
    if not args.skip_all:
        every = in_process("all", args.judges, args.all_resamples or args.resamples, args.shape)
        print(f"all pairs ({every['resamples']} resamples): {show(every)}")
        figures["all"] = every
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "analytics_judges_bench.json").write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
