"""The analytics dashboard: who may open it, that its numbers are the report's, filters,
the empty project, and the chart data (pure, checked against numbers worked out by hand)."""

from __future__ import annotations

import io
import json
from html.parser import HTMLParser

import pytest
from django.template.defaultfilters import floatformat
from django.urls import reverse

from analytics.imports.services import scores_import
from analytics.report import chart_data
from analytics.report.build import build_report
from analytics.report.selectors import project_report
from analytics.rows import ReportRows
from annotation.services.projects import project_create

XSS = "<img src=x onerror=alert(1)>"
SKILLS = ("Factuality", "Readability", "Comprehension")
SYSTEMS = ("sys-a", "sys-b")
JUDGES = ("judge-x", "judge-y")


# --- chart data (pure) ------------------------------------------------------------------------

# response id, item id, system, skill, rater, value (None: N/A)
HUMAN = [
    (1, 10, "a", "S", "ann", 4),
    (1, 10, "a", "S", "bob", 5),  # mean 4.5
    (2, 10, "b", "S", "ann", 2),
    (2, 10, "b", "S", "bob", 1),  # mean 1.5
    (3, 11, "a", "S", "ann", 5),
    (3, 11, "a", "S", "bob", None),  # mean 5.0 (N/A left out)
    (4, 11, "b", "S", "ann", 3),
    (4, 11, "b", "S", "bob", 3),  # mean 3.0
]
JUDGE = [
    (1, 10, "a", "S", "J", 5),
    (2, 10, "b", "S", "J", 2),
    (3, 11, "a", "S", "J", 4),
    (4, 11, "b", "S", "J", 3),
    (1, 10, "a", "S", "K", 4.25),
    (2, 10, "b", "S", "K", None),  # K: a k-sample mean; N/A
    (3, 11, "a", "S", "K", 3),
    (4, 11, "b", "S", "K", 1),
]
FACETS = {
    10: {"domains": ["Math", "History"], "difficulty": 2},
    11: {"domains": [], "difficulty": None},
}


def rows(off_scale=frozenset()) -> ReportRows:
    return ReportRows(list(HUMAN), list(JUDGE), FACETS, set(off_scale))


def test_half_step_rounds_to_the_nearest_half_with_halves_up():
    assert [chart_data.half_step(v) for v in (4.25, 1.75, 4.24, 1 / 3, 2.75, 13 / 3, 5)] == [
        4.5,
        2.0,
        4.0,
        0.5,
        3.0,
        4.5,
        5.0,
    ]


def test_bars_per_domain_are_mean_human_and_judge_scores_of_each_domain():
    # when
    [chart] = chart_data.facet_bars(rows(), "domain", skills=["S"], judges=["J", "K"])

    # then: item 10 counts under both its domains, item 11 under "(none)"
    assert chart["title"] == "S" and chart["labels"] == ["History", "Math", "(none)"]
    assert chart["n"] == [2, 2, 2]
    assert chart["datasets"] == [
        {"label": "Humans", "data": [3.0, 3.0, 4.0]},  # (4.5 + 1.5) / 2, (5 + 3) / 2
        {"label": "J", "data": [3.5, 3.5, 3.5]},  # (5 + 2) / 2, (4 + 3) / 2
        {"label": "K", "data": [4.25, 4.25, 2.0]},  # N/A left out; (3 + 1) / 2
    ]
    assert chart["rows"][2] == {"label": "(none)", "n": 2, "values": [4.0, 3.5, 2.0]}
    assert chart["scale"] == {"min": 1, "max": 5}


def test_bars_per_difficulty_order_levels_and_leave_a_judge_on_its_own_scale_out():
    [chart] = chart_data.facet_bars(
        rows(off_scale={("K", "S")}), "difficulty", skills=["S"], judges=["J", "K"]
    )
    assert chart["labels"] == ["2", "(none)"]
    assert chart["datasets"] == [
        {"label": "Humans", "data": [3.0, 4.0]},
        {"label": "J", "data": [3.5, 3.5]},
    ]


