"""The life of a judge run: create (with its estimate and a snapshot of its judge's
settings), start or resume, pause or cancel, fan out in batches, the budget stop, finish,
and the sweeps that re-dispatch stalled runs and fail dead ones.

A run is a job row with a guarded state machine: every transition is a conditional update,
so two workers (or a late message) never both win it; tasks are enqueued after commit."""

from __future__ import annotations

import copy
import logging
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, F, Q, QuerySet
from django.utils import timezone

from annotation.models import Campaign, Dataset
from annotation.selectors import dataset_has_model, pair_challenger_ids, response_ids_for_run
from judging.models import (
    JudgeConfig,
    JudgeKind,
    JudgeRun,
    Judgment,
    PairJudgment,
    PromptTemplate,
    RunStatus,
)
from judging.services.estimates import judge_run_estimate, pair_run_estimate
from judging.services.probe_prompts import probe_run_response_ids
from judging.services.providers import provider_usable_problem
from judging.tasks import judge_batch_task, judge_run_dispatch_task

logger = logging.getLogger(__name__)

#: Responses read per dispatch step; they are enqueued in batches of FLASKWEB_JUDGE_BATCH_SIZE.
DISPATCH_BATCH = 256
BUDGET_REACHED = "budget reached; raise it and resume to go on"


@transaction.atomic
def judge_run_create(
    *,
    judge: JudgeConfig,
    dataset: Dataset | None = None,
    campaign: Campaign | None = None,
    budget: Decimal | None = None,
    pairwise_against: str = "",
    created_by=None,
) -> JudgeRun:
    """A pending run over a campaign's responses (same items and skills the people score)
    or a whole dataset's, with its estimate. With `pairwise_against` (a model name of the
    dataset) it compares every other model's response with that model's response to the
    same item, in both orders, instead of scoring responses one by one."""
    if campaign is not None:
        dataset = campaign.dataset
    if dataset is None:
        raise ValidationError("a run needs a dataset or a campaign")
    if dataset.project_id != judge.project_id:
        raise ValidationError("the judge and the dataset belong to different projects")
    pairwise_against = (pairwise_against or "").strip()
    if pairwise_against:
        if judge.kind != JudgeKind.LLM:
            raise ValidationError("only an LLM judge can compare responses pairwise")
        if not dataset_has_model(dataset_id=dataset.pk, model_name=pairwise_against):
            raise ValidationError(f"the dataset has no responses of model {pairwise_against!r}")
        estimate = pair_run_estimate(
            judge=judge, dataset=dataset, campaign=campaign, anchor_model=pairwise_against
        )
    else:
        estimate = judge_run_estimate(judge=judge, dataset=dataset, campaign=campaign)
    run = JudgeRun.objects.create(
        judge=judge,
        dataset=dataset,
        campaign=campaign,
        pairwise_against=pairwise_against,
        total=estimate.calls,
        budget=budget,
        estimate={
            "calls": estimate.calls,
            "prompt_tokens": estimate.prompt_tokens,
            "completion_tokens": estimate.completion_tokens,
            "cost": str(estimate.cost),
        },
        settings_snapshot=_snapshot(judge),
        created_by=created_by,
    )
    return run


#: What a run takes from its judge when it is created, and keeps: editing a judge (another
#: model, temperature, template version, prices...) never changes a run already made. The
#: key's variable name, timeouts, attempts and rate limits are read live: they are how to
#: reach the provider, not what is asked of it.
SNAPSHOT_FIELDS = (
    "kind",
    "base_url",
    "model",
    "temperature",
    "max_tokens",
    "extra_params",
    "samples",
    "prompt_template",
    "use_reference",
    "baseline",
    "price_per_1k_prompt",
    "price_per_1k_completion",
)


def _snapshot(judge: JudgeConfig) -> dict:
    snapshot = {name: getattr(judge, name) for name in SNAPSHOT_FIELDS if name != "prompt_template"}
    snapshot["prompt_template"] = judge.prompt_template_id
    for price in ("price_per_1k_prompt", "price_per_1k_completion"):
        snapshot[price] = str(snapshot[price])
    return snapshot


