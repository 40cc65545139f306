"""Reads shared by the analytics features: every human and judge score of a project as
report rows (analytics.rows; the report, the dashboard and the disagreement explorer read
the same rows).
Feature reads live in their packages (report/selectors.py, exports/selectors.py, ...)."""

from __future__ import annotations

from analytics.models import ImportedScore, RaterKind
from analytics.rows import ADJUDICATED, ReportRows, Row
from annotation.models import Project
from annotation.selectors import adjudicated_score_rows, human_score_rows, item_facets
from judging.selectors import judge_score_rows


def report_rows(
    *,
    project: Project,
    skills: list[str] | None = None,
    judges: list[str] | None = None,
    systems: list[str] | None = None,
    domains: list[str] | None = None,
    difficulties: list[int] | None = None,
    human_scores: str = "raw",
) -> ReportRows:
    """Every human and judge score of the project (campaigns, judge runs, imports) as report
    rows, narrowed by skill, judge, system, domain and difficulty. `human_scores`
    "adjudicated": a (response, skill) with an adjudicated score has that one score as its
    human row (rater ADJUDICATED) instead of its people's scores, which stay in `raw_human`
    (ReportRows)."""
    human = human_score_rows(project=project) + imported_score_rows(
        project=project, kind=RaterKind.HUMAN
    )
    raw_human: list[Row] | None = None
    adjudicated = 0
    if human_scores == "adjudicated":
        raw_human = human
        settled = {
            (rid, skill): (rid, item, system, skill, ADJUDICATED, score)
            for rid, item, system, skill, score in adjudicated_score_rows(project=project)
        }
        adjudicated = len(settled)
        human = sorted(
            [row for row in raw_human if (row[0], row[3]) not in settled] + list(settled.values()),
            key=lambda row: (row[0], row[3], row[4]),
        )
    judge = judge_score_rows(project=project) + imported_score_rows(
        project=project, kind=RaterKind.JUDGE
    )
    if judges:
        judge = [row for row in judge if row[4] in set(judges)]
    facets = item_facets(
        item_ids={row[1] for row in human}
        | {row[1] for row in judge}
        | {row[1] for row in raw_human or ()}
    )

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
        if raw_human is not None:
            raw_human = [row for row in raw_human if kept(row)]
    return ReportRows(
        human,
        judge,
        facets,
        raw_judge_skills(project),
        raw_human=raw_human,
        adjudicated=adjudicated,
    )


def imported_score_rows(*, project: Project, kind: str) -> list[Row]:
    """Imported long-format scores (analytics.imports.services) as report rows; the rater is
    the id as imported (an annotator's username and an imported rater id that are equal are
    one rater)."""
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
