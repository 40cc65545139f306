"""Import of judge outputs made elsewhere (judging.output_imports, the import_judge_outputs
command and its API): scores land on the right responses and skills, N/A and unreadable
reviews are kept as such, every problem is reported with its line and nothing is written
on rejection, re-imports are no-ops, long tables make one judge per rater, and only the
project's admins and researchers may import."""

from __future__ import annotations

import hashlib
import json
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from rest_framework.test import APIClient

from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import ProjectRole, Response, UploadSource, UploadStatus
from annotation.services.projects import membership_set, project_create
from judging.models import (
    JudgeConfig,
    JudgeKind,
    JudgeOutputImportJob,
    JudgeRun,
    JudgeScore,
    Judgment,
    JudgmentStatus,
    RunStatus,
)
from judging.output_imports import services as output_imports
from judging.output_imports.jobs import judge_output_import_job_run
from judging.output_imports.services import (
    FLASK_REVIEW,
    LONG,
    JudgeOutputImportRejected,
    detect_format,
    judge_outputs_import,
    model_from_file_name,
    score_parse,
    skill_key,
)
from tests.clients import token_client
from tests.jobs import import_jobs_fixture  # noqa: F401 - the import_jobs fixture
from tests.judging.test_views import make_judge

API = "/api/v1/judging"

# Three invented instructions and two invented systems, answered by each.
ITEMS = {
    501: ("How many legs does a spider have?", ["Factuality", "Conciseness", "Readability"]),
    502: (
        "Plan a picnic for four on a rainy day.",
        ["Completeness", "Insightfulness", "Readability"],
    ),
    503: (
        "Is 91 a prime number? Explain.",
        ["Logical Correctness", "Factuality", "Conciseness"],
    ),
}
ANSWERS = {
    "kestrel": {501: "Eight.", 502: "Bring a tarp and board games.", 503: "No: 7 times 13."},
    "osprey": {501: "Spiders have six legs.", 502: "Stay home.", 503: "Yes, it is prime."},
}


# --- helpers --------------------------------------------------------------------------------------


def _jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def make_flask_dataset(project, tmp_path, name="Birds"):
    """A dataset loaded the way a FLASK release is: an evaluation file (idx) plus one output
    file per model (question_id), through the project's dataset import."""
    source = tmp_path / "source"
    source.mkdir(exist_ok=True)
    _jsonl(
        source / "eval.jsonl",
        [
            {
                "idx": idx,
                "instruction": text,
                "answer": "",
                "skill": skills,
                "domain": ["Humanities"],
                "difficulty": 2,
                "task": "invented",
            }
            for idx, (text, skills) in ITEMS.items()
        ],
    )
    files = [(FileSpec("eval.jsonl"), str(source / "eval.jsonl"))]
    for model, answers in ANSWERS.items():
        _jsonl(
            source / f"{model}.jsonl", [{"question_id": q, "text": t} for q, t in answers.items()]
        )
        files.append((FileSpec(f"{model}.jsonl"), str(source / f"{model}.jsonl")))
    upload = dataset_upload_create(
        project=project, dataset_name=name, source=UploadSource.CLI, files=files
    )
    upload = dataset_import(upload_id=upload.pk)
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    return upload.dataset


def review(qid, score, *, model="kestrel", text=None, tokens=812, **extra):
    """One line of a FLASK review file, as the FLASK scripts write it."""
    question, skills = ITEMS.get(qid, ("an item we do not have", []))
    row = {
        "question_id": qid,
        "text": question,
        "answer": "",
        "metrics": [s.lower() for s in skills],
        "target_txt": ANSWERS[model].get(qid, "") if text is None else text,
        "review": f"The answer to item {qid} was weighed carefully.\n{json.dumps(score)}",
        "score": score,
        "total_tokens_step4": tokens,
    }
    row.update(extra)
    return row


def write(tmp_path, name, rows) -> tuple[str, bytes]:
    path = tmp_path / name
    if isinstance(rows, str):
        path.write_text(rows)
    else:
        _jsonl(path, rows)
    return name, path.read_bytes()


