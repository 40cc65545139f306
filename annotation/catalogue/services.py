"""Catalogue writes: custom skills, rubric versions, rubric-file import, built-in sync.

Rubric rows are append-only: every change is a new version, so a score can always say
exactly which wording it was given under.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils.text import slugify

from annotation import catalogue_text
from annotation.catalogue.selectors import rubric_current
from annotation.models import Ability, Domain, Project, Rubric, RubricSource, Skill
from annotation.names import NameRefused, NameScope, name_clean
from annotation.parsers import JsonRefused, archive_problem, json_loads_strict, unstorable_text
from annotation.selectors import skill_list_for_project


class RubricFileError(ValueError):
    """The rubric file is not in the official FLASK skill-set format."""


def _anchors_clean(anchors: list[str]) -> list[str]:
    if len(anchors) != 5:
        raise ValidationError("a rubric has exactly five level anchors (1 to 5)")
    cleaned = [a.strip() for a in anchors]
    if not all(cleaned):
        raise ValidationError("every level anchor needs text")
    return cleaned


@transaction.atomic
def rubric_revise(
    *,
    skill: Skill,
    project: Project | None,
    criterion: str,
    anchors: list[str],
    source: str = RubricSource.EDIT,
    note: str = "",
    created_by=None,
) -> Rubric:
    """Create the next rubric version for `skill` in `project` (None = built-in scope).

    Returns the current version unchanged if the wording is identical (idempotent).
    """
    if skill.project_id is not None and skill.project_id != getattr(project, "pk", None):
        raise ValidationError("a project's custom skill can only get rubrics in that project")
    anchors = _anchors_clean(anchors)
    criterion = criterion.strip()
    if not criterion:
        raise ValidationError("the criterion needs text")
    # Lock the skill row so two concurrent edits get versions n+1 and n+2, not a clash.
    Skill.objects.select_for_update().get(pk=skill.pk)
    scope = Rubric.objects.filter(skill=skill, project=project)
    latest = scope.order_by("-version").first()
    if latest is None and project is not None:
        latest_any = rubric_current(skill=skill, project=None)
        if latest_any and latest_any.criterion == criterion and latest_any.anchors == anchors:
            return latest_any
    if latest is not None and latest.criterion == criterion and latest.anchors == anchors:
        return latest
    version = (scope.aggregate(m=Max("version"))["m"] or 0) + 1
    rubric = Rubric(
        skill=skill,
        project=project,
        version=version,
        criterion=criterion,
        anchor_1=anchors[0],
        anchor_2=anchors[1],
        anchor_3=anchors[2],
        anchor_4=anchors[3],
        anchor_5=anchors[4],
        source=source,
        note=note[:300],
        created_by=created_by,
    )
    rubric.full_clean()
    rubric.save()
    return rubric


@transaction.atomic
def skill_create(
    *,
    project: Project,
    name: str,
    criterion: str,
    anchors: list[str],
    ability: str = Ability.CUSTOM,
    created_by=None,
    source: str = RubricSource.EDIT,
) -> Skill:
    """Add a custom skill to a project, with its first rubric version."""
    name = name.strip()
    if not name:
        raise ValidationError("the skill needs a name")
    try:
        name = name_clean(name, what="the skill's name")
    except NameRefused as exc:
        raise ValidationError(str(exc)) from None
    existing = skill_list_for_project(project=project).values_list("name", flat=True)
    if any(other.casefold() == name.casefold() for other in existing):
        raise ValidationError(f"a skill named {name!r} already exists")
    why = NameScope("skill", existing).check(name)
    if why is not None:
        raise ValidationError(why)
    skill = Skill(
        project=project,
        key=slugify(name)[:80] or "skill",
        name=name,
        ability=ability,
        order=1000,
    )
    skill.full_clean()
    try:
        skill.save()
    except IntegrityError as exc:
        raise ValidationError(f"a skill named {name!r} already exists") from exc
    rubric_revise(
        skill=skill,
        project=project,
        criterion=criterion,
        anchors=anchors,
        source=source,
        created_by=created_by,
    )
    return skill


@dataclass
class RubricImportResult:
    created_skills: list[str]
    new_versions: list[str]
    unchanged: list[str]


def parse_flask_skillset(data: bytes | str) -> list[tuple[str, str, list[str]]]:
    """Parse the official FLASK skill-set file: [{"Skill", "Criteria", "Scoring": {1..5}}]."""
    archive = archive_problem("", data[:16]) if isinstance(data, bytes) else None
    if archive is not None:
        raise RubricFileError(archive.message)
    try:
        if isinstance(data, bytes):  # UTF-8, -16 or -32, as json.loads reads bytes
            data = data.decode(json.detect_encoding(data), "surrogatepass")
        doc = json_loads_strict(data)
    except UnicodeDecodeError as exc:
        raise RubricFileError(f"not valid JSON: {exc}") from None
    except JsonRefused as exc:
        raise RubricFileError(str(exc)) from None
    if not isinstance(doc, list) or not doc:
        raise RubricFileError("expected a non-empty JSON list of skills")
    result = []
    for n, entry in enumerate(doc, start=1):
        if not isinstance(entry, dict):
            raise RubricFileError(f"entry {n}: expected an object")
        name, criteria, scoring = entry.get("Skill"), entry.get("Criteria"), entry.get("Scoring")
        if not isinstance(name, str) or not name.strip():
            raise RubricFileError(f"entry {n}: 'Skill' must be a non-empty string")
        if what := unstorable_text(name):  # before the name is shown in a message
            raise RubricFileError(f"entry {n}: 'Skill' holds {what}, which cannot be stored")
        if not isinstance(criteria, str) or not criteria.strip():
            raise RubricFileError(f"entry {n} ({name}): 'Criteria' must be a non-empty string")
        if not isinstance(scoring, dict) or sorted(scoring) != ["1", "2", "3", "4", "5"]:
            raise RubricFileError(f"entry {n} ({name}): 'Scoring' must have keys '1' to '5'")
        anchors = [scoring[str(level)] for level in range(1, 6)]
        if not all(isinstance(a, str) and a.strip() for a in anchors):
            raise RubricFileError(f"entry {n} ({name}): every level needs text")
        labels = ["Criteria", *(f"Scoring {level}" for level in range(1, 6))]
        for label, text in zip(labels, [criteria, *anchors], strict=True):
            if what := unstorable_text(text):  # a database error otherwise
                raise RubricFileError(
                    f"entry {n} ({name}): '{label}' holds {what}, which cannot be stored"
                )
        result.append((name.strip(), criteria.strip(), [a.strip() for a in anchors]))
    names = [r[0].lower() for r in result]
    if len(set(names)) != len(names):
        raise RubricFileError("a skill appears twice in the file")
    return result


@transaction.atomic
def rubric_import_flask(
    *, project: Project, data: bytes | str, created_by=None
) -> RubricImportResult:
    """Import a rubric file in the official FLASK skill-set format into a project.

    Skills matching the catalogue by name get a new project-scoped rubric version (unless
    the wording is unchanged); others become custom skills of the project. All or nothing.
    """
    entries = parse_flask_skillset(data)
    by_name = {s.name.lower(): s for s in skill_list_for_project(project=project)}
    result = RubricImportResult([], [], [])
    for name, criterion, anchors in entries:
        skill = by_name.get(name.lower())
        if skill is None:
            skill_create(
                project=project,
                name=name,
                criterion=criterion,
                anchors=anchors,
                created_by=created_by,
                source=RubricSource.IMPORT,
            )
            result.created_skills.append(name)
            continue
        before = Rubric.objects.filter(skill=skill, project=project).count()
        rubric_revise(
            skill=skill,
            project=project,
            criterion=criterion,
            anchors=anchors,
            source=RubricSource.IMPORT,
            note="imported rubric file",
            created_by=created_by,
        )
        after = Rubric.objects.filter(skill=skill, project=project).count()
        (result.new_versions if after > before else result.unchanged).append(skill.name)
    return result


@transaction.atomic
def catalogue_sync_builtins() -> None:
    """Make the built-in skills, domains and rubric wording match catalogue_text.py.

    Idempotent; when the shipped wording changes, a new built-in rubric version appears
    and old scores keep pointing at the version they were given under.
    """
    for order, (key, name, subdomains) in enumerate(catalogue_text.DOMAINS):
        Domain.objects.update_or_create(
            project=None,
            name=name,
            defaults={"key": key, "subdomains": list(subdomains), "order": order},
        )
    for order, text in enumerate(catalogue_text.SKILLS):
        skill, _ = Skill.objects.update_or_create(
            project=None,
            name=text.name,
            defaults={"key": text.key, "ability": text.ability, "order": order},
        )
        rubric_revise(
            skill=skill,
            project=None,
            criterion=text.criterion,
            anchors=list(text.anchors),
            source=RubricSource.BUILTIN,
            note="shipped with flaskweb",
        )
