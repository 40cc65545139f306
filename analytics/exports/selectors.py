"""Reads of the score exports (analytics/exports.py): every score of a project as a stream
of plain rows, the raters that become the wide table's columns, the rows of a FLASK review
file, and the export jobs themselves.

Campaign scores are read through annotation.selectors (`human_score_export_rows`,
`human_score_export_annotators`) and judge scores, runs and review rows through
judging.selectors (`judge_score_export_rows`, `latest_run_ids_for_project`, ...): plain
tuples, streamed with memory bound by a chunk, by the same inclusion rules as the report's
`human_score_rows` / `judge_score_rows`. This module turns them into `ScoreRow` and
`ReviewLine`, and reads analytics' own tables (imported scores, export jobs).

Every row stream is ordered by (response id, skill id): integers, so the database and
Python agree on the order and the three sources (campaign scores, judge scores, imported
scores) merge into one ordered stream without sorting in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from django.db.models import Q, QuerySet
from django.db.models.functions import Floor
from django.shortcuts import get_object_or_404

from analytics.models import ExportJob, ImportedScore, RaterKind
from annotation import selectors as annotation_selectors
from annotation.access import project_get_for_staff
from annotation.models import Project, rubric_label
from judging import selectors as judging_selectors

#: Rows fetched per round trip of a streaming query (server-side cursor on PostgreSQL).
#: 2,000 rows of about 20 short columns is a few hundred KB of Python objects.
FETCH_CHUNK = 2000


@dataclass(frozen=True)
class ExportFilters:
    """What an export narrows to, resolved to ids (analytics.exports.export_options_clean).

    `judges` narrows judge rows only and `campaign_id` human rows only (judge and imported
    rows of a campaign's export are narrowed to its dataset and systems instead, given as
    `dataset_id` and `systems`)."""

    skills: tuple[str, ...] = ()
    rater_kind: str = ""  # "", "human" or "judge"
    judges: tuple[str, ...] = ()
    campaign_id: int | None = None
    dataset_id: int | None = None
    systems: tuple[str, ...] = ()
    run_id: int | None = None

    def wants(self, kind: str) -> bool:
        return not self.rater_kind or self.rater_kind == kind


class ScoreRow(NamedTuple):
    """One score of the long table; `score` is None for N/A."""

    response_id: int
    skill_id: int
    dataset: str
    item: str
    system: str
    skill: str
    rater: str
    rater_kind: str
    score: float | int | None
    is_na: bool
    rationale: str
    time_on_task_ms: int | None
    rubric_version: int | None
    prompt_version: int | None
    source: str
    created_at: datetime
    updated_at: datetime
    sample: int | None
    rubric_label: str | None = None  # annotation.models.rubric_label; None: no rubric
    platform: str = ""  # a study participant's recruiting platform (annotation/study/)
    worker_id: str = ""  # their id there; both blank for ordinary accounts and judges
    language: str = ""  # the language a person's task was shown in ("": unknown, or a judge)


def _label(project_slug: str | None, version: int | None) -> str | None:
    return None if version is None else rubric_label(project_slug=project_slug, version=version)


def _narrowed(qs: QuerySet, f: ExportFilters) -> QuerySet:
    return annotation_selectors.scores_narrowed(
        qs, skills=f.skills, dataset_id=f.dataset_id, systems=f.systems
    )


# --- campaign scores ------------------------------------------------------------------------------


def _human_narrowing(f: ExportFilters) -> dict:
    return {
        "skills": f.skills,
        "dataset_id": f.dataset_id,
        "systems": f.systems,
        "campaign_id": f.campaign_id,
    }


def human_score_export_rows(*, project: Project, filters: ExportFilters) -> Iterator[ScoreRow]:
    """The project's accepted campaign scores (annotation.selectors.human_score_export_rows:
    normal tasks and assignments, submitted; gold items, attention checks and hidden repeats
    are quality control, not data)."""
    if not filters.wants(RaterKind.HUMAN):
        return
    rows = annotation_selectors.human_score_export_rows(
        project=project, **_human_narrowing(filters), chunk_size=FETCH_CHUNK
    )
    participants = annotation_selectors.participant_ids_for_project(project=project)
    for (
        response_id,
        skill_id,
        dataset,
        item,
        system,
        skill,
        rater,
        score,
        is_na,
        rationale,
        time_ms,
        active_ms,
        rubric_version,
        campaign,
        created_at,
        updated_at,
        rubric_scope,
        language,
    ) in rows:
        yield ScoreRow(
            response_id,
            skill_id,
            dataset,
            item,
            system,
            skill,
            rater,
            RaterKind.HUMAN.value,
            None if is_na else score,
            is_na,
            rationale,
            time_ms if time_ms is not None else active_ms,
            rubric_version,
            None,
            f"campaign:{campaign}",
            created_at,
            updated_at,
            None,
            _label(rubric_scope, rubric_version),
            *participants.get(rater, ("", "")),
            language,
        )


# --- judge scores ---------------------------------------------------------------------------------


def latest_run_ids(*, project: Project, filters: ExportFilters) -> list[int]:
    """Each judge's latest finished pointwise run per dataset: the runs the analytics report
    reads (judging.selectors.judge_score_rows), hence the wide table's."""
    return judging_selectors.latest_run_ids_for_project(
        project=project, judges=filters.judges, dataset_id=filters.dataset_id
    )


