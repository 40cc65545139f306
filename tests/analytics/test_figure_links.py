"""Every number of the dashboard links to the responses behind it (docs/ANALYTICS.md, "Every
number links to its responses"): the heat maps, the headline, the correlation tables, the
leaderboards and the per-domain and per-difficulty tables, on a built report. Each cell with
data has exactly one link, its query is the cell's filters (plus the report's and `from`),
and the drill-down selection it opens is not empty; a heat-map cell's holds exactly its
count."""

from __future__ import annotations

import json
from collections import defaultdict
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from analytics.items.selectors import item_filters_resolve, item_selection
from analytics.report.figure_links import FigureLinks, figure_links
from tests.analytics.test_dashboard import (
    htmx,
    import_scores,
    ready,
    section,
    section_url,
    url,
)

SKILLS = ("Factuality", "Readability")
SYSTEMS = ("sys-a", "sys-b")
JUDGES = ("judge-x", "judge-y")
ITEMS = 12


def whole_score_lines(items: int = ITEMS) -> bytes:
    """Two annotators who agree (whole human means: the heat maps link their cells) and two
    judges; two domains, three difficulty levels."""
    lines = []
    for i in range(items):
        facets = {"domain": ["Math"] if i < items // 2 else ["History"], "difficulty": 1 + i % 3}
        for s, system in enumerate(SYSTEMS):
            for k, skill in enumerate(SKILLS):
                human = 1 + (i + s * 2 + k) % 5
                for rater in ("ann-1", "ann-2"):
                    lines.append(
                        {"item": f"q{i}", "system": system, "rater": rater, "skill": skill}
                        | {"rater_kind": "human", "score": human, **facets}
                    )
                for j, judge in enumerate(JUDGES):
                    lines.append(
                        {"item": f"q{i}", "system": system, "rater": judge, "skill": skill}
                        | {"rater_kind": "judge", "score": 1 + (human + j * (i % 2)) % 5, **facets}
                    )
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


class Cells(HTMLParser):
    """Table id -> rows of cells, each {"tag", "text", "links": [href, ...]}; and each
    table's caption text."""

    def __init__(self, html: str):
        super().__init__()
        self.tables: dict[str, list[list[dict]]] = {}
        self.captions: dict[str, str] = {}
        self._table: str | None = None
        self._row: list | None = None
        self._cell: dict | None = None
        self._caption: list | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        if tag == "table" and found.get("id"):
            self._table = found["id"]
            self.tables[self._table] = []
        elif tag == "caption" and self._table:
            self._caption = []
        elif tag == "tr" and self._table:
            self._row = []
            self.tables[self._table].append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = {"tag": tag, "text": [], "links": []}
        elif tag == "a" and self._cell is not None:
            self._cell["links"].append(found["href"])

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._cell["text"] = " ".join("".join(self._cell["text"]).split())
            self._row.append(self._cell)
            self._cell = None
        elif tag == "caption" and self._caption is not None and self._table:
            self.captions[self._table] = " ".join("".join(self._caption).split())
            self._caption = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell["text"].append(data)
        if self._caption is not None:
            self._caption.append(data)


def query_of(href: str, project) -> dict[str, list[str]]:
    parts = urlsplit(href)
    assert parts.path == reverse("analytics:items", args=[project.slug])
    return parse_qs(parts.query)


class Selections:
    """The drill-down selection of a link's filters (the other side of the contract), each
    distinct query read once."""

    def __init__(self, project):
        self.project = project
        self.found: dict[str, int] = {}

    def count(self, query: dict[str, list[str]]) -> int:
        key = json.dumps(sorted(query.items()))
        if key not in self.found:
            given = {k: v for k, v in query.items() if k != "from"}
            filters, errors = item_filters_resolve(project=self.project, given=given)
            assert errors == {}, (query, errors)
            self.found[key] = item_selection(project=self.project, filters=filters).count
        return self.found[key]


@pytest.fixture
def whole(project):
    import_scores(project, whole_score_lines())
    return project


def body_rows(table: list[list[dict]]) -> list[list[dict]]:
    """The rows under the header row."""
    return table[1:]


@pytest.mark.slow  # a report is computed
def test_every_figure_cell_links_to_its_nonempty_responses(whole, researcher_client):
    # given a built report
    dashboard = ready(researcher_client, whole).content.decode()
    selections = Selections(whole)
    back = url(whole)

    # then the headline: every judge x skill figure links to the judge's responses of the skill
    headline = Cells(dashboard).tables["headline-table"]
    skills = [c["text"] for c in headline[0][3:]]
    judges_seen = set()
    for row in body_rows(headline):
        name = row[0]["text"]
        for skill, c in zip(skills, row[3:], strict=True):
            [href] = c["links"]
            query = query_of(href, whole)
            expected = {"skill": [skill], "from": [f"{back}#headline"]}
            if name != "Human ceiling":
                expected["judge"] = [name]
                judges_seen.add(name)
            assert query == expected
            assert selections.count(query) > 0
    assert judges_seen == set(JUDGES)

    # the heat maps: each count is exactly the responses of its judge, skill and bins
    heat = Cells(section(researcher_client, whole, "heatmaps").content.decode())
    heat_cells = 0
    for table_id, table in heat.tables.items():
        judge, skill = heat.captions[table_id].split(" (")[0].split(" · ")
        judge_bins = [c["text"] for c in table[0][1:]]
        for row in body_rows(table):
            human = row[0]["text"]
            for bin_, c in zip(judge_bins, row[1:], strict=True):
                count = c["text"].replace("(judge = human)", "").strip()
                if not count:
                    assert c["links"] == []
                    continue
                [href] = c["links"]
                query = query_of(href, whole)
                assert query == {
                    "judge": [judge],
                    "skill": [skill],
                    "human_bin": [f"{float(human):g}"],
                    "judge_bin": [f"{float(bin_):g}"],
                    "from": [f"{back}#heatmaps"],
                }
                assert selections.count(query) == int(count)
                heat_cells += 1
    assert heat_cells >= 8

    # the correlation tables: each level's row links its n to the judge's responses of the skill
    corr = Cells(section(researcher_client, whole, "correlation").content.decode())
    corr_rows = 0
    for table_id, table in corr.tables.items():
        judge = (
            corr.captions[table_id]
            .removeprefix("Judge ")
            .removesuffix(" against the mean human score")
        )
        skill = ""
        for row in body_rows(table):
            if row[0]["tag"] == "th":
                skill, row = row[0]["text"], row[1:]
            [href] = {h for c in row for h in c["links"]}  # n and every figure: one selection
            assert row[1]["links"] == [href]  # the n
            assert all(c["links"] == [href] for c in row[1:-1] if c["text"].strip()), row
            query = query_of(href, whole)
            assert query == {"judge": [judge], "skill": [skill], "from": [f"{back}#correlation"]}
            assert (
                selections.count(query) >= int(row[1]["text"])
                if row[0]["text"] == ("instance")
                else selections.count(query) > 0
            )
            corr_rows += 1
    assert corr_rows == len(JUDGES) * len(SKILLS) * 3

    # the leaderboards: the n and every mean of a system, the people's and each judge's
    boards = Cells(section(researcher_client, whole, "leaderboards").content.decode())
    board_cells = 0
    for table_id, table in boards.tables.items():
        skill = boards.captions[table_id]
        columns = [c["text"] for c in table[0]]
        assert columns[:3] == ["System", "n", "Humans"]
        for row in body_rows(table):
            system = row[0]["text"]
            assert row[0]["links"] == []
            for column, c in zip(columns[1:], row[1:], strict=True):
                [href] = c["links"]
                query = query_of(href, whole)
                expected = {"system": [system], "skill": [skill]}
                if column not in ("n", "Humans"):
                    expected["judge"] = [column]
                assert query == expected | {"from": [f"{back}#leaderboards"]}
                found = selections.count(query)
                assert found > 0
                if column == "n":
                    assert found == int(c["text"])
                board_cells += 1
    assert board_cells == len(SKILLS) * len(SYSTEMS) * (2 + len(JUDGES))

    # the per-domain and per-difficulty tables
    facets = Cells(section(researcher_client, whole, "breakdowns").content.decode())
    facet_cells = 0
    for table_id, table in facets.tables.items():
        facet = table_id.split("-")[0]
        columns = [c["text"] for c in table[0]]
        for row in body_rows(table):
            group = row[0]["text"]
            for column, c in zip(columns[1:], row[1:], strict=True):
                [href] = c["links"]
                query = query_of(href, whole)
                assert query[facet] == [group] and query["from"] == [f"{back}#breakdowns"]
                assert query.get("judge") == (None if column in ("n", "Humans") else [column])
                assert selections.count(query) > 0
                facet_cells += 1
    assert facet_cells == len(SKILLS) * (2 + 3) * (2 + len(JUDGES))


@pytest.mark.slow  # a report is computed
def test_links_keep_the_reports_filters_and_lead_back_to_the_page_shown(whole, researcher_client):
    # given the report of one domain, shown at the item level
    query = {"domain": "Math", "level": "item"}
    dashboard = ready(researcher_client, whole, query).content.decode()
    shown = f"{url(whole)}?domain=Math&level=item"
    selections = Selections(whole)

    # then the headline's links carry the domain and come back to the page as shown
    headline = Cells(dashboard).tables["headline-table"]
    href = headline[2][3]["links"][0]
    assert query_of(href, whole)["domain"] == ["Math"]
    assert query_of(href, whole)["from"] == [f"{shown}#headline"]

    # a section loaded into the dashboard comes back to the dashboard's address (htmx sends it)
    loaded = researcher_client.get(
        section_url(whole, "heatmaps"),
        {"domain": "Math"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL=f"http://testserver{shown}",
    )
    heat = Cells(loaded.content.decode())
    cells = [
        (c, table_id)
        for table_id, table in heat.tables.items()
        for row in body_rows(table)
        for c in row[1:]
        if c["links"]
    ]
    assert cells
    for c, _ in cells:
        found = query_of(c["links"][0], whole)
        assert found["domain"] == ["Math"] and found["from"] == [f"{shown}#heatmaps"]
        assert selections.count(found) == int(c["text"].replace("(judge = human)", "").strip())

    # a section opened on a page of its own comes back to that page
    own = researcher_client.get(section_url(whole, "leaderboards"), {"domain": "Math"})
    href = Cells(own.content.decode()).tables["leaderboard-1"][1][1]["links"][0]
    assert query_of(href, whole)["from"] == [f"{section_url(whole, 'leaderboards')}?domain=Math"]

    # the drill-down page opens on the cell's responses and links back
    page = researcher_client.get(href)
    assert page.status_code == 200
    assert b'id="items-back"' in page.content


def test_a_half_score_heat_map_links_each_cell_to_exactly_its_responses(project, researcher_client):
    # given annotators who disagree by one (means of x.5)
    lines = [json.loads(line) for line in whole_score_lines(items=4).decode().splitlines() if line]
    for line in lines:
        if line["rater"] == "ann-2":
            line["score"] = line["score"] % 5 + 1
    import_scores(project, "".join(json.dumps(line) + "\n" for line in lines).encode())
    ready(researcher_client, project)

    # when
    heat = Cells(section(researcher_client, project, "heatmaps").content.decode())

    # then every count links, half-step rows included, to as many responses as it says
    selections = Selections(project)
    halves = 0
    for table in heat.tables.values():
        for row in body_rows(table):
            for c in row[1:]:
                count = c["text"].replace("(judge = human)", "").strip()
                if count:
                    [href] = c["links"]
                    query = query_of(href, project)
                    assert selections.count(query) == int(count), query
                    halves += not float(query["human_bin"][0]).is_integer()
    assert halves > 0


def test_a_cells_filters_replace_the_reports_and_an_empty_figure_has_no_link(project):
    links = figure_links(
        project_slug=project.slug,
        filters={"skill": ["A", "B"], "judge": ["J"], "domain": None, "human": "raw"},
        back="/projects/p/analytics/?skill=A&skill=B",
    )
    href = links.url(skill="A", system="s", human_level="", judge_level=None)
    assert parse_qs(urlsplit(href).query) == {
        "skill": ["A"],
        "judge": ["J"],
        "system": ["s"],
        "from": ["/projects/p/analytics/?skill=A&skill=B"],
    }
    assert links.url_if(0, skill="A") == "" and links.url_if(None, skill="A") == ""
    assert links.url_if(3, skill="A") == href.replace("&system=s", "")
    adjudicated = figure_links(
        project_slug=project.slug, filters={"human": "adjudicated"}, back="/"
    )
    assert isinstance(adjudicated, FigureLinks)
    assert "human=adjudicated" in adjudicated.url(skill="A")


def test_a_chart_carries_the_links_of_its_bars(whole, researcher_client):
    ready(researcher_client, whole)
    body = htmx(researcher_client, section_url(whole, "breakdowns")).content.decode()
    start = body.index('<script id="charts-breakdowns" type="application/json">')
    charts = json.loads(body[start:].split(">", 1)[1].split("</script>", 1)[0])
    by_group: dict[str, list] = defaultdict(list)
    for chart in charts["domain"]:
        for dataset in chart["datasets"]:
            assert len(dataset["links"]) == len(chart["labels"])
            for group, href in zip(chart["labels"], dataset["links"], strict=True):
                query = query_of(href, whole)
                assert query["domain"] == [group] and query["skill"] == [chart["title"]]
                by_group[group].append(query.get("judge"))
    assert set(by_group) == {"History", "Math"}


def test_imported_scores_show_on_the_drill_down_page_and_in_its_api(project, researcher_client):
    # given people's and judges' scores imported from a file, one rationale hostile
    lines = [json.loads(line) for line in whole_score_lines(items=2).decode().splitlines() if line]
    for line in lines:
        line["rationale"] = "<b>bold</b> reason" if line["rater"] == "ann-1" else "fine"
    import_scores(project, "".join(json.dumps(line) + "\n" for line in lines).encode())
    ready(researcher_client, project)
    page_url = reverse("analytics:items", args=[project.slug])

    # when the drill-down of one judge and skill is opened, and its API asked
    html = researcher_client.get(page_url, {"judge": "judge-x", "skill": "Readability"})
    api = researcher_client.get(
        f"/api/v1/projects/{project.slug}/analytics/items",
        {"judge": "judge-x", "skill": "Readability"},
    )

    # then each response shows the imported people (marked) and the chosen judge, escaped
    body = html.content.decode()
    assert html.status_code == 200 and "no human score" not in body
    assert 'ann-1 <small class="muted">(imported)</small>' in body
    assert (
        "Imported judge scores" in body
        and "judge-y"
        not in body.split("<main")[-1].split("Imported judge scores", 1)[1].split("</table>", 1)[0]
    )
    assert "<b>bold</b>" not in body and "&lt;b&gt;bold&lt;/b&gt; reason" in body
    assert api.status_code == 200
    entry = api.json()["results"][0]
    kinds = {(s["kind"], s["rater"], s["skill"]) for s in entry["imported_scores"]}
    assert kinds == {
        ("human", "ann-1", "Readability"),
        ("human", "ann-2", "Readability"),
        ("judge", "judge-x", "Readability"),
    }
