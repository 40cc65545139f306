"""annotation.parsers: format detection, cleaning, and every per-row problem class (no DB)."""

from __future__ import annotations

import io
import json

import pytest

from annotation import catalogue_text
from annotation.parsers import (
    DIFFICULTY_NAMES,
    PROBLEM_CLASSES,
    Catalogue,
    ItemRow,
    Problem,
    ResponseRow,
    detect_format,
    iter_lines,
    model_name_from_filename,
    parse_file,
)

CATALOGUE = Catalogue.of(
    [s.name for s in catalogue_text.SKILLS], [name for _, name, _ in catalogue_text.DOMAINS]
)
SKILLS3 = ["Readability", "Logical Correctness", "Conciseness"]

# Problem classes only the importer's set-level SQL checks can find.
SET_LEVEL_CODES = {
    "duplicate_item",
    "duplicate_response",
    "unknown_item",
    "changed_item",
    "changed_response",
    "lookalike_name",
}


def jsonl(*rows: dict | bytes | str) -> bytes:
    out = []
    for row in rows:
        if isinstance(row, bytes):
            out.append(row)
        elif isinstance(row, str):
            out.append(row.encode())
        else:
            out.append(json.dumps(row).encode())
    return b"\n".join(out) + b"\n"


def parse(data: bytes, *, fmt: str, name: str = "f.jsonl", **kwargs) -> list:
    return list(
        parse_file(io.BytesIO(data), file_name=name, fmt=fmt, catalogue=CATALOGUE, **kwargs)
    )


def problems_of(out: list) -> list[Problem]:
    """Every problem: the standalone ones and those attached to (cleaned) rows."""
    found: list[Problem] = []
    for entry in out:
        if isinstance(entry, Problem):
            found.append(entry)
        else:
            found.extend(entry.problems)
    return found


def codes(out: list) -> list[tuple[int | None, str, str]]:
    return [(p.line, p.field, p.code) for p in problems_of(out)]


def items_of(out: list) -> list[ItemRow]:
    return [r for r in out if isinstance(r, ItemRow)]


def responses_of(out: list) -> list[ResponseRow]:
    return [r for r in out if isinstance(r, ResponseRow)]


def eval_row(**overrides) -> dict:
    row = {
        "idx": 1,
        "instruction": "Shorten this sentence.",
        "answer": "Short.",
        "task": "Self-instruct",
        "skill": SKILLS3,
        "domain": ["Humanities"],
        "difficulty": "formal education knowledge",
    }
    row.update(overrides)
    return {k: v for k, v in row.items() if v is not ...}


def generic_item(**overrides) -> dict:
    row = {"id": "a1", "instruction": "Explain recursion.", "skills": SKILLS3}
    row.update(overrides)
    return {k: v for k, v in row.items() if v is not ...}


CSV_HEADER = "id,instruction,reference,skills,domains,difficulty,task,checklist,model,response"


def csv_bytes(*lines: str, header: str = CSV_HEADER) -> bytes:
    return ("\n".join([header, *lines]) + "\n").encode()


# --- format detection ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "head", "expected"),
    [
        ("eval.jsonl", jsonl(eval_row()), "flask-eval"),
        ("eval.jsonl", jsonl({"idx": 1, "instruction": "q", "answer": "a"}), "flask-eval"),
        ("gpt4.jsonl", jsonl({"question_id": 1, "text": "hi", "model_id": "x"}), "flask-output"),
        ("items.jsonl", jsonl({"id": "a", "instruction": "q"}), "generic-jsonl"),
        ("items.jsonl", jsonl({"idx": 1, "instruction": "q"}), "generic-jsonl"),
        ("answers.jsonl", jsonl({"item": "a", "model": "m", "text": "t"}), "generic-jsonl"),
        ("data.csv", b"anything at all", "generic-csv"),
        ("DATA.TSV", b'{"idx": 1, "instruction": "q", "skill": []}', "generic-csv"),
        ("x.jsonl", jsonl({"foo": 1}), None),
        ("x.jsonl", jsonl({"item": "a", "text": "t"}), None),
        ("x.jsonl", b"[1, 2, 3]\n", None),
        ("x.jsonl", b"id,instruction\n1,q\n", None),
        ("x.jsonl", b"", None),
        ("x.txt", b"   \n\n", None),
    ],
)
def test_it_detects_the_format_from_the_name_and_the_first_record(name, head, expected):
    assert detect_format(name, head) == expected


