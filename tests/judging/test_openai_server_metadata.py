"""The local OpenAI-compatible server answers metadata prompts (docs/OPENAI_SERVER.md,
"Metadata"): told answers, a deterministic wrong share, and checked settings."""

from __future__ import annotations

import json

import httpx
import pytest

from devtools.openai_server import FakeOpenAIServer
from devtools.openai_server.answers import expected_metadata
from judging.prompts.metadata import CatalogueDomain, CatalogueSkill, metadata_messages

SKILLS = [CatalogueSkill(k, k.title()) for k in ("a", "b", "c", "d", "e")]
DOMAINS = [CatalogueDomain("x", "X"), CatalogueDomain("y", "Y")]


def ask(server, instruction):
    messages = metadata_messages(instruction=instruction, skills=SKILLS, domains=DOMAINS)
    reply = httpx.post(
        f"{server.url}/chat/completions",
        json={"model": "m", "messages": messages, "temperature": 0},
        timeout=10,
    )
    reply.raise_for_status()
    return json.loads(reply.json()["choices"][0]["message"]["content"])


def test_it_answers_the_told_metadata_and_otherwise_keys_offered_by_the_prompt():
    told = {"domains": ["y"], "skills": ["e", "a", "c"], "difficulty": 5}
    with FakeOpenAIServer(style="json", metadata_truth={"Told": told}) as server:
        assert ask(server, "Told") == told
        free = ask(server, "Something else")
    assert free["domains"][0] in {"x", "y"} and len(set(free["skills"])) == 3
    assert set(free["skills"]) <= {"a", "b", "c", "d", "e"} and 1 <= free["difficulty"] <= 5


def test_the_wrong_share_changes_domain_skills_and_difficulty_on_that_share():
    told = {"domains": ["x"], "skills": ["a", "b", "c"], "difficulty": 1}
    instructions = [f"Question {i}" for i in range(400)]
    truth = dict.fromkeys(instructions, told)
    prompt = {
        i: metadata_messages(instruction=i, skills=SKILLS, domains=DOMAINS)[1]["content"]
        for i in instructions
    }
    answers = [expected_metadata(prompt[i], truth=truth, wrong_rate=0.3) for i in instructions]
    wrong = [a for a in answers if a != told]
    assert 0.25 < len(wrong) / len(answers) < 0.35
    for answer in wrong:
        assert answer["domains"] == ["y"] and answer["difficulty"] == 3
        assert answer["skills"] == ["b", "c", "d"]


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"metadata_wrong_rate": 2}, "metadata_wrong_rate"),
        ({"metadata_truth": []}, "metadata_truth must be an object"),
        ({"metadata_truth": {"q": {"level": 3}}}, "each metadata_truth entry"),
        ({"metadata_truth": {"q": {"difficulty": "3"}}}, "whole number"),
    ],
)
def test_bad_metadata_settings_are_refused(changes, error):
    with FakeOpenAIServer() as server, pytest.raises(ValueError, match=error):
        server.configure(**changes)
