"""Exports of a project's scores (analytics/exports.py, docs/EXPORTS.md): the exact content
of each format on a small project built through the real services (a campaign scored by two
people, an LLM judge run, imported scores), the formula-injection guard, N/A, the FLASK review
round trip through judging.output_imports, the job lifecycle (task, redelivery, failure,
download), access per role on the page and the API, the command, and streaming."""

from __future__ import annotations

import csv
import io
import json
import types
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from unittest import mock

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from analytics.exports import selectors as export_selectors
from analytics.exports.selectors import ExportFilters, flask_review_lines
from analytics.exports.services import (
    LONG_COLUMNS,
    MAX_ACTIVE_EXPORTS,
    ExportOptionsError,
    ScoreExport,
    csv_safe,
    export_files_expire,
    export_job_create,
    export_job_run,
    export_jobs_fail_stale,
    export_options_clean,
)
from analytics.imports.services import scores_import
from analytics.models import ExportJob, ExportStatus, ScoreImport
from analytics.tasks import export_run_task
from annotation.campaigns.services import campaign_activate, campaign_create
from annotation.models import HumanScore, Response, Skill
from annotation.services.assignments import (
    ScoreInput,
    assignment_claim_next,
    human_score_submit,
    task_skills,
)
from devtools.openai_server import FakeOpenAIServer
from flaskweb.jobs import JobStatus
from judging.models import JudgeRun, JudgeScore, Judgment, RunStatus
from judging.output_imports.services import JudgeOutputImportRejected, judge_outputs_import
from judging.services import judge_batch, judge_run_create
from tests.annotation.test_assignments import make_dataset
from tests.clients import token_client
from tests.conftest import wait_for
from tests.judging.test_runs import llm_judge, response_ids, running

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
STAMP = "2026-03-01T12:00:00Z"
SKILLS = ("Factuality", "Comprehension", "Readability")
# (system, skill) -> (alice's score, zoe's score); None is N/A
HUMAN = {
    ("m1", "Factuality"): (4, 3),
    ("m1", "Comprehension"): (3, 3),
    ("m1", "Readability"): (5, None),
    ("m2", "Factuality"): (2, 1),
    ("m2", "Comprehension"): (None, 2),
    ("m2", "Readability"): (4, 4),
}
FORMULA = '=HYPERLINK("http://x")'
IMPORTED = (
    "item,system,rater,rater_kind,skill,score,rationale\n"
    "i0,m1,alice,human,Readability,2,second look\n"
    "i0,m1,=ext,judge,Readability,N/A,\n"
    "i0,m2,=ext,judge,Readability,3,\n"
)


@dataclass
class Scored:
    project: object
    dataset: object
    run: JudgeRun
    batch: ScoreImport
    rubric_version: int  # the campaign's pinned rubric versions (all the same here)
    judge_rubric_version: int


@pytest.fixture
def scored(project, tmp_path, annotator, django_user_model) -> Scored:
    """Item i0 answered by m1 and m2, scored on three skills by alice and zoe in campaign C,
    by the LLM judge `gpt` (the project's local OpenAI-compatible server), and by imported
    rows (alice again, and the judge `=ext`). Timestamps and latencies are then pinned, so
    the exports can be compared with literal text."""
    zoe = django_user_model.objects.create_user("zoe", password="pw-zoe")
    dataset = make_dataset(project, tmp_path, items=1, models=("m1", "m2"))
    campaign = campaign_create(
        project=project, dataset=dataset, name="C", overlap=2, annotators=[annotator, zoe]
    )
    campaign_activate(campaign=campaign)
    for n, person in enumerate([annotator, zoe]):
        while (a := assignment_claim_next(campaign=campaign, annotator=person)) is not None:
            system = Response.objects.get(pk=a.task.response_id).model_name
            scores = [
                ScoreInput(
                    s.skill_id,
                    HUMAN[(system, s.name)][n],
                    rationale=FORMULA if (n, system, s.name) == (0, "m1", "Readability") else "",
                    time_ms=1500 if n == 0 else None,
                )
                for s in task_skills(assignment=a)
            ]
            human_score_submit(
                assignment_id=a.pk,
                annotator=person,
                scores=scores,
                active_ms=[7000, 9000][n],
                language=["es", ""][n],  # alice's pages were in Spanish; zoe's unknown (API)
            )
    with FakeOpenAIServer(style="json") as server:
        judge = llm_judge(project, server, name="gpt")
        run = running(judge_run_create(judge=judge, dataset=dataset))
        # every response in one batch, as a worker's task judges them: one engine round trip
        judge_batch(run_id=run.pk, response_ids=response_ids(run))
    run.refresh_from_db()
    assert run.status == RunStatus.DONE
    batch = scores_import(
        project_slug=project.slug, files=[("ext.csv", IMPORTED.encode())], dataset_name="D"
    ).batch
    HumanScore.objects.update(created_at=T0, updated_at=T0)
    Judgment.objects.filter(run=run).update(latency_ms=1234, created_at=T0, updated_at=T0)
    ScoreImport.objects.update(created_at=T0, updated_at=T0)
    return Scored(
        project=project,
        dataset=dataset,
        run=run,
        batch=batch,
        rubric_version=HumanScore.objects.values_list("rubric__version", flat=True).first(),
        judge_rubric_version=JudgeScore.objects.values_list("rubric__version", flat=True).first(),
    )


