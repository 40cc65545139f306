"""The disagreement explorer: the numbers and the order on hand-computed rows, the filters
and pages on a real campaign (scores given through the claim and submit services, judge
scores imported), the page, the response page and the API per role, escaping of untrusted
names and texts, and the send-back for re-annotation from the page and the API."""

from __future__ import annotations

import csv
import io
import json
import math
from urllib.parse import urlencode

import pytest
from django.test import Client
from rest_framework.test import APIClient

from analytics.explorer.disagreement import DisagreementFilters, disagreements, exact
from analytics.explorer.selectors import disagreement_list
from analytics.imports.services import scores_import
from analytics.report.build import human_means
from annotation.campaigns.services import campaign_activate, campaign_create, campaign_set_status
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import (
    CampaignStatus,
    HumanScore,
    ReannotationRequest,
    Response,
    Task,
    UploadSource,
    UploadStatus,
)
from annotation.services.assignments import (
    ScoreInput,
    assignment_claim_next,
    human_score_submit,
    task_skills,
)
from annotation.services.projects import project_create
from devtools.openai_server import FakeOpenAIServer
from judging.services import judge_response, judge_run_create
from tests.clients import token_client
from tests.judging.test_runs import llm_judge, response_ids, running

# --- the computation, on plain rows ---------------------------------------------------------

R = "Readability"
# response id, item id, system, skill, rater, value (None: N/A)
HUMAN = [
    (1, 10, "a", R, "ann", 4),
    (1, 10, "a", R, "bob", 5),
    (2, 10, "b", R, "ann", 1),
    (2, 10, "b", R, "bob", 1),
    (2, 10, "b", R, "cy", None),
    (3, 11, "a", R, "ann", 2),
    (3, 11, "a", R, "bob", 5),
    (3, 11, "a", R, "cy", 3),
    (4, 11, "b", R, "ann", None),
    (1, 10, "a", "Factuality", "ann", 3),
    (1, 10, "a", "Factuality", "bob", 3),
]
JUDGE = [
    (1, 10, "a", R, "J", 2),
    (1, 10, "a", R, "K", 5),
    (2, 10, "b", R, "J", 3.5),
    (3, 11, "a", R, "J", 1),
    (3, 11, "a", R, "K", None),
    (1, 10, "a", "Factuality", "J", 5),
]


def by_key(rows):
    return {(r.response_id, r.skill): r for r in rows}


def test_the_numbers_of_each_response_and_skill():
    rows = by_key(disagreements(HUMAN, JUDGE))
    one = rows[(1, R)]
    assert (one.item_id, one.system, one.n_human, one.n_na) == (10, "a", 2, 0)
    assert one.human_scores == (("ann", 4), ("bob", 5))
    assert (one.human_mean, one.human_sd, one.human_range) == (4.5, 0.5, 1.0)
    assert [(j.judge, j.value, j.gap) for j in one.judges] == [("J", 2.0, 2.5), ("K", 5.0, 0.5)]
    assert one.gap == 2.5  # the largest over the judges
    two = rows[(2, R)]
    assert (two.n_human, two.n_na, two.human_mean, two.human_sd) == (2, 1, 1.0, 0.0)
    assert two.gap == 2.5
    three = rows[(3, R)]  # 2, 5, 3: mean 10/3, variance 14/9, range 3
    assert three.human_mean == 10 / 3 and three.human_range == 3.0
    assert three.human_sd == math.sqrt(14 / 9)
    assert [(j.judge, j.value, j.gap) for j in three.judges] == [
        ("J", 1.0, 7 / 3),
        ("K", None, None),
    ]
    assert (4, R) not in rows  # only N/A: no mean, no row
    # the means are the report's
    means = human_means([r for r in HUMAN if r[3] == R])
    assert {rid: m[2] for rid, m in means.items()} == {
        rid: rows[(rid, R)].human_mean for rid in (1, 2, 3)
    }


