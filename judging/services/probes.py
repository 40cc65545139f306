"""Bias probes as runs (docs/JUDGE_TRUST.md, "Bias probes"): a counterfactual run of a
judge over the responses of one of its finished runs, with one thing changed in the prompt
(judging.prompts.probes). It is an ordinary run otherwise: the base run's settings
snapshot, the same samples, dispatched in batches, answered from the cache where the exact
prompt was asked before, retried, costed, stopped by its budget and swept when it stalls.
Probe runs never count as the judge's scores in reports.

And the model families that the self-preference figure compares: a judge's family
(JudgeConfig.family) and each system's (ModelFamily)."""

from __future__ import annotations

import hashlib
import re
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.models import Project
from annotation.selectors import response_for_judging
from judging import prompts
from judging.models import (
    JudgeConfig,
    JudgeKind,
    JudgeRun,
    Judgment,
    ModelFamily,
    PairJudgment,
    ProbeKind,
    RunStatus,
)
from judging.probes.selectors import project_model_names
from judging.prompts import probes as transforms
from judging.services.estimates import tokens_cost
from judging.services.probe_prompts import (
    probe_pair_messages,
    probe_response_messages,
    run_probe,
)
from judging.services.prompting import judged_response_read
from judging.services.runs import judge_run_start, run_judge

#: Prompts rendered to estimate a probe run's prompt tokens.
ESTIMATE_SAMPLE = 10


def sample_order(base_run_id: int, response_id: int) -> str:
    """The key a probe's sample of n responses is drawn by: the n smallest
    sha256("<base run id>:<response id>") (deterministic, spread over the dataset)."""
    return hashlib.sha256(f"{base_run_id}:{response_id}".encode()).hexdigest()


@transaction.atomic
def probe_run_create(
    *,
    base_run: JudgeRun,
    probe: str,
    params: dict | None = None,
    budget: Decimal | None = None,
    created_by=None,
    start: bool = True,
) -> JudgeRun:
    """A probe run of `base_run`'s judge over `base_run`'s responses (or a deterministic
    sample of `params["limit"]` of them), with the base run's settings, started unless
    `start` is false. ValidationError says why not: a probe of a probe, a base run not
    finished, a pointwise probe on a pairwise run or the other way round, a judge that is
    not an LLM, bad parameters."""
    if probe not in ProbeKind.values:
        raise ValidationError(
            f"unknown probe {probe!r}; known: {', '.join(ProbeKind.values)}", code="probe"
        )
    if base_run.probe:
        raise ValidationError(
            f"run {base_run.pk} is itself a probe run; probe its base run {base_run.base_run_id}",
            code="probe_of_probe",
        )
    if base_run.status != RunStatus.DONE:
        raise ValidationError(
            f"run {base_run.pk} is {base_run.get_status_display().lower()}; "
            "only a finished (done) run can be probed",
            code="base_not_done",
        )
    judge = run_judge(base_run)
    if judge.kind != JudgeKind.LLM:
        raise ValidationError("only an LLM judge's runs can be probed", code="not_llm")
    if base_run.pairwise_against and probe not in transforms.PAIRWISE:
        raise ValidationError(
            f"run {base_run.pk} is pairwise; its probes are: {', '.join(transforms.PAIRWISE)}",
            code="wrong_kind",
        )
    if not base_run.pairwise_against and probe not in transforms.POINTWISE:
        raise ValidationError(
            f"run {base_run.pk} scores responses one by one; its probes are: "
            f"{', '.join(transforms.POINTWISE)}",
            code="wrong_kind",
        )
    try:
        clean = transforms.clean_params(probe, params)
    except prompts.PromptError as exc:
        raise ValidationError(str(exc), code="params") from exc
    if budget is not None and budget < 0:
        raise ValidationError("the budget cannot be negative", code="budget")
    rows = PairJudgment.objects if base_run.pairwise_against else Judgment.objects
    ids = sorted(set(rows.filter(run=base_run).values_list("response_id", flat=True).order_by()))
    if not ids:
        raise ValidationError(f"run {base_run.pk} judged no response", code="empty_base")
    if "limit" in clean and clean["limit"] < len(ids):
        ids = sorted(sorted(ids, key=lambda rid: sample_order(base_run.pk, rid))[: clean["limit"]])
        clean["responses"] = ids
    per_response = 2 if base_run.pairwise_against else judge.samples
    run = JudgeRun(
        judge=base_run.judge,
        dataset=base_run.dataset,
        campaign=base_run.campaign,
        pairwise_against=base_run.pairwise_against,
        settings_snapshot=dict(base_run.settings_snapshot),
        total=len(ids) * per_response,
        budget=budget,
        probe=probe,
        base_run=base_run,
        probe_params=clean,
        created_by=created_by,
    )
    run.estimate = _estimate(run, judge, ids, per_response)
    run.full_clean()
    run.save()
    if start:
        judge_run_start(run=run)
    return run