def test_it_detects_the_format_past_a_bom_and_leading_blank_lines():
    head = b"\n  \n\xef\xbb\xbf" + jsonl({"question_id": 7, "text": "t"})

    assert detect_format("m.jsonl", head) == "flask-output"
    assert detect_format("m.jsonl", b"\xef\xbb\xbf" + jsonl(eval_row())) == "flask-eval"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpt4.jsonl", "gpt4"),
        ("model_outputs/llama2_chat_70b.jsonl", "llama2_chat_70b"),
        ("/abs/path/claude_v1.jsonl", "claude_v1"),
        ("no_suffix", "no_suffix"),
    ],
)
def test_it_names_the_model_after_the_file_stem(name, expected):
    assert model_name_from_filename(name) == expected


def test_it_takes_a_flask_output_model_name_from_the_file_name_unless_given():
    data = jsonl({"question_id": 3, "text": "Paris."})

    from_name = parse(data, fmt="flask-output", name="model_outputs/bard.jsonl")
    explicit = parse(data, fmt="flask-output", name="bard.jsonl", model_name="Bard 2023")

    assert [r.model for r in responses_of(from_name)] == ["bard"]
    assert [r.model for r in responses_of(explicit)] == ["Bard 2023"]


# --- happy paths -----------------------------------------------------------------------------


def test_it_parses_a_flask_evaluation_row_into_a_cleaned_item():
    row = eval_row(idx=42, difficulty="Expert Level Knowledge", domain=["math", "Coding"])
    row["extra_key"] = {"nested": True}

    out = parse(jsonl(row), fmt="flask-eval")

    assert out == [
        ItemRow(
            line=1,
            external_id="42",
            instruction="Shorten this sentence.",
            reference="Short.",
            skills=SKILLS3,
            checklists={},
            domains=["Math", "Coding"],
            difficulty=5,
            task="Self-instruct",
            metadata={"extra_key": {"nested": True}},
            problems=[],
        )
    ]


def test_it_parses_a_flask_output_row_keeping_other_keys_as_metadata():
    data = jsonl(
        {"question_id": 1, "text": "Answer one.", "model_id": "gpt-4-0613"},
        {"question_id": "2", "text": "Answer two.", "answer_id": "abc", "metadata": {"x": 1}},
    )

    out = parse(data, fmt="flask-output", name="gpt4.jsonl")

    assert out == [
        ResponseRow(1, "1", "gpt4", "Answer one.", {"model_id": "gpt-4-0613"}),
        ResponseRow(2, "2", "gpt4", "Answer two.", {"answer_id": "abc", "metadata": {"x": 1}}),
    ]


def test_it_parses_a_generic_item_with_inline_responses():
    row = generic_item(
        reference="A function calling itself.",
        domains="Coding; Math",
        difficulty=3,
        task="mine",
        checklist={"readability": ["short sentences", "  "], "Conciseness": "no padding"},
        metadata={"source": "forum"},
        responses=[
            {"model": " gpt4 ", "text": "It calls itself.", "metadata": {"t": 0.2}},
            {"model": "bard", "text": "Self reference."},
        ],
        author="kim",
    )

    out = parse(jsonl(row), fmt="generic-jsonl")

    item, *responses = out
    assert isinstance(item, ItemRow)
    assert item.external_id == "a1"
    assert item.skills == SKILLS3
    assert item.checklists == {"Readability": ["short sentences"], "Conciseness": ["no padding"]}
    assert item.domains == ["Coding", "Math"]
    assert item.difficulty == 3
    assert item.metadata == {"source": "forum", "author": "kim"}
    assert item.problems == []
    assert responses == [
        ResponseRow(1, "a1", "gpt4", "It calls itself.", {"t": 0.2}),
        ResponseRow(1, "a1", "bard", "Self reference.", {}),
    ]


def test_it_parses_generic_response_rows_with_their_own_model():
    data = jsonl(
        {"item": "a1", "model": "gpt4", "text": "One.", "latency_ms": 12},
        {"item": 7, "model": "bard", "text": "Two."},
    )

    out = parse(data, fmt="generic-jsonl")

    assert out == [
        ResponseRow(1, "a1", "gpt4", "One.", {"latency_ms": 12}),
        ResponseRow(2, "7", "bard", "Two.", {}),
    ]


def test_it_accepts_external_id_as_the_generic_id_key():
    out = parse(
        jsonl({"external_id": "x-9", "instruction": "q", "skills": SKILLS3}), fmt="generic-jsonl"
    )

    assert [i.external_id for i in items_of(out)] == ["x-9"]


