"""The verification form: a verdict and, for an edit, the person's values; and the form that
applies verified metadata to a running campaign."""

from __future__ import annotations

from django import forms

from annotation.models import VerificationVerdict


class KeyListField(forms.Field):
    """Every value posted under the name (an item has one or more domains: checkboxes), as
    stripped non-empty strings; the catalogue check is the service's."""

    widget = forms.SelectMultiple  # reads every value of the name (QueryDict.getlist)

    def to_python(self, value) -> list[str]:
        if not value:
            return []
        if isinstance(value, str):
            value = [value]
        return [text for text in (str(v).strip() for v in value) if text]


class VerificationForm(forms.Form):
    verdict = forms.ChoiceField(choices=VerificationVerdict.choices)
    domains = KeyListField(required=False)
    skill_1 = forms.CharField(max_length=80, required=False)
    skill_2 = forms.CharField(max_length=80, required=False)
    skill_3 = forms.CharField(max_length=80, required=False)
    difficulty = forms.IntegerField(min_value=1, max_value=5, required=False)

    def edited_values(self) -> dict:
        data = self.cleaned_data
        return {
            "domains": list(dict.fromkeys(data.get("domains") or [])),
            "skills": [data[f"skill_{n}"] for n in (1, 2, 3) if data.get(f"skill_{n}")],
            "difficulty": data.get("difficulty"),
        }


class MetadataApplyForm(forms.Form):
    """The plan the researcher was shown (its fingerprint) and, when the page was narrowed
    to some items, those items."""

    plan = forms.CharField(max_length=64)
    items = KeyListField(required=False)

    def item_ids(self) -> list[int] | None:
        ids = [int(v) for v in self.cleaned_data.get("items") or [] if v.isdigit() and len(v) < 19]
        return ids or None
