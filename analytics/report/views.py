"""Analytics pages for a project's researchers and admins (annotators 403, non-members 404).

No page computes a report: the dashboard serves the latest stored snapshot of the report its
filters ask for (analytics/report/snapshots.py), says how fresh it is, and asks a worker for
one when there is none; a refresh is one POST, deduplicated while it runs. The snapshot's
progress is a partial polled by htmx, which reloads the page when it is done.

The first view reads only the snapshot's small parts: the headline (each judge's correlation
with the people at the level and measure the query asks for, beside the human ceiling, and
the judges ranked) and the summary. Each section (agreement, correlation tables, ...) loads
when it is opened, from `report_section`, which reads only the parts it draws."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlencode

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST

from analytics.models import ReportSnapshot
from analytics.report import chart_data, figure_links, parts, snapshots
from analytics.report.selectors import DEFAULT_RESAMPLES
from annotation.access import project_get_for_staff
from annotation.models import Project
from flaskweb.htmx import HtmxHttpRequest, template_for

DASHBOARD = "analytics/dashboard.html"
STATUS = "analytics/_snapshot_status.html"
SECTION = "analytics/report_section.html"
FILTERS = ("skill", "judge", "system", "domain", "difficulty")
RESAMPLE_CHOICES = (0, 200, 1000, 2000, 10_000)
#: The parts the first view reads (analytics/report/parts.py): small whatever the judges.
REPORT_PARTS = ("summary",)
#: Query keys that choose what the page shows, not which report (never part of the key).
VIEW_KEYS = ("level", "measure", "inline", "all_judges", "heat_judge", "judge_page", "ppi_judge")
#: The correlation section's judges per page (?judge_page=N, from 1).
CORRELATION_PAGE_JUDGES = 10
LEVEL_LABELS = {"instance": "Instance", "item": "Item", "system": "System"}
MEASURE_LABELS = {"pearson": "Pearson", "spearman": "Spearman", "kendall": "Kendall τ-b"}
#: The headline chart draws the best ranked judges; its table lists the best ranked
#: HEADLINE_TABLE_JUDGES (every judge with ?all_judges=1), so the first view's time does
#: not grow with the number of judges.
HEADLINE_CHART_JUDGES = 12
HEADLINE_TABLE_JUDGES = 30


@dataclass(frozen=True)
class Section:
    title: str
    template: str
    parts: tuple[str, ...]
    charts: tuple[str, ...] = ()  # the entries of the "charts" part it draws


#: The report's sections, in page order, each loaded on demand from the parts it needs.
SECTIONS: dict[str, Section] = {
    "agreement": Section(
        "Agreement among annotators", "analytics/_report_agreement.html", ("tables",)
    ),
    "correlation": Section(
        "Human–judge correlation tables", "analytics/_report_correlation.html", ("tables",)
    ),
    "comparison": Section("Judge comparison", "analytics/_report_comparison.html", ("tables",)),
    "leaderboards": Section(
        "Leaderboards", "analytics/_report_leaderboards.html", ("tables", "charts"), ("radar",)
    ),
    "breakdowns": Section(
        "By domain and difficulty",
        "analytics/_report_facets.html",
        ("charts",),
        ("domain", "difficulty"),
    ),
    # one judge's heat maps at a time (?heat_judge=NAME; the best ranked first): the
    # section's time does not grow with the number of judges
    "heatmaps": Section("Human vs judge", "analytics/_report_heatmaps.html", ("summary",)),
    # one judge at a time too (?ppi_judge=NAME; the first by name): docs/PREDICTION_POWERED.md
    "prediction_powered": Section(
        "Prediction-powered estimates",
        "analytics/report/_prediction_powered.html",
        (parts.PREDICTION_POWERED_JUDGES,),
    ),
}


class ReportFilterForm(forms.Form):
    """The filters `project_report` takes, each repeatable, the resamples, and judge pairs
    to compare (compare_a[i] with compare_b[i]). With `options` (the values present in the
    project's scores) anything else is refused with the field's message; without, names are
    taken as given (an unknown one matches no score) and only the difficulty is checked."""

    skill = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    judge = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    system = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    domain = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    difficulty = forms.TypedMultipleChoiceField(
        required=False, coerce=int, widget=forms.CheckboxSelectMultiple
    )
    resamples = forms.TypedChoiceField(
        required=False,
        coerce=int,
        empty_value=None,
        choices=[(str(n), f"{n:,}") for n in RESAMPLE_CHOICES],
        label="Bootstrap resamples",
    )
    compare_a = forms.MultipleChoiceField(required=False, widget=forms.MultipleHiddenInput)
    compare_b = forms.MultipleChoiceField(required=False, widget=forms.MultipleHiddenInput)
    human = forms.ChoiceField(
        required=False,
        choices=[
            ("raw", "Raw (each annotator's own)"),
            ("adjudicated", "Adjudicated where reviewed"),
        ],
        label="Human scores",
    )

    def __init__(self, data, *, options: dict[str, list] | None = None):
        super().__init__(data)
        for name in (*FILTERS, "compare_a", "compare_b"):
            field = cast(forms.ChoiceField, self.fields[name])
            source = "judge" if name.startswith("compare_") else name
            if options is not None:
                values = options.get(source, [])
            elif name == "difficulty":
                values = [1, 2, 3, 4, 5]
            else:
                values = [v for v in data.getlist(name) if len(v) <= 200]
            field.choices = [(str(v), str(v)) for v in values]

    def clean(self):
        data = super().clean()
        if len(data.get("compare_a") or []) != len(data.get("compare_b") or []):
            raise forms.ValidationError("Judge pairs to compare need a judge A and a judge B each.")
        return data

    def report_filters(self) -> dict:
        """The cleaned values as `project_report` / `report_rows` keyword arguments."""
        data = self.cleaned_data
        return {
            "skills": data["skill"] or None,
            "judges": data["judge"] or None,
            "systems": data["system"] or None,
            "domains": data["domain"] or None,
            "difficulties": data["difficulty"] or None,
        }

    def snapshot_params(self) -> dict:
        data = self.cleaned_data
        resamples = data.get("resamples")
        return snapshots.snapshot_params(
            **self.report_filters(),
            resamples=DEFAULT_RESAMPLES if resamples is None else resamples,
            compare=list(zip(data["compare_a"], data["compare_b"], strict=True)),
            human_scores=data.get("human") or "raw",
        )


def project_options(project: Project) -> dict[str, list] | None:
    """The values present in the project's scores, from its latest default snapshot (None
    before there is one: names are then taken as given)."""
    default = snapshots.snapshot_latest_done(
        project=project, key=snapshots.snapshot_key(snapshots.snapshot_params())
    )
    return None if default is None else snapshots.snapshot_part(default, "options")


def _dashboard_url(project: Project, query: str = "") -> str:
    url = reverse("analytics:dashboard", args=[project.slug])
    return f"{url}?{query}" if query else url


def _query_of(form: ReportFilterForm) -> str:
    """The form's values as the dashboard's query string (for links and the refresh)."""
    return urlencode(
        [(name, value) for name in form.data for value in form.data.getlist(name)],  # type: ignore[attr-defined]
        doseq=False,
    )


def _applied(query) -> list[tuple[str, str]]:
    """The query's (name, value) pairs that choose the report (not the view keys): the
    hidden inputs that htmx requests and the section forms send."""
    return [(k, v) for k, values in query.lists() if k not in VIEW_KEYS for v in values]


def _filter_query(query) -> str:
    """The query string without the keys that only choose the view (level, measure, inline):
    what the sections and the level links carry."""
    kept = query.copy()
    for name in VIEW_KEYS:
        kept.pop(name, None)
    return kept.urlencode()


def headline_choice(query) -> tuple[str, str]:
    """The level and measure the query asks for; the defaults (instance, Pearson) for
    anything else: they only choose among stored figures."""
    level, measure = query.get("level"), query.get("measure")
    return (
        level if level in chart_data.LEVELS else "instance",
        measure if measure in chart_data.MEASURES else "pearson",
    )


def _headline_links(project: Project, query, level: str, measure: str) -> dict:
    """The level and coefficient links: `url` for the address bar (filters included), `vals`
    for htmx, which sends them with the applied filters (#applied-filters): names from the
    data stay out of hx-* attributes."""
    base = _filter_query(query)

    def link(label: str, lv: str, ms: str, current: bool) -> dict:
        extra = urlencode({"level": lv, "measure": ms})
        return {
            "label": label,
            "url": _dashboard_url(project, f"{base}&{extra}" if base else extra),
            "vals": json.dumps({"level": lv, "measure": ms}),
            "current": current,
        }

    return {
        "levels": [link(lb, lv, measure, lv == level) for lv, lb in LEVEL_LABELS.items()],
        "measures": [link(lb, level, ms, ms == measure) for ms, lb in MEASURE_LABELS.items()],
    }


@require_GET
@login_required
def dashboard(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    options = project_options(project)
    form = ReportFilterForm(request.GET, options=options)
    level, measure = headline_choice(request.GET)
    filter_query = _filter_query(request.GET)
    context: dict = {
        "project": project,
        "form": form,
        "query": request.GET.urlencode(),
        "filter_query": filter_query,
        "default_resamples": DEFAULT_RESAMPLES,
        "level": level,
        "measure": measure,
        "level_label": LEVEL_LABELS[level],
        "measure_label": MEASURE_LABELS[measure],
        "links": _headline_links(project, request.GET, level, measure),
        "applied": _applied(request.GET),
        "sections": [
            {
                "name": name,
                "title": section.title,
                "url": _section_url(project, name, filter_query),
                "path": _section_url(project, name, ""),
            }
            for name, section in SECTIONS.items()
        ],
        "inline": request.GET.get("inline") == "1",
    }
    if form.is_valid():
        context.update(_snapshot_context(request, project, form))
    # htmx (the level and measure links) swaps the report region only
    response = render(request, template_for(request, DASHBOARD, "report-region"), context)
    if request.htmx:  # the address bar shows what the links would have opened
        response["HX-Push-Url"] = request.get_full_path()
    patch_vary_headers(response, ["HX-Request"])
    return response


def _section_url(project: Project, name: str, query: str) -> str:
    url = reverse("analytics:report-section", args=[project.slug, name])
    return f"{url}?{query}" if query else url


def _snapshot_context(request, project: Project, form: ReportFilterForm) -> dict:
    params = form.snapshot_params()
    key = snapshots.snapshot_key(params)
    done = snapshots.snapshot_latest_done(project=project, key=key)
    in_flight = snapshots.snapshot_in_flight(project=project, key=key)
    failed = snapshots.snapshot_last_failed(project=project, key=key)
    refused = ""
    # asked for on the first view; after a failure only by the button (no retry loop)
    if done is None and in_flight is None and failed is None:
        try:
            in_flight, _ = snapshots.snapshot_request(
                project=project,
                params=params,
                user=request.user,
                reason="default" if snapshots.params_are_default(params) else "requested",
            )
        except snapshots.SnapshotRefused as exc:
            refused = str(exc)
    context: dict = {
        "snapshot": done,
        "in_flight": in_flight,
        "failed": failed,
        "refused": refused,
        "params": params,
    }
    if done is not None:
        context["changes"] = snapshots.snapshot_freshness(project=project, snapshot=done)
        for name in REPORT_PARTS:
            context[name] = snapshots.snapshot_part(done, name)
        summary = context["summary"] or {}
        context["has_rows"] = summary.get("has_rows", False)
        context["resamples"] = summary.get("resamples", 0)
        level, measure = headline_choice(request.GET)
        stored = snapshots.snapshot_part(done, parts.headline_part(level, measure))
        every = request.GET.get("all_judges") == "1"
        back = request.get_full_path()
        context.update(
            figure_links.headline_with_links(
                _headline_context(stored, level, measure, every=every),
                _figure_links(project, form, f"{back}#headline"),
            )
        )
        if context.get("headline_table_hidden"):
            context["all_judges_url"] = _dashboard_url(
                project, f"{request.GET.urlencode()}&all_judges=1"
            )
        if request.GET.get("inline") == "1":  # every section in the page, for no-script readers
            loaded: dict = {}
            context["inline_sections"] = [
                {
                    "title": SECTIONS[name].title,
                    **_section_context(
                        done,
                        name,
                        loaded,
                        request.GET,
                        links=_figure_links(project, form, f"{back}#{name}"),
                    ),
                }
                for name in SECTIONS
            ]
    return context


def _headline_context(stored: dict | None, level: str, measure: str, *, every: bool) -> dict:
    """The stored headline of `level` and `measure`, and the chart's data: the best ranked
    HEADLINE_CHART_JUDGES judges; the table's, the best ranked HEADLINE_TABLE_JUDGES (all
    with `every`)."""
    found = stored
    if not found or not found["judges"]:
        return {"headline": found}
    shown = found["judges"][:HEADLINE_CHART_JUDGES]
    listed = found["judges"] if every else found["judges"][:HEADLINE_TABLE_JUDGES]
    ceiling = found.get("ceiling")
    chart = {
        "level": level,
        "title": f"{LEVEL_LABELS[level]}-level {MEASURE_LABELS[measure]}",
        "labels": found["labels"],
        # a figure on too few data is not drawn (its cell in the table says why)
        "datasets": [
            {
                "label": j["label"],
                "data": _drawn(j["data"], j.get("too_few")),
                "errors": j["errors"],
            }
            for j in shown
        ],
        "ceiling": _drawn(ceiling, found.get("ceiling_too_few")) if ceiling else ceiling,
        "ceiling_errors": found["ceiling_errors"],
    }
    return {
        "headline": found,
        "headline_charts": {"headline": [chart]},
        # nothing to draw when every figure is too few: the table says why
        "headline_drawn": any(
            v is not None
            for values in [*(d["data"] for d in chart["datasets"]), chart["ceiling"] or []]
            for v in values
        ),
        "headline_shown": len(shown),
        "headline_hidden": len(found["judges"]) - len(shown),
        "headline_rows": [
            {
                **j,
                "cells": _cells(
                    j["data"], j["errors"], j.get("n"), j.get("too_few"), j.get("notes")
                ),
            }
            for j in listed
        ],
        "headline_table_hidden": len(found["judges"]) - len(listed),
        "headline_ceiling": (
            _cells(
                ceiling,
                found["ceiling_errors"] or [],
                found.get("ceiling_n"),
                found.get("ceiling_too_few"),
                found.get("ceiling_notes"),
            )
            if ceiling
            else None
        ),
    }


def _drawn(values: list, too_few: list | None) -> list:
    """The values a chart draws: None where the figure is too few."""
    return [
        None if few else v for v, few in zip(values, too_few or [""] * len(values), strict=True)
    ]


def _cells(
    values: list,
    errors: list,
    sizes: list | None = None,
    too_few: list | None = None,
    notes: list | None = None,
) -> list[dict]:
    """Values with their [low, high] intervals as the table's cells ({"value", "ci", "n",
    "too_few", "note"}: docs/SMALL_SAMPLES.md; a headline stored before the flags has
    none of them)."""
    count = len(values)
    return [
        {
            "value": v,
            "ci": {"low": e[0], "high": e[1]} if e else None,
            "n": n,
            "too_few": few,
            "note": note,
        }
        for v, e, n, few, note in zip(
            values,
            errors or [None] * count,
            sizes or [None] * count,
            too_few or [""] * count,
            notes or [""] * count,
            strict=True,
        )
    ]


def _figure_links(project: Project, form: ReportFilterForm, back: str) -> figure_links.FigureLinks:
    """The links of the figures of the report of `form`'s filters, back to `back`."""
    return figure_links.figure_links(
        project_slug=project.slug, filters=form.cleaned_data, back=back
    )