@pytest.mark.parametrize("item_id", ["a\u202eb", "a\u200bb", "line\nbreak"])
def test_an_item_id_with_an_invisible_bidi_or_line_break_character_is_refused(item_id):
    # the rule of ids in every import: the score import could never name such an item
    out = parse(jsonl({"id": item_id, "instruction": "q", "skills": SKILLS3}), fmt="generic-jsonl")
    assert items_of(out) == []
    assert [(p.field, p.code) for p in problems_of(out)] == [("id", "invalid_name")]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        *[(name, level) for name, level in DIFFICULTY_NAMES.items()],
        ("  MAJOR level Knowledge ", 4),
        (1, 1),
        (5, 5),
        ("3", 3),
        (4.0, 4),
        (None, None),
        ("", None),
    ],
)
def test_it_cleans_valid_difficulties_without_a_problem(value, expected):
    out = parse(jsonl(eval_row(difficulty=value)), fmt="flask-eval")

    assert [i.difficulty for i in items_of(out)] == [expected]
    assert problems_of(out) == []


def test_it_skips_blank_lines_but_keeps_counting_them():
    data = b"\n   \n" + jsonl(eval_row(idx=1)) + b"\n" + jsonl(eval_row(idx=2))

    out = parse(data, fmt="flask-eval")

    assert [(i.line, i.external_id) for i in items_of(out)] == [(3, "1"), (5, "2")]


def test_it_strips_a_utf8_bom_on_the_first_line_only():
    data = b"\xef\xbb\xbf" + jsonl(eval_row(idx=1), b"\xef\xbb\xbf" + jsonl(eval_row(idx=2)))

    out = parse(data, fmt="flask-eval")

    assert [i.external_id for i in items_of(out)] == ["1"]
    assert codes(out) == [(2, "", "invalid_json")]


def test_it_reports_progress_every_2048_lines_and_at_the_end():
    data = jsonl(*[{"question_id": n, "text": "t"} for n in range(1, 2051)])
    seen = []

    out = parse(data, fmt="flask-output", name="m.jsonl", on_progress=seen.append)

    assert len(out) == 2050
    assert len(seen) == 2
    assert 0 < seen[0] < len(data)
    assert seen[1] is None


def test_it_reads_lines_in_bounded_pieces_and_drains_overlong_ones():
    data = b"short\n" + b"x" * 50 + b"\nafter\n" + b"y" * 30

    lines = list(iter_lines(io.BytesIO(data), max_line_bytes=10))

    assert [(n, raw) for n, raw, _ in lines] == [
        (1, b"short\n"),
        (2, None),
        (3, b"after\n"),
        (4, None),
    ]
    assert lines[-1][2] == len(data)


def test_a_line_of_exactly_the_limit_is_not_too_long():
    lines = list(iter_lines(io.BytesIO(b"0123456789\n0123456789"), max_line_bytes=10))

    assert [raw for _, raw, _ in lines] == [b"0123456789\n", b"0123456789"]


# --- problems: one table row per class and situation ------------------------------------------

