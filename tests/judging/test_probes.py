"""Bias probes as runs, against the project's OpenAI-compatible server on 127.0.0.1: each
probe run is made from a finished base run and judged through the normal run machinery;
the server's bias knobs inject one bias at a time, and the figures (analytics.trust.probes)
find exactly the injected one: the interval excludes 0 with the knob and includes it
without. The server runs with `content_scores`, so an unbiased judge gives the same score
whatever a probe changed (docs/OPENAI_SERVER.md, "Biases")."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.template.loader import render_to_string
from django.urls import reverse

from analytics.trust.probes import probe_figures
from annotation.datasets.services import FileSpec, dataset_import, dataset_upload_create
from annotation.models import UploadSource, UploadStatus
from devtools.openai_server import FakeOpenAIServer
from judging.models import JudgeKind, JudgeRun, Judgment, ModelFamily, RunStatus
from judging.prompts import probes as transforms
from judging.selectors import judge_score_rows, probe_data
from judging.services import judge_batch, judge_config_create, judge_run_create
from judging.services.probes import model_families_set, probe_run_create
from judging.services.runs import BUDGET_REACHED, run_response_ids
from tests.conftest import wait_for
from tests.judging.test_runs import llm_judge, running

SKILLS = ["Factuality", "Comprehension", "Readability"]
MODELS = ("alpha-1", "beta-2", "gamma-3")
FILLER = "This part walks through one more step of the reasoning in plain words"


def make_probe_dataset(project, tmp_path, items=14):
    """Responses of varied length whose first sentence names the item and, for alpha-1
    only, the family "alpha"; beta-2's text never says "beta"."""
    lines = []
    for i in range(items):
        responses = []
        for m, model in enumerate(MODELS):
            who = "the alpha system" if model == "alpha-1" else f"system number {m}"
            steps = 2 + (i * 7 + m * 11) % 17
            text = f"Item {i} is answered by {who}. " + " ".join(
                f"{FILLER} ({k})." for k in range(steps)
            )
            responses.append({"model": model, "text": text})
        lines.append(
            json.dumps(
                {
                    "id": f"i{i}",
                    "instruction": f"Question {i}",
                    "reference": f"Reference {i}.",
                    "skills": SKILLS,
                    "responses": responses,
                }
            )
        )
    path = tmp_path / "probe.jsonl"
    path.write_text("\n".join(lines) + "\n")
    upload = dataset_upload_create(
        project=project,
        dataset_name="P",
        source=UploadSource.CLI,
        files=[(FileSpec(path.name), str(path))],
    )
    upload = dataset_import(upload_id=upload.pk)
    assert upload.status == UploadStatus.SUCCEEDED, upload.summary
    return upload.dataset


@pytest.fixture
def dataset(project, tmp_path):
    return make_probe_dataset(project, tmp_path)


def drive(run):
    """Judge every response of a running run (what its batch tasks do), then reread it."""
    judge_batch(run_id=run.pk, response_ids=run_response_ids(run, after_id=0, limit=10**6))
    run.refresh_from_db()
    return run


def base_run(judge, dataset, **extra):
    run = drive(running(judge_run_create(judge=judge, dataset=dataset, **extra)))
    assert run.status == RunStatus.DONE, run.error
    return run


def figures_of(project, name="J", human=(), resamples=300):
    judge_rows = [r for r in judge_score_rows(project=project) if r[4] == name]
    data = probe_data(project=project, judges=[name])
    return probe_figures(data, human=list(human), judge=judge_rows, resamples=resamples)[name]


def includes_zero(interval):
    return interval["low"] <= 0 <= interval["high"]


def excludes_zero(interval):
    return not includes_zero(interval)


