"""View access helpers of the judging pages and API: fetch an object and enforce who may see
it. Judges, runs, judgments and prompt templates belong to a project; its admins and
researchers may see and drive them, annotators get 403 (they must not see model judgments
of what they score), everyone else 404 (they may not know the object exists)."""

from __future__ import annotations

from django.db.models import Prefetch
from django.http import Http404
from django.shortcuts import get_object_or_404

from annotation.access import project_get_for_staff, project_require_role
from annotation.models import Project
from judging.models import (
    JudgeConfig,
    JudgeOutputImportJob,
    JudgeRun,
    JudgeScore,
    Judgment,
    PromptTemplate,
)


def output_import_job_get_for_staff(user, pk: int) -> JudgeOutputImportJob:
    job = get_object_or_404(
        JudgeOutputImportJob.objects.select_related("project", "dataset"), pk=pk
    )
    project_require_role(user, job.project, what="import")
    return job


def judge_get_for_staff(user, pk: int) -> JudgeConfig:
    judge = get_object_or_404(
        JudgeConfig.objects.select_related("project", "prompt_template", "provider"), pk=pk
    )
    project_require_role(user, judge.project, what="judge")
    return judge


def run_get_for_staff(user, pk: int) -> JudgeRun:
    """The run with its judge, project, provider (its limits: the live figures), dataset and
    campaign (the run page shows them all)."""
    run = get_object_or_404(
        JudgeRun.objects.select_related(
            "judge__project", "judge__prompt_template", "judge__provider", "dataset", "campaign"
        ),
        pk=pk,
    )
    project_require_role(user, run.judge.project, what="run")
    return run


def judgment_get_for_staff(user, pk: int) -> Judgment:
    """The judgment with what its page shows: run, judge, response and item, template
    version, and its scores with their skill names."""
    judgment = get_object_or_404(
        Judgment.objects.select_related(
            "run__judge__project", "response__item", "prompt_template"
        ).prefetch_related(
            Prefetch(
                "scores",
                # the rubric's project: its label ("project:demo v1") tells edits apart
                queryset=JudgeScore.objects.select_related("skill", "rubric__project").order_by(
                    "pk"
                ),
            )
        ),
        pk=pk,
    )
    project_require_role(user, judgment.run.judge.project, what="judgment")
    return judgment


def template_get_for_staff(user, slug: str, pk: int) -> tuple[Project, PromptTemplate]:
    """A built-in template, or one of this project's, seen from the project `slug`."""
    project = project_get_for_staff(user, slug)
    template = get_object_or_404(PromptTemplate.objects.select_related("created_by"), pk=pk)
    if template.project_id not in (None, project.pk):
        raise Http404("no such template")
    return project, template
