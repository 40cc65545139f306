"""Reads of the score and preference imports: the project's imports and import jobs."""

from __future__ import annotations

from django.db.models import QuerySet

from analytics.models import PreferenceImport, PreferenceImportJob, ScoreImport, ScoreImportJob
from annotation.models import Project


def score_import_list(*, project: Project, limit: int = 50) -> QuerySet[ScoreImport]:
    """The project's latest long-format score imports, newest first, with who made them."""
    return ScoreImport.objects.filter(project=project).select_related("dataset", "created_by")[
        :limit
    ]


def score_import_job_list(*, project: Project, limit: int = 10) -> QuerySet[ScoreImportJob]:
    """The project's latest score import jobs, newest first."""
    return ScoreImportJob.objects.filter(project=project).order_by("-created_at")[:limit]


def preference_import_list(*, project: Project, limit: int = 50) -> QuerySet[PreferenceImport]:
    """The project's latest preference-label imports, newest first, with who made them."""
    return PreferenceImport.objects.filter(project=project).select_related("created_by")[:limit]


def preference_import_job_list(
    *, project: Project, limit: int = 10
) -> QuerySet[PreferenceImportJob]:
    """The project's latest preference import jobs, newest first."""
    return PreferenceImportJob.objects.filter(project=project).order_by("-created_at")[:limit]
