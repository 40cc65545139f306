"""Figures on too few data (docs/SMALL_SAMPLES.md): every figure of the report, its
breakdowns, the dashboard and the judge trust page travels with its n; below its kind's
minimum (analytics.minimums) it is flagged `too_few` with the reason, and pages show "too
few" with the reason instead of a number and an interval; an interval is shown only when it
contains its estimate and its resamples did not collapse onto one value (or too few items),
else the page says why. The exact cases reported (ICC3 0.819 [0.819, 0.819] on 2 units x 4
raters, a human ceiling on a handful of responses, a strata row of 3 responses at 0.980
[0.980, 1.000], a tercile of 0 responses), then the same rules on generated small tables."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics import bootstrap, minimums
from analytics.report import chart_data, small_samples
from analytics.report.build import build_report
from analytics.templatetags.small_samples import figure_cell
from analytics.trust.figures import TrustInputs, trust_figures
from analytics.trust.probes import mean_interval
from tests.analytics.snapshot_worker import report_via_api
from tests.analytics.test_dashboard import Tables, import_scores, ready, section
from tests.clients import token_client

# krippendorff's alpha on one value, Pearson on a constant side: numpy warns, the figure is None
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

#: ICC3 = 0.819 on these 2 units (rows) x 4 raters (columns); every resample that defines it
#: draws both units, so its interval was [0.819, 0.819].
ICC_UNITS = [[2, 3, 1, 1], [5, 4, 4, 5]]


def floor(kind: str) -> int:
    return minimums.minimum(kind).n


def icc_rows():
    return [
        (u + 1, u + 1, "m", "S", f"r{r}", score)
        for u, scores in enumerate(ICC_UNITS)
        for r, score in enumerate(scores)
    ]


# --- intervals --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("estimate", "low", "high", "items", "flags"),
    [
        (0.5, 0.2, 0.8, 40, ()),
        (0.819, 0.819, 0.819, 40, ("degenerate_resamples",)),
        (0.8, 0.7999999999999999, 0.8, 40, ("degenerate_resamples",)),  # one ulp apart
        (0.819, 0.819, 0.819, 2, ("too_few_items", "degenerate_resamples")),
        (0.5, 0.2, 0.8, 9, ("too_few_items",)),
        (0.5, 0.2, 0.8, 10, ()),
        (0.9, 0.2, 0.8, 40, ("interval_excludes_estimate",)),
        (0.473, 0.230, 0.473, 40, ()),  # at its edge, it still contains its estimate
        (None, None, None, 2, ()),  # no interval: nothing to flag
    ],
)
def test_an_interval_says_why_it_cannot_be_read_as_shown(estimate, low, high, items, flags):
    assert bootstrap.interval_flags(estimate, low, high, items) == flags


def test_the_note_says_why_in_words():
    ci = {"low": 0.8, "high": 0.8, "items": 2, "flags": ["too_few_items", "degenerate_resamples"]}
    assert bootstrap.interval_note(ci) == (
        "2 items resampled (at least 10); all resamples gave the same value"
    )
    assert bootstrap.interval_note({"flags": ["interval_excludes_estimate"]}) == (
        "it does not contain the estimate"
    )
    assert bootstrap.interval_note({"low": 0.1, "high": 0.2, "flags": []}) == ""
    assert bootstrap.interval_note(None) == ""


def test_every_resampled_interval_counts_its_items_and_carries_its_flags():
    rs = bootstrap.Resampler([1, 2, 3], resamples=50)
    sink: dict[str, Any] = {}
    rs.add([1, 1, 2], np.array([[1.0, 2.0], [1.0, 4.0], [1.0, 3.0]]), _mean, sink=sink, key="m")
    rs.run()
    assert sink["m"]["mean"]["items"] == 2  # rows of items 1 and 2; item 3 holds none
    assert "too_few_items" in sink["m"]["mean"]["flags"]
    # the probes' own bootstrap says the same
    probe = mean_interval([1, 2], [0.5, 0.5], resamples=50)
    assert probe["items"] == 2 and probe["flags"] == ["too_few_items", "degenerate_resamples"]


def _mean(sums):
    with np.errstate(invalid="ignore", divide="ignore"):
        return {"mean": sums[:, 1] / sums[:, 0]}


# --- the exact cases ----------------------------------------------------------------------------


def test_icc_on_two_units_is_too_few_and_its_point_interval_is_flagged():
    # when
    report = build_report(icc_rows(), [], resamples=1000)

    # then: the figure is still there, for reference, but flagged; so is its interval
    agreement = report["agreement"]["S"]
    assert round(agreement["icc"]["ICC3"], 3) == 0.819
    assert (agreement["icc"]["n"], agreement["icc"]["k"]) == (2, 4)
    assert agreement["too_few"]["icc"] == "too few: n = 2 (at least 5 units)"
    ci = agreement["icc_ci"]["ICC3"]
    assert ci["low"] == ci["high"] == pytest.approx(0.819, abs=5e-4)  # what was shown
    assert ci["items"] == 2 and ci["flags"] == ["too_few_items", "degenerate_resamples"]
    assert agreement["too_few"]["krippendorff_alpha"] == "too few: n = 2 (at least 10 units)"
    # and the table the page draws
    [row] = chart_data.report_tables(report)["agreement"]
    assert {f["too_few"] for f in row["icc_forms"]} == {"too few: n = 2 (at least 5 units)"}


def test_a_human_ceiling_on_a_handful_of_responses_is_too_few_in_the_headline():
    # given three annotators and a judge on four responses
    scores = [[1, 2, 2, 4], [2, 2, 3, 5], [1, 3, 2, 5]]
    human = [
        (r + 1, r + 1, "m", "S", f"p{p}", s)
        for p, row in enumerate(scores)
        for r, s in enumerate(row)
    ]
    judge = [(r + 1, r + 1, "m", "S", "J", s) for r, s in enumerate([1, 3, 2, 4])]

    # when
    report = build_report(human, judge, resamples=500)
    headline = chart_data.headline(report)

    # then
    ceiling = report["agreement"]["S"]["loo_ceiling"]
    assert ceiling["annotators"] == 3 and ceiling["units"] == 4
    assert ceiling["pearson"] is not None
    reason = "too few: n = 4 (at least 10 responses)"
    assert report["agreement"]["S"]["too_few"]["loo_ceiling"] == reason
    assert headline["ceiling_too_few"] == [reason] and headline["ceiling_n"] == [4]
    assert headline["ceiling_errors"] == [None]  # no interval drawn on 4 items
    [judge_row] = headline["judges"]
    assert judge_row["too_few"] == [reason] and judge_row["mean"] is None
    assert judge_row["skills"] == 0 and judge_row["rank"] is None


def strata_case() -> tuple[list, list, dict]:
    """A domain (History) of 3 responses (Pearson 0.980 with the people) beside 12 of
    another (Math), on which two people agree exactly (their human spread is 0)."""
    rare = [((1, 1), 1), ((2, 3), 2), ((4, 5), 5)]  # people's scores, judge: means 1, 2.5, 4.5
    common = [((s, s), min(5, s + k % 2)) for k, s in enumerate([1, 2, 3, 4, 5, 2] * 2)]
    human, judge, facets = [], [], {}
    for rid, ((a, b), j) in enumerate(rare + common, start=1):
        facets[rid] = {"domains": ["History" if rid <= 3 else "Math"], "difficulty": 2}
        human += [(rid, rid, "m", "S", "p", a), (rid, rid, "m", "S", "q", b)]
        judge.append((rid, rid, "m", "S", "J", j))
    return human, judge, facets


def test_a_strata_row_of_three_responses_is_too_few():
    human, judge, facets = strata_case()

    # when
    strata = trust_figures(human, judge, facets, TrustInputs(), resamples=500)["J"]["strata"]["S"]

    # then: what used to be shown as 0.980 [0.980, 1.000]
    rare = next(g for g in strata["domain"] if g["group"] == "History")
    assert rare["n"] == 3 and round(rare["pearson"], 3) == 0.980
    assert rare["ci"]["pearson"]["low"] <= rare["pearson"] < rare["ci"]["pearson"]["high"] == 1.0
    reason = "too few: n = 3 (at least 10 responses)"
    assert rare["too_few"] == {"pearson": reason, "spearman": reason, "mae": reason}
    assert rare["ci"]["pearson"]["flags"] == ["too_few_items"]
    common = next(g for g in strata["domain"] if g["group"] == "Math")
    assert common["n"] == 12 and common["too_few"] == {}
    assert strata["all"]["too_few"] == {}


def test_an_empty_tercile_is_too_few_with_n_0():
    human, judge, facets = strata_case()
    human = [row for row in human if row[0] > 3]  # the people agree exactly everywhere

    # when
    spread = trust_figures(human, judge, facets, TrustInputs(), resamples=100)["J"]["strata"]["S"][
        "human_spread"
    ]

    # then: every spread is 0, so all of them sit in the low tercile
    assert spread["cuts"] == [0.0, 0.0]
    low, middle, high = spread["groups"]
    assert low["n"] == 12 and low["too_few"] == {}
    for empty in (middle, high):
        assert empty["n"] == 0 and empty["range"] is None
        assert empty["too_few"]["pearson"] == "too few: n = 0 (at least 10 responses)"


# --- the pages ----------------------------------------------------------------------------------


def lines(human, judge, facets=None) -> bytes:
    """The rows as an import file (docs/IMPORT_FORMATS.md): items q<item>, one per row's item."""
    out = []
    for rows, kind in ((human, "human"), (judge, "judge")):
        for _rid, item, system, skill, rater, value in rows:
            facet = (facets or {}).get(item, {})
            out.append(
                {
                    "item": f"q{item}",
                    "system": system,
                    "rater": rater,
                    "rater_kind": kind,
                    "skill": skill,
                    "score": value,
                    **({"domain": facet["domains"]} if facet.get("domains") else {}),
                    **({"difficulty": facet["difficulty"]} if facet.get("difficulty") else {}),
                }
            )
    return "".join(json.dumps(line) + "\n" for line in out).encode()


