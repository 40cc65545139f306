"""The built-in FLASK catalogue and annotation.services.catalogue (rubric versions, custom
skills, rubric-file import, built-in sync)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from django.core.exceptions import ValidationError

from annotation import catalogue_text
from annotation.catalogue.selectors import rubric_current
from annotation.catalogue.services import (
    RubricFileError,
    catalogue_sync_builtins,
    rubric_import_flask,
    rubric_revise,
    skill_create,
)
from annotation.models import Ability, Difficulty, Domain, Rubric, RubricSource, Skill
from annotation.parsers import DIFFICULTY_NAMES
from annotation.selectors import (
    domain_list_for_project,
    rubrics_current_for_project,
    skill_list_for_project,
)
from annotation.services.projects import project_create

pytestmark = pytest.mark.django_db

SKILLS_BY_ABILITY = {
    Ability.LOGICAL_THINKING: ["Logical Robustness", "Logical Correctness", "Logical Efficiency"],
    Ability.BACKGROUND_KNOWLEDGE: ["Factuality", "Commonsense Understanding"],
    Ability.PROBLEM_HANDLING: ["Comprehension", "Insightfulness", "Completeness", "Metacognition"],
    Ability.USER_ALIGNMENT: ["Conciseness", "Readability", "Harmlessness"],
}
DOMAIN_NAMES = [
    "Humanities",
    "Language",
    "Culture",
    "Health",
    "History",
    "Natural Science",
    "Math",
    "Social Science",
    "Technology",
    "Coding",
]
ANCHORS = ["Useless.", "Weak.", "Passable.", "Good.", "Excellent."]


def builtin(name: str) -> Skill:
    return Skill.objects.get(project__isnull=True, name=name)


def skillset(*entries: tuple[str, str, list[str]]) -> str:
    return json.dumps(
        [
            {
                "Skill": name,
                "Criteria": criteria,
                "Scoring": {str(n): a for n, a in enumerate(anchors, 1)},
            }
            for name, criteria, anchors in entries
        ]
    )


@pytest.fixture
def other_project(db):
    return project_create(slug="other", name="Other project")


@pytest.fixture
def skillset_file(flask_data):
    path = flask_data / "skillset_description.json"
    if not path.is_file():
        pytest.skip("skillset_description.json is not present")
    return path


# --- the built-in catalogue -------------------------------------------------------------------


def test_there_are_twelve_builtin_skills_in_four_abilities():
    skills = Skill.objects.filter(project__isnull=True)

    by_ability: dict[str, list[str]] = {}
    for skill in skills.order_by("order"):
        by_ability.setdefault(skill.ability, []).append(skill.name)
    assert by_ability == SKILLS_BY_ABILITY
    assert skills.count() == 12
    assert all(s.is_builtin for s in skills)
    assert len({s.key for s in skills}) == 12


def test_every_builtin_skill_has_a_criterion_and_five_anchors():
    for skill in Skill.objects.filter(project__isnull=True):
        rubric = rubric_current(skill=skill, project=None)

        assert rubric is not None, skill.name
        assert (rubric.version, rubric.source) == (1, RubricSource.BUILTIN)
        assert rubric.criterion.strip()
        assert len(rubric.anchors) == 5
        assert all(a.strip() for a in rubric.anchors), skill.name
        assert len(set(rubric.anchors)) == 5, skill.name


def test_there_are_ten_builtin_domains_with_subdomains():
    domains = Domain.objects.filter(project__isnull=True)

    assert list(domains.values_list("name", flat=True)) == DOMAIN_NAMES
    assert all(d.subdomains for d in domains)
    assert list(domain_list_for_project(project=None)) == list(domains)


def test_there_are_five_difficulty_levels_named_alike_everywhere():
    names = [name for _, _, name, _ in catalogue_text.DIFFICULTY_LEVELS]

    assert [level for level, *_ in catalogue_text.DIFFICULTY_LEVELS] == [1, 2, 3, 4, 5]
    assert Difficulty.values == [1, 2, 3, 4, 5]
    assert Difficulty.labels == names
    by_name = {name: level for level, _, name, _ in catalogue_text.DIFFICULTY_LEVELS}
    assert by_name == DIFFICULTY_NAMES
    assert names[0] == "simple lifestyle knowledge" and names[-1] == "expert level knowledge"


def test_syncing_the_builtins_again_changes_nothing():
    before = list(Rubric.objects.values_list("id", "skill_id", "version"))

    catalogue_sync_builtins()
    catalogue_sync_builtins()

    assert list(Rubric.objects.values_list("id", "skill_id", "version")) == before
    assert Skill.objects.filter(project__isnull=True).count() == 12
    assert Domain.objects.filter(project__isnull=True).count() == 10


def test_syncing_changed_wording_adds_a_version_for_that_skill_only(monkeypatch):
    # given: the shipped wording of the first skill changes
    first, *rest = catalogue_text.SKILLS
    reworded = dataclasses.replace(first, criterion="A brand-new criterion.")
    monkeypatch.setattr(catalogue_text, "SKILLS", (reworded, *rest))

    # when
    catalogue_sync_builtins()

    # then
    skill = builtin(first.name)
    current = rubric_current(skill=skill, project=None)
    assert (current.version, current.criterion, current.source) == (
        2,
        "A brand-new criterion.",
        RubricSource.BUILTIN,
    )
    assert Rubric.objects.filter(project__isnull=True).count() == 13
    assert Rubric.objects.filter(project__isnull=True, version=2).count() == 1


def test_syncing_restores_a_builtin_skill_edited_in_the_database():
    Skill.objects.filter(project__isnull=True, name="Factuality").update(
        ability=Ability.CUSTOM, key="changed"
    )

    catalogue_sync_builtins()

    skill = builtin("Factuality")
    assert (skill.ability, skill.key) == (Ability.BACKGROUND_KNOWLEDGE, "factuality")


# --- rubric versions --------------------------------------------------------------------------


def test_revising_a_rubric_creates_the_next_version(admin_user):
    skill = builtin("Factuality")

    rubric = rubric_revise(
        skill=skill,
        project=None,
        criterion="  Are the facts right?  ",
        anchors=[f" {a} " for a in ANCHORS],
        note="clearer",
        created_by=admin_user,
    )

    assert (rubric.version, rubric.project, rubric.source) == (2, None, RubricSource.EDIT)
    assert rubric.criterion == "Are the facts right?"
    assert rubric.anchors == ANCHORS
    assert (rubric.note, rubric.created_by) == ("clearer", admin_user)
    assert rubric_current(skill=skill, project=None) == rubric
    assert Rubric.objects.filter(skill=skill).count() == 2


def test_revising_with_identical_wording_is_idempotent():
    skill = builtin("Factuality")
    first = rubric_revise(skill=skill, project=None, criterion="Facts?", anchors=ANCHORS)

    again = rubric_revise(
        skill=skill, project=None, criterion=" Facts? ", anchors=[f"{a}  " for a in ANCHORS]
    )

    assert again.pk == first.pk
    assert Rubric.objects.filter(skill=skill).count() == 2


def test_versions_count_up_per_scope():
    skill = builtin("Conciseness")

    versions = [
        rubric_revise(skill=skill, project=None, criterion=f"Wording {n}", anchors=ANCHORS).version
        for n in range(3)
    ]

    assert versions == [2, 3, 4]


def test_a_project_version_leaves_the_builtin_one_in_force_elsewhere(project, other_project):
    # given
    skill = builtin("Harmlessness")
    builtin_v1 = rubric_current(skill=skill, project=None)

    # when
    own = rubric_revise(skill=skill, project=project, criterion="Is it safe here?", anchors=ANCHORS)

    # then
    assert (own.project, own.version) == (project, 1)
    assert rubric_current(skill=skill, project=project) == own
    assert rubric_current(skill=skill, project=None) == builtin_v1
    assert rubric_current(skill=skill, project=other_project) == builtin_v1
    assert Rubric.objects.filter(skill=skill, project__isnull=True).count() == 1
    assert rubrics_current_for_project(project=project)[skill.pk] == own
    assert rubrics_current_for_project(project=other_project)[skill.pk] == builtin_v1


def test_a_project_version_with_the_builtin_wording_is_not_stored(project):
    skill = builtin("Readability")
    current = rubric_current(skill=skill, project=None)

    result = rubric_revise(
        skill=skill, project=project, criterion=current.criterion, anchors=current.anchors
    )

    assert result == current
    assert not Rubric.objects.filter(project=project).exists()


@pytest.mark.parametrize(
    ("criterion", "anchors", "message"),
    [
        ("Ok?", ANCHORS[:4], "exactly five level anchors"),
        ("Ok?", [*ANCHORS, "Sixth."], "exactly five level anchors"),
        ("Ok?", [*ANCHORS[:4], "   "], "every level anchor needs text"),
        ("   ", ANCHORS, "the criterion needs text"),
    ],
)
def test_it_refuses_an_incomplete_rubric(criterion, anchors, message):
    skill = builtin("Factuality")

    with pytest.raises(ValidationError, match=message):
        rubric_revise(skill=skill, project=None, criterion=criterion, anchors=anchors)

    assert Rubric.objects.filter(skill=skill).count() == 1


def test_a_custom_skill_gets_rubrics_only_in_its_own_project(project, other_project):
    skill = skill_create(project=project, name="Empathy", criterion="Kind?", anchors=ANCHORS)

    for scope in (other_project, None):
        with pytest.raises(ValidationError, match="only get rubrics in that project"):
            rubric_revise(skill=skill, project=scope, criterion="Kind?!", anchors=ANCHORS)

    assert Rubric.objects.filter(skill=skill).count() == 1


# --- custom skills ----------------------------------------------------------------------------


def test_it_creates_a_custom_skill_with_its_first_rubric(project, other_project, admin_user):
    # when
    skill = skill_create(
        project=project,
        name="  Cultural Sensitivity ",
        criterion="Does it respect the reader's culture?",
        anchors=ANCHORS,
        created_by=admin_user,
    )

    # then
    assert (skill.project, skill.name, skill.key) == (
        project,
        "Cultural Sensitivity",
        "cultural-sensitivity",
    )
    assert skill.ability == Ability.CUSTOM and not skill.is_builtin
    rubric = rubric_current(skill=skill, project=project)
    assert (rubric.version, rubric.project, rubric.source) == (1, project, RubricSource.EDIT)
    assert rubric.created_by == admin_user
    assert skill in skill_list_for_project(project=project)
    assert skill not in skill_list_for_project(project=other_project)
    assert skill not in skill_list_for_project(project=None)
    assert skill_list_for_project(project=project).count() == 13


@pytest.mark.parametrize("name", ["Empathy", "empathy", " EMPATHY ", "Factuality", "factuality"])
def test_it_refuses_a_skill_name_already_in_the_catalogue(project, name):
    skill_create(project=project, name="Empathy", criterion="Kind?", anchors=ANCHORS)

    with pytest.raises(ValidationError, match="already exists"):
        skill_create(project=project, name=name, criterion="Kind?", anchors=ANCHORS)

    assert Skill.objects.filter(project=project).count() == 1


def test_another_project_may_reuse_a_custom_skill_name(project, other_project):
    skill_create(project=project, name="Empathy", criterion="Kind?", anchors=ANCHORS)

    skill = skill_create(project=other_project, name="Empathy", criterion="Kind?", anchors=ANCHORS)

    assert skill.project == other_project


def test_a_custom_skill_with_a_bad_rubric_is_not_created(project):
    with pytest.raises(ValidationError):
        skill_create(project=project, name="Empathy", criterion="Kind?", anchors=ANCHORS[:3])
    with pytest.raises(ValidationError, match="needs a name"):
        skill_create(project=project, name="  ", criterion="Kind?", anchors=ANCHORS)

    assert not Skill.objects.filter(project=project).exists()


# --- rubric files -----------------------------------------------------------------------------


def test_it_imports_the_official_flask_skillset_as_project_versions(project, skillset_file):
    # given
    data = skillset_file.read_bytes()
    entries = {e["Skill"]: e for e in json.loads(data)}
    builtin_before = list(Rubric.objects.filter(project__isnull=True).values_list("id", "version"))

    # when
    result = rubric_import_flask(project=project, data=data)

    # then
    assert sorted(result.new_versions) == sorted(entries)
    assert result.created_skills == [] and result.unchanged == []
    imported = Rubric.objects.filter(project=project)
    assert imported.count() == 12
    assert {(r.version, r.source, r.note) for r in imported} == {
        (1, RubricSource.IMPORT, "imported rubric file")
    }
    factuality = rubric_current(skill=builtin("Factuality"), project=project)
    assert factuality.criterion == entries["Factuality"]["Criteria"].strip()
    assert factuality.anchors == [
        entries["Factuality"]["Scoring"][str(n)].strip() for n in range(1, 6)
    ]
    assert list(Rubric.objects.filter(project__isnull=True).values_list("id", "version")) == (
        builtin_before
    )
    assert not Skill.objects.filter(project=project).exists()


def test_importing_the_official_skillset_twice_changes_nothing(project, skillset_file):
    data = skillset_file.read_text(encoding="utf-8")
    rubric_import_flask(project=project, data=data)

    again = rubric_import_flask(project=project, data=data)

    assert again.new_versions == [] and again.created_skills == []
    assert len(again.unchanged) == 12
    assert Rubric.objects.filter(project=project).count() == 12


def test_a_rubric_file_adds_unknown_skills_as_custom_skills(project, admin_user):
    # given
    data = skillset(
        ("factuality", "Are the facts right?", ANCHORS),
        ("Empathy", "Is it kind to the reader?", ANCHORS),
    )

    # when
    result = rubric_import_flask(project=project, data=data, created_by=admin_user)

    # then
    assert result.created_skills == ["Empathy"]
    assert result.new_versions == ["Factuality"]
    empathy = Skill.objects.get(project=project, name="Empathy")
    assert empathy.ability == Ability.CUSTOM
    rubric = rubric_current(skill=empathy, project=project)
    assert (rubric.version, rubric.source, rubric.criterion) == (
        1,
        RubricSource.IMPORT,
        "Is it kind to the reader?",
    )
    assert rubric.created_by == admin_user
    assert rubric_current(skill=builtin("Factuality"), project=project).criterion == (
        "Are the facts right?"
    )


def test_a_rubric_file_that_fails_halfway_writes_nothing(project):
    # given: the second entry parses but cannot be stored (name longer than 100 characters)
    data = skillset(("Factuality", "Facts?", ANCHORS), ("E" * 150, "Kind?", ANCHORS))

    # when
    with pytest.raises(ValidationError):
        rubric_import_flask(project=project, data=data)

    # then
    assert not Rubric.objects.filter(project=project).exists()
    assert not Skill.objects.filter(project=project).exists()


def _entry(**changes) -> dict:
    entry = {"Skill": "Empathy", "Criteria": "Kind?", "Scoring": {str(n): "x" for n in range(1, 6)}}
    entry.update(changes)
    return entry


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("not json", "not valid JSON"),
        (b"\xff\xfe\x00", "not valid JSON"),
        ("{}", "expected a non-empty JSON list of skills"),
        ("[]", "expected a non-empty JSON list of skills"),
        ('"Factuality"', "expected a non-empty JSON list of skills"),
        ("[1]", "entry 1: expected an object"),
        (json.dumps([_entry(), "x"]), "entry 2: expected an object"),
        (json.dumps([_entry(Skill=None)]), "entry 1: 'Skill' must be a non-empty string"),
        (json.dumps([_entry(Skill="  ")]), "entry 1: 'Skill' must be a non-empty string"),
        (json.dumps([_entry(Criteria="")]), r"entry 1 \(Empathy\): 'Criteria' must be"),
        (json.dumps([_entry(Criteria=["x"])]), r"entry 1 \(Empathy\): 'Criteria' must be"),
        (json.dumps([_entry(Scoring=["a"] * 5)]), "'Scoring' must have keys '1' to '5'"),
        (
            json.dumps([_entry(Scoring={str(n): "x" for n in range(1, 5)})]),
            "'Scoring' must have keys '1' to '5'",
        ),
        (
            json.dumps([_entry(Scoring={str(n): "x" for n in range(0, 6)})]),
            "'Scoring' must have keys '1' to '5'",
        ),
        (
            json.dumps([_entry(Scoring={**{str(n): "x" for n in range(1, 5)}, "5": " "})]),
            "every level needs text",
        ),
        (
            json.dumps([_entry(Scoring={**{str(n): "x" for n in range(1, 5)}, "5": 5})]),
            "every level needs text",
        ),
        (json.dumps([_entry(), _entry(Skill="EMPATHY")]), "a skill appears twice in the file"),
    ],
)
def test_it_refuses_a_malformed_rubric_file(project, data, message):
    with pytest.raises(RubricFileError, match=message):
        rubric_import_flask(project=project, data=data)

    assert not Rubric.objects.filter(project=project).exists()
    assert not Skill.objects.filter(project=project).exists()