def export_text(project, kind, fmt="", filters=None, **kwargs) -> str:
    options = export_options_clean(project=project, kind=kind, fmt=fmt, filters=filters)
    return "".join(ScoreExport(options, **kwargs).chunks())


def judge_values(run) -> dict[tuple[str, str], tuple[str, str]]:
    """(system, skill) -> (score as written, feedback) of the run's scores."""
    return {
        (system, skill): (str(score) if score is not None else "", feedback)
        for system, skill, score, feedback in JudgeScore.objects.filter(run=run).values_list(
            "response__model_name", "skill__name", "score", "feedback"
        )
    }


def shown(value) -> str:
    return "N/A" if value is None else str(value)


# --- the formats ----------------------------------------------------------------------------------


def test_the_long_csv_has_one_row_per_score_from_every_source(scored):
    # when
    text = export_text(scored.project, "long", "csv", {"skill": ["Readability"]})
    # then
    j, rv, jv = judge_values(scored.run), scored.rubric_version, scored.judge_rubric_version
    run, batch = f"run:{scored.run.pk}", f"import:{scored.batch.pk}"
    common = ["demo-project", "D", "i0"]
    expected = [list(LONG_COLUMNS)]
    for system, alice, zoe, ext in (("m1", "5", "N/A", "N/A"), ("m2", "4", "4", "3")):
        expected += [
            [
                *common,
                system,
                "Readability",
                "alice",
                "human",
                alice,
                "false",
                "'" + FORMULA if system == "m1" else "",
                "1500",
                str(rv),
                "",
                "campaign:C",
                STAMP,
                STAMP,
                "",
                f"built-in v{rv}",  # the campaign pinned the built-in rubrics
            ],
            [
                *common,
                system,
                "Readability",
                "zoe",
                "human",
                zoe,
                str(zoe == "N/A").lower(),
                "",
                "9000",
                str(rv),
                "",
                "campaign:C",
                STAMP,
                STAMP,
                "",
                f"built-in v{rv}",  # the campaign pinned the built-in rubrics
            ],
            [
                *common,
                system,
                "Readability",
                "gpt",
                "judge",
                j[system, "Readability"][0],
                "false",
                j[system, "Readability"][1],
                "1234",
                str(jv),
                "1",
                run,
                STAMP,
                STAMP,
                "0",
                f"built-in v{jv}",
            ],
        ]
        if system == "m1":
            expected.append(
                [
                    *common,
                    "m1",
                    "Readability",
                    "alice",
                    "human",
                    "2",
                    "false",
                    "second look",
                    "",
                    "",
                    "",
                    batch,
                    STAMP,
                    STAMP,
                    "",
                    "",
                ]
            )
        expected.append(
            [
                *common,
                system,
                "Readability",
                "'=ext",
                "judge",
                ext,
                str(ext == "N/A").lower(),
                "",
                "",
                "",
                "",
                batch,
                STAMP,
                STAMP,
                "",
                "",
            ]
        )
    # the study columns last (platform, worker_id): blank, as nobody came through a study link
    expected = [expected[0], *(row + ["", ""] for row in expected[1:])]
    # then the adjudicated columns: empty, as no reviewer settled a score
    expected = [expected[0], *(row + ["", "", ""] for row in expected[1:])]
    # and the language each person's task was shown in: alice's Spanish, unknown otherwise
    expected = [
        expected[0],
        *(
            row + ["es" if row[5] == "alice" and row[13] == "campaign:C" else ""]
            for row in expected[1:]
        ),
    ]
    assert list(csv.reader(io.StringIO(text))) == expected
    assert "\r" not in text and text.endswith("\n")
    assert '"\'=HYPERLINK(""http://x"")"' in text  # the guard, then CSV quoting


