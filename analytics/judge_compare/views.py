"""The judge comparison page (docs/JUDGE_COMPARISON.md):
GET /projects/SLUG/analytics/judges/compare/?judge=A&judge=B&baseline=A&measure=&skill=&resamples=
The form (judges as checkboxes) refreshes the results below it through htmx; without
parameters the page shows only the form. The project's researchers and admins (annotators
403, non-members 404), as the dashboard."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, cast

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET

from analytics import minimums
from analytics.judge_compare import figures
from analytics.judge_compare.selectors import (
    DEFAULT_RESAMPLES,
    MAX_RESAMPLES,
    CompareOptions,
    compare_options,
    compare_rows,
    judge_comparison_for_project,
)
from annotation.access import project_get_for_staff
from flaskweb.htmx import HtmxHttpRequest, template_for

PAGE = "analytics/judge_compare/compare.html"


class CompareForm(forms.Form):
    """The page's and the API's parameters, checked against the project's `options`."""

    judge = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        error_messages={
            "invalid_choice": "unknown judge %(value)s: no score of the project is by it"
        },
        help_text=f"the judges to compare, by name (repeat the parameter: 2 to "
        f"{figures.MAX_JUDGES})",
    )
    baseline = forms.ChoiceField(
        required=False,
        error_messages={
            "invalid_choice": "unknown judge %(value)s: no score of the project is by it"
        },
        help_text="one of the chosen judges: each other judge is compared with it (default: "
        "every two judges are compared)",
    )
    measure = forms.ChoiceField(
        required=False,
        choices=[(m, figures.MEASURE_LABELS[m]) for m in figures.MEASURES],
        help_text="the correlation with the people, as the report gives it (default: pearson)",
    )
    skill = forms.ChoiceField(
        required=False,
        label="Quality",
        error_messages={
            "invalid_choice": "unknown skill %(value)s: no chosen judge and no person scored it"
        },
        help_text="the skill the quality axis reads (default: the mean over skills)",
    )
    resamples = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_RESAMPLES,
        label="Bootstrap resamples",
        error_messages={
            "min_value": "resamples must be 0 (no intervals) or more",
            "max_value": f"resamples must be at most {MAX_RESAMPLES:,}",
        },
        help_text=f"bootstrap resamples over items (default {DEFAULT_RESAMPLES:,}; 0: no "
        f"intervals; at most {MAX_RESAMPLES:,})",
        widget=forms.NumberInput(attrs={"min": "0", "max": str(MAX_RESAMPLES), "step": "100"}),
    )

    def __init__(self, data, *, options: CompareOptions) -> None:
        super().__init__(data)
        self.options = options
        judges = [(j, j) for j in options.judges]
        cast(forms.ChoiceField, self.fields["judge"]).choices = judges
        cast(forms.ChoiceField, self.fields["baseline"]).choices = [
            ("", "None: every two judges")
        ] + judges
        cast(forms.ChoiceField, self.fields["skill"]).choices = [("", "Mean over skills")] + [
            (s, s) for s in options.skills
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        judges = list(dict.fromkeys(data.get("judge") or []))
        if "judge" in data:
            if len(judges) < 2:
                self.add_error("judge", "choose at least 2 judges to compare")
            elif len(judges) > figures.MAX_JUDGES:
                self.add_error("judge", f"choose at most {figures.MAX_JUDGES} judges at once")
        baseline = data.get("baseline") or None
        if baseline and "judge" in data and baseline not in judges:
            self.add_error("baseline", f"the baseline {baseline} is not one of the chosen judges")
        data["judge"] = judges
        return data

    def compare_params(self) -> dict[str, Any]:
        """The cleaned values as `judge_comparison_for_project`'s keyword arguments."""
        data = self.cleaned_data
        return {
            "judges": data["judge"],
            "baseline": data.get("baseline") or None,
            "measure": data.get("measure") or "pearson",
            "resamples": DEFAULT_RESAMPLES if data.get("resamples") is None else data["resamples"],
            "quality_skill": data.get("skill") or None,
        }


def page_context(result: dict[str, Any]) -> dict[str, Any]:
    """The comparison laid out for the template: pairs per skill, the quality rows with
    their chart, the ranking per judge."""
    pairs: dict[str, list[dict]] = defaultdict(list)
    for pair in result["pairs"]:
        pairs[pair["skill"]].append(pair)
    ranking: dict[str, list[dict]] = defaultdict(list)
    for row in result["ranking"]:
        ranking[row["judge"]].append(row)
    return {
        "pairs_by_skill": list(pairs.items()),
        "chart": figures.pareto_chart(result["quality"]),
        "ranking_by_judge": list(ranking.items()),
        "measure_label": figures.MEASURE_LABELS[result["measure"]],
        "correlation_minimum": minimums.minimum("correlation"),
        "ranking_minimum": minimums.minimum("ranking"),
    }


@require_GET
@login_required
def judge_compare(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    rows = compare_rows(project=project)
    options = compare_options(rows=rows)
    form = CompareForm(request.GET or None, options=options)
    context: dict[str, Any] = {
        "project": project,
        "form": form,
        "options": options,
        "max_judges": figures.MAX_JUDGES,
    }
    if form.is_valid():
        result = judge_comparison_for_project(project=project, rows=rows, **form.compare_params())
        context["result"] = result
        context.update(page_context(result))
    # htmx (the form) swaps the results only
    response = render(request, template_for(request, PAGE, "compare-results"), context)
    patch_vary_headers(response, ["HX-Request"])
    return response
