"""Judge configurations and runs: create, estimate, start, pause/cancel/resume, and judge one
response (the unit of work of a Celery task).

Contract of a run (see docs/JUDGING.md):
- Idempotent by construction: a judgment is keyed by (run, response, sample index), so a
  redelivered or duplicated task finds its judgment and does nothing; counters move only in
  the transaction that inserts the judgment.
- Every call is accounted for: the effective request (no API key), raw output, tokens,
  latency, attempts and the prompt template version are stored with the judgment; a call
  that fails for good is stored as `failed`, an answer that cannot be parsed as
  `parse_failed` with its raw text — never coerced into a score.
- Identical requests (same messages, model, parameters, sample index) are answered from
  LLMCacheEntry, so re-runs and resumed runs cost nothing.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import random
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from annotation.models import Campaign, Dataset, Project, Response
from annotation.names import NameRefused, NameScope, name_clean
from annotation.selectors import (
    anchor_response_for,
    dataset_has_model,
    pair_challenger_count,
    pair_challenger_ids,
    response_count_for_run,
    response_for_judging,
    response_ids_for_run,
    skills_for_response,
)
from judging import outbound, pairwise, prompts
from judging.clients import ChatRequest, JudgeError, OpenAICompatibleClient
from judging.models import (
    JudgeConfig,
    JudgeKind,
    JudgeRun,
    JudgeScore,
    Judgment,
    JudgmentStatus,
    LLMCacheEntry,
    PairJudgment,
    PromptTemplate,
    Provider,
    RunStatus,
    TemplateSource,
)
from judging.ratelimit import key_fingerprint

logger = logging.getLogger(__name__)

DISPATCH_BATCH = 200
#: Exponential backoff with full jitter for retryable errors without Retry-After.
BACKOFF_BASE_SECONDS = 2.0
BACKOFF_CAP_SECONDS = 120.0


class RetryLater(Exception):
    """The call should be tried again after `countdown` seconds (the task re-queues).
    `counts`: whether this used up an attempt (a failed call) or not (waiting for quota)."""

    def __init__(self, countdown: float, reason: str, *, counts: bool = True) -> None:
        super().__init__(reason)
        self.countdown = countdown
        self.counts = counts


# --- templates and configs ----------------------------------------------------------------------


def prompt_template_builtin(*, with_reference: bool) -> PromptTemplate:
    """The built-in FLASK-style template (project wording) as a versioned row."""
    text = prompts.builtin_template(with_reference=with_reference)
    key = "flask-reference" if with_reference else "flask-no-reference"
    digest = _hash([text.system_prompt, text.user_template, with_reference])
    existing = PromptTemplate.objects.filter(project__isnull=True, key=key).order_by("-version")
    latest = existing.first()
    if latest is not None and latest.content_hash == digest:
        return latest
    return PromptTemplate.objects.create(
        project=None,
        key=key,
        version=(latest.version + 1) if latest else 1,
        name="FLASK judge, " + ("with" if with_reference else "without") + " reference answer",
        system_prompt=text.system_prompt,
        user_template=text.user_template,
        with_reference=with_reference,
        source=TemplateSource.BUILTIN,
        content_hash=digest,
    )


def prompt_template_save(
    *,
    project: Project,
    template: prompts.PromptTemplate,
    name: str,
    source: str,
    created_by=None,
) -> tuple[PromptTemplate, bool]:
    """Save `template` as a version of the project's template `template.key`. Append-only:
    when the latest version has the same content hash it is returned (created=False);
    otherwise the text becomes version latest + 1. Two saves racing for one version number
    meet on the unique constraint, and the loser retries on top of the winner's row."""
    for _ in range(3):
        latest = (
            PromptTemplate.objects.filter(project=project, key=template.key)
            .order_by("-version")
            .first()
        )
        if latest is not None and latest.content_hash == template.content_hash:
            return latest, False
        row = PromptTemplate(
            project=project,
            key=template.key,
            version=(latest.version + 1) if latest else 1,
            name=(name or template.key)[:200],
            system_prompt=template.system_prompt,
            user_template=template.user_template,
            with_reference=template.with_reference,
            source=source,
            content_hash=template.content_hash,
            created_by=created_by,
        )
        row.full_clean(validate_constraints=False)
        try:
            with transaction.atomic():
                row.save()
        except IntegrityError:
            continue
        return row, True
    raise ValidationError("the template was saved by someone else meanwhile; try again")