def table_counts() -> tuple[int, int, int, int]:
    return (
        JudgeConfig.objects.count(),
        JudgeRun.objects.count(),
        Judgment.objects.count(),
        JudgeScore.objects.count(),
    )


def scores_of(run) -> dict[tuple[str, str, str], int | None]:
    return {
        (s.response.item.external_id, s.response.model_name, s.skill.name): s.score
        for s in JudgeScore.objects.filter(run=run).select_related("response__item", "skill")
    }


@pytest.fixture
def dataset(project, tmp_path):
    return make_flask_dataset(project, tmp_path)


def _import(project, dataset, files, **options):
    return judge_outputs_import(project=project, dataset=dataset, files=files, **options)


# --- pure parsing ---------------------------------------------------------------------------------


def test_skill_names_compare_without_case_and_with_separators_alike():
    spellings = [
        "logical correctness",
        "Logical_Correctness",
        "LOGICAL-correctness",
        " logical  correctness ",
    ]
    assert {skill_key(s) for s in spellings} == {"logical correctness"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, 1),
        (5, 5),
        ("4", 4),
        ("N/A", None),
        ("na", None),
        ("n/a", None),
        ("Not Applicable", None),
        ("NA", None),
    ],
)
def test_scores_are_integers_1_to_5_or_a_spelling_of_na(value, expected):
    assert score_parse(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        0,
        6,
        3.5,
        4.0,
        True,
        "four",
        "8/10",
        "",
        [3],
        " 2 ",
        "5 ",
        "\uff15",
        "\u0665",
        "+4",
        "4.0",
        "1e0",
        1e0,
    ],
)
def test_other_score_values_are_refused_naming_the_scale(value):
    # " 2 " and "+4" were read as 2 and 4: every score input now has one rule
    with pytest.raises(ValueError, match=r"score.* \(other scales are not imported here"):
        score_parse(value)


def test_the_model_comes_from_the_review_file_name():
    assert model_from_file_name("chatgpt_review.jsonl") == "chatgpt"
    assert model_from_file_name("outputs/vicuna_13b.jsonl") == "vicuna_13b"


def test_the_format_is_told_from_the_content():
    flask = json.dumps(review(501, {"factuality": 5})).encode()
    long_json = (
        b'{"item": 1, "system": "a", "rater": "r", "rater_kind": "judge", '
        b'"skill": "x", "score": 3}\n'
    )
    long_csv = b"item,system,rater,rater_kind,skill,score\n1,a,r,judge,x,3\n"
    assert detect_format("x.jsonl", flask) == FLASK_REVIEW
    assert detect_format("x.jsonl", long_json) == LONG
    assert detect_format("scores.txt", long_csv) == LONG
    assert detect_format("x.jsonl", b'{"question_id": 1, "text": "an answer"}\n') is None


# --- FLASK review files ---------------------------------------------------------------------------


def test_flask_reviews_land_on_the_named_models_responses_and_skills(project, dataset, tmp_path):
    # given reviews of kestrel (from the file name) with a N/A and lower-case skill names
    files = [
        write(
            tmp_path,
            "kestrel_review.jsonl",
            [
                review(501, {"factuality": 5, "conciseness": 4, "readability": "N/A"}),
                review(503, {"logical correctness": 2, "factuality": "n/a"}, tokens=640),
            ],
        )
    ]
    # when
    result = _import(project, dataset, files, judge_name="Paper judge")
    # then one run of an imported judge, done, with its counts and provenance
    (imported,) = result.runs
    run = imported.run
    assert not imported.already_imported and imported.judgments == 2 and imported.scores == 5
    assert run.judge.kind == JudgeKind.IMPORTED and run.judge.name == "Paper judge"
    assert (run.status, run.total, run.done, run.parse_failed) == (RunStatus.DONE, 2, 2, 0)
    assert run.started_at is not None and run.finished_at is not None
    assert run.dataset == dataset and run.campaign is None
    snap = run.settings_snapshot
    digest = hashlib.sha256(files[0][1]).hexdigest()
    assert snap["format"] == FLASK_REVIEW and snap["input_sha256"] == digest
    assert snap["files"] == [
        {"name": "kestrel_review.jsonl", "sha256": digest, "bytes": len(files[0][1])}
    ]
    assert snap["models"] == ["kestrel"] and snap["model_option"] is None
    # and the scores sit on kestrel's responses, never on osprey's
    assert scores_of(run) == {
        ("501", "kestrel", "Factuality"): 5,
        ("501", "kestrel", "Conciseness"): 4,
        ("501", "kestrel", "Readability"): None,
        ("503", "kestrel", "Logical Correctness"): 2,
        ("503", "kestrel", "Factuality"): None,
    }
    na = JudgeScore.objects.filter(run=run, score__isnull=True)
    assert na.count() == 2 and all(s.is_na and s.rubric_id is None for s in na)
    judgment = Judgment.objects.get(run=run, response__item__external_id="503")
    assert judgment.status == JudgmentStatus.OK and judgment.parse_method == "imported"
    assert judgment.request == {"imported": True, "total_tokens": 640}
    assert judgment.raw_output.startswith("The answer to item 503")
    assert (judgment.prompt_tokens, judgment.completion_tokens, judgment.sample_index) == (0, 0, 0)