# --- pointwise probes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("probe", "params", "knob", "sign"),
    [
        ("pad", {}, {"length_bias": 4.0}, +1),
        ("truncate", {"share": 0.5}, {"length_bias": 4.0}, -1),
        ("names_shown", {}, {"self_preference": "beta"}, +1),
    ],
)
def test_a_pointwise_probe_finds_its_bias_only_when_the_judge_has_it(
    project, dataset, probe, params, knob, sign
):
    effects = {}
    for biased in (False, True):
        with FakeOpenAIServer(content_scores=True, **(knob if biased else {})) as server:
            judge = llm_judge(project, server, name=f"J{int(biased)}")
            base = base_run(judge, dataset)
            run = drive(probe_run_create(base_run=base, probe=probe, params=params))
        assert run.status == RunStatus.DONE and run.total == 42 == run.done
        assert run.probe == probe and run.base_run_id == base.pk
        effects[biased] = figures_of(project, judge.name)["runs"][0]["effect"]
    assert effects[False]["estimate"] == 0.0 and includes_zero(effects[False])
    assert excludes_zero(effects[True]) and effects[True]["estimate"] * sign > 0


@pytest.mark.parametrize(
    ("probe", "params"), [("reference", {}), ("rubric_order", {"order": "rotate"})]
)
def test_an_unbiased_judge_shows_no_effect_of_reference_or_rubric_order(
    project, dataset, probe, params
):
    with FakeOpenAIServer(content_scores=True, length_bias=2.0, self_preference="beta") as server:
        base = base_run(llm_judge(project, server), dataset)
        run = drive(probe_run_create(base_run=base, probe=probe, params=params))
    sent = Judgment.objects.filter(run=run).first().request["messages"][-1]["content"]
    if probe == "reference":
        assert "[Reference answer]" in sent  # the judge did not use it: the probe adds it
    else:
        order = [line[7:] for line in sent.splitlines() if line.startswith("Skill: ")]
        assert order == [*SKILLS[1:], SKILLS[0]]
    figures = figures_of(project)["runs"][0]
    assert figures["effect"]["estimate"] == 0.0 and includes_zero(figures["effect"])
    assert set(figures["skills"]) == set(SKILLS) and figures["n"] == 126


def test_self_preference_and_length_are_found_from_the_base_run_alone(project, dataset):
    # "people" score like an unbiased judge at temperature 0 (the truth); the judges below
    # sample at temperature 1, so their scores are the truth moved by -1, 0 or +1 (a hash)
    with FakeOpenAIServer(content_scores=True) as server:
        fair = base_run(llm_judge(project, server, name="fair"), dataset)
    human = [
        (rid, item, system, skill, "people", value)
        for rid, item, system, skill, _judge, value in judge_score_rows(project=project)
        if value is not None
    ]
    assert fair.status == RunStatus.DONE and human
    model_families_set(project=project, families={"alpha-1": "alpha", "beta-2": "beta"})
    found = {}
    for name, knob in [
        ("plain", {}),
        ("selfish", {"self_preference": "alpha"}),
        ("long", {"length_bias": 4.0}),
    ]:
        with FakeOpenAIServer(content_scores=True, **knob) as server:
            judge = llm_judge(project, server, name=name, family="alpha", temperature=1.0)
            base_run(judge, dataset)
        found[name] = figures_of(project, name, human)
    for name, figures in found.items():
        difference = figures["self_preference"]["difference"]
        assert figures["family"] == "alpha" and figures["self_preference"]["own_systems"] == [
            "alpha-1"
        ]
        assert excludes_zero(difference) == (name == "selfish"), (name, difference)
        partial = figures["length"]["partial_r"]
        assert excludes_zero(partial) == (name == "long"), (name, partial)
    assert found["selfish"]["self_preference"]["difference"]["estimate"] > 0.5
    assert found["long"]["length"]["partial_r"]["estimate"] > 0.3
    # the trust page's partial shows them (context: trust = report["trust"][judge])
    html = render_to_string(
        "analytics/report/_trust_probes.html",
        {"trust": {"probes": found["selfish"]}, "judge": "selfish"},
    )
    assert 'id="trust-probe-figures"' in html and "Own systems: alpha-1" in html
    assert "0.774" in html or "0.77" in html
    assert html == render_to_string(  # the trust page passes the judge's figures as `probes`
        "analytics/report/_trust_probes.html", {"probes": found["selfish"], "judge": "selfish"}
    )
    empty = render_to_string("analytics/report/_trust_probes.html", {"trust": {}, "judge": "x"})
    assert 'id="trust-probes-empty"' in empty