def test_rows_rank_by_the_largest_gap_then_response_then_skill():
    order = [(r.response_id, r.skill, r.gap) for r in disagreements(HUMAN, JUDGE)]
    assert order == [(1, R, 2.5), (2, R, 2.5), (3, R, 7 / 3), (1, "Factuality", 2.0)]
    # a row no judge gave a value comes last
    no_judge = disagreements(HUMAN, [r for r in JUDGE if r[0] != 1])
    assert [(r.response_id, r.skill) for r in no_judge][-2:] == [(1, "Factuality"), (1, R)]


def test_rows_rank_by_the_spread_with_ties_by_response_then_skill():
    order = [(r.response_id, r.skill) for r in disagreements(HUMAN, JUDGE, sort="spread")]
    assert order == [(3, R), (1, R), (1, "Factuality"), (2, R)]


def test_gaps_that_are_equal_tie_exactly():
    # 2, 2, 3 (7/3) against a judge's mean of three samples 13/3: a gap of exactly 2, which
    # in floats is 1.9999999999999996; 1, 1 against 3 is 2 as well
    human = [
        (5, 1, "a", R, "p", 2),
        (5, 1, "a", R, "q", 2),
        (5, 1, "a", R, "r", 3),
        (6, 2, "a", R, "p", 1),
        (6, 2, "a", R, "q", 1),
    ]
    judge = [(5, 1, "a", R, "J", (4 + 4 + 5) / 3), (6, 2, "a", R, "J", 3)]
    assert abs(7 / 3 - 13 / 3) < 2  # what plain floats would rank by
    rows = disagreements(human, judge)
    assert [(r.response_id, r.gap) for r in rows] == [(5, 2.0), (6, 2.0)]
    assert exact(13 / 3) * 3 == 13 and exact(0.734) == 0.734  # other values stay as given


def test_a_minimum_of_human_scores_and_an_unknown_order():
    rows = disagreements(HUMAN, JUDGE, min_human=3)
    assert [(r.response_id, r.skill) for r in rows] == [(3, R)]
    with pytest.raises(ValueError, match="sort"):
        disagreements(HUMAN, JUDGE, sort="loudest")


# --- a project: two annotators through the campaign, judges imported --------------------------

SKILLS = ["Factuality", "Comprehension", "Readability"]
ITEMS = {"i0": ("History", 1), "i1": ("Coding", 3), "i2": ("History", 5)}
# Readability by (item, system): ann, bob (None: N/A); every other skill: 3 from both
READABILITY = {
    ("i0", "m1"): (5, 1),
    ("i0", "m2"): (4, 4),
    ("i1", "m1"): (2, 3),
    ("i1", "m2"): (None, 2),
    ("i2", "m1"): (1, 2),
    ("i2", "m2"): (3, 5),
}
JUDGED = "item,system,rater,rater_kind,skill,score\n" + "".join(
    f"{item},{system},{judge},judge,Readability,{value}\n"
    for item, system, judge, value in [
        ("i0", "m1", "J", 3),
        ("i0", "m2", "J", 1),
        ("i1", "m1", "J", 5),
        ("i1", "m2", "J", 5),
        ("i2", "m2", "J", 2),
        ("i0", "m1", "K", 5),
    ]
)


def make_dataset(project, tmp_path):
    lines = [
        json.dumps(
            {
                "id": item,
                "instruction": f"Question {item}",
                "skills": SKILLS,
                "domains": [domain],
                "difficulty": difficulty,
                "responses": [{"model": m, "text": f"{m} answers {item}"} for m in ("m1", "m2")],
            }
        )
        for item, (domain, difficulty) in ITEMS.items()
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(lines) + "\n")
    upload = dataset_upload_create(
        project=project,
        dataset_name="D",
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )
    upload = dataset_import(upload_id=upload.pk)
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    return upload.dataset


def rid(item: str, system: str) -> int:
    return Response.objects.get(item__external_id=item, model_name=system).pk


def score_all(campaign, people, value_of) -> None:
    for n, person in enumerate(people):
        while (a := assignment_claim_next(campaign=campaign, annotator=person)) is not None:
            response = Response.objects.select_related("item").get(tasks=a.task_id)
            key = (response.item.external_id, response.model_name)
            scores = [
                ScoreInput(s.skill_id, value_of(key, s.name, n)) for s in task_skills(assignment=a)
            ]
            human_score_submit(assignment_id=a.pk, annotator=person, scores=scores)