def test_the_long_jsonl_keeps_types_and_writes_na_as_the_importers_na(scored):
    text = export_text(
        scored.project, "long", "jsonl", {"rater_kind": "judge", "skill": ["Readability"]}
    )
    j, jv = judge_values(scored.run), scored.judge_rubric_version
    lines = [json.loads(line) for line in text.splitlines()]

    def row(system, rater, score, **extra):
        base = dict(
            project="demo-project",
            dataset="D",
            item="i0",
            system=system,
            skill="Readability",
            rater=rater,
            rater_kind="judge",
            score="N/A" if score is None else score,
            is_na=score is None,
            rationale="",
            time_on_task_ms=None,
            rubric_version=None,
            prompt_version=None,
            source=f"import:{scored.batch.pk}",
            created_at=STAMP,
            updated_at=STAMP,
            sample=None,
            rubric_label=None,
            platform=None,
            worker_id=None,
            adjudicated_score=None,
            adjudicated_note=None,
            adjudicated_by=None,
            language=None,
        )
        return base | extra

    def gpt(system):
        score, feedback = j[system, "Readability"]
        return row(
            system,
            "gpt",
            int(score),
            rationale=feedback,
            time_on_task_ms=1234,
            rubric_version=jv,
            prompt_version=1,
            source=f"run:{scored.run.pk}",
            sample=0,
            rubric_label=f"built-in v{jv}",
        )

    assert lines == [gpt("m1"), row("m1", "=ext", None), gpt("m2"), row("m2", "=ext", 3)]
    assert list(lines[0]) == list(LONG_COLUMNS)  # the CSV's column order
    assert '"score": "N/A", "is_na": true' in text and "'=ext" not in text  # no guard in JSON


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_long_export_imports_back_as_the_same_scores(scored, fmt):
    """The long format is the importer's: N/A is written as N/A, so an export of a project
    loads into another with import_scores, every score (N/A included) unchanged."""
    from analytics.imports.services import scores_import
    from analytics.models import ImportedScore

    def without_imported(text: str) -> str:
        # the fixture's imported rows repeat a campaign rater on the same response (two
        # sources), which one import may not hold twice: keep the campaign and run rows
        return "".join(line for line in text.splitlines(True) if "import:" not in line)

    text = without_imported(export_text(scored.project, "long", fmt))
    result = scores_import(
        project_slug="copy", files=[(f"scores.{fmt}", text.encode())], create_project=True
    )
    exported = [
        json.loads(line)
        for line in without_imported(export_text(scored.project, "long", "jsonl")).splitlines()
    ]
    stored = ImportedScore.objects.filter(batch=result.batch).select_related(
        "response__item", "skill"
    )
    copied = {
        (
            s.response.item.external_id,
            s.response.model_name,
            s.skill.name,
            s.rater,
            s.rater_kind,
        ): "N/A" if s.is_na else s.value
        for s in stored
    }
    expected = {
        (r["item"], r["system"], r["skill"], r["rater"], r["rater_kind"]): r["score"]
        for r in exported
    }
    assert len(expected) > 10 and "N/A" in expected.values()
    assert copied == expected and len(copied) == result.batch.scores_created


def test_the_wide_csv_has_one_column_per_annotator_and_judge(scored):
    text = export_text(scored.project, "wide")
    j = judge_values(scored.run)
    by_id = sorted(Skill.objects.filter(name__in=SKILLS, project=None).values_list("pk", "name"))
    expected = [
        [
            "dataset",
            "item",
            "system",
            "skill",
            "human:alice",
            "human:zoe",
            "judge:=ext",
            "judge:gpt",
        ],
    ]
    for system in ("m1", "m2"):
        for _, skill in by_id:
            alice, zoe = (shown(v) for v in HUMAN[system, skill])
            if (system, skill) == ("m1", "Readability"):
                alice = "3.5"  # the campaign's 5 and the imported 2
            ext = {"m1": "N/A", "m2": "3"}[system] if skill == "Readability" else ""
            expected.append(["D", "i0", system, skill, alice, zoe, ext, j[system, skill][0]])
    assert list(csv.reader(io.StringIO(text))) == expected


def test_the_wide_table_averages_a_judges_samples_and_narrows_to_the_raters_asked(scored):
    # given a second sample of every judgment of the run, scoring one less (at least 1)
    for judgment in Judgment.objects.filter(run=scored.run):
        copy = Judgment.objects.create(
            run=scored.run,
            response_id=judgment.response_id,
            sample_index=1,
            status=judgment.status,
            raw_output="again",
        )
        for s in JudgeScore.objects.filter(judgment=judgment):
            JudgeScore.objects.create(
                judgment=copy,
                run=scored.run,
                response_id=s.response_id,
                skill_id=s.skill_id,
                score=max(1, s.score - 1),
            )
    # when
    text = export_text(scored.project, "wide", filters={"rater_kind": "judge", "judge": ["gpt"]})
    # then
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["dataset", "item", "system", "skill", "judge:gpt"]
    means = {}
    for system, skill, score in JudgeScore.objects.filter(run=scored.run).values_list(
        "response__model_name", "skill__name", "score"
    ):
        means.setdefault((system, skill), []).append(score)
    for _, _, system, skill, cell in rows[1:]:
        values = means[system, skill]
        assert float(cell) == sum(values) / len(values)