def test_the_heatmap_counts_responses_by_rounded_human_mean_and_judge_score():
    # when
    maps = chart_data.heatmaps(rows(), skills=["S"], judges=["J", "K"])

    # then
    j, k = maps
    assert (j["judge"], j["skill"], j["n"], j["max"]) == ("J", "S", 4, 1)
    assert j["judge_bins"] == [2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]
    assert [r["human"] for r in j["rows"]] == [5.0, 4.5, 4.0, 3.5, 3.0, 2.5, 2.0, 1.5]
    filled = {
        (r["human"], c["judge"]): (c["count"], c["level"], c["agree"])
        for r in j["rows"]
        for c in r["cells"]
        if c["count"]
    }
    assert filled == {
        (4.5, 5.0): (1, 10, False),
        (1.5, 2.0): (1, 10, False),
        (5.0, 4.0): (1, 10, False),
        (3.0, 3.0): (1, 10, True),
    }
    # K: 4.25 rounds up to 4.5 and meets the human 4.5 on the diagonal; its N/A is left out
    assert k["n"] == 3 and k["judge_bins"] == [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5]
    cell = next(c for r in k["rows"] if r["human"] == 4.5 for c in r["cells"] if c["judge"] == 4.5)
    assert cell == {"judge": 4.5, "count": 1, "level": 10, "agree": True}


def test_heatmap_shades_cells_relative_to_the_largest_count_and_skips_raw_judges():
    human = [(r, r, "a", "S", "ann", 3) for r in (1, 2, 3)]
    judge = [(1, 1, "a", "S", "J", 3), (2, 2, "a", "S", "J", 3), (3, 3, "a", "S", "J", 4)]
    [m] = chart_data.heatmaps(ReportRows(human, judge, {}, set()), skills=["S"], judges=["J"])
    assert [(c["count"], c["level"]) for c in m["rows"][0]["cells"]] == [
        (2, 10),
        (0, 0),
        (1, 5),
    ]
    raw = ReportRows(human, judge, {}, {("J", "S")})
    assert chart_data.heatmaps(raw, skills=["S"], judges=["J"]) == []


def test_radar_per_system_takes_the_leaderboard_means_of_humans_and_each_judge():
    # given
    report = build_report(HUMAN, JUDGE)

    # when
    charts = chart_data.radar_charts(report)

    # then: one skill is no radar; a bar chart carries the same numbers
    a, b = charts
    assert (a["title"], a["kind"], a["labels"]) == ("a", "bar", ["S"])
    assert a["datasets"] == [
        {"label": "Humans", "data": [4.75]},  # (4.5 + 5.0) / 2
        {"label": "J", "data": [4.5]},  # (5 + 4) / 2
        {"label": "K", "data": [3.625]},  # (4.25 + 3) / 2
    ]
    assert b["datasets"][2] == {"label": "K", "data": [1.0]}  # its N/A left out
    # a judge on its own scale does not share the axis
    assert [
        d["label"] for d in chart_data.radar_charts(report, off_scale={("K", "S")})[0]["datasets"]
    ] == ["Humans", "J"]


def test_radar_with_three_skills_and_gaps_where_a_system_has_no_score():
    report = {
        "correlation": {"J": {}},
        "leaderboard": {
            skill: [
                {
                    "system": "m",
                    "n": 1,
                    "humans": 2.0 + i,
                    "judges": {"J": {"mean": None if i == 1 else 3.0}},
                }
            ]
            for i, skill in enumerate(("A", "B", "C"))
        },
    }
    [chart] = chart_data.radar_charts(report)
    assert chart["kind"] == "radar" and chart["labels"] == ["A", "B", "C"]
    assert chart["datasets"] == [
        {"label": "Humans", "data": [2.0, 3.0, 4.0]},
        {"label": "J", "data": [3.0, None, 3.0]},
    ]