def run_judge(run: JudgeRun) -> JudgeConfig:
    """The run's judge as it was when the run was created (its settings_snapshot laid over
    a copy of the live row; the row itself is not touched)."""
    judge = copy.copy(run.judge)
    snapshot = run.settings_snapshot or {}
    for name in SNAPSHOT_FIELDS:
        if name not in snapshot or name == "prompt_template":
            continue
        value = snapshot[name]
        if name.startswith("price_"):
            value = Decimal(value)
        setattr(judge, name, value)
    template_id = snapshot.get("prompt_template")
    if template_id and template_id != judge.prompt_template_id:
        judge.prompt_template = PromptTemplate.objects.get(pk=template_id)
    return judge


#: judge_run_start(budget=KEEP_BUDGET) leaves the run's budget as it is.
KEEP_BUDGET = object()

#: The statuses a run may start (or resume) from.
STARTABLE = (RunStatus.PENDING, RunStatus.PAUSED, RunStatus.FAILED)


def run_claim_start(model, *, run, budget, dispatch) -> bool:
    """pending/paused/failed -> running by one conditional update (of a judge or metadata
    run, `model`), then `dispatch.delay(run.pk, 0)` on commit. False if not startable."""
    now = timezone.now()
    # updated_at is "last progress" for the stall sweep and the health check: a run resumed
    # after a long pause has made no progress yet, but it has not stalled either.
    changes: dict = {"status": RunStatus.RUNNING, "started_at": now, "updated_at": now, "error": ""}
    if budget is not KEEP_BUDGET:
        changes["budget"] = budget
    won = model.objects.filter(pk=run.pk, status__in=STARTABLE).update(**changes)
    if won:
        transaction.on_commit(lambda: dispatch.delay(run.pk, 0))
    return bool(won)


def run_status_set(model, *, run, status: str) -> bool:
    """Pause a running run or cancel an unfinished one (of `model`); queued batches then do
    nothing, and resuming is starting again. Raises ValidationError for another status."""
    allowed: dict[str, list[str]] = {
        RunStatus.PAUSED: [RunStatus.RUNNING],
        RunStatus.CANCELLED: [RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.PENDING],
    }
    if status not in allowed:
        raise ValidationError(f"a run cannot be set to {status!r}")
    return bool(
        model.objects.filter(pk=run.pk, status__in=allowed[status]).update(
            status=status, finished_at=timezone.now() if status == RunStatus.CANCELLED else None
        )
    )


def judge_run_start(*, run: JudgeRun, budget: Decimal | None | object = KEEP_BUDGET) -> bool:
    """pending/paused/failed -> running, then fan out on commit. False if it was not
    startable. Resuming a run paused by its budget needs a higher `budget` (None = no limit);
    a failed run (no progress for a long time) resumes where it stopped, as judgments are
    idempotent."""
    judge = run.judge
    if judge.kind == JudgeKind.LLM:
        problem = provider_usable_problem(judge.provider, judge.project_id)
        if problem:
            raise ValidationError(problem)
    return run_claim_start(JudgeRun, run=run, budget=budget, dispatch=judge_run_dispatch_task)


def judge_run_set_status(*, run: JudgeRun, status: str) -> bool:
    """Pause or cancel a running run (queued tasks then do nothing); resume = start."""
    return run_status_set(JudgeRun, run=run, status=status)


def judge_run_dispatch(*, run_id: int, after_id: int, missing_only: bool = False) -> int | None:
    """Enqueue judge batches for the next page of responses; return the cursor to continue
    from, or None when the fan-out is complete (or the run stopped). A batch is a range of
    response ids, (after, last]: its task judges what is missing there. With `missing_only`
    (the stall sweep), only batches holding a response whose judgments are not all recorded
    are enqueued."""
    run = JudgeRun.objects.select_related("campaign", "judge").get(pk=run_id)
    if run.status != RunStatus.RUNNING:
        return None
    size = settings.FLASKWEB_JUDGE_BATCH_SIZE
    page = max(DISPATCH_BATCH, size)
    ids = run_response_ids(run, after_id=after_id, limit=page)
    missing = set(_responses_missing(run, ids)) if missing_only else None
    previous = after_id
    for start in range(0, len(ids), size):
        chunk = ids[start : start + size]
        if missing is None or missing.intersection(chunk):
            judge_batch_task.delay(run_id, previous, chunk[-1])
        previous = chunk[-1]
    if len(ids) < page:
        judge_run_finish_if_complete(run_id=run_id)
        return None
    return ids[-1]


