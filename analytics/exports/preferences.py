"""The preference export (docs/PREFERENCE_ANALYTICS.md, "Export and import"): one row per
label, the people's accepted labels of the project's pairwise campaigns and the labels
imported with `import_preferences`, in the long format that the import reads back.

Columns: project, dataset, campaign, item, model_a, model_b, shown_order ("ab": A shown on
the left, "ba": B on the left, empty: unknown), rater, skill ("Overall" for the overall
question), choice (a, b, tie, both_bad; A = model_a), strength (1 slightly, 2 much, empty),
rationale, time_on_task_ms, submitted_at, language (the language the pair was shown in;
empty: unknown or imported)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from analytics.exports.selectors import ExportFilters
from analytics.models import ImportedPreference
from analytics.preferences import OVERALL
from annotation import selectors as annotation_selectors
from annotation.models import Project

PREFERENCE_COLUMNS = (
    "project",
    "dataset",
    "campaign",
    "item",
    "model_a",
    "model_b",
    "shown_order",
    "rater",
    "skill",
    "choice",
    "strength",
    "rationale",
    "time_on_task_ms",
    "submitted_at",
    "language",
)


def shown_order(b_left: bool | None) -> str:
    return "" if b_left is None else ("ba" if b_left else "ab")


def preference_export_rows(*, project: Project, filters: ExportFilters) -> Iterator[list[Any]]:
    """The rows of a preference export as cell values in PREFERENCE_COLUMNS order. Filters:
    `skills` keeps the named skills and Overall, `systems` pairs whose two systems are both
    named, `dataset_id` that dataset, `campaign_id` that campaign's labels (no imported
    ones)."""
    names = annotation_selectors.campaign_names_for_project(project=project)
    skills, systems = set(filters.skills), set(filters.systems)

    def kept(skill: str | None, model_a: str, model_b: str) -> bool:
        return (not skills or skill is None or skill in skills) and (
            not systems or (model_a in systems and model_b in systems)
        )

    campaign_ids = None if filters.campaign_id is None else [filters.campaign_id]
    for row in annotation_selectors.human_preference_rows(
        project=project, campaign_ids=campaign_ids
    ):
        campaign, dataset, dataset_id = names[row.campaign_id]
        if not kept(row.skill, row.model_a, row.model_b):
            continue
        if filters.dataset_id is not None and dataset_id != filters.dataset_id:
            continue
        yield [
            project.slug,
            dataset,
            campaign,
            row.item_external_id,
            row.model_a,
            row.model_b,
            shown_order(row.b_left),
            row.annotator,
            row.skill or OVERALL,
            row.choice,
            row.strength,
            row.rationale,
            row.time_ms,
            row.submitted_at.isoformat() if row.submitted_at else None,
            row.language or None,
        ]
    if filters.campaign_id is not None:
        return
    imported = ImportedPreference.objects.filter(project=project)
    if filters.dataset_id is not None:
        imported = imported.filter(response_a__item__dataset_id=filters.dataset_id)
    for values in imported.order_by("pk").values_list(
        "response_a__item__dataset__name",
        "source",
        "response_a__item__external_id",
        "response_a__model_name",
        "response_b__model_name",
        "b_left",
        "rater",
        "skill__name",
        "choice",
        "strength",
        "rationale",
        "time_ms",
        "batch__created_at",
    ):
        dataset, source, item, model_a, model_b, b_left, rater, skill, *rest = values
        if not kept(skill, model_a, model_b):
            continue
        choice, strength, rationale, time_ms, created = rest
        assert isinstance(created, datetime)
        yield [
            project.slug,
            dataset,
            source,
            item,
            model_a,
            model_b,
            shown_order(b_left),
            rater,
            skill or OVERALL,
            choice,
            strength,
            rationale,
            time_ms,
            created.isoformat(),
            None,
        ]
