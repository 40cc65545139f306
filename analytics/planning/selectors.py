"""The pilot's rows and the frame a new campaign would cover, read through the upstream
selectors, and the plan computed from them (analytics.planning.pilot). Computed on request:
one read of the project's human and judge score rows (the report's, analytics.selectors)."""

from __future__ import annotations

from dataclasses import dataclass

from analytics.planning import pilot
from analytics.rows import ReportRows
from analytics.selectors import report_rows
from annotation.models import Project
from annotation.selectors import dataset_list_for_project, item_ids_for_dataset

#: Item ids read per query when a dataset narrows the frame.
ITEM_PAGE = 10_000


@dataclass(frozen=True)
class PlanningOptions:
    """What the planning form may choose from: the judges with scores in the project (by
    name), its datasets (id, name) and the systems its judged responses come from."""

    judges: list[str]
    datasets: list[tuple[int, str]]
    models: list[str]


@dataclass(frozen=True)
class LabelPlan:
    judge: str | None
    half_width: float
    budget: int
    dataset_id: int | None
    models: list[str]
    skills: list[pilot.SkillPlan]


def planning_rows(*, project: Project) -> ReportRows:
    """Every human and judge score row of the project (people's raw scores)."""
    return report_rows(project=project)


def planning_options(*, project: Project, rows: ReportRows) -> PlanningOptions:
    return PlanningOptions(
        judges=sorted({row[4] for row in rows.judge}),
        datasets=[(d.pk, d.name) for d in dataset_list_for_project(project=project)],
        models=sorted({row[2] for row in rows.judge}),
    )


def _dataset_item_ids(dataset_id: int) -> set[int]:
    found: set[int] = set()
    after = 0
    while page := item_ids_for_dataset(dataset_id=dataset_id, after_id=after, limit=ITEM_PAGE):
        found.update(page)
        after = page[-1]
    return found


def frame_response_ids(
    *, rows: ReportRows, judge: str, dataset_id: int | None, models: list[str]
) -> set[int] | None:
    """The judge's scored responses in the dataset and of the models (None: no narrowing)."""
    if dataset_id is None and not models:
        return None
    items = _dataset_item_ids(dataset_id) if dataset_id is not None else None
    wanted = set(models)
    return {
        row[0]
        for row in rows.judge
        if row[4] == judge
        and (items is None or row[1] in items)
        and (not wanted or row[2] in wanted)
    }


def label_plan_for_project(
    *,
    rows: ReportRows,
    judge: str | None,
    half_width: float = pilot.DEFAULT_HALF_WIDTH,
    budget: int = pilot.DEFAULT_BUDGET,
    dataset_id: int | None = None,
    models: list[str] | None = None,
) -> LabelPlan:
    """The plan of each skill `judge` scored (no skill without a judge). The pilot is every
    labeled response of the project the judge scored; the frame, its scored responses in
    `dataset_id` and of `models` (all of them when neither is given)."""
    models = list(models or [])
    skills: list[pilot.SkillPlan] = []
    if judge is not None:
        frame = frame_response_ids(rows=rows, judge=judge, dataset_id=dataset_id, models=models)
        skills = pilot.label_plan(
            rows.human,
            [row for row in rows.judge if row[4] == judge],
            judge_name=judge,
            half_width=half_width,
            budget=budget,
            frame=frame,
            own_scale_skills={skill for name, skill in rows.off_scale if name == judge},
        )
    return LabelPlan(
        judge=judge,
        half_width=half_width,
        budget=budget,
        dataset_id=dataset_id,
        models=models,
        skills=skills,
    )
