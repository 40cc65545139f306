"""A judge configuration's identity across projects, and the facts an evaluation card states
about one judge (docs/JUDGE_TRUST.md "The same judge across projects", "The evaluation card").

**Fingerprint.** Two judges are "the same configuration" when they would send the same
requests to the same model: the same kind, provider (by name), model, prompt template
content (the template version's `content_hash`, not its key or project), temperature, number
of samples k, use of the reference answer, extra parameters and baseline metric. The
fingerprint is the SHA-256 of the canonical JSON of exactly these nine fields
(`FINGERPRINT_FIELDS`; keys sorted, no spaces, temperature as a float, extra parameters with
their keys sorted); the judge's name, project, timeouts, retries, prices, rate limits and
base URL are left out (they change what a run costs or how fast it goes, not what it scores).
Imported judges have no provider or template: their fingerprints are only as distinct as
the model and parameters they were declared with.

Reads only; analytics calls these (the leaderboard and the cards)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Max, QuerySet

from annotation.models import Project
from judging.models import JudgeConfig, JudgeKind, JudgeRun, JudgeScore, RunStatus

FINGERPRINT_FIELDS = (
    "kind",
    "provider",
    "model",
    "template_hash",
    "temperature",
    "samples",
    "use_reference",
    "extra_params",
    "baseline",
)
#: The short form shown beside a configuration's label.
SHORT = 12


def fingerprint_fields(judge: JudgeConfig) -> dict[str, Any]:
    """The nine fields the fingerprint hashes, as JSON values."""
    provider = judge.provider.name if judge.provider_id and judge.provider else ""
    template = judge.prompt_template
    return {
        "kind": judge.kind,
        "provider": provider,
        "model": judge.model,
        "template_hash": template.content_hash if template is not None else "",
        "temperature": float(judge.temperature),
        "samples": int(judge.samples),
        "use_reference": bool(judge.use_reference),
        "extra_params": judge.extra_params or {},
        "baseline": judge.baseline,
    }


def judge_fingerprint(judge: JudgeConfig) -> str:
    """SHA-256 (hex) of the canonical JSON of `fingerprint_fields`."""
    text = json.dumps(
        fingerprint_fields(judge), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def judge_fingerprint_label(judge: JudgeConfig) -> str:
    """A readable name of the configuration (not unique: the fingerprint is)."""
    if judge.kind == JudgeKind.BASELINE:
        return f"baseline {judge.baseline or '?'}"
    parts = [judge.kind]
    model = judge.model or "?"
    provider = judge.provider.name if judge.provider_id and judge.provider else ""
    parts.append(f"{provider}/{model}" if provider else model)
    template = judge.prompt_template
    if template is not None:
        parts.append(f"template {template.key} v{template.version}")
    parts.append(f"T={float(judge.temperature):g}")
    parts.append(f"k={judge.samples}")
    parts.append("with reference" if judge.use_reference else "no reference")
    if judge.extra_params:
        parts.append("+params")
    return " · ".join(parts)


@dataclass(frozen=True)
class JudgeIdentity:
    project_id: int
    name: str
    kind: str
    fingerprint: str
    label: str


def judge_identities(*, project_ids: Sequence[int]) -> list[JudgeIdentity]:
    """Every judge of the projects with its fingerprint and label (one query)."""
    judges = (
        JudgeConfig.objects.filter(project_id__in=list(project_ids))
        .select_related("provider", "prompt_template")
        .order_by("project_id", "name")
    )
    return [
        JudgeIdentity(
            project_id=judge.project_id,
            name=judge.name,
            kind=judge.kind,
            fingerprint=judge_fingerprint(judge),
            label=judge_fingerprint_label(judge),
        )
        for judge in judges
    ]


# --- what an evaluation card states about one judge ---------------------------------------------


@dataclass(frozen=True)
class CountedRun:
    id: int
    dataset: str
    finished_at: str | None
    judgments: int
    cost: Decimal
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class JudgeCardFacts:
    """A judge's configuration, its template and the runs a report read as of a time."""

    configuration: dict[str, Any]
    template: dict[str, Any] | None
    runs: list[CountedRun]


def judge_card_facts(*, project: Project, name: str, as_of: datetime) -> JudgeCardFacts | None:
    """The judge `name` of the project (None if it has no configuration there): its
    configuration, prompt template (text included) and the runs a report computed at `as_of`
    counted: per dataset the judge's latest pointwise, non-probe run finished by then (what
    `judge_score_rows` read at that time)."""
    judge = (
        JudgeConfig.objects.filter(project=project, name=name)
        .select_related("provider", "prompt_template")
        .first()
    )
    if judge is None:
        return None
    configuration = {
        **fingerprint_fields(judge),
        "max_tokens": judge.max_tokens,
        "family": judge.family,
        "fingerprint": judge_fingerprint(judge),
        "label": judge_fingerprint_label(judge),
    }
    template = judge.prompt_template
    template_facts = (
        None
        if template is None
        else {
            "key": template.key,
            "version": template.version,
            "name": template.name,
            "content_hash": template.content_hash,
            "with_reference": template.with_reference,
            "system_prompt": template.system_prompt,
            "user_template": template.user_template,
        }
    )
    run_ids = (
        JudgeRun.objects.filter(
            judge=judge,
            status=RunStatus.DONE,
            pairwise_against="",
            probe="",
            finished_at__lte=as_of,
        )
        .values("dataset_id")
        .annotate(run_id=Max("pk"))
        .values_list("run_id", flat=True)
        .order_by()
    )
    runs = [
        CountedRun(
            id=run.pk,
            dataset=run.dataset.name,
            finished_at=run.finished_at.isoformat() if run.finished_at else None,
            judgments=run.done,
            cost=run.cost,
            prompt_tokens=run.prompt_tokens,
            completion_tokens=run.completion_tokens,
        )
        for run in JudgeRun.objects.filter(pk__in=list(run_ids))
        .select_related("dataset")
        .order_by("pk")
    ]
    return JudgeCardFacts(configuration=configuration, template=template_facts, runs=runs)


def judged_response_rows(
    *, run_ids: Sequence[int], skills: Sequence[str] = (), systems: Sequence[str] = ()
) -> list[tuple[int, int, str, str, str]]:
    """(response id, item id, item content hash, model name, response text) of every
    response the runs scored (on `skills` and of `systems` only, when given), by response
    id."""
    return scored_response_rows(
        JudgeScore.objects.filter(run_id__in=list(run_ids)), skills=skills, systems=systems
    )


def scored_response_rows(
    scores: QuerySet[Any], *, skills: Sequence[str] = (), systems: Sequence[str] = ()
) -> list[tuple[int, int, str, str, str]]:
    """judged_response_rows of any scores with a `response` and a `skill` (a judge's run
    scores, or an imported judge's imported scores)."""
    if skills:
        scores = scores.filter(skill__name__in=list(skills))
    if systems:
        scores = scores.filter(response__model_name__in=list(systems))
    return list(
        scores.values_list(
            "response_id",
            "response__item_id",
            "response__item__content_hash",
            "response__model_name",
            "response__text",
        )
        .distinct()
        .order_by("response_id")
    )