# (id, format, file bytes, parse kwargs, expected [(line, field, code)])
PROBLEM_CASES = [
    (
        "invalid_json syntax",
        "flask-eval",
        jsonl(eval_row(idx=1), "{not json", eval_row(idx=3)),
        {},
        [(2, "", "invalid_json")],
    ),
    (
        "invalid_json not an object",
        "flask-output",
        jsonl({"question_id": 1, "text": "t"}, "[1, 2]", '"text"'),
        {},
        [(2, "", "invalid_json"), (3, "", "invalid_json")],
    ),
    (
        "invalid_encoding bad utf-8 bytes",
        "flask-output",
        jsonl({"question_id": 1, "text": "t"}, b'{"question_id": 2, "text": "caf\xe9"}'),
        {},
        [(2, "", "invalid_encoding")],
    ),
    (
        "line_too_long",
        "flask-output",
        jsonl({"question_id": 1, "text": "t"}, {"question_id": 2, "text": "x" * 200}),
        {"max_line_bytes": 64},
        [(2, "", "line_too_long")],
    ),
    (
        "missing_field instruction",
        "flask-eval",
        jsonl(eval_row(instruction="   ")),
        {},
        [(1, "instruction", "missing_field")],
    ),
    (
        "missing_field idx",
        "flask-eval",
        jsonl(eval_row(idx=...)),
        {},
        [(1, "idx", "missing_field")],
    ),
    (
        "missing_field skills",
        "generic-jsonl",
        jsonl(generic_item(skills=...)),
        {},
        [(1, "skills", "missing_field")],
    ),
    (
        "missing_field only unknown skills",
        "flask-eval",
        jsonl(eval_row(skill=["Humour"])),
        {},
        [(1, "skill", "unknown_skill"), (1, "skill", "missing_field")],
    ),
    (
        "missing_field text",
        "flask-output",
        jsonl({"question_id": 1, "answer": "t"}),
        {},
        [(1, "text", "missing_field")],
    ),
    (
        "missing_field model of a generic response",
        "generic-jsonl",
        jsonl({"item": "a", "model": "", "text": "t"}),
        {},
        [(1, "model", "missing_field")],
    ),
    (
        "invalid_name model with a zero-width space",
        "generic-jsonl",
        jsonl(
            {"item": "a", "model": "gpt\u200b4", "text": "t"},
            generic_item(responses=[{"model": "m\u202e1", "text": "t"}]),
        ),
        {},
        [(1, "model", "invalid_name"), (2, "responses[1].model", "invalid_name")],
    ),
    (
        "missing_field inline response model",
        "generic-jsonl",
        jsonl(generic_item(responses=[{"text": "t"}])),
        {},
        [(1, "responses[1].model", "missing_field")],
    ),
    (
        "invalid_type instruction object",
        "flask-eval",
        jsonl(eval_row(instruction={"a": 1})),
        {},
        [(1, "instruction", "invalid_type")],
    ),
    (
        "invalid_type idx boolean",
        "flask-eval",
        jsonl(eval_row(idx=True)),
        {},
        [(1, "idx", "invalid_type")],
    ),
    (
        "invalid_type idx too long",
        "generic-jsonl",
        jsonl(generic_item(id="x" * 201)),
        {},
        [(1, "id", "invalid_type")],
    ),
    (
        "invalid_type skills object",
        "generic-jsonl",
        jsonl(generic_item(skills={"Readability": 1})),
        {},
        [(1, "skills", "invalid_type")],
    ),
    (
        "invalid_type metadata list",
        "generic-jsonl",
        jsonl(generic_item(metadata=[1])),
        {},
        [(1, "metadata", "invalid_type")],
    ),
    (
        "invalid_type responses not a list",
        "generic-jsonl",
        jsonl(generic_item(responses={"model": "m", "text": "t"})),
        {},
        [(1, "responses", "invalid_type")],
    ),
    (
        "invalid_type inline response not an object",
        "generic-jsonl",
        jsonl(generic_item(responses=["just text"])),
        {},
        [(1, "responses[1]", "invalid_type")],
    ),
    (
        "invalid_type NUL in text",
        "flask-output",
        jsonl({"question_id": 1, "text": "a\u0000b"}),
        {},
        [(1, "text", "invalid_type")],
    ),
    (
        "invalid_type NaN text",
        "flask-output",
        b'{"question_id": 1, "text": NaN}\n',
        {},
        [(1, "text", "invalid_type")],
    ),
    (
        "invalid_difficulty -1",
        "flask-eval",
        jsonl(eval_row(difficulty=-1)),
        {},
        [(1, "difficulty", "invalid_difficulty")],
    ),
    (
        "invalid_difficulty '-1'",
        "flask-eval",
        jsonl(eval_row(difficulty="-1")),
        {},
        [(1, "difficulty", "invalid_difficulty")],
    ),
    (
        "invalid_difficulty 0",
        "flask-eval",
        jsonl(eval_row(difficulty=0)),
        {},
        [(1, "difficulty", "invalid_difficulty")],
    ),
    (
        "invalid_difficulty 6",
        "flask-eval",
        jsonl(eval_row(difficulty=6)),
        {},
        [(1, "difficulty", "invalid_difficulty")],
    ),
    (
        "invalid_difficulty 2.5",
        "generic-jsonl",
        jsonl(generic_item(difficulty=2.5)),
        {},
        [(1, "difficulty", "invalid_difficulty")],
    ),
    (
        "invalid_difficulty boolean",
        "generic-jsonl",
        jsonl(generic_item(difficulty=True)),
        {},
        [(1, "difficulty", "invalid_difficulty")],
    ),
    (
        "invalid_difficulty unknown name",
        "flask-eval",
        jsonl(eval_row(difficulty="rocket science")),
        {},
        [(1, "difficulty", "invalid_difficulty")],
    ),
    (
        "invalid_domain '-1'",
        "flask-eval",
        jsonl(eval_row(domain=["Health", "-1"])),
        {},
        [(1, "domain", "invalid_domain")],
    ),
    (
        "invalid_domain unknown name",
        "generic-jsonl",
        jsonl(generic_item(domains=["Astrology"])),
        {},
        [(1, "domains", "invalid_domain")],
    ),
    (
        "unknown_skill",
        "flask-eval",
        jsonl(eval_row(skill=["Readability", "Humour", "Conciseness"])),
        {},
        [(1, "skill", "unknown_skill")],
    ),
    (
        "unknown_skill listed twice",
        "flask-eval",
        jsonl(eval_row(skill=["Readability", "readability", "Conciseness"])),
        {},
        [(1, "skill", "unknown_skill")],
    ),
    (
        "skill_count two",
        "flask-eval",
        jsonl(eval_row(skill=["Readability", "Conciseness"])),
        {},
        [(1, "skill", "skill_count")],
    ),
    (
        "skill_count four",
        "generic-jsonl",
        jsonl(generic_item(skills=[*SKILLS3, "Factuality"])),
        {},
        [(1, "skills", "skill_count")],
    ),
    (
        "invalid_checklist not an object",
        "generic-jsonl",
        jsonl(generic_item(checklist=["check"])),
        {},
        [(1, "checklist", "invalid_checklist")],
    ),
    (
        "invalid_checklist skill not of the item",
        "generic-jsonl",
        jsonl(generic_item(checklist={"Factuality": ["true?"]})),
        {},
        [(1, "checklist", "invalid_checklist")],
    ),
    (
        "invalid_checklist checks not text",
        "generic-jsonl",
        jsonl(generic_item(checklist={"Readability": [1, 2]})),
        {},
        [(1, "checklist", "invalid_checklist")],
    ),
    (
        "empty_response flask-output",
        "flask-output",
        jsonl({"question_id": 1, "text": ""}, {"question_id": 2, "text": " \n "}),
        {},
        [(1, "text", "empty_response"), (2, "text", "empty_response")],
    ),
    (
        "empty_response generic response row",
        "generic-jsonl",
        jsonl({"item": "a", "model": "m", "text": ""}),
        {},
        [(1, "text", "empty_response")],
    ),
    (
        "empty_response generic inline response",
        "generic-jsonl",
        jsonl(generic_item(responses=[{"model": "m", "text": "  "}])),
        {},
        [(1, "responses[1].text", "empty_response")],
    ),
    ("empty_file no bytes", "flask-eval", b"", {}, [(None, "", "empty_file")]),
    ("empty_file blank lines", "flask-output", b"\n  \n\r\n", {}, [(None, "", "empty_file")]),
    ("empty_file csv header only", "generic-csv", csv_bytes(), {}, [(None, "", "empty_file")]),
    (
        "invalid_csv wrong column count",
        "generic-csv",
        csv_bytes("a1,q,,Readability;Conciseness;Comprehension,,,,,m,r", "a2,q,too,few"),
        {},
        [(3, "", "invalid_csv")],
    ),
    (
        "invalid_csv bad quoting",
        "generic-csv",
        csv_bytes('a1,"q"x,,Readability;Conciseness;Comprehension,,,,,m,r'),
        {},
        [(2, "", "invalid_csv")],
    ),
    (
        "invalid_checklist csv not json",
        "generic-csv",
        csv_bytes("a1,q,,Readability;Conciseness;Comprehension,,,,{oops,m,r"),
        {},
        [(2, "checklist", "invalid_checklist")],
    ),
    (
        "inconsistent_item csv",
        "generic-csv",
        csv_bytes(
            "a1,q,,Readability;Conciseness;Comprehension,,,,,m1,r1",
            "a1,other q,,Readability;Conciseness;Comprehension,,,,,m2,r2",
        ),
        {},
        [(3, "instruction", "inconsistent_item")],
    ),
    (
        "missing_field csv row with neither item nor response",
        "generic-csv",
        csv_bytes("a1,,,,,,,,m1,"),
        {},
        [(2, "response", "missing_field")],
    ),
    (
        "missing_field csv response without a model",
        "generic-csv",
        csv_bytes("a1,q,,Readability;Conciseness;Comprehension,,,,,,r1"),
        {},
        [(2, "model", "missing_field")],
    ),
    (
        "line_too_long csv field",
        "generic-csv",
        csv_bytes("a1," + "q" * 100 + ",,Readability;Conciseness;Comprehension,,,,,m,r"),
        {"max_line_bytes": 50},
        [(2, "", "line_too_long")],
    ),
    (
        "unknown_format csv without an id column",
        "generic-csv",
        b"instruction,skills\nq,Readability\n",
        {},
        [(1, "id", "unknown_format")],
    ),
    (
        "unknown_format csv without instruction or response",
        "generic-csv",
        b"id,notes\n1,hello\n",
        {},
        [(1, "", "unknown_format")],
    ),
    (
        "invalid_encoding csv header",
        "generic-csv",
        b"id,instruc\xfftion\na1,q\n",
        {},
        [(1, "", "invalid_encoding")],
    ),
    (
        "invalid_encoding csv",
        "generic-csv",
        CSV_HEADER.encode() + b"\na1,q\xff,,Readability;Conciseness;Comprehension,,,,,m,r\n",
        {},
        [(2, "", "invalid_encoding")],
    ),
    (
        "preference-identical-pair",
        "preference",
        b'{"prompt": "q", "chosen": "same", "rejected": "same", "subset": "s"}\n',
        {},
        [(1, "rejected", "identical_pair")],
    ),
]