def test_correlation_bars_carry_intervals_and_the_human_ceiling():
    report = {
        "agreement": {"S": {"loo_ceiling": {"pearson": 0.7, "spearman": None}}},
        "correlation": {
            "J": {
                "S": {
                    "instance": {
                        "pearson": 0.5,
                        "spearman": 0.4,
                        "ci": {
                            "pearson": {"estimate": 0.5, "low": 0.1, "high": 0.8, "resamples": 10},
                            "spearman": {
                                "estimate": 0.4,
                                "low": None,
                                "high": None,
                                "resamples": 0,
                            },
                        },
                    }
                }
            },
            "K": {},
        },
        "leaderboard": {"S": []},
    }
    pearson = chart_data.correlation_bars(report, "pearson")
    assert pearson == {
        "kind": "correlation",
        "measure": "pearson",
        "title": "Pearson",
        "labels": ["S"],
        "datasets": [
            {"label": "J", "data": [0.5], "errors": [[0.1, 0.8]]},
            {"label": "K", "data": [None], "errors": [None]},
        ],
        "ceiling": [0.7],
    }
    spearman = chart_data.correlation_bars(report, "spearman")
    assert spearman["datasets"][0]["errors"] == [None] and spearman["ceiling"] is None
    assert chart_data.correlation_bars({"correlation": {}, "leaderboard": {}}, "pearson") is None


def test_tables_are_lists_so_a_skill_named_like_a_dict_method_is_just_a_name():
    # given
    responses = ((1, "a"), (2, "b"), (3, "b"))
    human = [
        (r, r, s, "items", who, v) for r, s in responses for who, v in (("ann", r), ("bob", r + 1))
    ]
    judge = [(r, r, s, "items", "J", 6 - r) for r, s in responses]

    # when
    tables = chart_data.report_tables(build_report(human, judge))

    # then
    [agreement] = tables["agreement"]
    assert agreement["skill"] == "items" and agreement["n_units"] == 3
    assert [a["level"] for a in agreement["alpha"]] == list(chart_data.ALPHA_LEVELS)
    [board] = tables["leaderboards"]
    assert board["judges"] == ["J"]
    assert [
        (r["system"], [(s["mean"], s["rank"]) for s in r["scores"]]) for r in board["rows"]
    ] == [
        ("b", [(3.0, 1), (3.5, 2)]),  # (2.5 + 3.5) / 2; the judge's (4 + 3) / 2
        ("a", [(1.5, 2), (5.0, 1)]),  # (1 + 2) / 2; the judge's 6 - 1
    ]
    [judge_table] = tables["correlation"]
    assert [level["level"] for level in judge_table["skills"][0]["levels"]] == [
        "instance",
        "item",
        "system",
    ]


def test_filter_options_are_the_values_present():
    assert chart_data.filter_options(rows()) == {
        "skill": ["S"],
        "judge": ["J", "K"],
        "system": ["a", "b"],
        "domain": ["History", "Math"],
        "difficulty": [2],
    }


# --- the page ---------------------------------------------------------------------------------


def score_lines(*, systems=SYSTEMS, skills=SKILLS, judges=JUDGES, items=6) -> bytes:
    """Two annotators and the judges score every response; domains and levels vary."""
    lines = []
    for i in range(items):
        facets = {"domain": ["Math"] if i < 3 else ["History"], "difficulty": 1 + i % 3}
        for s, system in enumerate(systems):
            for k, skill in enumerate(skills):
                base = (i * 2 + s * 3 + k) % 5
                for rater, off in (("ann-1", 0), ("ann-2", i % 2)):
                    lines.append(
                        {
                            "item": f"q{i}",
                            "system": system,
                            "rater": rater,
                            "rater_kind": "human",
                            "skill": skill,
                            "score": 1 + (base + off) % 5,
                            **facets,
                        }
                    )
                for j, judge in enumerate(judges):
                    lines.append(
                        {
                            "item": f"q{i}",
                            "system": system,
                            "rater": judge,
                            "rater_kind": "judge",
                            "skill": skill,
                            "score": 1 + (base + j * (i % 3)) % 5,
                            **facets,
                        }
                    )
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def import_scores(project, data: bytes) -> None:
    scores_import(project_slug=project.slug, files=[("scores.jsonl", io.BytesIO(data))])


@pytest.fixture
def scored(project):
    import_scores(project, score_lines())
    return project


def url(project) -> str:
    return reverse("analytics:dashboard", args=[project.slug])


def htmx(client, path: str, data=None):
    return client.get(path, data or {}, HTTP_HX_REQUEST="true")


