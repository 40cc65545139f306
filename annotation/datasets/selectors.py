"""Reads for the dataset pages and API: a dataset's composition, its items filtered, a
project's uploads."""

from __future__ import annotations

from django.db.models import Count, Prefetch, Q, QuerySet

from annotation.models import Dataset, DatasetUpload, Domain, Item, ItemSkill, Project, Response


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


def upload_list_for_project(*, project: Project) -> QuerySet[DatasetUpload]:
    return project.uploads.select_related("created_by").order_by("-created_at")