@pytest.mark.parametrize(
    ("fmt", "data", "kwargs", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in PROBLEM_CASES],
)
def test_it_reports_each_problem_with_its_line_and_field(fmt, data, kwargs, expected):
    name = "f.csv" if fmt == "generic-csv" else "f.jsonl"

    out = parse(data, fmt=fmt, name=name, **kwargs)

    assert codes(out) == expected
    assert all(p.file == name and p.message for p in problems_of(out))


def test_the_problem_table_covers_every_class_a_parser_can_emit():
    covered = {code for case in PROBLEM_CASES for _, _, code in case[4]}

    assert covered == set(PROBLEM_CLASSES) - SET_LEVEL_CODES


def test_a_problem_reads_as_file_line_field_message_and_class():
    out = parse(
        jsonl(eval_row(idx=1), eval_row(idx=2), eval_row(idx=3, difficulty=-1)),
        fmt="flask-eval",
        name="f.jsonl",
    )

    assert [str(p) for p in problems_of(out)] == [
        "f.jsonl, line 3 [difficulty]: difficulty -1 is not a level 1-5 (invalid_difficulty)"
    ]
    assert str(Problem("f.jsonl", None, "", "empty_file", "the file holds no rows")) == (
        "f.jsonl: the file holds no rows (empty_file)"
    )
    assert str(Problem("f.jsonl", 4, "", "invalid_json", "not valid JSON: x")) == (
        "f.jsonl, line 4: not valid JSON: x (invalid_json)"
    )


