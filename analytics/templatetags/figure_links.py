"""`figure_link`: a figure's link to the responses behind it (analytics/report/figure_links.py),
under the page's `figure_links`; "" (no link) where the page has none or the figure rests on
no response.

    {% load figure_links %}
    {% figure_link figure_links cell.count judge=map.judge skill=map.skill as href %}
    {% if href %}<a href="{{ href }}">{{ cell.count }}</a>{% else %}{{ cell.count }}{% endif %}"""

from __future__ import annotations

from typing import Any

from django import template

from analytics.report.figure_links import FigureLinks

register = template.Library()


@register.simple_tag
def figure_link(links: Any, count: Any, **cell: Any) -> str:
    """The drill-down page of the figure whose filters are `cell`, when it rests on at
    least one response (`count` > 0)."""
    return links.url_if(count, **cell) if isinstance(links, FigureLinks) else ""