@pytest.mark.django_db
def test_the_agreement_section_and_the_api_say_too_few_for_the_icc(
    project, researcher, researcher_client
):
    # given
    import_scores(project, lines(icc_rows(), []))
    ready(researcher_client, project)

    # when
    html = section(researcher_client, project, "agreement").content.decode()
    api = report_via_api(
        token_client(researcher), f"/api/v1/projects/{project.slug}/analytics/report"
    )

    # then: no number with a point interval, but "too few" and why
    icc = Tables(html).tables["icc-table"][1]
    assert icc[0] == "S" and icc[1] == "too few n = 2 (at least 5 units)"
    assert icc[2:] == ["2 × 4", "complete"]
    assert "0.819" not in html and "[0.819, 0.819]" not in html
    agreement = Tables(html).tables["agreement-table"][1]
    assert agreement[1] == "2" and agreement[5] == "too few n = 2 (at least 10 units)"
    assert 'title="too few: n = 2 (at least 5 units): below the smallest sample' in html
    # the JSON carries the same flags (and the figure, for reference)
    figures = api["agreement"]["S"]
    assert figures["too_few"]["icc"] == "too few: n = 2 (at least 5 units)"
    assert figures["icc_ci"]["ICC3"]["flags"] == ["too_few_items", "degenerate_resamples"]
    assert round(figures["icc"]["ICC3"], 3) == 0.819