@pytest.mark.parametrize(
    ("difficulty", "message"),
    [
        (-1, "difficulty -1 is not a level 1-5"),
        ("-1", "difficulty -1 is not a level 1-5"),
        ("hard", "difficulty 'hard' is not a level 1-5 or a level name"),
    ],
)
def test_it_explains_an_invalid_difficulty(difficulty, message):
    out = parse(jsonl(eval_row(difficulty=difficulty)), fmt="flask-eval")

    assert [p.message for p in problems_of(out)] == [message]


@pytest.mark.parametrize(
    ("skills", "message"),
    [
        (["Readability"], "1 skill given; FLASK instances have 3"),
        (["Readability", "Conciseness"], "2 skills given; FLASK instances have 3"),
    ],
)
def test_the_skill_count_message_is_singular_for_one_skill(skills, message):
    out = parse(jsonl(eval_row(skill=skills)), fmt="flask-eval")

    assert [p.message for p in problems_of(out)] == [message]


# --- what a problem does to the row -----------------------------------------------------------


def test_acceptable_problems_keep_the_row_with_the_cleaned_value():
    row = eval_row(
        difficulty=-1,
        domain=["Health", "-1"],
        skill=["Readability", "Humour", "Conciseness"],
    )

    out = parse(jsonl(row), fmt="flask-eval")

    [item] = out
    assert item.difficulty is None
    assert item.domains == ["Health"]
    assert item.skills == ["Readability", "Conciseness"]
    assert sorted(p.code for p in item.problems) == [
        "invalid_difficulty",
        "invalid_domain",
        "unknown_skill",
    ]


def test_a_fatal_problem_drops_the_row_and_reports_every_problem_of_its_line():
    row = eval_row(idx=..., instruction=None, difficulty=9)

    out = parse(jsonl(row, eval_row(idx=2)), fmt="flask-eval")

    assert codes(out) == [
        (1, "idx", "missing_field"),
        (1, "instruction", "missing_field"),
        (1, "difficulty", "invalid_difficulty"),
    ]
    assert [i.external_id for i in items_of(out)] == ["2"]
    assert all(isinstance(p, Problem) for p in out[:3])


def test_problems_of_an_item_line_ride_on_the_item_not_its_inline_responses():
    row = generic_item(difficulty=-1, responses=[{"model": "m", "text": "t"}])

    item, response = parse(jsonl(row), fmt="generic-jsonl")

    assert [p.code for p in item.problems] == ["invalid_difficulty"]
    assert response.problems == []


def test_an_empty_answer_is_kept_as_it_is_with_its_problem():
    [response] = parse(jsonl({"question_id": 9, "text": "   "}), fmt="flask-output", name="m.jsonl")

    assert response.text == "   "
    assert [p.code for p in response.problems] == ["empty_response"]


def test_an_inline_empty_answer_is_kept_with_its_problem_on_the_item():
    row = generic_item(responses=[{"model": "m1", "text": ""}, {"model": "m2", "text": "ok"}])

    item, empty, full = parse(jsonl(row), fmt="generic-jsonl")

    assert [(p.field, p.code) for p in item.problems] == [("responses[1].text", "empty_response")]
    assert [(r.model, r.text) for r in (empty, full)] == [("m1", ""), ("m2", "ok")]