@pytest.fixture
def people(django_user_model):
    return [django_user_model.objects.create_user(n, password="x") for n in ("ann", "bob", "cy")]


@pytest.fixture
def scored(project, tmp_path, people):
    """Campaign C (overlap 2, pool ann, bob, cy): ann and bob scored every response;
    judges J and K imported."""
    dataset = make_dataset(project, tmp_path)
    campaign = campaign_create(
        project=project, dataset=dataset, name="C", overlap=2, annotators=people
    )
    campaign_activate(campaign=campaign)

    def value_of(key, skill, n):
        return READABILITY[key][n] if skill == R else 3

    score_all(campaign, people[:2], value_of)
    scores_import(project_slug=project.slug, files=[("j.csv", JUDGED.encode())], dataset_name="D")
    return campaign


def keys(rows) -> list[tuple]:
    """((item, system), skill) of each row, in order."""
    names = {
        pk: (item, system)
        for pk, item, system in Response.objects.values_list(
            "pk", "item__external_id", "model_name"
        )
    }
    return [(names[r.response_id], r.skill) for r in rows]


def test_the_project_rows_rank_by_gap_over_both_judges(project, scored):
    rows = disagreement_list(project=project, filters=DisagreementFilters())
    assert len(rows) == 18  # 6 responses x 3 skills
    ranked = [(r.response_id, r.skill, r.gap) for r in rows[:5]]
    tied_3 = sorted([rid("i0", "m2"), rid("i1", "m2")])
    tied_2 = sorted([rid("i0", "m1"), rid("i2", "m2")])  # K's 2 on i0/m1, J's 2 on i2/m2
    assert ranked == [
        (tied_3[0], R, 3.0),
        (tied_3[1], R, 3.0),
        (rid("i1", "m1"), R, 2.5),
        (tied_2[0], R, 2.0),
        (tied_2[1], R, 2.0),
    ]
    rest = [(r.response_id, r.skill) for r in rows[5:]]
    assert all(r.gap is None for r in rows[5:]) and rest == sorted(rest)
    assert by_key(rows)[(rid("i1", "m2"), R)].human_scores == (("ann", None), ("bob", 2))


def test_the_filters_narrow_the_rows(project, scored):
    def shown(**filters):
        return keys(disagreement_list(project=project, filters=DisagreementFilters(**filters)))

    assert shown(skills=(R,), judges=("J",))[:3] == [
        (("i0", "m2"), R),
        (("i1", "m2"), R),
        (("i1", "m1"), R),
    ]
    only_j = disagreement_list(project=project, filters=DisagreementFilters(judges=("J",)))
    assert by_key(only_j)[(rid("i0", "m1"), R)].gap == 0.0  # K's gap of 2 is not shown
    assert {k[0][1] for k in shown(systems=("m2",))} == {"m2"}
    assert {k[0][0] for k in shown(domains=("Coding",))} == {"i1"}
    assert {k[0][0] for k in shown(difficulties=(1, 5))} == {"i0", "i2"}
    assert shown(skills=(R,), min_human=2, sort="spread") == [
        (("i0", "m1"), R),
        (("i2", "m2"), R),
        (("i1", "m1"), R),
        (("i2", "m1"), R),
        (("i0", "m2"), R),
    ]


# --- the page ---------------------------------------------------------------------------------


def url(project, **params) -> str:
    base = f"/projects/{project.slug}/analytics/disagreements/"
    return base + ("?" + urlencode(params, doseq=True) if params else "")


def test_the_page_lists_the_ranked_rows_for_researchers_and_admins(
    project, scored, researcher_client, admin_client
):
    for client in (researcher_client, admin_client):
        page = client.get(url(project))
        assert page.status_code == 200
        body = page.content.decode()
        assert "<html" in body and 'id="disagreement-table"' in body
        assert "18 response–skill pairs" in body
        assert f"/projects/{project.slug}/analytics/responses/{rid('i0', 'm2')}/" in body
        assert "Question i0" in body and "Send back for re-annotation" in body


