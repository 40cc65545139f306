"""Columnar exports and imports (docs/EXPORTS.md "Parquet" and "hf_dataset",
docs/IMPORT_FORMATS.md "Parquet"): each Parquet export has explicit types and the same content
as its CSV, memory stays flat, the score import reads typed Parquet files with the CSV's rules
(row numbers, atomic, null = N/A, a wrong column type named), and the Hugging Face layout
loads with the `datasets` library, offline."""

from __future__ import annotations

import csv
import io
import json
import re
import tracemalloc
import zipfile
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import CommandError, call_command

from analytics.exports import selectors as export_selectors
from analytics.exports.columnar import METADATA_KEY
from analytics.exports.hf_dataset import front_matter_of, md, pseudonym
from analytics.exports.services import (
    ExportOptionsError,
    ScoreExport,
    csv_safe,
    export_options_clean,
    export_write,
)
from analytics.imports import parsers
from analytics.imports.parsers import scores_parse
from analytics.imports.services import ScoreImportRejected, scores_import
from analytics.models import ImportedScore, ScoreImport
from analytics.tasks import export_run_task
from tests.analytics.test_exports import API, export_text
from tests.analytics.test_exports import scored as scored  # the fixture
from tests.clients import token_client

TS = pa.timestamp("us", tz="UTC")


def export_bytes(project, kind, fmt, filters=None) -> bytes:
    options = export_options_clean(project=project, kind=kind, fmt=fmt, filters=filters)
    out = io.BytesIO()
    export_write(options, out)
    return out.getvalue()


def parquet_table(data: bytes) -> pa.Table:
    return pq.read_table(io.BytesIO(data))


