"""Review forms: a campaign's review and adaptive overlap settings, and the adjudication of
one response (a value and a note per skill)."""

from __future__ import annotations

from django import forms

from annotation.models import Campaign
from annotation.review.services import MAX_ADAPTIVE_BUDGET, MAX_ADAPTIVE_EXTRA, MAX_NOTE
from annotation.selectors import TaskSkill

SPREADS = [(n, f"{n} or more apart") for n in range(1, 5)]


class ReviewSettingsForm(forms.Form):
    review_spread = forms.TypedChoiceField(
        choices=SPREADS,
        coerce=int,
        label="Review a response when its scores on a skill are",
        help_text="N/A beside a number always counts as a disagreement.",
    )
    adaptive_spread = forms.TypedChoiceField(
        choices=[("", "off"), *SPREADS],
        coerce=int,
        empty_value=None,
        required=False,
        label="Ask for one more annotation when a complete response's scores are",
    )
    adaptive_max_extra = forms.IntegerField(
        min_value=1, max_value=MAX_ADAPTIVE_EXTRA, label="At most this many extra per response"
    )
    adaptive_budget = forms.IntegerField(
        min_value=0,
        max_value=MAX_ADAPTIVE_BUDGET,
        required=False,
        label="At most this many extra in the campaign",
        help_text="Empty: no campaign-wide cap (the per-response limit still holds).",
    )

    @classmethod
    def for_campaign(cls, campaign: Campaign, data=None) -> ReviewSettingsForm:
        return cls(
            data,
            initial={
                "review_spread": campaign.review_spread,
                "adaptive_spread": campaign.adaptive_spread,
                "adaptive_max_extra": campaign.adaptive_max_extra,
                "adaptive_budget": campaign.adaptive_budget,
            },
        )


class AdjudicationForm(forms.Form):
    """`value-<skill id>` (1-5, "na" or empty: leave that skill as it is) and
    `note-<skill id>` for each skill the campaign asks of the response."""

    def __init__(self, data=None, *, skills: list[TaskSkill]):
        super().__init__(data)
        self.skills = skills
        choices = [("", "—"), *((str(v), str(v)) for v in range(1, 6)), ("na", "N/A")]
        for s in skills:
            self.fields[f"value-{s.skill_id}"] = forms.ChoiceField(choices=choices, required=False)
            self.fields[f"note-{s.skill_id}"] = forms.CharField(
                max_length=MAX_NOTE, required=False, strip=True
            )

    def clean(self):
        data = super().clean()
        if not self.errors and not any(data.get(f"value-{s.skill_id}") for s in self.skills):
            raise forms.ValidationError("Choose a score (1-5 or N) for at least one skill.")
        return data

    def chosen(self) -> list[tuple[TaskSkill, str, str]]:
        """(skill, value, note) of every skill given a value."""
        data = self.cleaned_data
        return [
            (s, data[f"value-{s.skill_id}"], data.get(f"note-{s.skill_id}") or "")
            for s in self.skills
            if data.get(f"value-{s.skill_id}")
        ]
