"""The forms of the score and preference upload pages (analytics/imports/views.py)."""

from __future__ import annotations

from django import forms
from django.conf import settings

from analytics.imports.preferences import MAX_BYTES
from analytics.imports.services import DEFAULT_DATASET
from annotation.forms import MultipleFileField


class ScoreImportForm(forms.Form):
    # the metaclass moves declared fields off the class, so BaseForm.files is unshadowed
    files = MultipleFileField(  # type: ignore[assignment]
        label="Files (CSV or JSONL, one row per score)", command="import_scores"
    )
    dataset = forms.CharField(
        max_length=200,
        required=False,
        initial=DEFAULT_DATASET,
        help_text="The dataset whose items the rows score; created if missing.",
    )
    scales = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "Factuality=0:1:continuous"}),
        help_text="One SKILL=MIN:MAX[:continuous] per line (SKILL * = every skill). "
        "Default: integers 1 to 5.",
    )
    judge_scale = forms.ChoiceField(
        choices=[
            ("skill", "judges score on the skill's scale"),
            ("raw", "judge rows hold their own values (a metric, a probability)"),
        ],
        initial="skill",
        required=False,
    )

    def scale_specs(self) -> list[str]:
        return [line.strip() for line in self.cleaned_data["scales"].splitlines() if line.strip()]


def preference_upload_limit() -> int:
    """The bytes a preference file uploaded on the page or the API may hold: the site's
    upload limit, and at most what the importer reads (it holds the rows in memory)."""
    return min(settings.FLASKWEB_MAX_UPLOAD_BYTES, MAX_BYTES)


class PreferenceImportForm(forms.Form):
    file = forms.FileField(
        label="File (CSV or JSONL, one row per label)",
        help_text="The columns of the preference export: item, model_a, model_b, rater, choice; "
        "optionally dataset, campaign, shown_order, skill, strength, rationale, time_on_task_ms.",
    )
    dataset = forms.CharField(
        max_length=200,
        required=False,
        help_text="The dataset of rows whose dataset column is empty (it must exist).",
    )
    format = forms.ChoiceField(
        choices=[("", "from the file name"), ("csv", "CSV"), ("jsonl", "JSON Lines")],
        required=False,
    )

    def clean_file(self):
        upload = self.cleaned_data["file"]
        limit = preference_upload_limit()
        if upload.size > limit:
            raise forms.ValidationError(
                f"{upload.name} is {upload.size:,} bytes; the limit is {limit:,} bytes "
                "(split the file)"
            )
        return upload