def test_an_empty_score_dict_is_kept_as_parse_failed_with_the_raw_review(
    project, dataset, tmp_path
):
    files = [
        write(
            tmp_path,
            "x.jsonl",
            [
                review(502, {}, model="osprey", review="I cannot decide on a score here."),
                review(501, {"factuality": 1}, model="osprey"),
            ],
        )
    ]
    run = _import(project, dataset, files, judge_name="J", model="osprey").runs[0].run
    assert (run.total, run.done, run.parse_failed) == (2, 1, 1)
    failed = Judgment.objects.get(run=run, status=JudgmentStatus.PARSE_FAILED)
    assert failed.response.model_name == "osprey" and failed.response.item.external_id == "502"
    assert failed.raw_output == "I cannot decide on a score here." and failed.error
    assert not failed.scores.exists()


def test_the_model_option_wins_over_the_file_name(project, dataset, tmp_path):
    files = [
        write(tmp_path, "kestrel_review.jsonl", [review(501, {"factuality": 2}, model="osprey")])
    ]
    run = _import(project, dataset, files, judge_name="J", model="osprey").runs[0].run
    assert list(scores_of(run)) == [("501", "osprey", "Factuality")]
    assert run.settings_snapshot["model_option"] == "osprey"


def test_bad_reviews_are_all_reported_by_line_and_nothing_is_written(project, dataset, tmp_path):
    # given a file whose good lines are mixed with every kind of bad one
    good = review(501, {"factuality": 4})
    lines = [
        json.dumps(good),  # 1 fine
        json.dumps(review(999, {"factuality": 4})),  # 2 unknown item
        json.dumps(review(502, {"creativity": 4})),  # 3 unknown skill
        json.dumps(review(503, {"factuality": 7})),  # 4 out of range
        json.dumps(review(502, {"readability": 3}, text="Another answer.")),  # 5 other text
        '{"question_id": 503, "review": "cut off',  # 6 bad JSON
        json.dumps(review(501, {"readability": 2})),  # 7 second review
    ]
    files = [
        write(tmp_path, "kestrel_review.jsonl", "\n".join(lines) + "\n"),
        write(tmp_path, "heron_review.jsonl", [review(501, {"factuality": 3})]),
    ]
    before = table_counts()
    # when
    with pytest.raises(JudgeOutputImportRejected) as caught:
        _import(project, dataset, files, judge_name="Paper judge")
    # then every problem is there, in file and line order, and nothing was written
    found = [(p.file, p.line, p.field, p.code) for p in caught.value.problems]
    assert found == [
        ("kestrel_review.jsonl", 2, "question_id", "unknown_item"),
        ("kestrel_review.jsonl", 3, "score.creativity", "unknown_skill"),
        ("kestrel_review.jsonl", 4, "score.factuality", "invalid_score"),
        ("kestrel_review.jsonl", 5, "target_txt", "changed_response"),
        ("kestrel_review.jsonl", 6, "", "invalid_json"),
        ("kestrel_review.jsonl", 7, "question_id", "duplicate_judgment"),
        ("heron_review.jsonl", 1, "", "unknown_model"),
    ]
    messages = {p.code: p.message for p in caught.value.problems}
    assert "'heron'" in messages["unknown_model"] and "1-5" in messages["invalid_score"]
    assert "kestrel_review.jsonl, line 2 [question_id]" in str(caught.value.problems[0])
    assert table_counts() == before
    assert not JudgeConfig.objects.filter(name="Paper judge").exists()


