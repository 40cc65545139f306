"""Bias probes' figures (docs/JUDGE_TRUST.md, "Bias probes"): pure, from what
judging.selectors.probe_data reads and the report's human and judge rows.

Per judge:
- per probe run: the *effect*, mean(probe score - base score) over the (response, skill)
  pairs both runs scored, overall and per skill, for a pointwise probe; the *flip rate*,
  the share of (pair, order) whose Overall verdict differs from the base run's, for a
  pairwise probe; with n, the run's cost and the texts the probe used;
- *length*: the partial correlation of the judge's score with the response's length
  (characters), controlling for the people's mean score, over (response, skill) pairs:
  r_xy.z = (r_xy - r_xz r_yz) / sqrt((1 - r_xz^2)(1 - r_yz^2));
- *self-preference*: mean(judge - people) over the (response, skill) pairs of systems of
  the judge's own family, minus the same over every other system's pairs.

Every interval is a percentile bootstrap over items (a resample draws the items with
replacement, each with all its rows), at analytics.bootstrap.CONFIDENCE, with a fixed seed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from analytics.bootstrap import CONFIDENCE, Interval, IntervalDict, interval_flags
from analytics.report import small_samples
from analytics.rows import Row

Stat = Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]
#: A statistic given the rows' item indices and the number of items: a Stat of the item
#: counts of resamples (resamples x items: how often each item was drawn).
MakeStat = Callable[[npt.NDArray[np.intp], int], Stat]
#: Resamples drawn at once (rows of item counts).
CHUNK = 256
SEED = 20230717


def item_interval(
    items: Sequence[int],
    estimate: float | None,
    make_stat: MakeStat,
    resamples: int,
    seed: int = SEED,
) -> IntervalDict:
    """The percentile bootstrap interval of a statistic over items. `items` gives each
    row's item; `make_stat` builds, from the rows' item indices, the statistic of a chunk of
    resamples' item counts (NaN where undefined). Statistics are sums over rows, so they
    are computed from per-item sums: memory grows with items, not rows."""
    if estimate is None or not np.isfinite(estimate) or not len(items):
        return Interval(None, None, None, 0).as_dict()
    _, index = np.unique(np.asarray(items), return_inverse=True)
    n_items = int(index.max()) + 1
    stat = make_stat(index, n_items)
    rng = np.random.default_rng(seed)
    values = []
    done = 0
    while done < resamples:
        take = min(CHUNK, resamples - done)
        drawn = rng.integers(0, n_items, size=(take, n_items))
        drawn += (np.arange(take) * n_items)[:, None]
        counts = np.bincount(drawn.ravel(), minlength=take * n_items).reshape(take, n_items)
        with np.errstate(invalid="ignore", divide="ignore"):
            values.append(stat(counts.astype(np.float64)))
        done += take
    found = np.concatenate(values) if values else np.zeros(0)
    found = found[np.isfinite(found)]
    if not found.size:
        return Interval(float(estimate), None, None, 0, n_items).as_dict()
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = (float(v) for v in np.percentile(found, [tail, 100 - tail]))
    flags = interval_flags(float(estimate), low, high, n_items)
    return Interval(float(estimate), low, high, int(found.size), n_items, flags).as_dict()


def _sums(
    index: npt.NDArray[np.intp], n_items: int, values: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    return np.bincount(index, weights=values, minlength=n_items).astype(np.float64)


def mean_interval(items: Sequence[int], values: Sequence[float], resamples: int) -> IntervalDict:
    """The mean of `values` (one per row), its interval over items."""
    x = np.asarray(values, dtype=np.float64)
    estimate = float(x.mean()) if x.size else None

    def make(index: npt.NDArray[np.intp], n_items: int) -> Stat:
        total, n = _sums(index, n_items, x), _sums(index, n_items, np.ones_like(x))
        return lambda c: (c @ total) / (c @ n)

    return item_interval(items, estimate, make, resamples)


def partial_correlation(x: npt.ArrayLike, y: npt.ArrayLike, z: npt.ArrayLike) -> float | None:
    """r_xy.z, the correlation of x and y with z held constant (None when undefined)."""
    xs = np.asarray(x, dtype=np.float64)
    index = np.arange(len(xs))
    stat = _partial(xs, np.asarray(y, dtype=np.float64), np.asarray(z, dtype=np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        value = float(stat(index, len(xs))(np.ones((1, len(xs))))[0])
    return value if np.isfinite(value) else None


def _partial(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], z: npt.NDArray[np.float64]
) -> MakeStat:
    """r_xy.z = (r_xy - r_xz r_yz) / sqrt((1 - r_xz^2)(1 - r_yz^2)), from weighted moments."""

    def make(index: npt.NDArray[np.intp], n_items: int) -> Stat:
        columns = {"1": np.ones_like(x), "x": x, "y": y, "z": z}
        columns.update(xx=x * x, yy=y * y, zz=z * z, xy=x * y, xz=x * z, yz=y * z)
        item = {name: _sums(index, n_items, v) for name, v in columns.items()}

        def stat(c: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
            m = {name: (c @ v) for name, v in item.items()}
            n = m["1"]

            def cov(a: str, b: str) -> npt.NDArray[np.float64]:
                found: npt.NDArray[np.float64] = m[a + b] / n - (m[a] / n) * (m[b] / n)
                return found

            vx, vy, vz = cov("x", "x"), cov("y", "y"), cov("z", "z")
            rxy = cov("x", "y") / np.sqrt(vx * vy)
            rxz = cov("x", "z") / np.sqrt(vx * vz)
            ryz = cov("y", "z") / np.sqrt(vy * vz)
            result: npt.NDArray[np.float64] = (rxy - rxz * ryz) / np.sqrt(
                (1 - rxz**2) * (1 - ryz**2)
            )
            return result

        return stat

    return make


def _group_difference(d: npt.NDArray[np.float64], own: npt.NDArray[np.float64]) -> MakeStat:
    """mean(d | own) - mean(d | not own)."""

    def make(index: npt.NDArray[np.intp], n_items: int) -> Stat:
        other = 1.0 - own
        sums = [_sums(index, n_items, v) for v in (d * own, own, d * other, other)]
        return lambda c: (c @ sums[0]) / (c @ sums[1]) - (c @ sums[2]) / (c @ sums[3])

    return make


# --- inputs --------------------------------------------------------------------------------------


def _human_means(human: Iterable[Row]) -> dict[tuple[int, str], tuple[int, str, float]]:
    """(response, skill) -> (item, system, the people's mean score), N/A left out."""
    sums: dict[tuple[int, str], list[Any]] = {}
    for response_id, item_id, system, skill, _rater, value in human:
        if value is None:
            continue
        acc = sums.setdefault((response_id, skill), [item_id, system, 0.0, 0])
        acc[2] += value
        acc[3] += 1
    return {key: (a[0], a[1], a[2] / a[3]) for key, a in sums.items()}


def _judge_values(judge: Iterable[Row]) -> dict[str, dict[tuple[int, str], float]]:
    by_judge: dict[str, dict[tuple[int, str], float]] = defaultdict(dict)
    for response_id, _item, _system, skill, rater, value in judge:
        if value is not None:
            by_judge[rater][(response_id, skill)] = float(value)
    return by_judge


# --- figures -------------------------------------------------------------------------------------


def run_figures(run: Any, resamples: int) -> dict[str, Any]:
    """One probe run's figures (JSON-ready)."""
    out: dict[str, Any] = {
        "run_id": run.run_id,
        "probe": run.probe,
        "label": run.label,
        "base_run_id": run.base_run_id,
        "params": run.params,
        "texts": run.texts,
        "cost": run.cost,
        "base_cost": run.base_cost,
        "pairwise": run.pairwise,
    }
    if run.pairwise:
        keys = sorted(set(run.base_verdicts) & set(run.probe_verdicts))
        flips = [float(run.base_verdicts[k] != run.probe_verdicts[k]) for k in keys]
        items = [run.items[k[0]] for k in keys]
        out.update(
            n=len(keys),
            responses=len({k[0] for k in keys}),
            items=len(set(items)),
            flip_rate=mean_interval(items, flips, resamples),
        )
        return out
    keys = sorted(set(run.base_scores) & set(run.probe_scores))
    diffs = [run.probe_scores[k] - run.base_scores[k] for k in keys]
    items = [run.items[k[0]] for k in keys]
    skills: dict[str, dict[str, Any]] = {}
    for skill in sorted({k[1] for k in keys}):
        mine = [i for i, k in enumerate(keys) if k[1] == skill]
        skills[skill] = {
            **mean_interval([items[i] for i in mine], [diffs[i] for i in mine], resamples),
            "n": len(mine),
        }
    out.update(
        n=len(keys),
        responses=len({k[0] for k in keys}),
        items=len(set(items)),
        effect=mean_interval(items, diffs, resamples),
        skills=skills,
    )
    return out


def length_figure(
    scores: dict[tuple[int, str], float],
    human: dict[tuple[int, str], tuple[int, str, float]],
    lengths: dict[int, int],
    resamples: int,
) -> dict[str, Any] | None:
    """The partial correlation of the judge's score with length, people's score held."""
    keys = sorted(k for k in scores if k in human and k[0] in lengths)
    if len(keys) < 4:
        return None
    x = np.array([scores[k] for k in keys])
    y = np.array([float(lengths[k[0]]) for k in keys])
    z = np.array([human[k][2] for k in keys])
    items = [human[k][0] for k in keys]
    stat = _partial(x, y, z)
    estimate = partial_correlation(x, y, z)
    return {
        "partial_r": item_interval(items, estimate, stat, resamples),
        "n": len(keys),
        "items": len(set(items)),
    }


def self_preference_figure(
    scores: dict[tuple[int, str], float],
    human: dict[tuple[int, str], tuple[int, str, float]],
    families: dict[str, str],
    family: str,
    resamples: int,
) -> dict[str, Any] | None:
    """mean(judge - people) on the judge's own family's responses minus on the others."""
    if not family:
        return None
    keys = sorted(k for k in scores if k in human)
    own = np.array([float(families.get(human[k][1]) == family) for k in keys])
    if not keys or own.sum() == 0 or own.sum() == len(keys):
        return {
            "family": family,
            "difference": None,
            "own": int(own.sum()),
            "other": int(len(keys) - own.sum()),
        }
    d = np.array([scores[k] - human[k][2] for k in keys])
    items = [human[k][0] for k in keys]
    estimate = float(d[own == 1].mean() - d[own == 0].mean())
    return {
        "family": family,
        "own_systems": sorted({human[k][1] for k, o in zip(keys, own, strict=True) if o}),
        "difference": item_interval(items, estimate, _group_difference(d, own), resamples),
        "own": int(own.sum()),
        "other": int(len(keys) - own.sum()),
    }


def probe_figures(
    data: Any, *, human: Sequence[Row], judge: Sequence[Row], resamples: int
) -> dict[str, Any]:
    """judge name -> that judge's probe figures (JSON-ready): {"runs": [...], "length":
    ..., "self_preference": ..., "family": ...}; judges with nothing to show are left out."""
    if data is None:
        return {}
    people = _human_means(human)
    values = _judge_values(judge)
    names = sorted(set(values) | {run.judge for run in data.runs})
    out: dict[str, Any] = {}
    for name in names:
        scores = values.get(name, {})
        family = data.judge_families.get(name, "")
        figures = {
            "family": family,
            "runs": [run_figures(run, resamples) for run in data.runs if run.judge == name],
            "length": length_figure(scores, people, data.lengths, resamples),
            "self_preference": self_preference_figure(
                scores, people, data.families, family, resamples
            ),
        }
        if figures["runs"] or figures["length"] or figures["self_preference"]:
            out[name] = small_samples.flag_probes(figures)
    return out
