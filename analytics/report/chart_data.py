"""What the analytics dashboard draws and tabulates, from a report (analytics.report, as
`project_report` returns it) and the rows it was computed from (ReportRows).

Pure functions, no Django: JSON-ready dicts and lists. The report's dicts are keyed by
names people chose (skills, judges, systems); templates look keys up as attributes, so a
skill called "items" would shadow dict.items. Everything a template iterates is therefore
turned into lists here, in the report's order.

- `report_tables`: agreement, correlation, judge comparison and leaderboard tables;
- `headline`: what the dashboard opens with: per judge and skill its correlation with the
  people at one level and measure, with intervals, beside the human ceiling, and the judges
  ranked;
- `dashboard_charts`: radar per system, bars per domain and per difficulty
  (static/js/analytics_charts.js draws them with Chart.js);
- `heatmaps`: human mean x judge score counts, rendered as an HTML table;
- `filter_options`: the values the filter form offers;
- `prediction_powered_skills`: one judge's prediction-powered estimates per skill, with the
  interval plot's coordinates (SVG drawn by the template), paired differences and ranks.

Means follow the report: a response's human score is the mean of its human scores (N/A
left out), and a group's mean is the exact mean of those means (analytics.report).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TypedDict

from analytics import minimums
from analytics.bootstrap import interval_note
from analytics.report.build import HumanMean, Json, Total, human_means, mean_of_means
from analytics.rows import ReportRows, Row

HUMANS = "Humans"
NONE = "(none)"
ALPHA_LEVELS = ("nominal", "ordinal", "interval", "ratio")
ICC_FORMS = ("ICC1", "ICC1k", "ICC2", "ICC2k", "ICC3", "ICC3k")
KAPPA_WEIGHTS = ("unweighted", "linear", "quadratic")
LEVELS = ("instance", "item", "system")
MEASURES = ("pearson", "spearman", "kendall")
#: Heat map cells are shaded in this many steps (CSS classes heat-0 ... heat-10).
HEAT_STEPS = 10
#: A heat map axis longer than this (a 0-100 scale in half steps) is not drawn.
MAX_BINS = 41


class ScaleHint(TypedDict, total=False):
    """Suggested axis bounds (empty: let Chart.js choose)."""

    min: int
    max: int


class Dataset(TypedDict):
    """One Chart.js dataset: a value per label, None where there is none."""

    label: str
    data: list[float | None]


class HeadlineJudge(TypedDict):
    """One judge of the headline: its correlation per skill (None where undefined), the
    interval of each ([low, high]; None without one, or when it cannot be read as shown:
    `notes` says why), each figure's n and, below its minimum, why it is too few
    (docs/SMALL_SAMPLES.md), the mean of the figures that are neither undefined nor too few
    and its rank (None: no such figure)."""

    label: str
    data: list[float | None]
    errors: list[list[float] | None]
    n: list[int | None]
    too_few: list[str]
    notes: list[str]
    mean: float | None
    skills: int
    rank: int | None


class RadarChart(TypedDict):
    kind: str  # "radar", or "bar" with fewer than three skills
    title: str
    labels: list[str]
    datasets: list[Dataset]
    scale: ScaleHint
    drawn: bool  # whether it has a value to draw (not when every mean is too few)


class FacetRow(TypedDict):
    """One group's row of a facet chart's table: the responses with a human score (`n`),
    each dataset's mean, its own count and, below the minimum of a stratum, why it is too
    few (that value is left out of the chart)."""

    label: str
    n: int
    values: list[float | None]
    counts: list[int]
    too_few: list[str]


class FacetChart(TypedDict):
    kind: str
    facet: str
    title: str
    labels: list[str]
    n: list[int]
    datasets: list[Dataset]
    scale: ScaleHint
    rows: list[FacetRow]
    drawn: bool  # whether it has a value to draw (not when every mean is too few)


class Headline(TypedDict):
    level: str
    measure: str
    labels: list[str]  # the skills
    judges: list[HeadlineJudge]  # best ranked first
    ceiling: list[float | None] | None  # the human ceiling per skill; None: none at all
    ceiling_errors: list[list[float] | None] | None
    ceiling_n: list[int | None] | None  # the responses each ceiling is computed on
    ceiling_too_few: list[str] | None
    ceiling_notes: list[str] | None


class DashboardCharts(TypedDict):
    radar: list[RadarChart]
    domain: list[FacetChart]
    difficulty: list[FacetChart]


class HeatCell(TypedDict):
    judge: float
    count: int
    level: int
    agree: bool


class HeatRow(TypedDict):
    human: float
    cells: list[HeatCell]


class Heatmap(TypedDict):
    judge: str
    skill: str
    n: int
    max: int
    judge_bins: list[float]
    rows: list[HeatRow]


def judge_names(report: Json) -> list[str]:
    """Every judge with scores in the report (the report keys each one in `correlation`)."""
    return sorted(report.get("correlation", {}))


def report_skills(report: Json) -> list[str]:
    """Skills in the report's order: those with a leaderboard (human or judge scores)."""
    skills = list(report.get("leaderboard", {}))
    return skills + [s for s in report.get("agreement", {}) if s not in skills]


