"""The analytics dashboard: who may open it, that it serves stored snapshots (the first view
asks for one, then opens with the headline; each section loads on its own from the parts it
needs), that its numbers are the report's, filters, the empty project, and the chart data
(pure, checked against numbers worked out by hand)."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from urllib.parse import urlencode

import pytest
from django.db import connection, reset_queries
from django.http import QueryDict
from django.template.defaultfilters import floatformat
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from analytics.bootstrap import interval_note
from analytics.imports.services import scores_import
from analytics.models import ReportSnapshot
from analytics.report import chart_data, snapshots
from analytics.report.build import build_report
from analytics.report.selectors import project_report
from analytics.report.views import SECTIONS, ReportFilterForm
from analytics.rows import ReportRows
from annotation.services.projects import project_create
from tests.analytics.snapshot_worker import compute_pending

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
    means = {
        "Humans": [3.0, 3.0, 4.0],  # (4.5 + 1.5) / 2, (5 + 3) / 2
        "J": [3.5, 3.5, 3.5],  # (5 + 2) / 2, (4 + 3) / 2
        "K": [4.25, 4.25, 2.0],  # N/A left out; (3 + 1) / 2
    }
    assert [d["label"] for d in chart["datasets"]] == list(means)
    assert [[row["values"][k] for row in chart["rows"]] for k in range(3)] == list(means.values())
    assert chart["rows"][2] == {
        "label": "(none)",
        "n": 2,
        "values": [4.0, 3.5, 2.0],
        "counts": [2, 2, 2],
        "too_few": ["too few: n = 2 (at least 10 responses)"] * 3,
    }
    assert chart["rows"][0]["counts"] == [2, 2, 1]  # K's N/A is not counted
    # two responses a group are too few for a stratum (docs/SMALL_SAMPLES.md): not drawn
    assert all(v is None for d in chart["datasets"] for v in d["data"])


def test_bars_per_difficulty_order_levels_and_leave_a_judge_on_its_own_scale_out():
    [chart] = chart_data.facet_bars(
        rows(off_scale={("K", "S")}), "difficulty", skills=["S"], judges=["J", "K"]
    )
    assert chart["labels"] == ["2", "(none)"]
    assert [d["label"] for d in chart["datasets"]] == ["Humans", "J"]
    assert [row["values"] for row in chart["rows"]] == [[3.0, 3.5], [4.0, 3.5]]


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


def _unflagged(report):
    """The report without its small-sample flags: two responses a system are too few for a
    mean, and these tests check which means the charts take."""
    for rows in report["leaderboard"].values():
        for row in rows:
            row.pop("too_few")
            for standing in row["judges"].values():
                standing.pop("too_few", None)
    return report


def test_radar_per_system_takes_the_leaderboard_means_of_humans_and_each_judge():
    # given
    report = _unflagged(build_report(HUMAN, JUDGE))

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


def _ci(estimate, low, high):
    return {"estimate": estimate, "low": low, "high": high, "resamples": 10}


HEADLINE_REPORT = {
    "agreement": {
        "S": {
            "loo_ceiling": {"pearson": 0.7, "spearman": 0.6, "annotators": 3},
            "loo_ceiling_ci": {"pearson": _ci(0.7, 0.5, 0.9), "spearman": _ci(0.6, None, None)},
        },
        "T": {"loo_ceiling": {"pearson": None, "spearman": None, "annotators": 0}},
    },
    "correlation": {
        "J": {
            "S": {
                "instance": {
                    "pearson": 0.5,
                    "spearman": 0.4,
                    "ci": {"pearson": _ci(0.5, 0.1, 0.8)},
                },
                "item": {"pearson": 0.2, "kendall": 0.1},
                "system": {"pearson": 1.0, "ci": {"pearson": _ci(1.0, 0.9, 1.0)}},
            },
            "T": {"instance": {"pearson": 0.3}, "system": {"pearson": -0.5}},
        },
        "K": {"S": {"instance": {"pearson": 0.6, "spearman": None}, "system": {"pearson": 0.25}}},
        "L": {"T": {"instance": {"pearson": 0.4}}},
        "M": {},
    },
    "leaderboard": {"S": [], "T": []},
}


def test_the_headline_gives_each_judges_correlations_with_intervals_and_the_ceiling():
    # when
    found = chart_data.headline(HEADLINE_REPORT, "instance", "pearson")

    # then: J's mean (0.5 + 0.3) / 2 = 0.4 ties L's 0.4 (one skill): they share rank 2
    assert found["level"] == "instance" and found["measure"] == "pearson"
    assert found["labels"] == ["S", "T"]
    unflagged = {"n": [None, None], "too_few": ["", ""], "notes": ["", ""]}  # no n, no flags
    assert found["judges"] == [
        {"label": "K", "data": [0.6, None], "errors": [None, None], "mean": 0.6, "skills": 1,
         "rank": 1, **unflagged},
        {"label": "J", "data": [0.5, 0.3], "errors": [[0.1, 0.8], None], "mean": 0.4,
         "skills": 2, "rank": 2, **unflagged},
        {"label": "L", "data": [None, 0.4], "errors": [None, None], "mean": 0.4, "skills": 1,
         "rank": 2, **unflagged},
        {"label": "M", "data": [None, None], "errors": [None, None], "mean": None, "skills": 0,
         "rank": None, **unflagged},
    ]  # fmt: skip
    assert found["ceiling"] == [0.7, None] and found["ceiling_errors"] == [[0.5, 0.9], None]
    assert found["ceiling_n"] == [None, None] and found["ceiling_too_few"] == ["", ""]


def test_the_headline_reads_the_chosen_level_and_measure():
    system = chart_data.headline(HEADLINE_REPORT, "system", "pearson")
    assert [(j["label"], j["data"], j["rank"]) for j in system["judges"]] == [
        ("J", [1.0, -0.5], 1),  # mean 0.25: the mean ranks, not the best skill
        ("K", [0.25, None], 1),  # equal means share the rank; then names order them
        ("L", [None, None], None),
        ("M", [None, None], None),
    ]
    assert system["judges"][0]["errors"] == [[0.9, 1.0], None]
    spearman = chart_data.headline(HEADLINE_REPORT, "instance", "spearman")
    # an interval without bounds is no interval
    assert spearman["ceiling"] == [0.6, None] and spearman["ceiling_errors"] == [None, None]
    # the human ceiling is not computed for Kendall's tau
    kendall = chart_data.headline(HEADLINE_REPORT, "item", "kendall")
    assert kendall["ceiling"] is None and kendall["ceiling_errors"] is None
    assert kendall["judges"][0] == {
        "label": "J",
        "data": [0.1, None],
        "errors": [None, None],
        "n": [None, None],
        "too_few": ["", ""],
        "notes": ["", ""],
        "mean": 0.1,
        "skills": 1,
        "rank": 1,
    }
    with pytest.raises(ValueError):
        chart_data.headline(HEADLINE_REPORT, "corpus", "pearson")
    empty = chart_data.headline({"correlation": {}, "leaderboard": {}}, "instance", "pearson")
    assert empty["labels"] == [] and empty["judges"] == [] and empty["ceiling"] is None


def test_headlines_are_stored_for_every_level_and_measure_from_a_real_report():
    # given two annotators and the judges J and K of the rows above, with intervals
    report = build_report(HUMAN, JUDGE, resamples=50)

    # when
    stored = chart_data.headlines(report)

    # then
    assert set(stored) == {"instance", "item", "system"}
    assert all(set(m) == {"pearson", "spearman", "kendall"} for m in stored.values())
    for level, measures in stored.items():
        for measure, found in measures.items():
            for judge in found["judges"]:
                figures = report["correlation"][judge["label"]]["S"][level]
                assert judge["data"] == [figures[measure]]
                assert judge["n"] == [figures["n"]]
                assert judge["too_few"] == [figures["too_few"].get(measure, "")]
                ci = figures["ci"][measure]
                # two items: no interval stands (docs/SMALL_SAMPLES.md); the notes say why
                assert ci["low"] is None or "too_few_items" in ci["flags"]
                assert judge["errors"] == [None]
                assert judge["notes"][0].startswith("2 items resampled") or ci["low"] is None
    ceiling = report["agreement"]["S"]["loo_ceiling"]
    assert stored["item"]["spearman"]["ceiling"] == [ceiling["spearman"]]


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


def cell(value, ci=None, count=None, too_few="", n=None) -> str:
    """A figure as the page shows it (docs/SMALL_SAMPLES.md): on too few data "too few" and
    the reason; else 3 decimals, a count in brackets, its n, then the interval, or why it
    is not shown."""
    if too_few:
        return "too few " + too_few.removeprefix("too few: ")
    text = f3(value) + (f" ({count})" if count is not None else "")
    text += f" n = {n}" if n is not None else ""
    if ci and ci.get("flags"):
        text += f" no interval: {interval_note(ci)}"
    elif ci and ci.get("low") is not None:
        text += f" [{f3(ci['low'])}, {f3(ci['high'])}]"
    return text


def level_cells(figures) -> list[str]:
    """A correlation level's six figures as the page shows them: those too few for the same
    reason share one cell (the three correlations; all six at the system level)."""
    keys = ("pearson", "spearman", "kendall", "mae", "exact", "within_one")
    few = figures.get("too_few", {})
    shown = [
        cell(figures.get(k), (figures.get("ci") or {}).get(k), too_few=few.get(k, "")) for k in keys
    ]
    reason = few.get("pearson", "")
    if reason and all(few.get(k) == reason for k in keys):
        return shown[:1]
    if reason and all(few.get(k) == reason for k in keys[:3]):
        return shown[:1] + shown[3:]
    return shown


def ranked(mean, rank, too_few="") -> str:
    """A leaderboard's mean with its rank, greyed with the reason when too few."""
    text = f"{f3(mean)} #{rank}" if rank else f3(mean)
    return text + (f" too few: {too_few.removeprefix('too few: ')}" if too_few else "")