def enough_lines(items: int) -> bytes:
    """Two annotators and one judge on `items` items x 2 systems, on one skill."""
    human, judge = [], []
    for i in range(items):
        for s, system in enumerate(("a", "b")):
            rid = 2 * i + s
            base = (i * 3 + s * 2) % 5
            human += [
                (rid, i, system, "S", "ann-1", 1 + base),
                (rid, i, system, "S", "ann-2", 1 + (base + i % 2) % 5),
            ]
            judge.append((rid, i, system, "S", "J", 1 + (base + (i % 3 == 0)) % 5))
    return lines(human, judge)


@pytest.mark.django_db
def test_the_headline_shows_n_and_too_few_instead_of_a_number_with_an_interval(
    project, researcher_client
):
    # given 12 items (24 responses): enough for the instance level and its interval
    import_scores(project, enough_lines(12))
    page = ready(researcher_client, project)
    html = page.content.decode()

    # then: the instance level shows its n and its interval
    rows = Tables(html).tables["headline-table"]
    assert rows[0][-1] == "S" and rows[1][0] == "Human ceiling"
    judge = next(r for r in rows if r[0] == "J")
    assert re.fullmatch(r"-?\d\.\d{3} n = 24 \[-?\d\.\d{3}, -?\d\.\d{3}\]", judge[-1]), judge
    assert re.fullmatch(r"-?\d\.\d{3} n = 24 \[-?\d\.\d{3}, -?\d\.\d{3}\]", rows[1][-1]), rows[1]

    # when: the system level, on two systems
    system = researcher_client.get(page.request["PATH_INFO"], {"level": "system"})

    # then: too few, not drawn, and the judge has no mean to be ranked by
    rows = Tables(system.content.decode()).tables["headline-table"]
    judge = next(r for r in rows if r[0] == "J")
    assert judge[1:] == ["—", "— (0)", "too few n = 2 (at least 4 systems)"]
    [chart] = system.context["headline_charts"]["headline"]
    assert chart["datasets"][0]["data"] == [None]


