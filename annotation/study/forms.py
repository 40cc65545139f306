"""Forms of the study pages: they validate input into service arguments; the services
(annotation/study/services.py) decide and write."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from annotation.models import Platform
from annotation.study import platforms
from annotation.study.services import MAX_CODE, MAX_CONSENT


class StudyLinkForm(forms.Form):
    platform = forms.ChoiceField(choices=Platform.choices)
    completion_url = forms.CharField(
        required=False,
        max_length=platforms.MAX_COMPLETION_URL,
        label="Completion URL (optional)",
        help_text="Where the completion page sends the worker; {code} is replaced by the code "
        "and {worker} by their id. Empty: Prolific's completion page for Prolific links, "
        "MTurk's submit form for MTurk links, none otherwise. https only.",
    )
    max_participants = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=1_000_000,
        label="Most participants (optional)",
    )

    def clean_completion_url(self) -> str:
        try:
            return platforms.completion_url_check(self.cleaned_data["completion_url"])
        except platforms.BadEntry as exc:
            raise forms.ValidationError(str(exc)) from None


class StudySettingsForm(forms.Form):
    consent_text = forms.CharField(
        required=False,
        max_length=MAX_CONSENT,
        widget=forms.Textarea(attrs={"rows": 6}),
        label="Consent text (Markdown; empty: no consent page)",
    )
    completion_code = forms.CharField(required=False, max_length=MAX_CODE)
    screenout_code = forms.CharField(
        required=False,
        max_length=MAX_CODE,
        label="Screen-out code (empty: the completion code)",
    )


class StudyLinkStatusForm(forms.Form):
    is_open = forms.TypedChoiceField(
        choices=[("1", "open"), ("0", "closed")], coerce=lambda v: v == "1"
    )


class ConsentForm(forms.Form):
    answer = forms.ChoiceField(choices=[("agree", "I agree"), ("decline", "I do not agree")])


class FinishForm(forms.Form):
    action = forms.ChoiceField(
        choices=[("finish", "Finish and get my code"), ("leave", "Leave without a code")],
        required=False,
    )

    def clean_action(self) -> str:
        return self.cleaned_data.get("action") or "finish"


class ResumeForm(forms.Form):
    code = forms.CharField(
        max_length=40,
        label=_("Resume code"),
        help_text=_("The code you were shown when you started, e.g. ABCD-EFGH-JKMN."),
        widget=forms.TextInput(
            attrs={"autocomplete": "off", "autocapitalize": "characters", "spellcheck": "false"}
        ),
    )


#: The quality rules' labels on the approval page (annotation/study/quality.py defines them).
QUALITY_RULE_LABELS = {
    "min_gold_accuracy": "Gold accuracy at least (share, 0–1)",
    "min_gold_tasks": "…counted after this many gold tasks",
    "max_attention_failed": "Failed attention checks at most",
    "min_speed_ratio": "Median time per task at least this share of everyone's median (0–1)",
    "min_median_seconds": "Median time per task at least (seconds)",
    "min_tasks_for_flags": "…time rules counted after this many timed tasks",
    "max_straightline_share": "Share of one same score below (0–1)",
    "min_agreement": "Agreement with the others at least (share within one point, 0–1)",
    "min_competence": "Dawid–Skene accuracy at least (0–1)",
    "min_scores_for_flags": "…score rules counted after this many scores",
}


class QualityRulesForm(forms.Form):
    """The campaign's quality rules: an empty field turns a rule off (the "…after this
    many" counts cannot be off: empty keeps their default). The service checks ranges."""

    screen_out = forms.BooleanField(
        required=False,
        label="Screen out, at finishing, participants whose figures break a rule "
        "(they get the screen-out code instead of the completion code)",
    )

    def __init__(self, *args, rules: dict, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name, label in QUALITY_RULE_LABELS.items():
            self.fields[name] = forms.FloatField(required=False, label=label)
            if not self.is_bound:
                self.fields[name].initial = rules.get(name)
