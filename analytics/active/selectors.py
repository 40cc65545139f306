"""Reads of active selection: a campaign's plan with its batches and what they add up to,
the judge runs a plan may read, and a batch's inputs (the runs' scores of the frame's
responses and the labels so far), aligned with the plan's frame. Judge scores come through
judging.selectors, the campaign's responses, draws and labels through annotation.selectors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from analytics.models import SelectionBatch, SelectionPlan
from annotation.models import Campaign, CampaignSelection, CampaignStatus
from annotation.selectors import (
    campaign_label_means,
    campaign_response_skill_ids,
    campaign_sample_rows,
    skill_list_for_project,
)
from judging.models import JudgeRun
from judging.selectors import pointwise_run_list_for_dataset, run_score_samples


def run_list_for_campaign(*, campaign: Campaign) -> list[JudgeRun]:
    """The project's pointwise runs over the campaign's dataset (not pairwise, not probes),
    newest first, each with its judge; the finished ones are those a plan may read."""
    return list(
        pointwise_run_list_for_dataset(project=campaign.project, dataset_id=campaign.dataset_id)
    )


def plan_get(*, campaign: Campaign) -> SelectionPlan | None:
    """The campaign's plan, with its runs (and their judges) read, or None."""
    return (
        SelectionPlan.objects.filter(campaign=campaign)
        .prefetch_related("runs__judge")
        .select_related("created_by")
        .first()
    )


def skill_names(*, campaign: Campaign) -> dict[int, str]:
    """skill id -> name, of the skills the campaign's project may use."""
    return dict(skill_list_for_project(project=campaign.project).values_list("pk", "name"))


# --- the frame and a batch's inputs ----------------------------------------------------------


def frame_response_ids(*, campaign: Campaign, run_ids: Sequence[int]) -> list[int]:
    """The campaign's responses that every run scored on every skill their task asks (a
    score or the judge's N/A), by id: the responses a plan can decide."""
    asked = campaign_response_skill_ids(campaign=campaign)
    scored: set[tuple[int, int, int]] = {
        (run_id, response_id, skill_id)
        for run_id, response_id, skill_id, _, _ in run_score_samples(run_ids=run_ids)
    }
    return [
        response_id
        for response_id, skills in asked.items()
        if skills and all((run_id, response_id, s) in scored for run_id in run_ids for s in skills)
    ]


def run_sample_counts(*, run_ids: Sequence[int]) -> dict[int, int]:
    """run id -> the most samples it holds of one response and skill (k)."""
    counts: dict[int, int] = {run_id: 0 for run_id in run_ids}
    for run_id, _, _, sample, _ in run_score_samples(run_ids=run_ids):
        counts[run_id] = max(counts[run_id], sample + 1)
    return counts


@dataclass(frozen=True)
class FrameInputs:
    """Per frame response (in the plan's order): `samples` (run id, skill id) -> the run's k
    scores; `means` skill id -> each run's mean score; `labels` skill id -> the mean of
    people's accepted scores so far. N/A is left out everywhere; only skills the response's
    task asks are read."""

    samples: list[dict[Any, list[float]]]
    means: list[dict[Any, list[float]]]
    labels: list[dict[Any, float]]


def frame_inputs(*, plan: SelectionPlan, campaign: Campaign, run_ids: Sequence[int]) -> FrameInputs:
    """The inputs of the uncertainty figures for the plan's frame (analytics/active/
    uncertainty.py)."""
    frame: list[int] = list(plan.frame)
    index = {response_id: i for i, response_id in enumerate(frame)}
    asked = campaign_response_skill_ids(campaign=campaign)
    samples: list[dict[Any, list[float]]] = [{} for _ in frame]
    for run_id, response_id, skill_id, _, score in run_score_samples(run_ids=run_ids):
        i = index.get(response_id)
        if i is None or score is None or skill_id not in asked.get(response_id, ()):
            continue
        samples[i].setdefault((run_id, skill_id), []).append(float(score))
    means: list[dict[Any, list[float]]] = [{} for _ in frame]
    for i, per_key in enumerate(samples):
        for (_, skill_id), scores in sorted(per_key.items()):
            means[i].setdefault(skill_id, []).append(sum(scores) / len(scores))
    people = campaign_label_means(campaign=campaign)
    labels = [
        {s: y for s, y in people.get(response_id, {}).items() if s in asked.get(response_id, ())}
        for response_id in frame
    ]
    return FrameInputs(samples=samples, means=means, labels=labels)


# --- what the page and the API show ----------------------------------------------------------


@dataclass(frozen=True)
class SelectionState:
    """A campaign's active selection as the page and the API show it. `next_batch` is the
    number the next draw must name; `blocked` says why no batch can be drawn now ("" when
    one can)."""

    campaign: Campaign
    plan: SelectionPlan | None
    runs: list[JudgeRun]
    batches: list[SelectionBatch]
    frame_size: int
    decided: int
    drawn: int
    labeled: int  # drawn responses with an accepted score of people on a skill
    spent: float  # expected draws of the batches drawn: the sum of their probabilities
    remaining_budget: float
    next_batch: int
    next_size: int
    blocked: str


def selection_state(*, campaign: Campaign) -> SelectionState:
    """Everything the active selection page shows of a campaign (a few queries)."""
    plan = plan_get(campaign=campaign)
    samples = campaign_sample_rows(campaign=campaign)
    drawn_ids = {response_id for _, response_id, _, drawn in samples if drawn}
    labeled = len(drawn_ids & set(campaign_label_means(campaign=campaign)))
    batches = list(plan.batches.select_related("created_by")) if plan else []
    frame_size = len(plan.frame) if plan else 0
    decided = {response_id for _, response_id, _, _ in samples}
    undecided = sum(1 for pk in plan.frame if pk not in decided) if plan else 0
    spent = sum(p for _, _, p, _ in samples)
    remaining = plan.budget - spent if plan else 0.0
    next_batch = max((b.number for b in batches), default=0) + 1
    return SelectionState(
        campaign=campaign,
        plan=plan,
        runs=sorted(plan.runs.all(), key=lambda r: r.pk) if plan else [],
        batches=batches,
        frame_size=frame_size,
        decided=len(decided),
        drawn=len(drawn_ids),
        labeled=labeled,
        spent=spent,
        remaining_budget=max(remaining, 0.0),
        next_batch=next_batch,
        next_size=min(plan.batch_size, undecided) if plan else 0,
        blocked=_blocked(campaign, plan, undecided, remaining),
    )


def _blocked(
    campaign: Campaign, plan: SelectionPlan | None, undecided: int, remaining: float
) -> str:
    if campaign.selection != CampaignSelection.SAMPLED:
        return (
            "this campaign gives every response a task (selection all); a draft can be set "
            "to sampled on its settings page"
        )
    if campaign.status == CampaignStatus.FINISHED:
        return "the campaign is finished"
    if plan is None:
        return "no plan yet"
    if undecided == 0:
        return "every response of the frame is decided"
    if remaining <= 1e-9:
        return f"the budget is spent ({plan.budget} responses for people): raise it to draw more"
    return ""