def prompt_template_create(
    *,
    project: Project,
    key: str,
    name: str,
    user_template: str,
    system_prompt: str | None = None,
    created_by=None,
) -> tuple[PromptTemplate, bool]:
    """A custom template (see prompt_template_save for versioning). Raises
    prompts.TemplateError, naming the line of every bad placeholder."""
    template = prompts.PromptTemplate.from_text(user_template, key=key, system_prompt=system_prompt)
    return prompt_template_save(
        project=project,
        template=template,
        name=name,
        source=TemplateSource.CUSTOM,
        created_by=created_by,
    )


@transaction.atomic
def prompt_template_import(
    *, project: Project, text: str, created_by=None
) -> list[tuple[PromptTemplate, bool]]:
    """Every prompt of a FLASK review-prompt file (judging.prompts.import_flask_prompt_file),
    keyed flask-file-<prompt_id>, or none: raises prompts.PromptFileError listing the bad
    lines. Unchanged prompts keep their version."""
    return [
        prompt_template_save(
            project=project,
            template=template,
            name=template.description or template.key,
            source=TemplateSource.IMPORT,
            created_by=created_by,
        )
        for template in prompts.import_flask_prompt_file(text)
    ]


# --- providers ---------------------------------------------------------------------------------

ENV_VAR_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
#: Variables of the server itself that no provider may name, whoever declares it: a typo
#: or a careless admin would otherwise send the site's own secrets as a bearer token.
SERVER_VARIABLES = re.compile(
    r"(DJANGO_|DATABASE_|REDIS_|CELERY_|POSTGRES|PG[A-Z]*$|AWS_|GOOGLE_APPLICATION"
    r"|HOME$|PATH$|USER$|SHELL$|PWD$|HOSTNAME$)"
)


def provider_problems(
    *, base_urls, api_key_env: str, api_key_file: str, is_local: bool, prices
) -> dict[str, str]:
    """What is wrong with a provider's settings, per field (the admin form, the command and
    provider_save alike). Base URLs of a provider that is not local must resolve to public
    addresses now (and are checked again at every connection: judging.outbound)."""
    errors: dict[str, str] = {}
    if (
        not isinstance(base_urls, list)
        or not base_urls
        or not all(isinstance(u, str) and u for u in base_urls)
    ):
        errors["base_urls"] = 'Give a list of base URLs, e.g. ["https://api.openai.com/v1"].'
    else:
        for url in base_urls:
            problem = outbound.url_problem(url)
            if not problem and not is_local:
                parts = url.split("//", 1)[1].split("/", 1)[0]
                host = parts.rsplit("@", 1)[-1]
                host = host[1:].split("]", 1)[0] if host.startswith("[") else host.split(":")[0]
                problem = outbound.host_problem(host)
                if problem:
                    problem += "; mark the provider as local if that is intended"
            if problem:
                errors["base_urls"] = f"{url}: {problem}"
                break
    if api_key_env and api_key_file:
        errors["api_key_file"] = "Give the key's environment variable or a secret file, not both."
    if api_key_env:
        if not ENV_VAR_NAME.fullmatch(api_key_env):
            errors["api_key_env"] = (
                "Enter the NAME of an environment variable (capital letters, digits and _), "
                "never the key itself."
            )
        elif api_key_env.endswith("_FILE"):
            errors["api_key_env"] = (
                f"Enter {api_key_env.removesuffix('_FILE')}: the workers read {api_key_env} "
                "by themselves."
            )
        elif SERVER_VARIABLES.match(api_key_env):
            errors["api_key_env"] = f"{api_key_env} is one of the server's own settings."
    if api_key_file and not api_key_file.startswith("/"):
        errors["api_key_file"] = "Give an absolute path, e.g. /run/secrets/openai_key."
    if not isinstance(prices, dict) or not all(
        isinstance(v, dict) and set(v) <= {"prompt", "completion"} for v in prices.values()
    ):
        errors["prices"] = (
            'Prices per 1k tokens by model ("*" for any): '
            '{"gpt-4o": {"prompt": "0.0025", "completion": "0.01"}}.'
        )
    else:
        try:
            for v in prices.values():
                for price in v.values():
                    if Decimal(str(price)) < 0:
                        raise ValueError
        except (ArithmeticError, ValueError):
            errors["prices"] = 'Prices are non-negative numbers, e.g. "0.0025".'
    return errors


def provider_save(*, provider: Provider) -> Provider:
    """Validate and save a provider (site admins only: the admin and judge_provider)."""
    errors = provider_problems(
        base_urls=provider.base_urls,
        api_key_env=provider.api_key_env,
        api_key_file=provider.api_key_file,
        is_local=provider.is_local,
        prices=provider.prices,
    )
    if errors:
        raise ValidationError(errors)
    provider.full_clean()
    provider.save()
    return provider