def test_a_flask_review_file_needs_a_judge_name(project, dataset, tmp_path):
    files = [write(tmp_path, "kestrel_review.jsonl", [review(501, {"factuality": 4})])]
    with pytest.raises(JudgeOutputImportRejected) as caught:
        _import(project, dataset, files)
    assert [(p.field, p.code) for p in caught.value.problems] == [("judge", "missing_option")]


def test_the_same_bytes_again_as_the_same_judge_write_nothing(project, dataset, tmp_path):
    files = [
        write(tmp_path, "kestrel_review.jsonl", [review(501, {"factuality": 4}), review(502, {})])
    ]
    first = _import(project, dataset, files, judge_name="Paper judge").runs[0]
    before = table_counts()
    again = _import(project, dataset, files, judge_name="Paper judge")
    assert table_counts() == before
    (run,) = again.runs
    assert run.already_imported and run.run.pk == first.run.pk
    assert (run.judgments, run.scores) == (2, 1) and not again.created
    # while another judge name is another import
    other = _import(project, dataset, files, judge_name="Second opinion")
    assert other.created and JudgeRun.objects.count() == 2


def test_the_same_bytes_for_another_model_are_refused_not_skipped(project, dataset, tmp_path):
    row = review(501, {"factuality": 4})
    del row["target_txt"]  # the review does not say which text it judged
    files = [write(tmp_path, "r.jsonl", [row])]
    _import(project, dataset, files, judge_name="J", model="kestrel")
    with pytest.raises(JudgeOutputImportRejected) as caught:
        _import(project, dataset, files, judge_name="J", model="osprey")
    assert [p.code for p in caught.value.problems] == ["already_imported"]


def test_a_judge_name_used_by_an_llm_judge_is_refused(project, dataset, tmp_path):
    make_judge(project, name="GPT judge")
    files = [write(tmp_path, "kestrel_review.jsonl", [review(501, {"factuality": 4})])]
    before = table_counts()
    with pytest.raises(JudgeOutputImportRejected) as caught:
        _import(project, dataset, files, judge_name="GPT judge")
    assert [p.code for p in caught.value.problems] == ["judge_name_taken"]
    assert table_counts() == before


# --- long tables ----------------------------------------------------------------------------------

LONG_CSV = """item,system,rater,rater_kind,skill,score,rationale
501,kestrel,judge-a,judge,factuality,5,"Right, and short."
501,kestrel,judge-a,judge,Conciseness,4,
501,kestrel,judge-b,judge,FACTUALITY,3,
503,osprey,judge-a,judge,logical_correctness,1,91 = 7 x 13
503,osprey,judge-a,judge,factuality,not applicable,
501,kestrel,ann-1,human,factuality,5,
501,kestrel,ann-2,human,whatever,9,
"""


def test_a_long_table_makes_one_judge_per_rater_and_ignores_human_rows(project, dataset, tmp_path):
    # when
    result = _import(project, dataset, [write(tmp_path, "scores.csv", LONG_CSV)])
    # then
    assert result.format == LONG and result.human_rows == 2
    runs = {r.run.judge.name: r.run for r in result.runs}
    assert set(runs) == {"judge-a", "judge-b"}
    assert all(r.judge.kind == JudgeKind.IMPORTED for r in runs.values())
    assert (runs["judge-a"].total, runs["judge-b"].total) == (2, 1)
    assert scores_of(runs["judge-a"]) == {
        ("501", "kestrel", "Factuality"): 5,
        ("501", "kestrel", "Conciseness"): 4,
        ("503", "osprey", "Logical Correctness"): 1,
        ("503", "osprey", "Factuality"): None,
    }
    assert scores_of(runs["judge-b"]) == {("501", "kestrel", "Factuality"): 3}
    feedback = JudgeScore.objects.get(run=runs["judge-a"], score=5).feedback
    assert feedback == "Right, and short."
    judgment = Judgment.objects.filter(run=runs["judge-a"]).first()
    assert judgment.raw_output == "" and judgment.request == {"imported": True}
    assert runs["judge-a"].settings_snapshot["rater"] == "judge-a"


