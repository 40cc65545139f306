"""Judges (JudgeConfig): a checked name, and creation of LLM judges (on a provider offered to
the project) and offline baselines."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.models import Project
from annotation.names import NameRefused, NameScope, name_clean
from judging.baselines import BASELINES
from judging.models import JudgeConfig, JudgeKind
from judging.services.providers import provider_price, provider_usable_problem
from judging.services.templates import prompt_template_builtin


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
    elif kind == JudgeKind.BASELINE and judge.baseline not in BASELINES:
        raise ValidationError(f"baseline must be one of: {', '.join(sorted(BASELINES))}")
    judge.full_clean()
    judge.save()
    return judge
