"""Analytics pages for a project's researchers and admins (annotators 403, non-members 404).

The dashboard renders its shell (title, filters) at once; the report section, which takes a
moment with 1,000 bootstrap resamples, is the same URL requested by htmx on load and
rendered as the `report` partial of the same template."""

from __future__ import annotations

from typing import cast

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET

from analytics.report import chart_data
from analytics.report.selectors import DEFAULT_RESAMPLES, project_report
from analytics.selectors import report_rows
from annotation.access import project_get_for_staff
from flaskweb.htmx import HtmxHttpRequest

DASHBOARD = "analytics/dashboard.html"
FILTERS = ("skill", "judge", "system", "domain", "difficulty")


class ReportFilterForm(forms.Form):
    """The filters `project_report` takes, each repeatable. With `options` (the values
    present in the project's scores) anything else is refused with the field's message;
    without, names are taken as given (an unknown one matches no score) and only the
    difficulty is checked."""

    skill = forms.MultipleChoiceField(required=False)
    judge = forms.MultipleChoiceField(required=False)
    system = forms.MultipleChoiceField(required=False)
    domain = forms.MultipleChoiceField(required=False)
    difficulty = forms.TypedMultipleChoiceField(required=False, coerce=int)

    def __init__(self, data, *, options: dict[str, list] | None = None):
        super().__init__(data)
        for name in FILTERS:
            field = cast(forms.ChoiceField, self.fields[name])
            if options is not None:
                values = options[name]
            elif name == "difficulty":
                values = [1, 2, 3, 4, 5]
            else:
                values = [v for v in data.getlist(name) if len(v) <= 200]
            field.choices = [(str(v), str(v)) for v in values]
            field.widget.attrs["size"] = min(5, max(2, len(values)))

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


@require_GET
@login_required
def dashboard(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    inline = request.GET.get("inline") == "1"  # the report without htmx (no-script link)
    if request.htmx:
        # Only the shell validates names against the scores (one more read of them); a
        # name that is no longer there matches no score here, which the partial says.
        form = ReportFilterForm(request.GET)
        context = {"project": project, "form": form, **_report_context(project, form)}
        response = render(request, f"{DASHBOARD}#report", context)
    else:
        rows = report_rows(project=project)
        form = ReportFilterForm(request.GET, options=chart_data.filter_options(rows))
        context = {
            "project": project,
            "form": form,
            "has_scores": bool(rows.human or rows.judge),
            "query": request.GET.urlencode(),
            "resamples": DEFAULT_RESAMPLES,
            "inline": inline,
        }
        if inline and context["has_scores"] and form.is_valid():
            context.update(_report_context(project, form))
        response = render(request, DASHBOARD, context)
    patch_vary_headers(response, ["HX-Request"])  # one URL, two bodies
    return response


def _report_context(project, form: ReportFilterForm) -> dict:
    if not form.is_valid():
        return {}
    filters = form.report_filters()
    rows = report_rows(project=project, **filters)
    report = project_report(project=project, with_breakdowns=False, rows=rows, **filters)
    skills, judges = chart_data.report_skills(report), chart_data.judge_names(report)
    return {
        "report": report,
        "tables": chart_data.report_tables(report),
        "charts": chart_data.dashboard_charts(report, rows),
        "heatmaps": chart_data.heatmaps(rows, skills=skills, judges=judges),
        "has_rows": bool(rows.human or rows.judge),
    }
