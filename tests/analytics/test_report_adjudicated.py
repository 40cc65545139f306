"""The report and the exports with adjudicated scores (docs/ANALYTICS.md, docs/EXPORTS.md):
on a small hand-made campaign, the raw report is as it always was, the adjudicated one puts
the reviewer's score in place of the people's for the settled pair (and says so), agreement
among people stays on their raw scores, and the long export carries both."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from analytics.exports.services import (
    ADJUDICATED_COLUMN,
    LONG_COLUMNS,
    WIDE_COLUMNS,
    ScoreExport,
    export_options_clean,
)
from analytics.report.selectors import project_report
from analytics.report.snapshots import (
    report_kwargs,
    report_snapshot_compute,
    snapshot_key,
    snapshot_params,
    snapshot_part,
    snapshot_request,
)
from annotation.models import Response
from annotation.review.services import adjudicated_score_set
from tests.annotation.test_review import people, reviewer, rid, scored, skill  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def settled(scored, reviewer):  # noqa: F811
    """m1/i0 Factuality was scored 1, 3, 5 (mean 3); the reviewer settles it at 5."""
    adjudicated_score_set(
        campaign=scored,
        response=Response.objects.get(pk=rid("m1", "i0")),
        skill=skill("Factuality"),
        value=5,
        note="the answer is right",
        reviewer=reviewer,
    )
    return scored


def _humans(report: dict, skill_name: str) -> dict[str, float]:
    return {row["system"]: row["humans"] for row in report["leaderboard"][skill_name]}


def test_the_adjudicated_report_uses_the_settled_score_and_says_so(settled):
    # when
    raw = project_report(project=settled.project, resamples=0, with_breakdowns=False)
    adjudicated = project_report(
        project=settled.project, resamples=0, with_breakdowns=False, human_scores="adjudicated"
    )
    # then: m1's Factuality responses i0, i1, i2 have means 3, 3, 3 raw; 5, 3, 3 adjudicated
    assert _humans(raw, "Factuality")["m1"] == pytest.approx(3.0)
    assert _humans(adjudicated, "Factuality")["m1"] == pytest.approx(11 / 3)
    assert _humans(adjudicated, "Factuality")["m2"] == _humans(raw, "Factuality")["m2"]
    # labelled; agreement among people stays on the raw scores
    assert "human_scores" not in raw and "agreement_scores" not in raw
    assert adjudicated["human_scores"] == "adjudicated"
    assert adjudicated["agreement_scores"] == "raw"
    assert adjudicated["adjudicated_pairs"] == 1
    assert adjudicated["agreement"] == raw["agreement"]


def test_the_raw_report_is_unchanged_by_adjudication(scored, reviewer):  # noqa: F811
    before = project_report(project=scored.project, resamples=0)
    adjudicated_score_set(
        campaign=scored,
        response=Response.objects.get(pk=rid("m1", "i0")),
        skill=skill("Factuality"),
        value=5,
        note="",
        reviewer=reviewer,
    )
    assert project_report(project=scored.project, resamples=0) == before


def test_the_breakdowns_keep_agreement_on_the_raw_scores(settled):
    raw = project_report(project=settled.project, resamples=0)
    adjudicated = project_report(project=settled.project, resamples=0, human_scores="adjudicated")
    for facet in ("domain", "difficulty", "system"):
        for value, part in raw["breakdowns"][facet].items():
            assert adjudicated["breakdowns"][facet][value]["agreement"] == part["agreement"]
    assert adjudicated["breakdowns"]["system"]["m1"]["leaderboard"]["Factuality"][0][
        "humans"
    ] == pytest.approx(11 / 3)


def test_snapshot_params_keep_the_default_key_and_carry_the_choice(settled):
    assert "human_scores" not in snapshot_params()
    assert snapshot_key(snapshot_params(human_scores="raw")) == snapshot_key(snapshot_params())
    params = snapshot_params(resamples=0, human_scores="adjudicated")
    assert report_kwargs(params)["human_scores"] == "adjudicated"
    with pytest.raises(ValueError):
        snapshot_params(human_scores="median")
    # a snapshot of it computes the labelled report
    snapshot, _ = snapshot_request(project=settled.project, params=params)
    done = report_snapshot_compute(snapshot_id=snapshot.pk)
    assert done is not None and done.status == "done", done and done.error
    report = snapshot_part(done, "report")
    assert report["human_scores"] == "adjudicated"
    assert _humans(report, "Factuality")["m1"] == pytest.approx(11 / 3)


def test_the_report_api_and_command_take_the_choice(settled, researcher_client):
    # the API: the first request asks for the snapshot (202)
    url = reverse("analytics-report", args=[settled.project.slug])
    response = researcher_client.get(url, {"human": "adjudicated", "resamples": 0})
    assert response.status_code == 202
    assert response.json()["snapshot"]["params"]["human_scores"] == "adjudicated"
    assert researcher_client.get(url, {"human": "median"}).status_code == 400
    # the command
    out = io.StringIO()
    call_command(
        "analytics_report",
        project=settled.project.slug,
        human="adjudicated",
        resamples=0,
        no_breakdowns=True,
        stdout=out,
    )
    assert json.loads(out.getvalue())["human_scores"] == "adjudicated"


def test_the_long_export_shows_the_raw_scores_and_the_adjudicated_one(settled):
    # when
    options = export_options_clean(
        project=settled.project, kind="long", fmt="csv", filters={"skill": ["Factuality"]}
    )
    rows = list(csv.DictReader(io.StringIO("".join(ScoreExport(options).chunks()))))
    # then the three raw scores of m1/i0 are as given, each with the adjudicated columns
    assert list(rows[0])[-3:] == list(LONG_COLUMNS[-3:])
    settled_rows = [r for r in rows if r["item"] == "i0" and r["system"] == "m1"]
    assert sorted(r["score"] for r in settled_rows) == ["1", "3", "5"]
    assert {
        (r["adjudicated_score"], r["adjudicated_note"], r["adjudicated_by"]) for r in settled_rows
    } == {("5", "the answer is right", "rex")}
    others = [r for r in rows if not (r["item"] == "i0" and r["system"] == "m1")]
    assert others and {r["adjudicated_score"] for r in others} == {""}


def test_the_wide_export_has_an_adjudicated_column_beside_the_raters(settled, scored):  # noqa: F811
    # when
    options = export_options_clean(
        project=settled.project, kind="wide", fmt="csv", filters={"skill": ["Factuality"]}
    )
    rows = list(csv.DictReader(io.StringIO("".join(ScoreExport(options).chunks()))))
    # then the raters' raw scores stay, and the settled pair has the reviewer's score
    assert list(rows[0])[-1] == ADJUDICATED_COLUMN
    i0 = next(r for r in rows if r["item"] == "i0" and r["system"] == "m1")
    raters = sorted(v for k, v in i0.items() if k.startswith("human:") and v)
    assert raters == ["1", "3", "5"] and i0[ADJUDICATED_COLUMN] == "5"
    assert {r[ADJUDICATED_COLUMN] for r in rows if r is not i0} == {""}
    # an export without adjudicated scores keeps its columns as they were
    plain = export_options_clean(
        project=settled.project, kind="wide", fmt="csv", filters={"skill": ["Completeness"]}
    )
    first = next(csv.reader(io.StringIO("".join(ScoreExport(plain).chunks()))))
    assert ADJUDICATED_COLUMN not in first and first[:4] == list(WIDE_COLUMNS)


def test_the_dashboard_offers_the_choice_and_labels_the_adjudicated_report(
    settled, researcher_client
):
    url = reverse("analytics:dashboard", args=[settled.project.slug])
    raw = researcher_client.get(url, {"resamples": 0}).content.decode()
    assert 'name="human"' in raw and "data-human-scores" not in raw
    adjudicated = researcher_client.get(url, {"resamples": 0, "human": "adjudicated"})
    assert adjudicated.status_code == 200
    assert 'data-human-scores="adjudicated"' in adjudicated.content.decode()
