"""Active selection's writes: make a campaign's plan, change it for later batches, and draw
its next batch (docs/CAMPAIGNS.md, "Active selection"). The draws are recorded by the
campaign itself (annotation.services.sampling.campaign_sample_record), which gives the drawn
responses their tasks; this app only decides them.

Lock order of a draw: the plan row, then (inside campaign_sample_record) the campaign row.
Two requests for the same batch wait on the plan row; the second finds the batch the first
drew and returns it (a double click never draws twice)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import numpy as np
from django.core.exceptions import ValidationError
from django.db import transaction

from analytics.active import uncertainty
from analytics.active.selectors import (
    frame_inputs,
    frame_response_ids,
    run_list_for_campaign,
    run_sample_counts,
    skill_names,
)
from analytics.models import SelectionBatch, SelectionPlan, SelectionSource
from analytics.ppi import inclusion_probabilities
from annotation.models import Campaign, CampaignSelection, CampaignStatus
from annotation.selectors import campaign_sample_rows
from annotation.services.sampling import campaign_sample_record
from judging.models import JudgeRun, RunStatus

DEFAULT_UNIFORM_SHARE = 0.2
#: The budget is counted in expected draws (the sum of the recorded probabilities), not in
#: the draws made: the share of every batch then depends on nothing drawn, the last batch
#: takes exactly what is left, and every response of the frame gets decided. Sums of floats
#: are compared with this slack.
SPENT_TOLERANCE = 1e-9
#: Seeds are drawn below this when none is given (any int64 is accepted).
SEED_RANGE = 2**31


class SelectionRefused(ValidationError):
    """The plan or the draw is refused as asked: nothing was written (the API's 400)."""


class BatchStale(ValidationError):
    """The draw named a batch that is not the next one: the page was out of date (the API's
    409)."""


@transaction.atomic
def selection_plan_create(
    *,
    campaign: Campaign,
    run_ids: Sequence[int],
    source: str,
    budget: int,
    batch_size: int,
    uniform_share: float = DEFAULT_UNIFORM_SHARE,
    seed: int | None = None,
    created_by=None,
) -> SelectionPlan:
    """Make the campaign's plan: which finished judge runs it reads, the uncertainty
    `source`, the `budget` (responses for people, in expectation, in all), the batch size
    and the uniform share. The frame (the campaign's responses the runs scored on every
    skill asked) is fixed now, in the random order `seed` gives it (drawn when None).

    Refused (SelectionRefused, nothing written) for a campaign that is not "sampled", is
    finished, has a plan or draws already; for runs that are not the project's finished
    pointwise runs over the campaign's dataset; for a source the runs cannot feed (spread:
    one run with two samples or more per response; judges: two runs or more); and for a
    budget larger than the frame."""
    campaign = Campaign.objects.select_for_update().select_related("project").get(pk=campaign.pk)
    if campaign.selection != CampaignSelection.SAMPLED:
        raise SelectionRefused(
            "this campaign gives every response a task (selection all): set its selection "
            "to sampled, while a draft, to draw responses for people"
        )
    if campaign.status == CampaignStatus.FINISHED:
        raise SelectionRefused("the campaign is finished")
    if SelectionPlan.objects.filter(campaign=campaign).exists():
        raise SelectionRefused("this campaign has a plan: change its settings instead")
    if campaign_sample_rows(campaign=campaign):
        raise SelectionRefused(
            "responses of this campaign were already drawn without this plan: a plan "
            "decides a campaign's responses from the start"
        )
    runs = _runs_checked(campaign, run_ids)
    ids = [run.pk for run in runs]
    _settings_check(source, budget, batch_size, uniform_share, runs)
    frame = frame_response_ids(campaign=campaign, run_ids=ids)
    if not frame:
        raise SelectionRefused(
            "no response of the campaign was scored by "
            + ("the run" if len(ids) == 1 else "every run")
            + " on every skill its task asks: nothing to draw from"
        )
    if budget > len(frame):
        raise SelectionRefused(
            {"budget": f"the budget is at most the frame's {len(frame)} responses"}
        )
    seed = secrets.randbelow(SEED_RANGE) if seed is None else int(seed)
    plan = SelectionPlan(
        campaign=campaign,
        source=source,
        budget=budget,
        batch_size=batch_size,
        uniform_share=uniform_share,
        seed=seed,
        frame=uncertainty.frame_order(frame, seed=seed),
        created_by=created_by,
    )
    plan.full_clean()
    plan.save()
    plan.runs.set(runs)
    return plan


def _runs_checked(campaign: Campaign, run_ids: Sequence[int]) -> list[JudgeRun]:
    """The runs, if each is one of the project's finished pointwise runs over the
    campaign's dataset; SelectionRefused naming the first that is not."""
    wanted = list(dict.fromkeys(int(pk) for pk in run_ids))
    if not wanted:
        raise SelectionRefused({"runs": "pick at least one finished judge run"})
    known = {run.pk: run for run in run_list_for_campaign(campaign=campaign)}
    for pk in wanted:
        run = known.get(pk)
        if run is None:
            raise SelectionRefused(
                {
                    "runs": f"run {pk} is not a pointwise judge run over this campaign's "
                    f"dataset ({campaign.dataset.name})"
                }
            )
        if run.status != RunStatus.DONE:
            raise SelectionRefused(
                {
                    "runs": f"run {pk} of {run.judge.name} is {run.get_status_display().lower()}: "
                    "active selection reads finished runs only (their scores no longer change)"
                }
            )
    return [known[pk] for pk in wanted]


def _settings_check(
    source: str, budget: int, batch_size: int, uniform_share: float, runs: Sequence[JudgeRun]
) -> None:
    errors: dict[str, str] = {}
    if source not in SelectionSource.values:
        errors["source"] = "the source is spread, judges or calibration"
    elif source == SelectionSource.SPREAD:
        if len(runs) != 1:
            errors["source"] = "spread reads the samples of one run: pick exactly one"
        else:
            k = run_sample_counts(run_ids=[runs[0].pk])[runs[0].pk]
            if k < 2:
                errors["source"] = (
                    f"run {runs[0].pk} has {k} sample per response: spread needs a judge "
                    "asked two times or more per response (its samples setting)"
                )
    elif source == SelectionSource.JUDGES and len(runs) < 2:
        errors["source"] = "judges compares two runs or more: pick at least two"
    if not isinstance(budget, int) or budget < 1:
        errors["budget"] = "the budget is a whole number of responses, at least 1"
    if not isinstance(batch_size, int) or batch_size < 1:
        errors["batch_size"] = "a batch decides at least 1 response"
    if not 0 < uniform_share <= 1:
        errors["uniform_share"] = (
            "the uniform share is above 0 (every response keeps a chance to be drawn) and at most 1"
        )
    if errors:
        raise SelectionRefused(errors)


@transaction.atomic
def selection_plan_update(
    *,
    plan: SelectionPlan,
    source: str | None = None,
    budget: int | None = None,
    batch_size: int | None = None,
    uniform_share: float | None = None,
) -> SelectionPlan:
    """Change the plan for the batches still to draw (re-plan): its source, budget, batch
    size or uniform share (None: unchanged). Batches already drawn keep what they used.
    The same checks as `selection_plan_create`; a budget below the responses already drawn
    is refused."""
    plan = SelectionPlan.objects.select_for_update().get(pk=plan.pk)
    runs = sorted(plan.runs.select_related("judge"), key=lambda r: r.pk)
    source = plan.source if source is None else source
    budget = plan.budget if budget is None else budget
    batch_size = plan.batch_size if batch_size is None else batch_size
    uniform_share = plan.uniform_share if uniform_share is None else uniform_share
    _settings_check(source, budget, batch_size, uniform_share, runs)
    if budget > len(plan.frame):
        raise SelectionRefused(
            {"budget": f"the budget is at most the frame's {len(plan.frame)} responses"}
        )
    campaign = Campaign.objects.get(pk=plan.campaign_id)
    spent = sum(p for _, _, p, _ in campaign_sample_rows(campaign=campaign))
    if budget < spent - SPENT_TOLERANCE:
        raise SelectionRefused(
            {
                "budget": f"the batches drawn already spent {spent:.2f} responses (expected "
                "draws): the budget is at least that"
            }
        )
    plan.source, plan.budget = source, budget
    plan.batch_size, plan.uniform_share = batch_size, uniform_share
    plan.full_clean()
    plan.save()
    return plan


@transaction.atomic
def selection_batch_draw(
    *, plan: SelectionPlan, number: int, created_by=None
) -> tuple[SelectionBatch, bool]:
    """Draw batch `number` of the plan: returns it and whether it was drawn now.

    Idempotent by the number: a batch already drawn is returned as it was (False), so a
    double click or a retried request draws once. Another number than the next one is
    refused (BatchStale). The batch decides the next `batch_size` undecided responses of
    the frame. Their uncertainty (the plan's source, refitted on the labels in now, with its
    fallbacks) gives their inclusion probabilities (`analytics.ppi.inclusion_probabilities`
    with the plan's uniform share) within the batch's share of the budget left, counted in
    expected draws (`uncertainty.batch_budget`); they are drawn with the generator of
    (seed, number), and the campaign records the draws (drawn responses get tasks now, or a
    draft's at activation).

    Refused (SelectionRefused) when the campaign is finished, no longer "sampled", every
    frame response is decided, or the budget is spent (lowered to what was spent)."""
    plan = SelectionPlan.objects.select_for_update().get(pk=plan.pk)
    done = SelectionBatch.objects.filter(plan=plan, number=number).first()
    if done is not None:
        return done, False
    last = max(SelectionBatch.objects.filter(plan=plan).values_list("number", flat=True), default=0)
    if number != last + 1:
        raise BatchStale(
            f"the next batch of this plan is {last + 1}, not {number}: the page was out of "
            "date (reload it)"
        )
    campaign = Campaign.objects.select_related("project", "dataset").get(pk=plan.campaign_id)
    if campaign.selection != CampaignSelection.SAMPLED:
        raise SelectionRefused("the campaign's selection is no longer sampled")
    if campaign.status == CampaignStatus.FINISHED:
        raise SelectionRefused("the campaign is finished: it draws no more responses")
    recorded = campaign_sample_rows(campaign=campaign)
    decided = {response_id for _, response_id, _, _ in recorded}
    spent = sum(p for _, _, p, _ in recorded)
    frame: list[int] = list(plan.frame)
    undecided = [i for i, pk in enumerate(frame) if pk not in decided]
    if not undecided:
        raise SelectionRefused("every response of the frame is decided")
    remaining = plan.budget - spent
    if remaining <= SPENT_TOLERANCE:
        raise SelectionRefused(
            f"the budget is spent: the batches drawn expect {spent:.2f} responses of "
            f"{plan.budget}; raise the budget to draw more"
        )
    targets = undecided[: plan.batch_size]
    share = uncertainty.batch_budget(remaining, len(targets), len(undecided))
    run_ids = sorted(plan.runs.values_list("pk", flat=True))
    inputs = frame_inputs(plan=plan, campaign=campaign, run_ids=run_ids)
    figures = uncertainty.uncertainty(
        plan.source,
        samples=inputs.samples,
        means=inputs.means,
        labels=inputs.labels,
        targets=targets,
        names=skill_names(campaign=campaign),
    )
    pi = inclusion_probabilities(figures.values, share, uniform_share=plan.uniform_share)
    drawn = uncertainty.draw(pi, seed=plan.seed, batch=number)
    ids = [frame[i] for i in targets]
    campaign_sample_record(
        campaign=campaign,
        batch=number,
        draws=[(pk, float(p), bool(d)) for pk, p, d in zip(ids, pi, drawn, strict=True)],
    )
    batch = SelectionBatch.objects.create(
        plan=plan,
        number=number,
        size=len(targets),
        budget=float(np.sum(pi)),
        drawn=int(drawn.sum()),
        p_min=float(pi.min()),
        p_max=float(pi.max()),
        source=plan.source,
        source_used=figures.source,
        note=figures.note[:300],
        labels=sum(1 for known in inputs.labels if known),
        plan_budget=plan.budget,
        batch_size=plan.batch_size,
        uniform_share=plan.uniform_share,
        fit=figures.fit,
        created_by=created_by,
    )
    return batch, True