def test_the_flask_review_file_has_one_line_per_response_in_the_review_layout(scored):
    text = export_text(scored.project, "flask_review", filters={"judge": ["gpt"]})
    lines = [json.loads(line) for line in text.splitlines()]
    order = dict(Skill.objects.filter(name__in=SKILLS, project=None).values_list("name", "order"))
    expected = []
    for judgment in Judgment.objects.filter(run=scored.run).select_related("response__item"):
        scores = sorted(
            JudgeScore.objects.filter(judgment=judgment).values_list("skill__name", "score"),
            key=lambda pair: (order[pair[0]], pair[0]),
        )
        expected.append(
            {
                "question_id": "i0",
                "model_id": judgment.response.model_name,
                "text": "Question 0",
                "answer": "",
                "metrics": [name for name, _ in scores],
                "target_txt": judgment.response.text,
                "review": judgment.raw_output,
                "score": dict(scores),
                "total_tokens_step4": judgment.prompt_tokens + judgment.completion_tokens,
            }
        )
    assert lines == sorted(expected, key=lambda line: line["model_id"])


@pytest.mark.parametrize("source", ["llm", "imported"])
def test_a_judges_flask_review_export_imports_back_with_equal_scores(scored, source):
    # given a judge's finished run: the LLM judge's, or one imported with N/A and a review
    # whose answer could not be read
    if source == "llm":
        name = "gpt"
    else:
        name = "graded"
        table = (
            "item,system,rater,rater_kind,skill,score\n"
            "i0,m1,graded,judge,Factuality,N/A\ni0,m1,graded,judge,Readability,2\n"
            "i0,m2,graded,judge,Comprehension,5\n"
        )
        judge_outputs_import(
            project=scored.project, dataset=scored.dataset, files=[("g.csv", table.encode())]
        )
    original = JudgeRun.objects.filter(judge__name=name).latest("pk")
    # when each system's reviews are exported to the file name the FLASK scripts use
    files = []
    for system in ("m1", "m2"):
        options = export_options_clean(
            project=scored.project,
            kind="flask_review",
            filters={"judge": [name], "system": [system]},
        )
        files.append((options.download_name, "".join(ScoreExport(options).chunks()).encode()))
    assert [f[0] for f in files] == ["m1_review.jsonl", "m2_review.jsonl"]
    # ... and imported as a new judge
    result = judge_outputs_import(
        project=scored.project, dataset=scored.dataset, files=files, judge_name=name + "-copy"
    )
    # then
    [imported] = result.runs
    assert not imported.already_imported

    def scores(run):
        return sorted(
            JudgeScore.objects.filter(run=run).values_list(
                "response_id", "skill__name", "score", "is_na"
            )
        )

    assert scores(imported.run) == scores(original) and scores(original)

    def reviews(run):
        return sorted(Judgment.objects.filter(run=run).values_list("response_id", "raw_output"))

    assert reviews(imported.run) == reviews(original)
    # the whole run in one file holds the same lines
    whole = export_text(scored.project, "flask_review", filters={"judge": [name]})
    assert sorted(whole.splitlines()) == sorted(
        line for _, data in files for line in data.decode().splitlines()
    )
    # ... and imports back as it is, under its download name, which names no model: each
    # line's model_id does (it was once read from the file name and rejected)
    options = export_options_clean(
        project=scored.project, kind="flask_review", filters={"judge": [name]}
    )
    assert options.download_name.endswith("-reviews.jsonl")
    result = judge_outputs_import(
        project=scored.project,
        dataset=scored.dataset,
        files=[(options.download_name, whole.encode())],
        judge_name=name + "-whole",
    )
    [whole_run] = result.runs
    assert scores(whole_run.run) == scores(original)
    assert reviews(whole_run.run) == reviews(original)
    # a model option that contradicts the lines' model_id is refused, and nothing is written
    runs_before = JudgeRun.objects.count()
    with pytest.raises(JudgeOutputImportRejected) as refused:
        judge_outputs_import(
            project=scored.project,
            dataset=scored.dataset,
            files=[("m1_review.jsonl", whole.encode())],
            judge_name=name + "-forced",
            model="m1",
        )
    codes = {p.code for p in refused.value.problems}
    assert codes == {"model_conflict"}, codes
    assert JudgeRun.objects.count() == runs_before


def test_csv_safe_neutralises_formula_starts_and_leaves_numbers_alone():
    for text in ("=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"):
        assert csv_safe(text) == "'" + text
    for value in ("a=b", "", "plain", -1, -0.5, 3.5, 0, None, True):
        assert csv_safe(value) == value


