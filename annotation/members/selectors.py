"""Reads for the members page and API: a project's members, one member, the record of
membership changes."""

from __future__ import annotations

from django.db.models import Case, QuerySet, Value, When

from annotation.models import MembershipChange, Project, ProjectMembership, ProjectRole


def member_list_for_project(*, project: Project) -> QuerySet[ProjectMembership]:
    """The project's members, admins first, then researchers, reviewers and annotators, by
    username."""
    order = {
        ProjectRole.ADMIN: 0,
        ProjectRole.RESEARCHER: 1,
        ProjectRole.REVIEWER: 2,
        ProjectRole.ANNOTATOR: 3,
    }
    rank = Case(*(When(role=r, then=Value(n)) for r, n in order.items()), default=Value(4))
    return (
        ProjectMembership.objects.filter(project=project)
        .select_related("user")
        .order_by(rank, "user__username")
    )


def membership_get(*, project: Project, username: str) -> ProjectMembership | None:
    """The member of the project with this username (user pre-joined), or None."""
    return (
        ProjectMembership.objects.select_related("user")
        .filter(project=project, user__username=username)
        .first()
    )


def membership_change_list(*, project: Project, limit: int = 20) -> list[MembershipChange]:
    """The project's latest membership changes, newest first."""
    return list(
        MembershipChange.objects.filter(project=project)
        .select_related("changed_by")
        .order_by("-changed_at", "-id")[:limit]
    )