def _estimate(run: JudgeRun, judge: JudgeConfig, ids: list[int], per_response: int) -> dict:
    """Calls, tokens (from rendering a few of the probe's prompts) and cost, like any run."""
    calls = len(ids) * per_response
    probe = run_probe(run, ids[:ESTIMATE_SAMPLE])
    assert probe is not None
    tokens = []
    for rid in ids[:ESTIMATE_SAMPLE]:
        target = judged_response_read(
            response=response_for_judging(response_id=rid), campaign=run.campaign
        )
        try:
            if run.pairwise_against:
                from_anchor = _anchor(run, rid)
                if from_anchor is None:
                    continue
                messages = probe_pair_messages(
                    judge=judge, target=target, anchor=from_anchor, order=0, probe=probe
                )
            else:
                messages = probe_response_messages(judge=judge, target=target, probe=probe)
        except prompts.PromptError:
            continue  # recorded on the judgment when the run gets there
        tokens.append(prompts.estimate_tokens(messages))
    prompt_tokens = int(sum(tokens) / len(tokens) * calls) if tokens else 0
    completion_tokens = judge.max_tokens * calls
    return {
        "calls": calls,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "cost": str(tokens_cost(judge, prompt_tokens, completion_tokens)),
    }


def _anchor(run: JudgeRun, response_id: int):
    judgment = (
        PairJudgment.objects.filter(run_id=run.base_run_id, response_id=response_id)
        .select_related("anchor__item")
        .first()
    )
    return judgment.anchor if judgment else None


# --- model families -----------------------------------------------------------------------------

#: A family name: letters, digits and . _ - (e.g. "gpt-4", "llama-3.1", "claude_3").
FAMILY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def family_clean(value: str | None) -> str:
    """A family name as stored (trimmed, lower case); "" for none. ValidationError if it
    is not one."""
    value = (value or "").strip()
    if not value:
        return ""
    if not FAMILY_NAME.match(value):
        raise ValidationError(
            f"{value[:120]!r} is not a family name: use up to 100 letters, digits, '.', '_' "
            "or '-', starting with a letter or digit",
            code="family",
        )
    return value.lower()


@transaction.atomic
def model_families_set(*, project: Project, families: dict[str, str]) -> dict[str, str]:
    """Declare (or, with a blank family, forget) the family of each named system of the
    project; all or nothing. Model names must be systems of the project's datasets. Returns
    the project's families after the change."""
    known = set(project_model_names(project=project))
    problems = []
    clean: dict[str, str] = {}
    for model_name, family in families.items():
        if not isinstance(model_name, str) or model_name not in known:
            problems.append(f"{str(model_name)[:120]!r} is not a system of this project")
            continue
        if family is not None and not isinstance(family, str):
            problems.append(f"the family of {model_name!r} must be text")
            continue
        try:
            clean[model_name] = family_clean(family)
        except ValidationError as exc:
            problems.extend(f"{model_name}: {m}" for m in exc.messages)
    if problems:
        raise ValidationError(problems, code="families")
    for model_name, family in clean.items():
        if family:
            ModelFamily.objects.update_or_create(
                project=project, model_name=model_name, defaults={"family": family}
            )
        else:
            ModelFamily.objects.filter(project=project, model_name=model_name).delete()
    return dict(ModelFamily.objects.filter(project=project).values_list("model_name", "family"))


@transaction.atomic
def families_set(
    *, project: Project, systems: dict[str, str], judges: dict[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """model_families_set for `systems` and the family of each named judge of the project
    (blank: none), all or nothing; ValidationError lists every problem. Returns the
    project's system and judge families after the change."""
    problems: list[str] = []
    by_name = {j.name: j for j in JudgeConfig.objects.filter(project=project)}
    clean: dict[str, str] = {}
    for name, family in judges.items():
        if not isinstance(name, str) or name not in by_name:
            problems.append(f"{str(name)[:120]!r} is not a judge of this project")
            continue
        if family is not None and not isinstance(family, str):
            problems.append(f"the family of judge {name!r} must be text")
            continue
        try:
            clean[name] = family_clean(family)
        except ValidationError as exc:
            problems.extend(f"judge {name}: {m}" for m in exc.messages)
    try:
        system_families = model_families_set(project=project, families=systems)
    except ValidationError as exc:
        problems = list(exc.messages) + problems
    if problems:
        raise ValidationError(problems, code="families")
    for name, family in clean.items():
        JudgeConfig.objects.filter(pk=by_name[name].pk).update(family=family)
    judge_families = dict(
        JudgeConfig.objects.filter(project=project).exclude(family="").values_list("name", "family")
    )
    return system_families, judge_families
