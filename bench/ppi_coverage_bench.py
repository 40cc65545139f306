"""Prediction-powered estimates: coverage and width. Prints figures; it is not a test. See
bench/README.md ("Prediction-powered estimates: coverage and width").

    .venv/bin/python bench/ppi_coverage_bench.py [--reps 1000] [--scenario synthetic|flask|all]
        [--seed 0] [--jobs 2] [--flask-models 5|all] [--judge-cache FILE] [--json FILE]

The estimand is the full-data human mean of a group of responses: the mean over ALL its
responses of Y, each response's mean of several (simulated) annotators' scores. Every
replication draws the people anew and then, for each judge and labeled-set size n:

- `people only`: a uniform random labeled subset of n responses, people's mean and normal
  interval (the people-only figures of `analytics.ppi.ppi_mean`);
- `ppi++`: the same subset plus the judge's scores on every response, `analytics.ppi.ppi_mean`
  (power-tuned lambda);
- `ipw, uniform`: every response drawn with probability n/N (Poisson), `active_mean` over the
  frame: the inverse-probability-weighted estimator without a design, to tell what the
  estimator costs from what the design gains;
- the designs of the app's active selection (analytics.active; the frame decided in a
  random order, batch by batch, each batch's share of the budget left in proportion to its
  size, `inclusion_probabilities` with a 20 % uniform share, Poisson draws, `active_mean`
  over the frame): `active (spread)`, one batch whose uncertainty is the k-sample spread (a
  judge with samples only); `active (pilot)`, a first batch of a quarter of the frame (the
  pilot: uniform, or the spread for a judge with samples, as the app falls back before 10
  labels) and one batch of the rest whose uncertainty is the app's calibration model fitted
  on the pilot's labels; `active (4 batches)`, four batches of a quarter each, the
  calibration refitted on every label so far before each.

Per (judge, n, method): the coverage of the estimand by the 95 % interval with its Monte Carlo
standard error, the median interval width, the median ratio of that width to the people-only
width on the same replication (and group) at the same n, the median effective n
(`MeanEstimate.effective_n` for ppi++; Var(Y over the frame) / se^2 for the active designs)
and the mean number of responses labeled.

Scenarios: `synthetic` (items x systems with a latent quality, six judges of known quality)
and `flask` (the FLASK release's answers, the local judge server's scores, simulated people;
skipped with a message when ../shared/data/flask is absent). Figures go to stdout; with
--json FILE they are also written there, and --judge-cache FILE keeps the FLASK judge
scores between runs. Nothing else is written.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analytics import ppi  # noqa: E402  (after the path insert; pure, no Django)

PYTHON = str(ROOT / ".venv" / "bin" / "python")
FLASK_DIR = (ROOT / ".." / "shared" / "data" / "flask").resolve()

SIZES = (25, 50, 100, 200)
ALPHA = 0.05
GOAL = 0.94
PEOPLE = "people only"

#: FLASK: the models judged by default (a spread of quality and length); --flask-models all
#: takes the 15.
FLASK_MODELS = ("gpt4", "chatgpt", "llama2_chat_70b", "vicuna_13b", "alpaca_13b")
#: The judge server's samples per response (requests with seed 0..k-1, as the app sends a
#: judge's k samples), its temperature and its length bias (+round(K min(1, words/200))).
FLASK_SAMPLES = 3
FLASK_TEMPERATURE = 0.7
FLASK_LENGTH_BIAS = 3.0


# --- simulated people -----------------------------------------------------------------------

ANNOTATORS = 3  # scores per response
CROWD = 30  # annotators, each with a fixed bias
ANNOTATOR_BIAS_SD = 0.35
ANNOTATOR_NOISE_SD = 0.7


def annotator_scores(rng: np.random.Generator, center: np.ndarray) -> np.ndarray:
    """ANNOTATORS integer 1-5 scores per response (responses x ANNOTATORS): rint(center +
    the annotator's bias + noise) clipped to 1-5, the annotators drawn from a crowd."""
    bias = rng.normal(0, ANNOTATOR_BIAS_SD, CROWD)
    who = rng.integers(0, CROWD, (len(center), ANNOTATORS))
    raw = center[:, None] + bias[who] + rng.normal(0, ANNOTATOR_NOISE_SD, who.shape)
    return np.clip(np.rint(raw), 1, 5)


def annotate(rng: np.random.Generator, center: np.ndarray) -> np.ndarray:
    """Y per response: the mean of its annotators' scores."""
    return annotator_scores(rng, center).mean(axis=1)


# --- the synthetic scenario -----------------------------------------------------------------


@dataclass(frozen=True)
class JudgeScores:
    yhat: np.ndarray
    spread: np.ndarray | None = None  # sd of the k samples, for a judge with samples


SYNTHETIC_JUDGES = {
    "good": "rint(latent + N(0, 0.45)), 1-5",
    "biased": "rint(3 + 0.5 (latent - 3) + 0.7 + N(0, 0.45)): shifted +0.7, compressed",
    "noisy": "rint(latent + N(0, 1.4)), 1-5",
    "useless": "rint(3.6 + N(0, 1)), 1-5, independent of the latent",
    "metric 0-100": "100 / (1 + exp(-1.2 (q + N(0, 0.5)))), monotone in the latent q",
    "k=5 samples": "mean of 5 rint(latent + d + N(0, s)); d ~ N(0, 0.25), s = 0.25 e^N(0,0.9)",
}


def synthetic_population(
    rng: np.random.Generator, items: int, systems: int
) -> tuple[np.ndarray, dict[str, JudgeScores]]:
    """Y and the judges' scores for items x systems responses (response r: item r //
    systems, system r % systems). The latent quality is q = item + system + response
    effects (sd ~1) and the latent score 3.6 + q, so Y is skewed by the ceiling at 5 as real
    1-5 scores are."""
    scores, judges = synthetic_scores(rng, items, systems)
    return scores.mean(axis=1), judges


def synthetic_scores(
    rng: np.random.Generator, items: int, systems: int
) -> tuple[np.ndarray, dict[str, JudgeScores]]:
    """`synthetic_population` with each response's annotator scores instead of their mean."""
    q = (
        np.repeat(rng.normal(0, 0.7, items), systems)
        + np.tile(rng.normal(0, 0.35, systems), items)
        + rng.normal(0, 0.6, items * systems)
    )
    latent = 3.6 + q
    n = len(latent)
    scores = annotator_scores(rng, latent)

    def scale(x: np.ndarray) -> np.ndarray:
        return np.clip(np.rint(x), 1, 5)

    noise = rng.normal(0, 1, (5, n))
    samples_sd = 0.25 * np.exp(rng.normal(0, 0.9, n))
    samples = scale(latent + rng.normal(0, 0.25, n) + samples_sd * rng.normal(0, 1, (5, n)))
    judges = {
        "good": JudgeScores(scale(latent + 0.45 * noise[0])),
        "biased": JudgeScores(scale(3 + 0.5 * (latent - 3) + 0.7 + 0.45 * noise[1])),
        "noisy": JudgeScores(scale(latent + 1.4 * noise[2])),
        "useless": JudgeScores(scale(3.6 + noise[3])),
        "metric 0-100": JudgeScores(100 / (1 + np.exp(-1.2 * (q + 0.5 * noise[4])))),
        "k=5 samples": JudgeScores(samples.mean(axis=0), samples.std(axis=0, ddof=1)),
    }
    return scores, judges


# --- one replication ------------------------------------------------------------------------


@dataclass
class Outcome:
    """One interval: whether it covers the truth (None: no interval), its width, the
    people-only width on the same replication and group at the same n, the effective n and
    the responses labeled."""

    covered: bool | None
    width: float
    human_width: float
    effective_n: float
    labeled: float


Cells = dict[tuple[str, int, str], list[Outcome]]


# The active designs are those of the app's active selection (analytics.active: a campaign's
# plan decides its frame in a seeded random order, batch by batch, each batch's share of the
# budget left in proportion to its size, probabilities from `inclusion_probabilities` with
# the plan's uniform share, 20 % by default). `calibration_figures` is the app's calibration
# model (analytics.active.uncertainty.calibration) for one skill, in numpy: the app's loops
# over Python dicts take ~7 ms per batch here, too slow for a million batches;
# `check_calibration` (run by the smoke test and at the start of every run) shows both agree.

UNIFORM_SHARE = 0.2
PILOT = "active (pilot)"
BATCHES = "active (4 batches)"
SPREAD = "active (spread)"
IPW_UNIFORM = "ipw, uniform"


def _filled(values: np.ndarray) -> np.ndarray:
    """`uncertainty._filled`: figures that do not tell the responses apart mean uniform."""
    if len(values) == 0 or float(values.max() - values.min()) <= 0:
        return np.ones(len(values))
    return values


def spread_figures(spread: np.ndarray) -> np.ndarray:
    """`uncertainty.spread`'s figures: uniform when they do not tell the responses apart,
    else sqrt(m + s^2), m the batch's mean s^2 (`uncertainty._floored`)."""
    if len(spread) == 0 or float(spread.max() - spread.min()) <= 0:
        return np.ones(len(spread))
    return np.sqrt(float(np.mean(spread**2)) + spread**2)


def calibration_levels(yhat: np.ndarray) -> np.ndarray:
    """`uncertainty.level_of` over the frame: rounded 1..5 on the 1-5 scale, else by the
    frame's quintiles (`uncertainty.level_edges`)."""
    from analytics.active.uncertainty import OWN_SCALE_QUANTILES

    if np.all((yhat >= 1) & (yhat <= 5)):
        return np.clip(np.floor(yhat + 0.5), 1, 5).astype(int)
    edges = np.unique(np.quantile(yhat, OWN_SCALE_QUANTILES))
    return 1 + np.searchsorted(edges, yhat, side="right")


def calibration_figures(
    yhat: np.ndarray,
    labeled: np.ndarray,
    y: np.ndarray,
    targets: np.ndarray,
    spread: np.ndarray | None,
) -> np.ndarray:
    """The app's calibration figure of the frame responses `targets` (one skill): the root
    of the mean squared residual Y - (lambda Yhat + c) of the labeled responses at the
    target's score level, shrunk toward the mean over all levels by SHRINKAGE pseudo-labels;
    lambda Yhat + c the least-squares line of Y on Yhat, its slope clipped to [0, 1].
    Fewer than MIN_CALIBRATION_LABELS labels: the spread, else uniform."""
    from analytics.active.uncertainty import MIN_CALIBRATION_LABELS, SHRINKAGE

    n = int(labeled.sum())
    if n < MIN_CALIBRATION_LABELS:
        return spread_figures(spread[targets]) if spread is not None else np.ones(len(targets))
    y_l, v_l = y[labeled], yhat[labeled]
    var_v = float(np.mean((v_l - v_l.mean()) ** 2))
    cov = float(np.mean((y_l - y_l.mean()) * (v_l - v_l.mean())))
    slope = min(max(cov / var_v, 0.0), 1.0) if var_v > 0 else 0.0
    squared = (y_l - slope * v_l - (y_l.mean() - slope * v_l.mean())) ** 2
    overall = float(squared.mean())
    levels = calibration_levels(yhat)
    sums = np.bincount(levels[labeled], weights=squared, minlength=6)
    counts = np.bincount(levels[labeled], minlength=6)
    per_level = np.where(counts > 0, (sums + SHRINKAGE * overall) / (counts + SHRINKAGE), overall)
    return _filled(np.sqrt(per_level[levels[targets]]))


def check_calibration(seed: int = 0, cases: int = 20) -> float:
    """The largest difference between `calibration_figures` and the app's
    `analytics.active.uncertainty.calibration` on random frames (0.0 when they agree)."""
    from analytics.active import uncertainty

    worst = 0.0
    for case in range(cases):
        rng = np.random.default_rng([seed, 30, case])
        size = int(rng.integers(20, 300))
        yhat = np.clip(np.rint(rng.normal(3.5, 1.2, size)), 1, 5)
        if case % 3 == 0:
            yhat = rng.normal(3, 1.5, size)  # not on the 1-5 grid
        y = np.clip(yhat + rng.normal(0, 0.8, size), 1, 5)
        labeled = rng.random(size) < rng.uniform(0.02, 0.5)
        samples = np.clip(yhat[:, None] + rng.integers(-1, 2, (size, 3)), 1, 5)
        spread = samples.std(axis=1, ddof=1)
        targets = np.flatnonzero(~labeled)[: int(rng.integers(1, 100))]
        ours = calibration_figures(yhat, labeled, y, targets, spread)
        theirs = uncertainty.calibration(
            [{"s": float(v)} for v in yhat],
            [{"s": float(y[i])} if labeled[i] else {} for i in range(size)],
            targets.tolist(),
            samples=[{("run", "s"): list(map(float, row))} for row in samples],
        )
        worst = max(worst, float(np.abs(ours - theirs.values).max()))
    return worst


def active_design(
    rng: np.random.Generator,
    y: np.ndarray,
    judge: JudgeScores,
    n: int,
    *,
    source: str,
    sizes: Sequence[int],
) -> tuple[np.ndarray, np.ndarray]:
    """A plan with budget n over the frame, in batches deciding `sizes` responses (summing
    to the frame), as the app draws them: each response's inclusion probability (given the
    labels in before its batch) and whether it was drawn. `source` "uniform", "spread" or
    "calibration"; y is read only where drawn, batch by batch."""
    from analytics.active.uncertainty import batch_budget

    big_n = len(y)
    order = rng.permutation(big_n)
    pi = np.ones(big_n)
    drawn = np.zeros(big_n, dtype=bool)
    remaining, start = float(n), 0
    for size in sizes:
        targets = order[start : start + size]
        share = batch_budget(remaining, size, big_n - start)
        start += size
        if share <= 0:  # the budget is spent: the rest is never drawn (pi stays 1, xi 0)
            continue
        if source == "calibration":
            u = calibration_figures(judge.yhat, drawn, y, targets, judge.spread)
        elif source == "spread":
            assert judge.spread is not None
            u = spread_figures(judge.spread[targets])
        else:
            u = np.ones(size)
        p = ppi.inclusion_probabilities(u, share, uniform_share=UNIFORM_SHARE)
        pi[targets] = p
        drawn[targets] = rng.random(size) < p
        remaining -= float(p.sum())
    return pi, drawn


def design_sizes(method: str, big_n: int) -> tuple[str, list[int]]:
    """(source, batch sizes) of a method: the pilot is the frame's first quarter (uniform,
    or the spread for a judge with samples: the app's fallback before 10 labels)."""
    quarter = big_n // 4
    if method == IPW_UNIFORM:
        return "uniform", [big_n]
    if method == SPREAD:
        return "spread", [big_n]
    if method == PILOT:
        return "calibration", [quarter, big_n - quarter]
    if method == BATCHES:
        return "calibration", [quarter, quarter, quarter, big_n - 3 * quarter]
    raise ValueError(method)


METHODS = ("ppi++", IPW_UNIFORM, SPREAD, PILOT, BATCHES)


def methods_for(judge: JudgeScores) -> list[str]:
    spread = [SPREAD] if judge.spread is not None else []
    return ["ppi++", IPW_UNIFORM, *spread, PILOT, BATCHES]


def replicate(
    cells: Cells,
    y: np.ndarray,
    judges: dict[str, JudgeScores],
    sizes: Sequence[int],
    *,
    uniform_rng: np.random.Generator,
    active_rngs: dict[str, np.random.Generator],
    people: bool,
) -> None:
    """One replication of one group: every judge (of `judges`) and n; appends to `cells`.
    `uniform_rng` draws the uniform labeled subsets (shared by the judges: people label one
    subset, every judge is compared on it); `people` records the people-only outcomes."""
    big_n = len(y)
    truth = float(y.mean())
    var_y = float(y.var())
    order = uniform_rng.permutation(big_n)
    for n in sizes:
        if n >= big_n:
            continue
        labeled, unlabeled = order[:n], order[n:]
        human_width = math.nan
        for index, (name, judge) in enumerate(judges.items()):
            est = ppi.ppi_mean(y[labeled], judge.yhat[labeled], judge.yhat[unlabeled], alpha=ALPHA)
            assert est.human_only_ci_low is not None and est.human_only_ci_high is not None
            human_width = est.human_only_ci_high - est.human_only_ci_low
            if people and index == 0:
                covered = est.human_only_ci_low <= truth <= est.human_only_ci_high
                cells[(PEOPLE, n, PEOPLE)].append(
                    Outcome(covered, human_width, human_width, float(n), float(n))
                )
            cells[(name, n, "ppi++")].append(
                _outcome(est.ci_low, est.ci_high, truth, human_width, est.effective_n, n)
            )
            for method in methods_for(judge)[1:]:
                source, batch_sizes = design_sizes(method, big_n)
                pi, drawn = active_design(
                    active_rngs[name], y, judge, n, source=source, sizes=batch_sizes
                )
                act = ppi.active_mean(judge.yhat, pi, drawn, np.where(drawn, y, 0.0), alpha=ALPHA)
                eff = var_y / act.se**2 if act.se else math.nan
                cells[(name, n, method)].append(
                    _outcome(act.ci_low, act.ci_high, truth, human_width, eff, float(drawn.sum()))
                )


def _outcome(
    low: float | None, high: float | None, truth: float, human: float, eff: float | None, n: float
) -> Outcome:
    if low is None or high is None:
        return Outcome(None, math.nan, human, math.nan, n)
    return Outcome(low <= truth <= high, high - low, human, math.nan if eff is None else eff, n)


# --- summaries ------------------------------------------------------------------------------


@dataclass
class Summary:
    scenario: str
    judge: str
    n: int
    method: str
    intervals: int  # replications (x groups) with an interval
    no_interval: int  # fewer than 2 responses labeled
    coverage: float
    mcse: float  # Monte Carlo standard error of the coverage
    median_width: float
    width_ratio: float  # median of width / people-only width at the same n
    effective_n: float
    labeled: float  # mean responses labeled


def summarise(scenario: str, cells: Cells) -> list[Summary]:
    rows = []
    for (judge, n, method), outcomes in cells.items():
        done = [o for o in outcomes if o.covered is not None]
        p = float(np.mean([o.covered for o in done])) if done else math.nan
        rows.append(
            Summary(
                scenario=scenario,
                judge=judge,
                n=n,
                method=method,
                intervals=len(done),
                no_interval=len(outcomes) - len(done),
                coverage=p,
                mcse=math.sqrt(p * (1 - p) / len(done)) if done else math.nan,
                median_width=_median([o.width for o in done]),
                width_ratio=_median([o.width / o.human_width for o in done]),
                effective_n=_median([o.effective_n for o in done]),
                labeled=float(np.mean([o.labeled for o in outcomes])),
            )
        )
    order = {name: i for i, name in enumerate([PEOPLE, *SYNTHETIC_JUDGES])}
    methods = {name: i for i, name in enumerate([PEOPLE, *METHODS])}
    return sorted(rows, key=lambda r: (order.get(r.judge, 99), r.judge, r.n, methods[r.method]))


def _median(values: Iterable[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.median(finite)) if finite else math.nan


def table(rows: Sequence[Summary]) -> str:
    head = (
        f"{'judge':<18} {'n':>4}  {'method':<17} {'coverage':>15} {'width':>7} "
        f"{'ratio':>6} {'eff. n':>7} {'labeled':>7}"
    )
    lines = [head, "-" * len(head)]
    last = None
    for r in rows:
        if last is not None and (r.judge, r.n) != last:
            lines.append("")
        last = (r.judge, r.n)
        flag = " " if r.coverage >= GOAL else "*"
        missing = f" ({r.no_interval} none)" if r.no_interval else ""
        lines.append(
            f"{r.judge:<18} {r.n:>4}  {r.method:<17} "
            f"{100 * r.coverage:>6.1f} ± {100 * r.mcse:>3.1f}{flag} "
            f"{r.median_width:>7.3f} {r.width_ratio:>6.2f} {r.effective_n:>7.0f} "
            f"{r.labeled:>7.1f}{missing}"
        )
    return "\n".join(lines)


def misses(rows: Sequence[Summary]) -> list[str]:
    """Cells below the goal, and whether the miss is beyond Monte Carlo error (2 MCSE)."""
    out = []
    for r in rows:
        if r.coverage < GOAL:
            beyond = r.coverage + 2 * r.mcse < GOAL
            out.append(
                f"{r.scenario}: {r.judge}, n = {r.n}, {r.method}: {100 * r.coverage:.1f} % "
                f"({'beyond' if beyond else 'within'} 2 MCSE of {100 * GOAL:.0f} %)"
            )
    return out


# --- running a scenario in parallel ---------------------------------------------------------


def _blocks(reps: int, jobs: int) -> list[range]:
    size = max(1, math.ceil(reps / (4 * jobs)))
    return [range(start, min(reps, start + size)) for start in range(0, reps, size)]


def _merge(into: Cells, part: Cells) -> None:
    for key, outcomes in part.items():
        into[key].extend(outcomes)


def _run(task: tuple[Any, ...]) -> Cells:
    kind, *args = task
    return synthetic_block(*args) if kind == "synthetic" else flask_block(*args)


def run_tasks(tasks: list[tuple[Any, ...]], jobs: int) -> Cells:
    cells: Cells = defaultdict(list)
    if jobs <= 1:
        for task in tasks:
            _merge(cells, _run(task))
        return cells
    with mp.get_context("fork").Pool(jobs) as pool:
        for part in pool.imap_unordered(_run, tasks):
            _merge(cells, part)
    return cells


def synthetic_block(
    reps: range, judge: str, seed: int, items: int, systems: int, sizes: Sequence[int]
) -> Cells:
    """Replications `reps` of one judge. The people and judges of replication r come from
    the seed (seed, r) whoever runs it, so a judge's figures do not depend on --jobs."""
    cells: Cells = defaultdict(list)
    first = judge == next(iter(SYNTHETIC_JUDGES))
    for rep in reps:
        y, judges = synthetic_population(np.random.default_rng([seed, 0, rep]), items, systems)
        replicate(
            cells,
            y,
            {judge: judges[judge]},
            sizes,
            uniform_rng=np.random.default_rng([seed, 1, rep]),
            active_rngs={judge: np.random.default_rng([seed, 2, rep, _index(judge)])},
            people=first,
        )
    return cells


def _index(name: str) -> int:
    return sum(ord(c) * 31**i for i, c in enumerate(name)) % 2**31


def run_synthetic(
    reps: int,
    seed: int,
    *,
    jobs: int = 1,
    items: int = 200,
    systems: int = 10,
    sizes: Sequence[int] = SIZES,
    judges: Sequence[str] = tuple(SYNTHETIC_JUDGES),
) -> list[Summary]:
    tasks = [
        ("synthetic", block, judge, seed, items, systems, tuple(sizes))
        for judge in judges
        for block in _blocks(reps, jobs)
    ]
    return summarise("synthetic", run_tasks(tasks, jobs))


# --- the FLASK release ----------------------------------------------------------------------


@dataclass
class FlaskData:
    """One row per (response, skill) of the judged models' answers: what the simulated
    people are built from, and the judge server's samples."""

    models: list[str]
    skills: list[str]
    model: np.ndarray  # per row: index into models
    skill: np.ndarray  # index into skills
    item: np.ndarray  # the instance's idx
    length: np.ndarray  # min(1, words / 200) of the answer
    overlap: np.ndarray  # share of the reference's distinct words found in the answer
    difficulty: np.ndarray  # 1-5 (3 where the release has -1)
    samples: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # rows x k


_WORDS = re.compile(r"\w+")


def _model_file_text(row: dict[str, Any]) -> str | None:
    # the key names differ between the release's model files
    for key in ("text", "output", "answer", "response"):
        if isinstance(row.get(key), str):
            return row[key]
    return None


def load_flask(directory: Path, models: Sequence[str]) -> tuple[FlaskData, list[dict[str, Any]]]:
    """The rows, and the prompts' inputs (instruction, answer, reference, skills) to judge
    them; texts are read from the release at run time, never stored."""
    levels = {
        "simple lifestyle knowledge": 1,
        "advanced lifestyle knowledge": 2,
        "formal education knowledge": 3,
        "major level knowledge": 4,
        "expert level knowledge": 5,
    }
    instances = {}
    with open(directory / "flask_evaluation.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            instances[row["idx"]] = row
    skills = sorted({s for row in instances.values() for s in row["skill"]})
    rows: dict[str, list[Any]] = defaultdict(list)
    inputs = []
    for m, model in enumerate(models):
        with open(directory / "model_outputs" / f"{model}.jsonl", encoding="utf-8") as f:
            for line in f:
                answer = json.loads(line)
                text = _model_file_text(answer)
                instance = instances.get(answer.get("question_id"))
                if instance is None or text is None:
                    continue
                words = set(_WORDS.findall(text.lower()))
                reference = {w for w in _WORDS.findall(str(instance["answer"]).lower())}
                overlap = len(words & reference) / len(reference) if reference else 0.5
                inputs.append(
                    {
                        "instruction": instance["instruction"],
                        "response": text,
                        "reference": instance["answer"],
                        "skills": list(instance["skill"]),
                    }
                )
                for skill in instance["skill"]:
                    rows["model"].append(m)
                    rows["skill"].append(skills.index(skill))
                    rows["item"].append(instance["idx"])
                    rows["length"].append(min(1.0, len(text.split()) / 200))
                    rows["overlap"].append(overlap)
                    rows["difficulty"].append(levels.get(instance["difficulty"], 3))
                    rows["input"].append(len(inputs) - 1)
    data = FlaskData(
        models=list(models),
        skills=skills,
        model=np.array(rows["model"]),
        skill=np.array(rows["skill"]),
        item=np.array(rows["item"]),
        length=np.array(rows["length"], dtype=float),
        overlap=np.array(rows["overlap"], dtype=float),
        difficulty=np.array(rows["difficulty"], dtype=float),
    )
    data.samples = np.zeros((len(data.model), 0))
    for row, i in enumerate(rows["input"]):
        inputs[i].setdefault("rows", []).append(row)
    return data, inputs


def start_judge_server(length_bias: float) -> tuple[subprocess.Popen[str], str]:
    """The local judge server on 127.0.0.1 (a free port), as the other benches start it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "devtools.openai_server",
            "--port",
            "0",
            "--style",
            "json",
            "--length-bias",
            str(length_bias),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        sys.exit("the judge server did not start")
    return proc, url


def judge_flask(
    data: FlaskData, inputs: list[dict[str, Any]], *, samples: int, threads: int = 8
) -> tuple[np.ndarray, float]:
    """Every row's k samples from the judge server: the app's built-in FLASK prompt (with
    the reference answer, the project's skill wording), one request per sample with seed
    0..k-1 as the app sends a judge's samples, the replies read by the app's parser. NaN
    where a sample has no score. Returns (rows x k, seconds)."""
    from annotation.catalogue_text import SKILLS
    from judging.llm.clients import ChatRequest, JudgeError, OpenAICompatibleClient
    from judging.prompts import builtin_template, parse_judgment, render

    wording = {s.name: s for s in SKILLS}
    template = builtin_template(with_reference=True)
    proc, url = start_judge_server(FLASK_LENGTH_BIAS)
    client = OpenAICompatibleClient(guarded=False)  # a local server, as a site admin marks it
    out = np.full((len(data.model), samples), np.nan)

    def one(entry: dict[str, Any]) -> None:
        skills = [wording[name] for name in entry["skills"]]
        messages = render(
            template, entry["instruction"], entry["response"], skills, entry["reference"]
        )
        for k in range(samples):
            params = {"temperature": FLASK_TEMPERATURE, "max_tokens": 1024, "seed": k}
            try:
                reply = client.chat(ChatRequest(url, "bench-judge", messages, params, timeout=60))
            except JudgeError:
                continue  # no score: the row is left out (counted and printed)
            scores = parse_judgment(reply.content, [s.name for s in skills]).scores
            for row in entry.get("rows", []):
                value = scores.get(data.skills[data.skill[row]])
                out[row, k] = np.nan if value is None else float(value)

    started = time.perf_counter()
    try:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, inputs))
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=30)
    return out, time.perf_counter() - started


#: The simulated people's latent score of a (response, skill) on the 1-5 scale:
#: intercept + length + overlap with the reference + difficulty, plus an item effect and a
#: response effect drawn anew in each replication.
LATENT = {
    "intercept": 1.5,
    "length": 2.4,
    "overlap": 1.4,
    "difficulty": -0.15,
    "item_sd": 0.35,
    "response_sd": 0.5,
}


def flask_people(rng: np.random.Generator, data: FlaskData) -> np.ndarray:
    items, where = np.unique(data.item, return_inverse=True)
    latent = (
        LATENT["intercept"]
        + LATENT["length"] * data.length
        + LATENT["overlap"] * data.overlap
        + LATENT["difficulty"] * (data.difficulty - 3)
        + rng.normal(0, LATENT["item_sd"], len(items))[where]
        + rng.normal(0, LATENT["response_sd"], len(data.item))
    )
    return annotate(rng, latent)


def flask_judges(data: FlaskData) -> dict[str, JudgeScores]:
    samples = data.samples
    return {
        "server, 1 sample": JudgeScores(samples[:, 0]),
        f"server, mean of {samples.shape[1]}": JudgeScores(
            samples.mean(axis=1), samples.std(axis=1, ddof=1)
        ),
    }


#: Set in the parent before the pool forks, read by flask_block in the workers.
_FLASK: dict[str, Any] = {}


def flask_groups(data: FlaskData) -> list[tuple[str, np.ndarray]]:
    """The estimand's groups: each skill, all systems together."""
    return [(skill, np.flatnonzero(data.skill == s)) for s, skill in enumerate(data.skills)]


def flask_block(reps: range, judge: str, seed: int, sizes: Sequence[int]) -> Cells:
    data: FlaskData = _FLASK["data"]
    judges = flask_judges(data)
    groups = flask_groups(data)
    cells: Cells = defaultdict(list)
    first = judge == next(iter(judges))
    for rep in reps:
        y = flask_people(np.random.default_rng([seed, 10, rep]), data)
        for g, (_, rows) in enumerate(groups):
            part = judges[judge]
            sub = JudgeScores(part.yhat[rows], None if part.spread is None else part.spread[rows])
            replicate(
                cells,
                y[rows],
                {judge: sub},
                sizes,
                uniform_rng=np.random.default_rng([seed, 11, rep, g]),
                active_rngs={judge: np.random.default_rng([seed, 12, rep, g, _index(judge)])},
                people=first,
            )
    return cells


def run_flask(
    reps: int,
    seed: int,
    data: FlaskData,
    *,
    jobs: int = 1,
    sizes: Sequence[int] = SIZES,
) -> list[Summary]:
    _FLASK["data"] = data
    tasks = [
        ("flask", block, judge, seed, tuple(sizes))
        for judge in flask_judges(data)
        for block in _blocks(reps, jobs)
    ]
    return summarise("flask", run_tasks(tasks, jobs))


def flask_description(data: FlaskData, seed: int) -> list[str]:
    y = flask_people(np.random.default_rng([seed, 10, 0]), data)
    lines = [
        f"{len(data.models)} models ({', '.join(data.models)}), {len(np.unique(data.item))} "
        f"instances, {len(data.item)} (response, skill) rows; groups: "
        + ", ".join(f"{name} N={len(rows)}" for name, rows in flask_groups(data)),
        f"simulated people (replication 0): mean Y {y.mean():.2f}, sd {y.std():.2f}",
    ]
    for name, judge in flask_judges(data).items():
        r = np.corrcoef(y, judge.yhat)[0, 1]
        lines.append(f"judge {name}: mean {judge.yhat.mean():.2f}, corr with Y {r:.2f}")
    return lines


# --- the report's own rows ------------------------------------------------------------------


def report_check(
    reps: int, seed: int, *, n: int = 50, items: int = 200, systems: int = 10
) -> list[str]:
    """A few replications through the report's row builder
    (analytics.report.prediction_powered.prediction_powered) from score rows as the report
    reads them: the "good" judge on a uniform subset (method ppi++) and the "k=5 samples"
    judge on the pilot design passed as a sampling design (method active). Its
    all-systems rows must equal `ppi_mean` / `active_mean` on the same draws; the coverage of
    both is printed."""
    try:
        from analytics.report.prediction_powered import prediction_powered
    except ImportError as exc:
        return [f"the report's row builder is not available ({exc}); skipped"]
    checks = {"good": "ppi++", "k=5 samples": "active"}
    covered = {judge: [0, 0] for judge in checks}  # report, pure function
    # the report's width_ratio, and the width over a uniform people-only interval at n
    ratios: dict[str, tuple[list[float], list[float]]] = {j: ([], []) for j in checks}
    worst, seconds = 0.0, 0.0
    for rep in range(reps):
        rng = np.random.default_rng([seed, 20, rep])
        scores, judges = synthetic_scores(rng, items, systems)
        y, truth = scores.mean(axis=1), float(scores.mean(axis=1).mean())
        labeled = np.zeros(len(y), dtype=bool)
        labeled[rng.permutation(len(y))[:n]] = True
        source, sizes = design_sizes(PILOT, len(y))
        pi, drawn = active_design(rng, y, judges["k=5 samples"], n, source=source, sizes=sizes)
        people = {"good": labeled, "k=5 samples": drawn}
        for judge, method in checks.items():
            yhat = judges[judge].yhat
            human, judge_rows = _report_rows(scores, yhat, people[judge], systems, judge)
            design = {rid: (float(pi[rid]), bool(drawn[rid])) for rid in range(len(y))}
            t0 = time.perf_counter()
            found = prediction_powered(
                human, judge_rows, design=design if method == "active" else None
            )
            seconds += time.perf_counter() - t0
            row = next(r for r in found["prediction_powered"] if r["system"] is None)
            assert row["method"] == method, row
            if method == "ppi++":
                pure: Any = ppi.ppi_mean(y[labeled], yhat[labeled], yhat[~labeled], alpha=ALPHA)
                people_width = pure.human_only_ci_high - pure.human_only_ci_low
            else:
                pure = ppi.active_mean(yhat, pi, drawn, np.where(drawn, y, 0.0), alpha=ALPHA)
            worst = max(
                worst,
                abs(row["estimate"] - pure.estimate),
                abs(row["ci_low"] - pure.ci_low),
                abs(row["ci_high"] - pure.ci_high),
            )
            covered[judge][0] += row["ci_low"] <= truth <= row["ci_high"]
            covered[judge][1] += pure.ci_low <= truth <= pure.ci_high
            ratios[judge][0].append(row["width_ratio"])
            ratios[judge][1].append((row["ci_high"] - row["ci_low"]) / people_width)
    lines = [
        f"report rows ({reps} replications, n = {n}, all systems; prediction_powered "
        f"{1000 * seconds / (2 * reps):.0f} ms a call): largest difference from the pure "
        f"functions {worst:.1e}"
    ]
    for judge, method in checks.items():
        report, pure_count = covered[judge]
        own, uniform = ratios[judge]
        lines.append(
            f"  {judge} ({method}): coverage {100 * report / reps:.1f} % (the pure function on "
            f"the same draws {100 * pure_count / reps:.1f} %); median width_ratio in the row "
            f"{_median(own):.2f}, width over a uniform people-only interval at n "
            f"{_median(uniform):.2f}"
        )
    return lines


def _report_rows(
    scores: np.ndarray, yhat: np.ndarray, labeled: np.ndarray, systems: int, judge: str
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(human rows, judge rows) as analytics.rows.Row tuples, one skill "s": every response
    scored by the judge, the labeled ones with their annotators' scores."""
    human, judge_rows = [], []
    for rid in range(len(yhat)):
        item, system = rid // systems, f"m{rid % systems:02d}"
        judge_rows.append((rid, item, system, "s", judge, float(yhat[rid])))
        if labeled[rid]:
            for a, value in enumerate(scores[rid]):
                human.append((rid, item, system, "s", f"r{a}", float(value)))
    return human, judge_rows


# --- command line ---------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000, help="replications (default 1000)")
    parser.add_argument(
        "--scenario",
        choices=("synthetic", "flask", "report", "all"),
        default="all",
        help="report: only the check of the report's rows (run by synthetic and all too)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument(
        "--flask-models",
        default="5",
        choices=("1", "2", "3", "4", "5", "all"),
        help=f"the first K of {', '.join(FLASK_MODELS)} (default 5), or all 15 models",
    )
    parser.add_argument(
        "--judge-cache", type=Path, help="read the FLASK judge scores from, or write them to, FILE"
    )
    parser.add_argument("--report-reps", type=int, default=100, help="replications of the check")
    parser.add_argument("--json", type=Path, help="also write the figures to FILE")
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    started = time.perf_counter()
    results: dict[str, Any] = {"reps": args.reps, "seed": args.seed, "scenarios": {}}
    every: list[Summary] = []
    if args.scenario in ("synthetic", "all"):
        t0 = time.perf_counter()
        rows = run_synthetic(args.reps, args.seed, jobs=args.jobs)
        seconds = time.perf_counter() - t0
        print(f"== synthetic: 200 items x 10 systems = 2,000 responses, {args.reps} replications")
        gap = check_calibration()
        print(f"   (calibration model against the app's: largest difference {gap:.1e})")
        for name, text in SYNTHETIC_JUDGES.items():
            print(f"   {name}: {text}")
        print(table(rows))
        print(f"synthetic: {seconds:.1f} s\n", flush=True)
        every += rows
        results["scenarios"]["synthetic"] = {"seconds": seconds, "rows": [asdict(r) for r in rows]}
    if args.scenario in ("synthetic", "report", "all"):
        check = report_check(args.report_reps, args.seed)
        print("\n".join(check) + "\n", flush=True)
        results["report_check"] = check
    if args.scenario in ("flask", "all"):
        if not FLASK_DIR.is_dir():
            print(f"== flask: skipped, {FLASK_DIR} is absent\n")
        else:
            every += _flask_scenario(args, results)
    below = misses(every)
    print("cells below the goal (coverage >= 94 %):" if below else "every cell meets the goal")
    for line in below:
        print(f"  {line}")
    total = time.perf_counter() - started
    print(f"elapsed: {total:.1f} s (--jobs {args.jobs})")
    if args.json:
        results["elapsed"] = total
        args.json.write_text(json.dumps(results, indent=1))
    return 0


def _flask_scenario(args: argparse.Namespace, results: dict[str, Any]) -> list[Summary]:
    if args.flask_models == "all":
        models = sorted(p.stem for p in (FLASK_DIR / "model_outputs").glob("*.jsonl"))
    else:
        models = list(FLASK_MODELS[: int(args.flask_models)])
    data, inputs = load_flask(FLASK_DIR, models)
    cache = args.judge_cache
    key = {"models": models, "samples": FLASK_SAMPLES, "temperature": FLASK_TEMPERATURE}
    key["length_bias"] = FLASK_LENGTH_BIAS
    if cache and cache.exists() and json.loads(cache.read_text()).get("key") == key:
        data.samples = np.array(json.loads(cache.read_text())["samples"], dtype=float)
        print(f"(judge scores read from {cache})")
        judged = 0.0
    else:
        data.samples, judged = judge_flask(data, inputs, samples=FLASK_SAMPLES)
        calls = len(inputs) * FLASK_SAMPLES
        print(
            f"(judged {len(inputs)} answers x {FLASK_SAMPLES} samples: {calls} requests in "
            f"{judged:.0f} s, {calls / judged:.0f}/s)"
        )
        if cache:
            cache.write_text(json.dumps({"key": key, "samples": data.samples.tolist()}))
    keep = np.all(np.isfinite(data.samples), axis=1)
    if not keep.all():
        print(f"({int((~keep).sum())} rows without a score left out)")
        _subset(data, keep)
    t0 = time.perf_counter()
    rows = run_flask(args.reps, args.seed, data, jobs=args.jobs)
    seconds = time.perf_counter() - t0
    print(f"== flask: {args.reps} replications")
    for line in flask_description(data, args.seed):
        print(f"   {line}")
    print(table(rows))
    print(f"flask: {seconds:.1f} s\n", flush=True)
    results["scenarios"]["flask"] = {
        "seconds": seconds,
        "judge_seconds": judged,
        "models": models,
        "rows": [asdict(r) for r in rows],
    }
    return rows


def _subset(data: FlaskData, keep: np.ndarray) -> None:
    for name in ("model", "skill", "item", "length", "overlap", "difficulty", "samples"):
        setattr(data, name, getattr(data, name)[keep])


if __name__ == "__main__":
    sys.exit(main())