# --- tables ---------------------------------------------------------------------------------


def _too_few(figures: Json, name: str) -> str:
    """Why figure `name` of a dict of the report's figures is too few ("" when it is not,
    or when the report predates the flags): analytics.report.small_samples."""
    return str((figures.get("too_few") or {}).get(name) or "")


def report_tables(report: Json) -> Json:
    """The report as lists for the dashboard's tables (values as in the report; each
    figure's interval beside it where the report has one, else None)."""
    judges = judge_names(report)
    agreement = [
        {
            **figures,
            "skill": skill,
            "alpha": [
                {
                    "level": level,
                    "value": (figures.get("krippendorff_alpha") or {}).get(level),
                    "ci": (figures.get("krippendorff_alpha_ci") or {}).get(level),
                    "too_few": _too_few(figures, "krippendorff_alpha"),
                }
                for level in ALPHA_LEVELS
            ],
            "icc_forms": [
                {
                    "form": form,
                    "value": (figures.get("icc") or {}).get(form),
                    "ci": (figures.get("icc_ci") or {}).get(form),
                    "too_few": _too_few(figures, "icc"),
                }
                for form in ICC_FORMS
            ],
            "cohen": [
                {
                    "weights": weights,
                    "value": figures["cohen_kappa"].get(weights),
                    "ci": (figures.get("cohen_kappa_ci") or {}).get(weights),
                    "too_few": _too_few(figures, "cohen_kappa"),
                }
                for weights in KAPPA_WEIGHTS
            ]
            if figures.get("cohen_kappa")
            else None,
        }
        for skill, figures in report.get("agreement", {}).items()
    ]
    correlation = [
        {
            "judge": judge,
            "skills": [
                {
                    "skill": skill,
                    "levels": [
                        {"level": level, **levels[level], "ci": levels[level].get("ci") or {}}
                        for level in LEVELS
                        if level in levels
                    ],
                }
                for skill, levels in report["correlation"][judge].items()
            ],
        }
        for judge in judges
    ]
    comparison = [
        {"skill": skill, "pair": pair, **figures}
        for skill, pairs in (report.get("judge_comparison") or {}).items()
        for pair, figures in pairs.items()
    ]
    leaderboards = []
    for skill, rows in report.get("leaderboard", {}).items():
        raters = [j for j in judges if any(j in row.get("judges", {}) for row in rows)]
        leaderboards.append(
            {
                "skill": skill,
                "judges": raters,
                "rows": [
                    {
                        "system": row["system"],
                        "n": row["n"],
                        "scores": [
                            {
                                "mean": row.get("humans"),
                                "rank": row.get("humans_rank"),
                                "n": row.get("n"),
                                "too_few": _too_few(row, "humans"),
                            },
                            *(
                                {**standing, "too_few": _too_few(standing, "mean")}
                                for standing in (
                                    row.get("judges", {}).get(name, {}) for name in raters
                                )
                            ),
                        ],
                    }
                    for row in rows
                ],
            }
        )
    return {
        "judges": judges,
        "agreement": agreement,
        "correlation": correlation,
        "comparison": comparison,
        "leaderboards": leaderboards,
    }


# --- charts ---------------------------------------------------------------------------------


def dashboard_charts(report: Json, rows: ReportRows) -> DashboardCharts:
    """Everything the dashboard's canvases draw, in one JSON-ready dict."""
    skills, judges = report_skills(report), judge_names(report)
    return {
        "radar": radar_charts(report, off_scale=rows.off_scale),
        "domain": facet_bars(rows, "domain", skills=skills, judges=judges),
        "difficulty": facet_bars(rows, "difficulty", skills=skills, judges=judges),
    }


