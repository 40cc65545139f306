"""The dataset upload form: files, format, and what to do with each class of problem."""

from __future__ import annotations

from django import forms

from annotation.datasets.services import POLICY_PRESETS, policies_parse
from annotation.forms import MultipleFileField
from annotation.parsers import FORMATS, PROBLEM_CLASSES


def _policy_field(code: str) -> forms.ChoiceField:
    allowed, meaning = PROBLEM_CLASSES[code]
    labels = {"reject": "reject the import", "skip": "skip the row", "accept": "accept"}
    choices = [("", "as the preset says")]
    choices += [(a, labels[a] + (f" ({meaning})" if a == "accept" else "")) for a in allowed]
    return forms.ChoiceField(choices=choices, initial="", required=False, label=code)


class DatasetUploadForm(forms.Form):
    dataset = forms.CharField(max_length=200, label="Dataset name")
    files = MultipleFileField(label="Files (JSONL or CSV)")  # type: ignore[assignment]  # a declared field (the metaclass moves it to base_fields), not BaseForm.files
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
