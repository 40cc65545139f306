"""A batch of judgments: the unit of work of judge_batch_task.

The missing judgments of a batch of responses in one run (each sample of an LLM judge or a
baseline, or both orders of a pair) are planned here, answered from the cache where they can
be, and the rest handed to this process's judging engine (judging.llm.engine), which keeps
many calls in flight at the provider's pace. This thread writes the outcomes as they come,
many per transaction, and watches the run: a pause, a cancel or a used-up budget stops the
batch within about a second; at FLASKWEB_JUDGE_TASK_SECONDS, or when its worker begins a warm
shutdown (flaskweb.infra.shutting_down), it launches nothing more, lets the calls on the wire
come back and writes them, and hands what it did not start to a follow-up task. When the
database goes away, the answers that come back meanwhile wait in memory and are written
when it is back (`_drain`): a restart costs no call and no judgment.

Idempotent: judgments are unique per (run, response, sample) and only missing ones are
planned, so a redelivered or duplicated batch records nothing twice."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from decimal import Decimal

from django.conf import settings
from django.db import transaction

from annotation.models import Response
from annotation.selectors import anchor_responses_for, responses_for_judging, skills_for_responses
from flaskweb.infra import Outage, shutting_down
from judging import prompts
from judging.llm.activity import run_key
from judging.llm.clients import ChatRequest, ChatResult
from judging.llm.engine import Batch, Call, Engine, Outcome
from judging.models import (
    JudgeConfig,
    JudgeKind,
    JudgeRun,
    Judgment,
    LLMCacheEntry,
    PairJudgment,
    RunStatus,
)
from judging.services.calls import (
    NO_CALL,
    Access,
    cache_key,
    chat_request,
    estimated_tokens,
    judge_access,
    limit_spec,
)
from judging.services.estimates import token_prices, tokens_cost
from judging.services.pairwise import pair_judgment_record
from judging.services.probe_prompts import (
    Probe,
    probe_pair_messages,
    probe_response_messages,
    run_probe,
)
from judging.services.prompting import (
    JudgedResponse,
    pair_messages,
    response_messages,
)
from judging.services.recording import Recorded, baseline_judge, judgments_record_many
from judging.services.runs import (
    judge_run_finish_if_complete,
    judge_run_pause_if_over_budget,
    run_judge,
    run_response_ids,
)

logger = logging.getLogger(__name__)

#: Outcomes are written when this many are waiting, or when the oldest has waited WRITE_EVERY.
WRITE_MANY = 100
WRITE_EVERY = 0.25
#: How often the run's status and spending are read while its batch runs (seconds).
WATCH_EVERY = 1.0


@dataclass(frozen=True)
class Unit:
    """One judgment to make: sample (or pair order) `sample` of `target`."""

    target: JudgedResponse
    sample: int
    anchor: Response | None = None  # pairwise: the anchor model's response


#: The calls of a batch by their engine key: the unit asked, the body sent, its cache key,
#: and the units of the batch whose request is the same (answered by the same call).
Asked = dict[int, tuple[Unit, dict, str, list[Unit]]]


def engine() -> Engine:
    """This process's judging engine."""
    return Engine.for_process(
        max_in_flight=settings.FLASKWEB_JUDGE_MAX_IN_FLIGHT,
        backoff_base=settings.FLASKWEB_JUDGE_BACKOFF_BASE_SECONDS,
        backoff_cap=settings.FLASKWEB_JUDGE_BACKOFF_CAP_SECONDS,
    )


def judge_batch_range(*, run_id: int, after_id: int, last_id: int) -> int | None:
    """judge_batch over the run's responses with ids in (after_id, last_id]. Returns the
    `after_id` of the follow-up range (last_id stays) when time was up before every
    response was started, else None. Raises JudgeRun.DoesNotExist."""
    run = JudgeRun.objects.select_related("campaign").get(pk=run_id)
    if last_id <= after_id:
        return None
    ids = run_response_ids(run, after_id=after_id, limit=last_id - after_id, last_id=last_id)
    left = judge_batch(run_id=run_id, response_ids=ids)
    return min(left) - 1 if left else None


