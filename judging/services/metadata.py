"""Metadata runs: a judge proposes each item's domains, three ranked skills and difficulty
(docs/METADATA.md). The same machinery as judge runs: an estimate and a snapshot of the
judge's settings at creation, a guarded state machine (pending -> running -> done, paused by
hand or by the budget, cancelled, failed by the health check), fan-out in batches of item
ids after commit, the response cache, the provider's shared rate limit and the engine's
retries with backoff (judging.llm.engine), and counters moved in the transaction that
records each answer.

Idempotent: a batch asks only about the items that lack this run's proposal, and records
under the run's row lock, so a redelivered or duplicated batch records nothing twice."""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from annotation.models import Dataset, ProposalStatus
from annotation.selectors import (
    item_count_for_metadata,
    item_ids_for_metadata,
    item_instructions,
    metadata_catalogue,
    metadata_proposal_items_present,
)
from annotation.services.metadata import ProposalSpec, metadata_proposals_record, run_origin
from flaskweb.infra import Outage, shutting_down
from judging import prompts
from judging.llm.activity import run_key
from judging.llm.engine import Batch, Call, Outcome
from judging.models import (
    JudgeConfig,
    JudgeKind,
    LLMCacheEntry,
    MetadataRun,
    PromptTemplate,
    RunStatus,
    TemplateSource,
)
from judging.prompts import metadata as metadata_prompt
from judging.services.batches import engine
from judging.services.calls import (
    NO_CALL,
    cache_key,
    chat_request,
    estimated_tokens,
    judge_access,
    limit_spec,
)
from judging.services.estimates import RunEstimate, token_prices, tokens_cost
from judging.services.providers import provider_usable_problem
from judging.services.runs import (
    BUDGET_REACHED,
    KEEP_BUDGET,
    SNAPSHOT_FIELDS,
    _snapshot,
    run_claim_start,
    run_status_set,
)
from judging.services.templates import json_digest
from judging.tasks import metadata_batch_task, metadata_run_dispatch_task

logger = logging.getLogger(__name__)

DISPATCH_PAGE = 256
#: Outcomes written per transaction at most.
WRITE_MANY = 50


# --- the prompt template ------------------------------------------------------------------------


def metadata_prompt_template() -> PromptTemplate:
    """The built-in metadata prompt as a versioned row (append-only, keyed by the hash of
    its texts): a new version is added when the wording changes."""
    system = metadata_prompt.METADATA_SYSTEM_PROMPT
    user = metadata_prompt.METADATA_USER_TEMPLATE
    digest = json_digest([system, user, metadata_prompt.METADATA_TEMPLATE_VERSION])
    key = metadata_prompt.METADATA_TEMPLATE_KEY
    latest = (
        PromptTemplate.objects.filter(project__isnull=True, key=key).order_by("-version").first()
    )
    if latest is not None and latest.content_hash == digest:
        return latest
    return PromptTemplate.objects.create(
        project=None,
        key=key,
        version=(latest.version + 1) if latest else 1,
        name="FLASK metadata: domains, three skills, difficulty",
        system_prompt=system,
        user_template=user,
        with_reference=False,
        source=TemplateSource.BUILTIN,
        content_hash=digest,
    )


def _catalogue(project) -> tuple[list, list]:
    catalogue = metadata_catalogue(project=project)
    skills = [metadata_prompt.CatalogueSkill(s.key, s.name, s.text) for s in catalogue.skills]
    domains = [
        metadata_prompt.CatalogueDomain(d.key, d.name, d.subdomains) for d in catalogue.domains
    ]
    return skills, domains


def _messages(run: MetadataRun, instruction: str, catalogue: tuple[list, list]) -> list[dict]:
    template = run.prompt_template
    return metadata_prompt.metadata_messages(
        instruction=instruction,
        skills=catalogue[0],
        domains=catalogue[1],
        system_prompt=template.system_prompt,
        user_template=template.user_template,
    )


# --- create, estimate, start, stop --------------------------------------------------------------