def _scale_hint(datasets: Sequence[Dataset]) -> ScaleHint:
    """Suggested axis bounds: the 1-5 scale when every value is on it, else the data's."""
    values = [v for d in datasets for v in d["data"] if v is not None]
    if values and min(values) >= 1 and max(values) <= 5:
        return {"min": 1, "max": 5}
    return {}


def radar_charts(report: Json, *, off_scale: Iterable[tuple[str, str]] = ()) -> list[RadarChart]:
    """One chart per system: the mean score per skill of the humans and of each judge, from
    the leaderboards. A radar needs three axes; with fewer skills it is a bar chart. A judge's
    values on its own scale (off_scale) are left out: they do not share the axis; so are
    means on too few responses (the leaderboards' `too_few`; the tables show them greyed)."""
    leaderboard = report.get("leaderboard", {})
    skills = list(leaderboard)
    raw = set(off_scale)
    judges = judge_names(report)
    systems = sorted({row["system"] for rows in leaderboard.values() for row in rows})
    charts: list[RadarChart] = []
    for system in systems:
        by_skill: dict[str, Json] = {
            skill: next((row for row in rows if row["system"] == system), {})
            for skill, rows in leaderboard.items()
        }
        datasets: list[Dataset] = []
        humans = [
            None if _too_few(by_skill[skill], "humans") else by_skill[skill].get("humans")
            for skill in skills
        ]
        if any(v is not None for v in humans):
            datasets.append({"label": HUMANS, "data": humans})
        for name in judges:
            standings = [by_skill[skill].get("judges", {}).get(name, {}) for skill in skills]
            data = [
                None if (name, skill) in raw or _too_few(standing, "mean") else standing.get("mean")
                for skill, standing in zip(skills, standings, strict=True)
            ]
            if any(v is not None for v in data):
                datasets.append({"label": name, "data": data})
        charts.append(
            {
                "kind": "radar" if len(skills) >= 3 else "bar",
                "title": system,
                "labels": skills,
                "datasets": datasets,
                "scale": _scale_hint(datasets),
                "drawn": _drawn(datasets),
            }
        )
    return charts


def _drawn(datasets: Sequence[Dataset]) -> bool:
    return any(v is not None for d in datasets for v in d["data"])


def _facet_keys(facets: Mapping[int, Json], item_id: int, facet: str) -> list[str]:
    """The facet values an item counts under, as the report's breakdowns key them."""
    found = facets.get(item_id, {})
    if facet == "domain":
        return list(found.get("domains") or [NONE])
    level = found.get("difficulty")
    return [str(level) if level else NONE]


def _facet_order(values: Iterable[str]) -> list[str]:
    """Names (and levels "1"-"5") in order, "(none)" last."""
    return sorted(values, key=lambda v: (v == NONE, v.zfill(8) if v.isdigit() else v))