def test_numeric_scores_are_written_as_numbers_even_when_negative(project, db):
    # given an imported judge on a raw scale (a log probability)
    scores_import(
        project_slug=project.slug,
        files=[
            (
                "raw.csv",
                b"item,system,rater,rater_kind,skill,score\n-7,m1,-lp,judge,Readability,-0.25\n",
            )
        ],
        judge_scale_raw=True,
    )
    # when
    long = list(csv.reader(io.StringIO(export_text(project, "long"))))
    wide = list(csv.reader(io.StringIO(export_text(project, "wide"))))
    # then the score cell is the number; the text cells that look like formulas are guarded
    assert long[1][2] == "'-7" and long[1][5] == "'-lp" and long[1][7] == "-0.25"
    assert wide == [
        ["dataset", "item", "system", "skill", "judge:-lp"],
        ["Imported scores", "'-7", "m1", "Readability", "-0.25"],
    ]


def test_bad_options_are_refused_per_field(scored):
    with pytest.raises(ExportOptionsError) as caught:
        export_options_clean(
            project=scored.project,
            kind="wide",
            fmt="jsonl",
            filters={
                "skill": ["Nope"],
                "judge": ["who"],
                "campaign": "X",
                "dataset": "Y",
                "system": ["m9"],
                "rater_kind": "robot",
                "colour": "red",
            },
        )
    assert set(caught.value.errors) == {
        "format",
        "skill",
        "judge",
        "campaign",
        "dataset",
        "system",
        "rater_kind",
        "filters",
    }
    with pytest.raises(ExportOptionsError) as caught:
        export_options_clean(project=scored.project, kind="flask_review", filters={})
    assert "exactly one judge" in caught.value.errors["judge"][0]
    with pytest.raises(ExportOptionsError) as caught:
        export_options_clean(project=scored.project, kind="flask_review", filters={"judge": "=ext"})
    assert "long table" in caught.value.errors["judge"][0]


def test_a_campaign_export_has_its_scores_and_the_judges_of_its_responses(scored):
    rows = list(
        csv.DictReader(io.StringIO(export_text(scored.project, "long", filters={"campaign": "C"})))
    )
    sources = {row["source"].split(":")[0] for row in rows}
    assert sources == {"campaign", "run", "import"}
    assert {r["rater"] for r in rows if r["source"].startswith("import")} == {"'=ext"}
    assert len(rows) == 12 + 6 + 2


# --- streaming ------------------------------------------------------------------------------------


def test_the_writer_streams_chunks_of_rows(scored):
    options = export_options_clean(project=scored.project, kind="long", fmt="csv")
    export = ScoreExport(options, chunk_rows=4)
    chunks = export.chunks()
    assert isinstance(chunks, types.GeneratorType)
    first = next(chunks)
    assert export.rows == 4 and first.count("\n") == 1 + 4  # the header and four rows
    rest = list(chunks)
    assert export.rows == 12 + 6 + 3 and len(rest) == 5  # 21 rows: 4+4+4+4+4+1
    assert all(chunk.count("\n") <= 4 for chunk in rest)


def test_the_score_queries_stream_from_the_database(scored, monkeypatch):
    """Every source is read with QuerySet.iterator (a server-side cursor on PostgreSQL)."""
    calls = []
    original = export_selectors.QuerySet.iterator

    def spy(self, chunk_size=None):
        calls.append((self.model.__name__, chunk_size))
        return original(self, chunk_size=chunk_size)

    monkeypatch.setattr(export_selectors.QuerySet, "iterator", spy)
    export_text(scored.project, "long")
    assert sorted(calls) == sorted(
        [(m, export_selectors.FETCH_CHUNK) for m in ("HumanScore", "JudgeScore", "ImportedScore")]
    )


def test_review_scores_are_read_per_chunk_of_judgments(scored):
    filters = ExportFilters()
    with CaptureQueriesContext(connection) as one_chunk:
        assert len(list(flask_review_lines(run_id=scored.run.pk, filters=filters))) == 2
    with CaptureQueriesContext(connection) as per_line:
        list(flask_review_lines(run_id=scored.run.pk, filters=filters, chunk_size=1))
    assert len(per_line) == len(one_chunk) + 1  # one score query per chunk of judgments


# --- jobs -----------------------------------------------------------------------------------------


def test_a_job_is_dispatched_on_commit_runs_once_and_is_downloaded(
    scored, researcher, researcher_client, django_capture_on_commit_callbacks
):
    # given
    with (
        mock.patch.object(export_run_task, "delay") as delay,
        django_capture_on_commit_callbacks(execute=True),
    ):
        job = export_job_create(
            project=scored.project, kind="long", fmt="csv", requested_by=researcher
        )
    delay.assert_called_once_with(job.pk)
    assert job.status == ExportStatus.PENDING
    # when the task runs
    export_run_task.apply(args=[job.pk])
    # then
    job.refresh_from_db()
    assert job.status == ExportStatus.DONE and job.rows == 21 and job.error == ""
    assert job.started_at <= job.finished_at
    with job.file.open("rb") as f:
        assert f.read().decode() == export_text(scored.project, "long", "csv")
    # a redelivered message changes nothing
    before = (job.file.name, job.finished_at)
    export_run_task(job.pk)
    job.refresh_from_db()
    assert (job.file.name, job.finished_at, job.status) == (*before, ExportStatus.DONE)
    # the page's download link
    response = researcher_client.get(f"/exports/{job.pk}/download/")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="demo-project-scores-long.csv"'
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert b"".join(response.streaming_content).decode() == export_text(scored.project, "long")


