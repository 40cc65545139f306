"""Reads of the judging app: judge and run lists, run progress, judgments, prompt templates
and their previews. Pages and the API read through here; nothing here writes."""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Count, F, Max, Prefetch, Q, QuerySet, Sum
from django.db.models.functions import Length

from annotation.models import Campaign, CampaignStatus, Project, Response, rubric_label
from annotation.selectors import (
    response_for_judging,
    response_ids_for_run,
    scores_narrowed,
    skills_for_response,
)
from judging import preference, prompts

# re-exported: what judge calls are doing now, per provider and per run (judging.llm.activity)
from judging.llm.activity import ActivityUnavailable as ActivityUnavailable
from judging.llm.activity import ProviderActivity as ProviderActivity
from judging.llm.activity import RunActivity as RunActivity
from judging.llm.activity import RunPace as RunPace
from judging.llm.activity import provider_activity as provider_activity
from judging.llm.activity import run_activity as run_activity
from judging.llm.activity import run_key as run_key
from judging.llm.activity import run_pace as run_pace
from judging.models import (
    JudgeConfig,
    JudgeRun,
    JudgeScore,
    Judgment,
    JudgmentStatus,
    ModelFamily,
    PairJudgment,
    PromptTemplate,
    Provider,
    RunStatus,
)
from judging.prompts import pairwise
from judging.prompts import probes as prompt_probes

# --- judges and runs ------------------------------------------------------------------------------


def judge_list_for_project(*, project: Project) -> QuerySet[JudgeConfig]:
    return (
        JudgeConfig.objects.filter(project=project)
        .select_related("prompt_template", "provider")
        .annotate(run_count=Count("runs"), last_run_at=Max("runs__created_at"))
        .order_by("name")
    )


def _run_rows(runs: QuerySet[JudgeRun]) -> QuerySet[JudgeRun]:
    return (
        runs.select_related("judge", "dataset", "campaign")
        .annotate(finished=F("done") + F("failed") + F("parse_failed"))
        .order_by("-created_at", "-pk")
    )


def run_list_for_project(*, project: Project, limit: int = 50) -> QuerySet[JudgeRun]:
    """The project's latest runs, each with `finished` (judgments made)."""
    return _run_rows(JudgeRun.objects.filter(judge__project=project))[:limit]


def run_list_for_judge(*, judge: JudgeConfig, limit: int = 100) -> QuerySet[JudgeRun]:
    return _run_rows(JudgeRun.objects.filter(judge=judge))[:limit]


def campaign_choices_for_project(*, project: Project) -> QuerySet[Campaign]:
    """Campaigns a run can score: activated ones, since a draft has no pinned rubric yet
    (and so no skills to put in a prompt). Read through the project's FK."""
    return (
        project.campaigns.exclude(status=CampaignStatus.DRAFT)
        .select_related("dataset")
        .order_by("name")
    )


@dataclass(frozen=True)
class RunProgress:
    """What the run page and the API show about a run's progress and spending."""

    status: str
    total: int
    finished: int  # judgments made: done + parse_failed + failed
    percent: int
    ok: int
    partial: int
    parse_failed: int
    failed: int
    cached: int
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal
    budget: Decimal | None
    budget_percent: int | None
    estimate: dict
    # Only a running run moves by itself: done, failed and cancelled ones are final, and
    # pending and paused ones wait for a person (whose click swaps the panel back in).
    polling: bool

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def waiting(self) -> int:
        """Judgments not recorded yet: queued, in flight or waiting to be retried."""
        return max(0, self.total - self.finished)


