"""Projects and their members."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.text import slugify

from annotation.models import Project, ProjectMembership, ProjectRole


@transaction.atomic
def project_create(*, slug: str, name: str = "", description: str = "") -> Project:
    slug = slugify(slug)
    if not slug:
        raise ValidationError("a project needs a slug (letters, digits, hyphens)")
    project = Project(slug=slug, name=name.strip() or slug, description=description)
    project.full_clean()
    project.save()
    return project


def project_get_or_create(*, slug: str, name: str = "") -> tuple[Project, bool]:
    existing = Project.objects.filter(slug=slugify(slug)).first()
    if existing is not None:
        return existing, False
    return project_create(slug=slug, name=name), True


def membership_set(*, project: Project, user, role: str) -> ProjectMembership:
    if role not in ProjectRole.values:
        raise ValidationError(f"role {role!r} is not one of {', '.join(ProjectRole.values)}")
    membership, _ = ProjectMembership.objects.update_or_create(
        project=project, user=user, defaults={"role": role}
    )
    return membership
