"""The cell of a figure, and filters for figures that rest on too few data
(docs/SMALL_SAMPLES.md)."""

from __future__ import annotations

from typing import Any

from django import template
from django.contrib.humanize.templatetags.humanize import intcomma
from django.template.defaultfilters import floatformat
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from analytics.bootstrap import interval_note as _interval_note

register = template.Library()


@register.filter
def interval_note(interval: Any) -> str:
    """Why an interval is not shown ("" when it is): analytics.bootstrap.interval_note."""
    return _interval_note(interval) if isinstance(interval, dict) else ""


@register.filter
def at(values: Any, key: Any) -> Any:
    """values[key] ("" when there is no such entry: a figure that is not too few, a stored
    part made before the entry existed). For `figures.too_few|at:"pearson"`: a template's
    own lookup of a missing key raises and catches an exception per cell."""
    if isinstance(values, dict):
        return values.get(key, "")
    try:
        return values[key]
    except (IndexError, KeyError, TypeError):
        return ""


def _given(value: Any) -> bool:
    """Whether a tag argument holds something (a missing variable is "")."""
    return value is not None and value != ""


@register.simple_tag
def figure_cell(
    value: Any,
    ci: Any = None,
    *,
    too_few: Any = "",
    count: Any = None,
    n: Any = None,
    note: Any = None,
    colspan: Any = None,
    link: Any = None,
) -> SafeString:
    """One figure in a table cell (docs/SMALL_SAMPLES.md): `too_few` (its reason) shows
    "too few" and the reason in place of the number and its interval; otherwise the number
    (3 decimals), `count` in brackets, its `n`, and under it its interval ({"low", "high",
    "resamples", "items", "flags"}) or, when the interval cannot be read as shown, "no
    interval" and why (`note`, else from the interval's flags). A tag, not an included
    template: a correlation section has a thousand of these cells.

    `link`: the responses behind the figure (analytics/report/figure_links.py); the number,
    or "too few", links there."""
    if too_few:
        label = mark_safe('<span class="too-few-label">too few</span>')
        return format_html(
            '<td class="num too-few"{} title="{}: below the smallest sample this figure is '
            'shown for" data-too-few>{}<br>'
            "<small>{}</small></td>",
            format_html(' colspan="{}"', colspan) if _given(colspan) else "",
            too_few,
            format_html('<a href="{}">{}</a>', link, label) if _given(link) else label,
            str(too_few).removeprefix("too few: "),
        )
    number = floatformat(value, 3) or "—"
    parts: list[SafeString] = [
        format_html('<a href="{}">{}</a>', link, number)
        if _given(link)
        else format_html("{}", number)
    ]
    if _given(count):
        parts.append(format_html(" <small>({})</small>", count))
    if _given(n):
        parts.append(format_html(' <small class="n">n = {}</small>', intcomma(n)))
    interval = ci if isinstance(ci, dict) else {}
    why = note if _given(note) else _interval_note(interval)
    if why:
        parts.append(
            format_html(
                '<br><small class="ci no-interval" title="The 95 % bootstrap interval is not '
                'shown: {}" data-no-interval>no interval: {}</small>',
                why,
                why,
            )
        )
    elif interval.get("low") is not None and interval.get("high") is not None:
        items = interval.get("items")
        parts.append(
            format_html(
                '<br><small class="ci" title="95 % bootstrap interval ({} resamples where '
                'defined{})">[{}, {}]</small>',
                interval.get("resamples") or 0,
                f", over {items} items" if items else "",
                floatformat(interval["low"], 3),
                floatformat(interval["high"], 3),
            )
        )
    # every part was escaped by format_html
    return format_html('<td class="num">{}</td>', mark_safe("".join(parts)))
