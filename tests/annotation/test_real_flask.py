"""Importing the real FLASK release (../shared/data/flask): its known quirks, its counts, and
re-import. Skips when the data is absent."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from annotation.datasets.services import (
    PROBLEMS_STORED_PER_CLASS,
    FileSpec,
    dataset_import,
    dataset_upload_create,
)
from annotation.models import (
    Dataset,
    DatasetUpload,
    ImportProblem,
    Item,
    ItemSkill,
    Response,
    UploadSource,
    UploadStatus,
)

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

MODELS = [
    "alpaca_13b",
    "bard",
    "chatgpt",
    "claude_v1",
    "davinci_003",
    "gpt4",
    "llama2_chat_13b",
    "llama2_chat_70b",
    "tulu_13b",
    "tulu_30b",
    "tulu_65b",
    "tulu_7b",
    "vicuna_13b",
    "vicuna_33b",
    "wizardlm_13b",
]
# The release's known quirks (see ../shared/data/flask/README.md), by line of
# flask_evaluation.jsonl, plus 22 empty answers in davinci_003.jsonl.
QUIRKS = {"invalid_difficulty": 2, "invalid_domain": 11, "skill_count": 1, "empty_response": 22}
DIFFICULTY_LINES = [1706, 1716]
DOMAIN_LINES = [836, 991, 993, 1145, 1171, 1415, 1493, 1546, 1563, 1660, 1705]
SKILL_COUNT_LINE = 1417
QUIRK_OPTIONS = [
    *("--on", "invalid_difficulty=accept"),
    *("--on", "invalid_domain=accept"),
    *("--on", "skill_count=accept"),
    *("--on", "empty_response=accept"),
]
EVAL = "flask_evaluation.jsonl"


@pytest.fixture
def real_files(flask_data) -> list[Path]:
    outputs = sorted((flask_data / "model_outputs").glob("*.jsonl"))
    assert [p.stem for p in outputs] == MODELS
    return [flask_data / EVAL, *outputs]


def run_import(project, paths: list[Path], *, dataset="FLASK", policies=None) -> DatasetUpload:
    upload = dataset_upload_create(
        project=project,
        dataset_name=dataset,
        source=UploadSource.CLI,
        files=[(FileSpec(p.name), str(p)) for p in paths],
        policies=policies,
    )
    return dataset_import(upload_id=upload.pk)


def lines(upload: DatasetUpload, code: str) -> list[tuple[str, int, str]]:
    return list(
        ImportProblem.objects.filter(upload=upload, code=code)
        .order_by("id")
        .values_list("file_name", "line", "field")
    )


def import_command(project, paths: list[Path], *options: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "import_dataset",
        *map(str, paths),
        "--project",
        project.slug,
        "--dataset",
        "FLASK",
        "--quiet-problems",
        *options,
        stdout=out,
        stderr=err,
    )
    assert err.getvalue() == ""
    return out.getvalue()


def test_it_rejects_the_release_by_default_reporting_exactly_its_known_quirks(project, real_files):
    # when
    upload = run_import(project, real_files)

    # then
    assert upload.status == UploadStatus.REJECTED
    assert upload.summary["problems"] == QUIRKS
    assert upload.problem_count == sum(QUIRKS.values())
    assert lines(upload, "invalid_difficulty") == [
        (EVAL, line, "difficulty") for line in DIFFICULTY_LINES
    ]
    assert lines(upload, "invalid_domain") == [(EVAL, line, "domain") for line in DOMAIN_LINES]
    assert lines(upload, "skill_count") == [(EVAL, SKILL_COUNT_LINE, "skill")]
    empty = lines(upload, "empty_response")
    assert len(empty) == 22
    assert {(file, field) for file, _, field in empty} == {("davinci_003.jsonl", "text")}
    assert set(upload.problems.values_list("action", flat=True)) == {"reject"}
    # and nothing was written
    assert not Dataset.objects.exists()
    assert not Item.objects.exists()
    assert not Response.objects.exists()


def test_it_imports_the_release_with_the_quirks_accepted_and_reimports_as_a_no_op(
    project, real_files
):
    # when
    out = import_command(project, real_files, *QUIRK_OPTIONS)

    # then: every item and answer is in
    assert ": SUCCEEDED" in out
    assert "items: 1740 new, 0 unchanged; responses: 25500 new, 0 unchanged" in out
    for model in MODELS:
        assert f"  {model}: 1700 responses, 40 items without a response\n" in out
    dataset = Dataset.objects.get(project=project, name="FLASK")
    items = Item.objects.filter(dataset=dataset)
    assert items.count() == 1740
    assert Response.objects.filter(item__dataset=dataset).count() == 25500
    assert items.filter(responses__isnull=True).count() == 40
    # ... with the accepted quirks cleaned
    assert sorted(items.filter(difficulty__isnull=True).values_list("external_id", flat=True)) == [
        str(line) for line in DIFFICULTY_LINES
    ]
    assert ItemSkill.objects.filter(item__dataset=dataset).count() == 1740 * 3 - 1
    assert items.get(external_id=str(SKILL_COUNT_LINE)).item_skills.count() == 2
    assert sorted(
        items.filter(item_domains__isnull=True).values_list("external_id", flat=True)
    ) == ["1493", "1660", "1705"]
    assert Response.objects.filter(model_name="davinci_003", text__regex=r"^\s*$").count() == 22
    assert set(items.values_list("difficulty", flat=True)) == {None, 1, 2, 3, 4, 5}

    # when: the same files again
    again = import_command(project, real_files, *QUIRK_OPTIONS)

    # then
    assert ": SUCCEEDED" in again
    assert "items: 0 new, 1740 unchanged; responses: 0 new, 25500 unchanged" in again
    assert items.count() == 1740
    assert Response.objects.count() == 25500
    assert ItemSkill.objects.count() == 1740 * 3 - 1


def test_it_imports_flask_hard_with_its_one_unknown_domain_accepted(project, flask_data):
    path = flask_data / "flask_hard_evaluation.jsonl"

    rejected = run_import(project, [path], dataset="FLASK-Hard")
    accepted = run_import(
        project, [path], dataset="FLASK-Hard", policies={"invalid_domain": "accept"}
    )

    assert rejected.status == UploadStatus.REJECTED
    assert rejected.summary["problems"] == {"invalid_domain": 1}
    assert lines(rejected, "invalid_domain") == [(path.name, 69, "domain")]
    assert accepted.status == UploadStatus.SUCCEEDED
    assert accepted.items_created == 89
    assert Item.objects.filter(dataset__name="FLASK-Hard").count() == 89
    assert ItemSkill.objects.count() == 89 * 3


def test_it_reports_unknown_items_for_model_outputs_without_their_evaluation_set(
    project, flask_data
):
    path = flask_data / "model_outputs" / "gpt4.jsonl"

    upload = run_import(project, [path], dataset="answers only")

    assert upload.status == UploadStatus.REJECTED
    assert upload.summary["problems"] == {"unknown_item": 1700}
    stored = lines(upload, "unknown_item")
    assert len(stored) == PROBLEMS_STORED_PER_CLASS
    assert stored[0] == ("gpt4.jsonl", 1, "")
    assert not Response.objects.exists()
