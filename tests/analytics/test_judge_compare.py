"""Judge configurations compared (analytics.judge_compare, docs/JUDGE_COMPARISON.md): the
pure figures against hand-made cases, scipy and their own definitions, then the page and
the API on a small imported project."""

from __future__ import annotations

import io
from decimal import Decimal

import numpy as np
import pytest
from django.urls import reverse
from scipy import stats

from analytics import metrics
from analytics.imports.services import scores_import
from analytics.judge_compare import figures
from analytics.judge_compare.figures import Setup, compare_judges
from annotation.models import Dataset
from judging.models import JudgeConfig, JudgeKind, JudgeRun, PromptTemplate, RunStatus
from tests.clients import token_client

# --- synthetic rows ------------------------------------------------------------------------------


def synthetic(
    *,
    items: int = 30,
    systems: int = 5,
    judges: dict[str, tuple[float, float]],
    skill: str = "Factuality",
    seed: int = 3,
) -> tuple[list, list]:
    """Human rows (two people per response) and judge rows: judge NAME = the response's
    quality + a shared per-item error times `shared` + its own noise of sd `own`, rounded
    onto 1-5."""
    rng = np.random.default_rng(seed)
    human, judge = [], []
    rid = 0
    for item in range(items):
        item_error = rng.normal(0, 1)
        for s in range(systems):
            rid += 1
            quality = 3 + 0.3 * (s - systems / 2) + rng.normal(0, 0.8)
            for person in ("p1", "p2"):
                value = int(np.clip(round(quality + rng.normal(0, 0.5)), 1, 5))
                human.append((rid, item, f"sys{s}", skill, person, value))
            for name, (shared, own) in judges.items():
                value = quality + shared * item_error + rng.normal(0, own)
                judge.append(
                    (rid, item, f"sys{s}", skill, name, float(np.clip(round(value), 1, 5)))
                )
    return human, judge


def arrays(human: list, judge: list, names: list[str]) -> tuple[np.ndarray, list, np.ndarray]:
    """The human consensus, each judge's values and the items, by response."""
    sums: dict[int, list] = {}
    for rid, item, _system, _skill, _rater, value in human:
        sums.setdefault(rid, [item, 0, 0])
        sums[rid][1] += value
        sums[rid][2] += 1
    rids = sorted(sums)
    values = {(r[0], r[4]): r[5] for r in judge}
    h = np.array([sums[r][1] / sums[r][2] for r in rids])
    return (
        h,
        [np.array([values[r, n] for r in rids]) for n in names],
        np.array([sums[r][0] for r in rids]),
    )


# --- the paired difference -----------------------------------------------------------------------


@pytest.mark.parametrize("measure", ["pearson", "spearman", "kendall"])
def test_the_paired_difference_is_the_difference_of_the_two_correlations(measure):
    human, judge = synthetic(judges={"A": (0.3, 0.5), "B": (0.3, 1.0)})
    result = compare_judges(human, judge, judges=["A", "B"], measure=measure, resamples=200)
    [pair] = result["pairs"]
    h, (a, b), _items = arrays(human, judge, ["A", "B"])
    ca, cb = metrics.correlate(h, a), metrics.correlate(h, b)
    assert pair["a_value"] == getattr(ca, measure) and pair["b_value"] == getattr(cb, measure)
    assert pair["difference"]["estimate"] == pytest.approx(
        getattr(ca, measure) - getattr(cb, measure), abs=1e-12
    )
    assert pair["difference"]["low"] <= pair["difference"]["estimate"] <= pair["difference"]["high"]
    assert (pair["n"], pair["items"], pair["too_few"]) == (150, 30, "")
    # the two judges' own intervals come from the same resamples, on the same responses
    assert pair["a_ci"]["estimate"] == pytest.approx(getattr(ca, measure), abs=1e-12)
    assert pair["a_ci"]["resamples"] == pair["b_ci"]["resamples"] == 200


def test_two_identical_judges_differ_by_exactly_zero_on_every_resample():
    human, judge = synthetic(judges={"A": (0.3, 0.7)})
    twin = [(*row[:4], "A twin", row[5]) for row in judge]
    result = compare_judges(human, judge + twin, judges=["A", "A twin"], resamples=300)
    [pair] = result["pairs"]
    difference = pair["difference"]
    assert (difference["estimate"], difference["low"], difference["high"]) == (0.0, 0.0, 0.0)
    # an interval of one value is flagged, and the page says why instead of showing [0, 0]
    assert "degenerate_resamples" in difference["flags"]
    assert pair["note"] == "all resamples gave the same value"


