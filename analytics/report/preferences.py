"""The preference page (docs/PREFERENCE_ANALYTICS.md): for one skill or Overall, the
win/tie/loss matrix, the Davidson strengths with their intervals (a dot-and-whisker chart
drawn here as SVG), agreement among raters and each judge against the people, from the
report snapshot of the query's filters (its "preferences" part; never computed here).

Every figure is shown with its n; below its kind's minimum (analytics.minimums) the page
says "too few" and why instead of a number with an interval, an interval is drawn only when
it holds its estimate and enough items were resampled, and the report's flags (separation,
degenerate resamples, a withheld interval) are said beside the figures they concern.

- GET /projects/SLUG/analytics/preferences/?pref_skill=NAME&filters: the page; with
  HX-Request, its body only.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET

from analytics.report import snapshots
from analytics.report.views import ReportFilterForm, project_options
from annotation.access import project_get_for_staff
from flaskweb.htmx import HtmxHttpRequest, template_for

PAGE = "analytics/report/preferences.html"
#: The strengths chart: each row's SVG (its width, height and margins); names are HTML.
CHART_WIDTH, ROW_HEIGHT, PAD = 480, 22, 12


def interval_shown(figure: dict[str, Any] | None) -> bool:
    """Whether a figure's interval is drawn: it has one (the report withholds one that does
    not hold its estimate), the figure is not below its minimum, and enough items were
    resampled (analytics.minimums; a report stored before these keys: its bounds as stored)."""
    return bool(
        figure
        and figure.get("low") is not None
        and figure.get("high") is not None
        and not figure.get("too_few")
        and not figure.get("interval_too_few")
    )


def strengths_svg(strengths: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Coordinates of the dot-and-whisker chart: one row per system (strongest first), each
    an SVG of the same width and x scale beside its name (HTML, so a name is text, never
    inside the SVG): a dot at its log-strength and a whisker over its 95% interval when it
    is shown (`interval_shown`); the x axis spans every estimate and shown interval, with 0
    (the mean log-strength) marked. None when there is nothing to draw or the strengths are
    below their minimum (the page says "too few" instead)."""
    rows = [
        (name, s)
        for name, s in strengths.items()
        if s.get("estimate") is not None and not s.get("too_few")
    ]
    if not rows:
        return None
    values = [0.0]
    for _, s in rows:
        values.append(s["estimate"])
        if interval_shown(s):
            values += [s["low"], s["high"]]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    lo, hi = lo - 0.05 * span, hi + 0.05 * span
    left, right = PAD, CHART_WIDTH - PAD

    def x(v: float) -> float:
        return round(left + (v - lo) / (hi - lo) * (right - left), 1)

    step = _tick_step(hi - lo)
    first = int(lo // step) + 1
    ticks = [round(i * step, 6) for i in range(first, int(hi // step) + 1)]
    return {
        "width": CHART_WIDTH,
        "height": ROW_HEIGHT,
        "mid": ROW_HEIGHT / 2,
        "left": left,
        "right": right,
        "zero": x(0.0),
        "rows": [
            {
                "name": name,
                "x": x(s["estimate"]),
                "low": x(s["low"]) if interval_shown(s) else None,
                "high": x(s["high"]) if interval_shown(s) else None,
                "s": s,
            }
            for name, s in rows
        ],
        "ticks": [{"x": x(t), "label": f"{t:g}"} for t in ticks],
    }


def _tick_step(span: float) -> float:
    for step in (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0):
        if span / step <= 8:
            return step
    return 20.0


def matrix_rows(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per system: against each other system its wins, ties (of them both bad)
    and losses, and its share (wins + ties / 2) / comparisons over all its comparisons."""
    models = figures["models"]
    wins, ties, bad = figures["wins"], figures["ties"], figures["both_bad"]
    out = []
    for i, name in enumerate(models):
        cells: list[dict[str, Any] | None] = []
        won = lost = tied = 0
        for j in range(len(models)):
            if i == j:
                cells.append(None)
                continue
            cells.append({"w": wins[i][j], "t": ties[i][j], "b": bad[i][j], "l": wins[j][i]})
            won, lost, tied = won + wins[i][j], lost + wins[j][i], tied + ties[i][j]
        total = won + lost + tied
        share = (won + tied / 2) / total if total else None
        out.append({"name": name, "cells": cells, "share": share, "n": total})
    return out


@require_GET
@login_required
def preferences_page(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """One skill's (the query's `pref_skill`, else Overall, else the first) preference
    figures from the latest done snapshot of the query's filters."""
    project = project_get_for_staff(request.user, slug)
    form = ReportFilterForm(request.GET, options=project_options(project))
    context: dict[str, Any] = {"project": project, "form": form}
    query = request.GET.copy()
    query.pop("pref_skill", None)
    context["dashboard_url"] = reverse("analytics:dashboard", args=[project.slug]) + (
        f"?{query.urlencode()}" if query else ""
    )
    if form.is_valid():
        params = form.snapshot_params()
        done = snapshots.snapshot_latest_done(project=project, key=snapshots.snapshot_key(params))
        context["snapshot"] = done
        if done is not None:
            report = snapshots.snapshot_part(done, "preferences") or {}
            by_skill = report.get("skills") or {}
            names = list(by_skill)
            wanted = request.GET.get("pref_skill")
            overall = report.get("overall")
            skill = (
                wanted if wanted in by_skill else overall if overall in by_skill else None
            ) or (names[0] if names else None)
            context.update(skills=names, skill=skill, prefs=report)
            if skill is not None:
                figures = by_skill[skill]
                bt = figures.get("bradley_terry") or {}
                context.update(
                    figures=figures,
                    matrix=matrix_rows(figures),
                    bt=bt,
                    svg=strengths_svg(bt.get("strengths") or {}),
                    judges=sorted((figures.get("judges") or {}).items()),
                )
    response = render(request, template_for(request, PAGE, "preferences-body"), context)
    patch_vary_headers(response, ["HX-Request"])
    return response
