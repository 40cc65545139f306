"""Forms of the active selection page: they validate and translate input into service
arguments; analytics/active/services.py decides and writes."""

from __future__ import annotations

from typing import Any

from django import forms

from analytics.models import SelectionPlan, SelectionSource
from judging.models import JudgeRun

MAX_INT = 2**31 - 1


class PlanSettingsForm(forms.Form):
    """What a plan may change for later batches (and is set when it is made)."""

    source = forms.ChoiceField(
        choices=SelectionSource.choices,
        initial=SelectionSource.CALIBRATION,
        widget=forms.RadioSelect,
        label="Uncertainty from",
    )
    budget = forms.IntegerField(
        min_value=1,
        max_value=MAX_INT,
        label="Budget (responses for people)",
        help_text="How many responses people score in all, in expectation.",
    )
    batch_size = forms.IntegerField(
        min_value=1,
        max_value=MAX_INT,
        label="Batch size",
        help_text="Responses decided per batch; calibration is refitted before each batch.",
    )
    uniform_percent = forms.DecimalField(
        min_value=1,
        max_value=100,
        decimal_places=1,
        initial=20,
        label="Uniform share (%)",
        help_text="Part of each probability spread evenly: every response keeps a chance "
        "to be drawn, which bounds the weights.",
    )

    def __init__(self, *args, plan: SelectionPlan | None = None, **kwargs) -> None:
        if plan is not None:
            kwargs.setdefault(
                "initial",
                {
                    "source": plan.source,
                    "budget": plan.budget,
                    "batch_size": plan.batch_size,
                    "uniform_percent": round(plan.uniform_share * 100, 1),
                },
            )
        super().__init__(*args, **kwargs)

    def plan_settings(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "source": data["source"],
            "budget": data["budget"],
            "batch_size": data["batch_size"],
            "uniform_share": float(data["uniform_percent"]) / 100,
        }


class PlanCreateForm(PlanSettingsForm):
    """Make a plan: the settings, the finished runs it reads, and an optional seed."""

    runs = forms.TypedMultipleChoiceField(
        coerce=int,
        widget=forms.CheckboxSelectMultiple,
        label="Finished judge runs",
        help_text="Spread reads one run's samples; judges compares two runs or more; "
        "calibration reads their mean score.",
    )
    seed = forms.IntegerField(
        min_value=0,
        max_value=2**62,
        required=False,
        help_text="Empty: drawn at random (recorded with the plan).",
    )

    field_order = ["runs", "source", "budget", "batch_size", "uniform_percent", "seed"]

    def __init__(self, *args, runs: list[JudgeRun], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["runs"].choices = [  # type: ignore[attr-defined]  # a ChoiceField
            (run.pk, f"{run.judge.name} · run {run.pk}") for run in runs
        ]

    def plan_settings(self) -> dict[str, Any]:
        return {
            **super().plan_settings(),
            "run_ids": list(self.cleaned_data["runs"]),
            "seed": self.cleaned_data["seed"],
        }


class DrawForm(forms.Form):
    """The batch the page offered to draw: a second post of the same number finds it drawn."""

    batch = forms.IntegerField(min_value=1, max_value=MAX_INT)
