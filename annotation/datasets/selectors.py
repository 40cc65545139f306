"""Reads for the dataset pages and API: a dataset's composition, its items filtered, a
project's uploads."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, Prefetch, Q, QuerySet

from annotation.models import (
    Dataset,
    DatasetUpload,
    Difficulty,
    Domain,
    Item,
    ItemSkill,
    Project,
    Response,
    Skill,
)
from annotation.selectors import domain_list_for_project, skill_list_for_project


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


@dataclass(frozen=True)
class ItemFilters:
    """The item list's filters resolved to what item_list_for_dataset takes, and a problem
    per filter whose value names nothing (`errors`: filter -> message); such a filter is
    left out of the ids, and the caller says so instead of listing the wrong items."""

    skill_id: int | None = None
    domain_id: int | None = None
    difficulty: int | None = None
    search: str = ""
    errors: dict[str, str] = field(default_factory=dict)

    def narrowing(self) -> dict:
        return {
            "skill_id": self.skill_id,
            "domain_id": self.domain_id,
            "difficulty": self.difficulty,
            "search": self.search,
        }


def item_filters_resolve(
    *,
    project: Project,
    skill: str | None = None,
    domain: str | None = None,
    difficulty: str | int | None = None,
    search: str = "",
) -> ItemFilters:
    """The dataset page's and API's item filters from what a person typed: a skill or
    domain by name (any case) or by id (the page's own links and older addresses), among
    the built-in ones and the project's; a difficulty by level (1-5) or by its label. An
    empty value does not narrow. Two queries at most."""
    errors: dict[str, str] = {}
    skill_id = _named_id(skill_list_for_project(project=project), skill, "skill", errors)
    domain_id = _named_id(domain_list_for_project(project=project), domain, "domain", errors)
    level = None
    wanted = str(difficulty if difficulty is not None else "").strip()
    if wanted:
        labels = {label.lower(): value for value, label in Difficulty.choices}
        if wanted.isdigit() and int(wanted) in Difficulty.values:
            level = int(wanted)
        elif wanted.lower() in labels:
            level = labels[wanted.lower()]
        else:
            errors["difficulty"] = f"no difficulty {wanted}: a level from 1 to 5"
    return ItemFilters(skill_id, domain_id, level, search.strip()[:200], errors)


def _named_id(
    choices: QuerySet[Skill] | QuerySet[Domain], value: str | None, kind: str, errors: dict
) -> int | None:
    wanted = (value or "").strip()
    if not wanted:
        return None
    found = None
    if wanted.isdigit():
        found = choices.filter(pk=int(wanted)).values_list("pk", flat=True).first()
    if found is None:
        found = choices.filter(name__iexact=wanted).values_list("pk", flat=True).first()
    if found is None:
        errors[kind] = f"no {kind} named {wanted} in this project"
    return found


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