def judge_batch(*, run_id: int, response_ids: list[int]) -> list[int]:
    """Make the missing judgments of `response_ids` in run `run_id`. Returns the responses
    left for a follow-up task (the batch's time was up before it started them); empty when
    it is complete or the run stopped. Raises JudgeRun.DoesNotExist."""
    run = JudgeRun.objects.select_related(
        "judge__prompt_template", "judge__provider", "campaign"
    ).get(pk=run_id)
    if run.status != RunStatus.RUNNING:
        return []
    run.judge = run_judge(run)  # every read of run.judge below sees the snapshot
    units = _plan(run, response_ids)
    if not units:
        judge_run_finish_if_complete(run_id=run.pk)
        return []
    if run.judge.kind == JudgeKind.BASELINE:
        _baselines(run, units)
        judge_run_finish_if_complete(run_id=run.pk)
        return []
    left = _llm(run, units)
    judge_run_finish_if_complete(run_id=run.pk)
    return left


def _plan(run: JudgeRun, response_ids: list[int]) -> list[Unit]:
    """The judgments of these responses that the run still lacks, in response order."""
    responses = responses_for_judging(response_ids=response_ids)
    if not responses:
        return []
    skills = skills_for_responses(responses=responses, campaign=run.campaign)
    ids = [r.pk for r in responses]
    units = []
    if run.pairwise_against:
        anchors = anchor_responses_for(responses=responses, anchor_model=run.pairwise_against)
        done = set(
            PairJudgment.objects.filter(run=run, response_id__in=ids).values_list(
                "response_id", "order"
            )
        )
        for response in responses:
            anchor = anchors.get(response.item_id)
            if anchor is None or anchor.pk == response.pk:
                continue
            target = JudgedResponse(response=response, skills=skills[response.pk])
            units += [
                Unit(target, order, anchor) for order in (0, 1) if (response.pk, order) not in done
            ]
        return units
    done = set(
        Judgment.objects.filter(run=run, response_id__in=ids).values_list(
            "response_id", "sample_index"
        )
    )
    for response in responses:
        target = JudgedResponse(response=response, skills=skills[response.pk])
        units += [
            Unit(target, sample)
            for sample in range(run.judge.samples)
            if (response.pk, sample) not in done
        ]
    return units


def _baselines(run: JudgeRun, units: list[Unit]) -> None:
    """Offline baselines: computed here, no call, no cost; stops at a pause or cancel."""
    watch = _Watch(run)
    for unit in units:
        if not watch.running():
            return
        baseline_judge(run, unit.target, unit.sample)


# --- LLM judges -------------------------------------------------------------------------------


def _llm(run: JudgeRun, units: list[Unit]) -> list[int]:
    judge = run.judge
    record = _Recorder(run)
    if judge_run_pause_if_over_budget(run=run):
        return []
    access = judge_access(judge)
    if isinstance(access, str):  # no call can be made: each judgment records why
        for unit in units:
            record.add(unit, {}, "", {**NO_CALL, "error": access})
        record.flush()
        return []
    calls, asked = _calls(run, units, access, record)
    record.flush()
    if not calls:
        return []
    if shutting_down():  # the worker is stopping: the next one makes these calls
        return _responses(asked, [call.key for call in calls])
    watch = _Watch(run)
    batch = engine().submit(
        calls, limit=limit_spec(judge, access), credit=watch.credit(), run=run_key("judge", run.pk)
    )
    deadline = time.monotonic() + settings.FLASKWEB_JUDGE_TASK_SECONDS
    try:
        _drain(batch, asked, record, watch, deadline)
    except BaseException:
        batch.stop(grace=0)  # e.g. the task's soft time limit: abandon what is on the wire
        raise
    if watch.stopped or not batch.unfinished:
        return []
    return _responses(asked, batch.unfinished)


def _responses(asked: Asked, keys: list) -> list[int]:
    """The responses of the calls `keys` (and of the units answered with them), sorted."""
    return sorted(
        unit.target.response.pk
        for key in keys
        for unit in [asked[int(key)][0], *asked[int(key)][3]]
    )


