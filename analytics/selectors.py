"""Reads of the analytics app: the rows a report is computed from, and the report itself."""

from __future__ import annotations

from dataclasses import dataclass

from analytics.models import ImportedScore, RaterKind, ScoreImport
from analytics.report import breakdowns, build_report
from annotation.models import Project
from annotation.selectors import human_score_rows, item_facets
from judging.selectors import judge_score_rows

DEFAULT_RESAMPLES = 1000
MAX_RESAMPLES = 10_000


@dataclass(frozen=True)
class ReportRows:
    """The rows a report is computed from, after the filters: human and judge score rows
    (analytics.report.Row: response id, item id, system, skill, rater, value or None for
    N/A), each item's facets ({"domains": [...], "difficulty": n}) and the (judge, skill)
    pairs scored on a judge's own scale."""

    human: list[tuple]
    judge: list[tuple]
    facets: dict[int, dict]
    off_scale: set[tuple[str, str]]


def report_rows(
    *,
    project: Project,
    skills: list[str] | None = None,
    judges: list[str] | None = None,
    systems: list[str] | None = None,
    domains: list[str] | None = None,
    difficulties: list[int] | None = None,
) -> ReportRows:
    """Every human and judge score of the project (campaigns, judge runs, imports) as report
    rows, narrowed by skill, judge, system, domain and difficulty."""
    human = human_score_rows(project=project) + imported_score_rows(
        project=project, kind=RaterKind.HUMAN
    )
    judge = judge_score_rows(project=project) + imported_score_rows(
        project=project, kind=RaterKind.JUDGE
    )
    if judges:
        judge = [row for row in judge if row[4] in set(judges)]
    facets = item_facets(item_ids={row[1] for row in human} | {row[1] for row in judge})

    def kept(row) -> bool:
        facet = facets.get(row[1], {})
        return (
            (not skills or row[3] in skills)
            and (not systems or row[2] in systems)
            and (not domains or bool(set(domains) & set(facet.get("domains", []))))
            and (not difficulties or facet.get("difficulty") in difficulties)
        )

    if skills or systems or domains or difficulties:
        human = [row for row in human if kept(row)]
        judge = [row for row in judge if kept(row)]
    return ReportRows(human, judge, facets, raw_judge_skills(project))


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
) -> dict:
    """Agreement among the project's annotators and each judge's correlation with them,
    per skill (analytics/report.py). `skills` and `judges` narrow it down by name. `rows`:
    the `report_rows` of these filters, when the caller has read them already."""
    if rows is None:
        rows = report_rows(
            project=project,
            skills=skills,
            judges=judges,
            systems=systems,
            domains=domains,
            difficulties=difficulties,
        )
    report = build_report(
        rows.human, rows.judge, skills=skills, resamples=resamples, off_scale=rows.off_scale
    )
    if with_breakdowns:
        report["breakdowns"] = breakdowns(
            rows.human, rows.judge, rows.facets, skills=skills, off_scale=rows.off_scale
        )
    return {"project": project.slug, **report}


def imported_score_rows(*, project: Project, kind: str) -> list[tuple]:
    """Imported long-format scores (analytics.imports) as report rows; the rater is the id
    as imported (an annotator's username and an imported rater id that are equal are one
    rater)."""
    return list(
        ImportedScore.objects.filter(project=project, rater_kind=kind)
        .order_by("response_id", "skill_id", "rater")
        .values_list(
            "response_id",
            "response__item_id",
            "response__model_name",
            "skill__name",
            "rater",
            "value",
        )
    )


def raw_judge_skills(project: Project) -> set[tuple[str, str]]:
    """(judge, skill) pairs imported with --judge-scale raw: their values are on the judge's
    own scale, so only correlations are reported for them, not MAE or exact agreement."""
    return set(
        ImportedScore.objects.filter(
            project=project, rater_kind=RaterKind.JUDGE, batch__scales__judge_scale="raw"
        )
        .values_list("rater", "skill__name")
        .distinct()
    )


def score_import_list(*, project: Project, limit: int = 50):
    """The project's latest long-format score imports, newest first, with who made them."""
    return ScoreImport.objects.filter(project=project).select_related("dataset", "created_by")[
        :limit
    ]
