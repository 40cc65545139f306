"""Reads of the disagreement explorer: the project's disagreements under the filters, the
values the filters offer, and the scores imported for one response."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from analytics.explorer.disagreement import Disagreement, DisagreementFilters, disagreements
from analytics.models import ImportedScore, RaterKind
from analytics.selectors import report_rows
from annotation.models import Project
from annotation.selectors import (
    domain_list_for_project,
    project_system_names,
    skill_list_for_project,
)
from judging.selectors import judge_list_for_project


def disagreement_list(*, project: Project, filters: DisagreementFilters) -> list[Disagreement]:
    """The project's disagreements under `filters`, ranked (every row: page them)."""
    rows = report_rows(
        project=project,
        skills=list(filters.skills) or None,
        judges=list(filters.judges) or None,
        systems=list(filters.systems) or None,
        domains=list(filters.domains) or None,
        difficulties=list(filters.difficulties) or None,
    )
    return disagreements(rows.human, rows.judge, min_human=filters.min_human, sort=filters.sort)


def filter_choices(*, project: Project) -> dict[str, list[str]]:
    """The values the explorer's filters offer: the project's skills, judges (its own and
    imported ones), systems and domains."""
    imported = (
        ImportedScore.objects.filter(project=project, rater_kind=RaterKind.JUDGE)
        .order_by("rater")
        .values_list("rater", flat=True)
        .distinct()
    )
    judges = {j.name for j in judge_list_for_project(project=project)} | set(imported)
    return {
        "skills": [s.name for s in skill_list_for_project(project=project)],
        "judges": sorted(judges),
        "systems": project_system_names(project=project),
        "domains": [d.name for d in domain_list_for_project(project=project)],
    }


#: filter parameter -> the filter_choices key of the values it takes
NAMED_FILTERS = {"skill": "skills", "judge": "judges", "system": "systems", "domain": "domains"}


def filter_values_resolve(
    *, given: dict[str, list[str]], choices: dict[str, list[str]]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """The named filters' values as the project spells them (a name matches in any case;
    a value that names nothing is kept as given), and a problem per filter with values
    that name nothing here: ({filter: values}, {filter: [message]}). An unknown value is
    never dropped quietly: that would widen the list to everything else."""
    resolved: dict[str, list[str]] = {}
    errors: dict[str, list[str]] = {}
    for name, key in NAMED_FILTERS.items():
        spelled = {value.casefold(): value for value in choices[key]}
        values, unknown = [], []
        for value in given.get(name, []):
            match = spelled.get(value.strip().casefold())
            values.append(value if match is None else match)
            if match is None:
                unknown.append(value)
        resolved[name] = values
        if unknown:
            errors[name] = [f"no {name} named {', '.join(unknown)} in this project"]
    return resolved, errors


@dataclass(frozen=True)
class ImportedScoreRow:
    rater: str
    rater_kind: str
    skill: str
    value: float | None  # None: N/A
    rationale: str
    batch_id: int
    imported_at: datetime


def imported_score_list_for_response(
    *, project: Project, response_id: int
) -> list[ImportedScoreRow]:
    """Scores imported for the response (analytics.imports.services), humans first, by
    skill, rater."""
    rows = (
        ImportedScore.objects.filter(project=project, response_id=response_id)
        .order_by("rater_kind", "skill__order", "skill__name", "rater")
        .values_list(
            "rater",
            "rater_kind",
            "skill__name",
            "value",
            "rationale",
            "batch_id",
            "batch__created_at",
        )
    )
    return [ImportedScoreRow(*row) for row in rows]