def section_url(project, name: str) -> str:
    return reverse("analytics:report-section", args=[project.slug, name])


def ready(client, project, query=None):
    """The dashboard once its report is computed: the first view asks for the snapshot, the
    "worker" computes it, the second view shows it."""
    first = client.get(url(project), query or {})
    assert first.status_code == 200
    compute_pending()
    return client.get(url(project), query or {})


def done_snapshot(project, query=None) -> ReportSnapshot:
    form = ReportFilterForm(QueryDict(urlencode(query or {}, doseq=True)), options=None)
    assert form.is_valid()
    key = snapshots.snapshot_key(form.snapshot_params())
    found = snapshots.snapshot_latest_done(project=project, key=key)
    assert found is not None
    return found


def section(client, project, name: str, query=None):
    response = htmx(client, section_url(project, name), query)
    assert response.status_code == 200
    return response


@contextmanager
def parts_read() -> Iterator[set[str]]:
    """The names of the snapshot parts read inside the block."""
    found: set[str] = set()
    reset_queries()  # the log keeps 9,000 queries: computing a snapshot may have filled it
    with CaptureQueriesContext(connection) as queries:
        yield found
    for q in queries.captured_queries:
        if "analytics_snapshotpart" in q["sql"]:
            found.update(re.findall(r"\"name\" = '([^']+)'", q["sql"]))


