"""Judge configurations compared (docs/JUDGE_COMPARISON.md): chosen judges side by side on
the responses they scored, from report rows (analytics.rows) and each judge's setup. Pure:
numpy/scipy, no Django.

As in the report (analytics.report.build), units are responses: a response's human
consensus on a skill is the mean of its human scores (N/A left out; `human_means`), a
judge's value is the mean of its samples, and a correlation is the report's instance-level
one (`metrics.correlate`: Pearson, Spearman or Kendall's tau-b).

- **Paired correlation differences.** Per skill and pair of judges (each judge against the
  baseline, or every two), both judges' correlation with the people on the responses BOTH
  scored and their difference, with an item-resampling interval: the report's Resampler
  (analytics.bootstrap) draws the items (instructions) once, and the two correlations are
  computed on the same resample (`paired_difference_of`), so the interval is that of the
  difference itself. Two separate intervals that overlap are not a test of it.
- **Cost against quality.** Cost per 1,000 judgments (the recorded cost of the runs the
  scores come from over their judgments) against the mean correlation over skills (or one
  skill) on the responses every chosen judge scored; the Pareto-optimal judges (no other
  judge is as cheap and as good, and better on one). No recorded cost: "no cost".
- **System ranking agreement.** Per judge and skill, Kendall's tau-b (scipy.stats.kendalltau)
  between the systems' mean judge scores and their mean human scores on the judge's
  responses, with an item-resampling interval (report.resampled.system_level_register).
- **Configuration differences.** Each judge's model, provider, base URL (no credentials),
  temperature, k samples and prompt version, and a unified diff (difflib) of its prompt
  against the reference judge's (the baseline, else the first chosen).

Every figure carries its n and, below analytics.minimums' floor for its kind, a `too_few`
reason; intervals carry their flags (analytics.bootstrap.interval_flags).
"""

from __future__ import annotations

import difflib
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

from analytics import bootstrap, metrics, minimums
from analytics.report import resampled, wide_tables
from analytics.report.build import HumanMean, group_means, human_means
from analytics.rows import Row

Json = dict[str, Any]

MEASURES = ("pearson", "spearman", "kendall")
MEASURE_LABELS = {"pearson": "Pearson r", "spearman": "Spearman ρ", "kendall": "Kendall τ-b"}
#: At most this many judges at once: the resampling grows with the judges (and without a
#: baseline the pairs grow with their square).
MAX_JUDGES = 12
#: The resamples' seed: the report's (a page and the API give the same intervals).
SEED = 0
#: The configuration fields shown side by side (and compared with the reference's).
SETUP_FIELDS = ("kind", "model", "provider", "base_url", "temperature", "samples", "prompt")


@dataclass(frozen=True)
class Setup:
    """What a judge is, as the comparison shows it: `kind` is llm, baseline or imported
    (blank for a rater of imported scores that is no judge of the project); `prompt` names
    the template version ("key v3"), `prompt_text` is its system prompt and user template;
    `cost` the recorded cost of the runs its scores come from (None: none recorded) over
    `judgments` judgments."""

    name: str
    kind: str = ""
    model: str = ""
    provider: str = ""
    base_url: str = ""
    temperature: float | None = None
    samples: int | None = None
    prompt: str = ""
    prompt_text: str = ""
    cost: float | None = None
    judgments: int = 0


