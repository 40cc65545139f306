"""Projects and their members.

Who may change a membership is decided by the caller's role (annotation.access): project
admins and site admins. One rule holds here for everyone but site admins (`actor` None or a
site admin): nobody changes or removes their own membership, so a project admin cannot lock
the project's admins out by accident.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.text import slugify

from annotation.access import is_site_admin
from annotation.models import (
    Campaign,
    MembershipChange,
    Project,
    ProjectMembership,
    ProjectRole,
)
from annotation.names import NameRefused, NameScope, name_clean
from annotation.selectors import user_addable_get
from annotation.services.assignments import assignments_revoke


class MembershipConflict(ValidationError):
    """The change is well formed but the project's state refuses it (a 409 in the API)."""


class MemberNotAddable(ValidationError):
    """No user of that username can be added: unknown and inactive alike (a 400)."""


def _not_addable(username: str) -> MemberNotAddable:
    # One answer for every username that cannot be added, found with one query whatever
    # the reason, so a project admin cannot tell a site's usernames from unknown ones.
    return MemberNotAddable(f"no user named {username} can be added")


def project_name_check(*, name: str, project: Project | None = None) -> str:
    """A project's name as annotation.names takes every name (NFKC, no invisible or
    control characters), and not a look-alike of another project's name (`project`: the
    one being renamed); raises ValidationError on the name field."""
    try:
        name = name_clean(name, what="the project's name")
    except NameRefused as exc:
        raise ValidationError({"name": str(exc)}) from None
    others = Project.objects.all()
    if project is not None and project.pk is not None:  # an unsaved project excludes none
        others = others.exclude(pk=project.pk)
    why = NameScope("project", others.values_list("name", flat=True)).check(name)
    if why is not None:
        raise ValidationError({"name": why})
    return name


#: Slugs the site's own pages take under /projects/ (the new-project page): a project with
#: one of them could not be opened.
RESERVED_SLUGS = frozenset({"new"})


@transaction.atomic
def project_create(*, slug: str, name: str = "", description: str = "") -> Project:
    """A project (slugified slug; the name defaults to it); ValidationError for an empty,
    reserved or taken slug or a refused name. Site admins are admins of every project, so
    it has no members yet: its admins add them (annotation/members)."""
    slug = slugify(slug)
    if not slug:
        raise ValidationError("a project needs a slug (letters, digits, hyphens)")
    if slug in RESERVED_SLUGS:
        raise ValidationError(
            {"slug": f"{slug!r} is the name of a page of the site: choose another slug"}
        )
    name = project_name_check(name=name.strip() or slug)
    project = Project(slug=slug, name=name, description=description)
    project.full_clean()
    project.save()
    return project


def project_get_or_create(*, slug: str, name: str = "") -> tuple[Project, bool]:
    existing = Project.objects.filter(slug=slugify(slug)).first()
    if existing is not None:
        return existing, False
    return project_create(slug=slug, name=name), True


def _check_role(role: str) -> None:
    if role not in ProjectRole.values:
        raise ValidationError({"role": [f"{role!r} is not one of {', '.join(ProjectRole.values)}"]})


def _log(membership: ProjectMembership, action: str, *, before: str, after: str, actor) -> None:
    MembershipChange.objects.create(
        project_id=membership.project_id,
        username=membership.user.username,
        action=action,
        role_before=before,
        role_after=after,
        changed_by=actor if actor is not None and actor.is_authenticated else None,
    )


@transaction.atomic
def membership_set(*, project: Project, user, role: str) -> ProjectMembership:
    """Give `user` the role in the project, whether or not they were a member (seeding,
    commands). Requests from people go through membership_add / membership_update."""
    _check_role(role)
    before = ProjectMembership.objects.filter(project=project, user=user).first()
    membership, _ = ProjectMembership.objects.update_or_create(
        project=project, user=user, defaults={"role": role}
    )
    if before is None:
        _log(membership, MembershipChange.Action.ADDED, before="", after=role, actor=None)
    elif before.role != role:
        _log(
            membership,
            MembershipChange.Action.ROLE_CHANGED,
            before=before.role,
            after=role,
            actor=None,
        )
    return membership


def _guard(membership: ProjectMembership, *, actor) -> None:
    """Refuse a change to one's own membership (unless the actor is a site admin): a
    project admin cannot demote or remove themselves, so every change to a project's
    admins is made by another admin, and the last admin member stays."""
    if actor is not None and not is_site_admin(actor) and membership.user_id == actor.pk:
        raise MembershipConflict("you cannot change or remove your own membership")


@transaction.atomic
def membership_add(*, project: Project, user, role: str, actor=None) -> ProjectMembership:
    """Make `user` a member with `role`; MembershipConflict if they already are one."""
    _check_role(role)
    if ProjectMembership.objects.filter(project=project, user=user).exists():
        raise MembershipConflict(f"{user.username} is already a member of this project")
    membership = ProjectMembership.objects.create(project=project, user=user, role=role)
    _log(membership, MembershipChange.Action.ADDED, before="", after=role, actor=actor)
    return membership


def membership_add_by_username(
    *, project: Project, username: str, role: str, actor=None
) -> ProjectMembership:
    """membership_add for the user with this username, who must be active. The members
    page and the API add through this: MemberNotAddable names the username the same way
    for a user that does not exist and one that cannot be added (inactive)."""
    user = user_addable_get(username=username)
    if user is None:
        raise _not_addable(username)
    return membership_add(project=project, user=user, role=role, actor=actor)


@transaction.atomic
def membership_update(*, membership: ProjectMembership, role: str, actor=None) -> ProjectMembership:
    """Change a member's role. An annotator who becomes staff stays in the campaign pools
    they were put in (staff may annotate too)."""
    _check_role(role)
    membership = (
        ProjectMembership.objects.select_for_update(of=("self",))
        .select_related("user")
        .get(pk=membership.pk)
    )
    if membership.role == role:
        return membership
    _guard(membership, actor=actor)
    before, membership.role = membership.role, role
    membership.save(update_fields=["role", "updated_at"])
    _log(membership, MembershipChange.Action.ROLE_CHANGED, before=before, after=role, actor=actor)
    return membership


@transaction.atomic
def membership_remove(*, membership: ProjectMembership, actor=None) -> int:
    """End a membership: the user leaves the annotator lists of the project's campaigns
    (and, with no role, no group admits them to its pools any more: see
    annotation.access.IN_POOL_SQL). Their scores stay; an open lease runs
    is ended at once and its slot returns to the pool. Returns how many campaign pools
    they left."""
    membership = (
        ProjectMembership.objects.select_for_update(of=("self",))
        .select_related("user")
        .get(pk=membership.pk)
    )
    _guard(membership, actor=actor)
    through = Campaign.annotators.through
    left, _ = through.objects.filter(
        campaign__project_id=membership.project_id, user_id=membership.user_id
    ).delete()
    assignments_revoke(annotator_id=membership.user_id, project_id=membership.project_id)
    _log(membership, MembershipChange.Action.REMOVED, before=membership.role, after="", actor=actor)
    membership.delete()
    return left
