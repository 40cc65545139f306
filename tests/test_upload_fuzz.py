"""Hostile files through every upload endpoint, over HTTP, as a project admin or researcher.

Endpoints: the dataset upload page and API (the import runs as a job: it is run here the way
the worker runs it), the rubric import page, the judge prompt-file import page, the judge
output import API, the long-format score import page and API, and the preference-label
import page and API.

Every input is malformed on purpose (broken or deeply nested JSON, broken CSV, bytes that are
not UTF-8, byte-order marks, NUL bytes, lines over the line limit, archives, files over the
size limit, wrong field types), built from a valid file with exactly one defect. For each one:
no 5xx; a clear error (a 400 naming the problem, the page again with the error shown, or a
dataset upload that ends `rejected` with its problems recorded and no error); and no table
of the three apps changes, except the job row, its file rows and its problem report that a
rejected dataset upload leaves (docs/IMPORT_FORMATS.md, "Guarantees").

The limits are made small for the run (64 KiB per upload, 8 KiB per line) so the cases stay
fast. docs/IMPORT_FORMATS.md, "Limits and hostile input", lists what each endpoint refuses.
"""

from __future__ import annotations

import ast
import codecs
import csv
import gzip
import io
import json
import math
import weakref
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.utils.html import escape
from hypothesis import HealthCheck, example, given
from hypothesis import strategies as st
from rest_framework.test import APIClient

from analytics.models import PreferenceImportJob, ScoreImportJob
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import DatasetUpload, ImportProblem, UploadFile, UploadSource, UploadStatus
from annotation.parsers import PROBLEM_CLASSES
from judging.models import JudgeOutputImportJob
from tests.clients import token_client
from tests.jobs import import_jobs_fixture  # noqa: F401 - the import_jobs fixture
from tests.judging.test_output_imports import make_flask_dataset, review

UPLOAD_LIMIT = 64 * 1024
LINE_LIMIT = 8 * 1024
#: Examples per endpoint: hypothesis runs `max_examples`; fewer than `minimum` fails the test.
EXAMPLES = {
    "dataset page": (145, 135),
    "dataset api": (145, 135),
    "rubric page": (145, 135),
    "template page": (150, 140),
    "judge output api": (155, 145),
    "score page": (140, 130),
    "score api": (155, 145),
    "preference page": (120, 110),
    "preference api": (120, 110),
}
#: The minimums add up to at least this (checked by the last test of the module).
TOTAL_MINIMUM = 1000

NAN = float("nan")
NUL = "a\u0000b"
SURROGATE = "a\ud800b"  # half a surrogate pair: what a JSON escape \ud800 decodes to
SKILLS = ["Factuality", "Conciseness", "Readability"]
DEEP_DOCUMENT = b"[" * 10_000 + b"]" * 10_000


def fuzz_settings(endpoint: str):
    return hypothesis.settings(
        max_examples=EXAMPLES[endpoint][0],
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.filter_too_much,
        ],
    )


def finished(endpoint: str, sent: int) -> None:
    assert sent >= EXAMPLES[endpoint][1], f"{endpoint}: only {sent} inputs were sent"


@pytest.fixture(autouse=True)
def _small_limits(settings):
    settings.FLASKWEB_MAX_UPLOAD_BYTES = UPLOAD_LIMIT
    settings.FLASKWEB_MAX_LINE_BYTES = LINE_LIMIT
    field_limit = csv.field_size_limit()  # the CSV readers set this process-wide limit
    yield
    csv.field_size_limit(field_limit)


def api_client(user, *, raise_request_exception: bool = True) -> APIClient:
    return token_client(user, raise_request_exception=raise_request_exception)


# --- the database, before and after ----------------------------------------------------------

_TABLES = sorted(
    model._meta.db_table
    for app in ("annotation", "judging", "analytics")
    for model in apps.get_app_config(app).get_models()
)

_COUNT_ROWS = "SELECT " + ", ".join(
    f"(SELECT COUNT(*) FROM {connection.ops.quote_name(t)})" for t in _TABLES
)
#: The count query is prepared once per database session, as planning its subquery per
#: table cost more than running them (3.3 ms a call against 1.9 ms, twice per example).
#: A prepared statement outlives the rollbacks of the test transactions; psycopg drops the
#: session's statements after a rollback only when its own statement cache is on.
_STATEMENT = "test_upload_fuzz_row_counts"
_PREPARED_ON: weakref.WeakSet[Any] = weakref.WeakSet()  # the DB-API connections it is on


def row_counts() -> dict[str, int]:
    """Rows in every table of the three apps, exactly, in one query."""
    with connection.cursor() as cursor:
        raw = connection.connection
        if connection.vendor == "postgresql" and raw.prepare_threshold is None:
            if raw not in _PREPARED_ON:
                cursor.execute(f"PREPARE {_STATEMENT} AS {_COUNT_ROWS}")
                _PREPARED_ON.add(raw)
            cursor.execute(f"EXECUTE {_STATEMENT}")
        else:  # SQLite, or psycopg's own statement cache is on (DATABASES OPTIONS)
            cursor.execute(_COUNT_ROWS)
        return dict(zip(_TABLES, cursor.fetchone(), strict=True))


#: The job rows of score, preference and judge-output imports: a request that is accepted
#: makes one.
_JOB_TABLES = {
    ScoreImportJob._meta.db_table,
    PreferenceImportJob._meta.db_table,
    JudgeOutputImportJob._meta.db_table,
}


def changes(before: dict[str, int]) -> dict[str, int]:
    """What changed but the job rows of score, preference and judge-output imports."""
    after = row_counts()
    return {
        t: after[t] - before[t] for t in _TABLES if after[t] != before[t] and t not in _JOB_TABLES
    }


# --- building malformed files ----------------------------------------------------------------


@dataclass(frozen=True)
class Upload:
    name: str
    data: bytes
    kind: str  # which defect, for the failure message

    def file(self) -> SimpleUploadedFile:
        return SimpleUploadedFile(self.name, self.data, content_type="application/octet-stream")


def dumps(value: Any) -> str:
    return json.dumps(value)  # non-ASCII as \u escapes, as many writers do


def jsonl(rows: list[Any]) -> bytes:
    return "\n".join(dumps(r) for r in rows).encode()


def csv_bytes(rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue().encode()


def nested(depth: int, kind: str) -> str:
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "0" + "}" * depth


depths = st.one_of(st.integers(1, 3000), st.just(10_000))


def _break_json(text: str, how: str, cut: int) -> str:
    """`text` (one JSON object or list) made invalid, in one of several ways."""
    if how == "truncated":
        return text[: 1 + cut % (len(text) - 1)]
    if how == "trailing comma":
        return text[:-1] + "," + text[-1]
    if how == "single quotes":
        return text.replace('"', "'")
    if how == "two values":
        return text + text
    if how == "extra bracket":
        return text + text[-1]
    if how == "python literal":
        return text[:-1] + (', "x": None}' if text.endswith("}") else ", None]")
    if how == "comment":
        return text + " // a note"
    return text.replace('"', "", 2)  # an unquoted key or value


BREAKS = (
    "truncated",
    "trailing comma",
    "single quotes",
    "two values",
    "extra bracket",
    "python literal",
    "comment",
    "unquoted",
)

INVALID_UTF8 = (
    b"\xff",
    b"\xfe",
    b"\xc3\x28",
    b"\xa0\xa1",
    b"\xe2\x28\xa1",
    b"\xf0\x28\x8c\xbc",
    b"\xed\xa0\x80",
    b"\xc0\xaf",
    b"\xf8\x88\x80\x80\x80",
    b"\x80",
)


@st.composite
def invalid_utf8(draw, base: Upload) -> Upload:
    bad = draw(st.sampled_from(INVALID_UTF8))
    at = draw(st.integers(0, len(base.data)))
    return Upload(base.name, base.data[:at] + bad + base.data[at:], "invalid UTF-8")


@st.composite
def nul_bytes(draw, base: Upload) -> Upload:
    at = draw(st.integers(0, len(base.data)))
    return Upload(base.name, base.data[:at] + b"\x00" + base.data[at:], "NUL byte")


@st.composite
def broken_json_lines(draw, name: str, lines: list[Any]) -> Upload:
    """JSONL with one line broken, or of the wrong top-level type."""
    texts = [dumps(r) for r in lines]
    n = draw(st.integers(0, len(texts) - 1))
    how = draw(st.sampled_from((*BREAKS, "top-level type")))
    if how == "top-level type":
        texts[n] = dumps(draw(st.sampled_from([[lines[n]], 5, "text", None, True, 1.5, []])))
    else:
        texts[n] = _break_json(texts[n], how, draw(st.integers(0, 10**6)))
    return Upload(name, "\n".join(texts).encode(), f"JSON {how}")


@st.composite
def deep_json_lines(draw, name: str, lines: list[Any], fields: list[str]) -> Upload:
    """A line, or one of its `fields` (where no list or object is valid), nested deeply."""
    depth, kind = draw(depths), draw(st.sampled_from(["list", "object"]))
    n = draw(st.integers(0, len(lines) - 1))
    texts = [dumps(r) for r in lines]
    if draw(st.booleans()):
        texts[n] = nested(depth, kind)
    else:
        key = draw(st.sampled_from(fields))
        texts[n] = dumps({**lines[n], key: "<deep>"}).replace('"<deep>"', nested(depth, kind))
    return Upload(name, "\n".join(texts).encode(), f"nested {depth} levels")


@st.composite
def wrong_field(
    draw, name: str, lines: list[dict], bad: dict[str, list[Any]], required: set[str]
) -> Upload:
    """One field of one line set to a value of the wrong type, or a required one dropped."""
    n = draw(st.integers(0, len(lines) - 1))
    key = draw(st.sampled_from(sorted(bad)))
    rows = [dict(r) for r in lines]
    if draw(st.integers(0, 9)) == 0 and key in required:
        del rows[n][key]
        kind = f"{key} missing"
    else:
        value = draw(st.sampled_from(bad[key]))
        rows[n][key] = value
        kind = f"{key} = {value!r:.40}"
    return Upload(name, jsonl(rows), kind)


@st.composite
def boms(draw, base: Upload, *, broken: Upload, utf16: bool = True) -> Upload:
    """UTF-16/32 text after its byte-order mark, or a UTF-8 BOM twice or before broken text."""
    choices = ["utf-8 bom twice", "utf-8 bom, broken text"]
    if utf16:
        choices += ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]
    how = draw(st.sampled_from(choices))
    if how == "utf-8 bom twice":
        return Upload(base.name, codecs.BOM_UTF8 * 2 + base.data, how)
    if how == "utf-8 bom, broken text":
        return Upload(base.name, codecs.BOM_UTF8 + broken.data, how)
    bom = {
        "utf-16-le": codecs.BOM_UTF16_LE,
        "utf-16-be": codecs.BOM_UTF16_BE,
        "utf-32-le": codecs.BOM_UTF32_LE,
        "utf-32-be": codecs.BOM_UTF32_BE,
    }[how]
    return Upload(base.name, bom + base.data.decode().encode(how), how)


