"""Forms of the campaign's Languages page (staff) and of the annotators' language picker."""

from __future__ import annotations

from django import forms

from annotation.languages.selectors import LEVELS, language_names, site_languages
from annotation.languages.services import MAX_ANCHOR, MAX_TEXT


class LanguagePickForm(forms.Form):
    """The picker: a code of LANGUAGES (whether the campaign offers it is the view's check),
    the campaign in view (none: a page without one) and the page to go back to."""

    language = forms.CharField(max_length=10)
    campaign = forms.IntegerField(required=False, min_value=1, max_value=2**63 - 1)
    next = forms.CharField(max_length=2000, required=False)


class CampaignLanguageForm(forms.Form):
    language = forms.ChoiceField(
        required=False,
        label="Language of the campaign's own texts",
        help_text="Empty: the site's default language, and each annotator's page follows "
        "their browser among the languages this campaign has texts in.",
    )
    completion_message = forms.CharField(
        required=False,
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Completion message",
        help_text="Shown on the study's finish page, above the completion code.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        names = language_names()
        self.fields["language"].choices = [("", "Follow the browser")] + [
            (code, f"{names[code]} ({code})") for code in site_languages()
        ]


class TranslationForm(forms.Form):
    """A campaign's texts in one language: the three texts, and five anchors per skill of
    the campaign (all five, or none to keep the rubric's own)."""

    consent_text = forms.CharField(
        required=False, max_length=MAX_TEXT, widget=forms.Textarea(attrs={"rows": 5})
    )
    instructions = forms.CharField(
        required=False, max_length=MAX_TEXT, widget=forms.Textarea(attrs={"rows": 5})
    )
    completion_message = forms.CharField(
        required=False, max_length=MAX_TEXT, widget=forms.Textarea(attrs={"rows": 3})
    )

    def __init__(self, *args, skills: dict[str, str], language: str = "", **kwargs):
        super().__init__(*args, **kwargs)
        self.skills = skills
        for key, name in skills.items():
            for level in range(1, LEVELS + 1):
                self.fields[self.anchor_field(key, level)] = forms.CharField(
                    required=False,
                    max_length=MAX_ANCHOR,
                    label=f"{name}: level {level}",
                )
        if language:  # typed in that language (and direction)
            for field in self.fields.values():
                field.widget.attrs.update(lang=language, dir="auto")

    @staticmethod
    def anchor_field(key: str, level: int) -> str:
        return f"anchor__{key}__{level}"

    def skill_rows(self) -> list[tuple[str, str, list]]:
        """(key, name, its five bound fields) per skill, for the template."""
        return [
            (key, name, [self[self.anchor_field(key, n)] for n in range(1, LEVELS + 1)])
            for key, name in self.skills.items()
        ]

    def anchors(self) -> dict[str, list[str]]:
        """skill key -> its anchors as typed, for the skills with any anchor given (the
        service refuses fewer than five)."""
        data = self.cleaned_data
        result = {}
        for key in self.skills:
            levels = [data.get(self.anchor_field(key, n), "") for n in range(1, LEVELS + 1)]
            if any(v.strip() for v in levels):
                result[key] = levels
        return result

    @classmethod
    def initial_for(cls, texts: dict, anchors: dict[str, list[str]]) -> dict:
        initial = dict(texts)
        for key, levels in anchors.items():
            for n, value in enumerate(levels, 1):
                initial[cls.anchor_field(key, n)] = value
        return initial