def facet_bars(
    rows: ReportRows, facet: str, *, skills: Sequence[str], judges: Sequence[str]
) -> list[FacetChart]:
    """Per skill, one bar chart: for each domain (facet="domain") or difficulty level
    ("difficulty"), the mean human score and each judge's mean score over the responses of
    that group (FLASK's per-domain and per-difficulty views). An item with several domains
    counts in each. `n` counts the responses with a human score per group; a mean on fewer
    responses than a stratum needs (analytics.minimums) is left out of the chart, and its
    row of the table says why."""
    human_by_skill: dict[str, list[Row]] = defaultdict(list)
    for row in rows.human:
        human_by_skill[row[3]].append(row)
    judge_values: dict[tuple[str, str], dict[str, list[tuple[float, int]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for _rid, item_id, _system, skill, judge, value in rows.judge:
        if value is not None and (judge, skill) not in rows.off_scale:
            for key in _facet_keys(rows.facets, item_id, facet):
                judge_values[(judge, skill)][key].append((value, 1))
    charts: list[FacetChart] = []
    for skill in skills:
        human_parts: dict[str, list[tuple[Total, int]]] = defaultdict(list)
        for item_id, _system, _mean, total, count in human_means(human_by_skill[skill]).values():
            for key in _facet_keys(rows.facets, item_id, facet):
                human_parts[key].append((total, count))
        keys = set(human_parts)
        for judge in judges:
            keys |= set(judge_values.get((judge, skill), {}))
        if not keys:
            continue
        labels = _facet_order(keys)
        means: list[tuple[str, list[float | None], list[int]]] = []
        if human_parts:
            means.append(
                (
                    HUMANS,
                    [mean_of_means(human_parts[k]) for k in labels],
                    [len(human_parts[k]) for k in labels],
                )
            )
        for judge in judges:
            parts = judge_values.get((judge, skill))
            if parts:
                means.append(
                    (
                        judge,
                        [mean_of_means(parts[k]) for k in labels],
                        [len(parts[k]) for k in labels],
                    )
                )
        # a group's mean on too few responses is left out of the chart; its table says why
        too_few = [[minimums.too_few("stratum", c) for c in counts] for _, _, counts in means]
        datasets: list[Dataset] = [
            {"label": label, "data": [None if few else v for v, few in zip(data, why, strict=True)]}
            for (label, data, _), why in zip(means, too_few, strict=True)
        ]
        n = [len(human_parts[k]) for k in labels]
        charts.append(
            {
                "kind": "bar",
                "facet": facet,
                "title": skill,
                "labels": labels,
                "n": n,
                "datasets": datasets,
                "scale": _scale_hint(datasets),
                "drawn": _drawn(datasets),
                # the same numbers by row, for the table under the chart
                "rows": [
                    {
                        "label": k,
                        "n": n[i],
                        "values": [data[i] for _, data, _ in means],
                        "counts": [counts[i] for _, _, counts in means],
                        "too_few": [why[i] for why in too_few],
                    }
                    for i, k in enumerate(labels)
                ],
            }
        )
    return charts


def _interval(ci: Json | None) -> list[float] | None:
    """[low, high] of a report interval, None where the report has none (or it is
    undefined), or where it cannot be read as shown (its `flags`: `interval_note`)."""
    ci = ci or {}
    low, high = ci.get("low"), ci.get("high")
    return None if low is None or high is None or ci.get("flags") else [low, high]


def _rank(value: float | None, values: Iterable[float | None]) -> int | None:
    """1 + how many values are larger: equal values share a rank, as in the leaderboards."""
    return None if value is None else 1 + sum(1 for v in values if v is not None and v > value)


def headline(report: Json, level: str = "instance", measure: str = "pearson") -> Headline:
    """Per judge and skill, its `level` (instance, item or system) `measure` (pearson,
    spearman or kendall) correlation with the people, with its 95 % bootstrap interval where
    the report has one, beside the leave-one-out human ceiling per skill (with its interval;
    None for Kendall, which the ceiling is not computed in); the judges ranked.

    A judge's `mean` is the mean of its correlations over the skills where it is defined
    and not too few (docs/SMALL_SAMPLES.md; `skills` says how many); judges are ranked by
    it, best first, equal means sharing a rank, then by name; a judge with no such
    correlation comes last without a rank."""
    if level not in LEVELS or measure not in MEASURES:
        raise ValueError(f"no headline for level {level!r} and measure {measure!r}")
    correlation = report.get("correlation", {})
    names = judge_names(report)
    skills = [s for s in report_skills(report) if any(s in correlation[j] for j in names)]
    rows: list[HeadlineJudge] = []
    for judge in names:
        data: list[float | None] = []
        errors: list[list[float] | None] = []
        sizes: list[int | None] = []
        few: list[str] = []
        notes: list[str] = []
        for skill in skills:
            figures = correlation[judge].get(skill, {}).get(level, {})
            ci = (figures.get("ci") or {}).get(measure)
            data.append(figures.get(measure))
            errors.append(_interval(ci))
            sizes.append(figures.get("n"))
            few.append(_too_few(figures, measure))
            notes.append(interval_note(ci))
        defined = [v for v, why in zip(data, few, strict=True) if v is not None and not why]
        rows.append(
            {
                "label": judge,
                "data": data,
                "errors": errors,
                "n": sizes,
                "too_few": few,
                "notes": notes,
                "mean": math.fsum(defined) / len(defined) if defined else None,
                "skills": len(defined),
                "rank": None,
            }
        )
    means = [row["mean"] for row in rows]
    for row in rows:
        row["rank"] = _rank(row["mean"], means)
    rows.sort(key=lambda r: (r["rank"] is None, r["rank"] or 0, r["label"]))
    agreement = [report.get("agreement", {}).get(s) or {} for s in skills]
    ceiling = [(a.get("loo_ceiling") or {}).get(measure) for a in agreement]
    ceiling_cis = [(a.get("loo_ceiling_ci") or {}).get(measure) for a in agreement]
    has_ceiling = any(v is not None for v in ceiling)
    return {
        "level": level,
        "measure": measure,
        "labels": skills,
        "judges": rows,
        "ceiling": ceiling if has_ceiling else None,
        "ceiling_errors": [_interval(ci) for ci in ceiling_cis] if has_ceiling else None,
        "ceiling_n": [(a.get("loo_ceiling") or {}).get("units") for a in agreement]
        if has_ceiling
        else None,
        "ceiling_too_few": [_too_few(a, "loo_ceiling") for a in agreement] if has_ceiling else None,
        "ceiling_notes": [interval_note(ci) for ci in ceiling_cis] if has_ceiling else None,
    }


def headlines(report: Json) -> dict[str, dict[str, Headline]]:
    """`headline` for every level and measure: level -> measure -> headline."""
    return {level: {m: headline(report, level, m) for m in MEASURES} for level in LEVELS}


# --- heat maps ------------------------------------------------------------------------------


def half_step(value: float) -> float:
    """To the nearest 0.5, halves rounded up (4.25 -> 4.5, 1.75 -> 2.0)."""
    return math.floor(value * 2 + 0.5) / 2


def _bins(values: Iterable[float]) -> list[float]:
    values = list(values)
    low, high = min(values), max(values)
    return [low + i / 2 for i in range(int(round((high - low) * 2)) + 1)]


def heatmaps(rows: ReportRows, *, skills: Sequence[str], judges: Sequence[str]) -> list[Heatmap]:
    """Per judge and skill: how many responses have each (human mean, judge score) pair,
    both rounded to the nearest 0.5, on the responses both sides scored. Rows run from the
    highest human score down, columns from the lowest judge score up; `agree` marks the
    diagonal and `level` (0-10) shades a cell by its count relative to the largest. Judges
    on their own scale (off_scale) and axes longer than MAX_BINS are left out."""
    human_by_skill: dict[str, list[Row]] = defaultdict(list)
    for row in rows.human:
        human_by_skill[row[3]].append(row)
    judge_scores: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)
    for rid, _item, _system, skill, judge, value in rows.judge:
        if value is not None:
            judge_scores[(judge, skill)][rid] = value
    maps: list[Heatmap] = []
    means_of: dict[str, dict[int, HumanMean]] = {}  # per skill, once for every judge
    for judge in judges:
        for skill in skills:
            if (judge, skill) in rows.off_scale:
                continue
            if skill not in means_of:
                means_of[skill] = human_means(human_by_skill[skill])
            means = means_of[skill]
            scored = judge_scores.get((judge, skill), {})
            raw = [(means[r][2], v) for r, v in scored.items() if r in means]
            pairs = [(half_step(h), half_step(v)) for h, v in raw]
            if not pairs:
                continue
            human_bins = _bins(h for h, _ in pairs)[::-1]
            judge_bins = _bins(j for _, j in pairs)
            if max(len(human_bins), len(judge_bins)) > MAX_BINS:
                continue
            counts: dict[tuple[float, float], int] = defaultdict(int)
            for pair in pairs:
                counts[pair] += 1
            top = max(counts.values())
            maps.append(
                {
                    "judge": judge,
                    "skill": skill,
                    "n": len(pairs),
                    "max": top,
                    "judge_bins": judge_bins,
                    "rows": [
                        {
                            "human": h,
                            "cells": [
                                {
                                    "judge": j,
                                    "count": counts.get((h, j), 0),
                                    "level": math.ceil(HEAT_STEPS * counts.get((h, j), 0) / top),
                                    "agree": h == j,
                                }
                                for j in judge_bins
                            ],
                        }
                        for h in human_bins
                    ],
                }
            )
    return maps


# --- filters --------------------------------------------------------------------------------


def filter_options(rows: ReportRows) -> dict[str, list[str] | list[int]]:
    """The values present in the rows, for the filter form: skills, judges, systems, domains
    (of the scored items) and difficulty levels."""
    scored = [*rows.human, *rows.judge]
    item_ids = {row[1] for row in scored}
    facets = [rows.facets.get(i, {}) for i in item_ids]
    return {
        "skill": sorted({row[3] for row in scored}),
        "judge": sorted({row[4] for row in rows.judge}),
        "system": sorted({row[2] for row in scored}),
        "domain": sorted({d for f in facets for d in f.get("domains") or []}),
        "difficulty": sorted({f["difficulty"] for f in facets if f.get("difficulty")}),
    }


# --- prediction-powered estimates -------------------------------------------------------------

#: What the pages call a row without a system (every system together).
ALL_SYSTEMS = "All systems"
#: A row whose responses went to people by active selection (analytics.ppi.active_mean).
ACTIVE_METHOD = "active selection (inverse-probability weighted)"
#: The interval plot (SVG user units): one SVG per system of the same width and x scale
#: beside its name, the prediction-powered interval above the people-only one.
PPI_WIDTH, PPI_ROW_HEIGHT, PPI_PAD = 480, 26, 14
PPI_Y, HUMAN_Y = 8.0, 18.0


def _ppi_row(row: Json) -> Json:
    """A row of the report's `prediction_powered` as a page shows it: the stored figures,
    its label, whether its figures are shown (not too few, defined) and the judge's bias
    (its own mean minus what people would say)."""
    too_few = str(row.get("too_few") or "")
    estimate, judge_mean = row.get("estimate"), row.get("judge_mean")
    shown = not too_few and estimate is not None
    low, high = row.get("ci_low"), row.get("ci_high")
    bias = judge_mean - estimate if shown and judge_mean is not None else None
    return {
        **row,
        "label": ALL_SYSTEMS if row.get("system") is None else str(row["system"]),
        "all": row.get("system") is None,
        "active": row.get("method") == "active",
        "method_label": ACTIVE_METHOD if row.get("method") == "active" else "PPI++",
        "too_few": too_few,
        "shown": shown,
        "interval_shown": shown and low is not None and high is not None,
        "human_shown": not too_few and row.get("human_only_estimate") is not None,
        "bias": bias,
        "bias_abs": abs(bias) if bias is not None else None,
        # the judge's own mean outside the interval of what people would say: a bias the
        # data show, not noise
        "bias_outside": bias is not None
        and low is not None
        and high is not None
        and not low <= judge_mean <= high,
    }


def _ppi_difference(diff: Json) -> Json:
    """A paired difference (system A - system B) as a page shows it; `clear`: which system
    scores higher when the interval excludes 0 ("a" or "b"), else ""."""
    too_few = str(diff.get("too_few") or "")
    low, high = diff.get("ci_low"), diff.get("ci_high")
    shown = not too_few and diff.get("estimate") is not None
    clear = ""
    if shown and low is not None and high is not None:
        clear = "a" if low > 0 else "b" if high < 0 else ""
    return {
        **diff,
        "too_few": too_few,
        "shown": shown,
        "interval_shown": shown and low is not None and high is not None,
        "human_shown": not too_few and diff.get("human_only_estimate") is not None,
        "clear": clear,
    }


def _ppi_ranks(entry: Json, too_few: Mapping[str, str]) -> Json:
    """A skill's ranking: systems by rank, each with its rank interval, the probability of
    each rank ({"rank", "p"}, from 1) and, when its estimate rests on too few labeled
    responses, why (`too_few`: system -> reason; its rank stays, for reference); the
    systems left out (no estimate) and which differences the report holds ("all" pairs, or
    "adjacent": neighbours in the estimated order)."""
    systems = [
        {
            **s,
            "probabilities": [
                {"rank": k, "p": p} for k, p in enumerate(s.get("rank_probabilities") or [], 1)
            ],
            "p_first": (s.get("rank_probabilities") or [None])[0],
            "too_few": too_few.get(str(s["system"]), ""),
        }
        for s in entry.get("systems") or []
    ]
    systems.sort(key=lambda s: (s.get("rank") is None, s.get("rank") or 0, str(s["system"])))
    return {
        "n_draws": entry.get("n_draws"),
        "systems": systems,
        "left_out": [str(name) for name in entry.get("left_out") or []],
        "differences": entry.get("differences") or "all",
    }


def _tick_step(span: float) -> float:
    """A round step (1, 2, 2.5 or 5 times a power of ten) giving about five ticks."""
    raw = span / 5 if span > 0 else 1.0
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1.0, 2.0, 2.5, 5.0, 10.0) if raw <= m * magnitude)


