"""The long-format score importer: what it creates, what it refuses (and then writes
nothing), re-imports, CSV and JSONL details, and the import_scores command."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from analytics.imports.parsers import Scale, scale_spec_parse, score_value, scores_parse
from analytics.imports.services import DEFAULT_DATASET, ScoreImportRejected, scores_import
from analytics.models import ImportedScore, ScoreImport, SkillScale
from annotation.models import Dataset, Item, Project, Response, Skill
from annotation.services.catalogue import skill_create

HEADER = "item,system,rater,rater_kind,skill,score"

pytestmark = pytest.mark.django_db


def csv_bytes(*rows: str, header: str = HEADER, newline: str = "\n") -> bytes:
    return newline.join([header, *rows]).encode() + newline.encode()


def jsonl_bytes(*rows: dict) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def counts() -> dict[str, int]:
    return {
        "scores": ImportedScore.objects.count(),
        "imports": ScoreImport.objects.count(),
        "items": Item.objects.count(),
        "responses": Response.objects.count(),
        "skills": Skill.objects.count(),
        "datasets": Dataset.objects.count(),
        "scales": SkillScale.objects.count(),
        "projects": Project.objects.count(),
    }


def run(project, data: bytes, name: str = "scores.csv", **options):
    return scores_import(project_slug=project.slug, files=[(name, io.BytesIO(data))], **options)


def rejected(project, data: bytes, name: str = "scores.csv", **options):
    before = counts()
    with pytest.raises(ScoreImportRejected) as info:
        run(project, data, name, **options)
    assert counts() == before, "a rejected import wrote something"
    return info.value.problems


def stored(**filters) -> list[tuple]:
    return sorted(
        ImportedScore.objects.filter(**filters).values_list(
            "response__item__external_id",
            "response__model_name",
            "rater",
            "rater_kind",
            "skill__name",
            "value",
            "is_na",
        )
    )


# --- what an import creates -------------------------------------------------------------------


def test_it_creates_the_dataset_items_responses_and_unknown_skills(project):
    # given
    data = csv_bytes(
        "q1,model-a,ann-1,human,Factuality,4",
        "q1,model-a,ann-2,human,factuality,5",
        "q1,model-b,ann-1,human,Tone of voice,2",
        "q2,model-a,gpt-judge,judge,logical_correctness,3",
    )

    # when
    result = run(project, data)

    # then
    dataset = Dataset.objects.get(project=project, name=DEFAULT_DATASET)
    assert result.dataset_created and not result.already_imported
    assert result.skills_created == ["Tone of voice"]
    tone = Skill.objects.get(name="Tone of voice")
    assert tone.project == project
    assert sorted(
        Item.objects.filter(dataset=dataset).values_list("external_id", "instruction")
    ) == [
        ("q1", ""),
        ("q2", ""),
    ]
    assert Response.objects.filter(item__dataset=dataset).count() == 3
    assert stored() == [
        ("q1", "model-a", "ann-1", "human", "Factuality", 4.0, False),
        ("q1", "model-a", "ann-2", "human", "Factuality", 5.0, False),
        ("q1", "model-b", "ann-1", "human", "Tone of voice", 2.0, False),
        ("q2", "model-a", "gpt-judge", "judge", "Logical Correctness", 3.0, False),
    ]
    batch = result.batch
    assert (batch.rows_read, batch.scores_created, batch.items_created) == (4, 4, 2)
    assert batch.responses_created == 3
    assert batch.summary["raters"] == {"human": 2, "judge": 1}
    assert SkillScale.objects.count() == 0  # every skill on the default 1-5 scale


def test_it_matches_a_projects_own_skill_and_fills_texts_domains_and_difficulty(project):
    # given
    skill_create(project=project, name="Brevity", criterion="Short?", anchors=list("abcde"))
    data = jsonl_bytes(
        {
            "item": 7,
            "system": "m",
            "rater": "r1",
            "rater_kind": "human",
            "skill": "BREVITY",
            "score": 2,
            "instruction": "Name a prime.",
            "reference": "2",
            "response": "3",
            "domain": ["Math", "coding"],
            "difficulty": "formal education knowledge",
            "rationale": "fine",
        },
        {
            "item": 7,
            "system": "m",
            "rater": "r2",
            "rater_kind": "human",
            "skill": "Brevity",
            "score": 3,
            "instruction": "Name a prime.\r\n",
        },
    )

    # when
    result = run(project, data, "scores.jsonl", dataset_name="Primes")

    # then
    assert result.skills_created == []
    item = Item.objects.get(dataset__name="Primes", external_id="7")
    assert (item.instruction, item.reference_answer, item.difficulty) == ("Name a prime.", "2", 3)
    assert sorted(item.domains.values_list("key", flat=True)) == ["coding", "math"]
    assert item.responses.get().text == "3"
    assert ImportedScore.objects.get(rater="r1").rationale == "fine"


def test_an_unknown_domain_or_difficulty_is_a_problem(project):
    problems = rejected(
        project,
        csv_bytes(
            "q1,m,r,human,Factuality,4,Astrology,",
            "q2,m,r,human,Factuality,4,,7",
            header=HEADER + ",domain,difficulty",
        ),
    )
    assert [(p.line, p.field, p.code) for p in problems] == [
        (2, "domain", "invalid_domain"),
        (3, "difficulty", "invalid_difficulty"),
    ]


# --- N/A and scales ------------------------------------------------------------------------


def test_na_spellings_are_stored_as_not_applicable_and_an_empty_score_is_a_problem(project):
    # given
    data = csv_bytes(
        "q1,m,r1,human,Factuality,N/A",
        "q1,m,r2,human,Factuality,na",
        "q1,m,r3,human,Factuality,Not Applicable",
        "q1,m,r4,judge,Factuality,n/a",
    )

    # when
    run(project, data)

    # then
    assert ImportedScore.objects.filter(is_na=True, value__isnull=True).count() == 4
    problems = rejected(
        project, csv_bytes("q1,m,r5,human,Factuality,", "q1,m,r6,human,Factuality,-")
    )
    assert [(p.line, p.code) for p in problems] == [(2, "missing_field"), (3, "invalid_score")]


def test_a_human_score_outside_the_scale_is_rejected_with_its_line_and_nothing_is_written(
    project,
):
    # given: good rows (that would create items, responses and a skill) and two bad ones
    data = csv_bytes(
        "q1,m,r1,human,Factuality,4",
        "q1,m,r2,human,Factuality,6",
        "q2,m,r1,human,New skill,3",
        "q2,m,r2,human,Factuality,3.5",
    )

    # when
    problems = rejected(project, data)

    # then
    assert [(p.file, p.line, p.field, p.code) for p in problems] == [
        ("scores.csv", 3, "score", "out_of_scale"),
        ("scores.csv", 5, "score", "out_of_scale"),
    ]
    assert "outside the scale 1 to 5" in problems[0].message
    assert "not a whole number" in problems[1].message


def test_a_declared_scale_is_used_and_stored_including_a_continuous_one(project):
    # given
    data = csv_bytes(
        "q1,m,r1,human,Factuality,0",
        "q1,m,r1,human,Fluency,0.75",
        "q1,m,r2,human,Fluency,1",
        "q1,m,r1,human,Comprehension,10",
    )

    # when
    result = run(project, data, scales=["Factuality=0:3", "fluency=0:1:continuous", "*=1:10"])

    # then
    scales = {
        s.skill.name: (s.low, s.high, s.continuous)
        for s in SkillScale.objects.select_related("skill")
    }
    assert scales == {
        "Factuality": (0.0, 3.0, False),
        "Fluency": (0.0, 1.0, True),
        "Comprehension": (1.0, 10.0, False),
    }
    assert result.batch.scales["skills"]["Fluency"] == {"low": 0.0, "high": 1.0, "continuous": True}
    assert ImportedScore.objects.get(rater="r1", skill__name="Fluency").value == 0.75
    # a later import without --scale keeps the stored scale
    assert rejected(project, csv_bytes("q2,m,r1,human,Factuality,4"))[0].code == "out_of_scale"
    run(project, csv_bytes("q2,m,r1,human,Fluency,0.5"))


def test_an_integer_scale_refuses_fractions_and_a_scale_cannot_change_under_stored_scores(project):
    # given
    run(project, csv_bytes("q1,m,r1,human,Factuality,2"), scales=["Factuality=0:10"])

    # when
    fraction = rejected(project, csv_bytes("q1,m,r2,human,Factuality,2.5"))
    changed = rejected(project, csv_bytes("q1,m,r2,human,Factuality,2"), scales=["Factuality=1:5"])

    # then
    assert [(p.line, p.code) for p in fraction] == [(2, "out_of_scale")]
    assert [(p.field, p.code) for p in changed] == [("scale", "scale_conflict")]


def test_bad_scale_options_are_problems():
    with pytest.raises(ValueError):
        scale_spec_parse("Factuality=5:1")
    with pytest.raises(ValueError):
        scale_spec_parse("Factuality=0.5:1")
    with pytest.raises(ValueError):
        scale_spec_parse("Factuality")
    assert scale_spec_parse(" * = 0 : 1 : Continuous ") == ("*", Scale(0.0, 1.0, True))


def test_judge_raw_values_are_accepted_only_with_the_raw_judge_scale(project):
    # given
    data = csv_bytes(
        "q1,m,rouge-l,judge,Factuality,0.4182",
        "q1,m,logprob,judge,Factuality,-12.5",
        "q1,m,r1,human,Factuality,4",
    )

    # when
    problems = rejected(project, data)
    run(project, data, judge_scale_raw=True)

    # then
    assert [(p.line, p.code) for p in problems] == [(2, "out_of_scale"), (3, "out_of_scale")]
    assert ImportedScore.objects.get(rater="logprob").value == -12.5
    # human rows still follow the skill's scale
    human = rejected(project, csv_bytes("q1,m,r2,human,Factuality,0.5"), judge_scale_raw=True)
    assert [(p.line, p.code) for p in human] == [(2, "out_of_scale")]


def test_non_finite_numbers_are_refused_even_as_raw_judge_values():
    for raw in ("nan", "inf", "1e999", float("nan"), True, "4,5"):
        with pytest.raises(ValueError):
            score_value(raw)
    assert score_value("3") == 3.0 and score_value(2) == 2.0 and score_value("NA") is None


@pytest.mark.parametrize(
    "cell", [" 4", "4 ", " n/a ", "\uff14", "\u0664", "+4", "0x4", "4,0", ".5"]
)
def test_a_score_cell_is_read_by_the_one_score_rule_of_the_project(project, cell):
    # was: " 4", "+4" and the fullwidth and Arabic-Indic 4 (float() takes them) imported as 4
    data = csv_bytes(f'q1,m,r1,human,Factuality,"{cell}"')
    problems = rejected(project, data)
    assert [(p.line, p.field, p.code) for p in problems] == [(2, "score", "invalid_score")]
    assert problems[0].message.startswith("score ")


@pytest.mark.parametrize("cell", ["4.0", "4e0", "40e-1"])
def test_a_whole_number_written_as_a_decimal_is_refused_on_an_integer_scale(project, cell):
    # was: "4.0" imported as 4 on the 1-5 whole-number scale
    problems = rejected(project, csv_bytes(f"q1,m,r1,human,Factuality,{cell}"))
    assert [(p.line, p.field, p.code) for p in problems] == [(2, "score", "out_of_scale")]
    assert "written with a fraction or an exponent" in problems[0].message
    assert "(write 4)" in problems[0].message


def test_a_json_float_that_is_whole_is_refused_on_an_integer_scale_but_not_a_continuous_one(
    project,
):
    row = {
        "item": "q1",
        "system": "m",
        "rater": "r1",
        "rater_kind": "human",
        "skill": "Factuality",
        "score": 4.0,
    }
    problems = rejected(project, jsonl_bytes(row), "scores.jsonl")
    assert [p.code for p in problems] == ["out_of_scale"]
    run(project, jsonl_bytes(row), name="scores.jsonl", scales=["Factuality=1:5:continuous"])
    assert ImportedScore.objects.get(rater="r1").value == 4.0


# --- duplicates, conflicts, re-imports --------------------------------------------------------


def test_a_score_given_twice_in_the_input_is_a_problem_naming_both_lines(project):
    # given: the second file repeats a score of the first (skill spelled differently)
    first = csv_bytes("q1,m,r1,human,Factuality,4", "q1,m,r1,judge,Factuality,4")
    second = jsonl_bytes(
        {
            "item": "q1",
            "system": "m",
            "rater": "r1",
            "rater_kind": "Human",
            "skill": "factuality",
            "score": 4,
        },
    )

    # when
    before = counts()
    with pytest.raises(ScoreImportRejected) as info:
        scores_import(
            project_slug=project.slug,
            files=[("a.csv", io.BytesIO(first)), ("b.jsonl", io.BytesIO(second))],
        )

    # then
    assert counts() == before
    [problem] = info.value.problems
    assert (problem.file, problem.line, problem.code) == ("b.jsonl", 1, "duplicate_score")
    assert "a.csv, line 2" in problem.message


def test_re_importing_identical_bytes_is_a_no_op(project):
    # given
    data = csv_bytes("q1,m,r1,human,Factuality,4")
    first = run(project, data)

    # when
    before = counts()
    again = run(project, data)

    # then
    assert again.already_imported and again.batch.pk == first.batch.pk
    assert counts() == before


def test_stored_scores_are_skipped_when_identical_and_refused_when_different(project):
    # given
    run(project, csv_bytes("q1,m,r1,human,Factuality,4", "q1,m,r1,human,Comprehension,N/A"))

    # when: other bytes, the same two scores plus a new one
    result = run(
        project,
        csv_bytes(
            "q1,m,r1,human,Comprehension,n/a",
            "q1,m,r1,human,Factuality,4",
            "q1,m,r2,human,Factuality,5",
        ),
    )
    conflict = rejected(
        project, csv_bytes("q1,m,r2,human,Factuality,5", "q1,m,r1,human,Factuality,3")
    )

    # then
    assert (result.batch.scores_created, result.batch.scores_unchanged) == (1, 2)
    assert ImportedScore.objects.count() == 3
    assert [(p.line, p.code) for p in conflict] == [(3, "changed_score")]
    assert ImportedScore.objects.get(rater="r1", skill__name="Factuality").value == 4.0


def test_texts_that_differ_from_stored_ones_or_between_rows_are_problems(project):
    # given
    header = HEADER + ",instruction,response"
    run(project, csv_bytes("q1,m,r1,human,Factuality,4,Say hi.,Hi!", header=header))

    # when
    problems = rejected(
        project,
        csv_bytes(
            "q1,m,r2,human,Factuality,4,Say hello.,",
            "q1,m,r3,human,Factuality,4,,Hello!",
            "q2,m,r1,human,Factuality,4,One,",
            "q2,m,r2,human,Factuality,4,Two,",
            header=header,
        ),
    )

    # then
    assert [(p.line, p.field, p.code) for p in problems] == [
        (2, "instruction", "changed_item"),
        (3, "response", "changed_response"),
        (5, "instruction", "inconsistent_item"),
    ]


def test_an_empty_stored_text_is_filled_in_by_a_later_import(project):
    run(project, csv_bytes("q1,m,r1,human,Factuality,4"))
    run(
        project,
        csv_bytes(
            "q1,m,r2,human,Factuality,4,Say hi.,Hi!", header=HEADER + ",instruction,response"
        ),
    )
    item = Item.objects.get(external_id="q1")
    assert (item.instruction, item.responses.get().text) == ("Say hi.", "Hi!")


# --- file details -----------------------------------------------------------------------------


def test_csv_with_a_bom_and_crlf_line_ends_reads_like_plain_csv(project):
    # given: a spreadsheet export, including a quoted multi-line rationale
    data = b"\xef\xbb\xbf" + csv_bytes(
        'q1,m,r1,human,Factuality,4,"two\r\nlines"',
        "q1,m,r2,human,Factuality,N/A,",
        "q1,m,r3,human,Factuality,9,",
        header=HEADER + ",rationale",
        newline="\r\n",
    )

    # when
    problems = rejected(project, data)

    # then: the line number after a two-line record is still right
    assert [(p.line, p.code) for p in problems] == [(5, "out_of_scale")]
    run(project, data.replace(b",9,", b",2,"))
    assert ImportedScore.objects.get(rater="r1").rationale == "two\r\nlines"
    assert ImportedScore.objects.get(rater="r2").is_na


def test_jsonl_rows_report_malformed_lines_with_their_numbers(project):
    data = (
        jsonl_bytes(
            {
                "item": "q1",
                "system": "m",
                "rater": "r",
                "rater_kind": "judge",
                "skill": "Factuality",
                "score": 4,
            }
        )
        + b"\n{not json}\n"
        + jsonl_bytes(
            {
                "item": "q2",
                "system": "m",
                "rater": "r",
                "rater_kind": "robot",
                "skill": "Factuality",
                "score": [4],
            }
        )
    )
    problems = rejected(project, data, "scores.jsonl")
    assert [(p.line, p.field, p.code) for p in problems] == [
        (3, "", "invalid_json"),
        (4, "rater_kind", "invalid_value"),
        (4, "score", "invalid_score"),
    ]


def test_the_parser_hashes_the_bytes_it_streams():
    data = csv_bytes("q1,m,r,human,Factuality,4")
    parsed = scores_parse([("a.csv", io.BytesIO(data))])
    import hashlib

    assert parsed.input_sha256 == hashlib.sha256(data).hexdigest()
    assert parsed.files[0].rows == 1 and parsed.problems == []


def test_a_missing_header_column_is_a_problem(project):
    problems = rejected(project, b"item,system,rater,skill,score\nq1,m,r,Factuality,4\n")
    assert [(p.line, p.code) for p in problems] == [(1, "missing_field")]
    assert "rater_kind" in problems[0].message


# --- the command ------------------------------------------------------------------------------


def test_the_command_creates_the_project_and_prints_a_summary(tmp_path, capsys):
    # given
    path = tmp_path / "ratings.csv"
    path.write_bytes(csv_bytes("q1,m,ann,human,Factuality,4", "q1,m,bot,judge,Factuality,N/A"))

    # when
    call_command("import_scores", str(path), "--project", "crowd", "--create-project")

    # then
    out = capsys.readouterr().out
    assert "created project 'crowd'" in out
    assert "scores: 2 new (1 human, 1 judge; 1 N/A)" in out
    assert "ratings.csv [csv]: 2 rows" in out
    assert ImportedScore.objects.filter(project__slug="crowd").count() == 2
    call_command("import_scores", str(path), "--project", "crowd")
    assert "already imported" in capsys.readouterr().out


def test_the_command_exits_2_and_prints_every_problem(tmp_path, capsys, project):
    # given
    path = tmp_path / "ratings.csv"
    path.write_bytes(csv_bytes("q1,m,ann,human,Factuality,7", "q1,m,ann,human,Factuality,3"))

    # when
    with pytest.raises(SystemExit) as exit_info:
        call_command("import_scores", str(path), "--project", project.slug)

    # then
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "ratings.csv, line 2 [score]: " in err and "(out_of_scale)" in err
    assert "ratings.csv, line 3 [score]: " in err and "(duplicate_score)" in err
    assert "rejected:" in err
    assert ImportedScore.objects.count() == 0


def test_the_command_refuses_an_unknown_project_without_create_project(tmp_path, capsys):
    path = tmp_path / "ratings.csv"
    path.write_bytes(csv_bytes("q1,m,ann,human,Factuality,4"))
    with pytest.raises(SystemExit) as exit_info:
        call_command("import_scores", str(path), "--project", "nowhere", "--scale", "x=1")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "(unknown_project)" in err and "(invalid_option)" in err
    assert not Project.objects.filter(slug="nowhere").exists()


def test_without_copy_the_scores_are_written_with_bulk_inserts_in_batches(project, monkeypatch):
    # given: the path SQLite takes, with batches small enough to need several
    monkeypatch.setattr("analytics.imports.services.is_postgres", lambda: False)
    monkeypatch.setattr("analytics.imports.services.WRITE_BATCH", 2)
    data = csv_bytes(*(f"q{n},m,r1,human,Factuality,{n % 5 + 1}" for n in range(5)))

    # when
    result = run(project, data)

    # then
    assert result.batch.scores_created == 5
    assert [v for *_, v, _ in stored()] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_skill_names_that_look_like_another_or_hide_characters_are_refused_atomically(project):
    # was: three new custom skills, one per spelling of Factuality
    data = csv_bytes(
        "q1,m,r1,human,Fаctuality,4",  # Cyrillic а
        "q1,m,r1,human,Fact\u202euality,4",  # a right-to-left override
        "q1,m,r1,human,Fact\u200buality,4",  # a zero-width space
        "q1,m,r1,human,Fluency,4",
    )
    problems = rejected(project, data)
    assert [(p.line, p.field, p.code) for p in problems] == [
        (2, "skill", "lookalike_name"),
        (3, "skill", "invalid_name"),
        (4, "skill", "invalid_name"),
    ]
    assert problems[0].message == "'Fаctuality' looks like the existing skill 'Factuality'"
    assert "invisible character U+200B at position 4" in problems[2].message
    assert not Skill.objects.filter(name="Fluency").exists()


def test_new_systems_and_judges_that_look_like_stored_ones_are_refused(project):
    run(project, csv_bytes("q1,gpt-4,kestrel,judge,Factuality,4"))
    problems = rejected(
        project,
        csv_bytes("q2,GPT-4,kestrel,judge,Factuality,4", "q2,gpt-4,Kеstrel,judge,Factuality,4"),
    )
    assert [(p.line, p.field, p.code) for p in problems] == [
        (2, "system", "lookalike_name"),
        (3, "rater", "lookalike_name"),
    ]
    assert problems[0].message == "'GPT-4' looks like the existing model 'gpt-4'"