def provider_usable_problem(provider: Provider | None, project_id: int) -> str:
    """Why judges of project `project_id` may not call `provider` now, or ""."""
    if provider is None:
        return "the judge has no provider: a site admin must declare one"
    if not provider.approved:
        return f"provider {provider.name} awaits a site admin's approval"
    allowed = list(provider.projects.values_list("pk", flat=True))
    if allowed and project_id not in allowed:
        return f"provider {provider.name} is not offered to this project"
    return ""


def provider_api_key(provider: Provider) -> str:
    """The provider's key, read on the worker from the variable or file a site admin
    declared; never stored, never logged. "" for a provider that needs none."""
    path = provider.api_key_file
    if provider.api_key_env and not path:
        path = os.environ.get(f"{provider.api_key_env}_FILE", "")
    if path:
        try:
            value = Path(path).read_text().strip()
        except OSError:
            value = ""
    else:
        value = os.environ.get(provider.api_key_env, "") if provider.api_key_env else ""
    if provider.needs_key and not value:
        raise JudgeError(
            f"the key of provider {provider.name} is not available on the judging workers "
            "(a site admin must set it)",
            retryable=False,
            code="no_key",
        )
    return value


def provider_price(provider: Provider | None, model: str) -> tuple[Decimal, Decimal] | None:
    """The provider's price per 1k prompt and completion tokens of `model` ("*" = any)."""
    if provider is None:
        return None
    entry = provider.prices.get(model) or provider.prices.get("*")
    if not entry:
        return None
    return Decimal(str(entry.get("prompt", 0))), Decimal(str(entry.get("completion", 0)))


# --- judges -------------------------------------------------------------------------------------


def judge_name_check(*, project: Project, name: str) -> str:
    """A new judge's name as annotation.names takes every name (NFKC, no invisible or
    control characters), and not a look-alike of another judge of the project; raises
    ValidationError on the name field."""
    try:
        name = name_clean(name, what="the judge's name")
    except NameRefused as exc:
        raise ValidationError({"name": str(exc)}) from None
    stored = JudgeConfig.objects.filter(project=project).values_list("name", flat=True)
    why = NameScope("judge", stored).check(name)
    if why is not None:
        raise ValidationError({"name": why})
    return name


@transaction.atomic
def judge_config_create(*, project: Project, name: str, kind: str, **fields) -> JudgeConfig:
    """Create a judge. LLM judges need a provider offered to the project and a model (and
    may pick one of the provider's base URLs; default: its first); the provider's price
    table, where it has one, sets the prices. Baselines name their metric."""
    name = judge_name_check(project=project, name=name)
    judge = JudgeConfig(project=project, name=name, kind=kind, **fields)
    if kind == JudgeKind.LLM:
        if judge.provider is None or not judge.model:
            raise ValidationError("an LLM judge needs a provider and a model")
        problem = provider_usable_problem(judge.provider, project.pk)
        if problem:
            raise ValidationError({"provider": problem})
        if not judge.base_url:
            judge.base_url = judge.provider.base_urls[0]
        elif judge.base_url not in judge.provider.base_urls:
            raise ValidationError(
                {"base_url": f"provider {judge.provider.name} declares no such base URL"}
            )
        price = provider_price(judge.provider, judge.model)
        if price is not None:
            judge.price_per_1k_prompt, judge.price_per_1k_completion = price
        if judge.prompt_template_id is None:
            judge.prompt_template = prompt_template_builtin(with_reference=judge.use_reference)
    elif kind == JudgeKind.BASELINE:
        from judging.baselines import BASELINES

        if judge.baseline not in BASELINES:
            raise ValidationError(f"baseline must be one of: {', '.join(sorted(BASELINES))}")
    judge.full_clean()
    judge.save()
    return judge


# --- runs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunEstimate:
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal


