"""The verification form: a verdict and, for an edit, the person's values."""

from __future__ import annotations

from django import forms

from annotation.models import VerificationVerdict


class VerificationForm(forms.Form):
    verdict = forms.ChoiceField(choices=VerificationVerdict.choices)
    domain = forms.CharField(max_length=80, required=False)
    skill_1 = forms.CharField(max_length=80, required=False)
    skill_2 = forms.CharField(max_length=80, required=False)
    skill_3 = forms.CharField(max_length=80, required=False)
    difficulty = forms.IntegerField(min_value=1, max_value=5, required=False)

    def edited_values(self) -> dict:
        data = self.cleaned_data
        return {
            "domains": [data["domain"]] if data.get("domain") else [],
            "skills": [data[f"skill_{n}"] for n in (1, 2, 3) if data.get(f"skill_{n}")],
            "difficulty": data.get("difficulty"),
        }