def _number(value: float | None) -> float | None:
    """A finite float, or None (NaN and infinities are not JSON)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _measure(c: metrics.Correlation, measure: str) -> float | None:
    value: float | None = getattr(c, measure)
    return _number(value)


# --- the paired difference of two judges' correlations -----------------------------------------


def _resampled(h: ArrayLike, j: ArrayLike, measure: str) -> bool:
    """Whether the report's resampling gives `measure` an interval: Kendall's tau-b only
    on a joint table of at most MAX_TAU_CELLS cells (not a judge's raw continuous values)."""
    return measure != "kendall" or not wide_tables.is_wide(h, j)


class _Resamples:
    """The report's way (analytics.report.build): one Resampler per set of items, so every
    statistic on the same items is computed on the same resamples; a judge's correlation on
    a set of responses is registered once, however many pairs read it."""

    def __init__(self, resamples: int, seed: int = SEED) -> None:
        self.resamples = resamples
        self.seed = seed
        self._by_items: dict[bytes, bootstrap.Resampler] = {}
        self._instances: dict[tuple[str, str, tuple[int, ...], str], Json] = {}
        self._points: dict[tuple[str, str, tuple[int, ...]], metrics.Correlation] = {}

    def point(
        self, key: tuple[str, str, tuple[int, ...]], h: ArrayLike, j: ArrayLike
    ) -> metrics.Correlation:
        """`metrics.correlate(h, j)` of a judge on the responses of `key`, computed once."""
        found = self._points.get(key)
        if found is None:
            found = self._points[key] = metrics.correlate(h, j)
        return found

    def resampler(self, items: ArrayLike) -> bootstrap.Resampler:
        keys = np.unique(np.asarray(items))
        found = self._by_items.get(keys.tobytes())
        if found is None:
            found = bootstrap.Resampler(keys, resamples=self.resamples, seed=self.seed)
            self._by_items[keys.tobytes()] = found
        return found

    def instance(
        self,
        key: tuple[str, str, tuple[int, ...]],
        h: npt.NDArray[np.float64],
        j: npt.NDArray[np.float64],
        items: npt.NDArray[np.int64],
        measure: str,
    ) -> tuple[bootstrap.Resampler, Json]:
        """The resampler and the sink of a judge's instance-level correlation on the
        responses of `key` (judge, skill, response ids), with `measure`'s resampled values
        kept; registered on first use."""
        rs = self.resampler(items)
        sink = self._instances.get((*key, measure))
        if sink is None:
            sink = self._instances[(*key, measure)] = {}
            register = (
                wide_tables.instance_cells_register
                if wide_tables.is_wide(h, j)
                else resampled.instance_register
            )
            register(rs, h, j, items, sink=sink, key="ci", agreement=False)
            if _resampled(h, j, measure):
                rs.keep_values(sink, measure)
        return rs, sink

    def run(self) -> None:
        for rs in self._by_items.values():
            rs.run()


def _no_interval(estimate: float | None, items: int) -> bootstrap.PairedDifference:
    return {
        **bootstrap.Interval(estimate, None, None, 0, items).as_dict(),
        "p_value_a_not_better": None,
    }


def paired_difference(
    human: ArrayLike,
    judge_a: ArrayLike,
    judge_b: ArrayLike,
    items: ArrayLike,
    *,
    measure: str = "pearson",
    resamples: int = 1000,
    seed: int = SEED,
) -> bootstrap.PairedDifference:
    """corr(human, A) - corr(human, B) on paired responses, with the interval of the
    difference over the same item resamples for both (one Resampler, as the comparison
    draws them) and the share of resamples where it is <= 0."""
    h = np.asarray(human, dtype=np.float64)
    a = np.asarray(judge_a, dtype=np.float64)
    b = np.asarray(judge_b, dtype=np.float64)
    it = np.asarray(items)
    ca, cb = metrics.correlate(h, a), metrics.correlate(h, b)
    ea, eb = _measure(ca, measure), _measure(cb, measure)
    estimate = None if ea is None or eb is None else ea - eb
    n_items = int(np.unique(it).size)
    if not resamples or h.size < 2 or not (_resampled(h, a, measure) and _resampled(h, b, measure)):
        return _no_interval(estimate, n_items)
    plan = _Resamples(resamples, seed)
    key = tuple(range(h.size))
    rs, sink_a = plan.instance(("a", "", key), h, a, it, measure)
    _, sink_b = plan.instance(("b", "", key), h, b, it, measure)
    plan.run()
    return bootstrap.paired_difference_of(
        ea, eb, rs.kept_values(sink_a, measure), rs.kept_values(sink_b, measure), n_items
    )


def unpaired_difference(
    human: ArrayLike,
    judge_a: ArrayLike,
    judge_b: ArrayLike,
    items: ArrayLike,
    *,
    measure: str = "pearson",
    resamples: int = 1000,
    seed: int = SEED,
) -> bootstrap.PairedDifference:
    """What two separate intervals amount to: corr(human, A) - corr(human, B) with each
    judge's correlation resampled on its own (independent item draws). Wider than the
    paired interval whenever the two judges' errors go together, which is why the
    comparison never reads a difference off two separate intervals."""
    h = np.asarray(human, dtype=np.float64)
    it = np.asarray(items)
    values: list[npt.NDArray[np.float64]] = []
    estimates: list[float | None] = []
    for k, judge in enumerate((judge_a, judge_b)):
        j = np.asarray(judge, dtype=np.float64)
        estimates.append(_measure(metrics.correlate(h, j), measure))
        plan = _Resamples(resamples, seed + k)
        rs, sink = plan.instance((str(k), "", tuple(range(h.size))), h, j, it, measure)
        plan.run()
        values.append(rs.kept_values(sink, measure))
    return bootstrap.paired_difference_of(
        estimates[0], estimates[1], values[0], values[1], int(np.unique(it).size)
    )


# --- the comparison --------------------------------------------------------------------------


@dataclass
class _Skill:
    """One skill's human consensus and each chosen judge's values on it."""

    humans: dict[int, HumanMean]
    scored: dict[str, dict[int, float]]

    def shared(self, judges: Sequence[str]) -> list[int]:
        """The responses with a human consensus that every one of `judges` scored."""
        found = set(self.humans)
        for judge in judges:
            found &= set(self.scored.get(judge, {}))
        return sorted(found)

    def arrays(
        self, shared: Sequence[int], judges: Sequence[str]
    ) -> tuple[npt.NDArray[np.float64], list[npt.NDArray[np.float64]], npt.NDArray[np.int64]]:
        h = np.array([self.humans[r][2] for r in shared], dtype=np.float64)
        js = [
            np.array([self.scored[judge][r] for r in shared], dtype=np.float64) for judge in judges
        ]
        items = np.array([self.humans[r][0] for r in shared], dtype=np.int64)
        return h, js, items


def _skills(
    human: Sequence[Row], judge_rows: Sequence[Row], judges: Sequence[str]
) -> dict[str, _Skill]:
    by_skill: dict[str, list[Row]] = defaultdict(list)
    for row in human:
        by_skill[row[3]].append(row)
    scored: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    wanted = set(judges)
    for rid, _item, _system, skill, rater, value in judge_rows:
        if rater in wanted and value is not None:
            scored[skill][rater][rid] = float(value)
    return {
        skill: _Skill(human_means(by_skill[skill]), dict(scored[skill]))
        for skill in sorted(set(by_skill) & set(scored))
    }


def judge_pairs(judges: Sequence[str], baseline: str | None) -> list[tuple[str, str]]:
    """(A, B) pairs compared: each other judge against the baseline (A - baseline), or
    every two judges in the order chosen."""
    if baseline:
        return [(judge, baseline) for judge in judges if judge != baseline]
    return list(combinations(judges, 2))


def compare_judges(
    human: Sequence[Row],
    judge_rows: Sequence[Row],
    *,
    judges: Sequence[str],
    baseline: str | None = None,
    measure: str = "pearson",
    resamples: int = 1000,
    quality_skill: str | None = None,
    setups: Mapping[str, Setup] | None = None,
    seed: int = SEED,
) -> Json:
    """Every figure of the comparison of `judges` (two or more, by name) as one JSON-ready
    dict: "pairs", "quality" (with cost and the Pareto set), "ranking" and "configs" (see
    the module docstring and docs/JUDGE_COMPARISON.md for each key). `baseline`: one of
    `judges`, or None to compare every two. `quality_skill`: the skill the quality axis
    reads (None: the mean over skills). Raises ValueError for arguments that make no
    comparison (the page and the API check them first, with their own messages)."""
    judges = list(dict.fromkeys(judges))
    if len(judges) < 2:
        raise ValueError("at least two judges are compared")
    if baseline is not None and baseline not in judges:
        raise ValueError("the baseline is one of the chosen judges")
    if measure not in MEASURES:
        raise ValueError(f"measure is one of {', '.join(MEASURES)}")
    skills = _skills(human, judge_rows, judges)
    plan = _Resamples(resamples, seed)
    pending_pairs = [
        _pair_plan(plan, skill, data, a, b, measure)
        for skill, data in skills.items()
        for a, b in judge_pairs(judges, baseline)
    ]
    pending_ranks = [
        _ranking_plan(plan, skill, data, judge)
        for judge in judges
        for skill, data in skills.items()
        if data.scored.get(judge)
    ]
    if resamples:
        plan.run()
    setups = setups or {}
    quality = quality_rows(skills, judges, measure, quality_skill, setups)
    reference = baseline or judges[0]
    return {
        "judges": judges,
        "baseline": baseline,
        "reference": reference,
        "measure": measure,
        "resamples": resamples,
        "skills": list(skills),
        "quality_skill": quality_skill,
        "pairs": [finish() for finish in pending_pairs],
        "quality": quality,
        "ranking": [finish() for finish in pending_ranks],
        "configs": config_rows(judges, reference, setups),
    }


def _interval_of(sink: Json, measure: str) -> Json | None:
    found = (sink.get("ci") or {}).get(measure)
    return dict(found) if found else None


def _pair_plan(plan: _Resamples, skill: str, data: _Skill, a: str, b: str, measure: str) -> Any:
    """Register the pair's two correlations (before the resamples are drawn) and return
    the function that reads the pair's figures after."""
    shared = data.shared([a, b])
    h, (ja, jb), items = data.arrays(shared, [a, b])
    n_items = int(np.unique(items).size)
    key = tuple(shared)
    ea = _measure(plan.point((a, skill, key), h, ja), measure) if shared else None
    eb = _measure(plan.point((b, skill, key), h, jb), measure) if shared else None
    sinks: tuple[Json, Json] | None = None
    rs: bootstrap.Resampler | None = None
    resampleable = _resampled(h, ja, measure) and _resampled(h, jb, measure)
    if plan.resamples and len(shared) >= 2 and resampleable:
        rs, sink_a = plan.instance((a, skill, key), h, ja, items, measure)
        _, sink_b = plan.instance((b, skill, key), h, jb, items, measure)
        sinks = (sink_a, sink_b)

    def finish() -> Json:
        estimate = None if ea is None or eb is None else ea - eb
        difference: Json
        a_ci = b_ci = None
        if sinks is not None and rs is not None:
            difference = dict(
                bootstrap.paired_difference_of(
                    ea,
                    eb,
                    rs.kept_values(sinks[0], measure),
                    rs.kept_values(sinks[1], measure),
                    n_items,
                )
            )
            a_ci, b_ci = _interval_of(sinks[0], measure), _interval_of(sinks[1], measure)
        else:
            difference = dict(_no_interval(estimate, n_items))
        why = ""
        if plan.resamples and shared and not resampleable:
            why = "Kendall's τ-b is not resampled on a judge's raw (continuous) values"
        return {
            "skill": skill,
            "a": a,
            "b": b,
            "n": len(shared),
            "items": n_items,
            "a_value": ea,
            "b_value": eb,
            "a_ci": _clean(a_ci),
            "b_ci": _clean(b_ci),
            "difference": _clean(difference),
            "too_few": minimums.too_few("correlation", len(shared))
            if len(shared) < minimums.minimum("correlation").n
            else "",
            "note": why or bootstrap.interval_note(difference),
        }

    return finish


def _clean(value: Json | None) -> Json | None:
    if value is None:
        return None
    return {k: (_number(v) if isinstance(v, float) else v) for k, v in value.items()}


def _ranks(values: Mapping[str, float]) -> dict[str, int]:
    """1 = highest; equal values share the best rank (as the report's leaderboard)."""
    return {s: 1 + sum(1 for w in values.values() if w > v) for s, v in values.items()}


def _kendall(x: Sequence[float], y: Sequence[float]) -> float | None:
    """scipy.stats.kendalltau (tau-b); None when undefined."""
    # scipy is imported where used: at module top it added ~0.5 s of CPU to every process start
    from scipy import stats

    if len(x) < 2:
        return None
    return _number(float(stats.kendalltau(x, y).statistic))


def _ranking_plan(plan: _Resamples, skill: str, data: _Skill, judge: str) -> Any:
    shared = data.shared([judge])
    scored = data.scored[judge]
    system_of = [data.humans[r][1] for r in shared]
    human_by = group_means(
        system_of, [data.humans[r][3] for r in shared], [data.humans[r][4] for r in shared]
    )
    judge_by = group_means(system_of, [scored[r] for r in shared])
    systems = sorted(human_by)
    tau = _kendall([human_by[s] for s in systems], [judge_by[s] for s in systems])
    sink: Json = {}
    items = np.array([data.humans[r][0] for r in shared], dtype=np.int64)
    if plan.resamples and tau is not None:
        resampled.system_level_register(
            plan.resampler(items),
            items,
            system_of,
            [data.humans[r][3] for r in shared],
            [data.humans[r][4] for r in shared],
            np.array([scored[r] for r in shared], dtype=np.float64),
            sink=sink,
            key="ci",
        )

    def finish() -> Json:
        found = (sink.get("ci") or {}).get("kendall")
        n_items = int(np.unique(items).size)
        ci: Json | None = None
        if found and found.get("low") is not None:
            low, high = found["low"], found["high"]
            flags = bootstrap.interval_flags(tau, low, high, n_items)
            ci = {
                "estimate": tau,
                "low": low,
                "high": high,
                "resamples": found["resamples"],
                "items": n_items,
                "flags": list(flags),
            }
        human_rank, judge_rank = _ranks(human_by), _ranks(judge_by)
        return {
            "judge": judge,
            "skill": skill,
            "n_systems": len(systems),
            "n": len(shared),
            "items": n_items,
            "kendall": tau,
            "ci": _clean(ci),
            "too_few": minimums.too_few("ranking", len(systems))
            if len(systems) < minimums.minimum("ranking").n
            else "",
            "note": bootstrap.interval_note(ci),
            "systems": [
                {
                    "system": s,
                    "human_mean": human_by[s],
                    "judge_mean": judge_by[s],
                    "human_rank": human_rank[s],
                    "judge_rank": judge_rank[s],
                }
                for s in sorted(systems, key=lambda s: (human_rank[s], s))
            ],
        }

    return finish


# --- cost against quality ----------------------------------------------------------------------


def cost_per_1000(setup: Setup | None) -> float | None:
    """1,000 x the recorded cost over the judgments made; None for no cost recorded (an
    imported judge, a rater of imported scores, a judge without a finished run)."""
    if setup is None or setup.cost is None or setup.judgments <= 0 or setup.kind == "imported":
        return None
    return 1000.0 * setup.cost / setup.judgments


def quality_rows(
    skills: Mapping[str, _Skill],
    judges: Sequence[str],
    measure: str,
    quality_skill: str | None,
    setups: Mapping[str, Setup],
) -> list[Json]:
    """Per judge: its correlation with the people per skill on the responses EVERY chosen
    judge scored (so the judges are compared on the same responses), the quality (the mean
    over the skills with enough responses, or `quality_skill`'s), cost per 1,000 judgments
    and whether it is Pareto-optimal."""
    per_skill: dict[str, dict[str, Json]] = {judge: {} for judge in judges}
    for skill, data in skills.items():
        shared = data.shared(judges)
        h, js, _items = data.arrays(shared, judges)
        found = (
            metrics.correlate_many(h, np.vstack(js))
            if shared
            else [metrics.Correlation(0, None, None, None, None, None, None) for _ in judges]
        )
        too_few = (
            minimums.too_few("correlation", len(shared))
            if len(shared) < minimums.minimum("correlation").n
            else ""
        )
        for judge, c in zip(judges, found, strict=True):
            per_skill[judge][skill] = {"value": _measure(c, measure), "n": len(shared)}
            if too_few:
                per_skill[judge][skill]["too_few"] = too_few
    rows: list[Json] = []
    for judge in judges:
        counted = [
            figure["value"]
            for skill, figure in per_skill[judge].items()
            if figure["value"] is not None
            and not figure.get("too_few")
            and (quality_skill is None or skill == quality_skill)
        ]
        quality = float(np.mean(counted)) if counted else None
        setup = setups.get(judge)
        per_1000 = cost_per_1000(setup)
        rows.append(
            {
                "judge": judge,
                "quality": quality,
                "skills_counted": len(counted),
                "per_skill": per_skill[judge],
                "too_few": ""
                if counted
                else "too few: no skill with at least "
                f"{minimums.minimum('correlation').n} responses every chosen judge scored",
                "cost": None if per_1000 is None or setup is None else setup.cost,
                "judgments": setup.judgments if setup is not None else 0,
                "per_1000": per_1000,
                "no_cost": per_1000 is None,
            }
        )
    front = pareto_front({row["judge"]: (row["per_1000"], row["quality"]) for row in rows})
    for row in rows:
        row["pareto"] = row["judge"] in front
    return rows


def pareto_front(points: Mapping[str, tuple[float | None, float | None]]) -> set[str]:
    """The names whose (cost, quality) no other point dominates: none is at most as costly
    and at least as good, and strictly one or the other. Points missing either are out."""
    known = {k: (c, q) for k, (c, q) in points.items() if c is not None and q is not None}
    front = set()
    for name, (cost, quality) in known.items():
        dominated = any(
            oc <= cost and oq >= quality and (oc < cost or oq > quality)
            for other, (oc, oq) in known.items()
            if other != name
        )
        if not dominated:
            front.add(name)
    return front


#: The Pareto chart's frame (SVG user units).
CHART_WIDTH, CHART_HEIGHT, CHART_LEFT, CHART_PAD = 560, 300, 56, 28


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / ticks
    power = 10.0 ** math.floor(math.log10(raw))
    return float(next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw))


