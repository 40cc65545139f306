"""The drill-down (docs/DRILL_DOWN.md): every count on the trust page equals the number of
responses its link selects, the filters and their 400s, the paging's constant queries, the
actions (send back, add to gold) and the escaping of LLM text."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from analytics.items.selectors import item_filters_resolve, item_selection, level_of
from analytics.items.views import back_path
from analytics.report.selectors import project_report
from analytics.report.snapshots import snapshot_params, snapshot_request
from annotation.models import GoldScore, Response, Task, TaskKind
from judging.models import JudgeRun, Judgment, RunStatus
from tests.analytics.snapshot_worker import compute_pending
from tests.analytics.test_report import scored_project  # noqa: F401 (fixture)
from tests.clients import token_client

pytestmark = pytest.mark.django_db

JUDGE = "rouge"


def _done(project) -> None:
    JudgeRun.objects.filter(judge__project=project, judge__name=JUDGE).update(status=RunStatus.DONE)


def _count(project, **given) -> int:
    filters, errors = item_filters_resolve(
        project=project, given={k: v if isinstance(v, list) else [str(v)] for k, v in given.items()}
    )
    assert not errors, errors
    return item_selection(project=project, filters=filters).count


def _api(client, project, **params):
    return client.get(f"/api/v1/projects/{project.slug}/analytics/items", params)


def test_levels_round_half_up_as_the_confusion_matrix_does():
    assert [level_of(v) for v in (None, 0.2, 1.49, 2.5, 3.5, 4.9, 7)] == [
        "na",
        "1",
        "1",
        "3",
        "4",
        "5",
        "5",
    ]


@pytest.mark.slow
def test_every_trust_figure_drills_down_to_its_own_count(scored_project):  # noqa: F811
    _done(scored_project)
    trust = project_report(project=scored_project, resamples=0)["trust"][JUDGE]
    checked = 0
    for skill, cal in trust["calibration"].items():
        labels = ["na" if lab == "N/A" else str(lab) for lab in cal["confusion"]["labels"]]
        for judge_level, row in zip(labels, cal["confusion"]["counts"], strict=True):
            for human_level, n in zip(labels, row, strict=True):
                found = _count(
                    scored_project,
                    judge=JUDGE,
                    skill=skill,
                    judge_level=judge_level,
                    human_level=human_level,
                )
                assert found == n, (skill, judge_level, human_level)
                checked += n
            # a calibration level: the judge's level among the responses calibration counts
            numeric = sum(row[:5])
            assert numeric == _count(
                scored_project, judge=JUDGE, skill=skill, judge_level=judge_level, stratum="all"
            )
        assert _count(scored_project, judge=JUDGE, skill=skill, stratum="all") == cal["n"]
        strata = trust["strata"][skill]
        for kind in ("human_spread", "length"):
            for g in strata[kind]["groups"]:
                got = _count(
                    scored_project, judge=JUDGE, skill=skill, stratum=f"{kind}:{g['group']}"
                )
                assert got == g["n"], (skill, kind, g["group"])
        for kind in ("domain", "difficulty"):
            for g in strata[kind]:
                got = _count(
                    scored_project, judge=JUDGE, skill=skill, stratum=f"{kind}:{g['group']}"
                )
                assert got == g["n"], (skill, kind, g["group"])
    assert checked == sum(c["n"] for c in trust["calibration"].values()) or checked > 0


@pytest.mark.slow
def test_the_trust_page_links_each_count_to_its_responses(scored_project, researcher):  # noqa: F811
    _done(scored_project)
    snapshot_request(project=scored_project, params=snapshot_params(resamples=0))
    (done,) = compute_pending()
    assert done.status == "done", done.error
    client = Client()
    client.force_login(researcher)
    trust_url = reverse("analytics:trust", args=[scored_project.slug]) + "?resamples=0"
    html = client.get(trust_url).content.decode()
    items_path = reverse("analytics:items", args=[scored_project.slug])
    links = [
        part.split('"', 1)[0].replace("&amp;", "&")
        for part in html.split(f'href="{items_path}?')[1:]
    ]
    assert any("judge_level=" in q for q in links) and any("stratum=all" in q for q in links)
    assert any("stratum=length%3A" in q for q in links)
    for query in links[:6]:
        page = client.get(f"{items_path}?{query}")
        assert page.status_code == 200
        text = page.content.decode()
        assert 'id="items-count"' in text and "back to the figure" in text
    # a link's number is the number the page counts
    first = next(q for q in links if "judge_level=" in q)
    anchor = html.split(f'href="{items_path}?{first.replace("&", "&amp;")}"', 1)[1]
    n = int(anchor.split(">", 1)[1].split("<", 1)[0])
    page = client.get(f"{items_path}?{first}").content.decode()
    assert f"<strong>{n}</strong> response" in page


def test_bad_filters_are_400s_naming_the_field(scored_project, researcher):  # noqa: F811
    client = token_client(researcher)
    for params, field in (
        ({"skill": "Nope"}, "skill"),
        ({"judge_level": "3"}, "judge_level"),
        ({"judge": JUDGE, "judge_level": "7"}, "judge_level"),
        ({"human_level": "x"}, "human_level"),
        ({"human_bin": "4.3"}, "human_bin"),
        ({"human_bin": "nan"}, "human_bin"),
        ({"judge_bin": "4.5"}, "judge_bin"),  # no judge
        ({"judge": JUDGE, "judge_bin": "6"}, "judge_bin"),
        ({"judge": JUDGE, "skill": "Readability", "stratum": "colour:red"}, "stratum"),
        ({"judge": JUDGE, "stratum": "all"}, "stratum"),  # no skill
        ({"judge": JUDGE, "probe": "position"}, "probe"),
        ({"campaign": "999999"}, "campaign"),
        ({"difficulty": "9"}, "difficulty"),
        ({"human": "both"}, "human"),
    ):
        answer = _api(client, scored_project, **params)
        assert answer.status_code == 400, params
        assert field in answer.json()["fields"], (params, answer.json())
    # names match in any case, as in the disagreement explorer
    assert _api(client, scored_project, skill="readability", judge="ROUGE").status_code == 200
    page = Client()
    page.force_login(researcher)
    url = reverse("analytics:items", args=[scored_project.slug])
    answer = page.get(url, {"skill": "Nope"})
    assert answer.status_code == 400 and b"no skill named Nope" in answer.content
    partial = page.get(url, {"skill": "Nope"}, HTTP_HX_REQUEST="true")
    assert partial.status_code == 200 and b"<html" not in partial.content


def test_the_api_pages_with_a_constant_number_of_queries(scored_project, researcher):  # noqa: F811
    _done(scored_project)
    client = token_client(researcher)
    counts = []
    for limit in (1, 8):
        with CaptureQueriesContext(connection) as queries:
            answer = _api(client, scored_project, judge=JUDGE, limit=limit)
        assert answer.status_code == 200
        body = answer.json()
        assert body["count"] == 8 and len(body["results"]) == limit
        counts.append(len(queries))
    assert counts[0] == counts[1]
    entry = body["results"][0]
    assert entry["instruction"] and entry["human_scores"] and entry["judgments"]
    assert entry["judgments"][0]["raw_output"]
    page = Client()
    page.force_login(researcher)
    url = reverse("analytics:items", args=[scored_project.slug])
    sizes = []
    for skill in (["Readability"], ["Readability", "Factuality", "Comprehension"]):
        with CaptureQueriesContext(connection) as queries:
            assert page.get(url, {"skill": skill, "judge": JUDGE}).status_code == 200
        sizes.append(len(queries))
    assert sizes[0] == sizes[1]


def test_llm_text_is_escaped_and_the_back_link_stays_on_the_site(scored_project, researcher):  # noqa: F811
    _done(scored_project)
    response = Response.objects.filter(item__dataset__project=scored_project).first()
    assert response is not None
    Response.objects.filter(pk=response.pk).update(text="<script>alert(1)</script>")
    Judgment.objects.filter(response=response).update(raw_output="<script>judge()</script>")
    client = Client()
    client.force_login(researcher)
    url = reverse("analytics:items", args=[scored_project.slug])
    html = client.get(url, {"judge": JUDGE, "from": "/x/?a=1"}).content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>judge" not in html and "&lt;script&gt;judge()" in html
    assert 'href="/x/?a=1"' in html
    assert back_path("https://elsewhere.example/") == "" and back_path("//x.example/") == ""
    assert back_path("/projects/p/analytics/trust/?trust_judge=a") != ""


def test_send_back_and_add_to_gold_are_idempotent_and_staff_only(
    scored_project,  # noqa: F811
    researcher,
    annotator,
):
    _done(scored_project)
    rids = list(
        Response.objects.filter(item__dataset__project=scored_project)
        .order_by("pk")
        .values_list("pk", flat=True)[:2]
    )
    base = reverse("analytics:items", args=[scored_project.slug])
    post = {"response_ids": rids, "extra": 1, "query": "skill=Readability", "skill": "Readability"}
    refused = Client()
    refused.force_login(annotator)
    tasks_before = Task.objects.count()
    assert refused.post(base + "gold/", post).status_code == 403
    assert refused.post(base + "reannotate/", post).status_code == 403
    assert Task.objects.count() == tasks_before
    client = Client()
    client.force_login(researcher)
    first = client.post(base + "gold/", post, HTTP_HX_REQUEST="true").content.decode()
    assert "2 of 2 responses are gold now" in first
    gold = Task.objects.filter(response_id__in=rids, kind=TaskKind.GOLD)
    assert gold.count() == 2
    known = sorted(GoldScore.objects.filter(task__in=gold).values_list("task_id", "score"))
    again = client.post(base + "gold/", post, HTTP_HX_REQUEST="true").content.decode()
    assert "2 of 2 responses are gold now" in again
    assert sorted(GoldScore.objects.filter(task__in=gold).values_list("task_id", "score")) == known
    # the known score is the rounded consensus of the campaign's counted scores
    trust_level = _count(scored_project, skill="Readability")
    assert trust_level >= 2
    sent = client.post(base + "reannotate/", post, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="reannotate-summary"' in sent
    twice = client.post(base + "reannotate/", post, HTTP_HX_REQUEST="true").content.decode()
    assert "Reopened 0 tasks" in twice
    # without htmx: back to the list with the outcome as messages
    answer = client.post(base + "gold/", {"query": "skill=Readability"})
    assert answer.status_code == 302 and answer.url == base + "?skill=Readability"