def test_the_judge_option_picks_one_raters_rows_from_a_jsonl_table(project, dataset, tmp_path):
    rows = [
        {
            "item": 502,
            "system": "osprey",
            "rater": "judge-a",
            "rater_kind": "judge",
            "skill": "Readability",
            "score": 2,
            "rationale": "Too short to help.",
        },
        {
            "item": 502,
            "system": "osprey",
            "rater": "judge-b",
            "rater_kind": "judge",
            "skill": "Readability",
            "score": 5,
        },
    ]
    result = _import(project, dataset, [write(tmp_path, "s.jsonl", rows)], judge_name="judge-a")
    (run,) = result.runs
    assert run.run.judge.name == "judge-a" and result.other_rater_rows == 1
    assert scores_of(run.run) == {("502", "osprey", "Readability"): 2}
    assert not JudgeConfig.objects.filter(name="judge-b").exists()


def test_bad_long_rows_are_reported_by_line_and_nothing_is_written(project, dataset, tmp_path):
    text = (
        "item,system,rater,rater_kind,skill,score\n"
        "501,kestrel,judge-a,judge,factuality,4\n"
        "501,kestrel,judge-a,judge,Readability,8/10\n"
        "502,kestrel,judge-a,judge,Readability,0\n"
        "502,kestrel,judge-a,robot,Readability,3\n"
        "503,heron,judge-a,judge,Readability,3\n"
        "501,kestrel,judge-a,judge,FACTUALITY,2\n"
    )
    before = table_counts()
    with pytest.raises(JudgeOutputImportRejected) as caught:
        _import(project, dataset, [write(tmp_path, "scores.csv", text)])
    assert [(p.line, p.field, p.code) for p in caught.value.problems] == [
        (3, "score", "invalid_score"),
        (4, "score", "invalid_score"),
        (5, "rater_kind", "invalid_value"),
        (6, "system", "unknown_model"),
        (7, "skill", "duplicate_score"),
    ]
    assert "line 2" in caught.value.problems[-1].message
    assert table_counts() == before


def test_a_table_of_human_rows_only_has_nothing_to_import(project, dataset, tmp_path):
    text = "item,system,rater,rater_kind,skill,score\n501,kestrel,ann,human,Factuality,3\n"
    with pytest.raises(JudgeOutputImportRejected) as caught:
        _import(project, dataset, [write(tmp_path, "h.csv", text)])
    assert [p.code for p in caught.value.problems] == ["no_rows"]


# --- the command ----------------------------------------------------------------------------------


def test_the_command_imports_and_prints_a_summary(project, dataset, tmp_path, capsys):
    name, _ = write(tmp_path, "kestrel_review.jsonl", [review(501, {"factuality": 4})])
    call_command(
        "import_judge_outputs",
        str(tmp_path / name),
        "--project",
        project.slug,
        "--dataset",
        dataset.name,
        "--judge",
        "Paper judge",
    )
    out = capsys.readouterr().out
    assert "'Paper judge': run" in out and "1 judgments" in out and "1 scores" in out
    call_command(
        "import_judge_outputs",
        str(tmp_path / name),
        "--project",
        project.slug,
        "--dataset",
        dataset.name,
        "--judge",
        "Paper judge",
    )
    assert "already imported" in capsys.readouterr().out
    assert JudgeRun.objects.count() == 1


