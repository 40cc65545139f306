"""Reads of the score imports: the project's imports and import jobs."""

from __future__ import annotations

from django.db.models import QuerySet

from analytics.models import ScoreImport, ScoreImportJob
from annotation.models import Project


def score_import_list(*, project: Project, limit: int = 50) -> QuerySet[ScoreImport]:
    """The project's latest long-format score imports, newest first, with who made them."""
    return ScoreImport.objects.filter(project=project).select_related("dataset", "created_by")[
        :limit
    ]


def score_import_job_list(*, project: Project, limit: int = 10) -> QuerySet[ScoreImportJob]:
    """The project's latest score import jobs, newest first."""
    return ScoreImportJob.objects.filter(project=project).order_by("-created_at")[:limit]
