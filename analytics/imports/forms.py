"""The form of the long-format score upload page (analytics/import_views.py)."""

from __future__ import annotations

from django import forms

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