def test_the_command_exits_2_printing_every_problem(project, dataset, tmp_path, capsys):
    name, _ = write(
        tmp_path,
        "kestrel_review.jsonl",
        [review(999, {"factuality": 4}), review(501, {"humour": 2})],
    )
    before = table_counts()
    with pytest.raises(SystemExit) as caught:
        call_command(
            "import_judge_outputs",
            str(tmp_path / name),
            "--project",
            project.slug,
            "--dataset",
            dataset.name,
            "--judge",
            "J",
            "--format",
            "flask-review",
        )
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "kestrel_review.jsonl, line 1 [question_id]" in err and "(unknown_item)" in err
    assert "kestrel_review.jsonl, line 2 [score.humour]" in err and "(unknown_skill)" in err
    assert "nothing was written" in err
    assert table_counts() == before


# --- the API --------------------------------------------------------------------------------------


_api = token_client


def _upload(name, rows, **fields):
    body = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return {"files": [SimpleUploadedFile(name, body)], **fields}


def test_the_api_answers_202_and_the_worker_imports(researcher, project, dataset, import_jobs):
    url = f"{API}/projects/{project.slug}/judge-outputs/import/"
    rows = [review(501, {"factuality": 4}), review(503, {})]
    api = _api(researcher)
    before = table_counts()
    created = import_jobs.post(
        api,
        url,
        _upload("kestrel_review.jsonl", rows, dataset=dataset.name, judge="API judge"),
        format="multipart",
    )
    # the request stores the file and answers at once: nothing is read or written yet
    assert created.status_code == 202, created.json()
    job = created.json()
    assert job["status"] == "pending" and job["result"] is None
    assert created["Location"] == job["url"] == f"{API}/judge-output-imports/{job['id']}/"
    assert job["files"] == [{"name": "kestrel_review.jsonl", "bytes": job["bytes_total"]}]
    assert table_counts() == before and import_jobs.queued == [("judge", job["id"])]
    # the worker's task imports it
    import_jobs.run()
    done = api.get(job["url"]).json()
    assert done["status"] == "succeeded" and done["problem_count"] == 0
    body = done["result"]
    (run,) = body["runs"]
    assert body["format"] == FLASK_REVIEW and body["created"] and not run["already_imported"]
    assert (run["judgments"], run["scores"]) == (2, 1)
    assert run["run"]["judge_name"] == "API judge" and run["run"]["status"] == "done"
    assert (run["run"]["total"], run["run"]["parse_failed"]) == (2, 1)
    again = import_jobs.post(
        api,
        url,
        _upload("kestrel_review.jsonl", rows, dataset=dataset.name, judge="API judge"),
        format="multipart",
    )
    import_jobs.run()
    repeat = api.get(again.json()["url"]).json()["result"]
    assert repeat["runs"][0]["already_imported"] and not repeat["created"]
    assert JudgeRun.objects.count() == 1
    assert JudgeRun.objects.get().created_by == researcher
    assert JudgeOutputImportJob.objects.filter(status="succeeded").count() == 2


def test_the_api_job_lists_every_problem_and_nothing_is_written(
    researcher, project, dataset, import_jobs
):
    url = f"{API}/projects/{project.slug}/judge-outputs/import/"
    before = table_counts()
    api = _api(researcher)
    response = import_jobs.post(
        api,
        url,
        _upload(
            "kestrel_review.jsonl",
            [review(501, {"factuality": 4}), review(502, {"readability": 6})],
            dataset=dataset.name,
            judge="API judge",
        ),
        format="multipart",
    )
    assert response.status_code == 202
    import_jobs.run()
    body = api.get(response.json()["url"]).json()
    assert body["status"] == "rejected" and body["result"] is None and body["error"] == ""
    assert body["problem_count"] == 1
    assert body["problems"] == [
        {
            "file": "kestrel_review.jsonl",
            "line": 2,
            "field": "score.readability",
            "code": "invalid_score",
            "message": body["problems"][0]["message"],
        },
    ]
    unknown = api.post(
        url, _upload("k.jsonl", [review(501, {})], dataset="Nope", judge="J"), format="multipart"
    )
    assert unknown.status_code == 400 and unknown.json()["code"] == "unknown_dataset"
    no_files = api.post(url, {"dataset": dataset.name}, format="multipart")
    assert no_files.status_code == 400
    assert [p["field"] for p in no_files.json()["problems"]] == ["files"]
    assert table_counts() == before