@pytest.mark.django_db
def test_the_trust_page_shows_the_small_strata_as_too_few(project, researcher_client):
    # given
    human, judge, facets = strata_case()
    import_scores(project, lines(human, judge, facets))
    ready(researcher_client, project)

    # when
    page = researcher_client.get(
        reverse("analytics:trust", args=[project.slug]), {"trust_judge": "J"}
    )

    # then
    html = page.content.decode()
    [strata] = [rows for name, rows in Tables(html).tables.items() if name.startswith("strata-")]
    by_group = {row[0]: row[1:] for row in strata[1:]}
    assert by_group["Domain: History"] == ["3", "too few n = 3 (at least 10 responses)"]
    assert by_group["Human spread: middle"] == ["0", "too few n = 0 (at least 10 responses)"]
    assert by_group["Domain: Math"][0] == "12" and "too few" not in by_group["Domain: Math"][1]
    assert "0.980" not in html


@pytest.mark.django_db
def test_the_heat_maps_say_what_their_outlines_mean(project, researcher_client):
    import_scores(project, enough_lines(12))
    ready(researcher_client, project)

    html = section(researcher_client, project, "heatmaps").content.decode()

    assert "data-heat-legend" in html
    assert "outlined: the diagonal, where the judge's score equals the human mean" in html
    outlined = re.findall(r'<td class="num heat-\d+ agree" title="([^"]+)"', html)
    assert outlined and set(outlined) == {"judge = human (the diagonal)"}
    css = (Path(__file__).parents[2] / "static/css/analytics.css").read_text()
    assert "#ffd33d" not in css  # one outline, one meaning