def run_metadata_judge(run: MetadataRun) -> JudgeConfig:
    """The run's judge as it was when the run was created (the snapshot over a copy)."""
    judge = copy.copy(run.judge)
    for name in SNAPSHOT_FIELDS:
        if name in run.settings_snapshot and name != "prompt_template":
            value = run.settings_snapshot[name]
            setattr(judge, name, Decimal(value) if name.startswith("price_") else value)
    judge.samples = 1
    return judge


def metadata_run_estimate(*, judge: JudgeConfig, dataset: Dataset) -> RunEstimate:
    """One call per item; prompt tokens from rendering up to 20 items, completion tokens
    from the judge's max_tokens (an upper bound)."""
    calls = item_count_for_metadata(dataset_id=dataset.pk)
    if not calls:
        return RunEstimate(0, 0, 0, Decimal(0))
    template = metadata_prompt_template()
    catalogue = _catalogue(dataset.project)
    sample = item_instructions(
        item_ids=item_ids_for_metadata(dataset_id=dataset.pk, after_id=0, limit=20)
    )
    tokens = []
    for instruction in sample.values():
        probe = MetadataRun(prompt_template=template)
        try:
            tokens.append(prompts.estimate_tokens(_messages(probe, instruction, catalogue)))
        except prompts.PromptError:
            continue
    prompt_tokens = int(sum(tokens) / len(tokens) * calls) if tokens else 0
    completion_tokens = judge.max_tokens * calls
    return RunEstimate(
        calls,
        prompt_tokens,
        completion_tokens,
        tokens_cost(judge, prompt_tokens, completion_tokens),
    )


@transaction.atomic
def metadata_run_create(
    *, judge: JudgeConfig, dataset: Dataset, budget: Decimal | None = None, created_by=None
) -> MetadataRun:
    """A pending metadata run of an LLM judge over every item of a dataset, with its
    estimate and the prompt template version it will use. Raises ValidationError."""
    if judge.kind != JudgeKind.LLM:
        raise ValidationError("only an LLM judge can propose metadata")
    if dataset.project_id != judge.project_id:
        raise ValidationError("the judge and the dataset belong to different projects")
    if budget is not None and budget < 0:
        raise ValidationError("the budget cannot be negative")
    estimate = metadata_run_estimate(judge=judge, dataset=dataset)
    return MetadataRun.objects.create(
        judge=judge,
        dataset=dataset,
        prompt_template=metadata_prompt_template(),
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


def metadata_run_start(*, run: MetadataRun, budget: Decimal | None | object = KEEP_BUDGET) -> bool:
    """pending/paused/failed -> running, then fan out on commit; False if not startable."""
    problem = provider_usable_problem(run.judge.provider, run.judge.project_id)
    if problem:
        raise ValidationError(problem)
    return run_claim_start(MetadataRun, run=run, budget=budget, dispatch=metadata_run_dispatch_task)


def metadata_run_set_status(*, run: MetadataRun, status: str) -> bool:
    """Pause or cancel (queued batches then do nothing); resume = start."""
    return run_status_set(MetadataRun, run=run, status=status)


def metadata_run_dispatch(*, run_id: int, after_id: int) -> int | None:
    """Enqueue batches for the next page of items; the cursor to go on from, or None."""
    run = MetadataRun.objects.get(pk=run_id)
    if run.status != RunStatus.RUNNING:
        return None
    size = settings.FLASKWEB_JUDGE_BATCH_SIZE
    page = max(DISPATCH_PAGE, size)
    ids = item_ids_for_metadata(dataset_id=run.dataset_id, after_id=after_id, limit=page)
    previous = after_id
    for start in range(0, len(ids), size):
        chunk = ids[start : start + size]
        metadata_batch_task.delay(run_id, previous, chunk[-1])
        previous = chunk[-1]
    if len(ids) < page:
        metadata_run_finish_if_complete(run_id=run_id)
        return None
    return ids[-1]


def metadata_run_finish_if_complete(*, run_id: int) -> None:
    MetadataRun.objects.filter(
        pk=run_id,
        status=RunStatus.RUNNING,
        total__lte=F("done") + F("failed") + F("parse_failed"),
    ).update(status=RunStatus.DONE, finished_at=timezone.now())


def metadata_runs_redispatch_stalled(*, older_than_seconds: int) -> list[int]:
    """Running metadata runs that recorded nothing for `older_than_seconds` (and were not
    swept in that time): their fan-out is enqueued again after commit, and each batch asks
    only about the items still without the run's proposal. This finishes a run whose worker
    was killed without waiting for the broker's visibility timeout. Each run is claimed by
    a conditional update, so two sweeps never both re-dispatch it. Returns the run ids."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    stalled = Q(status=RunStatus.RUNNING, updated_at__lt=cutoff) & (
        Q(redispatched_at__isnull=True) | Q(redispatched_at__lt=cutoff)
    )
    swept = []
    for run_id in MetadataRun.objects.filter(stalled).values_list("pk", flat=True):
        won = MetadataRun.objects.filter(stalled, pk=run_id).update(
            redispatched_at=timezone.now(), redispatches=F("redispatches") + 1
        )
        if won:
            swept.append(run_id)

            def redispatch(run_id: int = run_id) -> None:  # the default keeps this run_id
                metadata_run_dispatch_task.delay(run_id, 0)

            transaction.on_commit(redispatch)
    if swept:
        logger.warning("metadata runs %s stalled; their missing items are enqueued again", swept)
    return swept


def metadata_runs_fail_stale(*, older_than_seconds: int) -> int:
    """Fail runs stuck in running with no progress for a long time (all workers lost)."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    return MetadataRun.objects.filter(status=RunStatus.RUNNING, updated_at__lt=cutoff).update(
        status=RunStatus.FAILED, error="no progress for a long time; resume to go on"
    )


