"""The probe form of a run page and the model families form."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms

from judging.models import JudgeRun, ProbeKind
from judging.prompts import probes as transforms


class ProbeRunForm(forms.Form):
    """A probe of a finished run: the kinds that fit the run (pointwise or pairwise), an
    optional sample size and budget, and the probe's own parameters."""

    probe = forms.ChoiceField(choices=())
    limit = forms.IntegerField(
        min_value=1,
        max_value=transforms.MAX_LIMIT,
        required=False,
        help_text="Judge only this many of the run's responses (a fixed sample); blank: all.",
    )
    share = forms.FloatField(
        min_value=0.01,
        max_value=0.99,
        required=False,
        help_text="Truncate: the share of words kept (default 0.5).",
    )
    order = forms.ChoiceField(
        choices=[("reverse", "reversed"), ("rotate", "rotated by one")], required=False
    )
    target = forms.ChoiceField(
        choices=[
            ("", "default"),
            ("unpreferred", "bandwagon: the response the run did not prefer"),
            ("1", "bandwagon: always Response 1"),
            ("2", "bandwagon: always Response 2"),
            ("challenger", "distraction: in the challenger's response"),
            ("anchor", "distraction: in the anchor's response"),
        ],
        required=False,
    )
    sentence = forms.TypedChoiceField(
        choices=[(i, s) for i, s in enumerate(transforms.DISTRACTIONS)],
        coerce=int,
        required=False,
        empty_value=None,
    )
    budget = forms.DecimalField(
        min_value=Decimal("0.000001"), max_digits=14, decimal_places=6, required=False
    )

    def __init__(self, *args: Any, run: JudgeRun, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        kinds = transforms.PAIRWISE if run.pairwise_against else transforms.POINTWISE
        labels = dict(ProbeKind.choices)
        probe = self.fields["probe"]
        assert isinstance(probe, forms.ChoiceField)
        probe.choices = [(k, labels[k]) for k in kinds]

    def params(self) -> dict[str, Any]:
        """The probe_params the chosen probe takes, from the fields filled in."""
        data = self.cleaned_data
        probe = data["probe"]
        params: dict[str, Any] = {}
        if data.get("limit"):
            params["limit"] = data["limit"]
        if probe == "truncate" and data.get("share") is not None:
            params["share"] = data["share"]
        if probe == "rubric_order" and data.get("order"):
            params["order"] = data["order"]
        if probe == "bandwagon" and data.get("target") in ("unpreferred", "1", "2"):
            params["target"] = data["target"]
        if probe == "distraction":
            if data.get("target") in ("challenger", "anchor"):
                params["target"] = data["target"]
            if data.get("sentence") is not None:
                params["sentence"] = data["sentence"]
        return params


class FamiliesForm(forms.Form):
    """One text field per system and per judge of the project: its model family."""

    def __init__(
        self,
        *args: Any,
        systems: dict[str, str],
        judges: dict[str, str],
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.systems = list(systems)
        self.judges = list(judges)
        for i, (name, family) in enumerate(systems.items()):
            self.fields[f"system_{i}"] = forms.CharField(
                label=name, initial=family, required=False, max_length=100
            )
        for i, (name, family) in enumerate(judges.items()):
            self.fields[f"judge_{i}"] = forms.CharField(
                label=name, initial=family, required=False, max_length=100
            )

    def system_fields(self) -> list[forms.BoundField]:
        return [self[f"system_{i}"] for i in range(len(self.systems))]

    def judge_fields(self) -> list[forms.BoundField]:
        return [self[f"judge_{i}"] for i in range(len(self.judges))]

    def families(self) -> tuple[dict[str, str], dict[str, str]]:
        data = self.cleaned_data
        return (
            {name: data[f"system_{i}"] for i, name in enumerate(self.systems)},
            {name: data[f"judge_{i}"] for i, name in enumerate(self.judges)},
        )