@pytest.mark.parametrize("as_htmx", [False, True])
def test_it_is_for_researchers_and_admins_only(
    client, scored, researcher_client, admin_client, annotator_client, outsider_client, as_htmx
):
    for path in (url(scored), section_url(scored, "agreement")):

        def get(c, path=path):
            return htmx(c, path) if as_htmx else c.get(path)

        anonymous = get(client)
        assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
        assert get(annotator_client).status_code == 403
        assert get(outsider_client).status_code == 404
        assert get(researcher_client).status_code == 200
        assert get(admin_client).status_code == 200
        assert researcher_client.post(path).status_code == 405


def test_the_first_view_asks_for_the_report_and_the_next_opens_with_the_headline(
    scored, researcher_client
):
    # when: nothing is computed yet
    first = researcher_client.get(url(scored))

    # then: a snapshot is asked for and its progress shown
    html = first.content.decode()
    assert "data-snapshot-progress" in html and "Waiting for a worker" in html
    assert "headline-table" not in html and first.context.get("snapshot") is None
    assert ReportSnapshot.objects.filter(project=scored, status="pending").count() == 1

    # when: the worker computed it
    compute_pending()
    with parts_read() as read:
        page = researcher_client.get(url(scored))

    # then: the headline, and the sections as placeholders loaded when opened
    html = page.content.decode()
    assert "<html" in html and 'id="headline-table"' in html and "Up to date." in html
    assert 'data-chart="headline"' in html and "chartjs/chart.umd.min.js" in html
    assert "agreement-table" not in html and "leaderboard-1" not in html
    for name in ("agreement", "correlation", "comparison", "leaderboards", "breakdowns"):
        assert f'hx-get="{section_url(scored, name)}"' in html
    assert f'href="{section_url(scored, "heatmaps")}"' in html  # without script: a page
    # only the small parts are read: never the report, the tables or the heat maps
    assert read == {"options", "headline.instance.pearson", "summary"}
    assert "report" not in page.context and "tables" not in page.context
    assert "HX-Request" in page["Vary"]