def _over_budget(run: MetadataRun) -> bool:
    """Whether the budget is used up; if so the run is paused with the reason."""
    if run.budget is None:
        return False
    cost = MetadataRun.objects.values_list("cost", flat=True).get(pk=run.pk)
    if cost < run.budget:
        return False
    MetadataRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
        status=RunStatus.PAUSED, error=BUDGET_REACHED
    )
    return True


# --- a batch ------------------------------------------------------------------------------------


def metadata_batch_range(*, run_id: int, after_id: int, last_id: int) -> int | None:
    """Ask about the items of run `run_id` with ids in (after_id, last_id] that lack its
    proposal. Returns the `after_id` of a follow-up range when the batch's time was up
    before every call started, else None. Raises MetadataRun.DoesNotExist."""
    run = MetadataRun.objects.select_related(
        "judge__provider", "prompt_template", "dataset__project"
    ).get(pk=run_id)
    if run.status != RunStatus.RUNNING or last_id <= after_id:
        return None
    ids = item_ids_for_metadata(dataset_id=run.dataset_id, after_id=after_id, limit=10_000)
    ids = [i for i in ids if i <= last_id]
    missing = set(ids) - metadata_proposal_items_present(origin=run_origin(run.pk), item_ids=ids)
    left = _ask(run, sorted(missing)) if missing else []
    metadata_run_finish_if_complete(run_id=run.pk)
    return min(left) - 1 if left else None