def _calls(
    run: JudgeRun, units: list[Unit], access: Access, record: _Recorder
) -> tuple[list[Call], Asked]:
    """The engine's calls for the units not answered by the cache (those are recorded)."""
    judge = run.judge
    probe = run_probe(run, sorted({unit.target.response.pk for unit in units}))
    planned: list[tuple[Unit, list[dict], ChatRequest, str]] = []
    for unit in units:
        try:
            messages = _messages(judge, unit, probe)
        except prompts.PromptError as exc:
            # e.g. a reference template on an item without a reference answer: recorded, so
            # the run still completes and the reason is on the judgment.
            record.add(unit, {}, "", {**NO_CALL, "error": f"prompt: {exc}"})
            continue
        request = chat_request(judge, messages, unit.sample)
        key = cache_key(access, judge.project_id, request, unit.sample)
        planned.append((unit, messages, request, key))
    cached = dict(
        LLMCacheEntry.objects.filter(key__in=[p[3] for p in planned]).values_list("key", "content")
    )
    calls: list[Call] = []
    asked: Asked = {}
    leaders: dict[str, int] = {}
    for index, (unit, messages, request, key) in enumerate(planned):
        body = request.body()
        if key in cached:
            record.add(unit, body, key, {**NO_CALL, "content": cached[key], "from_cache": True})
            continue
        if key in leaders:  # the same request twice in one batch: asked once, answered twice
            asked[leaders[key]][3].append(unit)
            continue
        leaders[key] = index
        tokens = estimated_tokens(judge, messages)
        prompt_tokens = prompts.estimate_tokens(messages)
        calls.append(
            Call(
                key=index,
                request=replace(request, api_key=access.api_key),
                tokens=tokens,
                max_attempts=judge.max_attempts,
                cost=float(tokens_cost(judge, prompt_tokens, judge.max_tokens)),
                local=access.provider.is_local,
                prices=token_prices(judge),
            )
        )
        asked[index] = (unit, body, key, [])
    return calls, asked


def _messages(judge: JudgeConfig, unit: Unit, probe: Probe | None) -> list[dict]:
    """What the judge is sent for one unit: of a probe run, with the probe's change."""
    if unit.anchor is not None:
        if probe is not None:
            return probe_pair_messages(
                judge=judge, target=unit.target, anchor=unit.anchor, order=unit.sample, probe=probe
            )
        return pair_messages(judge=judge, target=unit.target, anchor=unit.anchor, order=unit.sample)
    if probe is not None:
        return probe_response_messages(judge=judge, target=unit.target, probe=probe)
    return response_messages(judge=judge, target=unit.target)


def _drain(
    batch: Batch,
    asked: Asked,
    record: _Recorder,
    watch: _Watch,
    deadline: float,
) -> None:
    """Write the batch's outcomes as they come; stop it when the run stops, time is up or
    the worker begins a warm shutdown.

    The outcomes are answers already paid for, so a lost database does not throw them
    away: they wait in the recorder while the batch goes on (its calls on the wire come
    back, its budget credit is held by what is unwritten), and every write is tried again
    after a jittered backoff (flaskweb.infra.Outage) until it goes through, within about
    FLASKWEB_INFRA_BACKOFF_CAP_SECONDS of the database coming back; past
    FLASKWEB_INFRA_RETRY_SECONDS of failures it gives up (Unavailable). Writes are
    idempotent (judgments are unique per run, response and sample), so a write whose
    commit went unconfirmed is not made twice."""
    outage = Outage(f"run {watch.run.pk}: writing judgments")
    oldest = 0.0
    released = 0.0  # reserved cost of the outcomes taken and not yet written
    stopping = False
    while not batch.finished():
        outcomes = batch.take(timeout=0.05)
        if outcomes:
            if not record.waiting:
                oldest = time.monotonic()
            released += _record(outcomes, asked, record)
        now = time.monotonic()
        if record.waiting and (
            len(record.items) >= WRITE_MANY or now - oldest >= WRITE_EVERY or batch.finished()
        ):
            if outage.attempt(record.flush):
                watch.released(released)
                released = 0.0
                outage.attempt(lambda: watch.check(batch, force=True))
        elif watch.due():
            outage.attempt(lambda: watch.check(batch))
        if not stopping and shutting_down():
            stopping = True
            logger.info(
                "run %s: the worker is shutting down; the rest goes to a follow-up task",
                watch.run.pk,
            )
            batch.stop(grace=settings.FLASKWEB_JUDGE_SHUTDOWN_GRACE_SECONDS)
        elif not stopping and now > deadline:
            stopping = True
            logger.info("run %s: batch time is up; the rest goes to a follow-up task", watch.run.pk)
            batch.stop(grace=None)  # calls on the wire end by their own timeout
    while record.waiting and not outage.attempt(record.flush):
        outage.wait()


