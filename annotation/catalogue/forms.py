"""Catalogue forms: a rubric's wording (a new version), a custom skill, a skill-set file."""

from __future__ import annotations

from django import forms
from django.conf import settings

from annotation.models import Ability


class RubricForm(forms.Form):
    criterion = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}))
    anchor_1 = forms.CharField(label="1", widget=forms.Textarea(attrs={"rows": 2}))
    anchor_2 = forms.CharField(label="2", widget=forms.Textarea(attrs={"rows": 2}))
    anchor_3 = forms.CharField(label="3", widget=forms.Textarea(attrs={"rows": 2}))
    anchor_4 = forms.CharField(label="4", widget=forms.Textarea(attrs={"rows": 2}))
    anchor_5 = forms.CharField(label="5", widget=forms.Textarea(attrs={"rows": 2}))
    note = forms.CharField(max_length=300, required=False, label="What changed")

    def anchors(self) -> list[str]:
        return [self.cleaned_data[f"anchor_{n}"] for n in range(1, 6)]


class SkillCreateForm(RubricForm):
    name = forms.CharField(max_length=100)
    ability = forms.ChoiceField(choices=Ability.choices, initial=Ability.CUSTOM)
    field_order = ["name", "ability", "criterion"]


#: The official skill-set file is 12 KB; the whole file is read into memory.
MAX_RUBRIC_FILE_BYTES = 1_000_000


class RubricImportForm(forms.Form):
    file = forms.FileField(help_text="The official FLASK skill-set JSON format.")

    def clean_file(self):
        upload = self.cleaned_data["file"]
        limit = min(MAX_RUBRIC_FILE_BYTES, settings.FLASKWEB_MAX_UPLOAD_BYTES)
        if upload.size > limit:
            raise forms.ValidationError(
                f"{upload.name} is {upload.size:,} bytes; a rubric file may have {limit:,}"
            )
        return upload
