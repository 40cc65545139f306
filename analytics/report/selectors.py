"""The report read: a project's scores, filtered, computed into the report
(analytics.report.build) that the command, the API and the dashboard return."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from analytics.report.build import breakdowns, build_report
from analytics.rows import ReportRows
from analytics.selectors import report_rows
from annotation.models import Project

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
) -> dict:
    """Agreement among the project's annotators and each judge's correlation with them,
    per skill (analytics/report/build.py). `skills` and `judges` narrow it down by name. `rows`:
    the `report_rows` of these filters, when the caller has read them already. `progress`
    (fraction done, what is being computed) is called between the parts (report snapshots
    show it). `compare`: judge pairs compared on every skill besides each judge against the
    skill's best; `compare_all`: every pair (build_report)."""
    if rows is None:
        rows = report_rows(
            project=project,
            skills=skills,
            judges=judges,
            systems=systems,
            domains=domains,
            difficulties=difficulties,
        )
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
            progress=None
            if said is None
            else lambda f: said(0.75 + 0.2 * f, f"breakdowns: {f:.0%} of the groups"),
        )
    return {"project": project.slug, **report}