def run_progress(*, run: JudgeRun) -> RunProgress:
    """From the run row (counters moved by the service in the judgment's own transaction)
    plus one grouped count to split `done` into ok and partial: of the run's judgments, or
    of its pair judgments for a pairwise run (the rows that run writes)."""
    rows = PairJudgment.objects if run.pairwise_against else Judgment.objects
    by_status = dict(
        rows.filter(run=run)
        .filter(status__in=[JudgmentStatus.OK, JudgmentStatus.PARTIAL])
        .values_list("status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    finished = run.done + run.failed + run.parse_failed
    if run.total:
        percent = min(100, round(100 * finished / run.total))
    else:  # nothing to judge: done at once
        percent = 100 if run.status == RunStatus.DONE else 0
    budget_percent = None
    if run.budget:
        budget_percent = min(100, round(100 * run.cost / run.budget))
    return RunProgress(
        status=run.status,
        total=run.total,
        finished=finished,
        percent=percent,
        ok=by_status.get(JudgmentStatus.OK, 0),
        partial=by_status.get(JudgmentStatus.PARTIAL, 0),
        parse_failed=run.parse_failed,
        failed=run.failed,
        cached=run.cached,
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
        cost=run.cost,
        budget=run.budget,
        budget_percent=budget_percent,
        estimate=run.estimate or {},
        polling=run.status == RunStatus.RUNNING,
    )


def run_problem_list(*, run: JudgeRun, limit: int = 20) -> list[Mapping[str, object]]:
    """The latest failed and unparseable judgments, newest first, as plain rows (a pairwise
    run's pair judgments, with `pair` set and their raw output, which has no page)."""
    if run.pairwise_against:
        rows = (
            PairJudgment.objects.filter(
                run=run, status__in=[JudgmentStatus.FAILED, JudgmentStatus.PARSE_FAILED]
            )
            .order_by("-updated_at", "-pk")
            .values(
                "pk",
                "status",
                "error",
                "attempts",
                "order",
                "raw_output",
                "updated_at",
                "response_id",
                "response__model_name",
                "response__item__external_id",
            )[:limit]
        )
        return [{**row, "pair": True} for row in rows]
    return list(
        Judgment.objects.filter(
            run=run, status__in=[JudgmentStatus.FAILED, JudgmentStatus.PARSE_FAILED]
        )
        .order_by("-updated_at", "-pk")
        .values(
            "pk",
            "status",
            "error",
            "attempts",
            "sample_index",
            "updated_at",
            "response_id",
            "response__model_name",
            "response__item__external_id",
        )[:limit]
    )


def judgment_list_for_run(*, run: JudgeRun, status: str | None = None) -> QuerySet[Judgment]:
    """A run's judgments in a stable order, with their scores' skill names and rubric
    versions (with the rubric's project, for its label) prefetched."""
    qs = Judgment.objects.filter(run=run)
    if status:
        qs = qs.filter(status=status)
    scores = JudgeScore.objects.select_related("skill", "rubric__project").order_by("pk")
    return (
        qs.select_related("response__item")
        .prefetch_related(Prefetch("scores", queryset=scores))
        .order_by("pk")
    )


# --- prompt templates -----------------------------------------------------------------------------


@dataclass(frozen=True)
class TemplateRow:
    latest: PromptTemplate
    versions: int

    @property
    def builtin(self) -> bool:
        return self.latest.project_id is None


def template_list_for_project(*, project: Project) -> list[TemplateRow]:
    """Built-in templates first, then the project's; one row per key with its latest
    version and the number of versions."""
    rows = PromptTemplate.objects.filter(Q(project__isnull=True) | Q(project=project))
    latest: dict[tuple[bool, str], PromptTemplate] = {}
    counts: dict[tuple[bool, str], int] = {}
    for row in rows.order_by("key", "-version"):
        group = (row.project_id is not None, row.key)
        latest.setdefault(group, row)
        counts[group] = counts.get(group, 0) + 1
    return [TemplateRow(latest[group], counts[group]) for group in sorted(latest)]


def template_versions(*, template: PromptTemplate) -> QuerySet[PromptTemplate]:
    # A built-in template's project_id is None, which Django's exact lookup turns into IS NULL.
    return PromptTemplate.objects.filter(
        project_id=template.project_id,  # type: ignore[misc]  # stubs reject None on a nullable FK
        key=template.key,
    ).order_by("-version")


def template_choices_for_project(*, project: Project) -> QuerySet[PromptTemplate]:
    """Every version of the project's own templates (a judge pins one version)."""
    return PromptTemplate.objects.filter(project=project).order_by("key", "-version")


def provider_choices_for_project(*, project: Project) -> QuerySet[Provider]:
    """The providers the project's judges may call: approved by a site admin and offered to
    every project or to this one."""
    return (
        Provider.objects.filter(approved=True)
        .filter(Q(projects=None) | Q(projects=project))
        .distinct()
        .order_by("name")
    )


def prompt_of(template: PromptTemplate) -> prompts.TemplateText:
    return prompts.TemplateText(
        key=template.key,
        version=str(template.version),
        system_prompt=template.system_prompt,
        user_template=template.user_template,
        with_reference=template.with_reference,
    )


@dataclass(frozen=True)
class PromptPreview:
    response_id: int
    item_external_id: str
    model_name: str
    next_response_id: int | None
    messages: list[dict] | None
    error: str  # why the template cannot be rendered on this response, if it cannot


def prompt_preview(
    *,
    template: PromptTemplate,
    dataset_id: int,
    response_id: int | None = None,
    campaign: Campaign | None = None,
) -> PromptPreview | None:
    """The messages a judge using `template` gets for one response of the dataset (its first
    one by default): the same skills, rubric wording and checklist as the annotators' card.
    None when the dataset has no response (or `response_id` is not one of its responses)."""
    if response_id is None:
        first = response_ids_for_run(dataset_id=dataset_id, limit=1)
        if not first:
            return None
        response_id = first[0]
    try:
        response = response_for_judging(response_id=response_id)
    except Response.DoesNotExist:
        return None
    if response.item.dataset_id != dataset_id:
        return None
    after = response_ids_for_run(dataset_id=dataset_id, after_id=response.pk, limit=1)
    item = response.item
    messages, error = None, ""
    try:
        messages = prompts.render(
            prompt_of(template),
            instruction=item.instruction,
            response=response.text,
            skills=skills_for_response(response=response, campaign=campaign),
            reference=item.reference_answer if template.with_reference else None,
        )
    except prompts.PromptError as exc:
        error = str(exc)
    return PromptPreview(
        response_id=response.pk,
        item_external_id=item.external_id,
        model_name=response.model_name,
        next_response_id=after[0] if after else None,
        messages=messages,
        error=error,
    )


# --- scores, k samples aggregated -----------------------------------------------------------------


@dataclass(frozen=True)
class ScoreSummary:
    """One response's score on one skill in a run, over its k samples. The mean is computed
    from the integer sum and count, so equal means are equal floats; the spread is kept
    (min, max, sample standard deviation) so unstable judgments can be found."""

    response_id: int
    item: str
    model_name: str
    skill: str
    samples: int  # judgments that gave this skill a score or N/A
    na: int
    mean: float | None  # over the samples with a score (N/A left out); None if all N/A
    median: float | None
    low: int | None
    high: int | None
    stdev: float | None  # None with fewer than two scores

    @property
    def spread(self) -> int | None:
        return None if self.low is None or self.high is None else self.high - self.low


def run_score_summaries(
    *, run: JudgeRun, response_ids: list[int] | None = None
) -> list[ScoreSummary]:
    """The aggregated scores of the given responses, or of every response of the run (one
    query)."""
    scores = JudgeScore.objects.filter(run=run)
    if response_ids is not None:
        scores = scores.filter(response_id__in=response_ids)
    rows = scores.values_list(
        "response_id",
        "response__item__external_id",
        "response__model_name",
        "skill__name",
        "skill__order",
        "score",
        "is_na",
    ).order_by("response_id", "skill__order", "skill__name")
    grouped: dict[tuple, list] = {}
    for response_id, item, model_name, skill, order, score, is_na in rows:
        grouped.setdefault((response_id, order, skill, item, model_name), []).append(
            None if is_na else score
        )
    result = []
    for (response_id, _order, skill, item, model_name), values in grouped.items():
        scored = [v for v in values if v is not None]
        result.append(
            ScoreSummary(
                response_id=response_id,
                item=item,
                model_name=model_name,
                skill=skill,
                samples=len(values),
                na=len(values) - len(scored),
                mean=sum(scored) / len(scored) if scored else None,
                median=float(statistics.median(scored)) if scored else None,
                low=min(scored) if scored else None,
                high=max(scored) if scored else None,
                stdev=statistics.stdev(scored) if len(scored) > 1 else None,
            )
        )
    return result


def run_judged_response_ids(*, run: JudgeRun, after_id: int = 0, limit: int = 100) -> list[int]:
    """Keyset page over the responses the run has judged."""
    return list(
        Judgment.objects.filter(run=run, response_id__gt=after_id)
        .order_by("response_id")
        .values_list("response_id", flat=True)
        .distinct()[:limit]
    )


@dataclass(frozen=True)
class SkillSummary:
    skill: str
    responses: int
    mean: float | None  # mean over responses of their k-sample means
    na_share: float  # share of samples that said N/A
    unstable: int  # responses whose samples disagree (k > 1)
    mean_stdev: float | None  # mean within-response standard deviation (k > 1)


def run_skill_summaries(*, run: JudgeRun) -> list[SkillSummary]:
    """Per skill over the whole run, from the per-response aggregates (for the run page)."""
    by_skill: dict[str, list[ScoreSummary]] = {}
    for row in run_score_summaries(run=run):
        by_skill.setdefault(row.skill, []).append(row)
    result = []
    for skill, rows in by_skill.items():
        means = [r.mean for r in rows if r.mean is not None]
        stdevs = [r.stdev for r in rows if r.stdev is not None]
        samples = sum(r.samples for r in rows)
        result.append(
            SkillSummary(
                skill=skill,
                responses=len(rows),
                mean=sum(means) / len(means) if means else None,
                na_share=sum(r.na for r in rows) / samples if samples else 0.0,
                unstable=sum(1 for r in rows if r.spread),
                mean_stdev=sum(stdevs) / len(stdevs) if stdevs else None,
            )
        )
    return result


# --- pairwise runs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairwiseReport:
    """Position consistency and outcomes of a pairwise run, per skill and Overall, plus the
    Overall outcome per challenger model (consistent verdicts only)."""

    anchor_model: str
    rows: list[pairwise.ConsistencyRow]  # skills in the order asked, then Overall
    by_model: list[tuple[str, pairwise.ConsistencyRow]]


def pairwise_report(*, run: JudgeRun) -> PairwiseReport:
    judgments = (
        PairJudgment.objects.filter(run=run, status__in=[JudgmentStatus.OK, JudgmentStatus.PARTIAL])
        .values_list("response_id", "response__model_name", "order", "verdicts")
        .order_by("response_id", "order")
    )
    pairs: dict[int, list] = {}
    model_of: dict[int, str] = {}
    names: list[str] = []
    for response_id, model_name, order, verdicts in judgments:
        pairs.setdefault(response_id, [{}, {}])[order] = verdicts
        model_of[response_id] = model_name
        for name in verdicts:
            if name != pairwise.OVERALL and name not in names:
                names.append(name)
    names.append(pairwise.OVERALL)
    rows = pairwise.consistency([tuple(p) for p in pairs.values()], names)
    by_model = []
    for model in sorted(set(model_of.values())):
        mine = [tuple(p) for rid, p in pairs.items() if model_of[rid] == model]
        by_model.append((model, pairwise.consistency(mine, [pairwise.OVERALL])[0]))
    return PairwiseReport(anchor_model=run.pairwise_against, rows=rows, by_model=by_model)


def preference_accuracy(*, run: JudgeRun) -> preference.PreferenceAccuracy | None:
    """A pairwise run against `chosen` on a preference set: the judge's accuracy per subset
    and overall (judging.preference); None for any other run."""
    if run.pairwise_against != preference.CHOSEN:
        return None
    rows = (
        PairJudgment.objects.filter(run=run, response__item__metadata__preference_set=True)
        .values_list("response__item_id", "response__item__metadata__subset", "order", "verdicts")
        .order_by("response__item_id", "order")
    )
    return preference.preference_accuracy(
        preference.Verdict(item, str(subset or ""), order, (verdicts or {}).get(pairwise.OVERALL))
        for item, subset, order, verdicts in rows
    )


# --- analytics: each judge's scores of a project, as plain rows -----------------------------------


def judge_runs_finished_since(*, project: Project, since: datetime) -> list[tuple[str, str, int]]:
    """(kind, judge name, judgments done) of the project's runs that finished after `since`,
    oldest first. `kind` is "pointwise" (may replace its judge's scores in the report:
    judge_score_rows), "pairwise" (its verdicts feed the preference figures and the trust
    figures: pair_judgment_rows) or "probe" (a bias probe, pointwise or pairwise: it feeds
    the trust report)."""
    rows = (
        JudgeRun.objects.filter(
            judge__project=project, status=RunStatus.DONE, finished_at__gt=since
        )
        .order_by("finished_at", "pk")
        .values_list("probe", "pairwise_against", "judge__name", "done")
    )
    return [
        ("probe" if probe else "pairwise" if against else "pointwise", name, done)
        for probe, against, name, done in rows
    ]


def judge_score_rows(*, project: Project) -> list[tuple]:
    """(response id, item id, system, skill name, judge name, score or None for N/A) per
    judge of the project: from each judge's latest finished pointwise run per dataset,
    the k samples of a response averaged (from the integer sum and count, N/A left out;
    None when every sample said N/A)."""
    rows = (
        JudgeScore.objects.filter(run_id__in=latest_run_ids_for_project(project=project))
        .values_list(
            "response_id",
            "response__item_id",
            "response__model_name",
            "skill__name",
            "run__judge__name",
            "score",
        )
        .order_by("response_id", "skill__order", "skill__name", "run__judge__name")
    )
    sums: dict[tuple, list[int]] = {}
    for response_id, item_id, system, skill, judge, score in rows:
        acc = sums.setdefault((response_id, item_id, system, skill, judge), [0, 0])
        if score is not None:
            acc[0] += score
            acc[1] += 1
    return [(*key, (total / count) if count else None) for key, (total, count) in sums.items()]


# --- analytics: a project's judge scores and review rows for a score export, as plain rows -------


def latest_run_ids_for_project(
    *, project: Project, judges: Sequence[str] = (), dataset_id: int | None = None
) -> list[int]:
    """The pk of each judge's latest finished pointwise run per dataset (the runs
    `judge_score_rows` reads), in no order; `judges` (names) and `dataset_id` narrow."""
    runs = JudgeRun.objects.filter(
        judge__project=project, status=RunStatus.DONE, pairwise_against="", probe=""
    )
    if judges:
        runs = runs.filter(judge__name__in=judges)
    if dataset_id is not None:
        runs = runs.filter(dataset_id=dataset_id)
    return list(
        runs.values("judge_id", "dataset_id")
        .annotate(run_id=Max("pk"))
        .values_list("run_id", flat=True)
        .order_by()
    )


def _judge_scores_for_export(
    *,
    project: Project,
    skills: Sequence[str],
    dataset_id: int | None,
    systems: Sequence[str],
    judges: Sequence[str],
    run_id: int | None,
    run_ids: Sequence[int] | None,
) -> QuerySet[JudgeScore]:
    """The judge scores of the project's pointwise runs (one per sample), narrowed."""
    qs = JudgeScore.objects.filter(
        run__judge__project=project, run__pairwise_against="", run__probe=""
    )
    if run_ids is not None:
        qs = qs.filter(run_id__in=run_ids)
    if run_id is not None:
        qs = qs.filter(run_id=run_id)
    if judges:
        qs = qs.filter(run__judge__name__in=judges)
    return scores_narrowed(qs, skills=skills, dataset_id=dataset_id, systems=systems)


def judge_score_export_rows(
    *,
    project: Project,
    skills: Sequence[str] = (),
    dataset_id: int | None = None,
    systems: Sequence[str] = (),
    judges: Sequence[str] = (),
    run_id: int | None = None,
    run_ids: Sequence[int] | None = None,
    chunk_size: int = 2000,
) -> Iterator[tuple]:
    """Every judge score of the project's pointwise runs, one per sample (of `run_ids` only
    when given, e.g. `latest_run_ids_for_project`; of `run_id` only when given), streamed
    `chunk_size` rows per round trip (a server-side cursor on PostgreSQL), ordered by
    (response id, skill id, judge name, run id, sample index, pk). One tuple per score:

    (response id, skill id, dataset name, item external id, system, skill name, judge name,
    score, is_na, feedback, the judgment's latency_ms, rubric version, prompt template
    version, run id, the judgment's created_at and updated_at, sample index, the rubric's
    project slug or None when built in)

    `score` is as stored (an N/A row says so in `is_na`). Empty sequences and None ids do
    not narrow."""
    qs = _judge_scores_for_export(
        project=project,
        skills=skills,
        dataset_id=dataset_id,
        systems=systems,
        judges=judges,
        run_id=run_id,
        run_ids=run_ids,
    )
    rows = qs.order_by(
        "response_id", "skill_id", "run__judge__name", "run_id", "judgment__sample_index", "pk"
    ).values_list(
        "response_id",
        "skill_id",
        "response__item__dataset__name",
        "response__item__external_id",
        "response__model_name",
        "skill__name",
        "run__judge__name",
        "score",
        "is_na",
        "feedback",
        "judgment__latency_ms",
        "rubric__version",
        "judgment__prompt_template__version",
        "run_id",
        "judgment__created_at",
        "judgment__updated_at",
        "judgment__sample_index",
        "rubric__project__slug",
    )
    return rows.iterator(chunk_size=chunk_size)


def judge_score_export_judges(
    *,
    project: Project,
    skills: Sequence[str] = (),
    dataset_id: int | None = None,
    systems: Sequence[str] = (),
    judges: Sequence[str] = (),
    run_id: int | None = None,
    run_ids: Sequence[int] | None = None,
) -> list[str]:
    """The names of the judges with at least one score among the rows
    `judge_score_export_rows` gives for the same arguments, each once, sorted."""
    qs = _judge_scores_for_export(
        project=project,
        skills=skills,
        dataset_id=dataset_id,
        systems=systems,
        judges=judges,
        run_id=run_id,
        run_ids=run_ids,
    )
    return sorted(qs.values_list("run__judge__name", flat=True).distinct().order_by())


def judge_names_for_project(*, project: Project) -> list[str]:
    """The names of the project's judges, sorted."""
    return list(
        JudgeConfig.objects.filter(project=project).order_by("name").values_list("name", flat=True)
    )


def run_review_rows(
    *, run_id: int, systems: Sequence[str] = (), chunk_size: int = 2000
) -> Iterator[tuple]:
    """One row per response a run judged (of `systems` only, when given), by response id:
    its first judgment, by sample index, that got an answer (a failed call has none),
    streamed `chunk_size` rows per round trip. One tuple per response:

    (judgment id, response id, item external id, system, instruction, reference answer,
    response text, raw output, prompt_tokens, completion_tokens, the request's
    "total_tokens" (any JSON value, or None))"""
    judgments = Judgment.objects.filter(run_id=run_id).exclude(status=JudgmentStatus.FAILED)
    if systems:
        judgments = judgments.filter(response__model_name__in=systems)
    rows = judgments.order_by("response_id", "sample_index").values_list(
        "pk",
        "response_id",
        "response__item__external_id",
        "response__model_name",
        "response__item__instruction",
        "response__item__reference_answer",
        "response__text",
        "raw_output",
        "prompt_tokens",
        "completion_tokens",
        "request__total_tokens",
    )
    last_response = None
    for row in rows.iterator(chunk_size=chunk_size):
        if row[1] == last_response:
            continue  # a later sample of the same response
        last_response = row[1]
        yield row


def judgment_score_rows(
    *, judgment_ids: Sequence[int], skills: Sequence[str] = ()
) -> list[tuple[int, str, int | None, bool]]:
    """(judgment id, skill name, score, is_na) of every score of the judgments (of
    `skills` only, when given), by judgment, then skill order and name (one query)."""
    scores = JudgeScore.objects.filter(judgment_id__in=judgment_ids)
    if skills:
        scores = scores.filter(skill__name__in=skills)
    return list(
        scores.order_by("judgment_id", "skill__order", "skill__name").values_list(
            "judgment_id", "skill__name", "score", "is_na"
        )
    )


# --- one judge or run by name or id (the analytics exports) ---------------------------------------


def judge_get_by_name(*, project: Project, name: str) -> JudgeConfig | None:
    return JudgeConfig.objects.filter(project=project, name=name).first()


def pointwise_run_get(*, project: Project, run_id: int) -> JudgeRun | None:
    """The project's pointwise run `run_id`, with its judge; None if there is none."""
    return (
        JudgeRun.objects.select_related("judge")
        .filter(pk=run_id, judge__project=project, pairwise_against="")
        .first()
    )


def pointwise_run_latest(*, judge: JudgeConfig, dataset_id: int | None = None) -> JudgeRun | None:
    """The judge's latest finished pointwise run (on `dataset_id`, if given)."""
    runs = JudgeRun.objects.filter(
        judge=judge, status=RunStatus.DONE, pairwise_against="", probe=""
    )
    if dataset_id is not None:
        runs = runs.filter(dataset_id=dataset_id)
    return runs.order_by("-pk").first()


def pointwise_run_list_for_dataset(*, project: Project, dataset_id: int) -> QuerySet[JudgeRun]:
    """The project's pointwise runs over the dataset (not pairwise, not bias probes), in any
    status, newest first, with their judge (analytics' active selection offers the finished
    ones)."""
    return (
        JudgeRun.objects.filter(
            judge__project=project, dataset_id=dataset_id, pairwise_against="", probe=""
        )
        .select_related("judge")
        .order_by("-pk")
    )


def run_score_samples(*, run_ids: Sequence[int]) -> list[tuple[int, int, int, int, int | None]]:
    """(run id, response id, skill id, sample index, score or None for N/A) of every score
    of the runs, by run, response, skill and sample: the k samples of each response apart
    (analytics' active selection reads their spread). One query."""
    return list(
        JudgeScore.objects.filter(run_id__in=list(run_ids))
        .order_by("run_id", "response_id", "skill_id", "judgment__sample_index")
        .values_list("run_id", "response_id", "skill_id", "judgment__sample_index", "score")
    )


# --- analytics: one response's judge scores (the researchers' response page) -------------------


@dataclass(frozen=True)
class JudgeScoreRow:
    judge: str
    run_id: int
    run_status: str
    judgment_id: int
    sample_index: int
    skill: str
    score: int | None  # None: N/A (or a baseline that gave no score)
    raw_value: float | None  # a baseline metric's own value
    feedback: str  # the judge's rationale
    created_at: datetime


def judge_score_list_for_response(*, project: Project, response_id: int) -> list[JudgeScoreRow]:
    """Every judge score of the response by the project's judges: by judge, newest run
    first, then sample and skill order. One query."""
    rows = (
        JudgeScore.objects.filter(response_id=response_id, run__judge__project=project)
        .order_by(
            "run__judge__name",
            "-run_id",
            "judgment__sample_index",
            "skill__order",
            "skill__name",
        )
        .values_list(
            "run__judge__name",
            "run_id",
            "run__status",
            "judgment_id",
            "judgment__sample_index",
            "skill__name",
            "score",
            "raw_value",
            "feedback",
            "judgment__created_at",
        )
    )
    return [JudgeScoreRow(*row) for row in rows]


@dataclass(frozen=True)
class JudgeOutputRow:
    """One judgment of a response (one sample of a run) with its raw output and its scores
    as (skill, score or None for N/A, raw_value, feedback, rubric version label)."""

    judge: str
    run_id: int
    probe: str  # the probe kind of a probe run, "" for an ordinary run
    judgment_id: int
    sample_index: int
    status: str
    raw_output: str
    prompt_template: str  # "name v<version>", "" when none was recorded
    scores: list[tuple[str, int | None, float | None, str, str]]


def judge_outputs_for_responses(
    *, project: Project, response_ids: Sequence[int], run_ids: Sequence[int]
) -> dict[int, list[JudgeOutputRow]]:
    """response id -> the judgments of runs `run_ids` (of the project's judges) for it, by
    judge, run, sample, each with its raw output and scores (analytics' drill-down page).
    Two queries, whatever the number of responses."""
    judgments = (
        Judgment.objects.filter(
            response_id__in=list(response_ids),
            run_id__in=list(run_ids),
            run__judge__project=project,
        )
        .order_by("response_id", "run__judge__name", "run_id", "sample_index")
        .values_list(
            "pk",
            "response_id",
            "run__judge__name",
            "run_id",
            "run__probe",
            "sample_index",
            "status",
            "raw_output",
            "prompt_template__name",
            "prompt_template__version",
        )
    )
    rows = list(judgments)
    scores: dict[int, list[tuple[str, int | None, float | None, str, str]]] = {}
    for judgment_id, skill, score, raw_value, feedback, slug, version in (
        JudgeScore.objects.filter(judgment_id__in=[r[0] for r in rows])
        .order_by("judgment_id", "skill__order", "skill__name")
        .values_list(
            "judgment_id",
            "skill__name",
            "score",
            "raw_value",
            "feedback",
            "rubric__project__slug",
            "rubric__version",
        )
    ):
        label = "" if version is None else rubric_label(project_slug=slug, version=version)
        scores.setdefault(judgment_id, []).append((skill, score, raw_value, feedback, label))
    found: dict[int, list[JudgeOutputRow]] = {}
    for pk, response_id, judge, run_id, probe, sample, status, raw, name, version in rows:
        template = f"{name} v{version}" if name else ""
        found.setdefault(response_id, []).append(
            JudgeOutputRow(
                judge, run_id, probe, pk, sample, status, raw, template, scores.get(pk, [])
            )
        )
    return found


# --- analytics: a judge's k samples (the judge trust report's stochasticity) ------------------


def judge_sample_rows(
    *, project: Project, judges: Sequence[str] = ()
) -> dict[str, list[tuple[int, int, str, int, int | None]]]:
    """judge name -> (response id, item id, skill name, sample index, score or None for
    N/A) of every sample of the runs `judge_score_rows` reads (each judge's latest finished
    pointwise run per dataset) that hold more than one sample of a response; judges whose
    runs have one sample per response are left out. Two queries."""
    run_ids = latest_run_ids_for_project(project=project, judges=judges)
    sampled = list(
        Judgment.objects.filter(run_id__in=run_ids, sample_index__gte=1)
        .values_list("run_id", flat=True)
        .distinct()
        .order_by()
    )
    rows = (
        JudgeScore.objects.filter(run_id__in=sampled)
        .order_by("run__judge__name", "response_id", "skill__order", "judgment__sample_index")
        .values_list(
            "run__judge__name",
            "response_id",
            "response__item_id",
            "skill__name",
            "judgment__sample_index",
            "score",
        )
    )
    out: dict[str, list[tuple[int, int, str, int, int | None]]] = {}
    for name, response_id, item_id, skill, sample, score in rows:
        out.setdefault(name, []).append((response_id, item_id, skill, sample, score))
    return out


# --- analytics: bias probes (docs/JUDGE_TRUST.md) ------------------------------------------------


@dataclass(frozen=True)
class ProbeRunData:
    """One finished probe run beside its base run: per (response, skill) the mean score of
    its samples (N/A left out) for a pointwise probe, per (response, order) the Overall
    verdict for a pairwise one; `items` maps every response read to its item."""

    run_id: int
    judge: str
    probe: str
    label: str
    base_run_id: int
    params: dict[str, Any]
    texts: list[str]
    cost: str
    base_cost: str
    pairwise: bool
    items: dict[int, int]
    base_scores: dict[tuple[int, str], float]
    probe_scores: dict[tuple[int, str], float]
    base_verdicts: dict[tuple[int, int], str]
    probe_verdicts: dict[tuple[int, int], str]


@dataclass(frozen=True)
class ProbeData:
    """What analytics.trust.probes.probe_figures reads: the probe runs, the declared
    families of systems and judges, and the length (characters) of each response the
    judges' report runs scored."""

    runs: list[ProbeRunData]
    families: dict[str, str]
    judge_families: dict[str, str]
    lengths: dict[int, int]


def _mean_scores(run_id: int, items: dict[int, int]) -> dict[tuple[int, str], float]:
    sums: dict[tuple[int, str], list[int]] = {}
    rows = JudgeScore.objects.filter(run_id=run_id, score__isnull=False).values_list(
        "response_id", "response__item_id", "skill__name", "score"
    )
    for response_id, item_id, skill, score in rows:
        items[response_id] = item_id
        acc = sums.setdefault((response_id, skill), [0, 0])
        acc[0] += score or 0  # N/A rows are filtered out above
        acc[1] += 1
    return {key: total / count for key, (total, count) in sums.items()}


def _overall_verdicts(run_id: int, items: dict[int, int]) -> dict[tuple[int, int], str]:
    verdicts = {}
    rows = PairJudgment.objects.filter(
        run_id=run_id, status__in=[JudgmentStatus.OK, JudgmentStatus.PARTIAL]
    ).values_list("response_id", "response__item_id", "order", "verdicts")
    for response_id, item_id, order, given in rows:
        overall = (given or {}).get(pairwise.OVERALL)
        if isinstance(overall, str):
            items[response_id] = item_id
            verdicts[(response_id, order)] = overall
    return verdicts


def probe_data(*, project: Project, judges: Sequence[str] = ()) -> ProbeData:
    """Everything analytics.trust.probes.probe_figures needs: the project's finished probe
    runs (of `judges`, by name, when given) with their base runs' scores or verdicts, the
    families (ModelFamily, JudgeConfig.family) and response lengths."""
    runs = (
        JudgeRun.objects.filter(judge__project=project, status=RunStatus.DONE)
        .exclude(probe="")
        .select_related("judge", "base_run")
        .order_by("judge__name", "probe", "pk")
    )
    if judges:
        runs = runs.filter(judge__name__in=judges)
    found = []
    for run in runs:
        base = run.base_run
        assert base is not None, "a probe run has a base run (run_probe_has_base)"
        items: dict[int, int] = {}
        pair = bool(run.pairwise_against)
        params = {k: v for k, v in (run.probe_params or {}).items() if k != "responses"}
        found.append(
            ProbeRunData(
                run_id=run.pk,
                judge=run.judge.name,
                probe=run.probe,
                label=run.get_probe_display(),
                base_run_id=base.pk,
                params=params,
                texts=prompt_probes.probe_texts(run.probe, params),
                cost=str(run.cost),
                base_cost=str(base.cost),
                pairwise=pair,
                items=items,
                base_scores={} if pair else _mean_scores(base.pk, items),
                probe_scores={} if pair else _mean_scores(run.pk, items),
                base_verdicts=_overall_verdicts(base.pk, items) if pair else {},
                probe_verdicts=_overall_verdicts(run.pk, items) if pair else {},
            )
        )
    judge_rows = JudgeConfig.objects.filter(project=project)
    if judges:
        judge_rows = judge_rows.filter(name__in=judges)
    scored = JudgeScore.objects.filter(
        run_id__in=latest_run_ids_for_project(project=project, judges=judges)
    ).values("response_id")
    lengths = dict(
        Response.objects.filter(pk__in=scored)
        .annotate(chars=Length("text"))
        .values_list("pk", "chars")
    )
    return ProbeData(
        runs=found,
        families=dict(
            ModelFamily.objects.filter(project=project).values_list("model_name", "family")
        ),
        judge_families=dict(judge_rows.exclude(family="").values_list("name", "family")),
        lengths=lengths,
    )


# --- analytics: each judge's pairwise verdicts, as plain rows ------------------------------------


def pair_judgment_rows(*, project: Project, judges: Sequence[str] = ()) -> list[tuple]:
    """(judge name, item id, challenger system, anchor system, order, verdicts) of every
    read pair judgment (ok or partial) of each judge's latest finished pairwise run per
    dataset and anchor system; `verdicts` maps a skill name or "Overall" to challenger,
    anchor or tie (judging.prompts.pairwise), whatever the order."""
    runs = JudgeRun.objects.filter(judge__project=project, status=RunStatus.DONE, probe="")
    runs = runs.exclude(pairwise_against="")
    if judges:
        runs = runs.filter(judge__name__in=judges)
    latest = (
        runs.values("judge_id", "dataset_id", "pairwise_against")
        .annotate(run_id=Max("pk"))
        .values_list("run_id", flat=True)
        .order_by()
    )
    return list(
        PairJudgment.objects.filter(
            run_id__in=list(latest), status__in=[JudgmentStatus.OK, JudgmentStatus.PARTIAL]
        )
        .order_by("run__judge__name", "response_id", "order")
        .values_list(
            "run__judge__name",
            "response__item_id",
            "response__model_name",
            "anchor__model_name",
            "order",
            "verdicts",
        )
    )


def judge_settings_for_project(*, project: Project) -> list[dict[str, Any]]:
    """Each judge of the project with what a published dataset states about its
    configuration (an export's dataset card, analytics/exports/): kind, provider name, model,
    temperature, samples, prompt template key and version, reference use, baseline metric.
    Never a provider's credentials or base URL. One query, by name."""
    return [
        dict(row)
        for row in JudgeConfig.objects.filter(project=project)
        .order_by("name")
        .values(
            "name",
            "kind",
            "model",
            "temperature",
            "samples",
            "max_tokens",
            "use_reference",
            "baseline",
            provider_name=F("provider__name"),
            prompt_key=F("prompt_template__key"),
            prompt_version=F("prompt_template__version"),
        )
    ]


@dataclass(frozen=True)
class JudgeSetup:
    """One judge as the judge comparison shows it (analytics.judge_compare): its
    configuration, its prompt template's text, and the recorded cost and judgments
    (done, failed and unparseable) of the runs its scores come from (`judge_score_rows`'
    runs: its latest finished pointwise run per dataset). No key and no key location."""

    name: str
    kind: str
    model: str
    provider: str
    base_url: str
    temperature: float
    samples: int
    prompt_key: str
    prompt_version: int | None
    system_prompt: str
    user_template: str
    runs: int
    cost: Decimal
    judgments: int


def judge_setups_for_comparison(*, project: Project, names: Sequence[str]) -> list[JudgeSetup]:
    """The project's judges among `names` (a name with no judge, such as a rater of imported
    scores, is left out), by name. Two queries."""
    judges = list(
        JudgeConfig.objects.filter(project=project, name__in=list(names))
        .select_related("provider", "prompt_template")
        .order_by("name")
    )
    runs = (
        JudgeRun.objects.filter(
            pk__in=latest_run_ids_for_project(project=project, judges=[j.name for j in judges])
        )
        .values("judge_id")
        .annotate(
            n=Count("pk"),
            spent=Sum("cost"),
            made=Sum(F("done") + F("failed") + F("parse_failed")),
        )
        .order_by()
    )
    by_judge = {row["judge_id"]: row for row in runs}
    found = []
    for judge in judges:
        template = judge.prompt_template
        row = by_judge.get(judge.pk, {})
        found.append(
            JudgeSetup(
                name=judge.name,
                kind=judge.kind,
                model=judge.model,
                provider=(judge.provider.label or judge.provider.name) if judge.provider else "",
                base_url=judge.base_url,
                temperature=judge.temperature,
                samples=judge.samples,
                prompt_key=template.key if template else "",
                prompt_version=template.version if template else None,
                system_prompt=template.system_prompt if template else "",
                user_template=template.user_template if template else "",
                runs=int(row.get("n") or 0),
                cost=row.get("spent") or Decimal(0),
                judgments=int(row.get("made") or 0),
            )
        )
    return found