def judge_run_estimate(
    *, judge: JudgeConfig, dataset: Dataset, campaign: Campaign | None, pairwise_against: str = ""
):
    """Calls, tokens and cost before starting: prompt tokens from rendering a sample of the
    responses, completion tokens from the judge's max_tokens (an upper bound)."""
    if pairwise_against:
        return _pair_estimate(judge, dataset, campaign, pairwise_against)
    models = campaign.model_names if campaign else None
    responses = response_count_for_run(dataset_id=dataset.pk, model_names=models)
    calls = responses * judge.samples
    if judge.kind != JudgeKind.LLM or responses == 0:
        return RunEstimate(calls, 0, 0, Decimal(0))
    sample_ids = response_ids_for_run(dataset_id=dataset.pk, model_names=models, limit=20)
    tokens = [
        prompts.estimate_tokens(_messages(judge, response_for_judging(response_id=rid), campaign))
        for rid in sample_ids
    ]
    prompt_tokens = int(sum(tokens) / len(tokens) * calls)
    completion_tokens = judge.max_tokens * calls
    return RunEstimate(
        calls, prompt_tokens, completion_tokens, _cost(judge, prompt_tokens, completion_tokens)
    )


def _pair_estimate(judge, dataset, campaign, anchor_model: str) -> RunEstimate:
    """Two calls per pair (both orders); prompt tokens from rendering a few pairs."""
    models = campaign.model_names if campaign else None
    pairs = pair_challenger_count(
        dataset_id=dataset.pk, anchor_model=anchor_model, model_names=models
    )
    calls = 2 * pairs
    sample = pair_challenger_ids(
        dataset_id=dataset.pk, anchor_model=anchor_model, model_names=models, limit=10
    )
    tokens = []
    for rid in sample:
        response = response_for_judging(response_id=rid)
        anchor = anchor_response_for(response=response, anchor_model=anchor_model)
        tokens.append(prompts.estimate_tokens(_pair_messages(judge, response, anchor, 0, campaign)))
    prompt_tokens = int(sum(tokens) / len(tokens) * calls) if tokens else 0
    completion_tokens = judge.max_tokens * calls
    return RunEstimate(
        calls, prompt_tokens, completion_tokens, _cost(judge, prompt_tokens, completion_tokens)
    )


def _cost(judge: JudgeConfig, prompt_tokens: int, completion_tokens: int) -> Decimal:
    return (
        judge.price_per_1k_prompt * Decimal(prompt_tokens)
        + judge.price_per_1k_completion * Decimal(completion_tokens)
    ) / Decimal(1000)


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
        estimate = _pair_estimate(judge, dataset, campaign, pairwise_against)
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
    now = timezone.now()
    # updated_at is "last progress" for the stall sweep and the health check: a run resumed
    # after a long pause has made no progress yet, but it has not stalled either.
    changes: dict = {"status": RunStatus.RUNNING, "started_at": now, "updated_at": now, "error": ""}
    if budget is not KEEP_BUDGET:
        changes["budget"] = budget
    won = JudgeRun.objects.filter(
        pk=run.pk, status__in=[RunStatus.PENDING, RunStatus.PAUSED, RunStatus.FAILED]
    ).update(**changes)
    if won:
        from judging.tasks import judge_run_dispatch_task

        transaction.on_commit(lambda: judge_run_dispatch_task.delay(run.pk, 0))
    return bool(won)


def judge_run_set_status(*, run: JudgeRun, status: str) -> bool:
    """Pause or cancel a running run (queued tasks then do nothing); resume = start."""
    allowed = {
        RunStatus.PAUSED: [RunStatus.RUNNING],
        RunStatus.CANCELLED: [RunStatus.RUNNING, RunStatus.PAUSED, RunStatus.PENDING],
    }
    if status not in allowed:
        raise ValidationError(f"a run cannot be set to {status!r}")
    return bool(
        JudgeRun.objects.filter(pk=run.pk, status__in=allowed[status]).update(
            status=status, finished_at=timezone.now() if status == RunStatus.CANCELLED else None
        )
    )


def judge_run_dispatch(*, run_id: int, after_id: int, missing_only: bool = False) -> int | None:
    """Enqueue judge tasks for the next batch of responses; return the cursor to continue
    from, or None when the fan-out is complete (or the run stopped). With `missing_only`
    (the stall sweep), only responses whose judgments are not all recorded are enqueued."""
    from judging.tasks import judge_response_task

    run = JudgeRun.objects.select_related("campaign", "judge").get(pk=run_id)
    if run.status != RunStatus.RUNNING:
        return None
    models = run.campaign.model_names if run.campaign else None
    if run.pairwise_against:  # one task per challenger response: both orders of its pair
        ids = pair_challenger_ids(
            dataset_id=run.dataset_id,
            anchor_model=run.pairwise_against,
            model_names=models,
            after_id=after_id,
            limit=DISPATCH_BATCH,
        )
    else:
        ids = response_ids_for_run(
            dataset_id=run.dataset_id, model_names=models, after_id=after_id, limit=DISPATCH_BATCH
        )
    todo = _missing(run, ids) if missing_only else ids
    for response_id in todo:
        judge_response_task.delay(run_id, response_id)
    if len(ids) < DISPATCH_BATCH:
        _finish_if_complete(run_id)
        return None
    return ids[-1]


