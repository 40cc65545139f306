"""The report read: a project's scores, filtered, computed into the report
(analytics.report.build) that the command, the API and the dashboard return."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from analytics.preference_inputs import preference_inputs
from analytics.preferences import preference_report
from analytics.report.build import breakdowns, build_report
from analytics.report.prediction_powered import prediction_powered
from analytics.rows import ADJUDICATED, ReportRows
from analytics.selectors import report_rows
from analytics.trust import probes
from analytics.trust.figures import trust_figures
from analytics.trust_inputs import trust_inputs
from annotation.models import Project
from annotation.selectors import sampling_design, skill_list_for_project
from judging.selectors import probe_data

DEFAULT_RESAMPLES = 1000
MAX_RESAMPLES = 10_000


def project_report(
    *,
    project: Project,
    skills: list[str] | None = None,
    judges: list[str] | None = None,
    systems: list[str] | None = None,
    domains: list[str] | None = None,
    difficulties: list[int] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    with_breakdowns: bool = True,
    rows: ReportRows | None = None,
    progress: Callable[[float, str], None] | None = None,
    compare: Sequence[tuple[str, str]] | None = None,
    compare_all: bool = False,
    human_scores: str = "raw",
) -> dict:
    """Agreement among the project's annotators and each judge's correlation with them,
    per skill (analytics/report/build.py). `skills` and `judges` narrow it down by name. `rows`:
    the `report_rows` of these filters, when the caller has read them already. `progress`
    (fraction done, what is being computed) is called between the parts (report snapshots
    show it). `compare`: judge pairs compared on every skill besides each judge against the
    skill's best; `compare_all`: every pair (build_report). `human_scores` "adjudicated":
    an adjudicated (response, skill) counts with its adjudicated score as its one human
    score in the correlations and leaderboards, while agreement among people is computed on
    the people's own scores; the report says so in "human_scores" and "agreement_scores"
    (docs/ANALYTICS.md). The default ("raw") report is as it always was."""
    if rows is None:
        rows = report_rows(
            project=project,
            skills=skills,
            judges=judges,
            systems=systems,
            domains=domains,
            difficulties=difficulties,
            human_scores=human_scores,
        )
    adjudicated = human_scores == "adjudicated"
    people = rows.raw_human if adjudicated else None
    if progress is not None:
        progress(0.1, f"agreement and correlations ({resamples:,} resamples)")
    said = progress  # the callbacks below only exist when it is given
    report = build_report(
        rows.human,
        rows.judge,
        skills=skills,
        resamples=resamples,
        off_scale=rows.off_scale,
        compare=compare,
        compare_all=compare_all,
        agreement_rows=people,
        progress=None
        if said is None
        else lambda f: said(0.1 + 0.65 * f, f"bootstrap intervals: {f:.0%} of the resamples"),
    )
    if with_breakdowns:
        if said is not None:
            said(0.75, "breakdowns by domain, difficulty and system")
        report["breakdowns"] = breakdowns(
            rows.human,
            rows.judge,
            rows.facets,
            skills=skills,
            off_scale=rows.off_scale,
            agreement_rows=people,
            progress=None
            if said is None
            else lambda f: said(0.75 + 0.2 * f, f"breakdowns: {f:.0%} of the groups"),
        )
    if said is not None:
        said(0.95, "prediction-powered estimates")
    # the adjudicated report's human means are the adjudicated ones here too, as everywhere
    # in the report but agreement among people
    report.update(
        prediction_powered(
            rows.human, rows.judge, skills=skills, design=sampling_design(project=project)
        )
    )
    if said is not None:
        said(0.96, "judge trust")
    report["trust"] = _trust(project, rows, judges, resamples)
    if said is not None:
        said(0.97, "preferences")
    filters = {
        "skills": skills,
        "judges": judges,
        "systems": systems,
        "domains": domains,
        "difficulties": difficulties,
    }
    report["preferences"] = _preferences(project, rows, filters, resamples, skills)
    if not adjudicated:
        return {"project": project.slug, **report}
    labels = {
        "human_scores": "adjudicated",
        "agreement_scores": "raw",
        "adjudicated_pairs": sum(1 for row in rows.human if row[4] == ADJUDICATED),
    }
    return {"project": project.slug, **labels, **report}


def _preferences(
    project: Project,
    rows: ReportRows,
    filters: dict,
    resamples: int,
    skills: list[str] | None,
) -> dict:
    """The pairwise preference figures (docs/PREFERENCE_ANALYTICS.md): per skill and
    Overall, win/tie/loss matrices, Davidson strengths, agreement among raters and each
    judge against the people's decisions."""
    labels, verdicts = preference_inputs(project=project, rows=rows, filters=filters)
    order = skills or list(skill_list_for_project(project=project).values_list("name", flat=True))
    return preference_report(labels, verdicts, skills=order, resamples=resamples)


def _trust(project: Project, rows: ReportRows, judges: list[str] | None, resamples: int) -> dict:
    """The judge trust report (docs/JUDGE_TRUST.md): judge name -> its calibration, strata,
    N/A and stochasticity figures per skill, and its bias probes' figures."""
    figures = trust_figures(
        rows.human,
        rows.judge,
        rows.facets,
        trust_inputs(project=project, rows=rows, judges=judges),
        resamples=resamples,
        off_scale=rows.off_scale,
    )
    found = probes.probe_figures(
        probe_data(project=project, judges=judges or ()),
        human=rows.human,
        judge=rows.judge,
        resamples=resamples,
    )
    for name, trust in figures.items():
        trust["probes"] = found.get(name)
    return figures