def test_on_correlated_judges_the_paired_interval_is_narrower_than_the_unpaired_one():
    # both judges share a large per-item error (the items they get wrong are the same ones):
    # separately each correlation moves a lot from resample to resample, their difference little
    human, judge = synthetic(items=40, judges={"A": (1.0, 0.3), "B": (1.0, 0.45)}, seed=7)
    h, (a, b), items = arrays(human, judge, ["A", "B"])
    paired = figures.paired_difference(h, a, b, items, resamples=1000)
    unpaired = figures.unpaired_difference(h, a, b, items, resamples=1000)
    assert paired["estimate"] == pytest.approx(unpaired["estimate"])
    paired_width = paired["high"] - paired["low"]
    unpaired_width = unpaired["high"] - unpaired["low"]
    assert paired_width < 0.6 * unpaired_width
    # and the comparison's own figure is this paired one (same items, same seed)
    [pair] = compare_judges(human, judge, judges=["A", "B"], resamples=1000)["pairs"]
    assert (pair["difference"]["low"], pair["difference"]["high"]) == pytest.approx(
        (paired["low"], paired["high"])
    )


def test_with_a_baseline_each_judge_is_compared_with_it_else_every_two():
    assert figures.judge_pairs(["A", "B", "C"], "B") == [("A", "B"), ("C", "B")]
    assert figures.judge_pairs(["A", "B", "C"], None) == [("A", "B"), ("A", "C"), ("B", "C")]


def test_pairs_on_few_shared_responses_are_too_few():
    human, judge = synthetic(items=2, systems=4, judges={"A": (0.2, 0.5), "B": (0.2, 0.8)})
    [pair] = compare_judges(human, judge, judges=["A", "B"], resamples=100)["pairs"]
    assert pair["n"] == 8 and pair["too_few"] == "too few: n = 8 (at least 10 responses)"
    # the interval, on 2 items, carries its own flag too
    assert "too_few_items" in pair["difference"]["flags"]


def test_only_the_responses_both_judges_scored_are_compared():
    human, judge = synthetic(judges={"A": (0.2, 0.5), "B": (0.2, 0.8)})
    judge = [row for row in judge if not (row[4] == "B" and row[0] % 3 == 0)]
    [pair] = compare_judges(human, judge, judges=["A", "B"], resamples=0)["pairs"]
    assert pair["n"] == 100  # 150 responses, a third not scored by B
    assert pair["difference"]["low"] is None and pair["a_ci"] is None


# --- system ranking ------------------------------------------------------------------------------


def test_the_ranking_tau_is_scipys_kendalltau_of_the_system_means():
    human, judge = synthetic(systems=6, judges={"A": (0.2, 0.9), "B": (0.0, 0.4)})
    result = compare_judges(human, judge, judges=["A", "B"], resamples=300)
    for row in result["ranking"]:
        per_system: dict[str, list] = {}
        h, (j,), _ = arrays(human, judge, [row["judge"]])
        systems = {r[0]: r[2] for r in human}
        for rid, hv, jv in zip(sorted(systems), h, j, strict=True):
            per_system.setdefault(systems[rid], []).append((hv, jv))
        names = sorted(per_system)
        hm = [np.mean([p[0] for p in per_system[s]]) for s in names]
        jm = [np.mean([p[1] for p in per_system[s]]) for s in names]
        assert row["kendall"] == pytest.approx(stats.kendalltau(hm, jm).statistic, abs=1e-12)
        assert row["n_systems"] == 6 and row["too_few"] == ""
        ci = row["ci"]
        assert ci["low"] <= row["kendall"] <= ci["high"] and ci["resamples"] > 0
        assert [s["human_rank"] for s in row["systems"]] == sorted(
            s["human_rank"] for s in row["systems"]
        )


def test_fewer_systems_than_the_ranking_minimum_are_too_few():
    human, judge = synthetic(systems=3, judges={"A": (0.2, 0.5), "B": (0.2, 0.5)})
    row = compare_judges(human, judge, judges=["A", "B"], resamples=0)["ranking"][0]
    assert row["n_systems"] == 3
    assert row["too_few"] == "too few: n = 3 (at least 4 systems)"