def test_the_page_is_refused_to_annotators_outsiders_and_anonymous_visitors(
    project, scored, annotator_client, outsider_client
):
    assert annotator_client.get(url(project)).status_code == 403
    assert outsider_client.get(url(project)).status_code == 404
    anonymous = Client().get(url(project))
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    assert Client().get(f"/projects/{project.slug}/analytics/responses/1/").status_code == 302


def test_the_page_filters_sorts_and_answers_htmx_with_the_results_only(
    project, scored, researcher_client
):
    page = researcher_client.get(
        url(project, skill=R, system="m2", sort="spread"), HTTP_HX_REQUEST="true"
    )
    body = page.content.decode()
    assert page.status_code == 200 and "<html" not in body
    assert body.lstrip().startswith('<section id="disagreement-results">')
    assert "3 response–skill pairs" in body and "spread of the human scores" in body
    bad = researcher_client.get(url(project, difficulty=9))
    assert bad.status_code == 200 and "Fix the filters" in bad.content.decode()


def test_the_page_takes_only_get(project, researcher_client):
    assert researcher_client.post(url(project)).status_code == 405
    send = f"/projects/{project.slug}/analytics/disagreements/reannotate/"
    assert researcher_client.get(send).status_code == 405


def import_many(project, n: int) -> None:
    """n responses of one system, two people each on one skill (an imported crowd)."""
    rows = "".join(
        f"q{i},sys,{rater},human,Readability,{value}\n"
        for i in range(n)
        for rater, value in (("p", 1 + i % 5), ("q", 5))
    )
    scores_import(
        project_slug=project.slug,
        files=[("h.csv", ("item,system,rater,rater_kind,skill,score\n" + rows).encode())],
        dataset_name="crowd",
    )


def test_the_page_and_the_api_come_in_pages_of_fifty(project, researcher, researcher_client):
    import_many(project, 60)
    first = researcher_client.get(url(project))
    assert first.content.decode().count('name="response_ids"') == 50
    second = researcher_client.get(url(project, page=2), HTTP_HX_REQUEST="true").content.decode()
    assert second.count('name="response_ids"') == 10 and "page 2 of 2" in second
    api = api_client(researcher)
    answer = api.get(api_url(project), {"page": 2, "sort": "spread"}).json()
    assert answer["count"] == 60 and len(answer["results"]) == 10
    assert answer["previous"] is not None and answer["next"] is None


def test_the_page_keeps_its_queries_fixed(
    project, scored, researcher_client, django_assert_max_num_queries
):
    # 18 today: session, user, access (2), filter choices (5), report rows (7), the page's
    # excerpts and campaigns (2); the same for 18 rows as for 138
    with django_assert_max_num_queries(20):
        assert researcher_client.get(url(project)).status_code == 200
    import_many(project, 60)
    with django_assert_max_num_queries(20):
        assert researcher_client.get(url(project, page=2)).status_code == 200


# --- the response page ----------------------------------------------------------------------


def response_url(project, pk) -> str:
    return f"/projects/{project.slug}/analytics/responses/{pk}/"


def test_the_response_page_shows_every_score_with_links_to_the_judgments(
    project, scored, researcher_client, annotator_client, outsider_client
):
    # given: an LLM judge run on the dataset too
    with FakeOpenAIServer(style="json") as server:
        run = running(
            judge_run_create(judge=llm_judge(project, server, name="L"), dataset=scored.dataset)
        )
        for pk in response_ids(run):
            judge_response(run_id=run.pk, response_id=pk)
    target = rid("i1", "m2")
    # when
    page = researcher_client.get(response_url(project, target))
    # then
    body = page.content.decode()
    assert page.status_code == 200
    assert "Question i1" in body and "m2 answers i1" in body and "Coding" in body
    assert body.count("<td>ann</td>") == 3 and body.count("<td>bob</td>") == 3  # 3 skills each
    assert ">N/A<" in body  # ann's Readability
    judgment = run.judgments.get(response_id=target)
    assert f'href="/judgments/{judgment.pk}/"' in body
    assert 'id="imported-scores"' in body and "<td>J</td>" in body  # J's imported 5
    assert annotator_client.get(response_url(project, target)).status_code == 403
    assert outsider_client.get(response_url(project, target)).status_code == 404


