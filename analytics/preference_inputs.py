"""Reads for the preference figures (docs/PREFERENCE_ANALYTICS.md): the people's preference
labels of the project's pairwise campaigns, each judge's pairwise verdicts, and the
pointwise scores of judges and people made preferences, narrowed by the report's filters.
The figures themselves are pure (analytics.preferences)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from analytics import preferences
from analytics.models import ImportedPreference
from analytics.preferences import OVERALL, Label, Verdict
from analytics.rows import ReportRows
from annotation.models import Project
from annotation.selectors import human_preference_rows, item_facets
from judging.selectors import pair_judgment_rows

#: The name of each kind of source compared with the people's preferences.
PAIRWISE, SCORES, PEOPLE_SCORES = "{} (pairwise)", "{} (scores)", "people (scores)"


def imported_preference_labels(*, project: Project) -> list[Label]:
    """The preference labels imported into the project (analytics.imports.preferences)."""
    rows = (
        ImportedPreference.objects.filter(project=project)
        .order_by("pk")
        .values_list(
            "response_a__item_id",
            "response_a__model_name",
            "response_b__model_name",
            "rater",
            "skill__name",
            "choice",
            "strength",
        )
    )
    return [
        Label(item, a, b, rater, skill or OVERALL, choice, strength)
        for item, a, b, rater, skill, choice, strength in rows
        if a != b
    ]


def preference_labels(*, project: Project) -> list[Label]:
    """Every accepted human preference of the project's pairwise campaigns and every
    imported preference label, as labels."""
    return imported_preference_labels(project=project) + [
        Label(
            row.item_id,
            row.model_a,
            row.model_b,
            row.annotator,
            row.skill or OVERALL,
            row.choice,
            row.strength,
        )
        for row in human_preference_rows(project=project)
        if row.model_a != row.model_b
    ]


def _kept(
    labels: Sequence[Label], filters: dict[str, Any], facets: dict[int, dict[str, Any]]
) -> list[Label]:
    skills, systems = filters.get("skills"), filters.get("systems")
    domains, difficulties = filters.get("domains"), filters.get("difficulties")

    def kept(label: Label) -> bool:
        facet = facets.get(label.item, {})
        return (
            (not skills or label.skill == OVERALL or label.skill in skills)
            and (not systems or (label.model_a in systems and label.model_b in systems))
            and (not domains or bool(set(domains) & set(facet.get("domains", []))))
            and (not difficulties or facet.get("difficulty") in difficulties)
        )

    return [label for label in labels if kept(label)]


def preference_inputs(
    *, project: Project, rows: ReportRows, filters: dict[str, Any]
) -> tuple[list[Label], dict[str, list[Verdict]]]:
    """The labels of the report's filters (skills: the named ones and Overall; systems: both
    of a pair; domains, difficulties: the item's) and, per source, the verdicts compared
    with them: each judge's latest pairwise runs, each judge's pointwise scores and the
    people's pointwise scores (the report rows, already filtered) made preferences."""
    labels = preference_labels(project=project)
    if any(filters.get(name) for name in ("domains", "difficulties")):
        labels = _kept(labels, filters, item_facets(item_ids={label.item for label in labels}))
    else:
        labels = _kept(labels, filters, {})
    if not labels:
        return [], {}
    pairs: set[tuple[int, str, str]] = {
        (label.item, min(label.model_a, label.model_b), max(label.model_a, label.model_b))
        for label in labels
    }
    items = {item for item, _, _ in pairs}
    judges: dict[str, list[Verdict]] = {}
    wanted = filters.get("judges") or ()
    pair_rows: dict[str, list[tuple]] = {}
    for judge, item, challenger, anchor, order, verdicts in pair_judgment_rows(
        project=project, judges=wanted
    ):
        if item in items:
            pair_rows.setdefault(judge, []).append((item, challenger, anchor, order, verdicts))
    for judge, found in sorted(pair_rows.items()):
        judges[PAIRWISE.format(judge)] = preferences.verdicts_from_pair_judgments(found)
    by_judge: dict[str, list[tuple]] = {}
    for row in rows.judge:
        if row[1] in items:
            by_judge.setdefault(row[4], []).append(row)
    for judge, found in sorted(by_judge.items()):
        scores = preferences.mean_scores(found)
        judges[SCORES.format(judge)] = preferences.verdicts_from_scores(scores, pairs)
    people = [row for row in (rows.raw_human or rows.human) if row[1] in items]
    if people:
        scores = preferences.mean_scores(people)
        judges[PEOPLE_SCORES] = preferences.verdicts_from_scores(scores, pairs)
    return labels, {name: found for name, found in judges.items() if found}