class Tables(HTMLParser):
    """Table id -> rows of cell texts (th and td), from the page's HTML."""

    def __init__(self, html: str):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: list | None = None
        self._row: list | None = None
        self._cell: list | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        if tag == "table" and dict(attrs).get("id"):
            self._table = self.tables.setdefault(dict(attrs)["id"], [])
        elif tag == "tr" and self._table is not None:
            self._row = []
            self._table.append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def f3(value) -> str:
    return floatformat(value, 3) if value is not None else "—"


def cell(value, ci=None, count=None) -> str:
    """A figure as the page shows it: 3 decimals, a count in brackets, then the interval."""
    text = f3(value) + (f" ({count})" if count is not None else "")
    if ci and ci.get("low") is not None:
        text += f" [{f3(ci['low'])}, {f3(ci['high'])}]"
    return text


@pytest.mark.parametrize("as_htmx", [False, True])
def test_it_is_for_researchers_and_admins_only(
    client, scored, researcher_client, admin_client, annotator_client, outsider_client, as_htmx
):
    def get(c):
        return htmx(c, url(scored)) if as_htmx else c.get(url(scored))

    anonymous = get(client)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    assert get(annotator_client).status_code == 403
    assert get(outsider_client).status_code == 404
    assert get(researcher_client).status_code == 200
    assert get(admin_client).status_code == 200
    assert researcher_client.post(url(scored)).status_code == 405


def test_the_shell_comes_at_once_and_htmx_loads_the_report_partial(scored, researcher_client):
    # when
    shell = researcher_client.get(url(scored))
    partial = htmx(researcher_client, url(scored), {"skill": "Factuality"})

    # then
    html = shell.content.decode()
    assert "<html" in html and 'hx-trigger="load"' in html
    assert f'hx-get="{url(scored)}"' in html and "agreement-table" not in html
    assert 'class="subnav"' in html and "chartjs/chart.umd.min.js" in html
    assert shell.context.get("report") is None
    body = partial.content.decode()
    assert "<html" not in body and 'id="agreement-table"' in body
    assert 'id="dashboard-charts" type="application/json"' in body
    assert "HX-Request" in shell["Vary"] and "HX-Request" in partial["Vary"]
    # the shell carries the filters into the request it makes
    filtered = researcher_client.get(url(scored), {"skill": "Factuality", "difficulty": "2"})
    assert f'hx-get="{url(scored)}?skill=Factuality&amp;difficulty=2"' in filtered.content.decode()


