"""Analytics report benchmark: the full report over about a million scores.

    .venv/bin/python bench/analytics_bench.py                     # 100k responses, 1,000 resamples
    .venv/bin/python bench/analytics_bench.py --responses 20000 --resamples 200

Synthetic data of the shape the issue names: R responses (R/4 items x 4 systems), 3 skills,
3 human scores per response and skill from a crowd of 30 annotators, and one judge: about
1.2 M rows at R = 100,000. It times `analytics.report.build.build_report` (the report the command
and the API return, with bootstrap intervals) and, side by side in the same run, a
straightforward pandas groupby + scipy loop computing the same correlations and a
resampling loop for their intervals, each in its own process so that peak memory (RSS) is
measured separately. Prints the figures and their ratio; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SKILLS = ("Factuality", "Readability", "Comprehension")


def make_rows(responses: int, seed: int):
    """(human rows, judge rows) as the report takes them."""
    rng = np.random.default_rng(seed)
    systems = ("s1", "s2", "s3", "s4")
    human, judge = [], []
    raters = [f"r{i:02d}" for i in range(30)]
    for rid in range(responses):
        item, system = rid // 4, systems[rid % 4]
        for skill in SKILLS:
            truth = rng.integers(1, 6)
            for rater in rng.choice(raters, size=3, replace=False):
                value = int(np.clip(truth + rng.integers(-1, 2), 1, 5))
                human.append((rid, item, system, skill, str(rater), value))
            judge.append(
                (rid, item, system, skill, "judge", int(np.clip(truth + rng.integers(-1, 2), 1, 5)))
            )
    return human, judge


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_report(responses, resamples, seed, queue):
    from analytics.report.build import build_report

    human, judge = make_rows(responses, seed)
    before = _rss_mb()
    t0 = time.perf_counter()
    report = build_report(human, judge, resamples=resamples)
    elapsed = time.perf_counter() - t0
    r = report["correlation"]["judge"]["Readability"]["instance"]
    queue.put(
        {
            "seconds": elapsed,
            "rss_mb": _rss_mb(),
            "rss_before_mb": before,
            "rows": len(human) + len(judge),
            "pearson": r["pearson"],
            "ci": r["ci"]["pearson"],
        }
    )


def run_naive(responses, resamples, seed, queue):
    import pandas as pd
    from scipy import stats

    human, judge = make_rows(responses, seed)
    before = _rss_mb()
    t0 = time.perf_counter()
    cols = ["response", "item", "system", "skill", "rater", "value"]
    h = pd.DataFrame(human, columns=cols)
    j = pd.DataFrame(judge, columns=cols)
    means = h.groupby(["response", "skill"], as_index=False).agg(
        item=("item", "first"), system=("system", "first"), human=("value", "mean")
    )
    both = means.merge(j.rename(columns={"value": "judge"})[["response", "skill", "judge"]])
    out = {}
    rng = np.random.default_rng(0)
    for skill, part in both.groupby("skill"):
        x, y = part["human"].to_numpy(), part["judge"].to_numpy()
        entry = {
            "pearson": stats.pearsonr(x, y).statistic,
            "spearman": stats.spearmanr(x, y).statistic,
            "kendall": stats.kendalltau(x, y).statistic,
        }
        per_item = [
            stats.pearsonr(g["human"], g["judge"]).statistic
            for _, g in part.groupby("item")
            if g["human"].nunique() > 1 and g["judge"].nunique() > 1
        ]
        entry["item"] = float(np.nanmean(per_item))
        sys_means = part.groupby("system")[["human", "judge"]].mean()
        entry["system"] = stats.pearsonr(sys_means["human"], sys_means["judge"]).statistic
        items = part["item"].to_numpy()
        by_item = {k: v for k, v in part.groupby("item").indices.items()}
        keys = np.array(list(by_item))
        boot_p, boot_s = [], []
        for _ in range(resamples):
            drawn = rng.choice(keys, size=keys.size)
            idx = np.concatenate([by_item[k] for k in drawn])
            boot_p.append(stats.pearsonr(x[idx], y[idx]).statistic)
            boot_s.append(stats.spearmanr(x[idx], y[idx]).statistic)
        entry["ci"] = np.percentile(boot_p, [2.5, 97.5]).tolist()
        out[skill] = entry
        del items
    elapsed = time.perf_counter() - t0
    readability = out["Readability"]
    queue.put(
        {
            "seconds": elapsed,
            "rss_mb": _rss_mb(),
            "rss_before_mb": before,
            "pearson": readability["pearson"],
            "ci": readability["ci"],
        }
    )


def in_process(target, *args):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", type=int, default=100_000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument(
        "--naive-resamples",
        type=int,
        default=None,
        help="resamples for the naive loop (default: the same)",
    )
    parser.add_argument("--skip-naive", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "flaskweb.settings")
    os.environ.setdefault("DJANGO_DEBUG", "true")
    ours = in_process(run_report, args.responses, args.resamples, args.seed)
    print(f"rows {ours['rows']:,} ({args.responses:,} responses x 3 skills x 3 people + 1 judge)")
    rss, rows_rss = ours["rss_mb"], ours["rss_before_mb"]
    print(
        f"report (build_report, {args.resamples} resamples): {ours['seconds']:.2f} s, "
        f"peak RSS {rss:.0f} MB (rows alone {rows_rss:.0f} MB)"
    )
    figures = {"responses": args.responses, "resamples": args.resamples, "report": ours}
    if not args.skip_naive:
        naive_resamples = args.naive_resamples or args.resamples
        naive = in_process(run_naive, args.responses, naive_resamples, args.seed)
        scale = args.resamples / naive_resamples
        print(
            f"pandas + scipy loop ({naive_resamples} resamples, correlations only): "
            f"{naive['seconds']:.2f} s, peak RSS {naive['rss_mb']:.0f} MB"
        )
        print(f"same Pearson: {ours['pearson']:.6f} vs {naive['pearson']:.6f}")
        if scale == 1:
            print(f"ratio (loop / report): {naive['seconds'] / ours['seconds']:.1f}x")
        figures["naive"] = naive
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "analytics_bench.json").write_text(json.dumps(figures, indent=2, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