def test_the_headline_is_the_reports_correlations_ranked(scored, researcher_client):
    # given
    ready(researcher_client, scored)
    report = snapshots.snapshot_part(done_snapshot(scored), "report")
    assert report == project_report(project=scored, with_breakdowns=True)

    for level, measure in (("instance", "pearson"), ("item", "spearman"), ("system", "kendall")):
        # when
        page = researcher_client.get(url(scored), {"level": level, "measure": measure})

        # then: a row per judge, best mean first, then the ceiling's row first of all
        rows = Tables(page.content.decode()).tables["headline-table"]
        expected = chart_data.headline(report, level, measure)
        skills = expected["labels"]
        assert rows[0] == ["Judge", "Rank", "Mean (skills)", *skills] and len(skills) == 3
        body = rows[1:]
        if measure != "kendall":
            ceiling = report["agreement"]
            assert body[0] == [
                "Human ceiling",
                "—",
                "—",
                *(
                    cell(
                        ceiling[s]["loo_ceiling"][measure],
                        ceiling[s]["loo_ceiling_ci"][measure],
                        too_few=ceiling[s]["too_few"].get("loo_ceiling", ""),
                        n=ceiling[s]["loo_ceiling"]["units"],
                    )
                    for s in skills
                ),
            ]
            body = body[1:]
        assert [r[0] for r in body] == [j["label"] for j in expected["judges"]]
        for row, judge in zip(body, expected["judges"], strict=True):
            figures = [report["correlation"][judge["label"]][s][level] for s in skills]
            assert row[1:] == [
                str(judge["rank"]) if judge["rank"] else "—",  # none: every figure too few
                cell(judge["mean"], count=judge["skills"]),
                *(
                    cell(
                        f[measure],
                        (f.get("ci") or {}).get(measure),
                        too_few=f["too_few"].get(measure, ""),
                        n=f["n"],
                    )
                    for f in figures
                ),
            ]
        # the chart draws the same numbers
        [chart] = page.context["headline_charts"]["headline"]
        assert [d["label"] for d in chart["datasets"]] == [j["label"] for j in expected["judges"]]
        # ... but for the figures on too few data, which it leaves out
        drawn = [
            None if few else v
            for v, few in zip(
                expected["judges"][0]["data"], expected["judges"][0]["too_few"], strict=True
            )
        ]
        assert chart["datasets"][0]["data"] == drawn
        assert (chart["ceiling"] is None) == (expected["ceiling"] is None)