def test_an_invalid_line_does_not_stop_the_lines_after_it():
    data = jsonl(
        {"question_id": 1, "text": "a"},
        b"\xff\xfe",
        "{",
        {"question_id": 4, "text": "x" * 100},
        {"question_id": 5, "text": "e"},
    )

    out = parse(data, fmt="flask-output", name="m.jsonl", max_line_bytes=60)

    assert [(r.line, r.item_external_id) for r in responses_of(out)] == [(1, "1"), (5, "5")]
    assert codes(out) == [
        (2, "", "invalid_encoding"),
        (3, "", "invalid_json"),
        (4, "", "line_too_long"),
    ]


def test_an_item_fingerprint_changes_with_content_but_not_with_skill_case():
    base = items_of(parse(jsonl(eval_row()), fmt="flask-eval"))[0]
    same = items_of(parse(jsonl(eval_row(skill=[s.upper() for s in SKILLS3])), fmt="flask-eval"))[0]
    changed = items_of(parse(jsonl(eval_row(answer="Different.")), fmt="flask-eval"))[0]

    assert base.fingerprint() == same.fingerprint()
    assert base.fingerprint() != changed.fingerprint()
    assert len(base.fingerprint()) == 40


# --- CSV --------------------------------------------------------------------------------------


def test_csv_rows_with_a_seen_id_add_responses_to_that_item():
    data = csv_bytes(
        'a1,"Explain, briefly.",ref,Readability;Conciseness;Comprehension,Language,2,t,'
        '"{""Readability"": [""plain words""]}",gpt4,"Answer, one."',
        "a1,,,,,,,,bard,Answer two.",
        'a1,"Explain, briefly.",ref,Readability;Conciseness;Comprehension,Language,2,t,'
        '"{""Readability"": [""plain words""]}",claude,Answer three.',
        "a2,Second question,,Factuality;Comprehension;Completeness,,,,,,",
    )

    out = parse(data, fmt="generic-csv", name="f.csv")

    assert problems_of(out) == []
    first, second = items_of(out)
    assert (first.line, first.external_id, first.instruction, first.reference) == (
        2,
        "a1",
        "Explain, briefly.",
        "ref",
    )
    assert first.skills == ["Readability", "Conciseness", "Comprehension"]
    assert first.checklists == {"Readability": ["plain words"]}
    assert (first.domains, first.difficulty, first.task) == (["Language"], 2, "t")
    assert second.external_id == "a2"
    assert [(r.line, r.item_external_id, r.model, r.text) for r in responses_of(out)] == [
        (2, "a1", "gpt4", "Answer, one."),
        (3, "a1", "bard", "Answer two."),
        (4, "a1", "claude", "Answer three."),
    ]


def test_csv_responses_take_the_model_from_the_file_when_there_is_no_model_column():
    data = csv_bytes("a1,,It is 4.", "a2,,It is 5.", header="id,model,response")

    out = parse(data, fmt="generic-csv", name="gpt4.csv", model_name="gpt4")

    assert [(r.item_external_id, r.model, r.text) for r in out] == [
        ("a1", "gpt4", "It is 4."),
        ("a2", "gpt4", "It is 5."),
    ]


def test_csv_handles_a_bom_crlf_and_quoted_newlines():
    data = (
        b"\xef\xbb\xbfID,Instruction,Skills\r\n"
        b'a1,"line one\r\nline two",Readability;Conciseness;Comprehension\r\n'
        b"a2,q2,Readability;Conciseness;Comprehension\r\n"
    )

    out = parse(data, fmt="generic-csv", name="f.csv")

    assert problems_of(out) == []
    assert [(i.line, i.external_id, i.instruction) for i in items_of(out)] == [
        (3, "a1", "line one\r\nline two"),
        (4, "a2", "q2"),
    ]


def test_csv_keeps_reading_after_a_bad_row():
    data = csv_bytes(
        "a1,q1,,Readability;Conciseness;Comprehension,,,,,m,r1",
        "a2,short",
        "a3,q3,,Readability;Conciseness;Comprehension,,,,,m,r3",
    )

    out = parse(data, fmt="generic-csv", name="f.csv")

    assert [i.external_id for i in items_of(out)] == ["a1", "a3"]
    assert codes(out) == [(3, "", "invalid_csv")]


