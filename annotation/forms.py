from __future__ import annotations

from django import forms
from django.conf import settings

from annotation.models import Ability, ProjectRole
from annotation.parsers import FORMATS, PROBLEM_CLASSES
from annotation.services.imports import POLICY_PRESETS, policies_parse


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, command: str = "import_dataset", **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        self.command = command  # named in the error for files over the upload limit
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        files = data if isinstance(data, (list, tuple)) else [data]
        cleaned = [single(f, initial) for f in files if f]
        if not cleaned and self.required:
            raise forms.ValidationError("choose at least one file")
        limit = settings.FLASKWEB_MAX_UPLOAD_BYTES  # all files of the request together
        total = sum(f.size for f in cleaned)
        if total > limit:
            what = (
                f"{cleaned[0].name} is {total:,} bytes"
                if len(cleaned) == 1
                else f"the {len(cleaned)} files are {total:,} bytes together"
            )
            raise forms.ValidationError(
                f"{what}; the limit is {limit:,} bytes "
                f"(use the {self.command} command for larger files)"
            )
        return cleaned


def _policy_field(code: str) -> forms.ChoiceField:
    allowed, meaning = PROBLEM_CLASSES[code]
    labels = {"reject": "reject the import", "skip": "skip the row", "accept": "accept"}
    choices = [("", "as the preset says")]
    choices += [(a, labels[a] + (f" ({meaning})" if a == "accept" else "")) for a in allowed]
    return forms.ChoiceField(choices=choices, initial="", required=False, label=code)


class DatasetUploadForm(forms.Form):
    dataset = forms.CharField(max_length=200, label="Dataset name")
    files = MultipleFileField(label="Files (JSONL or CSV)")
    format = forms.ChoiceField(choices=[("", "detect")] + [(f, f) for f in FORMATS], required=False)
    preset = forms.ChoiceField(
        choices=[(k, f"{k}: {v[0]}") for k, v in POLICY_PRESETS.items()],
        initial="strict",
        required=False,
        label="Problem handling",
    )
    model_name = forms.CharField(
        max_length=200,
        required=False,
        help_text="Model of a single model-output file (default: from the file name).",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for code, (allowed, _) in PROBLEM_CLASSES.items():
            if len(allowed) > 1:
                self.fields[f"on_{code}"] = _policy_field(code)

    def policy_fields(self):
        return [self[name] for name in self.fields if name.startswith("on_")]

    def policies(self) -> dict[str, str]:
        """The preset's policies, overridden by every class set explicitly."""
        overrides = {
            name[3:]: value
            for name, value in self.cleaned_data.items()
            if name.startswith("on_") and value
        }
        return policies_parse(overrides, preset=self.cleaned_data["preset"] or "strict")


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


class MemberAddForm(forms.Form):
    """Add an existing, active user to a project (users are made by site admins; whether
    the username can be added is membership_add_by_username's answer)."""

    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=ProjectRole.choices, initial=ProjectRole.ANNOTATOR)


class MemberChangeForm(forms.Form):
    """A new role for a member, or (remove ticked) the end of the membership."""

    role = forms.ChoiceField(choices=ProjectRole.choices, required=False)
    remove = forms.BooleanField(required=False)

    def clean(self):
        data = super().clean()
        if not data.get("remove") and not data.get("role"):
            raise forms.ValidationError("choose a role, or remove the member")
        return data
