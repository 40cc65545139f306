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
    ["Fаctuality", "FACTUALITY", "Fact uality", "Fact_uality", "Fαctuality", "ＦＡＣＴＵＡＬＩＴＹ",
     "Factualitу", "FАCTUALITY"],
)  # fmt: skip
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