def test_the_level_links_keep_the_filters_and_htmx_swaps_the_report_only(scored, researcher_client):
    ready(researcher_client, scored, {"skill": "Factuality"})

    # when
    page = researcher_client.get(url(scored), {"skill": "Factuality", "level": "item"})
    swapped = htmx(researcher_client, url(scored), {"skill": "Factuality", "measure": "spearman"})
    odd = researcher_client.get(url(scored), {"skill": "Factuality", "level": "corpus"})

    # then
    html = page.content.decode()
    assert page.context["level"] == "item" and page.context["headline"]["level"] == "item"
    system = f"{url(scored)}?skill=Factuality&amp;level=system&amp;measure=pearson"
    assert f'href="{system}"' in html
    # htmx sends the applied filters from a form of hidden inputs, not from hx-* attributes
    vals = json.dumps({"level": "system", "measure": "pearson"}).replace('"', "&quot;")
    assert f"hx-vals='{vals}'" in html
    assert f'hx-get="{url(scored)}" hx-include="#applied-filters"' in html
    assert (
        '<form id="applied-filters" hidden><input type="hidden" name="skill" value="Factuality">'
        in html
    )
    assert 'name="level" value="item"' in html  # the filters form keeps the choice
    body = swapped.content.decode()
    assert "<html" not in body and 'id="headline-table"' in body
    assert swapped["HX-Push-Url"] == f"{url(scored)}?skill=Factuality&measure=spearman"
    assert "Judges ranked by their mean instance-level Spearman" in body
    assert odd.status_code == 200 and odd.context["level"] == "instance"
    # neither is part of the report asked for: one snapshot answers all
    assert ReportSnapshot.objects.filter(project=scored).count() == 1