def test_the_numbers_on_the_page_are_the_reports(scored, researcher_client):
    # given
    expected = project_report(project=scored, with_breakdowns=False)

    # when
    response = htmx(researcher_client, url(scored))

    # then
    assert response.context["report"] == expected
    tables = Tables(response.content.decode()).tables
    agreement = {row[0]: row for row in tables["agreement-table"][1:]}
    icc = {row[0]: row for row in tables["icc-table"][1:]}
    among = {row[0]: row for row in tables["annotator-correlation-table"][1:]}
    assert set(agreement) == set(icc) == set(among) == set(SKILLS)
    for skill, a in expected["agreement"].items():
        assert agreement[skill][1:] == [
            str(a["n_units"]),
            str(a["n_raters"]),
            str(a["n_scores"]),
            str(a["n_na"]),
            *(
                cell(a["krippendorff_alpha"][level], a["krippendorff_alpha_ci"][level])
                for level in ("nominal", "ordinal", "interval", "ratio")
            ),
            cell(a["fleiss_kappa"], a["fleiss_kappa_ci"]),
            cell(a["gwet_ac1"], a["gwet_ac1_ci"]),
        ]
        forms = ("ICC1", "ICC1k", "ICC2", "ICC2k", "ICC3", "ICC3k")
        assert icc[skill][1:] == [
            *(cell(a["icc"][form], a["icc_ci"][form]) for form in forms),
            f"{a['icc']['n']} × {a['icc']['k']}",
            a["icc"]["design"],
        ]
        assert among[skill][1:] == [
            cell(
                a["mean_pairwise_spearman"]["value"],
                a["mean_pairwise_spearman_ci"],
                a["mean_pairwise_spearman"]["pairs"],
            ),
            cell(a["loo_ceiling"]["pearson"], a["loo_ceiling_ci"]["pearson"]),
            cell(
                a["loo_ceiling"]["spearman"],
                a["loo_ceiling_ci"]["spearman"],
                a["loo_ceiling"]["annotators"],
            ),
            *(
                cell(a["cohen_kappa"][w], a["cohen_kappa_ci"][w])  # two annotators
                for w in ("unweighted", "linear", "quadratic")
            ),
        ]
    for n, judge in enumerate(sorted(expected["correlation"]), start=1):
        body = tables[f"correlation-{n}"][1:]
        assert len(body) == 3 * len(SKILLS)
        for k, (skill, levels) in enumerate(expected["correlation"][judge].items()):
            shown = body[3 * k : 3 * k + 3]
            assert shown[0][0] == skill
            shown[0] = shown[0][1:]  # the skill spans the three rows
            for row, level in zip(shown, ("instance", "item", "system"), strict=True):
                figures = levels[level]
                ci = figures.get("ci") or {}
                assert row[:2] == [level, str(figures["n"])]
                assert row[2:8] == [
                    cell(figures.get(key), ci.get(key))
                    for key in ("pearson", "spearman", "kendall", "mae", "exact", "within_one")
                ]
    comparison = tables["comparison-table"][1:]
    pairs = expected["judge_comparison"]
    assert len(comparison) == sum(len(p) for p in pairs.values()) > 0
    for row in comparison:
        figures = pairs[row[0]][row[1]]
        assert row[2:] == [
            str(figures["n"]),
            cell(figures["estimate"], figures),
            f3(figures["p_value_a_not_better"]),
        ]
    for n, board in enumerate(expected["leaderboard"].values(), start=1):
        body = tables[f"leaderboard-{n}"]
        assert body[0] == ["System", "n", "Humans", *JUDGES]
        for shown, row in zip(body[1:], board, strict=True):
            assert shown[:2] == [row["system"], str(row["n"])]
            expected_cells = [f"{f3(row['humans'])} #{row['humans_rank']}"] + [
                f"{f3(row['judges'][name]['mean'])} #{row['judges'][name]['rank']}"
                for name in JUDGES
            ]
            assert shown[2:] == expected_cells


def test_the_charts_data_is_computed_from_the_same_rows(scored, researcher_client):
    response = htmx(researcher_client, url(scored))
    charts = response.context["charts"]
    body = response.content.decode()
    start = body.index('<script id="dashboard-charts" type="application/json">')
    blob = body[start:].split(">", 1)[1].split("</script>", 1)[0]
    assert json.loads(blob) == charts
    assert [c["title"] for c in charts["radar"]] == list(SYSTEMS)
    assert [c["title"] for c in charts["domain"]] == sorted(SKILLS)
    assert charts["domain"][0]["labels"] == ["History", "Math"]
    assert charts["difficulty"][0]["labels"] == ["1", "2", "3"]
    assert [c["measure"] for c in charts["correlation"]] == ["pearson", "spearman"]
    assert body.count('<canvas data-chart="') == 2 + 3 + 3 + 2
    assert len(response.context["heatmaps"]) == len(JUDGES) * len(SKILLS)
    assert 'id="heatmap-6"' in body


def test_filters_narrow_the_report_like_project_report(scored, researcher_client):
    # given
    query = {
        "skill": ["Readability"],
        "judge": ["judge-y"],
        "system": ["sys-b"],
        "domain": ["Math"],
        "difficulty": ["1", "2"],
    }

    # when
    shell = researcher_client.get(url(scored), query)
    response = htmx(researcher_client, url(scored), query)

    # then
    assert not shell.context["form"].errors
    expected = project_report(
        project=scored,
        skills=["Readability"],
        judges=["judge-y"],
        systems=["sys-b"],
        domains=["Math"],
        difficulties=[1, 2],
        with_breakdowns=False,
    )
    assert response.context["report"] == expected
    assert list(expected["agreement"]) == ["Readability"]
    assert list(expected["correlation"]) == ["judge-y"]
    assert [c["title"] for c in response.context["charts"]["radar"]] == ["sys-b"]
    assert response.context["charts"]["difficulty"][0]["labels"] == ["1", "2"]