def test_csv_invalid_utf8_costs_only_its_own_row():
    data = csv_bytes(
        "a1,q1,,Readability;Conciseness;Comprehension,,,,,m,r1",
        "a2,q2,,Readability;Conciseness;Comprehension,,,,,m,r2",
    ) + (
        b"a3,caf\xe9,,Readability;Conciseness;Comprehension,,,,,m,r3\n"
        b"a4,q4,,Readability;Conciseness;Comprehension,,,,,m,r4\n"
    )

    out = parse(data, fmt="generic-csv", name="f.csv")

    assert [i.external_id for i in items_of(out)] == ["a1", "a2", "a4"]
    assert codes(out) == [(4, "", "invalid_encoding")]
    assert "0xe9" in problems_of(out)[0].message


# --- the pieces the long-format readers (scores, judge outputs) share ----------------------


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (None, "null"),
        (True, "a boolean"),
        (3, "a number"),
        (2.5, "a number"),
        ("x", "text"),
        ({}, "an object"),
        ([], "a list"),
    ],
)
def test_problem_messages_name_json_types_in_words(value, named):
    from annotation.parsers import type_name

    assert type_name(value) == named


def test_one_json_line_decodes_or_says_what_stops_it():
    from annotation.parsers import MAX_JSON_DEPTH, Problem, json_line

    assert json_line(b'{"a": [1, 2]}', "f.jsonl", 3) == {"a": [1, 2]}
    cases = {
        b"\xff{}": "invalid_encoding",
        b"{nope": "invalid_json",
        b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1): "invalid_json",
        b'{"a": "x\\u0000y"}': "invalid_type",
    }
    for raw, code in cases.items():
        problem = json_line(raw, "f.jsonl", 3)
        assert isinstance(problem, Problem), raw
        assert (problem.file, problem.line, problem.code) == ("f.jsonl", 3, code)


def test_row_problems_report_names_with_file_and_line():
    from annotation.parsers import RowProblems

    problems: list = []
    row = RowProblems("f.csv", 7, problems)
    assert row.name({"item": " i1 "}, "item") == "i1" and not row.bad
    assert row.name({}, "rater", required=False) == "" and not row.bad
    assert row.name({"system": ["m"]}, "system") == "" and row.bad
    assert [(p.line, p.field, p.code) for p in problems] == [(7, "system", "invalid_type")]
    assert problems[0].message == "system must be text or a whole number, not a list"


# --- the one score rule ----------------------------------------------------------------------

LOOKALIKE_SCORES = ["5 ", " 4", "５", "٥", "+4", "4.0", "1e0", "04", "", True, False, 4.0, 1e0]


@pytest.mark.parametrize("raw", LOOKALIKE_SCORES, ids=repr)
def test_a_score_that_only_looks_like_a_whole_number_is_refused(raw):
    from annotation.parsers import ScoreRefused, score_read

    with pytest.raises(ScoreRefused):
        score_read(raw)


@pytest.mark.parametrize(
    "raw, expected",
    [(1, 1), (5, 5), ("4", 4), (None, None), ("N/A", None), ("na", None), ("Not applicable", None)],
)
def test_a_score_is_an_ascii_whole_number_in_the_scale_or_na(raw, expected):
    from annotation.parsers import score_read

    assert score_read(raw) == expected


@pytest.mark.parametrize(
    "raw, message",
    [
        ("5 ", "score '5 ' has white space around it"),
        ("５", "score '５' holds '５' (U+FF15); write digits 0-9"),
        ("٥", "holds '٥' (U+0665)"),
        ("+4", "has a plus sign"),
        ("4.0", "score '4.0' is not written as a whole number"),
        (4.0, "score 4.0 is not written as a whole number (write 4)"),
        (True, "not a boolean"),
        (6, "score 6 is outside the scale 1 to 5"),
        (10**400, "is outside the scale 1 to 5"),
    ],
)
def test_a_refused_score_says_why(raw, message):
    from annotation.parsers import ScoreRefused, score_read

    with pytest.raises(ScoreRefused) as refused:
        score_read(raw)
    assert message in str(refused.value)


def test_decimals_are_read_only_where_a_scale_takes_them_and_never_on_an_integer_scale():
    from annotation.parsers import ScoreRefused, score_number, score_on_scale

    assert score_number("0.25", decimals=True) == 0.25
    assert score_number("-1.5e-3", decimals=True) == -0.0015
    assert isinstance(score_number("4", decimals=True), int)
    assert isinstance(score_number("4.0", decimals=True), float)
    assert score_on_scale(score_number("4.0", decimals=True), 1, 5, integers=True)
    assert score_on_scale(score_number("4.0", decimals=True), 1, 5, integers=False) is None
    for raw in ("٠.٥", "0.5 ", "+0.5", ".5", "1e999", "nan", "inf", float("nan")):
        with pytest.raises(ScoreRefused):
            score_number(raw, decimals=True)