def test_a_response_of_another_project_is_not_found(project, scored, researcher_client):
    other = project_create(slug="other", name="Other")
    assert researcher_client.get(response_url(other, rid("i0", "m1"))).status_code == 404
    assert researcher_client.get(response_url(project, 999_999)).status_code == 404


XSS = "<script>alert('x')</script>"


def test_untrusted_names_and_texts_are_escaped(project, researcher_client):
    # given: a system, a skill, a rater and texts carrying markup
    rows = [
        ["item", "system", "rater", "rater_kind", "skill", "score", "instruction", "response"],
        [
            "x1",
            f"sys{XSS}",
            f"r{XSS}",
            "human",
            f"skill{XSS}",
            "4",
            f"ask{XSS}",
            f"line one{XSS}\nline two",
        ],
        [
            "x1",
            f"sys{XSS}",
            "r2",
            "human",
            f"skill{XSS}",
            "1",
            f"ask{XSS}",
            f"line one{XSS}\nline two",
        ],
    ]
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)
    scores_import(project_slug=project.slug, files=[("x.csv", buffer.getvalue().encode())])
    target = Response.objects.get(item__external_id="x1").pk
    # when
    pages = [
        researcher_client.get(url(project)).content.decode(),
        researcher_client.get(response_url(project, target)).content.decode(),
    ]
    # then
    for body in pages:
        assert "<script>alert" not in body
        assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in body
    assert "line one&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;\nline two" in pages[1]


# --- the API ----------------------------------------------------------------------------------


api_client = token_client


def api_url(project) -> str:
    return f"/api/v1/projects/{project.slug}/analytics/disagreements"


def test_the_api_lists_the_same_rows_with_the_same_filters(project, scored, researcher):
    answer = api_client(researcher).get(
        api_url(project), {"skill": R, "judge": ["J", "K"], "min_human": 2}
    )
    assert answer.status_code == 200
    body = answer.json()
    assert body["count"] == 5
    first = body["results"][0]
    assert first == {
        "response": rid("i0", "m2"),
        "item": first["item"],
        "system": "m2",
        "skill": R,
        "human_scores": [{"rater": "ann", "value": 4.0}, {"rater": "bob", "value": 4.0}],
        "n_human": 2,
        "n_na": 0,
        "human_mean": 4.0,
        "human_sd": 0.0,
        "human_range": 0.0,
        "judges": [{"judge": "J", "value": 1.0, "gap": 3.0}],
        "gap": 3.0,
    }
    listed = [(r["response"], r["skill"]) for r in body["results"]]
    expected = disagreement_list(
        project=project, filters=DisagreementFilters(skills=(R,), min_human=2)
    )
    assert listed == [(r.response_id, r.skill) for r in expected]


def test_the_api_refuses_bad_filters_and_strangers(
    project, scored, researcher, annotator, outsider
):
    api = api_client(researcher)
    bad = api.get(api_url(project), {"difficulty": 7, "sort": "loud", "min_human": 0})
    assert bad.status_code == 400
    assert set(bad.json()["fields"]) == {"difficulty", "sort", "min_human"}
    assert api_client(annotator).get(api_url(project)).status_code == 403
    assert api_client(outsider).get(api_url(project)).status_code == 404
    assert APIClient().get(api_url(project)).status_code == 401


def test_filters_take_names_in_any_case_and_refuse_names_of_nothing(
    project, scored, researcher, researcher_client
):
    api = api_client(researcher)
    exact = api.get(api_url(project), {"skill": R, "judge": "J"}).json()
    loose = api.get(api_url(project), {"skill": R.upper(), "judge": "j"}).json()
    assert loose == exact and exact["count"] > 0
    # an unknown name was an empty list before (or, beside a known one, the known one's rows)
    bad = api.get(api_url(project), {"skill": [R, "Telepathy"], "judge": "Nobody"})
    assert bad.status_code == 400
    assert bad.json()["fields"] == {
        "skill": ["no skill named Telepathy in this project"],
        "judge": ["no judge named Nobody in this project"],
    }
    page = researcher_client.get(url(project, skill=R.lower()), HTTP_HX_REQUEST="true")
    assert page.content.decode().count("<tr data-response") == exact["count"]
    unknown = researcher_client.get(url(project, skill="Telepathy")).content.decode()
    assert "Fix the filters above" in unknown and "Telepathy is not one of" in unknown


