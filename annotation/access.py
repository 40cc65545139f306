"""View access helpers: fetch an object and enforce who may see it (404 for objects the
user may not know about, 403 for a known object and a wrong role)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import get_object_or_404

from annotation.models import (
    Campaign,
    Dataset,
    DatasetUpload,
    Item,
    Project,
    ProjectMembership,
    ProjectRole,
)

STAFF_ROLES = {ProjectRole.ADMIN, ProjectRole.RESEARCHER}


def is_site_admin(user) -> bool:
    """Admins of the whole site: every project, and creating projects."""
    return user.is_authenticated and (user.is_superuser or user.is_staff)


def project_exists(slug: str) -> bool:
    return Project.objects.filter(slug=slug).exists()


def project_role(user, project: Project) -> str | None:
    if is_site_admin(user):
        return ProjectRole.ADMIN
    membership = ProjectMembership.objects.filter(project=project, user=user).first()
    return membership.role if membership else None


def project_require_role(user, project: Project, *, what: str, roles=STAFF_ROLES) -> str:
    """The one access rule for everything a project owns: 404 ("no such <what>") for a
    user with no role in the project, 403 for a role not in `roles`; returns the role.
    Every app's object fetchers (annotation, judging, analytics) end here."""
    role = project_role(user, project)
    if role is None:
        raise Http404(f"no such {what}")
    if role not in roles:
        raise PermissionDenied("your role in this project does not allow this")
    return role


def project_get_for_user(user, slug: str, *, roles=STAFF_ROLES) -> tuple[Project, str]:
    project = get_object_or_404(Project, slug=slug)
    return project, project_require_role(user, project, what="project", roles=roles)


def project_get_for_staff(user, slug: str) -> Project:
    """The project, for its admins and researchers (404 for others, 403 for annotators)."""
    return project_get_for_user(user, slug, roles=STAFF_ROLES)[0]


def project_get_for_admin(user, slug: str) -> Project:
    return project_get_for_user(user, slug, roles={ProjectRole.ADMIN})[0]


def dataset_get_for_user(user, dataset_id: int) -> tuple[Dataset, str]:
    dataset = get_object_or_404(Dataset.objects.select_related("project"), pk=dataset_id)
    _, role = project_get_for_user(user, dataset.project.slug)
    return dataset, role


def item_get_for_user(user, item_id: int) -> Item:
    from annotation.selectors import item_get

    try:
        item = item_get(item_id=item_id)
    except Item.DoesNotExist:
        raise Http404("no such item") from None
    project_get_for_user(user, item.dataset.project.slug)
    return item


def upload_get_for_staff(user, upload_id: int) -> DatasetUpload:
    upload = get_object_or_404(DatasetUpload.objects.select_related("project"), pk=upload_id)
    project_get_for_user(user, upload.project.slug)
    return upload


def campaign_get_for_staff(user, pk: int) -> Campaign:
    """The campaign, if `user` is an admin or researcher of its project: 404 for unknown
    ids and non-members, 403 for annotators. Pre-joins the project and dataset."""
    campaign = get_object_or_404(Campaign.objects.select_related("project", "dataset"), pk=pk)
    project_require_role(user, campaign.project, what="campaign")
    return campaign