def test_a_failing_export_is_marked_failed_with_the_error(scored, monkeypatch):
    job = export_job_create(project=scored.project, kind="wide", enqueue=False)

    def broken(self):
        yield "dataset,item\n"
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(ScoreExport, "chunks", broken)
    job = export_job_run(job_id=job.pk)
    assert job.status == ExportStatus.FAILED and job.error == "RuntimeError: the disk is full"
    assert not job.file and job.finished_at is not None
    assert export_job_run(job_id=job.pk) is None  # a failed job is not run again


def test_options_that_no_longer_hold_fail_the_job_with_the_reason(scored):
    job = ExportJob.objects.create(
        project=scored.project, kind="long", format="csv", filters={"skill": ["Gone"]}
    )
    job = export_job_run(job_id=job.pk)
    assert job.status == ExportStatus.FAILED
    assert job.error == "skill: not a skill of the project: Gone"


def test_a_missing_job_is_a_no_op_and_stale_running_jobs_fail(scored):
    assert export_job_run(job_id=999_999) is None
    job = export_job_create(project=scored.project, kind="long", enqueue=False)
    ExportJob.objects.filter(pk=job.pk).update(status=ExportStatus.RUNNING, started_at=T0)
    assert export_jobs_fail_stale(older_than_seconds=60) == 1
    job.refresh_from_db()
    assert job.status == ExportStatus.FAILED and "worker lost" in job.error


def test_exports_share_the_job_statuses_the_flaskweb_transitions_write():
    # export jobs are claimed, finished and failed by flaskweb.jobs, which write JobStatus
    for status in ("PENDING", "RUNNING", "FAILED"):
        assert ExportStatus[status].value == JobStatus[status].value


def test_export_files_are_deleted_after_their_retention(scored):
    old = export_job_run(
        job_id=export_job_create(project=scored.project, kind="long", enqueue=False).pk
    )
    new = export_job_run(
        job_id=export_job_create(project=scored.project, kind="wide", enqueue=False).pk
    )
    path = old.file.path
    ExportJob.objects.filter(pk=old.pk).update(finished_at=T0)
    assert export_files_expire(older_than_days=7) == 1
    old.refresh_from_db()
    new.refresh_from_db()
    assert old.status == ExportStatus.EXPIRED and not old.file and "7 days" in old.error
    assert not Path(path).exists()
    assert new.status == ExportStatus.DONE and Path(new.file.path).exists()
    assert export_files_expire(older_than_days=7) == 0  # idempotent


def test_a_project_has_a_bounded_number_of_waiting_exports(scored):
    for _ in range(MAX_ACTIVE_EXPORTS):
        export_job_create(project=scored.project, kind="long", enqueue=False)
    with pytest.raises(ExportOptionsError) as caught:
        export_job_create(project=scored.project, kind="long", enqueue=False)
    assert "non_field_errors" in caught.value.errors


# --- the page -------------------------------------------------------------------------------------

PAGE = "/projects/demo-project/analytics/exports/"


def test_the_page_asks_for_an_export_and_lists_the_jobs(scored, researcher_client):
    # when
    response = researcher_client.post(
        PAGE, {"kind": "flask_review", "judge": ["gpt"], "system": "m1, m2"}
    )
    # then
    assert response.status_code == 302
    job = ExportJob.objects.get()
    assert (job.kind, job.format) == ("flask_review", "jsonl")
    assert job.filters == {"judge": ["gpt"], "system": ["m1", "m2"], "run": scored.run.pk}
    page = researcher_client.get(PAGE)
    assert page.status_code == 200 and b"<html" in page.content
    assert b'value="=ext"' in page.content  # imported judges can be chosen too
    assert b'id="export-jobs"' in page.content and b'hx-trigger="every 2s"' in page.content