def _judge_narrowing(f: ExportFilters) -> dict:
    return {
        "skills": f.skills,
        "dataset_id": f.dataset_id,
        "systems": f.systems,
        "judges": f.judges,
        "run_id": f.run_id,
    }


def judge_score_export_rows(
    *, project: Project, filters: ExportFilters, run_ids: list[int] | None = None
) -> Iterator[ScoreRow]:
    """The project's judge scores, one per sample: of every pointwise run, or of `run_ids`."""
    if not filters.wants(RaterKind.JUDGE):
        return
    rows = judging_selectors.judge_score_export_rows(
        project=project, **_judge_narrowing(filters), run_ids=run_ids, chunk_size=FETCH_CHUNK
    )
    for (
        response_id,
        skill_id,
        dataset,
        item,
        system,
        skill,
        rater,
        score,
        is_na,
        feedback,
        latency_ms,
        rubric_version,
        prompt_version,
        run_id,
        created_at,
        updated_at,
        sample,
        rubric_scope,
    ) in rows:
        yield ScoreRow(
            response_id,
            skill_id,
            dataset,
            item,
            system,
            skill,
            rater,
            RaterKind.JUDGE.value,
            None if is_na else score,
            is_na,
            feedback,
            latency_ms,
            rubric_version,
            prompt_version,
            f"run:{run_id}",
            created_at,
            updated_at,
            sample,
            _label(rubric_scope, rubric_version),
        )


# --- imported scores ------------------------------------------------------------------------------


def imported_scores_for_export(
    *, project: Project, filters: ExportFilters
) -> QuerySet[ImportedScore]:
    """Scores brought in with `import_scores`. A campaign's export leaves out imported human
    scores (they are not the campaign's); `judges` narrows the imported judge rows."""
    qs = ImportedScore.objects.filter(project=project)
    if filters.rater_kind:
        qs = qs.filter(rater_kind=filters.rater_kind)
    if filters.campaign_id is not None:
        qs = qs.filter(rater_kind=RaterKind.JUDGE)
    if filters.judges:
        qs = qs.filter(Q(rater_kind=RaterKind.HUMAN) | Q(rater__in=filters.judges))
    if filters.run_id is not None:  # one judge run asked for: no imported judge rows
        qs = qs.filter(rater_kind=RaterKind.HUMAN)
    return _narrowed(qs, filters)


def imported_scores_are_small_integers(*, project: Project, filters: ExportFilters) -> bool:
    """Whether every imported score an export holds is a whole number from -128 to 127 (N/A
    aside): then a Parquet export's `score` column is int8, else float64. One query."""
    fractional = (
        imported_scores_for_export(project=project, filters=filters)
        .filter(is_na=False, value__isnull=False)
        .filter(~Q(value=Floor("value")) | Q(value__lt=-128) | Q(value__gt=127))
    )
    return not fractional.exists()


def imported_score_export_rows(*, project: Project, filters: ExportFilters) -> Iterator[ScoreRow]:
    rows = (
        imported_scores_for_export(project=project, filters=filters)
        .order_by("response_id", "skill_id", "rater_kind", "rater", "pk")
        .values_list(
            "response_id",
            "skill_id",
            "response__item__dataset__name",
            "response__item__external_id",
            "response__model_name",
            "skill__name",
            "rater",
            "rater_kind",
            "value",
            "is_na",
            "rationale",
            "batch_id",
            "batch__created_at",
            "batch__updated_at",
        )
    )
    for (
        response_id,
        skill_id,
        dataset,
        item,
        system,
        skill,
        rater,
        kind,
        value,
        is_na,
        rationale,
        batch_id,
        created_at,
        updated_at,
    ) in rows.iterator(chunk_size=FETCH_CHUNK):
        yield ScoreRow(
            response_id,
            skill_id,
            dataset,
            item,
            system,
            skill,
            rater,
            kind,
            value,
            is_na,
            rationale,
            None,
            None,
            None,
            f"import:{batch_id}",
            created_at,
            updated_at,
            None,
        )


