"""Reads for the members page and API: a project's members, one member, the record of
membership changes.

A study link makes an account for every worker who comes through it (annotation/study/);
a crowd campaign brings in thousands. The lists here take a `participants` filter
(annotation.selectors.participants_narrowed), so the members page can show those accounts
as one line per study (annotation.selectors.study_group_list) and list one study's when
asked, a page at a time."""

from __future__ import annotations

from django.db.models import Case, Exists, OuterRef, Q, QuerySet, Value, When

from annotation.models import (
    MembershipChange,
    Participant,
    Project,
    ProjectMembership,
    ProjectRole,
)
from annotation.selectors import PARTICIPANTS_INCLUDE, participants_narrowed

#: Members per page of one study's participants on the members page.
STUDY_PAGE_SIZE = 50


def member_list_for_project(
    *,
    project: Project,
    participants: str = PARTICIPANTS_INCLUDE,
    study_id: int | None = None,
) -> QuerySet[ProjectMembership]:
    """The project's members, admins first, then researchers, reviewers and annotators, by
    username. `participants`: include (everyone), exclude (no account a study link made)
    or only (those accounts); `study_id`: only the participants of that campaign's study."""
    order = {
        ProjectRole.ADMIN: 0,
        ProjectRole.RESEARCHER: 1,
        ProjectRole.REVIEWER: 2,
        ProjectRole.ANNOTATOR: 3,
    }
    rank = Case(*(When(role=r, then=Value(n)) for r, n in order.items()), default=Value(4))
    members = ProjectMembership.objects.filter(project=project)
    members = participants_narrowed(
        members,
        project=project,
        participants=participants,
        user_field="user_id",
        study_id=study_id,
    )
    return members.select_related("user").order_by(rank, "user__username")


def membership_get(*, project: Project, username: str) -> ProjectMembership | None:
    """The member of the project with this username (user pre-joined), or None."""
    return (
        ProjectMembership.objects.select_related("user")
        .filter(project=project, user__username=username)
        .first()
    )


def membership_change_list(
    *, project: Project, limit: int = 20, study_arrivals: bool = True
) -> list[MembershipChange]:
    """The project's latest membership changes, newest first. Without `study_arrivals`,
    the arrivals of study participants (added by their study link, not by a person) are
    left out: a crowd study would fill the list with them."""
    changes = MembershipChange.objects.filter(project=project)
    if not study_arrivals:
        by_link = Participant.objects.filter(
            campaign__project_id=project.pk, user__username=OuterRef("username")
        )
        arrival = Q(Exists(by_link), action=MembershipChange.Action.ADDED, changed_by__isnull=True)
        changes = changes.exclude(arrival)
    return list(changes.select_related("changed_by").order_by("-changed_at", "-id")[:limit])