def test_a_cell_shows_too_few_or_its_interval_or_why_there_is_none():
    def render(**context):
        html = figure_cell(context.pop("value"), context.pop("ci", None), **context)
        return " ".join(re.sub(r"<[^>]+>", " ", html).split())

    ok = {"low": 0.2, "high": 0.8, "resamples": 100, "items": 40, "flags": []}
    assert render(value=0.5, ci=ok, n=24) == "0.500 n = 24 [0.200, 0.800]"
    point = {"low": 0.819, "high": 0.819, "resamples": 523, "items": 2}
    point["flags"] = ["too_few_items", "degenerate_resamples"]
    assert render(value=0.819, ci=point) == (
        "0.819 no interval: 2 items resampled (at least 10); all resamples gave the same value"
    )
    assert render(value=0.98, ci=ok, too_few="too few: n = 3 (at least 10 responses)") == (
        "too few n = 3 (at least 10 responses)"
    )
    # an interval made before the flags existed is shown as it was
    assert render(value=0.5, ci={"low": 0.2, "high": 0.8}) == "0.500 [0.200, 0.800]"
    # a missing figure is a dash; what a name holds is escaped
    assert render(value="", ci="", count=3) == "— (3)"
    html = figure_cell(None, too_few="too few: n = 0 (at least 10 <b>)", colspan=3)
    assert 'colspan="3"' in html and "<b>" not in html and "&lt;b&gt;" in html


# --- every figure, on generated small tables ---------------------------------------------------

LEVEL_FLOORS = {"instance": "correlation", "item": "item_level", "system": "ranking"}


@st.composite
def small_tables(draw) -> tuple[list, list, dict, dict]:
    """1-12 items x 1-3 systems, 1-4 people who each score most responses (sometimes N/A),
    one or two judges (one on half points), domains and difficulties."""
    items = draw(st.integers(1, 12))
    systems = draw(st.sampled_from([("a",), ("a", "b"), ("a", "b", "c")]))
    people = draw(st.integers(1, 4))
    judges = draw(st.sampled_from([("J",), ("J", "K")]))
    score = st.sampled_from([1, 2, 3, 4, 5, 1, 2, 3, 4, 5, None])
    human, judge, facets, words = [], [], {}, {}
    rid = 0
    for item in range(items):
        facets[item] = {
            "domains": [draw(st.sampled_from(["Math", "Code"]))],
            "difficulty": draw(st.integers(1, 3)),
        }
        for system in systems:
            rid += 1
            words[rid] = draw(st.integers(1, 40))
            for p in range(people):
                if draw(st.integers(0, 4)):  # most responses get each person's score
                    human.append((rid, item, system, "S", f"p{p}", draw(score)))
            for name in judges:
                value = draw(st.sampled_from([1, 2, 3, 4, 5]))
                judge.append((rid, item, system, "S", name, value / 2 if name == "K" else value))
    return human, judge, facets, words


def intervals(value: Any) -> Iterator[dict]:
    """Every interval dict in a JSON value."""
    if isinstance(value, dict):
        if {"estimate", "low", "high"} <= set(value):
            yield value
        for child in value.values():
            yield from intervals(child)
    elif isinstance(value, list):
        for child in value:
            yield from intervals(child)


def expected_too_few(entries) -> dict[str, str]:
    return {
        name: f"too few: n = {n or 0} (at least {floor(kind)} {minimums.minimum(kind).unit})"
        for name, kind, n in entries
        if (n or 0) < floor(kind)
    }