# --- cost against quality ------------------------------------------------------------------------


def test_the_pareto_set_of_a_hand_made_case():
    points = {
        "cheap-poor": (1.0, 0.40),
        "mid": (2.0, 0.60),
        "dear-good": (5.0, 0.80),
        "dear-poor": (5.0, 0.50),  # dominated by mid (cheaper and better)
        "same-as-mid": (2.0, 0.60),  # ties dominate nothing: both stay
        "mid-worse": (2.0, 0.55),  # as cheap as mid, worse
        "no-cost": (None, 0.99),  # not drawn, not in the set
    }
    assert figures.pareto_front(points) == {"cheap-poor", "mid", "same-as-mid", "dear-good"}


def test_cost_per_1000_judgments_and_no_cost():
    assert figures.cost_per_1000(Setup("a", kind="llm", cost=3.0, judgments=1500)) == 2.0
    assert figures.cost_per_1000(Setup("a", kind="baseline", cost=0.0, judgments=10)) == 0.0
    assert figures.cost_per_1000(Setup("a", kind="imported", cost=0.0, judgments=10)) is None
    assert figures.cost_per_1000(Setup("a", kind="llm", cost=None)) is None
    assert figures.cost_per_1000(None) is None


def test_quality_is_on_the_responses_every_judge_scored_and_marks_the_pareto_judges():
    human, judge = synthetic(judges={"A": (0.0, 0.3), "B": (0.0, 1.2), "C": (0.0, 0.6)})
    setups = {
        "A": Setup("A", kind="llm", cost=9.0, judgments=150),
        "B": Setup("B", kind="llm", cost=1.5, judgments=150),
    }
    result = compare_judges(human, judge, judges=["A", "B", "C"], resamples=0, setups=setups)
    by = {q["judge"]: q for q in result["quality"]}
    h, (a,), _ = arrays(human, judge, ["A"])
    assert by["A"]["quality"] == metrics.correlate(h, a).pearson
    assert by["A"]["per_skill"]["Factuality"]["n"] == 150
    assert (by["A"]["per_1000"], by["B"]["per_1000"]) == (60.0, 10.0)
    assert by["C"]["no_cost"] and by["C"]["per_1000"] is None and not by["C"]["pareto"]
    assert by["A"]["pareto"] and by["B"]["pareto"]  # dearer but better, cheaper but worse
    chart = figures.pareto_chart(result["quality"])
    assert chart is not None and {p["judge"] for p in chart["points"]} == {"A", "B"}
    assert chart["frontier"].count(",") == 3  # two points and the step between them


def test_a_chart_of_free_judges_has_an_axis_of_0_to_1():
    chart = figures.pareto_chart(
        [{"judge": "rouge", "per_1000": 0.0, "quality": 0.3, "pareto": True}]
    )
    assert chart is not None
    assert [t["label"] for t in chart["xticks"]] == ["0", "0.2", "0.4", "0.6", "0.8", "1"]
    assert chart["points"][0]["x"] == chart["left"]


# --- configuration differences --------------------------------------------------------------------


def test_the_prompt_diff_is_difflibs_unified_diff():
    lines = figures.prompt_diff(
        "Rate the response.\nBe strict.\nAnswer in JSON.",
        "Rate the response.\nBe lenient.\nAnswer in JSON.",
        reference_name="base: k v1",
        other_name="new: k v2",
    )
    assert [(line["kind"], line["text"]) for line in lines] == [
        ("head", "--- base: k v1"),
        ("head", "+++ new: k v2"),
        ("hunk", "@@ -1,3 +1,3 @@"),
        ("same", " Rate the response."),
        ("del", "-Be strict."),
        ("add", "+Be lenient."),
        ("same", " Answer in JSON."),
    ]
    assert figures.prompt_diff("x", "x", reference_name="a", other_name="b") == []