def prediction_powered_plot(rows: Sequence[Json]) -> Json | None:
    """Coordinates of a skill's interval plot: per row (`_ppi_row`) an SVG of the same width
    and x scale, the prediction-powered estimate and interval at PPI_Y above the people-only
    ones at HUMAN_Y; a row too few (or undefined) draws nothing and says why beside it.
    The x axis spans every estimate and interval drawn. None when nothing is drawn."""
    values: list[float] = []
    for row in rows:
        if row["shown"]:
            values += [v for v in (row["estimate"], row["ci_low"], row["ci_high"]) if v is not None]
        if row["human_shown"]:
            values += [
                v
                for v in (
                    row["human_only_estimate"],
                    row.get("human_only_ci_low"),
                    row.get("human_only_ci_high"),
                )
                if v is not None
            ]
    if not values:
        return None
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    lo, hi = lo - 0.05 * span, hi + 0.05 * span
    left, right = PPI_PAD, PPI_WIDTH - PPI_PAD

    def x(v: float) -> float:
        return round(left + (v - lo) / (hi - lo) * (right - left), 1)

    def bar(estimate: float | None, low: float | None, high: float | None) -> Json | None:
        if estimate is None:
            return None
        whisker = low is not None and high is not None
        return {
            "x": x(estimate),
            "low": x(low) if whisker and low is not None else None,
            "high": x(high) if whisker and high is not None else None,
        }

    step = _tick_step(hi - lo)
    ticks = [i * step for i in range(math.ceil(lo / step), math.floor(hi / step) + 1)]
    return {
        "width": PPI_WIDTH,
        "height": PPI_ROW_HEIGHT,
        "ppi_y": PPI_Y,
        "human_y": HUMAN_Y,
        "left": left,
        "right": right,
        "rows": [
            {
                "label": row["label"],
                "all": row["all"],
                "too_few": row["too_few"],
                "estimate": row["estimate"] if row["shown"] else None,
                "ppi": bar(row["estimate"], row["ci_low"], row["ci_high"])
                if row["shown"]
                else None,
                "human": bar(
                    row["human_only_estimate"],
                    row.get("human_only_ci_low"),
                    row.get("human_only_ci_high"),
                )
                if row["human_shown"]
                else None,
            }
            for row in rows
        ],
        "ticks": [{"x": x(t), "label": f"{round(t, 6):g}"} for t in ticks],
    }