def run_response_ids(
    run: JudgeRun, *, after_id: int, limit: int, last_id: int | None = None
) -> list[int]:
    """The responses a run judges, by id, after `after_id` (up to `last_id`): a campaign's
    models only; for a pairwise run, the challengers (each stands for both orders); for a
    probe run, its base run's (or the probe's sample of them)."""
    if run.probe:
        return probe_run_response_ids(run, after_id=after_id, limit=limit, last_id=last_id)
    models = run.campaign.model_names if run.campaign else None
    if run.pairwise_against:
        return pair_challenger_ids(
            dataset_id=run.dataset_id,
            anchor_model=run.pairwise_against,
            model_names=models,
            after_id=after_id,
            limit=limit,
            last_id=last_id,
        )
    return response_ids_for_run(
        dataset_id=run.dataset_id,
        model_names=models,
        after_id=after_id,
        limit=limit,
        last_id=last_id,
    )


def _responses_missing(run: JudgeRun, response_ids: list[int]) -> list[int]:
    """The responses among `response_ids` that still lack a judgment (a sample, or an
    order of their pair) in `run`."""
    rows: QuerySet[PairJudgment] | QuerySet[Judgment]
    if run.pairwise_against:
        rows, wanted = PairJudgment.objects.filter(run=run), 2
    else:
        rows, wanted = Judgment.objects.filter(run=run), run_judge(run).samples
    complete = set(
        rows.filter(response_id__in=response_ids)
        .values("response_id")
        .annotate(n=Count("id"))
        .filter(n__gte=wanted)
        .values_list("response_id", flat=True)
    )
    return [rid for rid in response_ids if rid not in complete]


def judge_runs_redispatch_stalled(*, older_than_seconds: int) -> list[int]:
    """Runs still `running` that recorded no judgment for `older_than_seconds`, and were
    not swept in that time either: their missing judgments are enqueued again (after
    commit). This is what finishes a run whose worker was killed: its unacknowledged
    messages would come back only after the broker's visibility timeout (an hour with
    Redis). Safe to repeat: judgments are unique per (run, response, sample), so a message
    that does come back later finds its judgment and does nothing. Each run is claimed by
    a conditional update, so two sweeps never both re-dispatch it. Returns the run ids."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    stalled = Q(status=RunStatus.RUNNING, updated_at__lt=cutoff) & (
        Q(redispatched_at__isnull=True) | Q(redispatched_at__lt=cutoff)
    )
    swept = []
    for run_id in JudgeRun.objects.filter(stalled).values_list("pk", flat=True):
        won = JudgeRun.objects.filter(stalled, pk=run_id).update(
            redispatched_at=timezone.now(), redispatches=F("redispatches") + 1
        )
        if won:
            swept.append(run_id)

            def redispatch(run_id: int = run_id) -> None:  # the default keeps this run_id
                judge_run_dispatch_task.delay(run_id, 0, True)

            transaction.on_commit(redispatch)
    if swept:
        logger.warning("judge runs %s stalled; their missing judgments are enqueued again", swept)
    return swept


def judge_run_finish_if_complete(*, run_id: int) -> None:
    """running -> done once every judgment is recorded. The counters move in the transaction
    that inserts each judgment, so their sum is the count of the run's rows: one UPDATE,
    whatever the run's size (counting the rows on every task grew with the run)."""
    JudgeRun.objects.filter(
        pk=run_id,
        status=RunStatus.RUNNING,
        total__lte=F("done") + F("failed") + F("parse_failed"),
    ).update(status=RunStatus.DONE, finished_at=timezone.now())


def judge_runs_fail_stale(*, older_than_seconds: int) -> int:
    """Fail runs stuck in running with no progress for a long time (all workers lost)."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    return JudgeRun.objects.filter(status=RunStatus.RUNNING, updated_at__lt=cutoff).update(
        status=RunStatus.FAILED, error="no progress for a long time; resume to go on"
    )


def judge_run_cost(*, run_id: int) -> Decimal:
    """What the run has spent so far (its counter, moved with every judgment)."""
    return JudgeRun.objects.values_list("cost", flat=True).get(pk=run_id)


def judge_run_pause_if_over_budget(*, run: JudgeRun) -> bool:
    """Whether the run's budget is used up, read before every call: if so, the run goes
    running -> paused (a conditional update, with the reason as its error) and the caller
    makes no more calls. Resuming needs a higher budget (judge_run_start)."""
    if run.budget is None or judge_run_cost(run_id=run.pk) < run.budget:
        return False
    JudgeRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
        status=RunStatus.PAUSED, error=BUDGET_REACHED
    )
    return True