def _ask(run: MetadataRun, item_ids: list[int]) -> list[int]:
    judge = run_metadata_judge(run)
    recorder = _Recorder(run, judge)
    if _over_budget(run):
        return []
    access = judge_access(judge)
    if isinstance(access, str):
        for item_id in item_ids:
            recorder.add(item_id, "", {**NO_CALL, "error": access})
        recorder.flush()
        return []
    catalogue = _catalogue(run.dataset.project)
    instructions = item_instructions(item_ids=item_ids)
    planned = []
    for item_id in item_ids:
        try:
            messages = _messages(run, instructions.get(item_id, ""), catalogue)
        except prompts.PromptError as exc:
            recorder.add(item_id, "", {**NO_CALL, "error": f"prompt: {exc}"})
            continue
        request = chat_request(judge, messages, 0)
        planned.append(
            (item_id, messages, request, cache_key(access, judge.project_id, request, 0))
        )
    cached = dict(
        LLMCacheEntry.objects.filter(key__in=[p[3] for p in planned]).values_list("key", "content")
    )
    calls, asked = [], {}
    for item_id, messages, request, key in planned:
        if key in cached:
            recorder.add(item_id, key, {**NO_CALL, "content": cached[key], "from_cache": True})
            continue
        prompt_tokens = prompts.estimate_tokens(messages)
        calls.append(
            Call(
                key=item_id,
                request=replace(request, api_key=access.api_key),
                tokens=estimated_tokens(judge, messages),
                max_attempts=judge.max_attempts,
                cost=float(tokens_cost(judge, prompt_tokens, judge.max_tokens)),
                local=access.provider.is_local,
                prices=token_prices(judge),
            )
        )
        asked[item_id] = key
    recorder.flush()
    if not calls:
        return []
    if shutting_down():  # the worker is stopping: the next one asks about these items
        return sorted(asked)
    credit = None if run.budget is None else float(run.budget - Decimal(run.cost))
    batch = engine().submit(
        calls, limit=limit_spec(judge, access), credit=credit, run=run_key("metadata", run.pk)
    )
    try:
        stopped = _drain(run, batch, asked, recorder)
    except BaseException:
        batch.stop(grace=0)
        raise
    if stopped or not batch.unfinished:
        return []
    return sorted(int(k) for k in batch.unfinished)  # type: ignore[call-overload]


def _drain(run: MetadataRun, batch: Batch, asked: dict[int, str], recorder: _Recorder) -> bool:
    """Write the batch's answers as they come and read the run after each write; stop the
    batch when the run stops or its budget is used (returns True then), when its time is up
    or when the worker begins a warm shutdown (calls on the wire come back and are written;
    the caller hands the rest to a follow-up). The answers are paid for: while the database
    is away they wait in the recorder and every write is tried again after a jittered
    backoff (flaskweb.infra.Outage) until it goes through."""
    outage = Outage(f"metadata run {run.pk}: writing proposals")
    deadline = time.monotonic() + settings.FLASKWEB_JUDGE_TASK_SECONDS
    stopped = stopping = False
    released = 0.0  # reserved cost of the answers taken and not yet written

    def watch() -> None:
        nonlocal stopped, released
        recorder.flush()
        status, cost = MetadataRun.objects.values_list("status", "cost").get(pk=run.pk)
        if not stopped and (status != RunStatus.RUNNING or _over_budget(run)):
            stopped = True
            batch.stop(grace=settings.FLASKWEB_JUDGE_STOP_GRACE_SECONDS)
        elif run.budget is not None:
            batch.update_credit(float(run.budget - Decimal(cost)), released)
            released = 0.0

    while not batch.finished():
        outcomes: list[Outcome] = batch.take(timeout=0.25, max_items=WRITE_MANY)
        for outcome in outcomes:
            recorder.add_outcome(int(outcome.key), asked[int(outcome.key)], outcome)  # type: ignore[call-overload]
            released += outcome.cost
        outage.attempt(watch)
        if not stopping and shutting_down():
            stopping = True
            logger.info("metadata run %s: warm shutdown; the rest goes to a follow-up", run.pk)
            batch.stop(grace=settings.FLASKWEB_JUDGE_SHUTDOWN_GRACE_SECONDS)
        elif not stopping and time.monotonic() > deadline:
            stopping = True
            batch.stop(grace=None)
    while recorder.waiting and not outage.attempt(recorder.flush):
        outage.wait()
    return stopped


