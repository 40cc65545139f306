"""A judge configuration's fingerprint: the same configuration on two projects has the same
fingerprint, and each of the nine fields it covers changes it (judging/fingerprints.py)."""

from __future__ import annotations

import hashlib
import json

import pytest

from annotation.services.projects import project_create
from judging.fingerprints import (
    FINGERPRINT_FIELDS,
    fingerprint_fields,
    judge_fingerprint,
    judge_fingerprint_label,
    judge_identities,
)
from judging.models import JudgeConfig, JudgeKind
from judging.services import judge_config_create, prompt_template_create
from tests.judging.providers import llm_fields

pytestmark = pytest.mark.django_db

URL = "http://127.0.0.1:9/v1"
TEXT = "Score {skills} for {instruction}: {response}"


def _template(project, text=TEXT):
    return prompt_template_create(project=project, key="mine", name="Mine", user_template=text)[0]


def _judge(project, name="J", **extra) -> JudgeConfig:
    fields = {
        **llm_fields(URL),
        "model": "judge-model",
        "use_reference": False,
        "temperature": 0.0,
        "prompt_template": _template(project),
    }
    fields.update(extra)
    return judge_config_create(project=project, name=name, kind=JudgeKind.LLM, **fields)


@pytest.fixture
def projects(db):
    return project_create(slug="pa", name="A"), project_create(slug="pb", name="B")


def test_the_same_configuration_on_two_projects_has_one_fingerprint(projects):
    a, b = projects
    # given: the same settings, another name, project, template row (same text), timeout
    first = _judge(a, name="judge of A")
    second = _judge(b, name="B's judge", timeout_seconds=5, max_attempts=2)
    assert first.prompt_template_id != second.prompt_template_id
    # then
    assert judge_fingerprint(first) == judge_fingerprint(second)
    assert judge_fingerprint_label(first) == judge_fingerprint_label(second)


def test_the_fingerprint_is_the_sha256_of_the_canonical_json_of_nine_fields(projects):
    judge = _judge(projects[0], extra_params={"top_p": 0.9, "seed": 1})
    fields = fingerprint_fields(judge)
    assert tuple(sorted(fields)) == tuple(sorted(FINGERPRINT_FIELDS))
    # worked by hand: keys sorted, no spaces
    text = (
        '{"baseline":"","extra_params":{"seed":1,"top_p":0.9},"kind":"llm",'
        f'"model":"judge-model","provider":"{judge.provider.name}","samples":1,'
        f'"temperature":0.0,"template_hash":"{judge.prompt_template.content_hash}",'
        '"use_reference":false}'
    )
    assert json.dumps(fields, sort_keys=True, separators=(",", ":")) == text
    assert judge_fingerprint(judge) == hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    "change",
    [
        {"temperature": 0.7},
        {"samples": 3},
        {"use_reference": True},
        {"model": "other-model"},
        {"extra_params": {"top_p": 0.5}},
    ],
)
def test_a_changed_setting_changes_the_fingerprint(projects, change):
    a, b = projects
    assert judge_fingerprint(_judge(a)) != judge_fingerprint(_judge(b, **change))


def test_another_template_text_or_provider_changes_the_fingerprint(projects):
    a, b = projects
    base = judge_fingerprint(_judge(a))
    other_text = _judge(b, name="T", prompt_template=_template(b, TEXT + "\nBe strict."))
    assert judge_fingerprint(other_text) != base
    other_provider = _judge(b, name="P", **llm_fields("http://127.0.0.1:8/v1"))
    assert judge_fingerprint(other_provider) != base


def test_baselines_differ_by_metric_and_match_across_projects(projects):
    a, b = projects
    f1a = judge_config_create(project=a, name="f1", kind=JudgeKind.BASELINE, baseline="token-f1")
    f1b = judge_config_create(project=b, name="x", kind=JudgeKind.BASELINE, baseline="token-f1")
    rouge = judge_config_create(project=b, name="r", kind=JudgeKind.BASELINE, baseline="rouge-l")
    assert judge_fingerprint(f1a) == judge_fingerprint(f1b) != judge_fingerprint(rouge)
    assert judge_fingerprint_label(f1a) == "baseline token-f1"


def test_identities_read_only_the_given_projects(projects):
    a, b = projects
    _judge(a, name="ja")
    _judge(b, name="jb")
    found = judge_identities(project_ids=[a.pk])
    assert [(i.project_id, i.name) for i in found] == [(a.pk, "ja")]
