"""The label planning page: its form (judge, half-width, budget, dataset, models) and the
results per skill, a partial htmx swaps (the form, and the panel on the campaign creation
page, which sends its dataset select). The project's researchers and admins (annotators 403,
non-members 404), as the dashboard."""

from __future__ import annotations

from typing import cast

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET

from analytics.planning import pilot
from analytics.planning.selectors import (
    PlanningOptions,
    label_plan_for_project,
    planning_options,
    planning_rows,
)
from annotation.access import project_get_for_staff
from flaskweb.htmx import HtmxHttpRequest, template_for

PAGE = "analytics/planning/label_planning.html"
#: Budgets past this are refused (a typo, not a plan).
MAX_BUDGET = 10_000_000


class PlanningForm(forms.Form):
    """The page's and the API's parameters, checked against the project's `options`; each
    is optional (the first judge by name, DEFAULT_HALF_WIDTH, DEFAULT_BUDGET, the whole
    project)."""

    judge = forms.ChoiceField(
        required=False,
        error_messages={
            "invalid_choice": "unknown judge %(value)s: no score of the project is by it"
        },
        help_text="the judge whose scores stand in for people's (default: the first by name)",
    )
    half_width = forms.FloatField(
        required=False,
        label="Interval half-width",
        help_text=f"the 95% interval's half-width on the 1-5 scale (default "
        f"{pilot.DEFAULT_HALF_WIDTH:g}; more than 0, at most {pilot.MAX_HALF_WIDTH:g})",
        widget=forms.NumberInput(attrs={"step": "any", "min": "0"}),
    )
    budget = forms.IntegerField(
        required=False,
        min_value=pilot.MIN_BUDGET,
        max_value=MAX_BUDGET,
        label="Budget",
        help_text=f"labeled items per system for the smallest detectable difference between "
        f"two systems (default {pilot.DEFAULT_BUDGET}; at least {pilot.MIN_BUDGET})",
        error_messages={
            "min_value": f"the budget must be at least {pilot.MIN_BUDGET} labeled items",
            "max_value": f"the budget must be at most {MAX_BUDGET:,} labeled items",
        },
    )
    dataset = forms.TypedChoiceField(
        required=False,
        coerce=int,
        empty_value=None,
        error_messages={"invalid_choice": "no dataset %(value)s in this project"},
        help_text="the dataset a campaign would cover (its id; default: every dataset)",
    )
    models = forms.MultipleChoiceField(
        required=False,
        error_messages={
            "invalid_choice": "unknown model %(value)s: no judged response of the project "
            "comes from it"
        },
        help_text="the models a campaign would cover (default: every model)",
    )

    def __init__(self, data, *, options: PlanningOptions) -> None:
        super().__init__(data)
        self.options = options
        cast(forms.ChoiceField, self.fields["judge"]).choices = [(j, j) for j in options.judges]
        cast(forms.ChoiceField, self.fields["dataset"]).choices = [("", "Every dataset")] + [
            (str(pk), name) for pk, name in options.datasets
        ]
        cast(forms.ChoiceField, self.fields["models"]).choices = [(m, m) for m in options.models]
        self.fields["models"].widget.attrs["size"] = min(6, max(2, len(options.models)))

    def clean_judge(self) -> str | None:
        return self.cleaned_data["judge"] or next(iter(self.options.judges), None)

    def clean_half_width(self) -> float:
        value = self.cleaned_data["half_width"]
        if value is None:
            return pilot.DEFAULT_HALF_WIDTH
        if not 0 < value <= pilot.MAX_HALF_WIDTH:
            raise forms.ValidationError(
                f"the half-width must be more than 0 and at most {pilot.MAX_HALF_WIDTH:g} "
                "(the width of the 1-5 scale)"
            )
        return float(value)

    def clean_budget(self) -> int:
        value = self.cleaned_data["budget"]
        return pilot.DEFAULT_BUDGET if value is None else int(value)

    def plan_params(self) -> dict:
        """The cleaned values as `label_plan_for_project`'s keyword arguments."""
        data = self.cleaned_data
        return {
            "judge": data["judge"],
            "half_width": data["half_width"],
            "budget": data["budget"],
            "dataset_id": data["dataset"],
            "models": data["models"],
        }


@require_GET
@login_required
def label_planning(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    rows = planning_rows(project=project)
    form = PlanningForm(request.GET, options=planning_options(project=project, rows=rows))
    plan = label_plan_for_project(rows=rows, **form.plan_params()) if form.is_valid() else None
    query = request.GET.copy()
    query.pop("panel", None)
    context = {
        "project": project,
        "form": form,
        "plan": plan,
        # the campaign page's panel (?panel=1) links to this page with the same settings
        "embedded": request.GET.get("panel") == "1",
        "query": query.urlencode(),
        "alpha": pilot.ALPHA,
        "power": pilot.POWER,
        "rough_below": pilot.ROUGH_BELOW,
    }
    # htmx (the form, the campaign page's panel) swaps the results only
    response = render(request, template_for(request, PAGE, "planning-results"), context)
    patch_vary_headers(response, ["HX-Request"])
    return response