def pareto_chart(rows: Sequence[Json]) -> Json | None:
    """Coordinates of the cost (x, per 1,000 judgments) against quality (y) chart: one point
    per judge with both, the optimal ones marked and joined by the frontier's steps; None
    when no judge has both."""
    points = [r for r in rows if r.get("per_1000") is not None and r.get("quality") is not None]
    if not points:
        return None
    w, h, left, pad = CHART_WIDTH, CHART_HEIGHT, CHART_LEFT, CHART_PAD
    most = float(max(r["per_1000"] for r in points))
    if most <= 0:  # every judge free (baselines, cached runs): an axis of 0 to 1, not 1e-10
        x_step, x_high = 0.2, 1.0
    else:
        x_step = _nice_step(most * 1.05)
        x_high = x_step * math.ceil(most * 1.05 / x_step)
    qs = [float(r["quality"]) for r in points]
    y_low = max(-1.0, math.floor(min(qs) * 10 - 1) / 10)
    y_high = min(1.0, math.ceil(max(qs) * 10 + 1) / 10)
    if y_high - y_low < 0.2:
        y_low, y_high = max(-1.0, y_low - 0.1), min(1.0, y_high + 0.1)

    def x(v: float) -> float:
        return round(left + v / x_high * (w - left - pad), 1)

    def y(v: float) -> float:
        return round(h - pad - (v - y_low) / (y_high - y_low) * (h - 2 * pad), 1)

    front = sorted(
        (r for r in points if r.get("pareto")), key=lambda r: (r["per_1000"], -r["quality"])
    )
    steps: list[str] = []
    for k, r in enumerate(front):
        if k:
            steps.append(f"{x(r['per_1000'])},{y(front[k - 1]['quality'])}")
        steps.append(f"{x(r['per_1000'])},{y(r['quality'])}")
    y_step = _nice_step(y_high - y_low)
    first = math.ceil(y_low / y_step - 1e-9)
    yticks = []
    k = first
    while k * y_step <= y_high + 1e-9:
        yticks.append({"y": y(k * y_step), "label": f"{k * y_step:.2f}"})
        k += 1
    xticks = []
    k = 0
    while k * x_step <= x_high + 1e-12:
        xticks.append({"x": x(k * x_step), "label": f"{k * x_step:g}"})
        k += 1
    return {
        "width": w,
        "height": h,
        "left": left,
        "right": w - pad,
        "top": pad,
        "bottom": h - pad,
        "points": [
            {
                "judge": r["judge"],
                "x": x(r["per_1000"]),
                "y": y(r["quality"]),
                "pareto": bool(r.get("pareto")),
                "per_1000": r["per_1000"],
                "quality": r["quality"],
            }
            for r in points
        ],
        "frontier": " ".join(steps),
        "xticks": xticks,
        "yticks": yticks,
    }


