"""Reads of the analytics app: the rows a report is computed from, and the report itself."""

from __future__ import annotations

from analytics.report import build_report
from annotation.models import Project
from annotation.selectors import human_score_rows
from judging.selectors import judge_score_rows

DEFAULT_RESAMPLES = 1000
MAX_RESAMPLES = 10_000


def project_report(
    *,
    project: Project,
    skills: list[str] | None = None,
    judges: list[str] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
) -> dict:
    """Agreement among the project's annotators and each judge's correlation with them,
    per skill (analytics/report.py). `skills` and `judges` narrow it down by name."""
    human = human_score_rows(project=project)
    judge = judge_score_rows(project=project)
    if judges:
        judge = [row for row in judge if row[4] in set(judges)]
    report = build_report(human, judge, skills=skills, resamples=resamples)
    return {"project": project.slug, **report}
