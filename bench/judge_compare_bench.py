"""Judge comparison benchmark: how long the comparison of chosen judges
(analytics.judge_compare.figures.compare_judges, what the page and the API compute in the
request) takes on a 10-judge, 6-skill, 20-system synthetic project.

    .venv/bin/python bench/judge_compare_bench.py                        # 50 items, 1,000 resamples
    .venv/bin/python bench/judge_compare_bench.py --items 200 --resamples 10000

Synthetic data: I items x 20 systems (one response each), 6 skills, 2 human scores per
response and skill, 10 judges (each with its own noise and a share of per-item error,
every third with k = 3 samples, so its values are means). Times each comparison mode
(against a baseline: 9 pairs per skill; every two judges: 45 pairs per skill) for each
correlation, and prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SKILLS = ("Factuality", "Comprehension", "Readability", "Conciseness", "Harmlessness", "Logic")
SYSTEMS = 20
JUDGES = 10


def make_rows(items: int, seed: int = 0) -> tuple[list, list]:
    rng = np.random.default_rng(seed)
    human, judge = [], []
    rid = 0
    for item in range(items):
        item_error = rng.normal(0, 1, size=JUDGES)
        for s in range(SYSTEMS):
            rid += 1
            for skill in SKILLS:
                quality = 3 + 0.08 * (s - SYSTEMS / 2) + rng.normal(0, 0.8)
                for person in ("p1", "p2"):
                    value = int(np.clip(round(quality + rng.normal(0, 0.6)), 1, 5))
                    human.append((rid, item, f"sys{s:02d}", skill, person, value))
                for j in range(JUDGES):
                    k = 3 if j % 3 == 0 else 1
                    draws = quality + 0.3 * item_error[j] + rng.normal(0, 0.3 + 0.1 * j, size=k)
                    value = float(np.mean(np.clip(np.round(draws), 1, 5)))
                    judge.append((rid, item, f"sys{s:02d}", skill, f"judge-{j}", value))
    return human, judge


def main() -> None:
    from analytics.judge_compare.figures import Setup, compare_judges

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=50)
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    started = time.perf_counter()
    human, judge = make_rows(args.items)
    names = [f"judge-{j}" for j in range(JUDGES)]
    setups = {
        n: Setup(n, kind="llm", cost=0.5 + j, judgments=args.items * SYSTEMS)
        for j, n in enumerate(names)
    }
    print(
        f"{args.items} items x {SYSTEMS} systems = {args.items * SYSTEMS:,} responses, "
        f"{len(SKILLS)} skills, {JUDGES} judges: {len(human):,} human and {len(judge):,} judge "
        f"rows (made in {time.perf_counter() - started:.1f} s); {args.resamples:,} resamples"
    )
    print("| mode | correlation | pairs | seconds |")
    print("| --- | --- | --- | --- |")
    for mode, baseline in (("against a baseline", names[0]), ("every two judges", None)):
        for measure in ("pearson", "kendall"):
            started = time.perf_counter()
            result = compare_judges(
                human,
                judge,
                judges=names,
                baseline=baseline,
                measure=measure,
                resamples=args.resamples,
                setups=setups,
            )
            took = time.perf_counter() - started
            print(f"| {mode} | {measure} | {len(result['pairs'])} | {took:.2f} |")


if __name__ == "__main__":
    main()