def test_the_sections_show_the_reports_numbers(scored, researcher_client):
    # given
    ready(researcher_client, scored)
    expected = snapshots.snapshot_part(done_snapshot(scored), "report")

    # when
    with parts_read() as read:
        agreement_page = section(researcher_client, scored, "agreement")
    correlation_page = section(researcher_client, scored, "correlation")
    comparison_page = section(researcher_client, scored, "comparison")
    leaderboards_page = section(researcher_client, scored, "leaderboards")

    # then
    assert read == {"options", "tables"}
    tables = {}
    for response in (agreement_page, correlation_page, comparison_page, leaderboards_page):
        assert "<html" not in response.content.decode()
        tables.update(Tables(response.content.decode()).tables)
    agreement = {row[0]: row for row in tables["agreement-table"][1:]}
    icc = {row[0]: row for row in tables["icc-table"][1:]}
    among = {row[0]: row for row in tables["annotator-correlation-table"][1:]}
    assert set(agreement) == set(icc) == set(among) == set(SKILLS)
    for skill, a in expected["agreement"].items():
        few = a["too_few"]
        assert agreement[skill][1:] == [
            str(a["n_units"]),
            str(a["n_raters"]),
            str(a["n_scores"]),
            str(a["n_na"]),
            *(
                cell(
                    a["krippendorff_alpha"][level],
                    a["krippendorff_alpha_ci"][level],
                    too_few=few.get("krippendorff_alpha", ""),
                )
                for level in ("nominal", "ordinal", "interval", "ratio")
            ),
            cell(a["fleiss_kappa"], a["fleiss_kappa_ci"], too_few=few.get("fleiss_kappa", "")),
            cell(a["gwet_ac1"], a["gwet_ac1_ci"], too_few=few.get("gwet_ac1", "")),
        ]
        forms = ("ICC1", "ICC1k", "ICC2", "ICC2k", "ICC3", "ICC3k")
        assert "icc" not in few  # 12 units: enough for an ICC
        assert icc[skill][1:] == [
            *(cell(a["icc"][form], a["icc_ci"][form]) for form in forms),
            f"{a['icc']['n']} × {a['icc']['k']}",
            a["icc"]["design"],
        ]
        assert "loo_ceiling" not in few and "cohen_kappa" not in few
        assert among[skill][1:] == [
            cell(
                a["mean_pairwise_spearman"]["value"],
                a["mean_pairwise_spearman_ci"],
                a["mean_pairwise_spearman"]["pairs"],
                too_few=few.get("mean_pairwise_spearman", ""),
                n=a["mean_pairwise_spearman"]["units"],
            ),
            cell(
                a["loo_ceiling"]["pearson"],
                a["loo_ceiling_ci"]["pearson"],
                n=a["loo_ceiling"]["units"],
            ),
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
                assert row[:2] == [level, str(figures["n"])]
                assert row[2:-1] == level_cells(figures)
    comparison = tables["comparison-table"][1:]
    pairs = expected["judge_comparison"]
    assert len(comparison) == sum(len(p) for p in pairs.values()) > 0
    for row in comparison:
        figures = pairs[row[0]][row[1]]
        assert row[2:] == [
            str(figures["n"]),
            cell(figures["estimate"], figures, too_few=figures["too_few"].get("estimate", "")),
            f3(figures["p_value_a_not_better"]),
        ]
    for n, board in enumerate(expected["leaderboard"].values(), start=1):
        body = tables[f"leaderboard-{n}"]
        assert body[0] == ["System", "n", "Humans", *JUDGES]
        for shown, row in zip(body[1:], board, strict=True):
            assert shown[:2] == [row["system"], str(row["n"])]
            expected_cells = [
                ranked(row["humans"], row["humans_rank"], row["too_few"].get("humans", ""))
            ] + [
                ranked(
                    row["judges"][name]["mean"],
                    row["judges"][name]["rank"],
                    row["judges"][name].get("too_few", {}).get("mean", ""),
                )
                for name in JUDGES
            ]
            assert shown[2:] == expected_cells


def chart_blob(body: str, source: str):
    start = body.index(f'<script id="{source}" type="application/json">')
    return json.loads(body[start:].split(">", 1)[1].split("</script>", 1)[0])


def without_links(value):
    """Chart data without the links to the responses the page adds to it
    (analytics/report/figure_links.py; tests/analytics/test_figure_links.py checks them)."""
    if isinstance(value, dict):
        return {k: without_links(v) for k, v in value.items() if k not in ("link", "links")}
    if isinstance(value, list):
        return [without_links(v) for v in value]
    return value


def test_the_sections_charts_are_computed_from_the_same_rows(scored, researcher_client):
    ready(researcher_client, scored)

    # when
    with parts_read() as read:
        breakdowns = section(researcher_client, scored, "breakdowns")
    leaderboards = section(researcher_client, scored, "leaderboards")
    heatmaps = section(researcher_client, scored, "heatmaps")

    # then: each section carries only its charts' data
    assert read == {"options", "charts"}
    charts = snapshots.snapshot_part(done_snapshot(scored), "charts")
    facets = without_links(chart_blob(breakdowns.content.decode(), "charts-breakdowns"))
    assert facets == {"domain": charts["domain"], "difficulty": charts["difficulty"]}
    assert [c["title"] for c in facets["domain"]] == sorted(SKILLS)
    assert facets["domain"][0]["labels"] == ["History", "Math"]
    assert facets["difficulty"][0]["labels"] == ["1", "2", "3"]
    # a chart whose every mean rests on too few responses says so in place of its canvas
    drawn = sum(c["drawn"] for c in (*facets["domain"], *facets["difficulty"]))
    assert breakdowns.content.decode().count('<canvas data-chart="') == drawn
    assert breakdowns.content.decode().count("data-chart-empty") == 3 + 3 - drawn
    radar = chart_blob(leaderboards.content.decode(), "charts-leaderboards")
    assert list(radar) == ["radar"] and [c["title"] for c in radar["radar"]] == list(SYSTEMS)
    assert leaderboards.content.decode().count('<canvas data-chart="radar"') == 2
    # one judge's heat maps at a time, the first by name unless another is chosen
    assert [m["judge"] for m in heatmaps.context["heatmaps"]] == [sorted(JUDGES)[0]] * len(SKILLS)
    assert f'id="heatmap-{len(SKILLS)}"' in heatmaps.content.decode()
    assert [j["name"] for j in heatmaps.context["heat_judges"]] == sorted(JUDGES)
    with parts_read() as read:
        other = section(researcher_client, scored, "heatmaps", {"heat_judge": sorted(JUDGES)[1]})
    assert read == {"options", "summary", "heatmaps.1"}
    assert {m["judge"] for m in other.context["heatmaps"]} == {sorted(JUDGES)[1]}
    assert "selected>" in other.content.decode() and 'name="heat_judge"' in other.content.decode()


def test_a_section_on_its_own_is_a_page_and_says_when_there_is_no_report(scored, researcher_client):
    # before any snapshot: no report is computed here, the section says so
    before = section(researcher_client, scored, "agreement")
    assert "There is no report of these filters yet" in before.content.decode()
    assert not ReportSnapshot.objects.exists()
    ready(researcher_client, scored)

    # when
    page = researcher_client.get(section_url(scored, "agreement"), {"level": "item"})

    # then
    html = page.content.decode()
    assert "<html" in html and 'id="agreement-table"' in html and "<h1>Agreement among" in html
    assert researcher_client.get(section_url(scored, "nope")).status_code == 404
    assert "HX-Request" in page["Vary"]


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
    shell = ready(researcher_client, scored, query)
    leaderboards = section(researcher_client, scored, "leaderboards", query)
    breakdowns = section(researcher_client, scored, "breakdowns", query)

    # then
    assert not shell.context["form"].errors
    expected = project_report(
        project=scored,
        skills=["Readability"],
        judges=["judge-y"],
        systems=["sys-b"],
        domains=["Math"],
        difficulties=[1, 2],
        with_breakdowns=True,
    )
    assert snapshots.snapshot_part(done_snapshot(scored, query), "report") == expected
    assert list(expected["agreement"]) == ["Readability"]
    assert list(expected["correlation"]) == ["judge-y"]
    assert shell.context["headline"]["labels"] == ["Readability"]
    assert [j["label"] for j in shell.context["headline"]["judges"]] == ["judge-y"]
    assert [c["title"] for c in leaderboards.context["charts"]["radar"]] == ["sys-b"]
    assert breakdowns.context["charts"]["difficulty"][0]["labels"] == ["1", "2"]


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
    ready(researcher_client, scored)  # the default report names the values there are
    response = researcher_client.get(url(scored), query)
    html = response.content.decode()
    assert response.status_code == 200
    assert "These filters cannot be used" in html and message in html
    assert "data-snapshot-progress" not in html and XSS not in html
    assert not ReportSnapshot.objects.exclude(is_default=True).exists()


def test_bad_filters_and_filters_that_match_nothing_say_so(scored, researcher_client):
    bad = htmx(researcher_client, url(scored), {"difficulty": "x"})
    assert bad.status_code == 200 and "These filters cannot be used" in bad.content.decode()
    assert "headline-table" not in bad.content.decode()
    bad_section = section(researcher_client, scored, "agreement", {"difficulty": "x"})
    assert "These filters cannot be used" in bad_section.content.decode()
    gone = ready(researcher_client, scored, {"system": "retired-model"})
    assert "No scores match these filters" in gone.content.decode()


def test_an_empty_project_says_so_and_does_not_fail(project, researcher_client):
    page = ready(researcher_client, project)
    assert page.status_code == 200
    html = page.content.decode()
    assert "No scores yet" in html and "headline-table" not in html
    assert htmx(researcher_client, url(project)).status_code == 200
    inline = researcher_client.get(url(project), {"inline": "1"})
    assert inline.status_code == 200 and "No scores yet" in inline.content.decode()


def test_a_project_with_human_scores_only_has_no_judge_headline(project, researcher_client):
    import_scores(project, score_lines(judges=()))
    page = ready(researcher_client, project)
    html = page.content.decode()
    assert page.status_code == 200 and "No judge scores yet" in html
    assert "headline-table" not in html and 'data-chart="headline"' not in html
    agreement = section(researcher_client, project, "agreement").content.decode()
    assert 'id="agreement-table"' in agreement
    correlation = section(researcher_client, project, "correlation").content.decode()
    assert "No judge scores yet" in correlation
    assert section(researcher_client, project, "heatmaps").context["heatmaps"] == []


def test_without_scripts_every_section_can_be_shown_inline(scored, researcher_client):
    ready(researcher_client, scored, {"skill": "Factuality"})
    response = researcher_client.get(url(scored), {"inline": "1", "skill": "Factuality"})
    html = response.content.decode()
    assert "<html" in html and 'id="agreement-table"' in html and 'id="leaderboard-1"' in html
    assert 'id="heatmap-1"' in html and 'id="charts-leaderboards"' in html
    assert "Waiting for a worker" not in html  # the same report as without "inline"
    tables = Tables(html).tables
    assert [row[0] for row in tables["agreement-table"][1:]] == ["Factuality"]


def test_names_from_the_data_are_escaped(project, researcher_client):
    # given a system, a skill and a judge named to inject markup
    judge = "</script><script>alert(2)</script>"
    import_scores(
        project,
        score_lines(systems=("sys-a", XSS), skills=("Factuality", XSS), judges=("judge-x", judge)),
    )

    # when
    shell = ready(researcher_client, project).content.decode()
    inline = researcher_client.get(url(project), {"inline": "1"}).content.decode()
    sections = [section(researcher_client, project, name).content.decode() for name in SECTIONS]

    # then
    for html in (shell, inline, *sections):
        assert XSS not in html and judge not in html
    for html in (shell, inline, sections[0]):
        assert "&lt;img src=x onerror=alert(1)&gt;" in html
    # the JSON data only, its "<" escaped
    assert shell.count("<script") - shell.count("<script src=") == 1
    assert "\\u003Cimg src=x onerror=alert(1)\\u003E" in shell
    assert "\\u003C/script\\u003E\\u003Cscript\\u003Ealert(2)" in shell
    assert sections[3].count("<script") == 1  # leaderboards: the radar data


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


def test_with_many_judges_the_table_lists_the_best_ranked_and_links_to_all(
    project, researcher_client, settings, monkeypatch
):
    # given: more judges than the headline table lists
    from analytics.report import views

    monkeypatch.setattr(views, "HEADLINE_TABLE_JUDGES", 3)
    judges = tuple(f"judge-{n}" for n in range(5))
    import_scores(project, score_lines(judges=judges))

    # when
    page = ready(researcher_client, project)
    every = researcher_client.get(url(project), {"all_judges": "1"})

    # then: the 3 best ranked, and a link to all 5 (same snapshot: a view key, no new report)
    html = page.content.decode()
    rows = Tables(html).tables["headline-table"][1:]
    ranked = [j["label"] for j in page.context["headline"]["judges"]]
    assert [r[0] for r in rows if r[0] != "Human ceiling"] == ranked[:3]
    assert "Show all 5 judges" in html and "all_judges=1" in html
    rows = Tables(every.content.decode()).tables["headline-table"][1:]
    assert [r[0] for r in rows if r[0] != "Human ceiling"] == ranked
    assert "Show all 5 judges" not in every.content.decode()
    assert ReportSnapshot.objects.count() == 1


def test_the_correlation_tables_come_a_page_of_judges_at_a_time(
    project, researcher_client, monkeypatch
):
    # given: more judges than a page holds
    from analytics.report import views

    monkeypatch.setattr(views, "CORRELATION_PAGE_JUDGES", 2)
    judges = tuple(f"judge-{n}" for n in range(5))
    import_scores(project, score_lines(judges=judges))
    ready(researcher_client, project)

    # when
    first = section(researcher_client, project, "correlation")
    last = section(researcher_client, project, "correlation", {"judge_page": "3"})
    odd = section(researcher_client, project, "correlation", {"judge_page": "x"})

    # then: judges 1-2, 5, and a page of each of the 3
    shown = [j["judge"] for j in first.context["tables"]["correlation"]]
    assert shown == ["judge-0", "judge-1"] and first.context["judge_pages"] == [1, 2, 3]
    assert "Judges 1–2 of 5" in first.content.decode()
    assert [j["judge"] for j in last.context["tables"]["correlation"]] == ["judge-4"]
    assert "Judges 5–5 of 5" in last.content.decode()
    assert odd.context["judge_page"] == 1
    assert 'name="judge_page" value="2"' in first.content.decode()