def _missing(run: JudgeRun, response_ids: list[int]) -> list[int]:
    """The responses among `response_ids` that still lack a judgment (a sample, or an
    order of their pair) in `run`."""
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
    from judging.tasks import judge_run_dispatch_task

    cutoff = timezone.now() - timezone.timedelta(seconds=older_than_seconds)
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
            transaction.on_commit(
                lambda run_id=run_id: judge_run_dispatch_task.delay(run_id, 0, True)
            )
    if swept:
        logger.warning("judge runs %s stalled; their missing judgments are enqueued again", swept)
    return swept


def _finish_if_complete(run_id: int) -> None:
    """running -> done once every judgment is recorded. The counters move in the transaction
    that inserts each judgment, so their sum is the count of the run's rows: one UPDATE,
    whatever the run's size (counting the rows on every task grew with the run)."""
    JudgeRun.objects.filter(
        pk=run_id,
        status=RunStatus.RUNNING,
        total__lte=F("done") + F("failed") + F("parse_failed"),
    ).update(status=RunStatus.DONE, finished_at=timezone.now())


# --- judging one response -----------------------------------------------------------------------

_clients: dict[bool, OpenAICompatibleClient] = {}


def _http(*, local: bool) -> OpenAICompatibleClient:
    """One pooled client per process for public providers (connects to public addresses
    only) and one for providers a site admin marked as local."""
    client = _clients.get(local)
    if client is None:
        client = _clients[local] = OpenAICompatibleClient(guarded=not local)
    return client


def _skills(response: Response, campaign: Campaign | None) -> list:
    """The response's skills and rubrics, read once per task: the prompt and the recorded
    scores use the same read (and 8 queries fewer per judgment than reading it 3 times)."""
    cached = getattr(response, "_judge_skills", None)
    if cached is None:
        cached = response._judge_skills = skills_for_response(response=response, campaign=campaign)
    return cached


def _messages(judge: JudgeConfig, response: Response, campaign: Campaign | None) -> list[dict]:
    skills = _skills(response, campaign)
    template = judge.prompt_template
    prompt_template = prompts.PromptTemplate(
        key=template.key,
        version=str(template.version),
        system_prompt=template.system_prompt,
        user_template=template.user_template,
        with_reference=template.with_reference,
    )
    item = response.item
    return prompts.render(
        prompt_template,
        instruction=item.instruction,
        response=response.text,
        skills=skills,
        reference=item.reference_answer if template.with_reference else None,
    )


def _hash(value) -> str:
    return hashlib.sha256(
        json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode()
    ).hexdigest()


def judge_response(*, run_id: int, response_id: int, attempt: int = 1) -> None:
    """Make the missing judgments (samples) of one response in one run.

    Raises RetryLater for a retryable failure while attempts remain; records a `failed`
    judgment once they are used up, or at once for a permanent error.
    """
    run = JudgeRun.objects.select_related(
        "judge__prompt_template", "judge__provider", "campaign"
    ).get(pk=run_id)
    if run.status != RunStatus.RUNNING:
        return
    run.judge = run_judge(run)  # every read of run.judge below sees the snapshot
    response = response_for_judging(response_id=response_id)
    if run.pairwise_against:
        _judge_pairs(run, response, attempt)
        _finish_if_complete(run.pk)
        return
    done = set(
        Judgment.objects.filter(run=run, response=response).values_list("sample_index", flat=True)
    )
    for sample in range(run.judge.samples):
        if sample in done:
            continue
        if run.budget is not None and _run_cost(run.pk) >= run.budget:
            JudgeRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
                status=RunStatus.PAUSED, error="budget reached; raise it and resume to go on"
            )
            return
        if run.judge.kind == JudgeKind.BASELINE:
            _judge_baseline(run, response, sample)
        else:
            _judge_llm(run, response, sample, attempt)
    _finish_if_complete(run.pk)


def _run_cost(run_id: int) -> Decimal:
    return JudgeRun.objects.values_list("cost", flat=True).get(pk=run_id)


def _judge_llm(run: JudgeRun, response: Response, sample: int, attempt: int) -> None:
    skills = [s.name for s in _skills(response, run.campaign)]

    def record(body, key, **outcome) -> None:
        _record(run, response, sample, skills, body, key, **outcome)

    try:
        messages = _messages(run.judge, response, run.campaign)
    except prompts.PromptError as exc:
        # e.g. a reference template on an item without a reference answer: recorded, so
        # the run still completes and the reason is on the judgment.
        record({}, "", **_NO_CALL, error=f"prompt: {exc}")
        return
    _call_llm(run.judge, messages, sample, attempt, record)