def as_csv_cell(value, column: str = "") -> str:
    """A Parquet value as the CSV export writes it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(csv_safe(value))


def csv_rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


# --- exports --------------------------------------------------------------------------------------


def test_the_long_parquet_is_typed_and_holds_the_csv_rows(scored):
    # when
    data = export_bytes(scored.project, "long", "parquet")
    table = parquet_table(data)
    # then: explicit types, N/A null beside is_na, times as UTC timestamps
    types = {f.name: f.type for f in table.schema}
    assert types["score"] == pa.int8() and types["is_na"] == pa.bool_()
    assert types["created_at"] == TS and types["updated_at"] == TS
    assert types["time_on_task_ms"] == pa.int64() and types["rubric_version"] == pa.int64()
    assert types["rationale"] == pa.large_string() and types["item"] == pa.string()
    assert types["adjudicated_score"] == pa.int8() and types["adjudicated_is_na"] == pa.bool_()
    rows = table.to_pylist()
    assert rows[0]["created_at"] == datetime(2026, 3, 1, 12, tzinfo=UTC)
    na = [r for r in rows if r["is_na"]]
    assert na and all(r["score"] is None for r in na)
    assert {r["rubric_label"] for r in rows if r["source"] == "campaign:C"} == {
        f"built-in v{scored.rubric_version}"
    }
    # the formula is data here (no CSV guard), and the file says what it holds
    assert '=HYPERLINK("http://x")' in {r["rationale"] for r in rows}
    meta = json.loads(pq.read_schema(io.BytesIO(data)).metadata[METADATA_KEY])
    assert meta["project"] == "demo-project" and meta["kind"] == "long"
    # the same content as the CSV of the same selection, cell by cell
    expected = csv_rows(export_text(scored.project, "long", "csv"))
    header, body = expected[0], expected[1:]
    assert table.column_names == [*header, "adjudicated_is_na"]
    got = []
    for row in rows:
        cells = [as_csv_cell(row[c], c) for c in header]
        if row["is_na"]:
            cells[header.index("score")] = "N/A"
        got.append(cells)
    assert got == body and len(got) == 21


def test_the_wide_parquet_has_a_float_column_and_an_na_flag_per_rater(scored):
    table = parquet_table(export_bytes(scored.project, "wide", "parquet"))
    expected = csv_rows(export_text(scored.project, "wide", "csv"))
    header, body = expected[0], expected[1:]
    types = {f.name: f.type for f in table.schema}
    assert types["human:alice"] == pa.float64() and types["human:alice:na"] == pa.bool_()
    got = []
    for row in table.to_pylist():
        cells = [as_csv_cell(row[c]) for c in header[:4]]
        for column in header[4:]:
            name = column[1:] if column.startswith("'") else column  # csv_safe's apostrophe
            cells.append("N/A" if row[name + ":na"] else as_csv_cell(row[name]))
        got.append(cells)
    assert got == body


def test_review_and_preference_parquet_files_keep_their_types(scored):
    # a FLASK review file: the scores as a map, null for N/A
    data = export_bytes(scored.project, "flask_review", "parquet", {"judge": ["gpt"]})
    table = parquet_table(data)
    assert table.schema.field("score").type == pa.map_(pa.string(), pa.int8())
    assert table.schema.field("metrics").type == pa.list_(pa.string())
    lines = [
        json.loads(line)
        for line in export_text(scored.project, "flask_review", "jsonl", {"judge": ["gpt"]})
        .strip()
        .splitlines()
    ]
    for row, line in zip(table.to_pylist(), lines, strict=True):
        assert dict(row["score"]) == {
            k: (None if v == "N/A" else v) for k, v in line["score"].items()
        }
        assert row["review"] == line["review"] and row["metrics"] == line["metrics"]
    # no preference yet: the file has no row, and its types all the same
    empty = parquet_table(export_bytes(scored.project, "preferences", "parquet"))
    assert empty.num_rows == 0
    assert empty.schema.field("submitted_at").type == TS
    assert empty.schema.field("strength").type == pa.int8()


def test_formats_are_refused_where_they_do_not_fit(scored):
    with pytest.raises(ExportOptionsError) as refused:
        export_options_clean(project=scored.project, kind="judge_training", fmt="parquet")
    assert "format" in refused.value.errors
    with pytest.raises(ExportOptionsError) as refused:
        export_options_clean(project=scored.project, kind="hf_dataset", fmt="csv")
    assert refused.value.errors["format"] == ["a hf_dataset export is written as zip, not 'csv'"]
    with pytest.raises(CommandError, match="binary: write it to a file with --output"):
        call_command("export_scores", "--project", "demo-project", "--kind", "long",
                     "--format", "parquet", stdout=io.StringIO())  # fmt: skip


def test_a_long_parquet_export_imports_back_with_the_same_scores(scored):
    # (the fixture's imported scores repeat a campaign rater on one response: left out)
    filters = {"skill": ["Factuality", "Comprehension"]}
    data = export_bytes(scored.project, "long", "parquet", filters)
    result = scores_import(
        project_slug="copy", files=[("scores.parquet", data)], create_project=True
    )
    copied = {
        (s.response.model_name, s.skill.name, s.rater): None if s.is_na else s.value
        for s in ImportedScore.objects.filter(batch=result.batch).select_related(
            "response", "skill"
        )
    }
    expected = {
        (r["system"], r["skill"], r["rater"]): r["score"] for r in parquet_table(data).to_pylist()
    }
    assert len(expected) == 12 and None in expected.values()
    assert copied == expected
    assert result.batch.files[0]["format"] == "parquet"


def test_the_api_asks_for_parquet_and_a_hugging_face_layout(scored, researcher):
    client = token_client(researcher)
    for body, name, content_type in (
        (
            {"kind": "long", "format": "parquet", "rater_kind": "judge"},
            "demo-project-scores-long.parquet",
            "application/vnd.apache.parquet",
        ),
        ({"kind": "hf_dataset"}, "demo-project-hf-dataset.zip", "application/zip"),
    ):
        created = client.post(f"{API}/projects/demo-project/exports/", body, format="json")
        assert created.status_code == 201, created.json()
        export_run_task(created.json()["id"])
        detail = client.get(created.json()["urls"]["self"]).json()
        assert detail["status"] == "done", detail
        file = client.get(detail["urls"]["download"])
        assert file["Content-Type"] == content_type
        assert file["Content-Disposition"] == f'attachment; filename="{name}"'
        data = b"".join(file.streaming_content)
        if body["kind"] == "long":
            assert parquet_table(data).num_rows == detail["rows"] == 6 + 2
        else:
            assert zipfile.ZipFile(io.BytesIO(data)).namelist()
    refused = client.post(
        f"{API}/projects/demo-project/exports/", {"kind": "wide", "format": "zip"}, format="json"
    )
    assert refused.status_code == 400 and "format" in refused.json()


@pytest.mark.slow
def test_a_parquet_export_holds_one_batch_in_memory(project, monkeypatch):
    # the Python heap at the peak of a 4x larger export is about the same: rows are read
    # on server-side cursors and written one record batch (row group) at a time (both
    # made small here, so that small exports span several)
    from analytics.exports import columnar

    monkeypatch.setattr(export_selectors, "FETCH_CHUNK", 250)

    peaks = []
    for n, items in enumerate((0, 125, 500)):
        rows = ["item,system,rater,rater_kind,skill,score,rationale"]
        rows += [
            f"q{i},m{s},r{r},human,Readability,{1 + (i + r) % 5},note {i}"
            for i in range(items or 1)
            for s in (1, 2)
            for r in (1, 2, 3, 4)
        ]
        scores_import(
            project_slug=project.slug,
            files=[(f"s{n}.csv", ("\n".join(rows) + "\n").encode())],
            dataset_name=f"Memory {n}",
        )
        options = export_options_clean(
            project=project, kind="long", fmt="parquet", filters={"dataset": f"Memory {n}"}
        )
        out = io.BytesIO()
        tracemalloc.start()  # (the first round warms pyarrow up and is not compared)
        columns, typed = ScoreExport(options).typed()
        columnar.parquet_write(out, columns, typed, batch_rows=250)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        groups = pq.ParquetFile(io.BytesIO(out.getvalue())).metadata.num_row_groups
        assert parquet_table(out.getvalue()).num_rows == (items or 1) * 8
        assert groups == max(1, items * 8 // 250)
    assert peaks[2] < 1.3 * peaks[1] + 300_000, peaks


# --- the Hugging Face layout ----------------------------------------------------------------------


@pytest.mark.slow
def test_the_hugging_face_layout_loads_with_datasets_offline(scored, tmp_path, monkeypatch):
    # given: the zipped layout, unpacked
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    data = export_bytes(scored.project, "hf_dataset", "zip")
    long = parquet_table(export_bytes(scored.project, "long", "parquet")).to_pylist()
    real_people = {r["rater"] for r in long if r["rater_kind"] == "human"}
    judges_named = {r["rater"] for r in long if r["rater_kind"] == "judge"}
    assert real_people and judges_named
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert sorted(archive.namelist()) == [
        "demo-project-hf-dataset/README.md",
        "demo-project-hf-dataset/data/human-00000-of-00001.parquet",
        "demo-project-hf-dataset/data/judge-00000-of-00001.parquet",
    ]  # no preference label: no preferences config
    archive.extractall(tmp_path / "out")
    root = tmp_path / "out" / "demo-project-hf-dataset"
    # then: the card's YAML names the config, its splits and features
    card = (root / "README.md").read_text()
    front = front_matter_of(card)
    assert front["license"] == "other"
    assert front["configs"] == [
        {
            "config_name": "scores",
            "default": True,
            "data_files": [
                {"split": "human", "path": "data/human-*.parquet"},
                {"split": "judge", "path": "data/judge-*.parquet"},
            ],
        }
    ]
    splits = {s["name"]: s["num_examples"] for s in front["dataset_info"][0]["splits"]}
    assert splits == {"human": 12 + 1, "judge": 6 + 2}
    # it names the rubric versions, the campaign's settings and the judge's configuration
    assert f"built-in v{scored.rubric_version}" in card
    assert "| C | D | pointwise | 2 | all |" in card
    assert "| gpt | llm |" in card and "| 0 | 1 |" in card  # temperature, samples
    assert "Judges known only from imported outputs" in card and "'=ext" not in card
    assert "127.0.0.1" not in card and "api_key" not in card.lower()
    # and `datasets` loads it as it is, offline
    import datasets

    loaded = datasets.load_dataset(str(root), cache_dir=str(tmp_path / "cache"))
    assert {name: len(split) for name, split in loaded.items()} == splits
    features = loaded["human"].features
    assert features["score"].dtype == "int8" and features["is_na"].dtype == "bool"
    assert features["created_at"].dtype == "timestamp[us, tz=UTC]"
    human = loaded["human"].to_list()
    assert {r["score"] for r in human if r["is_na"]} == {None}
    # made to be published: no person is named (pseudonyms), no crowd worker id
    people = {r["rater"] for r in human}
    assert people and all(re.fullmatch(r"person-[0-9a-f]{10}", p) for p in people), people
    assert all(r["worker_id"] is None for r in human)
    assert {pseudonym("person", name) for name in real_people} == people
    assert not any(name in card for name in real_people)
    assert {r["rater"] for r in loaded["judge"].to_list()} <= judges_named
    assert human[0]["created_at"].isoformat().startswith("2026-03-01T12:00:00")


def test_markdown_cells_of_the_card_are_literal_text():
    assert md("a|b <script>") == r"a\|b \<script\>"
    assert md("two\nlines") == "two lines" and md("") == "–"


# --- imports --------------------------------------------------------------------------------------


def parquet_bytes(columns: dict, schema: pa.Schema | None = None, row_group_size=None) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table(columns, schema=schema), out, row_group_size=row_group_size)
    return out.getvalue()


BASE = {
    "item": ["q1", "q1", "q2"],
    "system": ["m-a", "m-a", "m-b"],
    "rater": ["ann1", "ann2", "gpt-judge"],
    "rater_kind": ["human", "human", "judge"],
    "skill": ["Readability"] * 3,
}


def test_a_parquet_score_file_imports_with_null_as_na(project):
    # given: int scores with a null, and a float file written the way pandas writes them
    ints = parquet_bytes({**BASE, "score": pa.array([4, None, 5], pa.int8())})
    floats = parquet_bytes({**BASE, "item": ["q3", "q3", "q4"], "score": [2.0, None, 3.0]})
    # when
    result = scores_import(
        project_slug=project.slug, files=[("a.parquet", ints), ("b.parquet", floats)]
    )
    # then
    stored = {
        (s.response.item.external_id, s.rater): None if s.is_na else s.value
        for s in ImportedScore.objects.filter(batch=result.batch).select_related("response__item")
    }
    assert stored == {
        ("q1", "ann1"): 4.0,
        ("q1", "ann2"): None,
        ("q2", "gpt-judge"): 5.0,
        ("q3", "ann1"): 2.0,
        ("q3", "ann2"): None,
        ("q4", "gpt-judge"): 3.0,
    }
    assert [f["format"] for f in result.batch.files] == ["parquet", "parquet"]


def test_a_wrong_column_type_is_refused_naming_the_column_and_the_type(project):
    data = parquet_bytes({**BASE, "score": ["4", "N/A", "5"], "rationale": [1, 2, 3]})
    with pytest.raises(ScoreImportRejected) as rejected:
        scores_import(project_slug=project.slug, files=[("s.parquet", data)])
    messages = {(p.field, p.code, p.message) for p in rejected.value.problems}
    assert messages == {
        (
            "score",
            "invalid_type",
            "column score is of Parquet type string; it must hold integer or float or null "
            "(null for N/A)",
        ),
        (
            "rationale",
            "invalid_type",
            "column rationale is of Parquet type int64; it must hold text",
        ),
    }
    assert ScoreImport.objects.count() == 0


def test_a_bad_row_rejects_the_whole_parquet_file_with_its_row_number(project):
    # given: the third row's score is off the 1-5 scale, in a file of two row groups
    data = parquet_bytes({**BASE, "score": pa.array([4, 3, 9], pa.int64())}, row_group_size=2)
    # when
    with pytest.raises(ScoreImportRejected) as rejected:
        scores_import(project_slug=project.slug, files=[("s.parquet", data)])
    # then: nothing was written, and the problem says where
    (problem,) = rejected.value.problems
    assert (problem.file, problem.line, problem.field) == ("s.parquet", 3, "score")
    assert "outside the scale" in problem.message
    assert ImportedScore.objects.count() == 0 and ScoreImport.objects.count() == 0


def test_missing_columns_and_a_broken_file_are_problems_not_crashes():
    parsed = scores_parse(
        [
            ("a.parquet", parquet_bytes({"item": ["q1"], "score": [3]})),
            ("b.parquet", b"PAR1 this is not parquet"),
        ]
    )
    assert [(p.file, p.code) for p in parsed.problems] == [
        ("a.parquet", "missing_field"),
        ("b.parquet", "invalid_parquet"),
    ]
    assert "system, rater, rater_kind, skill" in parsed.problems[0].message


@pytest.mark.slow
def test_the_parquet_reader_holds_no_row_in_memory(monkeypatch):
    # as the CSV import (test_score_import_web, which covers the staging behind it): the
    # parser's peak for a 4x larger file is about the same, the file being read one record
    # batch at a time and each row handed on
    monkeypatch.setattr(parsers, "PARQUET_BATCH_ROWS", 250)
    peaks = []
    for count in (200, 1_000, 4_000):
        data = parquet_bytes(
            {
                "item": [f"q{i // 2}" for i in range(count)],
                "system": [f"m{i % 2}" for i in range(count)],
                "rater": ["ann1"] * count,
                "rater_kind": ["human"] * count,
                "skill": ["Readability"] * count,
                "score": pa.array([1 + i % 5 for i in range(count)], pa.int8()),
                "rationale": [f"a rationale of some length, row {i}" * 3 for i in range(count)],
            },
            row_group_size=250,
        )
        seen = []

        def sink(row, skill, givens, seen=seen):
            seen.append(1)

        tracemalloc.start()  # (the first round warms pyarrow up and is not compared)
        parsed = scores_parse([("s.parquet", io.BytesIO(data))], sink=sink)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert parsed.problems == [] and len(seen) == parsed.files[0].rows == count
    assert peaks[2] < 1.3 * peaks[1] + 200_000, peaks


def test_the_hugging_face_layout_names_no_person(settings):
    # given rows of people (one a crowd worker, one adjudicated) and of a judge
    from analytics.exports.hf_dataset import _unnamed
    from analytics.exports.services import Column

    names = ("rater", "rater_kind", "worker_id", "adjudicated_by", "score")
    columns = [Column(name, "string") for name in names]
    rows = [
        ["alice", "human", "PROLIFIC-5f3a", "rita", 4],
        ["bob", "human", "", "", 3],
        ["gpt-judge", "judge", "", "", 5],
        ["alice", "human", "", "", 2],
    ]
    # when they go into the layout
    out = list(_unnamed(iter([list(r) for r in rows]), columns))
    # then people are pseudonyms (the same person, the same one), worker ids are gone, judges
    # keep their names; another server's key gives other pseudonyms
    assert [r[0] for r in out] == [
        pseudonym("person", "alice"),
        pseudonym("person", "bob"),
        "gpt-judge",
        pseudonym("person", "alice"),
    ]
    assert out[0][0] != out[1][0] and re.fullmatch(r"person-[0-9a-f]{10}", out[0][0])
    assert [r[2] for r in out] == [None, None, None, None]
    assert out[0][3] == pseudonym("adjudicator", "rita") and out[1][3] == ""
    assert [r[4] for r in out] == [4, 3, 5, 2]
    settings.SECRET_KEY = "another server's key " * 3
    assert pseudonym("person", "alice") != out[0][0]
