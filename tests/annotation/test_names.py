"""Names of skills, models, judges, raters, projects and datasets (annotation.names): one
rule refuses invisible, bidirectional and control characters, and a name that looks like an
existing one of its kind in its scope."""

from __future__ import annotations

import pytest

from annotation.names import NameRefused, NameScope, name_clean, name_skeleton
from annotation.parsers import skill_key


@pytest.mark.parametrize(
    "name, message",
    [
        ("Fact\u200buality", "contains an invisible character U+200B at position 4 (after 'Fact')"),
        ("Fact\u202euality", "a bidirectional control character U+202E at position 4"),
        ("\u2066Factuality", "a bidirectional control character U+2066 at position 0"),
        ("Fact\u00adual", "an invisible character U+00AD"),
        ("Fact\ufeff", "an invisible character U+FEFF"),
        ("Fact\u2060uality", "an invisible character U+2060"),
        ("a\u061cb", "bidirectional control character U+061C"),
        ("a\tb", "white space other than a space U+0009"),
        ("a\u00a0b", "white space other than a space U+00A0"),
        ("a\u2028b", "white space other than a space U+2028"),
        ("a\x07b", "a control or format character U+0007"),
        ("a\ue000b", "a control or format character U+E000"),
        ("\u3164", "an invisible character U+3164"),
        ("   ", "is empty"),
    ],
)
def test_invisible_bidi_and_control_characters_are_refused_with_their_place(name, message):
    with pytest.raises(NameRefused) as refused:
        name_clean(name, what="the skill name")
    assert str(refused.value).startswith("the skill name ")
    assert message in str(refused.value)


def test_names_are_nfkc_normalised_and_trimmed():
    assert name_clean("  ＧＰＴ-４  ") == "GPT-4"
    assert name_clean("ﬁdelity") == "fidelity"
    assert name_clean("Fаctuality") == "Fаctuality"  # a look-alike is a scope's question


@pytest.mark.parametrize(
    "name",
    [
        "Fаctuality",
        "FACTUALITY",
        "Fact uality",
        "Fact_uality",
        "Fαctuality",
        "ＦＡＣＴＵＡＬＩＴＹ",
        "Factualitу",
        "FАCTUALITY",
    ],
)
def test_a_look_alike_of_an_existing_name_is_refused_naming_it(name):
    scope = NameScope("skill", ["Factuality", "Readability"])
    assert scope.check(name) == f"{name!r} looks like the existing skill 'Factuality'"


def test_the_same_name_and_different_names_pass_and_new_names_join_the_scope():
    scope = NameScope("model", ["gpt-4", "llama-2-7b"])
    assert scope.check("gpt-4") is None
    assert scope.check("gpt-4o") is None and scope.check("llama-2-13b") is None
    assert scope.admit("kestrel") is None
    assert scope.admit("Kеstrel") == "'Kеstrel' looks like the existing model 'kestrel'"
    # a scope may match names loosely (skills ignore case and separators)
    skills = NameScope("skill", ["Logical Correctness"], exact=skill_key)
    assert skills.check("logical_correctness") is None


def test_the_skeleton_maps_greek_and_cyrillic_capitals_and_small_letters():
    assert name_skeleton("ΜΟDΕL") == name_skeleton("model") == "model"
    assert name_skeleton("Кеstrеl") == "kestrel"
    assert name_skeleton("GPT-4 o") == "gpt4o"


# --- where names enter ----------------------------------------------------------------------


def test_a_project_name_that_looks_like_another_or_hides_characters_is_refused(db):
    from django.core.exceptions import ValidationError

    from annotation.services.projects import project_create

    project_create(slug="crowd", name="Crowd study")
    for slug, name, message in [
        ("crowd-2", "Crоwd study", "looks like the existing project 'Crowd study'"),
        ("crowd-3", "Crowd\u202estudy", "a bidirectional control character U+202E"),
    ]:
        with pytest.raises(ValidationError) as refused:
            project_create(slug=slug, name=name)
        assert message in refused.value.message_dict["name"][0]
    assert project_create(slug="crowd-4", name="Ｃrowd study two").name == "Crowd study two"


def test_a_custom_skill_that_looks_like_an_existing_one_is_refused(project, researcher_client):
    from django.urls import reverse

    from annotation.models import Skill

    url = reverse("annotation:skill-add", args=[project.slug])
    anchors = {f"anchor_{n}": f"level {n}" for n in range(1, 6)} | {"ability": "custom"}
    for name, message in [
        ("Fаctuality", "&#x27;Fаctuality&#x27; looks like the existing skill &#x27;Factuality"),
        ("Fact\u200buality", "contains an invisible character U+200B at position 4"),
    ]:
        response = researcher_client.post(url, {"name": name, "criterion": "c", **anchors})
        assert message in response.content.decode(), response.content.decode()[:2000]
    assert not Skill.objects.filter(project=project).exists()


def test_a_dataset_import_refuses_a_model_name_that_looks_like_one_the_dataset_has(
    project, tmp_path
):
    import json

    from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
    from annotation.models import Response, UploadSource, UploadStatus

    def imported(rows, name):
        path = tmp_path / name
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        upload = dataset_upload_create(
            project=project,
            dataset_name="D",
            source=UploadSource.CLI,
            files=[(FileSpec(path.name), str(path))],
        )
        return dataset_import(upload_id=upload.pk)

    skills = ["Factuality", "Readability", "Comprehension"]
    item = {"id": "i1", "instruction": "Q", "skills": skills}
    first = imported([{**item, "responses": [{"model": "gpt-4", "text": "a"}]}], "a.jsonl")
    assert first.status == UploadStatus.SUCCEEDED, first.summary
    # when: a second model spelled like the first
    second = imported([{"item": "i1", "model": "GPT-4", "text": "b"}], "b.jsonl")
    # then
    assert second.status == UploadStatus.REJECTED
    problems = [(p.code, p.message) for p in second.problems.all()]
    assert ("lookalike_name", "'GPT-4' looks like the existing model 'gpt-4'") in problems
    assert list(Response.objects.values_list("model_name", flat=True)) == ["gpt-4"]


def test_the_admin_refuses_a_project_name_that_looks_like_another(admin_client, project):
    response = admin_client.post(
        "/admin/annotation/project/add/",
        {
            "slug": "other",
            "name": project.name.upper(),
            "description": "",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 200
    assert "looks like the existing project" in response.content.decode()
    renamed = admin_client.post(
        f"/admin/annotation/project/{project.pk}/change/",
        {
            "slug": project.slug,
            "name": project.name + " ",
            "description": "",
            "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0",
        },
    )
    assert renamed.status_code == 302  # its own name is not a look-alike of itself
