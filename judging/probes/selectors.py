"""Reads of the probes pages: a project's systems and judges with their families, and the
probe runs of a run."""

from __future__ import annotations

from django.db.models import QuerySet

from annotation.models import Project
from annotation.selectors import model_names_for_dataset
from judging.models import JudgeConfig, JudgeRun, ModelFamily


def project_model_names(*, project: Project) -> list[str]:
    """The systems (model names) of the project's datasets, sorted."""
    names: set[str] = set()
    for dataset_id in project.datasets.values_list("pk", flat=True):
        names.update(model_names_for_dataset(dataset_id=dataset_id))
    return sorted(names)


def families_for_project(*, project: Project) -> tuple[dict[str, str], dict[str, str]]:
    """(system -> family or "", judge name -> family or ""): every system of the project's
    datasets (and any system with a family declared), every judge."""
    declared = dict(ModelFamily.objects.filter(project=project).values_list("model_name", "family"))
    systems = {name: declared.get(name, "") for name in project_model_names(project=project)}
    for name, family in declared.items():
        systems.setdefault(name, family)
    judges = dict(
        JudgeConfig.objects.filter(project=project).order_by("name").values_list("name", "family")
    )
    return dict(sorted(systems.items())), judges


def probe_runs_of(*, run: JudgeRun) -> QuerySet[JudgeRun]:
    """The probe runs made from `run`, newest first."""
    return JudgeRun.objects.filter(base_run=run).order_by("-created_at", "-pk")
