"""Judge trust report benchmark: what the trust figures (analytics.trust.figures) add to the
report at the report's resamples.

    .venv/bin/python bench/trust_bench.py                         # demo-sized and larger
    .venv/bin/python bench/trust_bench.py --responses 20000 --judges 4 --resamples 1000

Synthetic data: R responses (R/4 items x 4 systems), 3 skills, 3 human scores per response
and skill from a crowd of 30 (5 % N/A), J judges (one lenient by a point, the others noisy)
whose first judge has 3 samples per response, hidden repeats on 5 % of the human scores,
items with one of ten domains and a difficulty, response lengths. Times, in one process per
size, `build_report` (the report's correlations and agreement with intervals), `breakdowns`
and `trust_figures`, all at the same resamples. Prints the figures; asserts nothing.
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


def make_inputs(responses: int, judges: int, seed: int):
    from analytics.trust.figures import TrustInputs

    rng = np.random.default_rng(seed)
    systems = ("s1", "s2", "s3", "s4")
    raters = [f"r{i:02d}" for i in range(30)]
    human, judge, samples, retest = [], [], [], []
    facets, words = {}, {}
    for rid in range(responses):
        item, system = rid // 4, systems[rid % 4]
        facets[item] = {"domains": [f"d{item % 10}"], "difficulty": 1 + item % 5}
        words[rid] = int(rng.integers(5, 800))
        for skill in SKILLS:
            truth = int(rng.integers(1, 6))
            for rater in rng.choice(raters, size=3, replace=False):
                value = (
                    None if rng.random() < 0.05 else int(np.clip(truth + rng.integers(-1, 2), 1, 5))
                )
                human.append((rid, item, system, skill, str(rater), value))
                if value is not None and rng.random() < 0.05:
                    again = int(np.clip(value + rng.integers(-1, 2), 1, 5))
                    retest.append((rid, item, skill, value, again))
            for j in range(judges):
                if j == 0:
                    vals = [int(np.clip(truth + 1 + rng.integers(-1, 2), 1, 5)) for _ in range(3)]
                    for k, v in enumerate(vals):
                        samples.append((rid, item, skill, k, v))
                    value = sum(vals) / 3
                else:
                    value = int(np.clip(truth + rng.integers(-2, 3), 1, 5))
                judge.append((rid, item, system, skill, f"judge-{j}", value))
    return (
        human,
        judge,
        facets,
        TrustInputs(words=words, samples={"judge-0": samples}, retest=retest),
    )


def run(responses: int, judges: int, resamples: int, seed: int, queue) -> None:
    from analytics.report.build import breakdowns, build_report
    from analytics.trust.figures import trust_figures

    human, judge, facets, inputs = make_inputs(responses, judges, seed)
    t0 = time.perf_counter()
    build_report(human, judge, resamples=resamples)
    t1 = time.perf_counter()
    breakdowns(human, judge, facets)
    t2 = time.perf_counter()
    trust = trust_figures(human, judge, facets, inputs, resamples=resamples)
    t3 = time.perf_counter()
    queue.put(
        {
            "responses": responses,
            "judges": judges,
            "rows": len(human) + len(judge),
            "resamples": resamples,
            "report_s": round(t1 - t0, 2),
            "breakdowns_s": round(t2 - t1, 2),
            "trust_s": round(t3 - t2, 2),
            "trust_json_kb": round(len(json.dumps(trust)) / 1024),
            "rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--responses", type=int, nargs="*", default=[64, 4000, 20000])
    parser.add_argument("--judges", type=int, default=2)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = []
    ctx = mp.get_context("spawn")
    for responses in args.responses:
        queue = ctx.Queue()
        proc = ctx.Process(
            target=run, args=(responses, args.judges, args.resamples, args.seed, queue)
        )
        proc.start()
        found = queue.get()
        proc.join()
        print(json.dumps(found), flush=True)
        out.append(found)
    target = ROOT / "bench" / "out"
    target.mkdir(exist_ok=True)
    (target / "trust_bench.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
