"""Pairwise preference sets (format `preference`, docs/IMPORT_FORMATS.md): rows of prompt,
chosen, rejected, subset (and an optional id) become items whose two responses are by the
models `chosen` and `rejected`, through the ordinary dataset import (atomic, problems per
line)."""

from __future__ import annotations

import io
import json

import pytest

from annotation import parsers
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import Item, Response, UploadSource, UploadStatus
from annotation.parsers import PREFERENCE_SKILLS, Catalogue, ItemRow, Problem, ResponseRow

CATALOGUE = Catalogue.of(
    ["Comprehension", "Logical Correctness", "Harmlessness", "Factuality", "Readability"],
    ["Coding"],
)


def rows_of(text: bytes, name: str = "prefs.jsonl") -> list:
    return list(
        parsers.parse_file(io.BytesIO(text), file_name=name, fmt="preference", catalogue=CATALOGUE)
    )


def jsonl(*objs) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objs)


ROW = {"id": "p1", "prompt": "Name a prime.", "chosen": "7", "rejected": "8", "subset": "math"}


def test_a_row_is_an_item_with_a_chosen_and_a_rejected_response():
    item, chosen, rejected = rows_of(jsonl({**ROW, "source": "ours"}))
    assert isinstance(item, ItemRow) and not item.problems
    assert (item.external_id, item.instruction, item.reference) == ("p1", "Name a prime.", "")
    assert item.skills == list(PREFERENCE_SKILLS)
    assert item.metadata == {"source": "ours", "preference_set": True, "subset": "math"}
    assert isinstance(chosen, ResponseRow) and isinstance(rejected, ResponseRow)
    assert (chosen.model, chosen.text, rejected.model, rejected.text) == (
        "chosen",
        "7",
        "rejected",
        "8",
    )


def test_the_format_is_detected_in_jsonl_and_csv():
    assert parsers.detect_format("x.jsonl", jsonl(ROW)) == "preference"
    assert parsers.detect_format("x.csv", b"id,prompt,chosen,rejected,subset\n") == "preference"
    assert parsers.detect_format("x.csv", b"id,instruction,model,response\n") == "generic-csv"


def test_csv_rows_and_an_id_made_from_the_content():
    text = (
        b"\xef\xbb\xbfprompt,chosen,rejected,subset\n"
        b'"Say hi, briefly",Hi.,"Hello, there, friend",chat\n'
    )
    item, chosen, rejected = rows_of(text, "p.csv")
    assert item.instruction == "Say hi, briefly" and rejected.text == "Hello, there, friend"
    again = rows_of(text, "p.csv")[0]
    assert item.external_id == again.external_id and item.external_id.startswith("pref-")
    assert item.metadata == {"preference_set": True, "subset": "chat"}


def _row(**fields):
    return {"prompt": "q", "chosen": "a", "rejected": "b", "subset": "s", **fields}


@pytest.mark.parametrize(
    ("row", "code", "field"),
    [
        ({"prompt": "q", "chosen": "a", "subset": "s"}, "missing_field", "rejected"),
        ({"prompt": "q", "chosen": "a", "rejected": "b"}, "missing_field", "subset"),
        (_row(prompt=""), "missing_field", "prompt"),
        (_row(chosen=" same ", rejected="same"), "identical_pair", "rejected"),
        (_row(chosen=["a"]), "invalid_type", "chosen"),
        (_row(subset="s" * 101), "invalid_type", "subset"),
        (_row(prompt="q" * (parsers.MAX_TEXT_CHARS + 1)), "invalid_type", "prompt"),
    ],
)
def test_bad_rows_are_refused_with_the_field_and_the_reason(row, code, field):
    (problem,) = rows_of(jsonl(row))
    assert isinstance(problem, Problem)
    assert (problem.code, problem.field, problem.line) == (code, field, 1)


def test_bad_encoding_and_long_lines_are_reported_per_line():
    text = jsonl(ROW) + b'{"prompt": "caf\xe9"}\n' + b"x" * 200 + b"\n"
    out = list(
        parsers.parse_file(
            io.BytesIO(text),
            file_name="p.jsonl",
            fmt="preference",
            catalogue=CATALOGUE,
            max_line_bytes=100,
        )
    )
    problems = [(p.line, p.code) for p in out if isinstance(p, Problem)]
    assert problems == [(2, "invalid_encoding"), (3, "line_too_long")]
    bad_csv = rows_of(b"prompt,chosen,rejected,subset\nq,\xff,b,s\n", "p.csv")
    assert [(p.line, p.code) for p in bad_csv] == [(2, "invalid_encoding")]
    assert [p.code for p in rows_of(b"prompt,chosen\nq,a\n", "p.csv")] == ["unknown_format"]


def _import(project, tmp_path, name: str, content: bytes, policies=None):
    path = tmp_path / name
    path.write_bytes(content)
    upload = dataset_upload_create(
        project=project,
        dataset_name="Prefs",
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
        policies=policies,
    )
    return dataset_import(upload_id=upload.pk)


def test_a_preference_set_imports_as_a_dataset_and_again_as_unchanged(project, tmp_path):
    content = jsonl(
        ROW,
        {
            "id": "p2",
            "prompt": "Is 9 prime?",
            "chosen": "No.",
            "rejected": "Yes.",
            "subset": "math",
        },
    )
    upload = _import(project, tmp_path, "prefs.jsonl", content)
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    items = Item.objects.filter(dataset=upload.dataset).order_by("external_id")
    assert [i.external_id for i in items] == ["p1", "p2"]
    assert items[0].metadata == {"preference_set": True, "subset": "math"}
    assert [s.skill.name for s in items[0].item_skills.order_by("rank")] == list(PREFERENCE_SKILLS)
    assert sorted(
        Response.objects.filter(item__dataset=upload.dataset).values_list("model_name", flat=True)
    ) == ["chosen", "chosen", "rejected", "rejected"]
    again = _import(project, tmp_path, "prefs.jsonl", content)
    assert again.status == UploadStatus.SUCCEEDED
    assert Item.objects.filter(dataset=upload.dataset).count() == 2


def test_an_import_with_a_bad_line_or_a_duplicate_id_writes_nothing(project, tmp_path):
    dup = jsonl(ROW, {**ROW, "chosen": "11"})
    upload = _import(project, tmp_path, "dup.jsonl", dup)
    assert upload.status == UploadStatus.REJECTED
    assert "duplicate_item" in json.dumps(upload.summary)
    same = jsonl(ROW, {**ROW, "id": "p9", "rejected": "7"})
    upload = _import(project, tmp_path, "same.jsonl", same)
    assert upload.status == UploadStatus.REJECTED
    assert not Item.objects.filter(dataset__name="Prefs").exists()
    skipped = _import(project, tmp_path, "same.jsonl", same, policies={"identical_pair": "skip"})
    assert skipped.status == UploadStatus.SUCCEEDED
    assert list(
        Item.objects.filter(dataset__name="Prefs").values_list("external_id", flat=True)
    ) == ["p1"]