def test_config_rows_mark_what_differs_and_never_show_credentials():
    setups = {
        "A": Setup(
            "A",
            kind="llm",
            model="m-1",
            base_url="https://api.example/v1",
            prompt="k v1",
            prompt_text="one",
            temperature=0.0,
            samples=1,
        ),
        "B": Setup(
            "B",
            kind="llm",
            model="m-1",
            base_url="https://user:pw@api.example/v1?key=s",
            prompt="k v2",
            prompt_text="two",
            temperature=0.7,
            samples=3,
        ),
    }
    rows = figures.config_rows(["A", "B", "imported rater"], "A", setups)
    a, b, other = rows
    assert a["reference"] and a["prompt_diff"] is None and a["differs"] == []
    assert b["base_url"] == "https://api.example/v1"
    assert b["differs"] == ["temperature", "samples", "prompt"]
    assert [line["text"] for line in b["prompt_diff"]][-2:] == ["-one", "+two"]
    assert not other["known"] and other["kind"] == ""


def test_bad_arguments_are_refused_by_the_pure_comparison():
    with pytest.raises(ValueError, match="two judges"):
        compare_judges([], [], judges=["A", "A"])
    with pytest.raises(ValueError, match="baseline"):
        compare_judges([], [], judges=["A", "B"], baseline="C")
    with pytest.raises(ValueError, match="measure"):
        compare_judges([], [], judges=["A", "B"], measure="cosine")


# --- the page and the API on a small imported project ---------------------------------------------

PROMPT = "Score the <script>alert(1)</script> response & explain."


def imported(project, rows: list[tuple], dataset: str = "D") -> None:
    text = "item,system,rater,rater_kind,skill,score\n" + "".join(
        ",".join(str(v) for v in row) + "\n" for row in rows
    )
    scores_import(
        project_slug=project.slug,
        files=[("s.csv", io.BytesIO(text.encode()))],
        dataset_name=dataset,
    )


@pytest.fixture
def compared(project):
    """12 items x 4 systems scored by two people and judges J1, J2 (imported); J1 and J2
    also have configurations in the project, J1 a finished run costing 3.00 over 1,500
    judgments; "<b>rater</b>" is an imported rater with no configuration."""
    human, judge = synthetic(
        items=12, systems=4, judges={"J1": (0.2, 0.5), "J2": (0.2, 0.9), "<b>rater</b>": (0, 1)}
    )
    rows = [(f"i{r[1]}", r[2], r[4], "human", r[3], r[5]) for r in human]
    rows += [(f"i{r[1]}", r[2], r[4], "judge", r[3], int(r[5])) for r in judge]
    imported(project, rows)
    template = PromptTemplate.objects.create(
        project=project,
        key="strict",
        version=1,
        name="Strict",
        user_template=PROMPT,
        source="custom",
        content_hash="x",
    )
    other = PromptTemplate.objects.create(
        project=project,
        key="strict",
        version=2,
        name="Strict",
        user_template="Score it.",
        source="custom",
        content_hash="y",
    )
    j1 = JudgeConfig.objects.create(
        project=project,
        name="J1",
        kind=JudgeKind.LLM,
        model="model-a",
        temperature=0.0,
        base_url="https://judge.example/v1",
        prompt_template=template,
    )
    JudgeConfig.objects.create(
        project=project,
        name="J2",
        kind=JudgeKind.LLM,
        model="model-b",
        temperature=1.0,
        samples=3,
        base_url="https://judge.example/v1",
        prompt_template=other,
    )
    JudgeRun.objects.create(
        judge=j1,
        dataset=Dataset.objects.get(project=project, name="D"),
        status=RunStatus.DONE,
        cost=Decimal("3.000000"),
        done=1490,
        failed=6,
        parse_failed=4,
    )
    return project


def page_url(project) -> str:
    return reverse("analytics:judge-compare", args=[project.slug])


def api_url(project) -> str:
    return reverse("analytics-api:judge-comparison", args=[project.slug])