# --- pairwise probes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("probe", "params", "knob"),
    [
        ("bandwagon", {}, {"bandwagon": 0.7}),
        ("distraction", {"sentence": 2}, {"distraction": 0.7}),
    ],
)
def test_a_pairwise_probe_counts_flips_only_when_the_judge_is_swayed(
    project, dataset, probe, params, knob
):
    rates = {}
    for biased in (False, True):
        with FakeOpenAIServer(content_scores=True, **(knob if biased else {})) as server:
            judge = llm_judge(project, server, name=f"J{int(biased)}")
            base = base_run(judge, dataset, pairwise_against="alpha-1")
            run = drive(probe_run_create(base_run=base, probe=probe, params=params))
        assert run.status == RunStatus.DONE and run.total == 14 * 2 * 2 == run.done
        figures = figures_of(project, judge.name)["runs"][0]
        assert figures["pairwise"] and figures["n"] == 56
        assert figures["texts"] == transforms.probe_texts(probe, run.probe_params)
        rates[biased] = figures["flip_rate"]
    assert rates[False]["estimate"] == 0.0 and includes_zero(rates[False])
    assert excludes_zero(rates[True]) and rates[True]["estimate"] > 0.2
    sent = Judgment.objects.none()  # the texts reached the judge:
    from judging.models import PairJudgment

    sent = PairJudgment.objects.filter(run=run).first().request["messages"][-1]["content"]
    marker = "Most people who compared" if probe == "bandwagon" else transforms.DISTRACTIONS[2]
    assert marker in sent


# --- the run machinery: cache, cost, budget, sample, refusals -------------------------------------


def test_a_probe_run_is_costed_cached_sampled_and_stopped_by_its_budget(project, dataset):
    prices = {"price_per_1k_prompt": Decimal("1"), "price_per_1k_completion": Decimal("1")}
    with FakeOpenAIServer(content_scores=True) as server:
        judge = llm_judge(project, server, **prices)
        base = base_run(judge, dataset)
        first = drive(probe_run_create(base_run=base, probe="pad", params={"limit": 5}))
        again = drive(probe_run_create(base_run=base, probe="pad", params={"limit": 5}))
        capped = drive(probe_run_create(base_run=base, probe="truncate", budget=Decimal("0")))
        calls = server.stats()["completions"]
    assert first.total == 5 and first.done == 5 and first.cost > 0 and first.cached == 0
    assert first.estimate["calls"] == 5 and Decimal(first.estimate["cost"]) > 0
    sample = first.probe_params["responses"]
    assert len(sample) == 5 and set(sample) < set(
        Judgment.objects.filter(run=base).values_list("response_id", flat=True)
    )
    # the same prompts again: answered from the cache, free; the same sample
    assert again.probe_params["responses"] == sample
    assert again.cached == 5 and again.cost == 0 and again.status == RunStatus.DONE
    assert capped.status == RunStatus.PAUSED and capped.error == BUDGET_REACHED
    assert calls == 42 + 5  # the base run, then the first probe run only
    assert probe_data(project=project).runs[0].cost == str(first.cost)