@st.composite
def archives(draw, base: Upload) -> Upload:
    """The valid file, zipped or gzipped, under a .jsonl (or its own) name."""
    how = draw(st.sampled_from(["zip", "gzip"]))
    name = draw(st.sampled_from([base.name, "data.jsonl"]))
    if how == "gzip":
        return Upload(name, gzip.compress(base.data), how)
    buffer = io.BytesIO()
    method = draw(st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        archive.writestr(base.name, base.data)
    return Upload(name, buffer.getvalue(), how)


@st.composite
def oversize(draw, base: Upload) -> Upload:
    """The valid file followed by blank lines, past the upload limit."""
    size = draw(st.integers(UPLOAD_LIMIT + 1, UPLOAD_LIMIT + 4096))
    padding = b"\n" * max(1, size - len(base.data))
    return Upload(base.name, base.data + padding, "over the size limit")


@st.composite
def huge_garbage_line(draw, base: Upload) -> Upload:
    size = draw(st.integers(LINE_LIMIT + 1, 3 * LINE_LIMIT))
    filler = draw(st.sampled_from([b"x", b"{", b"\xe9", b" x"]))
    line = (filler * size)[:size]
    return Upload(base.name, base.data + b"\n" + line + b"\n", f"a {size:,}-byte line")


def common_defects(base: Upload, broken: Upload, *, utf16_is_wrong: bool = True):
    """Defects every endpoint must refuse, whatever its format."""
    return [
        st.just(Upload(base.name, b"", "empty")),
        st.text(" \t\r\n", min_size=1, max_size=40).map(
            lambda s: Upload(base.name, s.encode(), "white space only")
        ),
        st.binary(min_size=1, max_size=600).map(lambda b: Upload(base.name, b, "binary")),
        invalid_utf8(base),
        nul_bytes(base),
        boms(base, broken=broken, utf16=utf16_is_wrong),
        archives(base),
        huge_garbage_line(base),
    ]


# --- CSV defects ------------------------------------------------------------------------------


@st.composite
def broken_csv(
    draw, name: str, rows: list[list[str]], bad: dict[str, list[str]], required: list[str]
) -> Upload:
    """A CSV (header + rows without quotes) with one defect."""
    header, body = rows[0], [list(r) for r in rows[1:]]
    how = draw(
        st.sampled_from(
            [
                "unbalanced quote",
                "ragged",
                "NUL in a cell",
                "huge field",
                "header only",
                "header lacks a column",
                "bad value",
                "semicolons",
            ]
        )
    )
    n = draw(st.integers(0, len(body) - 1))
    col = draw(st.integers(0, len(header) - 1))
    if how == "unbalanced quote":
        text = csv_bytes([header, *body]).decode()
        lines = text.split("\n")
        cells = lines[1 + n].split(",")
        cells[col] = '"' + cells[col]
        lines[1 + n] = ",".join(cells)
        return Upload(name, "\n".join(lines).encode(), how)
    if how == "ragged":
        if draw(st.booleans()) and len(body[n]) > 1:
            body[n].pop(col)
        else:
            body[n].insert(col, "extra")
    elif how == "NUL in a cell":
        body[n][col] = body[n][col] + "\x00"
    elif how == "huge field":
        body[n][0] = "x" * draw(st.integers(LINE_LIMIT + 1, 2 * LINE_LIMIT))
    elif how == "header only":
        body = []
    elif how == "header lacks a column":
        column = draw(st.sampled_from(required))
        at = header.index(column)
        header = [h for h in header if h != column]
        body = [r[:at] + r[at + 1 :] for r in body]
    elif how == "semicolons":
        return Upload(name, csv_bytes([header, *body]).replace(b",", b";"), how)
    else:
        column = draw(st.sampled_from(sorted(bad)))
        value = draw(st.sampled_from(bad[column]))
        body[n][header.index(column)] = value
        how = f"{column} = {value!r:.40}"
    return Upload(name, csv_bytes([header, *body]), how)


# === the dataset upload (page and API) ========================================================

ITEM = {
    "id": "f-1",
    "instruction": "Name a primary colour.",
    "reference": "Red.",
    "skills": SKILLS,
    "domains": ["Culture"],
    "difficulty": 1,
    "responses": [{"model": "model-a", "text": "Blue."}],
}
ITEM_2 = {**ITEM, "id": "f-2", "instruction": "Name a planet.", "responses": []}
EVAL = {
    "idx": 1,
    "instruction": "Name a primary colour.",
    "answer": "Red.",
    "skill": SKILLS,
    "domain": ["Culture"],
    "difficulty": "simple lifestyle knowledge",
    "task": "fuzz",
}
OUTPUT = {"question_id": 1, "text": "Blue."}
ITEM_CSV = [
    ["id", "instruction", "skills", "domains", "difficulty", "model", "response"],
    ["f-1", "Name a primary colour.", ";".join(SKILLS), "Culture", "1", "model-a", "Blue."],
    ["f-2", "Name a planet.", ";".join(SKILLS), "Culture", "2", "model-a", "Mars."],
]
EVAL_FILE = Upload("eval.jsonl", jsonl([EVAL]), "valid")

ID_BAD = [None, "", "   ", [], {}, True, 1.5, "x" * 201, NUL, SURROGATE]
TEXT_BAD = [None, "", "  ", [], {"a": 1}, False, NAN, NUL, SURROGATE]
SKILLS_BAD = [
    5,
    {"a": 1},
    True,
    [{}],
    [None],
    [1.5],
    ["No such skill"],
    [],
    "Factuality",
    ["Factuality", "Factuality", "Readability"],
]
DOMAINS_BAD = [5, {"a": 1}, [{}], ["Atlantis"], True]
DIFFICULTY_BAD = [0, 6, -1, 2.5, "hard", [], {}, True, "9"]
GENERIC_BAD = {
    "id": ID_BAD,
    "instruction": TEXT_BAD,
    "skills": SKILLS_BAD,
    "domains": DOMAINS_BAD,
    "difficulty": DIFFICULTY_BAD,
    "metadata": [[], "x", 5, True, {"k": NUL}, {NUL: 1}, {"k": [SURROGATE]}, {SURROGATE: 1}],
    "responses": [
        "x",
        5,
        [5],
        [None],
        [{"model": [], "text": "x"}],
        [{"model": "m"}],
        [{"model": "m", "text": ""}],
        [{"model": "", "text": "x"}],
        [{"text": "x"}],
        [{"model": "m", "text": NUL}],
        [{"model": "m", "text": "x", "metadata": []}],
        [{"model": "m", "text": "x"}, {"model": "m", "text": "y"}],
    ],
    "checklist": [
        [],
        5,
        "x",
        {"No such skill": ["a"]},
        {"Factuality": 5},
        {"Factuality": [1]},
        {"Factuality": [NUL]},
    ],
    "task": [[], {"a": 1}, True],
    "reference": [[], {"a": 1}, True, NUL, SURROGATE],
}
EVAL_BAD = {
    "idx": ID_BAD,
    "instruction": TEXT_BAD,
    "answer": [[], {"a": 1}, True, NUL, SURROGATE],
    "skill": SKILLS_BAD,
    "domain": DOMAINS_BAD,
    "difficulty": [*DIFFICULTY_BAD, "-1"],
    "task": [[], {"a": 1}, True],
    "extra": [NUL, {"k": NUL}],
}
OUTPUT_BAD = {
    "question_id": [*ID_BAD, 2, "nope"],
    "text": [None, "", "  ", [], {"a": 1}, True, NUL, SURROGATE],
}
ITEM_CSV_BAD = {
    "id": ["", "x" * 201],
    "skills": ["No such skill", "", "Factuality"],
    "domains": ["Atlantis"],
    "difficulty": ["hard", "0", "6", "2.5"],
    "model": [""],
}


@dataclass
class DatasetCase:
    files: list[Upload]
    format: str = ""
    defective: str = ""  # the name of the file with the defect ("" if the request is bad)
    fields: dict[str, str] = field(default_factory=dict)  # other request fields
    refused_by_request: bool = False  # must be refused before a job is made

    def __repr__(self) -> str:
        files = ", ".join(f"{f.name} ({f.kind}, {len(f.data)} bytes)" for f in self.files)
        return f"DatasetCase({files}; format={self.format!r}; fields={self.fields})"


def _alone(upload: Upload, fmt: str = "") -> DatasetCase:
    return DatasetCase(
        [upload], fmt, upload.name, refused_by_request=upload.kind == "over the size limit"
    )


@st.composite
def dataset_cases(draw) -> DatasetCase:
    which = draw(st.sampled_from(["generic-jsonl", "flask-eval", "flask-output", "generic-csv"]))
    fmt = draw(st.sampled_from(["", which]))
    if which == "generic-csv":
        base = Upload("items.csv", csv_bytes(ITEM_CSV), "valid")
        defect = draw(
            st.one_of(
                broken_csv(base.name, ITEM_CSV, ITEM_CSV_BAD, ["id", "skills", "model"]),
                *common_defects(base, Upload(base.name, b'"id,\n', "broken")),
                oversize(base),
            )
        )
        return _alone(defect, fmt)
    lines, name, bad, required = {
        "generic-jsonl": (
            [ITEM, ITEM_2],
            "items.jsonl",
            GENERIC_BAD,
            {"id", "instruction", "skills"},
        ),
        "flask-eval": ([EVAL], "eval.jsonl", EVAL_BAD, {"idx", "instruction", "skill"}),
        "flask-output": ([OUTPUT], "model-a.jsonl", OUTPUT_BAD, {"question_id", "text"}),
    }[which]
    base = Upload(name, jsonl(lines), "valid")
    broken = draw(broken_json_lines(name, lines))
    deep_metadata = st.integers(100, 3000).map(
        lambda d: Upload(
            name,
            dumps({**ITEM, "metadata": "<deep>"}).replace('"<deep>"', nested(d, "object")).encode(),
            f"metadata nested {d} levels",
        )
    )
    defect = draw(
        st.one_of(
            st.just(broken),
            wrong_field(name, lines, bad, required),
            deep_json_lines(name, lines, sorted(required)),
            *([deep_metadata] if which == "generic-jsonl" else []),
            *common_defects(base, broken),
            oversize(base),
        )
    )
    case = _alone(defect, fmt)
    if which == "flask-output":  # the items the answers are to, in a valid file of their own
        case.files = [EVAL_FILE, defect]
        case.format = ""
    return case


@st.composite
def dataset_api_cases(draw) -> DatasetCase:
    """Content defects as on the page, plus bad request fields and file names."""
    how = draw(st.sampled_from(["content"] * 6 + ["policies", "name"]))
    if how == "content":
        return draw(dataset_cases())
    valid = Upload("items.jsonl", jsonl([ITEM]), "valid")
    if how == "policies":
        policies = draw(
            st.sampled_from(
                [
                    "[1",
                    "{'a': 1}",
                    "5",
                    "[3]",
                    '"x"',
                    '{"nope": "accept"}',
                    '{"all": "explode"}',
                    '{"empty_file": "accept"}',
                    '{"duplicate_item": "accept"}',
                    "{" * 50,
                ]
            )
        )
        return DatasetCase([valid], fields={"policies": policies}, refused_by_request=True)
    name = draw(
        st.sampled_from(
            [
                "../../../etc/passwd.jsonl",
                "x" * 400 + ".jsonl",
                "ümlaut ☃.jsonl",
                ".jsonl",
                "a\\b\\c.jsonl",
                "CON.jsonl",
                "items.jsonl.gz",
                "; rm -rf.jsonl",
                "'\"<>.jsonl",
            ]
        )
    )
    defect = Upload(name, jsonl([{**ITEM, "difficulty": 9}]), "difficulty 9")
    return DatasetCase([defect], defective=defect.name)


def _check_dataset_response(
    response, case: DatasetCase, sent_ids: list[int], before: dict[str, int], *, api: bool
):
    """The request was answered without 5xx: refused with an error naming the problem, or
    accepted as a job (its id in `sent_ids`). Returns the job's id, if any."""
    assert response.status_code < 500, case
    if api and response.status_code == 400:
        body = response.json()
        assert body and all(body.values()), body  # {"files": ["…"], "policies": ["…"], …}
        assert not sent_ids and not changes(before), case
        return None
    if not api and response.status_code == 200:
        errors = response.context["form"].errors
        assert errors, case
        first = next(iter(errors.values()))[0]
        assert escape(first) in response.content.decode()
        assert not sent_ids and not changes(before), case
        return None
    assert not case.refused_by_request, f"{case} was accepted: {response.status_code}"
    assert response.status_code == (202 if api else 302), response.content[:300]
    assert len(sent_ids) == 1
    return sent_ids[0]


def _check_rejected_job(upload_id: int, case: DatasetCase, before: dict[str, int]) -> None:
    upload = dataset_import(upload_id=upload_id)  # what the worker does
    assert upload is not None
    problems = list(upload.problems.all())
    assert upload.status == UploadStatus.REJECTED, (case, upload.status, upload.error, problems)
    assert upload.error == "" and upload.problem_count >= 1
    assert problems and all(p.code in PROBLEM_CLASSES and p.message for p in problems)
    if case.defective and len(case.files) > 1:
        assert any(p.file_name == case.defective[:300] for p in problems), problems
    # a rejected import leaves its job row, its file rows and its problem report, nothing else
    assert changes(before) == {
        DatasetUpload._meta.db_table: 1,
        UploadFile._meta.db_table: len(case.files),
        ImportProblem._meta.db_table: len(problems),
    }, case


@pytest.fixture
def queued(monkeypatch, django_capture_on_commit_callbacks):
    """Captures the import jobs enqueued on commit; returns (ids, context manager)."""
    ids: list[int] = []
    monkeypatch.setattr("annotation.tasks.dataset_import_task.delay", ids.append)
    return ids, lambda: django_capture_on_commit_callbacks(execute=True)


@pytest.mark.slow
def test_the_dataset_upload_page_refuses_every_malformed_file(admin_client, project, queued):
    url = f"/projects/{project.slug}/uploads/new/"
    ids, on_commit = queued
    sent = 0

    @fuzz_settings("dataset page")
    @given(dataset_cases())
    @example(_alone(Upload("deep.jsonl", DEEP_DOCUMENT, "10,000 levels")))
    def upload(case: DatasetCase) -> None:
        nonlocal sent
        sent += 1
        ids.clear()
        before = row_counts()
        form = {"dataset": "Fuzz", "files": [f.file() for f in case.files], "format": case.format}
        with on_commit():
            response = admin_client.post(url, form)
        upload_id = _check_dataset_response(response, case, ids, before, api=False)
        if upload_id is not None:
            _check_rejected_job(upload_id, case, before)
            # the progress panel's last poll, which lists the problems
            panel = admin_client.get(f"/uploads/{upload_id}/", headers={"HX-Request": "true"})
            assert panel.status_code == 286 and b"Rejected: nothing was written" in panel.content

    upload()
    finished("dataset page", sent)


@pytest.mark.slow
def test_the_dataset_upload_api_refuses_every_malformed_file(admin_user, project, queued):
    api = api_client(admin_user)
    ids, on_commit = queued
    sent = 0

    @fuzz_settings("dataset api")
    @given(dataset_api_cases())
    @example(_alone(Upload("deep.jsonl", DEEP_DOCUMENT, "10,000 levels"), "generic-jsonl"))
    def upload(case: DatasetCase) -> None:
        nonlocal sent
        sent += 1
        ids.clear()
        before = row_counts()
        body = {
            "project": project.slug,
            "dataset": "Fuzz",
            "files": [f.file() for f in case.files],
            **({"format": case.format} if case.format else {}),
            **case.fields,
        }
        with on_commit():
            response = api.post("/api/v1/annotation/uploads/", body, format="multipart")
        upload_id = _check_dataset_response(response, case, ids, before, api=True)
        if upload_id is not None:
            _check_rejected_job(upload_id, case, before)
            detail = api.get(f"/api/v1/annotation/uploads/{upload_id}/")
            assert detail.status_code == 200 and detail.json()["status"] == "rejected"
            assert detail.json()["problems"]

    upload()
    finished("dataset api", sent)


# === the rubric import page ===================================================================

RUBRIC = {
    "Skill": "Fuzz skill",
    "Criteria": "Is the answer fuzzy?",
    "Scoring": {str(n): f"Level {n}." for n in range(1, 6)},
}
RUBRIC_BAD = {
    "Skill": [None, "", "  ", 5, [], {}, True, "x" * 101, NUL, SURROGATE],
    "Criteria": [None, "", 5, [], {}, NUL, SURROGATE],
    "Scoring": [
        None,
        [],
        "x",
        5,
        {"1": "a"},
        {str(n): "a" for n in range(0, 5)},
        {str(n): "a" for n in range(1, 7)},
        {**RUBRIC["Scoring"], "5": None},
        {**RUBRIC["Scoring"], "5": ""},
        {**RUBRIC["Scoring"], "5": 5},
        {**RUBRIC["Scoring"], "5": NUL},
        {**RUBRIC["Scoring"], "3": ["a"]},
        {**RUBRIC["Scoring"], "2": SURROGATE},
    ],
}


@st.composite
def rubric_files(draw) -> Upload:
    entries = [RUBRIC, {**RUBRIC, "Skill": "Other fuzz skill"}]
    base = Upload("skills.json", dumps(entries).encode(), "valid")
    broken = Upload(base.name, _break_json(base.data.decode(), "truncated", 99).encode(), "cut")
    n = draw(st.integers(0, 1))

    def with_entry(kind: str, value: Any) -> Upload:
        doc = [dict(e) for e in entries]
        doc[n] = value
        return Upload(base.name, dumps(doc).encode(), kind)

    @st.composite
    def wrong_entry_field(draw) -> Upload:
        key = draw(st.sampled_from(sorted(RUBRIC_BAD)))
        if draw(st.integers(0, 9)) == 0:
            return with_entry(f"{key} missing", {k: v for k, v in RUBRIC.items() if k != key})
        value = draw(st.sampled_from(RUBRIC_BAD[key]))
        return with_entry(f"{key} = {value!r:.40}", {**entries[n], key: value})

    @st.composite
    def deep(draw) -> Upload:
        depth, kind = draw(depths), draw(st.sampled_from(["list", "object"]))
        if draw(st.booleans()):
            return Upload(base.name, nested(depth, kind).encode(), f"nested {depth} levels")
        key = draw(st.sampled_from(sorted(RUBRIC)))
        text = dumps([{**RUBRIC, key: "<deep>"}]).replace('"<deep>"', nested(depth, kind))
        return Upload(base.name, text.encode(), f"{key} nested {depth} levels")

    return draw(
        st.one_of(
            st.sampled_from(BREAKS).map(
                lambda how: Upload(
                    base.name, _break_json(base.data.decode(), how, 77).encode(), how
                )
            ),
            st.sampled_from([{}, [], 5, "text", None, True, {"Skill": "x"}]).map(
                lambda doc: Upload(base.name, dumps(doc).encode(), f"top level {doc!r:.30}")
            ),
            st.sampled_from([5, "text", None, [], [RUBRIC]]).map(
                lambda entry: with_entry(f"entry {entry!r:.30}", entry)
            ),
            st.just(
                Upload(
                    base.name,
                    dumps([*entries, {**RUBRIC, "Skill": "FUZZ SKILL"}]).encode(),
                    "a skill twice",
                )
            ),
            wrong_entry_field(),
            deep(),
            *common_defects(base, broken, utf16_is_wrong=False),
            oversize(base),
            st.just(Upload(base.name, base.data + b" " * (1_000_000 - len(base.data) + 1), "1 MB")),
        )
    )


@pytest.mark.slow
def test_the_rubric_import_page_refuses_every_malformed_file(researcher_client, project):
    url = f"/projects/{project.slug}/rubrics/import/"
    sent = 0

    @fuzz_settings("rubric page")
    @given(rubric_files())
    @example(Upload("skills.json", DEEP_DOCUMENT, "10,000 levels"))
    def upload(file: Upload) -> None:
        nonlocal sent
        sent += 1
        before = row_counts()
        response = researcher_client.post(url, {"file": file.file()})
        assert response.status_code == 200, (file.kind, response.status_code)
        errors = response.context["form"].errors
        assert errors, file.kind
        assert escape(next(iter(errors.values()))[0]) in response.content.decode()
        assert not changes(before), file.kind

    upload()
    finished("rubric page", sent)


# === the judge prompt-file import page ========================================================

PROMPT = {
    "prompt_id": "fuzz",
    "system_prompt": "Be fair.",
    "prompt_template": "{skills}\n{question}\n{response}\n{sample_answer}",
}
PROMPT_2 = {**PROMPT, "prompt_id": 2, "prompt_template": "{skills} {question} {response}"}
PROMPT_BAD = {
    "prompt_id": [None, "", True, [], {}, 1.5, "a b", "x" * 100, "a/b", NUL, 10**80, SURROGATE],
    "system_prompt": [None, 5, [], {}, False, NUL, SURROGATE],
    "prompt_template": [
        None,
        5,
        [],
        "",
        "no placeholders",
        "{skills} {question}",
        "{unknown} {skills}{question}{response}",
        "{",
        "{skills}{question}{response}{",
        NUL + " {skills}{question}{response}",
    ],
    "defaults": ["x", 5, {"a": 5}, {"question": "x"}, {"a": NUL}, {"a": ["x"]}, {"a": SURROGATE}],
    "description": [5, [1], {"a": 1}, True, NUL, SURROGATE],
}


@st.composite
def prompt_files(draw) -> Upload:
    lines = [PROMPT, PROMPT_2]
    base = Upload("prompt.jsonl", jsonl(lines), "valid")
    broken = draw(broken_json_lines(base.name, lines))
    return draw(
        st.one_of(
            st.just(broken),
            wrong_field(base.name, lines, PROMPT_BAD, set(PROMPT)),
            deep_json_lines(base.name, lines, sorted(PROMPT)),
            st.just(Upload(base.name, jsonl([PROMPT, PROMPT]), "a prompt_id twice")),
            *common_defects(base, broken),
        )
    )


@pytest.mark.slow
def test_the_prompt_file_import_page_refuses_every_malformed_file(researcher_client, project):
    url = f"/projects/{project.slug}/judge-templates/import/"
    sent = 0

    @fuzz_settings("template page")
    @given(prompt_files())
    @example(Upload("prompt.jsonl", DEEP_DOCUMENT, "10,000 levels"))
    def upload(file: Upload) -> None:
        nonlocal sent
        sent += 1
        before = row_counts()
        response = researcher_client.post(url, {"file": file.file()})
        assert response.status_code == 200, (file.kind, response.status_code)
        errors = response.context["form"].errors
        assert errors.get("file"), (file.kind, errors)
        assert escape(errors["file"][0]) in response.content.decode()
        assert not changes(before), file.kind

    upload()
    finished("template page", sent)


# === the judge output import API ==============================================================

REVIEWS = [review(501, {"factuality": 4, "readability": "N/A"}), review(502, {"completeness": 3})]
LONG_ROWS = [
    {
        "item": "501",
        "system": "kestrel",
        "rater": "fuzz-judge",
        "rater_kind": "judge",
        "skill": "Factuality",
        "score": 5,
        "rationale": "Right.",
    },
    {
        "item": "503",
        "system": "osprey",
        "rater": "fuzz-judge",
        "rater_kind": "judge",
        "skill": "Logical Correctness",
        "score": "N/A",
        "rationale": "",
    },
]
LONG_CSV = [list(LONG_ROWS[0])] + [[str(v) for v in r.values()] for r in LONG_ROWS]
NAME_BAD = [None, "", [], {}, True, 1.5, "x" * 201, NUL, SURROGATE]
REQUIRED_LONG = ["item", "system", "rater", "rater_kind", "skill", "score"]
REVIEW_BAD = {
    "question_id": [*NAME_BAD, 999],
    "review": [None, 5, [], {}, True, NUL, SURROGATE],
    "score": [
        [],
        "x",
        5,
        None,
        {"factuality": 6},
        {"factuality": "five"},
        {"factuality": 0},
        {"factuality": 4.0},
        {"factuality": True},
        {"factuality": None},
        {"factuality": ""},
        {"no such skill": 3},
        {"factuality": 4, "Factuality": 4},
        {"factuality": [4]},
        {SURROGATE: 4},
    ],
    "target_txt": [5, [], {}, True, "another text", NUL, SURROGATE],
    "total_tokens_step4": [-1, "x", 1.5, True, []],
}
LONG_BAD = {
    "item": [*NAME_BAD, "999"],
    "system": [*NAME_BAD, "no-such-model"],
    "rater": NAME_BAD,
    "rater_kind": [None, "", "robot", [], True, 5],
    "skill": [None, "", [], True, "No such skill", NUL, SURROGATE],
    "score": [None, "", "abc", 6, 0, 4.5, "4.5", True, [], "NaN"],
    "rationale": [5, [], {}, True, NUL, SURROGATE],
}
LONG_CSV_BAD = {
    "item": ["", "x" * 201, "999"],
    "system": ["", "no-such-model"],
    "rater_kind": ["", "robot"],
    "skill": ["", "No such skill"],
    "score": ["", "abc", "6", "0", "4.5", "NaN"],
}


@dataclass
class JudgeCase:
    file: Upload
    fields: dict[str, str]


@st.composite
def judge_cases(draw) -> JudgeCase:
    which = draw(st.sampled_from(["flask-review", "long jsonl", "long csv"]))
    fields = {"judge": "Fuzz judge"} if which == "flask-review" else {}
    if which == "long csv":
        base = Upload("scores.csv", csv_bytes(LONG_CSV), "valid")
        file = draw(
            st.one_of(
                broken_csv(base.name, LONG_CSV, LONG_CSV_BAD, REQUIRED_LONG),
                *common_defects(base, Upload(base.name, b"item,\n", "broken")),
                oversize(base),
                st.just(
                    Upload(base.name, csv_bytes([LONG_CSV[0], LONG_CSV[1], LONG_CSV[1]]), "twice")
                ),
            )
        )
        return JudgeCase(file, fields)
    lines, name, bad, required = {
        "flask-review": (REVIEWS, "kestrel_review.jsonl", REVIEW_BAD, ["question_id", "review"]),
        "long jsonl": (LONG_ROWS, "scores.jsonl", LONG_BAD, REQUIRED_LONG),
    }[which]
    base = Upload(name, jsonl(lines), "valid")
    broken = draw(broken_json_lines(name, lines))
    file = draw(
        st.one_of(
            st.just(broken),
            wrong_field(name, lines, bad, set(required)),
            deep_json_lines(name, lines, required),
            *common_defects(base, broken),
            oversize(base),
        )
    )
    return JudgeCase(file, fields)


def _problems_body(response, what) -> dict:
    assert response.status_code == 400, (what, response.status_code, response.content[:300])
    body = response.json()
    assert body["detail"] and body["code"], body
    if body["code"] == "rejected":
        assert body["problems"] and body["problem_count"] >= 1
        assert all(p["code"] and p["message"] for p in body["problems"])
    return body


def _import_body(import_jobs, client, url, data, what) -> dict:
    """Post a score, preference or judge-output import. A request that cannot run is answered
    400 with its problems; one that can is answered 202 with a job, which the worker's task runs:
    then the job must be rejected, with every problem, and its problems are returned in
    the shape of the 400."""
    response = import_jobs.post(client, url, data, format="multipart")
    if response.status_code == 400:
        return _problems_body(response, what)
    assert response.status_code == 202, (what, response.status_code, response.content[:300])
    import_jobs.run()
    job = client.get(response.json()["url"]).json()
    assert job["status"] == "rejected", (what, job["status"], job["error"])
    assert job["error"] == "" and job["problems"] and job["problem_count"] >= 1
    assert all(p["code"] and p["message"] for p in job["problems"])
    return {"code": "rejected", "problems": job["problems"], "problem_count": job["problem_count"]}


@pytest.mark.slow
def test_the_judge_output_import_api_refuses_every_malformed_file(
    researcher, project, tmp_path, import_jobs
):
    dataset = make_flask_dataset(project, tmp_path)
    api = api_client(researcher)
    url = f"/api/v1/judging/projects/{project.slug}/judge-outputs/import/"
    sent = 0

    @fuzz_settings("judge output api")
    @given(judge_cases())
    @example(JudgeCase(Upload("kestrel_review.jsonl", DEEP_DOCUMENT, "10,000 levels"), {}))
    def upload(case: JudgeCase) -> None:
        nonlocal sent
        sent += 1
        before = row_counts()
        body = {"dataset": dataset.name, "files": [case.file.file()], **case.fields}
        problems = _import_body(import_jobs, api, url, body, case.file.kind)
        if case.file.kind == "over the size limit":
            assert problems["code"] == "too_large"
        assert not changes(before), case.file.kind

    upload()
    finished("judge output api", sent)


# === the long-format score import (page and API) ==============================================

SCORE_ROWS = [
    {
        "item": "q1",
        "system": "model-a",
        "rater": "ann1",
        "rater_kind": "human",
        "skill": "Readability",
        "score": 4,
        "instruction": "Name a colour.",
    },
    {
        "item": "q1",
        "system": "model-a",
        "rater": "gpt-judge",
        "rater_kind": "judge",
        "skill": "Readability",
        "score": "N/A",
        "rationale": "No claim.",
    },
]
SCORE_CSV = [
    ["item", "system", "rater", "rater_kind", "skill", "score"],
    ["q1", "model-a", "ann1", "human", "Readability", "4"],
    ["q2", "model-b", "gpt-judge", "judge", "Readability", "5"],
]
SCORE_BAD = {
    "item": NAME_BAD,
    "system": NAME_BAD,
    "rater": NAME_BAD,
    "rater_kind": [None, "", "robot", [], 5, True],
    "skill": [None, "", [], {}, True, 1.5, "x" * 101, NUL, SURROGATE],
    "score": [
        None,
        "",
        "abc",
        "NaN",
        "inf",
        "-inf",
        "1e999",
        6,
        0,
        4.5,
        True,
        [],
        {},
        "1,5",
        math.inf,
    ],
    "difficulty": [0, 6, "hard", [], {}, True, 2.5],
    "domain": ["Atlantis", 5, {}, [1], True],
    "instruction": [5, [], {}, True, NUL, SURROGATE],
    "response": [5, [], {}, True, NUL, SURROGATE],
    "rationale": [5, [], {}, True, NUL, SURROGATE],
}
SCORE_CSV_BAD = {
    "item": ["", "x" * 201],
    "rater_kind": ["", "robot"],
    "skill": ["", "x" * 101],
    "score": ["", "abc", "NaN", "inf", "1e999", "6", "0", "4.5", "1,5"],
}


@st.composite
def score_files(draw) -> Upload:
    if draw(st.booleans()):
        base = Upload("scores.csv", csv_bytes(SCORE_CSV), "valid")
        return draw(
            st.one_of(
                broken_csv(base.name, SCORE_CSV, SCORE_CSV_BAD, REQUIRED_LONG),
                *common_defects(base, Upload(base.name, b'item,"\n', "broken")),
                oversize(base),
                st.just(
                    Upload(
                        base.name, csv_bytes([SCORE_CSV[0], SCORE_CSV[1], SCORE_CSV[1]]), "twice"
                    )
                ),
            )
        )
    name = draw(st.sampled_from(["scores.jsonl", "scores.ndjson", "scores"]))
    base = Upload(name, jsonl(SCORE_ROWS), "valid")
    broken = draw(broken_json_lines(name, SCORE_ROWS))
    inconsistent = [SCORE_ROWS[0], {**SCORE_ROWS[1], "instruction": "Another instruction."}]
    huge = {**SCORE_ROWS[0], "instruction": "x" * (LINE_LIMIT + 1)}
    return draw(
        st.one_of(
            st.just(broken),
            wrong_field(name, SCORE_ROWS, SCORE_BAD, set(REQUIRED_LONG)),
            deep_json_lines(name, SCORE_ROWS, ["item", "score", "instruction"]),
            st.just(Upload(name, jsonl(inconsistent), "inconsistent instruction")),
            st.just(Upload(name, jsonl([huge]), "a line over the line limit")),
            *common_defects(base, broken),
            oversize(base),
        )
    )


@pytest.mark.slow
def test_the_score_import_page_refuses_every_malformed_file(
    researcher_client, project, import_jobs
):
    url = f"/projects/{project.slug}/analytics/scores/import/"
    sent = 0

    @fuzz_settings("score page")
    @given(score_files())
    @example(Upload("scores.jsonl", DEEP_DOCUMENT, "10,000 levels"))
    def upload(file: Upload) -> None:
        nonlocal sent
        sent += 1
        before = row_counts()
        response = import_jobs.post(researcher_client, url, {"files": [file.file()]})
        if response.status_code == 400:  # refused by the form, before any job
            html = response.content.decode()
            errors = response.context["form"].errors
            assert errors, file.kind
            if file.kind == "over the size limit":
                assert "the limit is" in escape(errors["files"][0])
            assert escape(next(iter(errors.values()))[0]) in html
        else:
            assert response.status_code == 302, (file.kind, response.status_code)
            import_jobs.run()
            # the progress panel's last poll, which lists the problems
            panel = researcher_client.get(response["Location"], headers={"HX-Request": "true"})
            html = panel.content.decode()
            assert panel.status_code == 286 and 'data-status="rejected"' in html, file.kind
            assert "nothing was written" in html and 'id="import-problems"' in html
        assert not changes(before), file.kind

    upload()
    finished("score page", sent)


@pytest.mark.slow
def test_the_score_import_api_refuses_every_malformed_file(researcher, project, import_jobs):
    api = api_client(researcher)
    url = f"/api/v1/projects/{project.slug}/scores/import/"
    sent = 0

    @fuzz_settings("score api")
    @given(score_files())
    @example(Upload("scores.jsonl", DEEP_DOCUMENT, "10,000 levels"))
    def upload(file: Upload) -> None:
        nonlocal sent
        sent += 1
        before = row_counts()
        body = _import_body(import_jobs, api, url, {"files": [file.file()]}, file.kind)
        if file.kind == "over the size limit":
            assert body["code"] == "too_large"
        assert not changes(before), file.kind

    upload()
    finished("score api", sent)


# === the preference-label import (page and API) ===============================================

PREF_ROWS = [
    {
        "dataset": "D",
        "item": "i0",
        "model_a": "m1",
        "model_b": "m2",
        "rater": "ext-j",
        "choice": "a",
    },
    {
        "dataset": "D",
        "item": "i1",
        "model_a": "m2",
        "model_b": "m1",
        "rater": "ext-j",
        "skill": "Factuality",
        "choice": "tie",
        "strength": 2,
        "time_on_task_ms": 1500,
    },
]
PREF_CSV = [
    ["dataset", "item", "model_a", "model_b", "rater", "skill", "choice", "strength"],
    ["D", "i0", "m1", "m2", "ext", "Overall", "a", "1"],
    ["D", "i1", "m2", "m1", "ext", "Factuality", "both_bad", ""],
]
REQUIRED_PREF = ["item", "model_a", "model_b", "rater", "choice"]
PREF_BAD = {
    "dataset": [None, "", [], {}, True, 1.5, "Elsewhere", NUL, SURROGATE],
    "item": NAME_BAD,
    "model_a": NAME_BAD,
    "model_b": [*NAME_BAD, "m9"],
    "rater": NAME_BAD,
    "skill": [[], {}, True, 1.5, "Nonsense", NUL, SURROGATE],
    "choice": [None, "", "maybe", 5, [], {}, True, NUL],
    "strength": ["3", 0, 3, "x", [], {}, True, 1.5],
    "shown_order": ["sideways", 5, [], True, NUL],
    "time_on_task_ms": [-1, "soon", [], {}, True, "1e400", 1e300, NUL],
    "rationale": [5.5, [], {}, True, NUL, SURROGATE],
}
PREF_CSV_BAD = {
    "item": ["", "x" * 201],
    "model_b": ["", "m9"],
    "rater": ["", "x" * 201],
    "skill": ["Nonsense"],
    "choice": ["", "maybe", "A+"],
    "strength": ["3", "0", "x", "1.5"],
}


@st.composite
def preference_files(draw) -> Upload:
    if draw(st.booleans()):
        base = Upload("prefs.csv", csv_bytes(PREF_CSV), "valid")
        twice = Upload(base.name, csv_bytes([*PREF_CSV, PREF_CSV[1]]), "the same label twice")
        return draw(
            st.one_of(
                broken_csv(base.name, PREF_CSV, PREF_CSV_BAD, REQUIRED_PREF),
                *common_defects(base, Upload(base.name, b'item,"\n', "broken")),
                oversize(base),
                st.just(twice),
            )
        )
    name = draw(st.sampled_from(["prefs.jsonl", "prefs.ndjson"]))
    base = Upload(name, jsonl(PREF_ROWS), "valid")
    broken = draw(broken_json_lines(name, PREF_ROWS))
    huge = {**PREF_ROWS[0], "rationale": "x" * (LINE_LIMIT + 1)}
    return draw(
        st.one_of(
            st.just(broken),
            wrong_field(name, PREF_ROWS, PREF_BAD, set(REQUIRED_PREF)),
            deep_json_lines(name, PREF_ROWS, ["item", "rater", "choice"]),
            st.just(Upload(name, jsonl([huge]), "a line over the line limit")),
            st.just(Upload(name, jsonl([PREF_ROWS[0], PREF_ROWS[0]]), "the same label twice")),
            st.just(Upload(name, jsonl([{**PREF_ROWS[0], "model_b": "m1"}]), "the same system")),
            *common_defects(base, broken),
            oversize(base),
        )
    )


@pytest.fixture
def pref_dataset(project, tmp_path):
    from tests.annotation.test_assignments import make_dataset

    return make_dataset(project, tmp_path, items=2, models=("m1", "m2"))


@pytest.mark.slow
def test_the_preference_import_page_refuses_every_malformed_file(
    researcher_client, project, pref_dataset, import_jobs
):
    url = f"/projects/{project.slug}/analytics/preferences/import/"
    sent = 0

    @fuzz_settings("preference page")
    @given(preference_files())
    @example(Upload("prefs.jsonl", DEEP_DOCUMENT, "10,000 levels"))
    def upload(file: Upload) -> None:
        nonlocal sent
        sent += 1
        before = row_counts()
        response = import_jobs.post(researcher_client, url, {"file": file.file()})
        if response.status_code == 400:  # refused by the form, before any job
            html = response.content.decode()
            errors = response.context["form"].errors
            assert errors, file.kind
            if file.kind == "over the size limit":
                assert "the limit is" in escape(errors["file"][0])
            assert escape(next(iter(errors.values()))[0]) in html
        else:
            assert response.status_code == 302, (file.kind, response.status_code)
            import_jobs.run()
            panel = researcher_client.get(response["Location"], headers={"HX-Request": "true"})
            html = panel.content.decode()
            assert panel.status_code == 286 and 'data-status="rejected"' in html, file.kind
            assert "nothing was written" in html and 'id="import-problems"' in html
        assert not changes(before), file.kind

    upload()
    finished("preference page", sent)


@pytest.mark.slow
def test_the_preference_import_api_refuses_every_malformed_file(
    researcher, project, pref_dataset, import_jobs
):
    api = api_client(researcher)
    url = f"/api/v1/projects/{project.slug}/preferences/import/"
    sent = 0

    @fuzz_settings("preference api")
    @given(preference_files())
    @example(Upload("prefs.jsonl", DEEP_DOCUMENT, "10,000 levels"))
    def upload(file: Upload) -> None:
        nonlocal sent
        sent += 1
        before = row_counts()
        body = _import_body(import_jobs, api, url, {"file": file.file()}, file.kind)
        if file.kind == "over the size limit":
            assert body["code"] == "too_large"
        assert not changes(before), file.kind

    upload()
    finished("preference api", sent)


def test_the_valid_bases_of_the_malformed_preference_files_are_accepted(
    researcher, project, pref_dataset, import_jobs
):
    api = api_client(researcher)
    for file in (Upload("p.csv", csv_bytes(PREF_CSV), ""), Upload("p.jsonl", jsonl(PREF_ROWS), "")):
        response = import_jobs.post(
            api,
            f"/api/v1/projects/{project.slug}/preferences/import/",
            {"file": file.file()},
            format="multipart",
        )
        assert response.status_code == 202, response.json()
        import_jobs.run()
        job = api.get(response.json()["url"]).json()
        assert job["status"] == "succeeded" and job["batch"]["labels_created"] == 2, job


# === the unmutated inputs are accepted (so the defects are what the endpoints refuse) =========


def test_the_valid_bases_of_the_malformed_files_are_accepted(
    admin_client, researcher, researcher_client, project, queued, tmp_path, import_jobs
):
    ids, on_commit = queued
    for files in (
        [Upload("items.jsonl", jsonl([ITEM, ITEM_2]), "")],
        [EVAL_FILE],
        [Upload("items.csv", csv_bytes(ITEM_CSV), "")],
    ):
        ids.clear()
        with on_commit():
            response = admin_client.post(
                f"/projects/{project.slug}/uploads/new/",
                {"dataset": f"Valid {files[0].name}", "files": [f.file() for f in files]},
            )
        assert response.status_code == 302
        assert dataset_import(upload_id=ids[0]).status == UploadStatus.SUCCEEDED
    output = [EVAL_FILE, Upload("model-a.jsonl", jsonl([OUTPUT]), "")]
    ids.clear()
    with on_commit():
        admin_client.post(
            f"/projects/{project.slug}/uploads/new/",
            {"dataset": "Valid outputs", "files": [f.file() for f in output]},
        )
    assert dataset_import(upload_id=ids[0]).status == UploadStatus.SUCCEEDED
    rubric = Upload("skills.json", dumps([RUBRIC]).encode(), "")
    assert (
        researcher_client.post(
            f"/projects/{project.slug}/rubrics/import/", {"file": rubric.file()}
        ).status_code
        == 302
    )
    prompts = Upload("prompt.jsonl", jsonl([PROMPT, PROMPT_2]), "")
    assert (
        researcher_client.post(
            f"/projects/{project.slug}/judge-templates/import/", {"file": prompts.file()}
        ).status_code
        == 302
    )
    dataset = make_flask_dataset(project, tmp_path)
    api = api_client(researcher)
    for file, fields in (
        (Upload("kestrel_review.jsonl", jsonl(REVIEWS), ""), {"judge": "Valid judge"}),
        (Upload("scores.jsonl", jsonl(LONG_ROWS), ""), {}),
    ):
        response = import_jobs.post(
            api,
            f"/api/v1/judging/projects/{project.slug}/judge-outputs/import/",
            {"dataset": dataset.name, "files": [file.file()], **fields},
            format="multipart",
        )
        assert response.status_code == 202, response.json()
        import_jobs.run()
        job = api.get(response.json()["url"]).json()
        assert job["status"] == "succeeded" and job["result"]["created"], job
    for file in (Upload("s.csv", csv_bytes(SCORE_CSV), ""), Upload("s", jsonl(SCORE_ROWS), "")):
        response = import_jobs.post(
            api,
            f"/api/v1/projects/{project.slug}/scores/import/",
            {"files": [file.file()]},
            format="multipart",
        )
        assert response.status_code == 202, response.json()
        import_jobs.run()
        job = api.get(response.json()["url"]).json()
        assert job["status"] == "succeeded" and not job["result"]["already_imported"], job


# === regressions: the crashes the fuzzing found, each as a plain case ========================


def _api_upload(api, project, queued, *files: Upload, fmt: str = ""):
    ids, on_commit = queued
    ids.clear()
    body = {"project": project.slug, "dataset": "Regression", "files": [f.file() for f in files]}
    if fmt:
        body["format"] = fmt
    with on_commit():
        response = api.post("/api/v1/annotation/uploads/", body, format="multipart")
    assert response.status_code == 202, response.content
    return dataset_import(upload_id=ids[0])


@pytest.mark.parametrize(
    "row, field, message",
    [
        ({**ITEM, "id": NUL}, "id", "a NUL character (\\u0000)"),
        ({**ITEM, "metadata": {"note": NUL}}, "metadata.note", "a NUL character"),
        ({**ITEM, "checklist": {"Factuality": [NUL]}}, "checklist.Factuality[1]", "a NUL"),
        (
            {**ITEM, "responses": [{"model": "m", "text": "x", "metadata": {NUL: 1}}]},
            "responses[1].metadata.a\\u0000b",
            "a NUL character",
        ),
        ({**ITEM, "instruction": SURROGATE}, "instruction", "half a surrogate pair (\\ud800)"),
        ({**ITEM, "metadata": {SURROGATE: 1}}, "metadata.a\\ud800b", "half a surrogate pair"),
    ],
    ids=["NUL id", "NUL in metadata", "NUL in a checklist", "NUL in a key", "surrogate", "key"],
)
def test_an_unstorable_character_in_a_dataset_line_rejects_the_upload_instead_of_failing_it(
    admin_user, project, queued, row, field, message
):
    # was: the job failed with DataError (PostgreSQL holds NUL in neither text nor jsonb) or
    # UnicodeEncodeError (half a surrogate pair is not UTF-8)
    upload = _api_upload(
        api_client(admin_user), project, queued, Upload("i.jsonl", jsonl([row]), "")
    )
    assert upload.status == UploadStatus.REJECTED and upload.error == ""
    (problem,) = upload.problems.all()
    assert (problem.code, problem.line, problem.field) == ("invalid_type", 1, field)
    assert problem.message.startswith(message) and "cannot be stored" in problem.message


@pytest.mark.parametrize("row, col", [(1, 5), (0, 6)], ids=["model cell", "header cell"])
def test_a_nul_byte_in_a_dataset_csv_rejects_the_upload(admin_user, project, queued, row, col):
    # was: in the model column, the job failed with DataError; in a header cell, that column
    # (here: the responses) was dropped without a word
    rows = [list(r) for r in ITEM_CSV]
    rows[row][col] += "\x00"
    upload = _api_upload(
        api_client(admin_user), project, queued, Upload("i.csv", csv_bytes(rows), "")
    )
    assert upload.status == UploadStatus.REJECTED and upload.error == ""
    problem = upload.problems.get()
    assert (problem.code, problem.line) == ("invalid_csv", row + 1)
    assert "NUL byte" in problem.message


@pytest.mark.parametrize(
    "first, message",
    [
        (nested(4000, "list").encode(), "cannot tell the format; name it"),
        (DEEP_DOCUMENT, f"cannot tell the format (its first line is longer than {LINE_LIMIT:,}"),
    ],
    ids=["4,000 levels", "10,000 levels, over the line limit"],
)
def test_a_dataset_file_with_a_deeply_nested_first_line_is_rejected_not_failed(
    admin_user, project, queued, first, message
):
    # was: format detection let RecursionError through and the job failed; a first line
    # over the line limit was reported as "the file holds no rows"
    deep = Upload("deep.jsonl", first + b"\n" + jsonl([ITEM]), "")
    upload = _api_upload(api_client(admin_user), project, queued, deep)
    assert upload.status == UploadStatus.REJECTED and upload.error == ""
    problem = upload.problems.get()
    assert problem.code == "unknown_format" and problem.message.startswith(message)


def test_metadata_nested_deeper_than_the_limit_is_rejected(project, tmp_path):
    # was: metadata nested ~900 levels imported (by the command, or a worker, whose stack is
    # shallow), after which the dataset and item pages failed with RecursionError reading it
    # back. Any depth past the limit is refused now; 150 decodes on every stack.
    path = tmp_path / "deep.jsonl"
    path.write_text(
        dumps({**ITEM, "metadata": "<deep>"}).replace('"<deep>"', nested(150, "object"))
    )
    upload = dataset_upload_create(
        project=project,
        dataset_name="Deep",
        source=UploadSource.CLI,
        files=[(FileSpec("deep.jsonl"), str(path))],
    )
    upload = dataset_import(upload_id=upload.pk)
    assert upload.status == UploadStatus.REJECTED
    problem = upload.problems.get()
    assert problem.code == "invalid_json" and "deeper than 100 levels" in problem.message


@pytest.mark.parametrize(
    "data, message",
    [
        (DEEP_DOCUMENT, "nested too deeply"),
        (dumps([{**RUBRIC, "Criteria": NUL}]).encode(), "NUL character"),
        (dumps([{**RUBRIC, "Scoring": {**RUBRIC["Scoring"], "3": NUL}}]).encode(), "NUL character"),
        (dumps([{**RUBRIC, "Skill": SURROGATE}]).encode(), "half a surrogate pair (\\ud800)"),
        (  # json.loads decodes bytes with "surrogatepass"
            dumps([RUBRIC]).replace("Level 5.", "Level \udcff").encode("utf-8", "surrogatepass"),
            "half a surrogate pair (\\udcff)",
        ),
        (gzip.compress(dumps([RUBRIC]).encode()), "archives are not accepted"),
    ],
    ids=[
        "10,000 levels",
        "NUL in the criteria",
        "NUL in an anchor",
        "surrogate escape",
        "surrogate bytes",
        "gzip",
    ],
)
def test_rubric_files_that_crashed_the_import_page_are_refused_on_the_form(
    researcher_client, project, data, message
):
    # was: 500 (RecursionError; DataError); a gzip file was "not valid JSON"
    before = row_counts()
    response = researcher_client.post(
        f"/projects/{project.slug}/rubrics/import/", {"file": Upload("s.json", data, "").file()}
    )
    assert response.status_code == 200
    assert message in response.context["form"].errors["file"][0]
    assert not changes(before)


def test_a_rubric_file_over_the_upload_limit_is_refused(researcher_client, project):
    # was: read into memory whole, whatever its size
    data = dumps([RUBRIC]).encode() + b" " * UPLOAD_LIMIT
    response = researcher_client.post(
        f"/projects/{project.slug}/rubrics/import/", {"file": Upload("s.json", data, "").file()}
    )
    assert response.status_code == 200
    assert f"a rubric file may have {UPLOAD_LIMIT:,}" in response.context["form"].errors["file"][0]


@pytest.mark.parametrize(
    "line, message",
    [
        (DEEP_DOCUMENT.decode(), "nested too deeply"),
        (dumps({**PROMPT, "prompt_id": "a b"}), "prompt_id must be 1-69 letters"),
        (dumps({**PROMPT, "prompt_id": "x" * 70}), "prompt_id must be 1-69 letters"),
        (dumps({**PROMPT, "system_prompt": NUL}), "NUL character"),
        (dumps({**PROMPT, "description": NUL}), "NUL character"),
        (dumps({**PROMPT, "system_prompt": SURROGATE}), "half a surrogate pair"),
    ],
    ids=[
        "10,000 levels",
        "prompt_id with a space",
        "prompt_id of 70",
        "NUL",
        "NUL in the description",
        "surrogate",
    ],
)
def test_prompt_files_that_crashed_the_import_page_are_refused_on_the_form(
    researcher_client, project, line, message
):
    # was: 500 (RecursionError; the template key's ValidationError; DataError)
    before = row_counts()
    response = researcher_client.post(
        f"/projects/{project.slug}/judge-templates/import/",
        {"file": Upload("prompt.jsonl", line.encode(), "").file()},
    )
    assert response.status_code == 200
    (error,) = response.context["form"].errors["file"]
    assert error.startswith("line 1: ") and message in error
    assert not changes(before)


def test_a_prompt_id_of_the_longest_length_still_imports(researcher_client, project):
    line = dumps({**PROMPT, "prompt_id": "x" * 69})
    response = researcher_client.post(
        f"/projects/{project.slug}/judge-templates/import/",
        {"file": Upload("prompt.jsonl", line.encode(), "").file()},
    )
    assert response.status_code == 302


JUDGE_CSV_NUL = [list(r) for r in LONG_CSV]
JUDGE_CSV_NUL[1][6] = "Right.\x00"


@pytest.mark.parametrize(
    "name, data, fields, field",
    [
        ("kestrel_review.jsonl", jsonl([{**REVIEWS[0], "review": NUL}]), {"judge": "J"}, "review"),
        (
            "k_review.jsonl",
            jsonl([{**REVIEWS[0], "question_id": NUL}]),
            {"judge": "J"},
            "question_id",
        ),
        ("scores.jsonl", jsonl([{**LONG_ROWS[0], "rater": NUL}]), {}, "rater"),
        ("scores.jsonl", jsonl([{**LONG_ROWS[0], "rationale": NUL}]), {}, "rationale"),
        ("scores.csv", csv_bytes(JUDGE_CSV_NUL), {}, ""),
        ("k_review.jsonl", jsonl([{**REVIEWS[0], "review": SURROGATE}]), {"judge": "J"}, "review"),
        (
            "k_review.jsonl",
            jsonl([{**REVIEWS[0], "score": {SURROGATE: 4}}]),
            {"judge": "J"},
            "score.a\\ud800b",
        ),
    ],
    ids=[
        "review",
        "question_id",
        "rater",
        "rationale",
        "csv rationale",
        "surrogate",
        "surrogate in a skill",
    ],
)
def test_judge_outputs_with_an_unstorable_character_are_refused_not_a_500(
    researcher, project, tmp_path, name, data, fields, field, import_jobs
):
    # was: 500 (PostgreSQL takes no NUL, not even in a lookup; half a surrogate pair is not
    # UTF-8, and one in a skill name broke the JSON answer listing the problems)
    dataset = make_flask_dataset(project, tmp_path)
    before = row_counts()
    body = _import_body(
        import_jobs,
        api_client(researcher),
        f"/api/v1/judging/projects/{project.slug}/judge-outputs/import/",
        {"dataset": dataset.name, "files": [Upload(name, data, "").file()], **fields},
        name,
    )
    assert [(p["field"], p["code"]) for p in body["problems"]] == [
        (field, "invalid_csv" if name.endswith(".csv") else "invalid_type")
    ]
    assert not changes(before)


def test_a_judge_output_file_nested_10000_levels_is_refused_not_a_500(
    researcher, project, tmp_path, import_jobs
):
    # was: 500: format detection let RecursionError through
    dataset = make_flask_dataset(project, tmp_path)
    body = _import_body(
        import_jobs,
        api_client(researcher),
        f"/api/v1/judging/projects/{project.slug}/judge-outputs/import/",
        {"dataset": dataset.name, "files": [Upload("deep.jsonl", DEEP_DOCUMENT, "").file()]},
        "deep",
    )
    assert [p["code"] for p in body["problems"]] == ["unknown_format"]


def test_an_unbalanced_quote_in_a_judge_output_csv_is_refused_not_read_on(
    researcher, project, tmp_path, import_jobs
):
    # was: imported, the rows after the quote read as one long rationale of the first row
    dataset = make_flask_dataset(project, tmp_path)
    data = csv_bytes(LONG_CSV).replace(b",Right.", b',"Right.')
    before = row_counts()
    body = _import_body(
        import_jobs,
        api_client(researcher),
        f"/api/v1/judging/projects/{project.slug}/judge-outputs/import/",
        {"dataset": dataset.name, "files": [Upload("scores.csv", data, "").file()]},
        "quote",
    )
    assert [p["code"] for p in body["problems"]] == ["invalid_csv"]
    assert not changes(before)


def test_archives_are_refused_with_a_message_that_says_so(
    admin_user, researcher, project, queued, tmp_path, import_jobs
):
    # was: "not valid JSON", "cannot tell the format" or a problem for every line
    dataset = make_flask_dataset(project, tmp_path)
    archived = gzip.compress(jsonl([ITEM]))
    upload = _api_upload(
        api_client(admin_user),
        project,
        queued,
        Upload("i.jsonl", archived, ""),
        fmt="generic-jsonl",
    )
    assert [p.message for p in upload.problems.all()] == [
        "the file is gzip-compressed; archives are not accepted: upload the uncompressed file"
    ]
    api = api_client(researcher)
    for url, body in (
        (f"/api/v1/projects/{project.slug}/scores/import/", {}),
        (
            f"/api/v1/judging/projects/{project.slug}/judge-outputs/import/",
            {"dataset": dataset.name},
        ),
    ):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("scores.csv", csv_bytes(SCORE_CSV))
        files = [Upload("scores.jsonl", buffer.getvalue(), "").file()]
        (problem,) = _import_body(import_jobs, api, url, {"files": files, **body}, url)["problems"]
        assert problem["code"] == "unknown_format" and "a zip archive" in problem["message"]


def test_the_score_import_honours_the_line_limit_setting(researcher, project, import_jobs):
    # was: the score parser kept its own 4 MiB, whatever FLASKWEB_MAX_LINE_BYTES said
    line = jsonl([{**SCORE_ROWS[0], "instruction": "x" * LINE_LIMIT}])
    body = _import_body(
        import_jobs,
        api_client(researcher),
        f"/api/v1/projects/{project.slug}/scores/import/",
        {"files": [Upload("s.jsonl", line, "").file()]},
        "long",
    )
    assert [p["code"] for p in body["problems"]] == ["line_too_long"]


def test_the_prompt_file_import_page_refuses_files_over_a_million_bytes(
    researcher_client, project, settings
):
    settings.FLASKWEB_MAX_UPLOAD_BYTES = 10**9  # the page's own cap is the smaller one here
    data = jsonl([PROMPT]) + b"\n" * 1_000_000
    response = researcher_client.post(
        f"/projects/{project.slug}/judge-templates/import/",
        {"file": Upload("prompt.jsonl", data, "").file()},
    )
    assert response.status_code == 200
    assert "larger than 1,000,000 bytes" in response.context["form"].errors["file"][0]


@pytest.mark.parametrize(
    "url, field",
    [
        ("/projects/{slug}/uploads/new/", "files"),
        ("/projects/{slug}/rubrics/import/", "file"),
        ("/projects/{slug}/judge-templates/import/", "file"),
        ("/projects/{slug}/analytics/scores/import/", "files"),
    ],
)
def test_the_upload_pages_answer_too_many_files_with_400(admin_client, project, url, field):
    files = [SimpleUploadedFile(f"f{n}.jsonl", b"{}") for n in range(101)]
    before = row_counts()
    response = admin_client.post(url.format(slug=project.slug), {field: files})
    assert response.status_code == 400  # DATA_UPLOAD_MAX_NUMBER_FILES
    assert not changes(before)


@pytest.mark.parametrize(
    "field, value",
    [("instruction", SURROGATE), ("response", SURROGATE), ("rationale", SURROGATE)],
)
def test_scores_with_an_unstorable_character_are_refused_not_a_500(
    researcher, project, field, value, import_jobs
):
    # was: 500 (UnicodeEncodeError writing half a surrogate pair)
    line = jsonl([{**SCORE_ROWS[0], field: value}])
    before = row_counts()
    (problem,) = _import_body(
        import_jobs,
        api_client(researcher),
        f"/api/v1/projects/{project.slug}/scores/import/",
        {"files": [Upload("s.jsonl", line, "").file()]},
        field,
    )["problems"]
    assert (problem["field"], problem["code"]) == (field, "invalid_type")
    assert not changes(before)


@pytest.mark.parametrize("api", ["dataset", "scores", "judge outputs"])
@pytest.mark.parametrize("excess", ["too many files", "fields over the memory limit"])
def test_the_import_apis_answer_400_to_requests_over_djangos_limits(
    admin_user, project, settings, api, excess
):
    url = {
        "dataset": "/api/v1/annotation/uploads/",
        "scores": f"/api/v1/projects/{project.slug}/scores/import/",
        "judge outputs": f"/api/v1/judging/projects/{project.slug}/judge-outputs/import/",
    }[api]
    body = {"project": project.slug, "dataset": "Birds"}
    if excess == "too many files":
        body["files"] = [SimpleUploadedFile(f"f{n}.jsonl", b"{}") for n in range(101)]
    else:
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
        body["files"] = [SimpleUploadedFile("f.jsonl", b"{}")]
        body["model"] = body["judge"] = body["scale"] = "x" * 2048
    # was: a JSON 500 (flaskweb/api_errors.py; fixed there meanwhile)
    client = api_client(admin_user, raise_request_exception=False)
    before = row_counts()
    response = client.post(url, body, format="multipart")
    assert not changes(before)
    assert response.status_code == 400, response.json()
    assert response.json()["detail"]


# --- to be fixed outside the parsers and services ---------------------------------------------


def test_the_dataset_upload_api_refuses_policies_nested_10000_levels(admin_user, project):
    client = api_client(admin_user, raise_request_exception=False)
    response = client.post(
        "/api/v1/annotation/uploads/",
        {
            "project": project.slug,
            "dataset": "Fuzz",
            "files": [Upload("i.jsonl", jsonl([ITEM]), "").file()],
            "policies": DEEP_DOCUMENT.decode(),
        },
        format="multipart",
    )
    assert not DatasetUpload.objects.exists()
    assert response.status_code == 400, response.json()


def test_the_prompt_file_import_page_honours_the_upload_limit(researcher_client, project):
    data = jsonl([PROMPT]) + b"\n" * UPLOAD_LIMIT
    before = row_counts()
    response = researcher_client.post(
        f"/projects/{project.slug}/judge-templates/import/",
        {"file": Upload("prompt.jsonl", data, "").file()},
    )
    assert not changes(before)
    assert response.status_code == 200


# === the count ================================================================================


def _fuzzed_endpoints() -> Counter[str]:
    """How many tests of this module fuzz each endpoint: a test whose own body (not a branch
    or a loop of it) calls a `@fuzz_settings(endpoint)` function, then `finished(endpoint, …)`."""
    found: Counter[str] = Counter()
    for test in ast.parse(Path(__file__).read_text()).body:
        if not (isinstance(test, ast.FunctionDef) and test.name.startswith("test_")):
            continue
        settings = {  # the fuzz functions defined in the test: name -> endpoint
            inner.name: decorator.args[0].value
            for inner in test.body
            if isinstance(inner, ast.FunctionDef)
            for decorator in inner.decorator_list
            if isinstance(decorator, ast.Call)
            and isinstance(decorator.func, ast.Name)
            and decorator.func.id == "fuzz_settings"
            and isinstance(decorator.args[0], ast.Constant)
        }
        ran: set[str] = set()  # the endpoints whose fuzz function the test has called so far
        for statement in test.body:
            call = statement.value if isinstance(statement, ast.Expr) else None
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
                continue
            if call.func.id in settings and not call.args:
                ran.add(settings[call.func.id])
            elif call.func.id == "finished" and isinstance(call.args[0], ast.Constant):
                found[call.args[0].value] += call.args[0].value in ran
    return +found


def test_every_run_sends_at_least_a_thousand_malformed_files():
    # Each fuzz test fails if it sent fewer files than its endpoint's minimum (finished()),
    # in whichever process runs it: so the minimums add up to the thousand, and every
    # endpoint has one such test.
    assert sum(minimum for _, minimum in EXAMPLES.values()) >= TOTAL_MINIMUM, EXAMPLES
    assert dict(_fuzzed_endpoints()) == dict.fromkeys(EXAMPLES, 1)