# --- configuration differences -----------------------------------------------------------------


def public_url(url: str) -> str:
    """A base URL without credentials: user and password, query and fragment left out
    (a key is never in a judge's URL by design; this keeps it so if one was typed there)."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def prompt_diff(reference: str, other: str, *, reference_name: str, other_name: str) -> list[Json]:
    """The unified diff (difflib, 3 lines of context) of two prompts, one dict per line:
    {"kind": "head" | "hunk" | "del" | "add" | "same", "text"}; [] when they are equal."""
    lines = difflib.unified_diff(
        reference.splitlines(),
        other.splitlines(),
        fromfile=reference_name,
        tofile=other_name,
        lineterm="",
    )
    out: list[Json] = []
    for k, line in enumerate(lines):
        if k < 2:
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("-"):
            kind = "del"
        elif line.startswith("+"):
            kind = "add"
        else:
            kind = "same"
        out.append({"kind": kind, "text": line})
    return out


def config_rows(judges: Sequence[str], reference: str, setups: Mapping[str, Setup]) -> list[Json]:
    """Per judge its setup (`SETUP_FIELDS`, the base URL without credentials), the fields
    that differ from the reference judge's, and its prompt's diff against the reference's
    (None for the reference itself, [] for the same prompt)."""
    shown = {
        judge: {
            **{k: v for k, v in asdict(setups.get(judge) or Setup(judge)).items()},
            "base_url": public_url((setups.get(judge) or Setup(judge)).base_url),
        }
        for judge in judges
    }
    ref = shown[reference]
    rows = []
    for judge in judges:
        setup = shown[judge]
        rows.append(
            {
                "judge": judge,
                "reference": judge == reference,
                "known": judge in setups,
                **{name: setup[name] for name in SETUP_FIELDS},
                "differs": [
                    name for name in SETUP_FIELDS if judge != reference and setup[name] != ref[name]
                ],
                "prompt_diff": None
                if judge == reference
                else prompt_diff(
                    ref["prompt_text"],
                    setup["prompt_text"],
                    reference_name=f"{reference}: {ref['prompt'] or 'no prompt'}",
                    other_name=f"{judge}: {setup['prompt'] or 'no prompt'}",
                ),
            }
        )
    return rows