def _figure_back(request: HtmxHttpRequest, project: Project, name: str, query: str) -> str:
    """Where the drill-down page of a figure of section `name` leads back to: the section's
    own page, or, when the section was loaded into the dashboard, the dashboard (the
    address it shows, with its level and measure) at the section, which it then opens."""
    if not request.htmx:
        return request.get_full_path()
    shown = (request.htmx.current_url_abs_path or "").split("#")[0]
    path = shown.split("?")[0]
    if path == _section_url(project, name, ""):  # a chooser on the section's own page
        return shown
    if path != _dashboard_url(project):
        shown = _dashboard_url(project, query)
    return f"{shown}#{name}"


def _section_context(
    snapshot: ReportSnapshot,
    name: str,
    loaded: dict | None = None,
    query=None,
    *,
    links: figure_links.FigureLinks | None = None,
) -> dict:
    """What section `name`'s template reads, from only the parts it needs (`loaded`: parts
    read already, for a page of several sections; `query`: the request's, for the heat
    maps' judge; `links`: the figures' links to their responses)."""
    section = SECTIONS[name]
    loaded = {} if loaded is None else loaded
    for part in section.parts:
        if part not in loaded:
            loaded[part] = snapshots.snapshot_part(snapshot, part)
    found = {part: loaded[part] for part in section.parts}
    if "charts" in found:
        charts = found["charts"] or {}
        found["charts"] = {kind: charts.get(kind, []) for kind in section.charts}
        if links is not None:
            found["charts"] = {
                kind: figure_links.radar_charts_with_links(figures, links)
                if kind == "radar"
                else figure_links.facet_charts_with_links(figures, kind, links)
                for kind, figures in found["charts"].items()
            }
    if name == "leaderboards" and links is not None:
        tables = found["tables"] or {}
        found["tables"] = {
            **tables,
            "leaderboards": figure_links.leaderboards_with_links(tables, links),
        }
    if name == "heatmaps":
        found.update(_heatmaps_context(snapshot, found.pop("summary") or {}, query))
    if name == "correlation":
        found.update(_judge_page(found["tables"] or {}, query))
    if name == "prediction_powered":
        judges = found.pop(parts.PREDICTION_POWERED_JUDGES)
        found["ppi"] = prediction_powered_context(snapshot, judges, (query or {}).get("ppi_judge"))
    return {
        **found,
        "section": name,
        "section_template": section.template,
        "chart_source": f"charts-{name}",
        "figure_links": links,
    }