_NO_CALL = {
    "content": "",
    "prompt_tokens": 0,
    "completion_tokens": 0,
    "latency_ms": None,
    "attempts": 0,
}


def _call_llm(judge: JudgeConfig, messages: list[dict], sample: int, attempt: int, record) -> None:
    """One judge call with the cache, the shared rate limit and retries; its outcome goes to
    `record(body, key, content=..., prompt_tokens=..., completion_tokens=..., latency_ms=...,
    attempts=..., [from_cache=...], [error=...])`. Raises RetryLater to be called again.

    Order matters: the provider must be usable and its key present *before* the cache is
    read, so a judge without a working credential never receives anyone's paid answer."""
    params = {
        "temperature": judge.temperature,
        "max_tokens": judge.max_tokens,
        **judge.extra_params,
    }
    if judge.samples > 1:
        params.setdefault("seed", sample)
    request = ChatRequest(
        base_url=judge.base_url,
        model=judge.model,
        messages=messages,
        params=params,
        timeout=judge.timeout_seconds,
    )
    provider = judge.provider
    problem = provider_usable_problem(provider, judge.project_id)
    if not problem and not outbound.within(provider.base_urls, judge.base_url):
        problem = f"{judge.base_url} is not a base URL of provider {provider.name} any more"
    if problem:
        record(request.body(), "", **_NO_CALL, error=problem)
        return
    try:
        api_key = provider_api_key(provider)
    except JudgeError as exc:
        record(request.body(), "", **_NO_CALL, error=str(exc))
        return
    key = _cache_key(provider, api_key, judge.project_id, request, sample)
    cached = LLMCacheEntry.objects.filter(key=key).first()
    if cached is not None:
        record(request.body(), key, **{**_NO_CALL, "content": cached.content}, from_cache=True)
        return
    limiter = _limiter(judge, api_key)
    rpm, tpm = _limits(judge)
    estimated = prompts.estimate_tokens(messages) + judge.max_tokens
    if tpm:
        # a single call larger than the whole minute's budget would wait forever
        estimated = min(estimated, tpm)
    if limiter is not None:
        wait = limiter.try_acquire(tokens=estimated)
        if wait > 0:
            # Shared quota exhausted: come back when it refills; not a failed attempt.
            raise RetryLater(wait + random.uniform(0, 0.5), "rate limit", counts=False)
    try:
        result = _http(local=provider.is_local).chat(
            ChatRequest(**{**request.__dict__, "api_key": api_key})
        )
    except JudgeError as exc:
        if limiter is not None and exc.status == 429 and exc.retry_after:
            limiter.penalize(exc.retry_after)  # every worker sharing this key waits
        if exc.retryable and attempt < judge.max_attempts:
            countdown = exc.retry_after if exc.retry_after is not None else _backoff(attempt)
            raise RetryLater(countdown, str(exc)) from None
        record(
            request.body(),
            key,
            **{**_NO_CALL, "latency_ms": exc.latency_ms, "attempts": attempt},
            error=str(exc),
        )
        return
    if limiter is not None:
        limiter.adjust(result.prompt_tokens + result.completion_tokens - estimated)
    LLMCacheEntry.objects.get_or_create(
        key=key,
        defaults={
            "provider": provider,
            "project_id": None if provider.shared_cache else judge.project_id,
            "model": judge.model,
            "content": result.content,
            "finish_reason": result.finish_reason,
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
        },
    )
    record(
        request.body(),
        key,
        content=result.content,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        latency_ms=result.latency_ms,
        attempts=attempt,
    )


def _cache_key(provider: Provider, api_key: str, project_id: int, request, sample: int) -> str:
    """The cache entry an identical request may be answered from: the same provider,
    credential (its fingerprint, never the key) and project, unless a site admin lets the
    provider share its cache between projects."""
    scope = "shared" if provider.shared_cache else f"project:{project_id}"
    return _hash(
        [
            f"provider:{provider.pk}",
            key_fingerprint(api_key, 32),
            scope,
            request.base_url,
            request.body(),
            sample,
        ]
    )