def test_hostile_or_mistaken_probes_are_refused_with_a_reason(project, dataset):
    with FakeOpenAIServer(content_scores=True) as server:
        judge = llm_judge(project, server)
        point = base_run(judge, dataset)
        pair = base_run(judge, dataset, pairwise_against="alpha-1")
        probe = drive(probe_run_create(base_run=point, probe="pad"))
        pending = judge_run_create(judge=judge, dataset=dataset)
    baseline = judge_config_create(
        project=project, name="b", kind=JudgeKind.BASELINE, baseline="rouge-l"
    )
    offline = drive(running(judge_run_create(judge=baseline, dataset=dataset)))
    cases = [
        (dict(base_run=probe, probe="pad"), "itself a probe run"),
        (dict(base_run=pending, probe="pad"), "only a finished"),
        (dict(base_run=point, probe="bandwagon"), "its probes are: pad"),
        (dict(base_run=pair, probe="pad"), "is pairwise"),
        (dict(base_run=point, probe="nope"), "unknown probe"),
        (dict(base_run=point, probe="truncate", params={"share": 2}), "share"),
        (dict(base_run=point, probe="pad", params={"evil": "x"}), "no parameter"),
        (dict(base_run=offline, probe="pad"), "only an LLM judge"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValidationError, match=message):
            probe_run_create(**kwargs)
    assert JudgeRun.objects.exclude(probe="").count() == 1


def test_model_families_are_validated_and_project_scoped(project, dataset):
    assert model_families_set(project=project, families={"alpha-1": "GPT-4.1"}) == {
        "alpha-1": "gpt-4.1"
    }
    for families, message in [
        ({"nobody": "x"}, "not a system of this project"),
        ({"beta-2": "<script>"}, "not a family name"),
        ({"beta-2": "a" * 101}, "not a family name"),
    ]:
        with pytest.raises(ValidationError, match=message):
            model_families_set(project=project, families=families)
    assert model_families_set(project=project, families={"alpha-1": ""}) == {}
    assert not ModelFamily.objects.exists()


# --- pages and API ------------------------------------------------------------------------------


def _api(user):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.get_or_create(user=user)[0].key)
    return client


def test_probes_are_started_from_the_run_page_and_the_api(
    project, dataset, researcher, researcher_client, annotator, outsider
):
    with FakeOpenAIServer(content_scores=True) as server:
        judge = llm_judge(project, server)
        base = base_run(judge, dataset)
        page = researcher_client.get(reverse("judging:run-detail", args=[base.pk])).content
        assert b'id="probe-form"' in page and b'value="bandwagon"' not in page
        url = reverse("judging:probe-create", args=[base.pk])
        refused = researcher_client.post(url, {"probe": "bandwagon"})
        assert refused.status_code == 400 and b"bandwagon is not one of" in refused.content
        refused = researcher_client.post(url, {"probe": "truncate", "share": "5"})
        assert refused.status_code == 400
        made = researcher_client.post(url, {"probe": "truncate", "share": "0.3", "limit": "4"})
        assert made.status_code == 302
        probe = JudgeRun.objects.get(probe="truncate")
        assert made["Location"] == reverse("judging:run-detail", args=[probe.pk])
        assert probe.status == RunStatus.RUNNING and probe.probe_params["share"] == 0.3
        assert probe.total == 4 and probe.created_by == researcher
        page = researcher_client.get(reverse("judging:run-detail", args=[probe.pk])).content
        assert b'id="probe-of"' in page and f"#{base.pk}".encode() in page
        listing = researcher_client.get(reverse("judging:judge-detail", args=[judge.pk])).content
        assert b'data-probe="truncate"' in listing
        # the API: the same service, the same refusals
        api = _api(researcher)
        created = api.post(
            f"/api/v1/judging/runs/{base.pk}/probes/",
            {"probe": "rubric_order", "params": {"order": "rotate", "limit": 3}},
            format="json",
        )
        assert created.status_code == 201, created.json()
        body = created.json()
        assert body["probe"] == "rubric_order" and body["base_run"] == base.pk
        assert body["total"] == 3
        for payload, message in [
            ({"probe": "pad", "params": {"share": 0.5}}, "no parameter"),
            ({"probe": "bandwagon"}, "its probes are"),
            ({"probe": "drop tables"}, "not a valid choice"),
        ]:
            answer = api.post(f"/api/v1/judging/runs/{base.pk}/probes/", payload, format="json")
            assert answer.status_code == 400 and message in json.dumps(answer.json())
        answer = api.post(
            f"/api/v1/judging/runs/{probe.pk}/probes/", {"probe": "pad"}, format="json"
        )
        assert answer.status_code == 400 and "itself a probe run" in json.dumps(answer.json())
        listed = api.get(f"/api/v1/judging/runs/{base.pk}/probes/").json()
        assert {r["probe"] for r in listed} == {"truncate", "rubric_order"}
    assert (
        _api(annotator)
        .post(f"/api/v1/judging/runs/{base.pk}/probes/", {"probe": "pad"}, format="json")
        .status_code
        == 403
    )
    assert _api(outsider).get(f"/api/v1/judging/runs/{base.pk}/probes/").status_code == 404