def test_a_crashed_job_records_the_error_and_writes_nothing(
    researcher, project, dataset, import_jobs, monkeypatch
):
    monkeypatch.setattr(
        output_imports._Import, "_write_run", mock.Mock(side_effect=RuntimeError("disk full"))
    )
    response = import_jobs.post(
        _api(researcher),
        f"{API}/projects/{project.slug}/judge-outputs/import/",
        _upload(
            "kestrel_review.jsonl",
            [review(501, {"factuality": 4})],
            dataset=dataset.name,
            judge="API judge",
        ),
        format="multipart",
    )
    import_jobs.run()
    job = JudgeOutputImportJob.objects.get(pk=response.json()["id"])
    assert job.status == "failed" and job.error == "RuntimeError: disk full"
    assert not JudgeConfig.objects.filter(name="API judge").exists()
    # a redelivered message finds the job finished and does nothing
    assert judge_output_import_job_run(job_id=job.pk) is None


def test_the_job_of_another_project_is_refused(
    researcher, annotator, project, dataset, import_jobs
):
    response = import_jobs.post(
        _api(researcher),
        f"{API}/projects/{project.slug}/judge-outputs/import/",
        _upload("kestrel_review.jsonl", [review(501, {})], dataset=dataset.name, judge="J"),
        format="multipart",
    )
    assert _api(annotator).get(response.json()["url"]).status_code == 403


def test_annotators_and_researchers_of_other_projects_are_refused(
    annotator, django_user_model, project, dataset
):
    elsewhere = project_create(slug="elsewhere", name="Elsewhere")
    stranger = django_user_model.objects.create_user(username="rex", password="pw-rex")
    membership_set(project=elsewhere, user=stranger, role=ProjectRole.RESEARCHER)
    url = f"{API}/projects/{project.slug}/judge-outputs/import/"

    def post(user):
        data = _upload(
            "kestrel_review.jsonl",
            [review(501, {"factuality": 4})],
            dataset=dataset.name,
            judge="Sneaky",
        )
        return _api(user).post(url, data, format="multipart")

    assert post(annotator).status_code == 403
    assert post(stranger).status_code == 404
    assert APIClient().post(url, {}, format="multipart").status_code == 401
    assert not JudgeConfig.objects.filter(name="Sneaky").exists()
    assert Response.objects.filter(judgments__isnull=False).count() == 0


def test_an_imported_run_shows_on_the_judge_and_run_pages(
    researcher_client, project, dataset, tmp_path
):
    files = [
        write(tmp_path, "kestrel_review.jsonl", [review(501, {"factuality": 4}), review(502, {})])
    ]
    run = _import(project, dataset, files, judge_name="Paper judge").runs[0].run
    judgment = Judgment.objects.filter(run=run).first()
    for url in (
        f"/judges/{run.judge_id}/",
        f"/judge-runs/{run.pk}/",
        f"/judgments/{judgment.pk}/",
        f"/projects/{project.slug}/judges/",
    ):
        page = researcher_client.get(url)
        assert page.status_code == 200, url
        assert "Paper judge" in page.content.decode(), url


def test_an_imported_judge_named_like_an_existing_judge_is_refused(project, dataset, tmp_path):
    # was: a judge "Kеstrel" (Cyrillic е) beside "Kestrel", its runs told apart by nobody
    first = [write(tmp_path, "kestrel_review.jsonl", [review(501, {"factuality": 5})])]
    _import(project, dataset, first, judge_name="Kestrel")
    before = table_counts()
    files = [write(tmp_path, "kestrel_review.jsonl", [review(502, {"readability": 4})])]
    for name, code, message in [
        ("Kеstrel", "lookalike_name", "'Kеstrel' looks like the existing judge 'Kestrel'"),
        ("Kes\u200btrel", "invalid_name", "an invisible character U+200B at position 3"),
    ]:
        with pytest.raises(JudgeOutputImportRejected) as info:
            _import(project, dataset, files, judge_name=name)
        assert [(p.field, p.code) for p in info.value.problems] == [("judge", code)]
        assert message in info.value.problems[0].message
    assert table_counts() == before
