"""What a report snapshot stores besides the report: the dashboard's views of it, computed
once by the worker (analytics/report/snapshots.py) so that a page only reads and renders.

Each part is JSON-ready (chart_data's functions) and stored on its own, so the dashboard's
first view reads the small ones and each section the one it shows."""

from __future__ import annotations

from typing import Any

from analytics.report import chart_data
from analytics.report.build import Json
from analytics.rows import ReportRows


def headline_part(level: str, measure: str) -> str:
    """The name of the part holding the headline of `level` and `measure`."""
    return f"headline.{level}.{measure}"


def heatmap_part(index: int) -> str:
    """The name of the part holding the heat maps of the judge at `index` of the summary's
    judges."""
    return f"heatmaps.{index}"


def trust_part(index: int) -> str:
    """The name of the part holding the trust figures of the judge at `index` of the
    "trust.judges" part (the judges of the report's "trust", sorted)."""
    return f"trust.{index}"


def trust_parts(report: Json) -> dict[str, Any]:
    """The judge trust report (docs/JUDGE_TRUST.md), one part per judge: its page reads one."""
    trust = report.get("trust") or {}
    names = sorted(trust)
    return {"trust.judges": names, **{trust_part(i): trust[n] for i, n in enumerate(names)}}


#: The part listing the judges of the report's prediction-powered estimates, sorted; the
#: figures of the judge at index i are the part `prediction_powered_part(i)`.
PREDICTION_POWERED_JUDGES = "prediction_powered.judges"


def prediction_powered_part(index: int) -> str:
    """The name of the part holding the prediction-powered estimates (rows, paired
    differences, ranks) of the judge at `index` of the PREDICTION_POWERED_JUDGES part."""
    return f"prediction_powered.{index}"


def prediction_powered_parts(report: Json) -> dict[str, Any]:
    """The report's prediction-powered figures (`prediction_powered`, `..._differences`,
    `..._ranks`), one part per judge, each as the report holds them: the dashboard's
    section and the trust page read one judge's, not every judge's rows and differences."""
    keys = {
        "rows": "prediction_powered",
        "differences": "prediction_powered_differences",
        "ranks": "prediction_powered_ranks",
    }
    by_judge: dict[str, dict[str, list[Json]]] = {}
    for name, key in keys.items():
        for entry in report.get(key) or []:
            found = by_judge.setdefault(str(entry["judge"]), {k: [] for k in keys})
            found[name].append(entry)
    names = sorted(by_judge)
    return {
        PREDICTION_POWERED_JUDGES: names,
        **{
            prediction_powered_part(i): {"judge": name, **by_judge[name]}
            for i, name in enumerate(names)
        },
    }


def leaderboard_part(report: Json) -> Json:
    """What the cross-project judge leaderboard (analytics/cards/selectors.py) reads of a
    report: every judge's correlations and each skill's human ceiling, a small part of the
    whole report (which it would otherwise parse for every project it lists)."""
    return {
        "correlation": report.get("correlation") or {},
        "agreement": {
            skill: {k: figures[k] for k in ("loo_ceiling", "loo_ceiling_ci") if k in figures}
            for skill, figures in (report.get("agreement") or {}).items()
        },
    }


def snapshot_parts(report: Json, rows: ReportRows) -> dict[str, Any]:
    """name -> JSON value, for every part the dashboard reads (besides "report")."""
    skills, judges = chart_data.report_skills(report), chart_data.judge_names(report)
    headlines = {
        # every level and measure, each its own part: the page reads the one it shows
        headline_part(level, measure): found
        for level, by_measure in chart_data.headlines(report).items()
        for measure, found in by_measure.items()
    }
    return {
        **headlines,
        "tables": chart_data.report_tables(report),
        "charts": chart_data.dashboard_charts(report, rows),
        # one part per judge (by its place in summary["judges"]): the section shows one
        **{
            heatmap_part(index): chart_data.heatmaps(rows, skills=skills, judges=[judge])
            for index, judge in enumerate(judges)
        },
        "options": chart_data.filter_options(rows),
        **trust_parts(report),
        # docs/PREDICTION_POWERED.md: one judge's estimates, differences and ranks a part
        **prediction_powered_parts(report),
        # the preference page's figures (docs/PREFERENCE_ANALYTICS.md)
        "preferences": report.get("preferences") or {},
        "leaderboard": leaderboard_part(report),
        "summary": {
            "has_rows": bool(rows.human or rows.judge),
            "skills": skills,
            "judges": judges,
            "resamples": report.get("resamples", 0),
        },
    }
