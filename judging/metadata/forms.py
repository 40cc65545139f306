"""The metadata run form: an LLM judge of the project and an optional budget."""

from __future__ import annotations

from decimal import Decimal

from django import forms

from judging.models import JudgeConfig, JudgeKind


class MetadataRunForm(forms.Form):
    judge = forms.ModelChoiceField(queryset=JudgeConfig.objects.none())
    budget = forms.DecimalField(
        max_digits=14,
        decimal_places=6,
        min_value=Decimal("0.000001"),
        required=False,
        help_text="Stop (pause) once this much is spent; blank: no limit.",
    )

    def __init__(self, *args, project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        judges = JudgeConfig.objects.filter(project=project, kind=JudgeKind.LLM)
        self.fields["judge"].queryset = judges  # type: ignore[attr-defined]


class MetadataRunActionForm(forms.Form):
    action = forms.ChoiceField(choices=[(a, a) for a in ("pause", "resume", "cancel")])
    budget = forms.DecimalField(
        max_digits=14,
        decimal_places=6,
        min_value=Decimal("0.000001"),
        required=False,
        help_text="On resume: a new budget (blank: no limit); a run paused by its budget "
        "needs a higher one. Left out, the run keeps its budget.",
    )