def check_interval(ci: dict) -> None:
    if ci["low"] is None:
        return
    low, high, estimate = ci["low"], ci["high"], ci["estimate"]
    flags = set(ci["flags"])
    assert ("too_few_items" in flags) == (ci["items"] < floor("interval")), ci
    degenerate = high - low <= 1e-9 * max(1.0, abs(low), abs(high))
    assert ("degenerate_resamples" in flags) == degenerate, ci
    holds = low - 1e-9 <= estimate <= high + 1e-9
    assert ("interval_excludes_estimate" in flags) == (not holds), ci
    if not flags:  # an interval shown as it is: around its estimate, and not a point
        assert low <= estimate + 1e-9 and estimate <= high + 1e-9 and low < high, ci


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(small_tables())
def test_every_figure_of_a_small_table_has_its_n_and_flags(table):
    human, judge, facets, words = table

    report = build_report(human, judge, resamples=30)
    trust = trust_figures(human, judge, facets, TrustInputs(words=words), resamples=30)

    # every interval holds around its estimate, or says why not
    for ci in (*intervals(report), *intervals(trust)):
        check_interval(ci)
    # every figure below its kind's minimum is flagged with the reason, and no other
    for figures in report["agreement"].values():
        entries = [
            (name, "agreement", figures["n_units"])
            for name in ("krippendorff_alpha", "fleiss_kappa", "gwet_ac1", "cohen_kappa")
            if name != "cohen_kappa" or figures["cohen_kappa"] is not None
        ]
        entries += [("icc", "icc", (figures["icc"] or {}).get("n", 0))]
        entries += [
            (name, "correlation", figures[name]["units"])
            for name in ("mean_pairwise_spearman", "loo_ceiling")
        ]
        assert figures["too_few"] == expected_too_few(entries)
    for by_skill in report["correlation"].values():
        for levels in by_skill.values():
            for level, kind in LEVEL_FLOORS.items():
                figures = levels[level]
                entries = [(n, kind, figures["n"]) for n in ("pearson", "spearman", "kendall")]
                if level != "item":
                    agreement_kind = "mean" if level == "instance" else kind
                    entries += [
                        (n, agreement_kind, figures["n"]) for n in ("mae", "exact", "within_one")
                    ]
                assert figures["too_few"] == expected_too_few(entries), level
    for rows in report["leaderboard"].values():
        for row in rows:
            assert row["too_few"] == expected_too_few([("humans", "mean", row["n"])])
            for standing in row["judges"].values():
                # a judge's entry names its mean only when too few (docs/SMALL_SAMPLES.md)
                expected = expected_too_few([("mean", "mean", standing["n"])])
                assert standing.get("too_few") == (expected or None)
    for figures in trust.values():
        for strata in figures["strata"].values():
            groups = [
                *strata["human_spread"]["groups"],
                *strata["length"]["groups"],
                *strata["domain"],
                *strata["difficulty"],
            ]
            for group in groups:
                assert group["too_few"] == expected_too_few(
                    [(n, "stratum", group["n"]) for n in ("pearson", "spearman", "mae")]
                )
        for cal in figures["calibration"].values():
            assert cal["too_few"] == expected_too_few(
                [(n, "calibration", cal["n"]) for n in ("offset", "bland_altman", "isotonic")]
            )
    # the headline ranks judges on the figures that are neither undefined nor too few
    for level in LEVEL_FLOORS:
        for found in chart_data.headline(report, level, "pearson")["judges"]:
            kept = [
                v
                for v, few in zip(found["data"], found["too_few"], strict=True)
                if v is not None and not few
            ]
            assert found["skills"] == len(kept)
            assert found["mean"] == (math.fsum(kept) / len(kept) if kept else None)
            for error, note in zip(found["errors"], found["notes"], strict=True):
                assert not (error and note)  # an interval is drawn only when it stands
    # the breakdowns are reports too
    json.dumps(report, allow_nan=False)


def test_every_kind_of_figure_is_documented():
    doc = (Path(__file__).parents[2] / "docs/SMALL_SAMPLES.md").read_text()
    for kind, found in minimums.MINIMUMS.items():
        if kind in ("bradley_terry",):  # the pairwise page's (docs/SMALL_SAMPLES_PAIRWISE.md)
            continue
        assert f"`{kind}`" in doc, kind
        assert found.why in doc, kind
    assert "SMALL_SAMPLES_PAIRWISE.md" in doc
    # every kind the report reads exists (a typo would be a KeyError at the first report)
    assert set(small_samples.LEVEL_KINDS.values()) <= set(minimums.MINIMUMS)
