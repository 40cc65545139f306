"""Forms of the screening page: the settings, and a training or qualification task with its
known scores (the gold-task form with screening's kinds; the tolerance follows the
campaign's agreement rule)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms

from annotation.campaigns.forms import GoldTaskForm
from annotation.models import Campaign, QualificationRule, TaskKind


class ScreeningSettingsForm(forms.Form):
    screening = forms.BooleanField(
        required=False,
        label="Screen annotators",
        help_text="Training, then a qualification test, before any real task.",
    )
    pass_percent = forms.DecimalField(
        min_value=0,
        max_value=100,
        decimal_places=1,
        label="Pass mark (%)",
        help_text="The share of known scores an annotator must match, on every skill.",
    )
    rule = forms.ChoiceField(choices=QualificationRule.choices, label="A score matches when")

    @classmethod
    def for_campaign(cls, campaign: Campaign, data=None) -> ScreeningSettingsForm:
        initial = {
            "screening": campaign.screening,
            "pass_percent": Decimal(str(round(campaign.qualification_pass_mark * 100, 1))),
            "rule": campaign.qualification_rule,
        }
        return cls(data, initial=initial)

    def screening_settings(self) -> dict[str, Any]:
        """Keyword arguments for screening_settings_update."""
        data = self.cleaned_data
        return {
            "screening": data["screening"],
            "pass_mark": float(data["pass_percent"] / 100),
            "rule": data["rule"],
        }


class ScreeningTaskForm(GoldTaskForm):
    """A response of the campaign's dataset as a training or qualification task, with its
    known score per skill (at least one) and an explanation."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        del self.fields["tolerance"]  # the campaign's rule decides (exact or within 1)
        self.fields["kind"].choices = [  # type: ignore[attr-defined]  # a ChoiceField
            (TaskKind.TRAINING, "Training (feedback after each answer)"),
            (TaskKind.QUALIFICATION, "Qualification test (no feedback)"),
        ]
        self.fields[
            "explanation"
        ].help_text = "Why these are the right scores: shown after each training answer."

    def screening_settings(self) -> dict[str, Any]:
        """Keyword arguments for screening_task_set."""
        data = self.cleaned_data
        return {
            "response": data["response"],
            "scores": data["scores"],
            "kind": data["kind"],
            "explanation": data["explanation"],
        }


class ScreeningTaskRemoveForm(forms.Form):
    task = forms.IntegerField(min_value=1, max_value=2**63 - 1)