# --- the wide table's columns ---------------------------------------------------------------------


def raters_for_export(
    *, project: Project, filters: ExportFilters, run_ids: list[int]
) -> tuple[list[str], list[str]]:
    """(annotators, judges), each sorted: the raters with at least one score in the export.
    An imported rater joins the annotator or judge of the same name (as in the report)."""
    humans: set[str] = set()
    if filters.wants(RaterKind.HUMAN):
        humans.update(
            annotation_selectors.human_score_export_annotators(
                project=project, **_human_narrowing(filters)
            )
        )
    judges: set[str] = set()
    if filters.wants(RaterKind.JUDGE):
        judges.update(
            judging_selectors.judge_score_export_judges(
                project=project, **_judge_narrowing(filters), run_ids=run_ids
            )
        )
    imported = (
        imported_scores_for_export(project=project, filters=filters)
        .values_list("rater_kind", "rater")
        .distinct()
        .order_by()
    )
    for kind, rater in imported:
        (humans if kind == RaterKind.HUMAN else judges).add(rater)
    return sorted(humans), sorted(judges)


def judge_names_for_export(*, project: Project) -> list[str]:
    """The project's judges and the raters of its imported judge scores, sorted."""
    names = set(judging_selectors.judge_names_for_project(project=project))
    names |= set(
        ImportedScore.objects.filter(project=project, rater_kind=RaterKind.JUDGE)
        .values_list("rater", flat=True)
        .distinct()
        .order_by()
    )
    return sorted(names)


# --- FLASK review files ---------------------------------------------------------------------------


class ReviewLine(NamedTuple):
    item: str
    system: str
    instruction: str
    reference: str
    response: str
    review: str
    total_tokens: int | None
    scores: list[tuple[str, int | None]]  # (skill name, score or None for N/A), in skill order


def flask_review_lines(
    *, run_id: int, filters: ExportFilters, chunk_size: int = FETCH_CHUNK
) -> Iterator[ReviewLine]:
    """One line per judged response of a run: its first judgment that got an answer (a
    call that failed has no review). A judgment whose answer could not be read has no
    scores. Scores are read per chunk of judgments, so memory holds one chunk."""
    rows = judging_selectors.run_review_rows(
        run_id=run_id, systems=filters.systems, chunk_size=chunk_size
    )
    batch: list[tuple] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= chunk_size:
            yield from _review_batch(batch, filters)
            batch = []
    if batch:
        yield from _review_batch(batch, filters)


def _review_batch(batch: list[tuple], filters: ExportFilters) -> Iterator[ReviewLine]:
    scores = judging_selectors.judgment_score_rows(
        judgment_ids=[row[0] for row in batch], skills=filters.skills
    )
    by_judgment: dict[int, list[tuple[str, int | None]]] = {}
    for judgment_id, skill, score, is_na in scores:
        by_judgment.setdefault(judgment_id, []).append((skill, None if is_na else score))
    for (
        pk,
        _,
        item,
        system,
        instruction,
        reference,
        response,
        review,
        prompt_tokens,
        completion_tokens,
        imported_tokens,
    ) in batch:
        if isinstance(imported_tokens, int) and not isinstance(imported_tokens, bool):
            tokens: int | None = imported_tokens
        else:
            tokens = (prompt_tokens + completion_tokens) or None
        yield ReviewLine(
            item,
            system,
            instruction,
            reference,
            response,
            review,
            tokens,
            by_judgment.get(pk, []),
        )


# --- export jobs ----------------------------------------------------------------------------------


def export_list_for_project(*, project: Project, limit: int | None = 50) -> QuerySet[ExportJob]:
    jobs = ExportJob.objects.filter(project=project).select_related("requested_by")
    jobs = jobs.order_by("-created_at", "-pk")
    return jobs[:limit] if limit is not None else jobs


def export_get_for_staff(user, pk: int) -> ExportJob:
    """The export job, if `user` is an admin or researcher of its project: 404 for unknown
    ids and non-members, 403 for annotators (exports hold judge scores and every
    annotator's scores). Pre-joins the project and the requester."""
    job = get_object_or_404(ExportJob.objects.select_related("project", "requested_by"), pk=pk)
    project_get_for_staff(user, job.project.slug)
    return job