def _limits(judge: JudgeConfig) -> tuple[int | None, int | None]:
    """Requests and tokens per minute: the provider's (the account's, shared by every
    judge of every project on it) where a site admin set them, else the judge's own."""
    provider = judge.provider
    rpm = (provider.requests_per_minute if provider else None) or judge.requests_per_minute
    tpm = (provider.tokens_per_minute if provider else None) or judge.tokens_per_minute
    return rpm, tpm


def _limiter(judge: JudgeConfig, api_key: str):
    """The rate limit shared by every worker using this provider and key (Redis), or None
    when there are no limits or there is no Redis (the embedded single worker)."""
    rpm, tpm = _limits(judge)
    if not (rpm or tpm) or not settings.REDIS_URL:
        return None
    from judging.ratelimit import RateLimiter

    return RateLimiter.for_api_key(
        _redis(settings.REDIS_URL), f"provider-{judge.provider_id}", api_key, rpm=rpm, tpm=tpm
    )


_redis_clients: dict = {}


def _redis(url: str):
    """One redis-py client (a thread-safe connection pool) per process and URL: a client per
    call opened a new connection for every judgment."""
    client = _redis_clients.get(url)
    if client is None:
        import redis

        client = _redis_clients[url] = redis.Redis.from_url(url)
    return client


def _backoff(attempt: int) -> float:
    """Full jitter (AWS architecture blog): uniform in [0, min(cap, base * 2**attempt)]."""
    return random.uniform(0, min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2**attempt))


def _record(
    run,
    response,
    sample,
    skills,
    body,
    key,
    *,
    content,
    prompt_tokens,
    completion_tokens,
    latency_ms,
    attempts,
    from_cache=False,
    error="",
) -> None:
    """Insert the judgment and its scores, and move the run's counters, in one transaction.
    A judgment that already exists (a duplicate task got there first) changes nothing."""
    if error:
        status, parsed = JudgmentStatus.FAILED, None
    else:
        parsed = prompts.parse_judgment(content, skills)
        status = {
            "ok": JudgmentStatus.OK,
            "partial": JudgmentStatus.PARTIAL,
        }.get(parsed.status, JudgmentStatus.PARSE_FAILED)
    by_name = {s.name: s for s in _skills(response, run.campaign)}
    cost = Decimal(0) if from_cache else _cost(run.judge, prompt_tokens, completion_tokens)
    try:
        with transaction.atomic():
            judgment = Judgment.objects.create(
                run=run,
                response=response,
                sample_index=sample,
                status=status,
                request=body,
                raw_output=content,
                parse_method=getattr(parsed, "method", "") or "",
                error=error or (getattr(parsed, "error", "") or ""),
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                latency_ms=latency_ms,
                attempts=attempts,
                from_cache=from_cache,
                cache_key=key,
                prompt_template=run.judge.prompt_template,
            )
            if parsed is not None:
                JudgeScore.objects.bulk_create(
                    JudgeScore(
                        judgment=judgment,
                        run=run,
                        response=response,
                        skill_id=by_name[name].skill_id,
                        rubric_id=by_name[name].rubric_id,
                        score=value,
                        is_na=value is None,
                        feedback=(parsed.feedback or {}).get(name, ""),
                    )
                    for name, value in parsed.scores.items()
                    if name in by_name
                )
            _count(run, status, from_cache, prompt_tokens, completion_tokens, cost)
    except IntegrityError:
        logger.info("judgment (%s, %s, %s) exists already", run.pk, response.pk, sample)


def _count(run, status, from_cache, prompt_tokens, completion_tokens, cost) -> None:
    """Move the run's counters, in the transaction that inserts the judgment."""
    JudgeRun.objects.filter(pk=run.pk).update(
        done=F("done") + (1 if status in (JudgmentStatus.OK, JudgmentStatus.PARTIAL) else 0),
        failed=F("failed") + (1 if status == JudgmentStatus.FAILED else 0),
        parse_failed=F("parse_failed") + (1 if status == JudgmentStatus.PARSE_FAILED else 0),
        cached=F("cached") + (1 if from_cache else 0),
        prompt_tokens=F("prompt_tokens") + prompt_tokens,
        completion_tokens=F("completion_tokens") + completion_tokens,
        cost=F("cost") + cost,
        updated_at=timezone.now(),
    )


# --- pairwise --------------------------------------------------------------------------------


def _pair_messages(judge, response, anchor, order: int, campaign) -> list[dict]:
    item = response.item
    first, second = (response, anchor) if order == 0 else (anchor, response)
    template = pairwise.pair_template(with_reference=judge.use_reference)
    return pairwise.render_pair(
        template,
        instruction=item.instruction,
        first=first.text,
        second=second.text,
        skills=_skills(response, campaign),
        reference=item.reference_answer if template.with_reference else None,
    )


