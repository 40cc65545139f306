"""The metadata prompt and the reader of the model's answer (no database)."""

from __future__ import annotations

import json

import pytest

from judging.prompts.errors import PromptError
from judging.prompts.metadata import (
    CatalogueDomain,
    CatalogueSkill,
    catalogue_keys_of,
    instruction_of,
    metadata_messages,
    parse_metadata,
)

SKILLS = [
    CatalogueSkill("logical-correctness", "Logical Correctness", "Is the final answer right?"),
    CatalogueSkill("factuality", "Factuality", "Are the facts true?"),
    CatalogueSkill("readability", "Readability", "Is it easy to read?"),
    CatalogueSkill("conciseness", "Conciseness", ""),
]
DOMAINS = [CatalogueDomain("coding", "Coding", ["Python"]), CatalogueDomain("math", "Math")]


def parse(text):
    return parse_metadata(text, skills=SKILLS, domains=DOMAINS)


def test_the_prompt_lists_the_catalogue_and_copies_the_instruction_verbatim():
    instruction = "Sum {response} and }} {{x}} === END OF INSTRUCTION === too"
    messages = metadata_messages(instruction=instruction, skills=SKILLS, domains=DOMAINS)
    user = messages[1]["content"]
    assert instruction_of(user) == instruction
    assert catalogue_keys_of(user) == (
        ["logical-correctness", "factuality", "readability", "conciseness"],
        ["coding", "math"],
    )
    assert "5: expert level knowledge" in user
    assert "(for example Python)" in user


def test_the_prompt_refuses_an_empty_instruction_or_a_thin_catalogue():
    with pytest.raises(PromptError, match="no instruction"):
        metadata_messages(instruction="  ", skills=SKILLS, domains=DOMAINS)
    with pytest.raises(PromptError, match="at least 3"):
        metadata_messages(instruction="x", skills=SKILLS[:2], domains=DOMAINS)


def test_a_plain_json_answer_is_read_with_keys_or_names():
    answer = json.dumps(
        {
            "domains": ["Coding"],
            "skills": ["factuality", "Logical Correctness", "readability"],
            "difficulty": 4,
        }
    )
    parsed = parse(answer)
    assert parsed.ok
    assert parsed.domains == ["coding"]
    assert parsed.skills == ["factuality", "logical-correctness", "readability"]
    assert parsed.difficulty == 4


def test_an_answer_in_a_fence_with_prose_around_it_is_read():
    body = json.dumps({"domains": "math", "skills": THREE, "difficulty": 1})
    text = f"Here you go:\n```json\n{body}\n```"
    parsed = parse(text)
    assert parsed.ok and parsed.domains == ["math"] and parsed.difficulty == 1


THREE = ["factuality", "readability", "conciseness"]


def answer(**changes):
    return json.dumps({"domains": ["coding"], "skills": THREE, "difficulty": 2, **changes})


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ("no json here", "no JSON object"),
        ('{"domains": ["coding"], "skills": ["factuality"]}', "missing difficulty"),
        (answer(domains=["cooking"]), "unknown domain 'cooking'"),
        (answer(skills=["factuality", "humor", "conciseness"]), "unknown skill 'humor'"),
        (answer(skills=["factuality", "readability"]), "2 skills given"),
        (answer(skills=["factuality", "Factuality", "readability"]), "listed twice"),
        (answer(difficulty=6), "difficulty 6"),
        (answer(difficulty="3"), "difficulty '3'"),
        (answer(difficulty=True), "difficulty True"),
        (answer(domains=[]), "non-empty list"),
    ],
)
def test_malformed_answers_are_parse_failures_with_a_reason(answer, error):
    parsed = parse(answer)
    assert not parsed.ok
    assert error in parsed.error
    assert parsed.skills == [] and parsed.difficulty is None
