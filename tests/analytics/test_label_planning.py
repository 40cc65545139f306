"""How many labels are enough (analytics.planning): the pilot's figures from hand-made rows
(worked by hand, and equal to analytics.ppi's planning functions on them), a simulation that
the plan holds, and the page, its campaign-form panel and the API on a small project."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from django.urls import reverse

from analytics import ppi
from analytics.imports.services import scores_import
from analytics.planning import pilot
from analytics.planning.pilot import label_plan, residual_bins
from analytics.selectors import report_rows
from annotation.models import Dataset
from tests.clients import token_client

# --- the pure pilot, from hand-made rows --------------------------------------------------------

# Ten labeled responses on five items, systems a (responses 1-5) and b (6-10):
# Y    = 1 2 3 4 5 | 1 2 3 4 5   mean 3, population variance (4+1+0+1+4)*2/10 = 2
# Yhat = 1 2 3 4 5 | 2 1 4 3 5   mean 3, population variance 2
# Cov  = (10 + (2 + 2 + 0 + 0 + 4)) / 10 = 1.8, so rho = 1.8 / 2 = 0.9.
Y = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5]
YHAT = [1, 2, 3, 4, 5, 2, 1, 4, 3, 5]
# b's response on item k is response 11 - k, so the paired differences a - b per item are
# D = 2k - 6 = -4 -2 0 2 4 and Dhat = -4 -1 -1 3 3 (both mean 0):
# sd = sqrt(40 / 5) = sqrt(8); rho = 36 / sqrt(40 * 36) = sqrt(0.9).
ITEM = {r: r for r in range(1, 6)} | {r: 11 - r for r in range(6, 11)}


def hand_rows() -> tuple[list, list]:
    human, judge = [], []
    for r, (y, yhat) in enumerate(zip(Y, YHAT, strict=True), start=1):
        system = "a" if r <= 5 else "b"
        judge.append((r, ITEM[r], system, "S", "J", float(yhat)))
        judge.append((r, ITEM[r], system, "S", "K", 1.0))  # another judge: left out
        if r == 2:  # a mean of one value and an N/A
            human += [(r, ITEM[r], system, "S", "p", y), (r, ITEM[r], system, "S", "q", None)]
        elif r == 3:  # a mean of two values: (2 + 4) / 2 = 3
            human += [(r, ITEM[r], system, "S", "p", 2), (r, ITEM[r], system, "S", "q", 4)]
        else:
            human.append((r, ITEM[r], system, "S", "p", y))
    # response 11: judged, people said N/A only; 12-101: judged, unlabeled (45 items x 2)
    judge.append((11, 6, "a", "S", "J", 3.0))
    human.append((11, 6, "a", "S", "p", None))
    for k in range(90):
        r = 12 + k
        judge.append((r, 100 + k // 2, "ab"[k % 2], "S", "J", float(1 + k % 5)))
    judge.append((500, 900, "a", "S", "J", None))  # the judge said N/A: not in the frame
    return human, judge


def test_the_pilot_figures_are_worked_by_hand():
    human, judge = hand_rows()
    [p] = pilot.pilot_figures(human, judge, judge_name="J")
    assert p.skill == "S"
    assert p.n_labeled == 10 and p.n_human_na == 1
    assert p.mean_y == pytest.approx(3.0)
    assert p.sd_y == pytest.approx(math.sqrt(2))
    assert p.rho == pytest.approx(0.9)
    # the frame: every response the judge scored (10 labeled, 1 N/A, 90 unlabeled)
    assert p.n_frame == 101 and p.n_frame_labeled == 10
    unlabeled = [3.0] + [float(1 + k % 5) for k in range(90)]
    assert p.lam == pytest.approx(ppi.power_tuning_lambda(np.array(Y), np.array(YHAT), unlabeled))
    # the active design's line: lambda = Cov / Var(Yhat) = 1.8 / 2, c = 3 - 0.9 * 3
    assert p.lam_active == pytest.approx(0.9)
    assert p.offset_active == pytest.approx(0.3)
    # paired differences, worked above; the frame has 5 + 45 items with both systems
    d = p.differences
    assert (d.n, d.n_system_pairs, d.n_frame_items) == (5, 1, 50)
    assert d.sd == pytest.approx(math.sqrt(8)) and d.rho == pytest.approx(math.sqrt(0.9))


def test_residual_bins_shrink_toward_the_overall_error_by_hand():
    # errors 1, 1, 3 at judge scores 1, 1, 5: overall mean square (1 + 1 + 9) / 3 = 11/3;
    # level 1: (2 * 1 + 10 * 11/3) / 12; level 5: (1 * 9 + 10 * 11/3) / 11; others 11/3
    bins = residual_bins(
        np.array([1.0, -1.0, 3.0]), np.array([1.0, 1.4, 5.0]), np.array([1, 2, 5, 4.5])
    )
    assert [b.label for b in bins] == ["1", "2", "3", "4", "5"]
    assert [b.n_labeled for b in bins] == [2, 0, 0, 0, 1]
    assert [b.n_frame for b in bins] == [1, 1, 0, 0, 2]  # 4.5 rounds up to 5
    assert bins[0].rms == pytest.approx(1.0) and bins[1].rms is None
    assert bins[0].rms_shrunk == pytest.approx(math.sqrt((2 + 110 / 3) / 12))
    assert bins[4].rms_shrunk == pytest.approx(math.sqrt((9 + 110 / 3) / 11))
    assert bins[2].rms_shrunk == pytest.approx(math.sqrt(11 / 3))


def test_a_judge_on_its_own_scale_is_binned_by_its_quintiles():
    yhat = np.arange(10, dtype=float) * 10  # 0 .. 90: quintile edges 18, 36, 54, 72
    bins = residual_bins(np.ones(10), yhat, yhat, own_scale=True)
    assert [b.label for b in bins] == ["< 18", "18 to < 36", "36 to < 54", "54 to < 72", ">= 72"]
    assert [b.n_labeled for b in bins] == [2, 2, 2, 2, 2]


def test_the_labels_needed_are_analytics_ppis_on_the_pilot():
    human, judge = hand_rows()
    [plan] = label_plan(human, judge, judge_name="J", half_width=0.5, budget=40)
    p = plan.pilot
    sd = math.sqrt(2)
    assert plan.human.labels == ppi.labels_needed_human(sd, 0.5) == 31
    assert plan.ppi.labels == ppi.labels_needed_ppi(sd, 0.9, 101, 0.5)
    assert plan.ppi.labels is not None and plan.ppi.labels < plan.human.labels
    # every frame response's expected error is its level's shrunk RMS of Y - lambda_a Yhat - c_a
    residuals = np.array(Y) - p.lam_active * np.array(YHAT) - p.offset_active
    expected = residual_bins(
        residuals,
        np.array(YHAT, dtype=float),
        np.array([v[5] for v in judge if v[4] == "J" and v[5] is not None], dtype=float),
    )
    assert p.bins == expected
    frame_sd = np.repeat([b.rms_shrunk for b in expected], [b.n_frame for b in expected])
    assert list(p.expected_error([1.0, 1.49, 1.5, 4.5, 5.0])) == [
        expected[i].rms_shrunk for i in (0, 0, 1, 4, 4)
    ]
    assert plan.active.labels == ppi.labels_needed_active(sd, frame_sd, 0.5)
    assert plan.active.reachable is True
    # 5 paired differences (fewer than 10): sd_y sqrt(2) = 2 and the rho on scores, 0.9
    d = plan.detectable
    assert d.source == "scores" and d.sd == pytest.approx(2.0) and d.rho == pytest.approx(0.9)
    assert d.human == pytest.approx(ppi.min_detectable_difference(2.0, 40))
    assert d.ppi == pytest.approx(ppi.min_detectable_difference(2.0, 40, rho=0.9, n_total=50))
    assert any("paired differences" in note for note in plan.notes)
    # 10 labeled: not too few, but rough
    assert plan.too_few == "" and plan.rough
    assert plan.notes[0].startswith("Rough: the pilot has 10 labeled responses")


def test_a_half_width_out_of_reach_is_not_reachable():
    human, judge = hand_rows()
    [plan] = label_plan(human, judge, judge_name="J", half_width=0.05)
    assert plan.human.labels == ppi.labels_needed_human(math.sqrt(2), 0.05) > 101
    assert plan.ppi == pilot.Need(None, False)
    assert plan.active == pilot.Need(None, False)
    assert any("more labels than the frame's 101" in note for note in plan.notes)


def test_the_frame_narrows_t_and_the_unlabeled_responses():
    human, judge = hand_rows()
    frame = set(range(1, 11)) | {12, 13, 14}
    [p] = pilot.pilot_figures(human, judge, judge_name="J", frame=frame)
    # the pilot stays the project's labels; the frame is 13 responses, 10 of them labeled
    assert p.n_labeled == 10 and p.n_frame == 13 and p.n_frame_labeled == 10
    assert p.lam == pytest.approx(
        ppi.power_tuning_lambda(np.array(Y), np.array(YHAT), [1.0, 2.0, 3.0])
    )
    assert sum(b.n_frame for b in p.bins) == 13


def test_a_pilot_under_the_minimum_is_too_few():
    human, judge = hand_rows()
    keep = {1, 2, 3, 4, 6}
    [plan] = label_plan([r for r in human if r[0] in keep], judge, judge_name="J")
    assert plan.pilot.n_labeled == 5
    assert plan.too_few == pilot.pilot_too_few(5) != ""
    assert "n = 5" in plan.too_few and not plan.rough
    # with under 2 labels nothing is computed
    [none] = label_plan([r for r in human if r[0] == 1], judge, judge_name="J")
    assert none.human == none.ppi == none.active == pilot.Need(None, None)
    assert none.detectable.human is None


def test_a_judge_that_does_not_correlate_gets_no_weight():
    human, judge = hand_rows()
    flat = [(r[0], r[1], r[2], r[3], r[4], 3.0 if r[0] <= 10 else r[5]) for r in judge]
    [plan] = label_plan(human, flat, judge_name="J", half_width=0.5)
    assert plan.pilot.rho is None
    # rho 0: PPI's variance is people's, sd^2 / n (n = ceil((z sd / h)^2) as people only)
    assert plan.ppi.labels == ppi.labels_needed_ppi(math.sqrt(2), 0.0, 101, 0.5)
    assert plan.ppi.labels == plan.human.labels
    assert any("no weight" in note for note in plan.notes)


def test_bad_parameters_are_refused_by_the_pure_plan():
    human, judge = hand_rows()
    [p] = pilot.pilot_figures(human, judge, judge_name="J")
    for half_width in (0.0, -1.0, 4.5):
        with pytest.raises(ValueError, match="half-width"):
            pilot.skill_plan(p, half_width=half_width)
    with pytest.raises(ValueError, match="budget"):
        pilot.skill_plan(p, budget=1)


# --- a simulation: the plan holds ------------------------------------------------------------


def synthetic(rng, *, big_t: int, n_pilot: int, noise: float) -> tuple[list, list, np.ndarray]:
    """T responses, two systems per item; Y ~ N(3, 1) (+0.3 for system a), the judge's
    score Y + N(0, noise); the first n_pilot responses are labeled."""
    truth = rng.normal(3.0, 1.0, big_t) + np.where(np.arange(big_t) % 2 == 0, 0.3, 0.0)
    yhat = truth + rng.normal(0.0, noise, big_t)
    judge = [(r, r // 2, "ab"[r % 2], "S", "J", float(yhat[r])) for r in range(big_t)]
    human = [(r, r // 2, "ab"[r % 2], "S", "p", float(truth[r])) for r in range(n_pilot)]
    return human, judge, truth


@pytest.mark.parametrize("noise", [0.5, 1.0, 2.0])
def test_on_a_synthetic_pilot_ppi_needs_no_more_labels_than_people(noise):
    rng = np.random.default_rng(int(noise * 10))
    human, judge, _ = synthetic(rng, big_t=4000, n_pilot=200, noise=noise)
    [plan] = label_plan(human, judge, judge_name="J", half_width=0.1, budget=100)
    assert plan.pilot.rho is not None and plan.pilot.rho > 0
    assert plan.ppi.labels is not None and plan.ppi.labels <= plan.human.labels
    assert plan.detectable.source == "pilot differences"  # 100 items with both systems
    assert plan.detectable.ppi <= plan.detectable.human


def test_the_planned_labels_give_about_the_planned_half_width():
    # given: a pilot of 200 labels on 5,000 responses with a fair judge
    rng = np.random.default_rng(4)  # a pilot whose sd is the population's (0.996 and 1.007)
    human, judge, truth = synthetic(rng, big_t=5000, n_pilot=200, noise=0.7)
    yhat = np.array([row[5] for row in judge])
    [plan] = label_plan(human, judge, judge_name="J", half_width=0.05)
    n = plan.ppi.labels
    assert n is not None and n < plan.human.labels
    # when: n responses drawn at random are labeled, 20 times
    widths = []
    for _ in range(20):
        chosen = rng.choice(len(truth), n, replace=False)
        rest = np.setdiff1d(np.arange(len(truth)), chosen)
        found = ppi.ppi_mean(truth[chosen], yhat[chosen], yhat[rest])
        widths.append(found.ci_high - found.estimate)
    # then: the PPI++ interval's half-width is about the one planned
    assert np.mean(widths) == pytest.approx(0.05, rel=0.1)


def test_the_planned_active_budget_gives_about_the_planned_half_width():
    # given: a judge exact on clear responses and noisy on middling ones, on the 1-5 scale
    rng = np.random.default_rng(4)
    truth = np.clip(rng.normal(3.0, 1.2, 5000), 1, 5)
    middling = (truth > 2.2) & (truth < 3.8)
    yhat = np.clip(np.round(truth + rng.normal(0, np.where(middling, 1.2, 0.15))), 1, 5)
    judge = [(r, r // 2, "ab"[r % 2], "S", "J", float(yhat[r])) for r in range(5000)]
    human = [(r, r // 2, "ab"[r % 2], "S", "p", float(truth[r])) for r in range(300)]
    [plan] = label_plan(human, judge, judge_name="J", half_width=0.05)
    budget = plan.active.labels
    assert budget is not None and budget < plan.human.labels
    # when: the design's probabilities from the plan's expected errors draw responses 100 times
    pi = ppi.inclusion_probabilities(plan.pilot.expected_error(yhat), budget)
    widths = []
    for _ in range(100):
        found = ppi.active_mean(yhat, pi, rng.random(5000) < pi, truth)
        widths.append(found.ci_high - found.estimate)
    # then: the active estimate's half-width is about the one planned
    assert np.mean(widths) == pytest.approx(0.05, rel=0.1)


# --- the page, the panel and the API on a small project -----------------------------------------


def imported(project, rows: list[tuple], dataset: str) -> None:
    text = "item,system,rater,rater_kind,skill,score\n" + "".join(
        ",".join(str(v) for v in row) + "\n" for row in rows
    )
    scores_import(
        project_slug=project.slug,
        files=[("s.csv", io.BytesIO(text.encode()))],
        dataset_name=dataset,
    )


@pytest.fixture
def planned_project(project):
    """Dataset D: 8 items x 2 systems, the first 6 items labeled by two people (12 labeled
    responses), a judge J on all 16; dataset E: 3 items x 2 systems, judged only."""
    rows = []
    for i in range(8):
        for s, shift in (("m1", 0), ("m2", 1)):
            base = 1 + (i + shift) % 5
            if i < 6:
                rows.append((f"i{i}", s, "p1", "human", "Readability", base))
                rows.append((f"i{i}", s, "p2", "human", "Readability", min(5, base + i % 2)))
            rows.append((f"i{i}", s, "J", "judge", "Readability", min(5, base + (i % 3 == 0))))
    imported(project, rows, "D")
    imported(
        project,
        [(f"e{i}", s, "J", "judge", "Readability", 3) for i in range(3) for s in ("m1", "m2")],
        "E",
    )
    return project


def page_url(project) -> str:
    return reverse("analytics:label-planning", args=[project.slug])


def api_url(project) -> str:
    return reverse("analytics-api:label-planning", args=[project.slug])


def test_the_page_shows_a_row_per_skill_with_its_n(planned_project, researcher_client):
    response = researcher_client.get(page_url(planned_project))
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html and 'id="planning-form"' in html
    assert 'data-skill="Readability"' in html and "<b>J</b>" in html
    assert "data-n-pilot>12" in html and "rough" in html  # 12 labeled: under 30
    assert "HX-Request" in response["Vary"]


def test_htmx_gets_the_results_only(planned_project, researcher_client):
    response = researcher_client.get(
        page_url(planned_project), {"half_width": "0.5"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert html.lstrip().startswith('<section id="planning-results"')
    assert "<b>0.5</b>" in html


def test_the_page_says_what_is_wrong_with_a_parameter(planned_project, researcher_client):
    response = researcher_client.get(
        page_url(planned_project), {"half_width": "0", "judge": "nobody", "budget": "1"}
    )
    html = response.content.decode()
    assert response.status_code == 200 and "data-planning-errors" in html
    assert "the half-width must be more than 0 and at most 4" in html
    assert "unknown judge nobody" in html and "the budget must be at least 2" in html


def test_the_page_is_the_staffs(planned_project, annotator_client, outsider_client, client):
    url = page_url(planned_project)
    assert annotator_client.get(url).status_code == 403
    assert outsider_client.get(url).status_code == 404
    assert client.get(url).status_code == 302
    assert token_client().get(api_url(planned_project)).status_code == 401


def test_the_page_answers_only_get(planned_project, researcher_client):
    assert researcher_client.post(page_url(planned_project)).status_code == 405


def test_a_project_without_judge_scores_says_so(project, researcher_client, researcher):
    response = researcher_client.get(page_url(project))
    assert response.status_code == 200 and "data-planning-empty" in response.content.decode()
    body = token_client(researcher).get(api_url(project)).json()
    assert body["judge"] is None and body["skills"] == []


def test_names_from_the_data_are_escaped(project, researcher_client):
    rows = [(f"i{i}", "m1", "<i>x</i>", "judge", "Readability", 3) for i in range(3)]
    imported(project, rows + [("i0", "m1", "p", "human", "Readability", 4)], "D")
    html = researcher_client.get(page_url(project)).content.decode()
    assert "<i>x</i>" not in html and "&lt;i&gt;x&lt;/i&gt;" in html


def test_the_api_answers_the_pure_plan_of_the_projects_rows(planned_project, researcher):
    # when
    response = token_client(researcher).get(
        api_url(planned_project), {"judge": "J", "half_width": "0.5", "budget": "20"}
    )
    # then
    assert response.status_code == 200
    body = response.json()
    rows = report_rows(project=planned_project)
    [plan] = label_plan(rows.human, rows.judge, judge_name="J", half_width=0.5, budget=20)
    assert body["judge"] == "J" and body["judges"] == ["J"]
    assert (body["half_width"], body["budget"], body["alpha"], body["power"]) == (
        0.5,
        20,
        0.05,
        0.8,
    )
    [skill] = body["skills"]
    assert skill["skill"] == "Readability"
    assert skill["pilot"]["n_labeled"] == 12 and skill["pilot"]["n_frame"] == 22
    assert skill["pilot"]["sd_y"] == pytest.approx(plan.pilot.sd_y)
    assert skill["pilot"]["rho"] == pytest.approx(plan.pilot.rho)
    assert skill["labels_needed"]["human"] == {"labels": plan.human.labels, "reachable": True}
    assert skill["labels_needed"]["ppi"]["labels"] == plan.ppi.labels
    assert skill["labels_needed"]["active"]["labels"] == plan.active.labels
    assert skill["min_detectable_difference"]["human"] == pytest.approx(plan.detectable.human)
    assert skill["too_few"] is None and skill["rough"] is True
    assert len(skill["residual_bins"]) == 5


def test_the_api_narrows_the_frame_to_a_dataset_and_models(planned_project, researcher):
    api = token_client(researcher)
    d = Dataset.objects.get(project=planned_project, name="D")
    e = Dataset.objects.get(project=planned_project, name="E")
    in_d = api.get(api_url(planned_project), {"dataset": d.pk}).json()["skills"][0]["pilot"]
    in_e = api.get(api_url(planned_project), {"dataset": e.pk}).json()["skills"][0]["pilot"]
    m1_in_e = api.get(api_url(planned_project), {"dataset": e.pk, "models": ["m1"]}).json()
    # the pilot stays the project's 12 labels; the frame is the dataset's judged responses
    assert (in_d["n_labeled"], in_d["n_frame"], in_d["n_frame_labeled"]) == (12, 16, 12)
    assert (in_e["n_labeled"], in_e["n_frame"], in_e["n_frame_labeled"]) == (12, 6, 0)
    assert m1_in_e["skills"][0]["pilot"]["n_frame"] == 3 and m1_in_e["models"] == ["m1"]


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({"judge": "nobody"}, "judge", "unknown judge nobody"),
        ({"half_width": "0"}, "half_width", "more than 0 and at most 4"),
        ({"half_width": "-0.1"}, "half_width", "more than 0 and at most 4"),
        ({"half_width": "4.5"}, "half_width", "more than 0 and at most 4"),
        ({"half_width": "nan"}, "half_width", "number"),
        ({"budget": "1"}, "budget", "at least 2"),
        ({"budget": "many"}, "budget", "whole number"),
        ({"dataset": "999999"}, "dataset", "no dataset 999999 in this project"),
        ({"models": "zzz"}, "models", "unknown model zzz"),
    ],
)
def test_the_api_refuses_a_bad_parameter_with_its_message(
    project, researcher, query, field, message
):
    response = token_client(researcher).get(api_url(project), query)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid" and message in " ".join(body["fields"][field])
    assert message in body["detail"]


@pytest.mark.django_db
def test_the_api_is_in_the_openapi_schema(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/v1/projects/{slug}/label-planning"]["get"]
    names = {p["name"] for p in operation["parameters"]}
    assert {"judge", "half_width", "budget", "dataset", "models"} <= names
    assert "400" in operation["responses"]


def test_the_campaign_form_has_the_planning_panel(planned_project, researcher_client):
    html = researcher_client.get(
        reverse("annotation:campaign-create", args=[planned_project.slug])
    ).content.decode()
    assert "How many labels are enough?" in html
    d = Dataset.objects.get(project=planned_project, name="D")  # the form's first choice
    assert f'href="{page_url(planned_project)}?dataset={d.pk}"' in html  # works without script
    assert f'hx-get="{page_url(planned_project)}"' in html and 'hx-include="#id_dataset"' in html


def test_the_panel_gets_the_plan_of_the_chosen_dataset(planned_project, researcher_client):
    e = Dataset.objects.get(project=planned_project, name="E")
    response = researcher_client.get(
        page_url(planned_project), {"dataset": e.pk, "panel": "1"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert "dataset <b>E</b>" in html
    assert f'href="{page_url(planned_project)}?dataset={e.pk}"' in html  # the full page