def _record(outcomes: list[Outcome], asked: Asked, record: _Recorder) -> float:
    """Hand outcomes to the recorder (nothing is written yet); returns the cost the engine
    reserved for them."""
    for outcome in outcomes:
        unit, body, key, followers = asked[int(outcome.key)]  # type: ignore[call-overload]
        if outcome.result is not None:
            result = outcome.result
            record.add(
                unit,
                body,
                key,
                {
                    "content": result.content,
                    "prompt_tokens": result.prompt_tokens,
                    "completion_tokens": result.completion_tokens,
                    "latency_ms": result.latency_ms,
                    "attempts": outcome.attempts,
                },
            )
            record.cache.append((key, result))
            for follower in followers:  # as the cache would have answered it
                answer = {**NO_CALL, "content": result.content, "from_cache": True}
                record.add(follower, body, key, answer)
        else:
            error = outcome.error
            assert error is not None
            record.add(
                unit,
                body,
                key,
                {
                    **NO_CALL,
                    "latency_ms": error.latency_ms,
                    "attempts": outcome.attempts,
                    "error": str(error),
                },
            )
            for follower in followers:
                failed = {**NO_CALL, "error": f"{error} (the same request as another judgment)"}
                record.add(follower, body, key, failed)
    return sum(o.cost for o in outcomes)


class _Recorder:
    """Outcomes waiting to be written, and the write: judgments many at a time, pair
    judgments one by one, answers into the cache, in one transaction. What is waiting is
    dropped only once its transaction commits: a write that fails (the database lost) is
    made again, whole, by the next flush."""

    def __init__(self, run: JudgeRun) -> None:
        self.run = run
        self.items: list[tuple[Unit, Recorded]] = []
        self.cache: list[tuple[str, ChatResult]] = []

    @property
    def waiting(self) -> bool:
        return bool(self.items or self.cache)

    def add(self, unit: Unit, body: dict, key: str, outcome: dict) -> None:
        self.items.append((unit, Recorded(unit.target, unit.sample, body, key, outcome)))

    def flush(self) -> None:
        items, cache = list(self.items), list(self.cache)
        if not items and not cache:
            return
        run = self.run
        judge = run.judge
        provider = judge.provider
        with transaction.atomic():
            if cache and provider is not None:
                LLMCacheEntry.objects.bulk_create(
                    [
                        LLMCacheEntry(
                            key=key,
                            provider=provider,
                            project_id=None if provider.shared_cache else judge.project_id,
                            model=judge.model,
                            content=result.content,
                            finish_reason=result.finish_reason,
                            prompt_tokens=result.prompt_tokens,
                            completion_tokens=result.completion_tokens,
                        )
                        for key, result in cache
                    ],
                    ignore_conflicts=True,
                )
            singles = [item for unit, item in items if unit.anchor is None]
            if singles:
                judgments_record_many(run, singles)
            for unit, item in items:
                if unit.anchor is not None:
                    pair_judgment_record(
                        run,
                        item.target,
                        unit.anchor,
                        item.sample,
                        item.body,
                        item.key,
                        **item.outcome,
                    )
        del self.items[: len(items)]
        del self.cache[: len(cache)]


class _Watch:
    """The run as this batch last read it: still running, and what its budget leaves."""

    def __init__(self, run: JudgeRun) -> None:
        self.run = run
        self.stopped = False
        self.status = run.status
        self.cost = run.cost
        self._read_at = time.monotonic()
        self._released = 0.0

    def _read(self) -> None:
        self.status, self.cost = JudgeRun.objects.values_list("status", "cost").get(pk=self.run.pk)
        self._read_at = time.monotonic()

    def running(self) -> bool:
        if self.due():
            self._read()
        return self.status == RunStatus.RUNNING

    def due(self) -> bool:
        return time.monotonic() - self._read_at >= WATCH_EVERY

    def credit(self) -> float | None:
        if self.run.budget is None:
            return None
        return float(self.run.budget - Decimal(self.cost))

    def released(self, cost: float) -> None:
        """Outcomes whose reserved cost adds up to `cost` are written: the next check
        hands it back to the engine with the credit it reads."""
        self._released += cost

    def check(self, batch: Batch, force: bool = False) -> None:
        """Read the run; stop the batch if it was paused or cancelled, or its budget is used
        up (pausing it), else tell the engine the credit left."""
        if self.stopped or not (force or self.due()):
            return
        self._read()
        if self.status != RunStatus.RUNNING:
            self._stop(batch)
            return
        if self.run.budget is not None:
            if judge_run_pause_if_over_budget(run=self.run):
                self._stop(batch)
                return
            batch.update_credit(self.credit(), self._released)
            self._released = 0.0

    def _stop(self, batch: Batch) -> None:
        self.stopped = True
        batch.stop(grace=settings.FLASKWEB_JUDGE_STOP_GRACE_SECONDS)
