"""The upstream selectors a score export reads (annotation.selectors and judging.selectors):
plain tuples in the documented column layout and order, streamed, and narrowed by the same
arguments the export's filters resolve to. The export's content itself is covered in
test_exports.py; this pins the contract analytics unpacks positionally."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from annotation.models import Campaign
from annotation.selectors import human_score_export_annotators, human_score_export_rows
from judging.selectors import (
    judge_names_for_project,
    judge_score_export_judges,
    judge_score_export_rows,
    judgment_score_rows,
    latest_run_ids_for_project,
    run_review_rows,
)
from tests.analytics.test_exports import scored  # noqa: F401  (the fixture)

PLAIN = (int, float, str, bool, datetime, type(None))


def plain(rows) -> bool:
    return all(type(row) is tuple and all(isinstance(v, PLAIN) for v in row) for row in rows)


def test_human_score_export_rows_stream_plain_tuples_in_export_order(scored):  # noqa: F811
    stream = human_score_export_rows(project=scored.project)
    assert isinstance(stream, Iterator) and not isinstance(stream, list)
    rows = list(stream)
    assert len(rows) == 12 and plain(rows) and {len(row) for row in rows} == {18}
    # the language each task was shown in, last: alice's Spanish pages, zoe's unknown
    assert {(row[6], row[17]) for row in rows} == {("alice", "es"), ("zoe", "")}
    assert [row[:2] + (row[6],) for row in rows] == sorted(row[:2] + (row[6],) for row in rows)
    assert {row[13] for row in rows} == {"C"}  # the campaign's name
    assert {row[16] for row in rows} == {None}  # the built-in rubrics (no project)
    campaign = Campaign.objects.get(project=scored.project, name="C")
    assert list(human_score_export_rows(project=scored.project, campaign_id=campaign.pk)) == rows
    m1 = list(human_score_export_rows(project=scored.project, systems=("m1",), chunk_size=1))
    assert m1 == [row for row in rows if row[4] == "m1"]
    assert human_score_export_annotators(project=scored.project) == ["alice", "zoe"]
    assert human_score_export_annotators(project=scored.project, skills=("Nope",)) == []


def test_judge_score_export_rows_stream_plain_tuples_of_the_asked_runs(scored):  # noqa: F811
    assert latest_run_ids_for_project(project=scored.project) == [scored.run.pk]
    assert latest_run_ids_for_project(project=scored.project, judges=("nobody",)) == []
    stream = judge_score_export_rows(project=scored.project)
    assert isinstance(stream, Iterator) and not isinstance(stream, list)
    rows = list(stream)
    assert len(rows) == 6 and plain(rows) and {len(row) for row in rows} == {18}
    assert [row[:2] for row in rows] == sorted(row[:2] for row in rows)
    assert {(row[6], row[13], row[16]) for row in rows} == {("gpt", scored.run.pk, 0)}
    assert list(judge_score_export_rows(project=scored.project, run_ids=[scored.run.pk])) == rows
    assert list(judge_score_export_rows(project=scored.project, run_ids=[])) == []
    assert judge_score_export_judges(project=scored.project) == ["gpt"]
    assert judge_score_export_judges(project=scored.project, judges=("nobody",)) == []
    assert judge_names_for_project(project=scored.project) == ["gpt"]


def test_review_rows_are_one_answered_judgment_per_response_with_its_scores(scored):  # noqa: F811
    rows = list(run_review_rows(run_id=scored.run.pk))
    assert len(rows) == 2 and plain(rows) and {len(row) for row in rows} == {11}
    assert [row[3] for row in rows] == ["m1", "m2"]
    assert [row[1:4] for row in run_review_rows(run_id=scored.run.pk, systems=("m2",))] == [
        rows[1][1:4]
    ]
    scores = judgment_score_rows(judgment_ids=[row[0] for row in rows])
    assert len(scores) == 6 and plain(scores)
    assert [s[0] for s in scores] == sorted(s[0] for s in scores)
    only = judgment_score_rows(judgment_ids=[rows[0][0]], skills=("Readability",))
    assert [(s[0], s[1]) for s in only] == [(rows[0][0], "Readability")]