def test_form_errors_come_back_as_200_in_the_panel(scored, researcher_client):
    response = researcher_client.post(
        PAGE, {"kind": "wide", "format": "jsonl"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200 and b"<html" not in response.content
    assert b'id="export-panel"' in response.content and b"a wide export is written as csv" in (
        response.content
    )
    assert not ExportJob.objects.exists()


def test_an_htmx_post_swaps_the_panel_with_the_new_job(scored, researcher_client):
    response = researcher_client.post(PAGE, {"kind": "long"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and b"<html" not in response.content
    job = ExportJob.objects.get()
    assert f'id="export-{job.pk}"'.encode() in response.content
    assert b'hx-trigger="every 2s"' in response.content


def test_the_job_list_polls_while_a_job_is_unfinished_then_stops_with_286(
    scored, researcher_client
):
    job = export_job_create(project=scored.project, kind="long", enqueue=False)
    polled = researcher_client.get(PAGE, HTTP_HX_REQUEST="true")
    assert polled.status_code == 200 and b"<html" not in polled.content
    assert b'hx-trigger="every 2s"' in polled.content and b"<form" not in polled.content
    export_job_run(job_id=job.pk)
    done = researcher_client.get(PAGE, HTTP_HX_REQUEST="true")
    assert done.status_code == 286 and b"hx-trigger" not in done.content
    assert f"/exports/{job.pk}/download/".encode() in done.content


def test_the_page_reads_a_fixed_number_of_queries(
    scored, researcher, researcher_client, django_assert_num_queries
):
    export_job_create(project=scored.project, kind="long", requested_by=researcher, enqueue=False)
    with CaptureQueriesContext(connection) as one:
        researcher_client.get(PAGE)
    for _ in range(3):
        export_job_create(
            project=scored.project, kind="wide", requested_by=researcher, enqueue=False
        )
    with django_assert_num_queries(len(one)):
        researcher_client.get(PAGE)


def test_the_page_and_the_download_are_for_project_staff_only(
    scored, annotator_client, outsider_client, researcher_client
):
    job = export_job_create(project=scored.project, kind="long", enqueue=False)
    export_job_run(job_id=job.pk)
    download = f"/exports/{job.pk}/download/"
    assert annotator_client.get(PAGE).status_code == 403
    assert outsider_client.get(PAGE).status_code == 404
    assert annotator_client.get(download).status_code == 403
    assert outsider_client.get(download).status_code == 404
    assert researcher_client.put(PAGE).status_code == 405
    assert researcher_client.post(download).status_code == 405
    assert researcher_client.get("/exports/999999/download/").status_code == 404


def test_an_unfinished_export_has_nothing_to_download(scored, researcher_client):
    job = export_job_create(project=scored.project, kind="long", enqueue=False)
    assert researcher_client.get(f"/exports/{job.pk}/download/").status_code == 404


# --- the API --------------------------------------------------------------------------------------

API = "/api/v1"


api = token_client


def test_the_api_creates_follows_and_downloads_an_export(
    scored, researcher, django_capture_on_commit_callbacks
):
    client = api(researcher)
    # when
    with django_capture_on_commit_callbacks() as callbacks:
        created = client.post(
            f"{API}/projects/demo-project/exports/",
            {"kind": "long", "format": "jsonl", "skill": ["Readability"], "rater_kind": "judge"},
            format="json",
        )
    # then
    assert created.status_code == 201, created.json()
    body = created.json()
    job_id = body["id"]
    assert len(callbacks) == 1
    assert body["status"] == "pending" and body["requested_by"] == "rita"
    assert body["filters"] == {"skill": ["Readability"], "rater_kind": "judge"}
    assert body["urls"] == {
        "self": f"{API}/exports/{job_id}/",
        "download": None,
        "page": "/projects/demo-project/analytics/exports/",
    }
    early = client.get(f"{API}/exports/{job_id}/download/")
    assert early.status_code == 409
    assert early.json() == {
        "detail": "a pending export has no file",
        "code": "export_state",
        "status": "pending",
    }
    export_run_task(job_id)
    detail = client.get(body["urls"]["self"]).json()
    assert detail["status"] == "done" and detail["rows"] == 4
    file = client.get(detail["urls"]["download"])
    assert file.status_code == 200
    assert file["Content-Disposition"] == 'attachment; filename="demo-project-scores-long.jsonl"'
    assert b"".join(file.streaming_content).decode() == export_text(
        scored.project, "long", "jsonl", {"skill": ["Readability"], "rater_kind": "judge"}
    )
    listed = client.get(f"{API}/projects/demo-project/exports/").json()
    assert listed["count"] == 1 and listed["results"][0]["id"] == job_id


def test_api_errors_name_the_fields(scored, researcher):
    client = api(researcher)
    url = f"{API}/projects/demo-project/exports/"
    assert client.post(url, {"kind": "pie"}, format="json").json()["fields"] == {
        "kind": [
            "'pie' is not one of long, flask_review, wide, preferences, judge_training, hf_dataset"
        ]
    }
    refused = client.post(url, {"kind": "long", "skill": ["Nope"], "judge": ["who"]}, format="json")
    assert refused.status_code == 400
    assert refused.json()["fields"] == {
        "skill": ["not a skill of the project: Nope"],
        "judge": ["not a judge of the project: who"],
    }


def test_an_expired_export_is_a_409_with_its_status(scored, researcher):
    job = export_job_run(
        job_id=export_job_create(project=scored.project, kind="long", enqueue=False).pk
    )
    ExportJob.objects.filter(pk=job.pk).update(finished_at=T0)
    assert export_files_expire(older_than_days=7) == 1
    # a client that asks for the file's type still gets the error as JSON
    response = api(researcher).get(f"{API}/exports/{job.pk}/download/", HTTP_ACCEPT="text/csv")
    assert response.status_code == 409
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "detail": "an expired export has no file",
        "code": "export_state",
        "status": "expired",
    }


def test_the_api_is_for_project_staff_only(scored, annotator, outsider, researcher):
    job = export_job_create(project=scored.project, kind="long", enqueue=False)
    urls = [
        f"{API}/projects/demo-project/exports/",
        f"{API}/exports/{job.pk}/",
        f"{API}/exports/{job.pk}/download/",
    ]
    for url in urls:
        assert api(annotator).get(url).status_code == 403, url
        assert api(outsider).get(url).status_code == 404, url
        assert APIClient().get(url).status_code == 401, url
    create = api(annotator).post(urls[0], {"kind": "long"}, format="json")
    assert create.status_code == 403 and not ExportJob.objects.exclude(pk=job.pk).exists()


# --- the command ----------------------------------------------------------------------------------


def test_the_command_writes_the_same_export_to_stdout_or_a_file(scored, tmp_path):
    out = io.StringIO()
    call_command(
        "export_scores",
        "--project",
        "demo-project",
        "--kind",
        "wide",
        stdout=out,
        stderr=io.StringIO(),
    )
    assert out.getvalue() == export_text(scored.project, "wide")
    target = tmp_path / "gpt.jsonl"
    err = io.StringIO()
    call_command(
        "export_scores",
        "--project",
        "demo-project",
        "--kind",
        "flask_review",
        "--judge",
        "gpt",
        "--output",
        str(target),
        stderr=err,
    )
    assert target.read_text() == export_text(
        scored.project, "flask_review", filters={"judge": "gpt"}
    )
    assert err.getvalue().startswith(f"2 rows written to {target}")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".gpt")] == []
    with pytest.raises(CommandError, match="a FLASK review file holds one judge"):
        call_command("export_scores", "--project", "demo-project", "--kind", "flask_review")
    with pytest.raises(CommandError, match="no project"):
        call_command("export_scores", "--project", "nope", "--kind", "long")


# --- outside a test transaction -------------------------------------------------------------------


@pytest.mark.postgres_only
def test_a_job_reads_one_snapshot_outside_any_transaction(transactional_db, scored):
    """The production path: no surrounding transaction, so the export opens its own
    REPEATABLE READ, READ ONLY one and streams from server-side cursors inside it."""
    job = export_job_create(project=scored.project, kind="wide", enqueue=False)
    assert not connection.in_atomic_block
    with CaptureQueriesContext(connection) as queries:
        job = export_job_run(job_id=job.pk)
    assert job.status == ExportStatus.DONE, job.error
    assert any("REPEATABLE READ, READ ONLY" in q["sql"] for q in queries.captured_queries)
    with job.file.open("rb") as f:
        assert f.read().decode() == export_text(scored.project, "wide")


@pytest.mark.slow
def test_an_export_asked_for_on_the_page_is_written_by_a_separate_worker(
    celery_worker_process, scored, researcher_client
):
    # when
    assert researcher_client.post(PAGE, {"kind": "long", "format": "jsonl"}).status_code == 302
    job = ExportJob.objects.get()
    # then the worker (imports queue, real Redis) writes it
    done = wait_for(
        lambda: ExportJob.objects.filter(pk=job.pk, status__in=["done", "failed"]).first()
    )
    assert done.status == ExportStatus.DONE, done.error
    download = researcher_client.get(f"/exports/{job.pk}/download/")
    assert b"".join(download.streaming_content).decode() == export_text(
        scored.project, "long", "jsonl"
    )
    polled = researcher_client.get(PAGE, headers={"HX-Request": "true"})
    assert polled.status_code == 286


def test_the_export_api_is_in_the_schema(researcher):
    schema = api(researcher).get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {
        "/api/v1/projects/{slug}/exports/",
        "/api/v1/exports/{id}/",
        "/api/v1/exports/{id}/download/",
    } <= set(paths)


def test_export_jobs_are_listed_read_only_in_the_admin(scored, admin_client):
    job = export_job_create(project=scored.project, kind="long", enqueue=False)
    assert admin_client.get("/admin/analytics/exportjob/").status_code == 200
    assert admin_client.get(f"/admin/analytics/exportjob/{job.pk}/change/").status_code == 200
    assert admin_client.get("/admin/analytics/exportjob/add/").status_code == 403
