"""Public read API of the annotation app. Downstream apps (judging, analytics) read
annotation data only through these functions."""

from __future__ import annotations

from django.db.models import Count, Prefetch, Q, QuerySet

from annotation.models import (
    Dataset,
    DatasetUpload,
    Domain,
    Item,
    ItemSkill,
    Project,
    Response,
    Rubric,
    Skill,
)


def skill_list_for_project(*, project: Project | None) -> QuerySet[Skill]:
    """Built-in skills plus the project's own."""
    scope = Q(project__isnull=True)
    if project is not None:
        scope |= Q(project=project)
    return Skill.objects.filter(scope).order_by("order", "name")


def domain_list_for_project(*, project: Project | None) -> QuerySet[Domain]:
    scope = Q(project__isnull=True)
    if project is not None:
        scope |= Q(project=project)
    return Domain.objects.filter(scope).order_by("order", "name")


def rubric_current(*, skill: Skill, project: Project | None) -> Rubric | None:
    """The rubric in force for a skill in a project: the project's latest version if it has
    one, else the latest built-in version."""
    if project is not None:
        own = Rubric.objects.filter(skill=skill, project=project).order_by("-version").first()
        if own is not None:
            return own
    return Rubric.objects.filter(skill=skill, project__isnull=True).order_by("-version").first()


def rubrics_current_for_project(*, project: Project | None) -> dict[int, Rubric]:
    """skill id -> rubric in force, in two queries."""
    result: dict[int, Rubric] = {}
    for rubric in Rubric.objects.filter(project__isnull=True).order_by("skill_id", "version"):
        result[rubric.skill_id] = rubric
    if project is not None:
        for rubric in Rubric.objects.filter(project=project).order_by("skill_id", "version"):
            result[rubric.skill_id] = rubric
    return result


def rubric_versions(*, skill: Skill, project: Project | None) -> QuerySet[Rubric]:
    scope = Q(project__isnull=True)
    if project is not None:
        scope |= Q(project=project)
    return Rubric.objects.filter(scope, skill=skill).order_by("-created_at", "-version")


def project_list_for_user(*, user) -> QuerySet[Project]:
    if user.is_superuser or user.is_staff:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user).distinct()


def dataset_list_for_project(*, project: Project) -> QuerySet[Dataset]:
    return project.datasets.annotate(
        item_count=Count("items", distinct=True),
    ).order_by("name")


def dataset_stats(*, dataset: Dataset) -> dict:
    items = Item.objects.filter(dataset=dataset)
    responses = Response.objects.filter(item__dataset=dataset)
    return {
        "items": items.count(),
        "responses": responses.count(),
        "models": list(
            responses.values("model_name").annotate(n=Count("id")).order_by("model_name")
        ),
        "difficulty": list(
            items.values("difficulty").annotate(n=Count("id")).order_by("difficulty")
        ),
        "skills": list(
            ItemSkill.objects.filter(item__dataset=dataset)
            .values("skill__name")
            .annotate(n=Count("id"))
            .order_by("-n", "skill__name")
        ),
        "domains": list(
            Domain.objects.filter(item_domains__item__dataset=dataset)
            .annotate(n=Count("item_domains"))
            .values("name", "n")
            .order_by("-n", "name")
        ),
    }


def item_list_for_dataset(
    *,
    dataset: Dataset,
    skill_id: int | None = None,
    domain_id: int | None = None,
    difficulty: int | None = None,
    search: str = "",
) -> QuerySet[Item]:
    qs = Item.objects.filter(dataset=dataset)
    if skill_id:
        qs = qs.filter(item_skills__skill_id=skill_id)
    if domain_id:
        qs = qs.filter(item_domains__domain_id=domain_id)
    if difficulty:
        qs = qs.filter(difficulty=difficulty)
    if search:
        qs = qs.filter(Q(instruction__icontains=search) | Q(external_id=search))
    return (
        qs.annotate(response_count=Count("responses", distinct=True))
        .prefetch_related(
            Prefetch("item_skills", queryset=ItemSkill.objects.select_related("skill")),
            "domains",
        )
        .order_by("id")
    )


def item_get(*, item_id: int) -> Item:
    return (
        Item.objects.select_related("dataset__project")
        .prefetch_related(
            Prefetch("item_skills", queryset=ItemSkill.objects.select_related("skill")),
            "domains",
            Prefetch("responses", queryset=Response.objects.order_by("model_name")),
        )
        .get(pk=item_id)
    )


def item_ids_for_dataset(*, dataset_id: int, after_id: int = 0, limit: int = 500) -> list[int]:
    """Keyset pagination over a dataset's item ids (for fan-out jobs)."""
    return list(
        Item.objects.filter(dataset_id=dataset_id, pk__gt=after_id)
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )


def upload_list_for_project(*, project: Project) -> QuerySet[DatasetUpload]:
    return project.uploads.select_related("created_by").order_by("-created_at")