# --- send back for re-annotation ------------------------------------------------------------


def send_url(project) -> str:
    return f"/projects/{project.slug}/analytics/disagreements/reannotate/"


def test_the_page_sends_ticked_responses_back_and_says_what_happened(
    project, scored, people, researcher, researcher_client
):
    # given: everything is scored twice; cy (in the pool) has scored nothing
    chosen = [rid("i0", "m1"), rid("i2", "m2")]
    # when: ticked on the page and sent with htmx
    answer = researcher_client.post(
        send_url(project), {"response_ids": chosen, "extra": "1"}, HTTP_HX_REQUEST="true"
    )
    # then
    body = answer.content.decode()
    assert answer.status_code == 200 and "<html" not in body
    assert body.lstrip().startswith("<div") and 'id="reannotate-result"' in body
    assert "Reopened 2 tasks in C" in body
    assert {t.overlap for t in Task.objects.filter(response_id__in=chosen)} == {3}
    request = ReannotationRequest.objects.get()
    assert request.requested_by == researcher and request.response_ids == sorted(chosen)
    # and the claim serves them to cy, and to nobody who scored them
    assert assignment_claim_next(campaign=scored, annotator=people[0]) is None
    lease = assignment_claim_next(campaign=scored, annotator=people[2])
    assert lease.task.response_id in chosen


