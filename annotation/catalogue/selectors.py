"""Reads for the catalogue pages: the rubric in force for one skill and its versions (the
whole catalogue's rubrics in force are annotation.selectors.rubrics_current_for_project,
which campaigns and judges read too)."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from annotation.models import Project, Rubric, Skill


def rubric_current(*, skill: Skill, project: Project | None) -> Rubric | None:
    """The rubric in force for a skill in a project: the project's latest version if it has
    one, else the latest built-in version."""
    if project is not None:
        own = (
            Rubric.objects.filter(skill=skill, project=project)
            .select_related("project")
            .order_by("-version")
            .first()
        )
        if own is not None:
            return own
    return Rubric.objects.filter(skill=skill, project__isnull=True).order_by("-version").first()


def rubric_versions(*, skill: Skill, project: Project | None) -> QuerySet[Rubric]:
    scope = Q(project__isnull=True)
    if project is not None:
        scope |= Q(project=project)
    return (
        Rubric.objects.filter(scope, skill=skill)
        .select_related("project", "created_by")  # the label names the project
        .order_by("-created_at", "-version")
    )
