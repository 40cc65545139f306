"""annotation.datasets.services (the dataset import) and the import_dataset command,
against real PostgreSQL."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotation import tasks
from annotation.datasets import services as imports
from annotation.datasets.services import (
    FileSpec,
    ImportOptionsError,
    dataset_import,
    dataset_import_run,
    dataset_upload_claim,
    dataset_upload_create,
    policies_parse,
    upload_progress_get,
    uploads_fail_stale,
)
from annotation.models import (
    Dataset,
    DatasetUpload,
    ImportProblem,
    Item,
    ItemDomain,
    ItemSkill,
    Response,
    UploadSource,
    UploadStatus,
)
from annotation.parsers import PROBLEM_CLASSES
from annotation.services.projects import project_create
from flaskweb.jobs import JobStatus

pytestmark = pytest.mark.django_db

EVAL_ROWS = [
    {
        "idx": 1,
        "instruction": "Rewrite the sentence so it is shorter.",
        "answer": "A shorter sentence.",
        "task": "Self-instruct",
        "skill": ["Readability", "Logical Correctness", "Conciseness"],
        "domain": ["Humanities"],
        "difficulty": "formal education knowledge",
    },
    {
        "idx": 2,
        "instruction": "Why do we get a fever?",
        "answer": "To slow pathogens down.",
        "task": "Vicuna",
        "skill": ["Factuality", "Comprehension", "Completeness"],
        "domain": ["Health", "Natural Science"],
        "difficulty": "expert level knowledge",
        "source_url": "https://example.org/q2",
    },
    {
        "idx": 3,
        "instruction": "Write a function that reverses a list.",
        "answer": "def rev(xs): return xs[::-1]",
        "task": "HumanEval",
        "skill": ["Logical Robustness", "Logical Efficiency", "Metacognition"],
        "domain": ["Coding"],
        "difficulty": "simple lifestyle knowledge",
    },
]
GPT4_ROWS = [{"question_id": n, "text": f"gpt4 answer {n}"} for n in (1, 2, 3)]
BARD_ROWS = [{"question_id": n, "text": f"bard answer {n}", "model_id": "bard-1"} for n in (1, 2)]
SKILLS3 = ["Readability", "Conciseness", "Comprehension"]


def write_jsonl(path: Path, rows: list[dict | str]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def eval_rows(**changes_by_idx: dict) -> list[dict]:
    """EVAL_ROWS with per-item changes: eval_rows(i2={"difficulty": -1})."""
    rows = [dict(r) for r in EVAL_ROWS]
    for key, changes in changes_by_idx.items():
        rows[int(key[1:]) - 1].update(changes)
    return rows


def run_import(
    project,
    *files: Path | tuple[Path, FileSpec],
    dataset: str = "flask",
    policies: dict[str, str] | None = None,
) -> DatasetUpload:
    specs = [f if isinstance(f, tuple) else (f, FileSpec(f.name)) for f in files]
    upload = dataset_upload_create(
        project=project,
        dataset_name=dataset,
        source=UploadSource.CLI,
        files=[(spec, str(path)) for path, spec in specs],
        policies=policies,
    )
    result = dataset_import(upload_id=upload.pk)
    assert result is not None
    return result


def db_counts() -> dict[str, int]:
    return {
        "datasets": Dataset.objects.count(),
        "items": Item.objects.count(),
        "item_skills": ItemSkill.objects.count(),
        "item_domains": ItemDomain.objects.count(),
        "responses": Response.objects.count(),
    }


EMPTY_DB = {"datasets": 0, "items": 0, "item_skills": 0, "item_domains": 0, "responses": 0}


def problems_of(upload: DatasetUpload) -> list[tuple[str, int | None, str, str, str]]:
    return [
        (p.file_name, p.line, p.field, p.code, p.action)
        for p in ImportProblem.objects.filter(upload=upload).order_by("id")
    ]


@pytest.fixture
def flask_files(tmp_path) -> dict[str, Path]:
    return {
        "eval": write_jsonl(tmp_path / "eval.jsonl", EVAL_ROWS),
        "gpt4": write_jsonl(tmp_path / "gpt4.jsonl", GPT4_ROWS),
        "bard": write_jsonl(tmp_path / "bard.jsonl", BARD_ROWS),
    }


# --- happy path -------------------------------------------------------------------------------


def test_it_imports_an_evaluation_set_with_model_outputs(project, flask_files):
    # when
    upload = run_import(project, flask_files["eval"], flask_files["gpt4"], flask_files["bard"])

    # then: the job row
    assert upload.status == UploadStatus.SUCCEEDED
    assert (upload.items_created, upload.items_unchanged) == (3, 0)
    assert (upload.responses_created, upload.responses_unchanged) == (5, 0)
    assert (upload.rows_read, upload.rows_skipped, upload.problem_count) == (8, 0, 0)
    assert upload.error == ""
    assert upload.started_at is not None and upload.finished_at is not None
    dataset = Dataset.objects.get(project=project, name="flask")
    assert upload.dataset == dataset
    assert upload.summary["files"] == [
        {"name": "eval.jsonl", "items": 3, "responses": 0, "format": "flask-eval", "model": ""},
        {
            "name": "gpt4.jsonl",
            "items": 0,
            "responses": 3,
            "format": "flask-output",
            "model": "gpt4",
        },
        {
            "name": "bard.jsonl",
            "items": 0,
            "responses": 2,
            "format": "flask-output",
            "model": "bard",
        },
    ]
    assert upload.summary["models"] == [
        {"model": "bard", "responses": 2, "items_without_response": 1},
        {"model": "gpt4", "responses": 3, "items_without_response": 0},
    ]
    assert upload.summary["problems"] == {}
    assert [f.detected_format for f in upload.files.order_by("position")] == [
        "flask-eval",
        "flask-output",
        "flask-output",
    ]
    assert upload_progress_get(upload.pk)["phase"] == "done"

    # then: the items, with skills in rank order, domains, difficulty and metadata
    items = {i.external_id: i for i in Item.objects.filter(dataset=dataset)}
    assert sorted(items) == ["1", "2", "3"]
    two = items["2"]
    assert two.instruction == "Why do we get a fever?"
    assert two.reference_answer == "To slow pathogens down."
    assert (two.difficulty, two.source_task) == (5, "Vicuna")
    assert two.metadata == {"source_url": "https://example.org/q2"}
    assert len(two.content_hash) == 40 and two.upload_id == upload.pk
    assert [(s.skill.name, s.rank, s.checklist) for s in two.item_skills.order_by("rank")] == [
        ("Factuality", 1, []),
        ("Comprehension", 2, []),
        ("Completeness", 3, []),
    ]
    assert sorted(two.domains.values_list("name", flat=True)) == ["Health", "Natural Science"]
    assert [items[k].difficulty for k in ("1", "2", "3")] == [3, 5, 1]
    assert items["1"].metadata == {}

    # then: the responses
    responses = {
        (r.item.external_id, r.model_name): r
        for r in Response.objects.filter(item__dataset=dataset).select_related("item")
    }
    assert sorted(responses) == [
        ("1", "bard"),
        ("1", "gpt4"),
        ("2", "bard"),
        ("2", "gpt4"),
        ("3", "gpt4"),
    ]
    assert responses[("2", "gpt4")].text == "gpt4 answer 2"
    assert responses[("1", "bard")].metadata == {"model_id": "bard-1"}
    assert responses[("1", "gpt4")].metadata == {}
    assert all(r.upload_id == upload.pk for r in responses.values())


def test_it_imports_generic_jsonl_with_checklists_and_inline_responses(project, tmp_path):
    # given
    path = write_jsonl(
        tmp_path / "hard.jsonl",
        [
            {
                "id": "h1",
                "instruction": "Prove there are infinitely many primes.",
                "skills": "Logical Robustness; Logical Correctness; Completeness",
                "domains": ["math"],
                "difficulty": 5,
                "checklist": {
                    "logical robustness": ["Assumes a finite list", "Derives a contradiction"],
                    "Completeness": "Covers the product-plus-one step",
                },
                "metadata": {"origin": "textbook"},
                "level": "hard",
                "responses": [
                    {"model": "gpt4", "text": "Suppose finitely many...", "metadata": {"t": 1}},
                    {"model": "bard", "text": "There are many."},
                ],
            },
            {"item": "h1", "model": "claude", "text": "Euclid's argument..."},
        ],
    )

    # when
    upload = run_import(project, path, dataset="hard")

    # then
    assert upload.status == UploadStatus.SUCCEEDED
    assert (upload.items_created, upload.responses_created) == (1, 3)
    item = Item.objects.get(dataset__name="hard", external_id="h1")
    assert item.metadata == {"origin": "textbook", "level": "hard"}
    assert [(s.skill.name, s.rank, s.checklist) for s in item.item_skills.order_by("rank")] == [
        ("Logical Robustness", 1, ["Assumes a finite list", "Derives a contradiction"]),
        ("Logical Correctness", 2, []),
        ("Completeness", 3, ["Covers the product-plus-one step"]),
    ]
    assert list(item.domains.values_list("name", flat=True)) == ["Math"]
    assert dict(item.responses.values_list("model_name", "metadata")) == {
        "bard": {},
        "claude": {},
        "gpt4": {"t": 1},
    }


def test_responses_are_numbered_in_the_files_order_whatever_the_join_plan(project, tmp_path):
    # A campaign's tasks are made in response order and claimed oldest first, so responses
    # take their ids in the file's order, as items do. The insert joined the staged responses
    # with their items and took the join's order: a merge join (forced here; PostgreSQL's
    # own choice on some runs) comes out sorted by item id text, not in file order.
    from django.db import connection

    ids = [f"q{n:03d}" for n in range(60, 0, -1)]  # the file runs against the text order
    rows = [
        {
            "id": external_id,
            "instruction": f"Question {external_id}",
            "skills": ["Factuality", "Comprehension", "Readability"],
            "responses": [{"model": m, "text": f"{m} on {external_id}"} for m in ("m1", "m2")],
        }
        for external_id in ids
    ]
    path = write_jsonl(tmp_path / "ordered.jsonl", rows)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:  # undone with the test's transaction
            cursor.execute("SET enable_hashjoin = off")
            cursor.execute("SET enable_nestloop = off")
    upload = run_import(project, path, dataset="ordered")
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    order = list(
        Response.objects.filter(item__dataset__name="ordered")
        .order_by("pk")
        .values_list("item__external_id", "model_name")
    )
    assert order == [(external_id, m) for external_id in ids for m in ("m1", "m2")]


def test_it_imports_a_csv_with_one_row_per_response(project, tmp_path):
    # given
    path = tmp_path / "answers.csv"
    path.write_text(
        "id,instruction,reference,skills,domains,difficulty,task,checklist,model,response\n"
        "c1,What is 2+2?,4,Logical Correctness;Conciseness;Readability,Math,1,,,gpt4,4.\n"
        "c1,,,,,,,,bard,Four.\n"
        "c2,Name a prime.,2,Factuality;Conciseness;Readability,Math,"
        "simple lifestyle knowledge,,,gpt4,7\n",
        encoding="utf-8",
    )

    # when
    upload = run_import(project, path)

    # then
    assert upload.status == UploadStatus.SUCCEEDED
    assert upload.summary["files"][0]["format"] == "generic-csv"
    assert (upload.items_created, upload.responses_created) == (2, 3)
    assert dict(
        Response.objects.filter(item__external_id="c1").values_list("model_name", "text")
    ) == {"gpt4": "4.", "bard": "Four."}
    assert Item.objects.get(external_id="c2").difficulty == 1


def test_it_accepts_responses_to_items_already_in_the_dataset(project, flask_files):
    # given
    run_import(project, flask_files["eval"])

    # when
    upload = run_import(project, flask_files["gpt4"])

    # then
    assert upload.status == UploadStatus.SUCCEEDED
    assert (upload.items_created, upload.responses_created) == (0, 3)
    assert upload.summary["models"] == [
        {"model": "gpt4", "responses": 3, "items_without_response": 0}
    ]


def test_a_file_spec_names_the_format_and_the_model(project, tmp_path):
    # given: a name that detection cannot place, and an explicit model name
    path = write_jsonl(tmp_path / "answers.txt", [{"question_id": 1, "text": "Hi."}])
    eval_path = write_jsonl(tmp_path / "eval.jsonl", EVAL_ROWS)

    # when
    upload = run_import(
        project, eval_path, (path, FileSpec("answers.txt", "flask-output", "GPT-4 (0613)"))
    )

    # then
    assert upload.status == UploadStatus.SUCCEEDED
    assert list(Response.objects.values_list("model_name", flat=True)) == ["GPT-4 (0613)"]


def test_it_keeps_datasets_of_different_projects_apart(project, flask_files):
    other = project_create(slug="other", name="Other")

    first = run_import(project, flask_files["eval"])
    second = run_import(other, flask_files["eval"])

    assert first.items_created == second.items_created == 3
    assert Item.objects.filter(dataset__project=other).count() == 3
    assert Dataset.objects.filter(name="flask").count() == 2


# --- idempotence ------------------------------------------------------------------------------


def test_it_reimports_the_same_files_without_creating_anything(project, flask_files):
    # given
    files = (flask_files["eval"], flask_files["gpt4"], flask_files["bard"])
    first = run_import(project, *files)
    before = db_counts()
    first_item_ids = set(Item.objects.values_list("id", flat=True))

    # when
    again = run_import(project, *files)

    # then
    assert again.status == UploadStatus.SUCCEEDED
    assert (again.items_created, again.items_unchanged) == (0, 3)
    assert (again.responses_created, again.responses_unchanged) == (0, 5)
    assert again.problem_count == 0
    assert again.dataset_id == first.dataset_id
    assert db_counts() == before
    assert set(Item.objects.values_list("id", flat=True)) == first_item_ids
    assert set(Item.objects.values_list("upload_id", flat=True)) == {first.pk}


def test_a_reimport_adds_only_what_is_new(project, tmp_path, flask_files):
    # given
    run_import(project, flask_files["eval"], flask_files["gpt4"])
    grown = write_jsonl(
        tmp_path / "eval2.jsonl",
        [*EVAL_ROWS, {**EVAL_ROWS[0], "idx": 4, "instruction": "A fourth question."}],
    )

    # when
    upload = run_import(project, grown, flask_files["gpt4"], flask_files["bard"])

    # then
    assert upload.status == UploadStatus.SUCCEEDED
    assert (upload.items_created, upload.items_unchanged) == (1, 3)
    assert (upload.responses_created, upload.responses_unchanged) == (2, 3)
    assert ItemSkill.objects.filter(item__external_id="4").count() == 3
    assert ItemSkill.objects.count() == 12


# --- per-row policies -------------------------------------------------------------------------


def test_it_rejects_a_row_problem_by_default_and_writes_nothing(project, tmp_path):
    # given
    path = write_jsonl(tmp_path / "eval.jsonl", eval_rows(i2={"difficulty": -1}))
    gpt4 = write_jsonl(tmp_path / "gpt4.jsonl", GPT4_ROWS)

    # when
    upload = run_import(project, path, gpt4)

    # then
    assert upload.status == UploadStatus.REJECTED
    assert db_counts() == EMPTY_DB
    assert upload.dataset is None
    assert (upload.items_created, upload.responses_created, upload.problem_count) == (0, 0, 1)
    assert upload.summary["problems"] == {"invalid_difficulty": 1}
    assert upload.summary["actions"] == {"reject": 1}
    assert problems_of(upload) == [
        ("eval.jsonl", 2, "difficulty", "invalid_difficulty", "reject"),
    ]
    assert ImportProblem.objects.get(upload=upload).message == "difficulty -1 is not a level 1-5"
    assert upload.files.get(position=0).detected_format == ""  # rolled back with the rest


def test_it_skips_a_row_and_records_the_problem(project, tmp_path):
    # given
    path = write_jsonl(tmp_path / "eval.jsonl", eval_rows(i2={"difficulty": -1}))

    # when
    upload = run_import(project, path, policies={"invalid_difficulty": "skip"})

    # then
    assert upload.status == UploadStatus.SUCCEEDED
    assert sorted(Item.objects.values_list("external_id", flat=True)) == ["1", "3"]
    assert (upload.items_created, upload.rows_skipped, upload.problem_count) == (2, 1, 1)
    assert upload.summary["actions"] == {"skip": 1}
    assert problems_of(upload) == [("eval.jsonl", 2, "difficulty", "invalid_difficulty", "skip")]


def test_a_skipped_items_responses_are_reported_as_unknown(project, tmp_path, flask_files):
    # given
    path = write_jsonl(tmp_path / "eval.jsonl", eval_rows(i2={"domain": ["-1"]}))

    # when
    rejected = run_import(project, path, flask_files["gpt4"], policies={"invalid_domain": "skip"})
    skipped = run_import(
        project,
        path,
        flask_files["gpt4"],
        policies={"invalid_domain": "skip", "unknown_item": "skip"},
    )

    # then
    assert rejected.status == UploadStatus.REJECTED
    assert rejected.summary["problems"] == {"invalid_domain": 1, "unknown_item": 1}
    assert ("gpt4.jsonl", 2, "", "unknown_item", "reject") in problems_of(rejected)
    assert skipped.status == UploadStatus.SUCCEEDED
    assert (skipped.items_created, skipped.responses_created) == (2, 2)
    assert not Response.objects.filter(item__external_id="2").exists()


def test_skipping_an_item_line_also_skips_its_inline_responses(project, tmp_path):
    path = write_jsonl(
        tmp_path / "g.jsonl",
        [
            {
                "id": "a",
                "instruction": "q",
                "skills": SKILLS3,
                "difficulty": 9,
                "responses": [{"model": "m", "text": "t"}],
            },
            {
                "id": "b",
                "instruction": "q",
                "skills": SKILLS3,
                "responses": [{"model": "m", "text": "t"}],
            },
        ],
    )

    upload = run_import(project, path, policies={"invalid_difficulty": "skip"})

    assert upload.status == UploadStatus.SUCCEEDED
    assert list(Response.objects.values_list("item__external_id", flat=True)) == ["b"]
    assert upload.summary["problems"] == {"invalid_difficulty": 1}


def test_a_row_is_rejected_when_any_of_its_problems_says_reject(project, tmp_path):
    # given: one row with two problems, only one of them set to skip
    path = write_jsonl(tmp_path / "eval.jsonl", eval_rows(i2={"domain": ["-1"], "difficulty": -1}))

    # when
    upload = run_import(project, path, policies={"invalid_domain": "skip"})

    # then
    assert upload.status == UploadStatus.REJECTED
    assert upload.summary["problems"] == {"invalid_domain": 1, "invalid_difficulty": 1}
    assert sorted(problems_of(upload)) == [
        ("eval.jsonl", 2, "difficulty", "invalid_difficulty", "reject"),
        ("eval.jsonl", 2, "domain", "invalid_domain", "skip"),
    ]
    assert db_counts() == EMPTY_DB


ACCEPT_CASES = [
    # (problem class, item changes, check on the imported item "a")
    ("invalid_difficulty", {"difficulty": -1}, lambda item: item.difficulty is None),
    (
        "invalid_domain",
        {"domains": ["Math", "-1"]},
        lambda item: list(item.domains.values_list("name", flat=True)) == ["Math"],
    ),
    (
        "unknown_skill",
        {"skills": ["Readability", "Humour", "Conciseness"]},
        lambda item: (
            list(item.item_skills.order_by("rank").values_list("skill__name", "rank"))
            == [("Readability", 1), ("Conciseness", 2)]
        ),
    ),
    (
        "skill_count",
        {"skills": ["Readability", "Conciseness"]},
        lambda item: item.item_skills.count() == 2,
    ),
    (
        "invalid_checklist",
        {"checklist": {"Factuality": ["not a skill of this item"]}},
        lambda item: all(s.checklist == [] for s in item.item_skills.all()),
    ),
    (
        "empty_response",
        {"responses": [{"model": "m", "text": "  "}]},
        lambda item: list(item.responses.values_list("text", flat=True)) == ["  "],
    ),
]


@pytest.mark.parametrize(
    ("code", "changes", "check"), ACCEPT_CASES, ids=[c[0] for c in ACCEPT_CASES]
)
def test_it_accepts_a_row_with_the_cleaned_value(project, tmp_path, code, changes, check):
    # given
    row = {"id": "a", "instruction": "q", "skills": SKILLS3, "domains": ["Math"], **changes}
    path = write_jsonl(tmp_path / "g.jsonl", [row])
    assert run_import(project, path).status == UploadStatus.REJECTED

    # when
    upload = run_import(project, path, policies={code: "accept"})

    # then
    assert upload.status == UploadStatus.SUCCEEDED
    assert upload.summary["problems"] == {code: 1}
    assert upload.summary["actions"] == {"accept": 1}
    assert upload.rows_skipped == 0
    assert [(p.code, p.action) for p in upload.problems.all()] == [(code, "accept")]
    assert check(Item.objects.get(external_id="a"))


@pytest.mark.parametrize(
    ("content", "fmt", "code"),
    [
        (b"\n\n", "flask-eval", "empty_file"),
        (b"", "", "empty_file"),
        (b'{"foo": 1}\n', "", "unknown_format"),
    ],
)
def test_it_rejects_files_it_cannot_read_whatever_the_policies(
    project, tmp_path, content, fmt, code
):
    path = tmp_path / "mystery.jsonl"
    path.write_bytes(content)

    upload = run_import(project, (path, FileSpec(path.name, fmt)), policies={"all": "accept"})

    assert upload.status == UploadStatus.REJECTED
    assert [(p.code, p.action, p.line) for p in upload.problems.all()] == [(code, "reject", None)]
    assert db_counts() == EMPTY_DB


def test_it_stores_at_most_200_problems_per_class_but_counts_them_all(project, tmp_path):
    path = write_jsonl(
        tmp_path / "bad.jsonl", ['{"idx": 1, "instruction": "q", "skill": []}'] + ["{"] * 250
    )

    upload = run_import(project, path, policies={"invalid_json": "skip", "missing_field": "skip"})

    assert upload.summary["problems"]["invalid_json"] == 250
    assert upload.problems.filter(code="invalid_json").count() == imports.PROBLEMS_STORED_PER_CLASS
    assert upload.problem_count == 251


# --- set-level problems -----------------------------------------------------------------------


def test_it_rejects_a_duplicate_item_and_skip_keeps_the_first(project, tmp_path):
    # given: idx 1 again in a second file, with other content
    dup = write_jsonl(tmp_path / "more.jsonl", [{**EVAL_ROWS[0], "instruction": "Changed."}])
    path = write_jsonl(tmp_path / "eval.jsonl", EVAL_ROWS)

    # when
    rejected = run_import(project, path, dup)
    skipped = run_import(project, path, dup, policies={"duplicate_item": "skip"})

    # then
    assert rejected.status == UploadStatus.REJECTED
    assert problems_of(rejected) == [("more.jsonl", 1, "", "duplicate_item", "reject")]
    assert rejected.problems.get().message == "item '1' already appears at eval.jsonl, line 1"
    assert skipped.status == UploadStatus.SUCCEEDED
    assert (skipped.items_created, skipped.rows_skipped) == (3, 1)
    assert Item.objects.get(external_id="1").instruction == EVAL_ROWS[0]["instruction"]
    assert ItemSkill.objects.filter(item__external_id="1").count() == 3


def test_it_rejects_a_duplicate_response_and_skip_keeps_the_first(project, tmp_path, flask_files):
    # given
    gpt4 = write_jsonl(
        tmp_path / "gpt4.jsonl", [*GPT4_ROWS, {"question_id": 1, "text": "second try"}]
    )

    # when
    rejected = run_import(project, flask_files["eval"], gpt4)
    skipped = run_import(
        project, flask_files["eval"], gpt4, policies={"duplicate_response": "skip"}
    )

    # then
    assert rejected.status == UploadStatus.REJECTED
    assert problems_of(rejected) == [("gpt4.jsonl", 4, "", "duplicate_response", "reject")]
    assert skipped.status == UploadStatus.SUCCEEDED
    assert skipped.responses_created == 3
    assert Response.objects.get(item__external_id="1").text == "gpt4 answer 1"


def test_it_rejects_a_response_to_an_unknown_item_and_skip_drops_it(project, tmp_path, flask_files):
    # given
    gpt4 = write_jsonl(tmp_path / "gpt4.jsonl", [*GPT4_ROWS, {"question_id": 99, "text": "?"}])

    # when
    rejected = run_import(project, flask_files["eval"], gpt4)
    counts_after_rejection = db_counts()
    skipped = run_import(project, flask_files["eval"], gpt4, policies={"unknown_item": "skip"})

    # then
    assert rejected.status == UploadStatus.REJECTED
    assert problems_of(rejected) == [("gpt4.jsonl", 4, "", "unknown_item", "reject")]
    assert "'99'" in rejected.problems.get().message
    assert counts_after_rejection == EMPTY_DB
    assert skipped.status == UploadStatus.SUCCEEDED
    assert (skipped.responses_created, skipped.rows_skipped) == (3, 1)


def test_it_rejects_a_changed_item_and_skip_keeps_the_stored_one(project, tmp_path, flask_files):
    # given
    run_import(project, flask_files["eval"])
    before = db_counts()
    changed = write_jsonl(
        tmp_path / "eval.jsonl", eval_rows(i3={"answer": "def rev(xs): return list(reversed(xs))"})
    )

    # when
    rejected = run_import(project, changed)
    skipped = run_import(project, changed, policies={"changed_item": "skip"})

    # then
    assert rejected.status == UploadStatus.REJECTED
    assert problems_of(rejected) == [("eval.jsonl", 3, "", "changed_item", "reject")]
    assert skipped.status == UploadStatus.SUCCEEDED
    assert (skipped.items_created, skipped.items_unchanged, skipped.rows_skipped) == (0, 2, 1)
    assert Item.objects.get(external_id="3").reference_answer == EVAL_ROWS[2]["answer"]
    assert db_counts() == before


def test_it_rejects_a_changed_response_and_skip_keeps_the_stored_one(
    project, tmp_path, flask_files
):
    # given
    run_import(project, flask_files["eval"], flask_files["gpt4"])
    changed = write_jsonl(
        tmp_path / "gpt4.jsonl", [*GPT4_ROWS[:2], {"question_id": 3, "text": "revised"}]
    )

    # when
    rejected = run_import(project, changed)
    skipped = run_import(project, changed, policies={"changed_response": "skip"})

    # then
    assert rejected.status == UploadStatus.REJECTED
    assert problems_of(rejected) == [("gpt4.jsonl", 3, "", "changed_response", "reject")]
    assert skipped.status == UploadStatus.SUCCEEDED
    assert (skipped.responses_created, skipped.responses_unchanged) == (0, 2)
    assert Response.objects.get(item__external_id="3").text == "gpt4 answer 3"


# --- atomicity --------------------------------------------------------------------------------


def test_a_crash_after_rows_were_written_rolls_everything_back(project, flask_files, monkeypatch):
    # given: the write step inserts every row, then fails
    real_apply = imports._apply
    written = {}

    def apply_then_crash(cursor, dataset, upload):
        real_apply(cursor, dataset, upload)
        written["items"] = Item.objects.count()
        raise RuntimeError("disk full")

    monkeypatch.setattr(imports, "_apply", apply_then_crash)

    # when
    upload = run_import(project, flask_files["eval"], flask_files["gpt4"])

    # then
    assert written == {"items": 3}
    assert upload.status == UploadStatus.FAILED
    assert upload.error == "RuntimeError: disk full"
    assert upload.finished_at is not None
    assert (upload.items_created, upload.responses_created, upload.dataset) == (0, 0, None)
    assert db_counts() == EMPTY_DB


def test_a_crash_while_staging_mid_file_rolls_everything_back(project, tmp_path, monkeypatch):
    # given: small batches, and the third flush fails after two have been copied
    rows = [{**EVAL_ROWS[0], "idx": n} for n in range(1, 8)]
    path = write_jsonl(tmp_path / "eval.jsonl", rows)
    monkeypatch.setattr(imports, "STAGE_BATCH", 2)
    real_flush = imports._Stager.flush
    flushed = []

    def flaky_flush(self, table=None):
        if len(flushed) == 2:
            raise OSError("connection reset")
        real_flush(self, table)
        if table == "stg_item":
            flushed.append(table)

    monkeypatch.setattr(imports._Stager, "flush", flaky_flush)

    # when
    upload = run_import(project, path)

    # then
    assert flushed == ["stg_item", "stg_item"]
    assert upload.status == UploadStatus.FAILED
    assert upload.error == "OSError: connection reset"
    assert db_counts() == EMPTY_DB


def test_a_failed_import_leaves_an_existing_dataset_as_it_was(project, flask_files, monkeypatch):
    # given
    run_import(project, flask_files["eval"])
    before = db_counts()
    monkeypatch.setattr(imports, "_apply", mock.Mock(side_effect=ValueError("boom")))

    # when
    upload = run_import(project, flask_files["gpt4"])

    # then
    assert upload.status == UploadStatus.FAILED
    assert db_counts() == before


def test_small_stage_batches_give_the_same_result(project, flask_files, monkeypatch):
    monkeypatch.setattr(imports, "STAGE_BATCH", 1)

    upload = run_import(project, flask_files["eval"], flask_files["gpt4"], flask_files["bard"])

    assert upload.status == UploadStatus.SUCCEEDED
    assert db_counts() == {
        "datasets": 1,
        "items": 3,
        "item_skills": 9,
        "item_domains": 4,
        "responses": 5,
    }


# --- claiming, tasks, stale jobs --------------------------------------------------------------


def _pending_upload(project, path: Path, source=UploadSource.CLI) -> DatasetUpload:
    return dataset_upload_create(
        project=project,
        dataset_name="flask",
        source=source,
        files=[(FileSpec(path.name), str(path))],
        enqueue=False,
    )


def test_an_upload_is_claimed_once(project, flask_files):
    upload = _pending_upload(project, flask_files["eval"])

    first = dataset_import(upload_id=upload.pk)
    second = dataset_import(upload_id=upload.pk)

    assert first.status == UploadStatus.SUCCEEDED
    assert second is None
    assert Item.objects.count() == 3


def test_the_import_task_runs_a_pending_upload_and_ignores_a_redelivery(project, flask_files):
    upload = _pending_upload(project, flask_files["eval"], source=UploadSource.API)

    tasks.dataset_import_task(upload.pk)
    tasks.dataset_import_task(upload.pk)

    upload.refresh_from_db()
    assert upload.status == UploadStatus.SUCCEEDED
    assert upload.items_created == 3


def test_the_task_signature_takes_only_an_id(project, flask_files):
    upload = _pending_upload(project, flask_files["eval"], source=UploadSource.API)

    signature = tasks.dataset_import_task.s(upload.pk)

    assert json.loads(json.dumps(signature.args)) == [upload.pk]


def test_it_fails_uploads_stuck_running_and_leaves_the_rest(project, flask_files):
    # given
    stuck = _pending_upload(project, flask_files["eval"])
    fresh = _pending_upload(project, flask_files["eval"])
    pending = _pending_upload(project, flask_files["eval"])
    dataset_upload_claim(upload_id=stuck.pk)
    dataset_upload_claim(upload_id=fresh.pk)
    DatasetUpload.objects.filter(pk=stuck.pk).update(started_at=timezone.now() - timedelta(hours=3))

    # when
    count = uploads_fail_stale(older_than_seconds=2 * 3600)

    # then
    assert count == 1
    stuck.refresh_from_db()
    assert stuck.status == UploadStatus.FAILED
    assert "worker lost" in stuck.error and stuck.finished_at is not None
    assert DatasetUpload.objects.get(pk=fresh.pk).status == UploadStatus.RUNNING
    assert DatasetUpload.objects.get(pk=pending.pk).status == UploadStatus.PENDING
    assert uploads_fail_stale(older_than_seconds=2 * 3600) == 0


def test_a_late_worker_does_not_overwrite_a_recorded_failure(project, flask_files):
    # given: the job was claimed, then marked failed as stale
    upload = _pending_upload(project, flask_files["eval"])
    claimed = dataset_upload_claim(upload_id=upload.pk)
    DatasetUpload.objects.filter(pk=upload.pk).update(started_at=timezone.now() - timedelta(days=1))
    uploads_fail_stale(older_than_seconds=60)

    # when
    result = dataset_import_run(upload=claimed)

    # then
    assert result.status == UploadStatus.FAILED
    assert "worker lost" in result.error


def test_the_health_check_task_uses_the_stale_setting(project, flask_files, settings):
    settings.FLASKWEB_IMPORT_STALE_SECONDS = 60
    upload = _pending_upload(project, flask_files["eval"])
    dataset_upload_claim(upload_id=upload.pk)
    DatasetUpload.objects.filter(pk=upload.pk).update(
        started_at=timezone.now() - timedelta(seconds=120)
    )

    assert tasks.uploads_health_check_task() == 1


# --- web and API uploads ----------------------------------------------------------------------


def _uploaded(name: str, rows: list[dict]) -> SimpleUploadedFile:
    content = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return SimpleUploadedFile(name, content, content_type="application/jsonl")


def test_a_web_upload_is_stored_in_media_and_imported_from_there(project, admin_user):
    # given
    upload = dataset_upload_create(
        project=project,
        dataset_name="web",
        source=UploadSource.API,
        files=[
            (FileSpec("eval.jsonl"), _uploaded("eval.jsonl", EVAL_ROWS)),
            (FileSpec("gpt4.jsonl"), _uploaded("gpt4.jsonl", GPT4_ROWS)),
        ],
        policies={"invalid_domain": "accept"},
        created_by=admin_user,
        enqueue=False,
    )
    stored = upload.files.get(position=0)

    # then: the file lives under MEDIA_ROOT, not at a path
    assert upload.status == UploadStatus.PENDING
    assert upload.options == {"policies": {"invalid_domain": "accept"}}
    assert upload.created_by == admin_user
    assert stored.path == ""
    assert stored.file.name.startswith("uploads/")
    on_disk = Path(settings.MEDIA_ROOT) / stored.file.name
    assert on_disk.read_bytes() == _uploaded("x", EVAL_ROWS).read()
    assert stored.size_bytes == on_disk.stat().st_size

    # when
    result = dataset_import(upload_id=upload.pk)

    # then
    assert result.status == UploadStatus.SUCCEEDED
    assert (result.items_created, result.responses_created) == (3, 3)
    assert result.summary["files"][1]["model"] == "gpt4"


def test_a_web_upload_enqueues_its_import_once_after_commit(
    project, django_capture_on_commit_callbacks
):
    with (
        mock.patch.object(tasks.dataset_import_task, "delay") as delay,
        django_capture_on_commit_callbacks(execute=True) as callbacks,
    ):
        upload = dataset_upload_create(
            project=project,
            dataset_name="web",
            source=UploadSource.WEB,
            files=[(FileSpec("eval.jsonl"), _uploaded("eval.jsonl", EVAL_ROWS))],
        )
        delay.assert_not_called()

    assert len(callbacks) == 1
    delay.assert_called_once_with(upload.pk)


@pytest.mark.parametrize(
    ("source", "enqueue"), [(UploadSource.CLI, True), (UploadSource.API, False)]
)
def test_it_does_not_enqueue_cli_uploads_or_when_asked_not_to(
    project, tmp_path, django_capture_on_commit_callbacks, source, enqueue
):
    path = write_jsonl(tmp_path / "eval.jsonl", EVAL_ROWS)
    content = str(path) if source == UploadSource.CLI else _uploaded("eval.jsonl", EVAL_ROWS)

    with (
        mock.patch.object(tasks.dataset_import_task, "delay") as delay,
        django_capture_on_commit_callbacks(execute=True) as callbacks,
    ):
        dataset_upload_create(
            project=project,
            dataset_name="x",
            source=source,
            files=[(FileSpec("eval.jsonl"), content)],
            enqueue=enqueue,
        )

    assert callbacks == []
    delay.assert_not_called()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"files": []}, "no file given"),
        ({"dataset_name": "   "}, "dataset name must be 1-200 characters"),
        ({"dataset_name": "x" * 201}, "dataset name must be 1-200 characters"),
        ({"policies": {"duplicate_item": "accept"}}, "duplicate_item can only be: reject, skip"),
        ({"format": "xml"}, "format 'xml' is not one of"),
    ],
)
def test_it_refuses_to_create_an_upload_with_bad_options(project, tmp_path, kwargs, message):
    path = write_jsonl(tmp_path / "eval.jsonl", EVAL_ROWS)
    args = {
        "project": project,
        "dataset_name": "flask",
        "source": UploadSource.CLI,
        "files": [(FileSpec("eval.jsonl", kwargs.pop("format", "")), str(path))],
        **kwargs,
    }

    with pytest.raises(ImportOptionsError, match=message):
        dataset_upload_create(**args)

    assert DatasetUpload.objects.count() == 0


# --- policies ---------------------------------------------------------------------------------


def test_it_parses_policies_from_pairs_or_a_mapping():
    assert policies_parse(["invalid_difficulty=accept", " unknown_item = SKIP "]) == {
        "invalid_difficulty": "accept",
        "unknown_item": "skip",
    }
    assert policies_parse({"empty_response": "Accept"}) == {"empty_response": "accept"}
    assert policies_parse(None) == {}
    assert policies_parse(["skill_count=skip", "skill_count=accept"]) == {"skill_count": "accept"}


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (["typo_class=skip"], r"unknown problem class 'typo_class' \(known: .*, all\)"),
        (["duplicate_item=accept"], "duplicate_item can only be: reject, skip"),
        (["empty_file=skip"], "empty_file can only be: reject"),
        (["unknown_format=accept"], "unknown_format can only be: reject"),
        (["invalid_difficulty=ignore"], "action 'ignore' for 'invalid_difficulty'"),
        (["all=maybe"], "action 'maybe' for 'all'"),
        (["invalid_difficulty"], "must look like CLASS=ACTION"),
    ],
)
def test_it_rejects_bad_policies(pairs, message):
    with pytest.raises(ImportOptionsError, match=message):
        policies_parse(pairs)


def test_all_sets_every_class_to_the_closest_allowed_action():
    skip_all = policies_parse(["all=skip"])
    accept_all = policies_parse(["all=accept"])
    reject_all = policies_parse(["all=reject"])

    skippable = {code for code, (allowed, _) in PROBLEM_CLASSES.items() if "skip" in allowed}
    assert skip_all == dict.fromkeys(skippable, "skip")
    assert "empty_file" not in skip_all and "unknown_format" not in skip_all
    assert accept_all["invalid_difficulty"] == "accept"
    assert accept_all["empty_response"] == "accept"
    assert accept_all["duplicate_item"] == "skip"
    assert accept_all["invalid_json"] == "skip"
    assert set(accept_all) == skippable
    assert reject_all == dict.fromkeys(PROBLEM_CLASSES, "reject")


def test_a_later_pair_overrides_all():
    policies = policies_parse(["all=skip", "invalid_difficulty=accept"])

    assert policies["invalid_difficulty"] == "accept"
    assert policies["invalid_domain"] == "skip"


# --- the import_dataset command ---------------------------------------------------------------


def _command(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("import_dataset", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_command_imports_files_and_prints_a_report(project, flask_files):
    out, err = _command(
        str(flask_files["eval"]),
        str(flask_files["gpt4"]),
        str(flask_files["bard"]),
        "--project",
        project.slug,
        "--dataset",
        "FLASK mini",
    )

    upload = DatasetUpload.objects.get()
    assert upload.status == UploadStatus.SUCCEEDED
    assert upload.source == UploadSource.CLI
    assert f"import #{upload.pk} into demo-project/FLASK mini: SUCCEEDED" in out
    assert "eval.jsonl [flask-eval]: 3 item rows, 0 response rows" in out
    assert "gpt4.jsonl [flask-output model=gpt4]: 0 item rows, 3 response rows" in out
    assert "items: 3 new, 0 unchanged; responses: 5 new, 0 unchanged; rows skipped: 0" in out
    assert "bard: 2 responses, 1 items without a response" in out
    assert "gpt4: 3 responses\n" in out
    assert err == ""
    assert Dataset.objects.get().name == "FLASK mini"


def test_the_command_exits_2_on_rejection_and_prints_every_problem(project, tmp_path):
    # given
    path = write_jsonl(
        tmp_path / "eval.jsonl", eval_rows(i2={"difficulty": -1}, i3={"domain": ["-1"]})
    )

    # when
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("import_dataset", str(path), "--project", project.slug, stdout=out, stderr=err)

    # then
    assert exit_info.value.code == 2
    assert err.getvalue().splitlines() == [
        "REJECT eval.jsonl, line 2 [difficulty]: difficulty -1 is not a level 1-5 "
        "(invalid_difficulty)",
        "REJECT eval.jsonl, line 3 [domain]: domain '-1' is not a known domain (invalid_domain)",
    ]
    assert ": REJECTED" in out.getvalue()
    assert "problems: 2 invalid_difficulty=1, invalid_domain=1" in out.getvalue()
    assert "rejected: nothing was written" in out.getvalue()
    assert db_counts() == EMPTY_DB
    assert DatasetUpload.objects.get().dataset_name == "eval"


def test_the_command_applies_on_policies_and_quiet_problems(project, tmp_path):
    path = write_jsonl(tmp_path / "eval.jsonl", eval_rows(i2={"difficulty": -1}))

    out, err = _command(
        str(path),
        "--project",
        project.slug,
        "--on",
        "invalid_difficulty=accept",
        "--quiet-problems",
    )

    assert err == ""
    assert ": SUCCEEDED" in out and "problems: 1 invalid_difficulty=1" in out
    assert Item.objects.get(external_id="2").difficulty is None


def test_the_command_prints_accepted_problems_with_their_action(project, tmp_path):
    path = write_jsonl(tmp_path / "eval.jsonl", eval_rows(i1={"difficulty": 0}))

    _, err = _command(str(path), "--project", project.slug, "--on", "all=accept")

    assert err.startswith("ACCEPT eval.jsonl, line 1 [difficulty]: difficulty 0 is not")


def test_the_command_names_models_and_can_create_the_project(db, flask_files):
    out, _ = _command(
        str(flask_files["eval"]),
        str(flask_files["gpt4"]),
        "--project",
        "new-one",
        "--create-project",
        "--model",
        "gpt4.jsonl=GPT-4",
    )

    assert ": SUCCEEDED" in out
    assert set(Response.objects.values_list("model_name", flat=True)) == {"GPT-4"}
    assert Dataset.objects.get().project.slug == "new-one"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--project", "nope"], "project 'nope' does not exist"),
        (["--project", "demo-project", "--on", "duplicate_item=accept"], "can only be"),
        (["--project", "demo-project", "--on", "bogus=skip"], "unknown problem class"),
        (["--project", "demo-project", "--model", "X"], "name the file: --model FILE=NAME"),
    ],
)
def test_the_command_refuses_bad_arguments(project, flask_files, extra, message):
    with pytest.raises(CommandError, match=message):
        _command(str(flask_files["eval"]), str(flask_files["gpt4"]), *extra)

    assert DatasetUpload.objects.count() == 0


def test_the_command_refuses_a_missing_file(project, tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        _command(str(tmp_path / "absent.jsonl"), "--project", project.slug)


def test_the_command_exits_1_when_the_import_crashes(project, flask_files, monkeypatch):
    monkeypatch.setattr(imports, "_apply", mock.Mock(side_effect=RuntimeError("boom")))
    out = io.StringIO()

    with pytest.raises(SystemExit) as exit_info:
        call_command(
            "import_dataset", str(flask_files["eval"]), "--project", project.slug, stdout=out
        )

    assert exit_info.value.code == 1
    assert ": FAILED" in out.getvalue() and "error: RuntimeError: boom" in out.getvalue()
    assert db_counts() == EMPTY_DB


def test_it_detects_the_format_of_a_file_whose_first_record_is_long(project, tmp_path):
    # given: a generic item whose inline answers make its line longer than 64 KB
    row = {
        "id": "long",
        "instruction": "Summarise the following text.",
        "skills": SKILLS3,
        "responses": [{"model": f"m{n}", "text": "word " * 5000} for n in range(5)],
    }
    path = write_jsonl(tmp_path / "long.jsonl", ["", row])
    assert path.stat().st_size > 100 * 1024

    # when
    upload = run_import(project, path)

    # then
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    assert upload.summary["files"][0]["format"] == "generic-jsonl"
    assert (upload.items_created, upload.responses_created) == (1, 5)


def test_rows_skipped_counts_rows_not_problems(project, tmp_path):
    # given one row with two skipped problems and one row with one
    path = write_jsonl(
        tmp_path / "e.jsonl",
        eval_rows(i1={"difficulty": -1, "domain": ["-1"]}, i2={"difficulty": 9}),
    )
    # when
    upload = run_import(
        project, path, policies={"invalid_difficulty": "skip", "invalid_domain": "skip"}
    )
    # then
    assert upload.status == UploadStatus.SUCCEEDED
    assert upload.problem_count == 3
    assert upload.rows_skipped == 2
    assert sorted(Item.objects.values_list("external_id", flat=True)) == ["3"]


# Another connection commits while the import's transaction is open: SQLite has one writer at
# a time, so there the stale check waits for the import instead (and finds it finished).
@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_job_failed_by_the_stale_check_mid_import_keeps_nothing(project, tmp_path):
    import threading

    from django.db import connection as default_connection

    # given an import whose job is marked failed (worker thought dead) while it runs
    path = write_jsonl(tmp_path / "e.jsonl", EVAL_ROWS)
    upload = dataset_upload_create(
        project=project,
        dataset_name="late",
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )
    upload = dataset_upload_claim(upload_id=upload.pk)
    real_apply = imports._apply

    def stale_check_elsewhere():  # another connection, committing on its own
        from django.db import connection

        uploads_fail_stale(older_than_seconds=-60)
        connection.close()

    def apply_then_lose_the_claim(cursor, dataset, job):
        counts = real_apply(cursor, dataset, job)
        assert default_connection.in_atomic_block
        thread = threading.Thread(target=stale_check_elsewhere)
        thread.start()
        thread.join()
        return counts

    # when
    with mock.patch.object(imports, "_apply", apply_then_lose_the_claim):
        result = dataset_import_run(upload=upload)
    # then the late finish neither commits rows nor overwrites the recorded failure
    assert result.status == UploadStatus.FAILED
    assert "worker lost" in result.error
    assert db_counts() == EMPTY_DB


def test_presets_start_the_policies_and_explicit_pairs_override_them():
    assert policies_parse([], preset="flask-release") == {
        "invalid_difficulty": "accept",
        "invalid_domain": "accept",
        "skill_count": "accept",
        "empty_response": "accept",
    }
    assert policies_parse(["skill_count=skip"], preset="flask-release")["skill_count"] == "skip"
    lenient = policies_parse([], preset="lenient")
    assert lenient["invalid_json"] == "skip" and lenient["invalid_difficulty"] == "accept"
    assert policies_parse([], preset="strict") == {}
    with pytest.raises(ImportOptionsError, match="unknown preset"):
        policies_parse([], preset="sloppy")


def test_success_is_recorded_with_its_counts_and_problems_in_one_step(project, tmp_path):
    # A poller that sees "succeeded" stops polling, so by then the counts and the problem
    # report must already be there (they are written in the import's own transaction).
    path = write_jsonl(tmp_path / "e.jsonl", eval_rows(i1={"difficulty": -1}))
    seen = {}
    real_done = imports._finish_done

    def check_then_done(upload):
        row = DatasetUpload.objects.get(pk=upload.pk)
        seen.update(
            status=row.status,
            items=row.items_created,
            problems=ImportProblem.objects.filter(upload=row).count(),
        )
        return real_done(upload)

    with mock.patch.object(imports, "_finish_done", check_then_done):
        run_import(project, path, policies={"invalid_difficulty": "accept"})
    assert seen == {"status": UploadStatus.SUCCEEDED, "items": 3, "problems": 1}


def test_the_upload_job_row_shares_the_job_status_values():
    # DatasetUpload's transitions are flaskweb.jobs' (job_claim, job_finish,
    # jobs_fail_stale), which write JobStatus values: the two enums must stay the same
    # strings, or a claimed upload would be written a status its CHECK refuses.
    assert set(UploadStatus.values) == set(JobStatus.values)