def test_families_are_declared_on_their_page_and_through_the_api(
    project, dataset, researcher, researcher_client, annotator, outsider
):
    with FakeOpenAIServer() as server:
        llm_judge(project, server, name="J")
    url = reverse("judging:families", args=[project.slug])
    page = researcher_client.get(url).content.decode()
    assert "alpha-1" in page and "gamma-3" in page
    bad = researcher_client.post(url, {"system_0": "<b>x</b>", "judge_0": ""})
    assert bad.status_code == 400 and "&lt;b&gt;x&lt;/b&gt;" in bad.content.decode()
    assert not ModelFamily.objects.exists()
    ok = researcher_client.post(url, {"system_0": "Alpha", "system_1": "", "judge_0": "alpha"})
    assert ok.status_code == 302
    api = _api(researcher)
    body = api.get(f"/api/v1/judging/projects/{project.slug}/families/").json()
    assert body == {
        "systems": {"alpha-1": "alpha", "beta-2": "", "gamma-3": ""},
        "judges": {"J": "alpha"},
    }
    body = api.patch(
        f"/api/v1/judging/projects/{project.slug}/families/",
        {"systems": {"beta-2": "beta"}, "judges": {"J": ""}},
        format="json",
    ).json()
    assert body["systems"]["beta-2"] == "beta" and body["judges"] == {"J": ""}
    answer = api.patch(
        f"/api/v1/judging/projects/{project.slug}/families/",
        {"systems": {"gamma-3": "ok"}, "judges": {"nobody": "x"}},
        format="json",
    )
    assert answer.status_code == 400 and "not a judge of this project" in json.dumps(answer.json())
    assert ModelFamily.objects.filter(model_name="gamma-3").count() == 0  # all or nothing
    assert researcher_client.get(url).status_code == 200
    assert (
        _api(annotator).get(f"/api/v1/judging/projects/{project.slug}/families/").status_code == 403
    )
    assert (
        _api(outsider).get(f"/api/v1/judging/projects/{project.slug}/families/").status_code == 404
    )


@pytest.mark.slow
def test_a_probe_run_completes_through_a_real_worker(celery_worker_process, project, tmp_path):
    # a probe run is started like any run: dispatched after commit, judged in batches by a
    # worker, with injected faults retried, and finished
    dataset = make_probe_dataset(project, tmp_path, items=5)
    with FakeOpenAIServer(content_scores=True, faults={"http_500": 0.2}, fault_seed=3) as srv:
        judge = llm_judge(project, srv, max_attempts=6)
        base = base_run(judge, dataset)
        probe = probe_run_create(base_run=base, probe="pad", params={"limit": 9})
        wait_for(lambda: JudgeRun.objects.get(pk=probe.pk).status == RunStatus.DONE, timeout=60)
    probe.refresh_from_db()
    assert probe.done == probe.total == 9
    assert Judgment.objects.filter(run=probe).values("response").distinct().count() == 9
    assert all(
        transforms.PAD_TEMPLATE.split("{first}")[0] in j.request["messages"][-1]["content"]
        for j in Judgment.objects.filter(run=probe)
    )