def prediction_powered_skills(stored: Json | None) -> list[Json]:
    """One judge's prediction-powered figures (a `prediction_powered.N` part: {"judge",
    "rows", "differences", "ranks"}, each as the report holds them) laid out per skill, in
    the rows' order: {"skill", "rows" (all systems first, then each system in the report's
    order; `_ppi_row`), "plot" (`prediction_powered_plot`), "differences" (those whose
    interval excludes 0 first; `_ppi_difference`), "clear" (how many), "ranks"
    (`_ppi_ranks`, None without), "active" (whether a row used active selection)}."""
    stored = stored or {}
    skills: dict[str, Json] = {}

    def of(skill: str) -> Json:
        return skills.setdefault(
            skill, {"skill": skill, "rows": [], "differences": [], "ranks": None}
        )

    for row in stored.get("rows") or []:
        of(str(row["skill"]))["rows"].append(_ppi_row(row))
    for diff in stored.get("differences") or []:
        of(str(diff["skill"]))["differences"].append(_ppi_difference(diff))
    for entry in stored.get("ranks") or []:
        found = of(str(entry["skill"]))
        too_few = {r["label"]: r["too_few"] for r in found["rows"] if not r["all"]}
        found["ranks"] = _ppi_ranks(entry, too_few)
    for found in skills.values():
        found["rows"].sort(key=lambda r: not r["all"])  # stable: the systems keep their order
        found["differences"].sort(key=lambda d: not d["clear"])
        found["clear"] = sum(1 for d in found["differences"] if d["clear"])
        found["active"] = any(r["active"] for r in found["rows"])
        found["plot"] = prediction_powered_plot(found["rows"])
    return list(skills.values())