def _judge_page(tables: dict, query) -> dict:
    """The correlation tables of one page of CORRELATION_PAGE_JUDGES judges (the query's
    `judge_page`, from 1), and the pages there are."""
    judges = tables.get("correlation") or []
    pages = max(1, -(-len(judges) // CORRELATION_PAGE_JUDGES))
    try:
        page = min(max(1, int((query or {}).get("judge_page", 1))), pages)
    except (TypeError, ValueError):
        page = 1
    start = (page - 1) * CORRELATION_PAGE_JUDGES
    return {
        "tables": {**tables, "correlation": judges[start : start + CORRELATION_PAGE_JUDGES]},
        "judge_page": page,
        "judge_pages": list(range(1, pages + 1)) if pages > 1 else [],
        "judges_total": len(judges),
        "judge_first": start + 1,
        "judge_last": min(start + CORRELATION_PAGE_JUDGES, len(judges)),
    }


def prediction_powered_context(
    snapshot: ReportSnapshot, judges: list[str] | None, wanted: str | None
) -> dict:
    """One judge's prediction-powered figures laid out per skill (`wanted` when the report
    has it, else the first by name), and the judges to choose from: {"judges", "judge",
    "skills"}; {"missing": True} for a snapshot made before these figures existed."""
    if judges is None:
        return {"missing": True}
    index = judges.index(wanted) if wanted in judges else 0
    stored = (
        snapshots.snapshot_part(snapshot, parts.prediction_powered_part(index)) if judges else None
    )
    return {
        "judges": [{"name": j, "current": i == index} for i, j in enumerate(judges)],
        "judge": judges[index] if judges else None,
        "skills": chart_data.prediction_powered_skills(stored),
    }


def _heatmaps_context(snapshot: ReportSnapshot, summary: dict, query) -> dict:
    """The heat maps of one judge (the query's `heat_judge`, else the first in the
    summary's order) and the judges to choose from."""
    judges = summary.get("judges") or []
    wanted = (query or {}).get("heat_judge")
    index = judges.index(wanted) if wanted in judges else 0
    maps = snapshots.snapshot_part(snapshot, parts.heatmap_part(index)) if judges else None
    return {
        "heatmaps": maps or [],
        "heat_judges": [{"name": j, "current": i == index} for i, j in enumerate(judges)],
        "heat_judge": judges[index] if judges else None,
    }


@require_GET
@login_required
def report_section(request: HtmxHttpRequest, slug: str, name: str) -> HttpResponse:
    """One section of the report of the query's filters, from the latest done snapshot (never
    computed here): the dashboard loads it by htmx when it is opened; without htmx it is a
    page of its own."""
    project = project_get_for_staff(request.user, slug)
    if name not in SECTIONS:
        raise Http404("no such section of the report")
    form = ReportFilterForm(request.GET, options=project_options(project))
    filter_query = _filter_query(request.GET)
    context: dict = {
        "project": project,
        "form": form,
        "section": name,
        "title": SECTIONS[name].title,
        "dashboard_url": _dashboard_url(project, filter_query),
    }
    if form.is_valid():
        params = form.snapshot_params()
        done = snapshots.snapshot_latest_done(project=project, key=snapshots.snapshot_key(params))
        context["snapshot"] = done
        if done is not None:
            back = _figure_back(request, project, name, filter_query)
            links = _figure_links(project, form, back)
            context.update(_section_context(done, name, query=request.GET, links=links))
            context["section_path"] = _section_url(project, name, "")
            context["applied"] = _applied(request.GET)
    response = render(request, template_for(request, SECTION, "section"), context)
    patch_vary_headers(response, ["HX-Request"])
    return response


@require_POST
@login_required
def report_refresh(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Ask for the report of the posted filters again (deduplicated while one computes)."""
    project = project_get_for_staff(request.user, slug)
    form = ReportFilterForm(request.POST, options=project_options(project))
    query = _query_of(form)
    if not form.is_valid():
        return redirect(_dashboard_url(project, query))
    try:
        snapshot, _created = snapshots.snapshot_request(
            project=project, params=form.snapshot_params(), user=request.user
        )
    except snapshots.SnapshotRefused as exc:
        if request.htmx:
            return render(request, STATUS, {"project": project, "refused": str(exc)}, status=429)
        return redirect(_dashboard_url(project, query))
    if request.htmx:
        return render(request, STATUS, {"project": project, "in_flight": snapshot})
    return redirect(_dashboard_url(project, query))


@require_GET
@login_required
def snapshot_status(request: HtmxHttpRequest, slug: str, snapshot_id: int) -> HttpResponse:
    """A snapshot's progress (polled by htmx every second while it computes). Once it is
    done the page reloads to show it (HX-Refresh); a failure is said with its error."""
    project = project_get_for_staff(request.user, slug)
    snapshot: ReportSnapshot | None = snapshots.snapshot_get(
        project=project, snapshot_id=snapshot_id
    )
    if snapshot is None:
        raise Http404("no such report snapshot")
    if snapshot.status == "done" and request.htmx:
        response = HttpResponse("")
        response["HX-Refresh"] = "true"
        return response
    context = {"project": project, "in_flight": snapshot if snapshot.is_in_flight else None}
    if snapshot.status == "failed":
        context["failed"] = snapshot
    return render(request, STATUS, context)