class _Recorder:
    """Answers waiting to be written; written with the run's counters and the cache
    entries in one transaction, under the run's row lock."""

    def __init__(self, run: MetadataRun, judge: JudgeConfig) -> None:
        self.run = run
        self.judge = judge
        self.catalogue = _catalogue(run.dataset.project)
        self.pending: list[tuple[int, str, dict]] = []
        self.cache: list[tuple[str, object]] = []

    def add(self, item_id: int, key: str, outcome: dict) -> None:
        self.pending.append((item_id, key, outcome))

    def add_outcome(self, item_id: int, key: str, outcome: Outcome) -> None:
        if outcome.result is not None:
            result = outcome.result
            self.cache.append((key, result))
            self.add(
                item_id,
                key,
                {
                    **NO_CALL,
                    "content": result.content,
                    "prompt_tokens": result.prompt_tokens,
                    "completion_tokens": result.completion_tokens,
                    "attempts": outcome.attempts,
                },
            )
        else:
            self.add(item_id, key, {**NO_CALL, "error": str(outcome.error)})

    @property
    def waiting(self) -> bool:
        return bool(self.pending or self.cache)

    def flush(self) -> None:
        """Write what is waiting in one transaction; it is dropped only once that commits
        (a write that fails, the database lost, is made again whole by the next flush)."""
        pending, cache = list(self.pending), list(self.cache)
        if not pending and not cache:
            return
        self._write(pending, cache)
        del self.pending[: len(pending)]
        del self.cache[: len(cache)]

    def _write(self, pending: list[tuple[int, str, dict]], cache: list) -> None:
        run, judge = self.run, self.judge
        provider = judge.provider
        with transaction.atomic():
            MetadataRun.objects.select_for_update().filter(pk=run.pk).exists()
            if cache and provider is not None:
                LLMCacheEntry.objects.bulk_create(
                    [
                        LLMCacheEntry(
                            key=key,
                            provider=provider,
                            project_id=None if provider.shared_cache else judge.project_id,
                            model=judge.model,
                            content=result.content,  # type: ignore[attr-defined]
                            finish_reason=result.finish_reason,  # type: ignore[attr-defined]
                            prompt_tokens=result.prompt_tokens,  # type: ignore[attr-defined]
                            completion_tokens=result.completion_tokens,  # type: ignore[attr-defined]
                        )
                        for key, result in cache
                    ],
                    ignore_conflicts=True,
                )
            present = metadata_proposal_items_present(
                origin=run_origin(run.pk), item_ids=[p[0] for p in pending]
            )
            specs: list[ProposalSpec] = []
            counts = {"done": 0, "failed": 0, "parse_failed": 0, "cached": 0}
            tokens = [0, 0]
            for item_id, _key, outcome in pending:
                if item_id in present:
                    continue
                present.add(item_id)
                spec = self._spec(item_id, outcome)
                specs.append(spec)
                status_counter = {
                    ProposalStatus.OK: "done",
                    ProposalStatus.PARSE_FAILED: "parse_failed",
                }.get(spec.status, "failed")  # type: ignore[call-overload]
                counts[status_counter] += 1
                counts["cached"] += 1 if outcome.get("from_cache") else 0
                if not outcome.get("from_cache"):
                    tokens[0] += outcome["prompt_tokens"]
                    tokens[1] += outcome["completion_tokens"]
            if not specs:
                return
            metadata_proposals_record(run_id=run.pk, label=judge.name, proposals=specs)
            MetadataRun.objects.filter(pk=run.pk).update(
                done=F("done") + counts["done"],
                failed=F("failed") + counts["failed"],
                parse_failed=F("parse_failed") + counts["parse_failed"],
                cached=F("cached") + counts["cached"],
                prompt_tokens=F("prompt_tokens") + tokens[0],
                completion_tokens=F("completion_tokens") + tokens[1],
                cost=F("cost") + tokens_cost(judge, tokens[0], tokens[1]),
                updated_at=timezone.now(),
            )

    def _spec(self, item_id: int, outcome: dict) -> ProposalSpec:
        if outcome.get("error"):
            return ProposalSpec(
                item_id=item_id, status=ProposalStatus.FAILED, error=outcome["error"]
            )
        content = outcome["content"]
        parsed = metadata_prompt.parse_metadata(
            content, skills=self.catalogue[0], domains=self.catalogue[1]
        )
        if not parsed.ok:
            return ProposalSpec(
                item_id=item_id,
                status=ProposalStatus.PARSE_FAILED,
                raw_output=content,
                error=parsed.error,
            )
        return ProposalSpec(
            item_id=item_id,
            status=ProposalStatus.OK,
            domains=parsed.domains,
            skills=parsed.skills,
            difficulty=parsed.difficulty,
            raw_output=content,
        )
