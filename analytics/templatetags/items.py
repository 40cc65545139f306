"""`items_url`: the link from a figure to the responses behind it (the drill-down page,
docs/DRILL_DOWN.md). Every figure links through it, so one place spells the filters.

    {% load items %}
    <a href="{% items_url project.slug skill=row.skill judge=judge.name human_level=2 %}">…</a>

Empty values (None, "", an empty list) are left out; a list repeats its parameter."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import template
from django.urls import reverse

register = template.Library()


def items_query(**filters: Any) -> str:
    """The query string of a drill-down selection (without "?"), its parameters sorted."""
    pairs: list[tuple[str, str]] = []
    for name in sorted(filters):
        value = filters[name]
        values = value if isinstance(value, list | tuple) else [value]
        pairs += [(name, str(v)) for v in values if v is not None and v != ""]
    return urlencode(pairs)


@register.simple_tag
def items_url(slug: str, **filters: Any) -> str:
    """The drill-down page of project `slug` under `filters`."""
    query = items_query(**filters)
    path = reverse("analytics:items", args=[slug])
    return f"{path}?{query}" if query else path
