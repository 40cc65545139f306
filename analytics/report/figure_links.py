"""Links from the dashboard's figures to the responses behind them: the drill-down page
(analytics/items, docs/DRILL_DOWN.md), described in docs/ANALYTICS.md ("Every number links
to its responses").

A figure's link carries the filters of the report it belongs to (the dashboard's skill,
judge, system, domain, difficulty and human scores), then its own (a heat-map cell's judge,
skill and levels, a leaderboard cell's system, skill and judge, ...), which replace the
report's of the same name, and `from`: the page that showed the figure, where the drill-down
page's "back to the figure" leads. A figure on no response (n = 0) has no link; one on too few
responses keeps it while there are some.

Links are made when a page is rendered, never stored in a snapshot's parts: the same parts
serve the dashboard, a section's own page and every filter's "from"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.urls import reverse

from analytics.report.chart_data import HUMANS, NONE
from analytics.templatetags.items import items_query

#: The report's filters a figure's link keeps (the drill-down page takes them by these
#: names; `human`: adjudicated human scores, raw being both sides' default).
REPORT_FILTERS = ("skill", "judge", "system", "domain", "difficulty", "human")


@dataclass(frozen=True)
class FigureLinks:
    """The drill-down page of one project (`path`), under the report's `filters`, with
    `back` (the figure's page) as its `from`."""

    path: str
    filters: tuple[tuple[str, tuple[str, ...]], ...]
    back: str

    def url(self, **cell: Any) -> str:
        """The drill-down page of a figure whose own filters are `cell` (empty values
        dropped; a value replaces the report's filter of the same name)."""
        chosen: dict[str, Any] = {name: list(values) for name, values in self.filters}
        chosen.update({k: v for k, v in cell.items() if v is not None and v != ""})
        chosen["from"] = self.back
        return f"{self.path}?{items_query(**chosen)}"

    def url_if(self, count: Any, **cell: Any) -> str:
        """`url(**cell)` when the figure rests on at least one response (`count` > 0), else
        "" (no link)."""
        return self.url(**cell) if isinstance(count, int | float) and count > 0 else ""


def figure_links(
    *, project_slug: str, filters: Mapping[str, Sequence[Any] | None], back: str
) -> FigureLinks:
    """The links of the figures of one page: `filters` are the report's (its form's
    cleaned values by the names of REPORT_FILTERS; others are ignored), `back` the path
    (with its query) to come back to."""
    chosen = []
    for name in REPORT_FILTERS:
        values = filters.get(name) or ()
        values = [values] if isinstance(values, str) else values
        if values and values != ["raw"]:
            chosen.append((name, tuple(str(v) for v in values)))
    return FigureLinks(
        path=reverse("analytics:items", args=[project_slug]), filters=tuple(chosen), back=back
    )


def _judge(label: str) -> str:
    """A dataset's judge filter: none for the people's dataset."""
    return "" if label == HUMANS else label


def _group(facet: str, label: str) -> dict[str, str] | None:
    """A facet group's own filter; None for the "(none)" group (the items without a domain
    or a difficulty), which the drill-down page has no filter for: it has no links."""
    return None if label == NONE else {facet: label}


def headline_with_links(found: Mapping[str, Any], links: FigureLinks) -> dict[str, Any]:
    """The `_headline_context` of the dashboard with links: each table cell (`link`) and
    each bar of the chart (its dataset's `links`, by skill) leads to the responses of its
    judge and skill; the human ceiling's, to the skill's."""
    skills: list[str] = (found.get("headline") or {}).get("labels") or []
    rows = [
        {
            **row,
            "cells": [
                {**c, "link": links.url_if(_count(c), judge=row["label"], skill=skill)}
                for c, skill in zip(row["cells"], skills, strict=True)
            ],
        }
        for row in found.get("headline_rows") or []
    ]
    ceiling = found.get("headline_ceiling")
    charts = found.get("headline_charts")
    if charts:
        [chart] = charts["headline"]
        chart = {
            **chart,
            "datasets": [
                {**d, "links": [links.url(judge=d["label"], skill=s) for s in skills]}
                for d in chart["datasets"]
            ],
            "ceiling_links": [links.url(skill=s) for s in skills],
        }
        charts = {"headline": [chart]}
    return {
        **found,
        "headline_rows": rows,
        "headline_ceiling": [
            {**c, "link": links.url_if(_count(c), skill=skill)}
            for c, skill in zip(ceiling, skills, strict=True)
        ]
        if ceiling
        else ceiling,
        "headline_charts": charts,
    }


def _count(cell: Mapping[str, Any]) -> int:
    """A headline cell's responses: its n, or, for a headline stored before the n, one
    when it has a value."""
    n = cell.get("n")
    if n is None:
        return 1 if cell.get("value") is not None else 0
    return int(n)


def leaderboards_with_links(tables: Mapping[str, Any], links: FigureLinks) -> list[Any]:
    """The leaderboards with a `link` on each row (the system's responses of the skill)
    and on each score (the people's column: the same; a judge's: that judge's)."""
    boards = []
    for board in tables.get("leaderboards") or []:
        judges = ["", *board["judges"]]
        boards.append(
            {
                **board,
                "rows": [
                    {
                        **row,
                        "link": links.url_if(row["n"], system=row["system"], skill=board["skill"]),
                        "scores": [
                            {
                                **s,
                                "link": links.url_if(
                                    s.get("n"), system=row["system"], skill=board["skill"], judge=j
                                ),
                            }
                            for s, j in zip(row["scores"], judges, strict=True)
                        ],
                    }
                    for row in board["rows"]
                ],
            }
        )
    return boards


def _facet_link(
    links: FigureLinks, facet: str, skill: str, count: Any, judge: str, group: str
) -> str:
    own = _group(facet, group)
    return "" if own is None else links.url_if(count, skill=skill, judge=judge, **own)


def facet_charts_with_links(
    charts: Sequence[Mapping[str, Any]], facet: str, links: FigureLinks
) -> list[dict[str, Any]]:
    """The per-domain (or per-difficulty) charts with links: each bar (its dataset's
    `links`, by group) and each cell of the table under it (`links` of the row, by dataset)
    to the responses of its skill, group and judge; the row's n (`link`), to the skill's
    and group's."""
    found = []
    for chart in charts:
        skill = chart["title"]
        link = partial(_facet_link, links, facet, skill)
        found.append(
            {
                **chart,
                "datasets": [
                    {**d, "links": [link(1, _judge(d["label"]), g) for g in chart["labels"]]}
                    for d in chart["datasets"]
                ],
                "rows": [
                    {
                        **row,
                        "link": link(row["n"], "", row["label"]),
                        "links": [
                            link(count, _judge(d["label"]), row["label"])
                            for count, d in zip(row["counts"], chart["datasets"], strict=True)
                        ],
                    }
                    for row in chart["rows"]
                ],
            }
        )
    return found


def radar_charts_with_links(
    charts: Sequence[Mapping[str, Any]], links: FigureLinks
) -> list[dict[str, Any]]:
    """The skills-per-system charts with links: each point (its dataset's `links`, by skill)
    to the responses of its system, skill and judge."""
    return [
        {
            **chart,
            "datasets": [
                {
                    **d,
                    "links": [
                        links.url(system=chart["title"], skill=s, judge=_judge(d["label"]))
                        for s in chart["labels"]
                    ],
                }
                for d in chart["datasets"]
            ],
        }
        for chart in charts
    ]