@pytest.mark.parametrize(
    "query, message",
    [
        ({"difficulty": "9"}, "Select a valid choice. 9 is not one of the available choices."),
        ({"difficulty": "hard"}, "Select a valid choice. hard is not one of the available"),
        ({"skill": "Nope"}, "Select a valid choice. Nope is not one of the available choices."),
        ({"system": XSS}, "Select a valid choice. &lt;img src=x onerror=alert(1)&gt; is not"),
    ],
)
def test_bad_filter_values_get_a_clear_message(scored, researcher_client, query, message):
    response = researcher_client.get(url(scored), query)
    html = response.content.decode()
    assert response.status_code == 200
    assert "These filters cannot be used" in html and message in html
    assert 'hx-trigger="load"' not in html and XSS not in html


def test_the_partial_checks_the_level_and_says_when_nothing_matches(scored, researcher_client):
    bad = htmx(researcher_client, url(scored), {"difficulty": "x"})
    assert bad.status_code == 200 and "These filters cannot be used" in bad.content.decode()
    assert "agreement-table" not in bad.content.decode()
    gone = htmx(researcher_client, url(scored), {"system": "retired-model"})
    assert gone.status_code == 200 and "No scores match these filters" in gone.content.decode()


def test_an_empty_project_says_so_and_does_not_fail(project, researcher_client):
    shell = researcher_client.get(url(project))
    assert shell.status_code == 200
    html = shell.content.decode()
    assert "No scores yet" in html and 'hx-trigger="load"' not in html
    assert htmx(researcher_client, url(project)).status_code == 200
    inline = researcher_client.get(url(project), {"inline": "1"})
    assert inline.status_code == 200 and "No scores yet" in inline.content.decode()


def test_a_project_with_human_scores_only_has_no_judge_sections(project, researcher_client):
    import_scores(project, score_lines(judges=()))
    response = htmx(researcher_client, url(project))
    html = response.content.decode()
    assert response.status_code == 200 and 'id="agreement-table"' in html
    assert "No judge scores yet" in html and response.context["heatmaps"] == []


def test_without_scripts_the_report_can_be_shown_inline(scored, researcher_client):
    response = researcher_client.get(url(scored), {"inline": "1", "skill": "Factuality"})
    html = response.content.decode()
    assert "<html" in html and 'id="agreement-table"' in html and 'hx-trigger="load"' not in html
    assert list(response.context["report"]["agreement"]) == ["Factuality"]


def test_names_from_the_data_are_escaped(project, researcher_client):
    # given a system, a skill and a judge named to inject markup
    judge = "</script><script>alert(2)</script>"
    import_scores(
        project,
        score_lines(systems=("sys-a", XSS), skills=("Factuality", XSS), judges=("judge-x", judge)),
    )

    # when
    shell = researcher_client.get(url(project)).content.decode()
    body = htmx(researcher_client, url(project)).content.decode()

    # then
    for html in (shell, body):
        assert XSS not in html and judge not in html
        assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert body.count("<script") == 1  # the JSON data only, its "<" escaped
    assert "\\u003Cimg src=x onerror=alert(1)\\u003E" in body


def test_the_project_page_links_to_the_dashboard_for_staff(scored, researcher_client, admin_client):
    page = reverse("annotation:project-detail", args=[scored.slug])
    link = f'href="{url(scored)}"'
    assert link in researcher_client.get(page).content.decode()
    assert link in admin_client.get(page).content.decode()


def test_another_projects_researcher_gets_404(scored, django_user_model, client):
    # given a researcher of another project
    from annotation.models import ProjectRole
    from annotation.services.projects import membership_set

    other = project_create(slug="other", name="Other")
    user = django_user_model.objects.create_user("rex", password="pw")
    membership_set(project=other, user=user, role=ProjectRole.RESEARCHER)
    client.force_login(user)

    # then
    assert client.get(url(scored)).status_code == 404
    assert htmx(client, url(scored)).status_code == 404
    assert client.get(url(other)).status_code == 200