def test_the_api_answers_the_comparison_of_the_projects_rows(compared, researcher):
    response = token_client(researcher).get(
        api_url(compared),
        {"judge": ["J1", "J2", "<b>rater</b>"], "baseline": "J1", "resamples": "200"},
    )
    assert response.status_code == 200
    body = response.json()
    assert body["judges"] == ["J1", "J2", "<b>rater</b>"] and body["baseline"] == "J1"
    assert [(p["a"], p["b"]) for p in body["pairs"]] == [("J2", "J1"), ("<b>rater</b>", "J1")]
    assert all(p["n"] == 48 and p["items"] == 12 for p in body["pairs"])
    quality = {q["judge"]: q for q in body["quality"]}
    assert quality["J1"]["per_1000"] == pytest.approx(2.0)  # 3.00 over 1,500 judgments
    assert quality["J1"]["judgments"] == 1500
    assert quality["J2"]["no_cost"] and quality["<b>rater</b>"]["no_cost"]  # no runs, no judge
    configs = {c["judge"]: c for c in body["configs"]}
    assert configs["J2"]["differs"] == ["model", "temperature", "samples", "prompt"]
    assert configs["J2"]["prompt"] == "strict v2" and configs["J1"]["prompt"] == "strict v1"
    assert not configs["<b>rater</b>"]["known"]
    assert {r["judge"] for r in body["ranking"]} == {"J1", "J2", "<b>rater</b>"}
    assert body["ranking"][0]["n_systems"] == 4


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({}, "judge", "choose at least 2 judges"),
        ({"judge": "J1"}, "judge", "choose at least 2 judges"),
        ({"judge": ["J1", "J1"]}, "judge", "choose at least 2 judges"),
        ({"judge": ["J1", "nobody"]}, "judge", "unknown judge nobody"),
        ({"judge": ["J1", "J2"], "baseline": "<b>rater</b>"}, "baseline", "not one of the chosen"),
        ({"judge": ["J1", "J2"], "baseline": "zz"}, "baseline", "unknown judge zz"),
        ({"judge": ["J1", "J2"], "measure": "cosine"}, "measure", "cosine"),
        ({"judge": ["J1", "J2"], "skill": "Nope"}, "skill", "unknown skill Nope"),
        ({"judge": ["J1", "J2"], "resamples": "-1"}, "resamples", "0 (no intervals) or more"),
        ({"judge": ["J1", "J2"], "resamples": "10001"}, "resamples", "at most 10,000"),
        ({"judge": ["J1", "J2"], "resamples": "many"}, "resamples", "whole number"),
    ],
)
def test_the_api_refuses_a_bad_parameter_with_its_reason(
    compared, researcher, query, field, message
):
    response = token_client(researcher).get(api_url(compared), query)
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid" and message in " ".join(body["fields"][field])


@pytest.mark.django_db
def test_the_api_is_in_the_openapi_schema(client):
    schema = client.get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/v1/projects/{slug}/analytics/judge-comparison"]["get"]
    names = {p["name"] for p in operation["parameters"]}
    assert {"judge", "baseline", "measure", "skill", "resamples"} <= names
    assert "400" in operation["responses"]


def test_the_page_shows_every_part_with_names_and_prompts_escaped(compared, researcher_client):
    response = researcher_client.get(
        page_url(compared),
        {"judge": ["J2", "J1", "<b>rater</b>"], "baseline": "J1", "resamples": "100"},
    )
    assert response.status_code == 200 and "HX-Request" in response["Vary"]
    html = response.content.decode()
    assert "<html" in html and 'id="compare-form"' in html and 'aria-current="page"' in html
    assert "overlap do not mean the judges are alike" in html  # the paired reading, said
    assert 'data-pair="J2 vs J1"' in html and "data-pair-n>48 / 12" in html
    assert 'id="pareto-chart"' in html and "data-no-cost" in html
    assert 'data-ranking="J1|Factuality"' in html
    # the prompts' text, the rater's name: escaped, never markup
    assert "<script>alert(1)</script>" not in html and "<b>rater</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;b&gt;rater&lt;/b&gt;" in html
    assert 'class="diff-del">-Score the &lt;script&gt;' in html
    assert 'class="diff-add">+Score it.' in html


def test_htmx_gets_the_results_only_and_errors_as_200(compared, researcher_client):
    response = researcher_client.get(page_url(compared), {"judge": ["J1"]}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert html.lstrip().startswith('<section id="compare-results"')
    assert "data-compare-errors" in html and "choose at least 2 judges" in html


def test_the_page_without_parameters_shows_the_form_only(compared, researcher_client):
    html = researcher_client.get(page_url(compared)).content.decode()
    assert "data-compare-hint" in html and "data-compare-errors" not in html
    assert html.count("data-judge-choice") == 3


def test_the_page_is_the_staffs(compared, annotator_client, outsider_client, client):
    assert annotator_client.get(page_url(compared)).status_code == 403
    assert outsider_client.get(page_url(compared)).status_code == 404
    assert client.get(page_url(compared)).status_code == 302
    assert client.post(page_url(compared)).status_code in (302, 405)