def _judge_pairs(run: JudgeRun, response: Response, attempt: int) -> None:
    """Both orders of one pair (challenger `response` against the anchor model's response to
    its item); each order is its own idempotent PairJudgment."""
    anchor = anchor_response_for(response=response, anchor_model=run.pairwise_against)
    if anchor is None:
        return
    done = set(
        PairJudgment.objects.filter(run=run, response=response).values_list("order", flat=True)
    )
    skills = [s.name for s in _skills(response, run.campaign)]
    for order in (0, 1):
        if order in done:
            continue
        if run.budget is not None and _run_cost(run.pk) >= run.budget:
            JudgeRun.objects.filter(pk=run.pk, status=RunStatus.RUNNING).update(
                status=RunStatus.PAUSED, error="budget reached; raise it and resume to go on"
            )
            return

        def record(body, key, *, order=order, **outcome) -> None:
            _record_pair(run, response, anchor, order, skills, body, key, **outcome)

        try:
            messages = _pair_messages(run.judge, response, anchor, order, run.campaign)
        except prompts.PromptError as exc:
            record({}, "", **_NO_CALL, error=f"prompt: {exc}")
            continue
        _call_llm(run.judge, messages, order, attempt, record)


def _record_pair(
    run,
    response,
    anchor,
    order,
    skills,
    body,
    key,
    *,
    content,
    prompt_tokens,
    completion_tokens,
    latency_ms,
    attempts,
    from_cache=False,
    error="",
) -> None:
    if error:
        status, verdicts, method, problem = JudgmentStatus.FAILED, {}, "", error
    else:
        reading = pairwise.parse_pair(content, skills)
        status = {"ok": JudgmentStatus.OK, "partial": JudgmentStatus.PARTIAL}.get(
            reading.status, JudgmentStatus.PARSE_FAILED
        )
        verdicts = pairwise.to_verdicts(reading.choices, order)
        method, problem = reading.method, reading.error
    cost = Decimal(0) if from_cache else _cost(run.judge, prompt_tokens, completion_tokens)
    try:
        with transaction.atomic():
            PairJudgment.objects.create(
                run=run,
                response=response,
                anchor=anchor,
                order=order,
                status=status,
                verdicts=verdicts,
                request=body,
                raw_output=content,
                parse_method=method,
                error=problem,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                latency_ms=latency_ms,
                attempts=attempts,
                from_cache=from_cache,
                cache_key=key,
            )
            _count(run, status, from_cache, prompt_tokens, completion_tokens, cost)
    except IntegrityError:
        logger.info("pair judgment (%s, %s, %s) exists already", run.pk, response.pk, order)


def _judge_baseline(run: JudgeRun, response: Response, sample: int) -> None:
    from judging.baselines import BASELINES

    judge = BASELINES[run.judge.baseline]
    skills = skills_for_response(response=response, campaign=run.campaign)
    item = response.item
    result = judge.score(
        instruction=item.instruction,
        response=response.text,
        reference=item.reference_answer,
        skills=[s.name for s in skills],
    )
    body = {"baseline": run.judge.baseline}
    try:
        with transaction.atomic():
            judgment = Judgment.objects.create(
                run=run,
                response=response,
                sample_index=sample,
                status=JudgmentStatus.OK,
                request=body,
                raw_output=json.dumps(result.raw),
                parse_method="baseline",
                error=result.note if all(v is None for v in result.scores.values()) else "",
            )
            JudgeScore.objects.bulk_create(
                JudgeScore(
                    judgment=judgment,
                    run=run,
                    response=response,
                    skill_id=s.skill_id,
                    rubric_id=s.rubric_id,
                    score=result.scores.get(s.name),
                    is_na=result.scores.get(s.name) is None,
                    raw_value=result.raw.get(s.name),
                    feedback=result.note,
                )
                for s in skills
            )
            JudgeRun.objects.filter(pk=run.pk).update(done=F("done") + 1, updated_at=timezone.now())
    except IntegrityError:
        logger.info("baseline judgment (%s, %s) exists already", run.pk, response.pk)


def judge_runs_fail_stale(*, older_than_seconds: int) -> int:
    """Fail runs stuck in running with no progress for a long time (all workers lost)."""
    cutoff = timezone.now() - timezone.timedelta(seconds=older_than_seconds)
    return JudgeRun.objects.filter(status=RunStatus.RUNNING, updated_at__lt=cutoff).update(
        status=RunStatus.FAILED, error="no progress for a long time; resume to go on"
    )