def test_the_page_reports_what_could_not_be_reopened(project, scored, people, researcher_client):
    target = rid("i0", "m1")
    researcher_client.post(
        send_url(project), {"response_ids": [target], "extra": "1"}, HTTP_HX_REQUEST="true"
    )
    score_all(scored, [people[2]], lambda key, skill, n: 3)  # cy scores it: nobody is left
    answer = researcher_client.post(
        send_url(project), {"response_ids": [target], "extra": "2"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Reopened 0 tasks" in answer and "1 could not be reopened" in answer
    assert "no annotator is left in the campaign" in answer


def test_the_page_asks_which_campaign_when_the_responses_are_in_several(
    project, scored, people, researcher_client
):
    # given: a second campaign on the same dataset
    second = campaign_create(
        project=project, dataset=scored.dataset, name="Second", overlap=1, annotators=people
    )
    campaign_activate(campaign=second)
    target = rid("i0", "m1")
    page = researcher_client.get(url(project)).content.decode()
    assert '<select name="campaign">' in page
    # when: no campaign chosen
    answer = researcher_client.post(
        send_url(project), {"response_ids": [target], "extra": "1"}, HTTP_HX_REQUEST="true"
    )
    # then: a 200 with the problem, nothing changed
    assert answer.status_code == 200
    assert "several campaigns: choose one" in answer.content.decode()
    assert ReannotationRequest.objects.count() == 0
    chosen = researcher_client.post(
        send_url(project),
        {"response_ids": [target], "extra": "2", "campaign": second.pk},
        HTTP_HX_REQUEST="true",
    )
    assert "Reopened 1 task in Second" in chosen.content.decode()  # 0 submitted, 2 wanted
    assert Task.objects.get(campaign=second, response_id=target).overlap == 2


def test_the_page_shows_refusals_and_works_without_script(project, scored, researcher_client):
    empty = researcher_client.post(send_url(project), {"extra": "1"}, HTTP_HX_REQUEST="true")
    assert empty.status_code == 200 and "tick at least one response" in empty.content.decode()
    assert ReannotationRequest.objects.count() == 0
    plain = researcher_client.post(
        send_url(project), {"response_ids": [rid("i0", "m1")], "extra": "1", "query": "skill=x"}
    )
    assert plain.status_code == 302 and plain["Location"].endswith("/disagreements/?skill=x")


def test_annotators_cannot_send_back(project, scored, annotator_client, outsider_client):
    data = {"response_ids": [rid("i0", "m1")], "extra": "1"}
    assert annotator_client.post(send_url(project), data).status_code == 403
    assert outsider_client.post(send_url(project), data).status_code == 404
    assert ReannotationRequest.objects.count() == 0


def reannotation_url(project) -> str:
    return f"/api/v1/projects/{project.slug}/reannotation"


def test_the_api_sends_back_and_reports_each_response(project, scored, researcher):
    chosen = [rid("i1", "m1"), 999_999]
    answer = api_client(researcher).post(
        reannotation_url(project),
        {"campaign": scored.pk, "response_ids": chosen, "extra": 1},
        format="json",
    )
    assert answer.status_code == 200
    body = answer.json()
    assert body["reopened"] == 1 and body["campaign_status"] == "active"
    assert body["campaign_overlap"] == 3 and body["extra"] == 1
    outcomes = {o["response"]: o["outcome"] for o in body["outcomes"]}
    assert outcomes == {chosen[0]: "reopened", 999_999: "not_in_campaign"}
    again = (
        api_client(researcher)
        .post(
            reannotation_url(project),
            {"campaign": scored.pk, "response_ids": chosen, "extra": 1},
            format="json",
        )
        .json()
    )
    assert again["reopened"] == 0  # the same request twice: no second raise
    assert Task.objects.get(campaign=scored, response_id=chosen[0]).overlap == 3


@pytest.mark.parametrize(
    ("payload", "fields"),
    [
        ({"response_ids": [1], "extra": 0}, {"campaign", "extra"}),
        ({"campaign": 1, "response_ids": [], "extra": 9}, {"response_ids", "extra"}),
        ({"campaign": 1, "response_ids": ["a"], "extra": 1}, {"response_ids"}),
    ],
)
def test_the_api_refuses_bad_input_by_field_and_changes_nothing(
    project, scored, researcher, payload, fields
):
    before = sorted(Task.objects.values_list("pk", "overlap"))
    answer = api_client(researcher).post(reannotation_url(project), payload, format="json")
    assert answer.status_code == 400 and set(answer.json()["fields"]) == fields
    assert sorted(Task.objects.values_list("pk", "overlap")) == before
    assert ReannotationRequest.objects.count() == 0


def test_the_api_refuses_a_campaign_of_another_project(
    project, scored, researcher, annotator, admin_user
):
    other = project_create(slug="other", name="Other")
    api = api_client(researcher)
    payload = {"campaign": scored.pk, "response_ids": [1], "extra": 1}
    other_url = f"/api/v1/projects/{other.slug}/reannotation"
    assert api.post(other_url, payload, format="json").status_code == 404  # not a member
    elsewhere = api_client(admin_user).post(other_url, payload, format="json")
    assert elsewhere.status_code == 400 and set(elsewhere.json()["fields"]) == {"campaign"}
    assert (
        api_client(annotator)
        .post(
            reannotation_url(project),
            {"campaign": scored.pk, "response_ids": [rid("i0", "m1")], "extra": 1},
            format="json",
        )
        .status_code
        == 403
    )
    assert HumanScore.objects.filter(campaign=scored).count() == 6 * 2 * 3
    assert ReannotationRequest.objects.count() == 0


# --- why nothing was reopened, and what would work --------------------------------------------


def reasons_of(body: str) -> list[str]:
    return [line.split('"')[0] for line in body.split('data-reason="')[1:]]


def test_the_page_explains_an_answer_of_nothing_reopened_and_offers_what_works(
    project, scored, people, researcher_client, django_user_model
):
    # given: a second campaign over the same responses, where nothing is submitted yet;
    # the explorer's human scores are C's, so Second's three slots are still on their way
    second = campaign_create(
        project=project, dataset=scored.dataset, name="Second", overlap=3, annotators=people
    )
    campaign_activate(campaign=second)
    target = rid("i0", "m1")
    # when
    answer = researcher_client.post(
        send_url(project),
        {"response_ids": [target], "extra": "1", "campaign": second.pk},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    # then: the reason, and what would work: as in the demo, the pool (3) is no larger than
    # the open slots (3), so a larger extra needs more people first
    assert "Reopened 0 tasks in Second" in answer and "why, and what would work" in answer
    assert reasons_of(answer) == ["already_open"]
    assert "3 on the way, 0 of 3 submitted" in answer
    assert 'data-step="send_back_with_more"' not in answer
    assert 'data-step="add_annotators"' in answer and "then send it back with 4 extra" in answer
    assert f'href="/campaigns/{second.pk}/edit/"' in answer
    assert f'<a href="/campaigns/{second.pk}/">' in answer  # or wait, following its progress
    # when: one more person in the pool
    dee = django_user_model.objects.create_user("dee", password="x")
    second.annotators.add(dee)
    answer = researcher_client.post(
        send_url(project),
        {"response_ids": [target], "extra": "1", "campaign": second.pk},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    # then: a button sends it back with the extra that works, and it does
    assert 'data-step="send_back_with_more"' in answer
    assert '<input type="hidden" name="extra" value="4">' in answer
    again = researcher_client.post(
        send_url(project),
        {"response_ids": [target], "extra": "4", "campaign": second.pk},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert "Reopened 1 task in Second" in again and reasons_of(again) == []


def test_the_page_offers_adding_annotators_resuming_and_a_new_campaign(
    project, scored, people, researcher_client
):
    target = rid("i0", "m1")
    send = {"response_ids": [target], "extra": "1"}
    researcher_client.post(send_url(project), send, HTTP_HX_REQUEST="true")
    score_all(scored, [people[2]], lambda key, skill, n: 3)  # cy was the last one left
    nobody = researcher_client.post(send_url(project), send, HTTP_HX_REQUEST="true")
    body = nobody.content.decode()
    assert reasons_of(body) == ["no_annotator_left"]
    assert f'href="/campaigns/{scored.pk}/edit/"' in body
    campaign_set_status(campaign=scored, status=CampaignStatus.PAUSED)
    paused = researcher_client.post(
        send_url(project), {"response_ids": [rid("i1", "m1")], "extra": "1"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert reasons_of(paused) == ["campaign_paused"]
    assert f'action="/campaigns/{scored.pk}/status/"' in paused and 'value="active"' in paused
    campaign_set_status(campaign=scored, status=CampaignStatus.FINISHED)
    finished = researcher_client.post(
        send_url(project), {"response_ids": [rid("i2", "m1")], "extra": "1"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert reasons_of(finished) == ["campaign_finished"] and "is finished" in finished
    new = f'href="/projects/{project.slug}/campaigns/new/?dataset={scored.dataset_id}"'
    assert new in finished


def test_without_script_the_reasons_come_as_messages(project, scored, researcher_client):
    campaign_set_status(campaign=scored, status=CampaignStatus.FINISHED)
    answer = researcher_client.post(
        send_url(project), {"response_ids": [rid("i0", "m1")], "extra": "1"}, follow=True
    )
    body = answer.content.decode()
    assert "C is finished" in body and "Create a new (review) campaign" in body


def test_the_api_gives_the_reasons_with_their_next_steps(project, scored, researcher):
    # given: C is finished
    campaign_set_status(campaign=scored, status=CampaignStatus.FINISHED)
    target = rid("i0", "m1")
    # when
    answer = api_client(researcher).post(
        reannotation_url(project),
        {"campaign": scored.pk, "response_ids": [target, 999_999], "extra": 1},
        format="json",
    )
    # then: 200, nothing reopened, and why, per kind of answer
    assert answer.status_code == 200
    body = answer.json()
    assert body["reopened"] == 0 and body["campaign_status"] == "finished"
    outcomes = {o["response"]: o["outcome"] for o in body["outcomes"]}
    assert outcomes == {target: "campaign_finished", 999_999: "not_in_campaign"}
    reasons = {r["code"]: r for r in body["reasons"]}
    assert set(reasons) == {"campaign_finished", "not_in_campaign"}
    finished = reasons["campaign_finished"]
    assert finished["responses"] == [target] and "finished" in finished["text"]
    assert finished["next_steps"] == [
        {
            "action": "create_campaign",
            "text": "Create a new (review) campaign over the dataset to annotate them again.",
            "responses": [target],
            "campaign": None,
            "dataset": scored.dataset_id,
            "extra": None,
            "url": f"/projects/{project.slug}/campaigns/new/?dataset={scored.dataset_id}",
        }
    ]
    assert reasons["not_in_campaign"]["next_steps"] == []  # 999999 is no response at all
    assert Task.objects.get(campaign=scored, response_id=target).overlap == 2
