"""Forms of the judging pages, and the input checks the REST API shares with them (judge
settings, providers, extra request parameters). No field a researcher fills names an
environment variable, a file or an arbitrary URL: an LLM judge picks a provider a site
admin declared (judging.models.Provider) and one of its base URLs."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, cast

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.text import slugify

from annotation.models import Campaign, Dataset, Project
from annotation.selectors import dataset_list_for_project
from judging import prompts
from judging.baselines import BASELINES
from judging.models import JudgeConfig, JudgeKind, PromptTemplate, Provider
from judging.selectors import (
    campaign_choices_for_project,
    provider_choices_for_project,
    template_choices_for_project,
)

#: Body keys the judge sets itself; letting extra_params override them would silently change
#: what is sent (or, for stream/n, what can be read back).
RESERVED_PARAMS = frozenset({"model", "messages", "stream", "n", "temperature", "max_tokens"})
SECRET_LIKE = re.compile(r"api[_-]?key|secret|password|authori[sz]ation|bearer", re.IGNORECASE)
MAX_PROMPT_FILE_BYTES = 1_000_000

PROVIDER_HELP = (
    "The API the judge calls, as a site admin declared it: its URL, where its key is kept "
    "and its limits. Ask a site admin to declare another (docs/JUDGING.md, “Providers”)."
)


def validate_extra_params(value: Any) -> None:
    if not isinstance(value, dict):
        raise ValidationError(
            'Extra parameters must be a JSON object, for example {"top_p": 0.9, "seed": 1}.',
            code="not_object",
        )
    reserved = sorted(RESERVED_PARAMS & set(value))
    if reserved:
        raise ValidationError(
            f"{', '.join(reserved)} cannot be set here: the judge's own settings set them.",
            code="reserved",
        )
    secret = sorted(k for k in value if SECRET_LIKE.search(str(k)))
    if secret:
        raise ValidationError(
            f"{', '.join(secret)} looks like a credential: never store one here; keys belong "
            "to providers, which site admins declare.",
            code="secret",
        )


def judge_settings_errors(data: dict[str, Any]) -> dict[str, str]:
    """Cross-field checks of a judge's settings (the form and the API alike)."""
    errors: dict[str, str] = {}
    kind = data.get("kind")
    if kind == JudgeKind.LLM:
        provider = data.get("provider")
        if provider is None:
            errors["provider"] = "An LLM judge needs a provider (an API a site admin declared)."
        elif data.get("base_url") and data["base_url"] not in provider.base_urls:
            errors["base_url"] = (
                f"Provider {provider.name} declares these base URLs only: "
                + ", ".join(provider.base_urls)
                + ". Leave blank for the first."
            )
        if not data.get("model"):
            errors["model"] = "An LLM judge needs a model name."
        template = data.get("prompt_template")
        if template is not None and template.with_reference != bool(data.get("use_reference")):
            errors["use_reference"] = (
                f"Template {template.key} v{template.version} "
                + ("uses" if template.with_reference else "does not use")
                + " the reference answer: set “use the reference answer” to match, "
                "or choose another template."
            )
    elif kind == JudgeKind.BASELINE:
        if data.get("baseline") not in BASELINES:
            errors["baseline"] = f"Choose a baseline metric: {', '.join(sorted(BASELINES))}."
    else:
        errors["kind"] = "Choose an LLM judge or a baseline."
    return errors


LLM_FIELDS = (
    "provider",
    "base_url",
    "model",
    "temperature",
    "max_tokens",
    "extra_params",
    "timeout_seconds",
    "max_attempts",
    "samples",
    "use_reference",
    "prompt_template",
    "requests_per_minute",
    "tokens_per_minute",
    "price_per_1k_prompt",
    "price_per_1k_completion",
)


def judge_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of judge_config_create for validated settings: a baseline keeps
    only its metric (it calls no API, costs nothing and is deterministic: one sample)."""
    if data["kind"] == JudgeKind.BASELINE:
        return {"baseline": data["baseline"], "samples": 1}
    fields = {name: data[name] for name in LLM_FIELDS if name in data}
    fields["base_url"] = fields.get("base_url") or ""
    fields["extra_params"] = fields.get("extra_params") or {}
    # Blank prices mean free (a local server); the model's defaults fill anything absent.
    for price in ("price_per_1k_prompt", "price_per_1k_completion"):
        if fields.get(price) is None:
            fields[price] = Decimal(0)
    return fields


def _lf(text: str) -> str:
    # Browsers send textareas with CRLF; templates are stored (and hashed) with LF, so the
    # same text pasted in a form or sent through the API is the same version.
    return text.replace("\r\n", "\n").replace("\r", "\n")


class PromptTemplateChoiceField(forms.ModelChoiceField):
    """A choice of prompt template labelled "key vN: name", so versions of a key differ."""

    def label_from_instance(self, obj: PromptTemplate) -> str:
        return f"{obj.key} v{obj.version}: {obj.name}"


class JudgeConfigForm(forms.Form):
    kind = forms.ChoiceField(
        choices=[(JudgeKind.LLM, JudgeKind.LLM.label), (JudgeKind.BASELINE, "Baseline metric")],
        initial=JudgeKind.LLM,
        widget=forms.RadioSelect,
    )
    name = forms.CharField(max_length=200)
    baseline = forms.ChoiceField(
        choices=[("", "–")] + [(name, name) for name in sorted(BASELINES)],
        required=False,
        help_text="Baselines compare the response with the reference answer; no model is called.",
    )
    provider = forms.ModelChoiceField(
        queryset=Provider.objects.none(), required=False, help_text=PROVIDER_HELP
    )
    base_url = forms.CharField(
        max_length=500,
        required=False,
        label="Base URL",
        help_text="One of the provider's base URLs; blank for its first.",
    )
    model = forms.CharField(max_length=200, required=False)
    temperature = forms.FloatField(min_value=0, max_value=2, initial=0.0)
    max_tokens = forms.IntegerField(
        min_value=1, max_value=1_000_000, initial=1024, label="Max tokens (completion)"
    )
    extra_params = forms.JSONField(
        required=False,
        initial=dict,
        label="Extra request parameters (JSON)",
        help_text='Added to every request body, e.g. {"top_p": 0.9}. Not model, messages, '
        "temperature or max_tokens.",
        validators=[validate_extra_params],
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    timeout_seconds = forms.FloatField(
        min_value=1, max_value=900, initial=60.0, label="Timeout (s)"
    )
    max_attempts = forms.IntegerField(
        min_value=1,
        max_value=20,
        initial=5,
        help_text="Tries per call on retryable errors (429, 5xx, timeouts) before it is "
        "recorded as failed.",
    )
    samples = forms.IntegerField(
        min_value=1, max_value=20, initial=1, label="Samples (k per response)"
    )
    use_reference = forms.BooleanField(
        required=False, initial=True, label="Use the reference answer"
    )
    prompt_template = PromptTemplateChoiceField(
        queryset=PromptTemplate.objects.none(),
        required=False,
        empty_label="Built-in FLASK template (with or without the reference answer, as set above)",
    )
    requests_per_minute = forms.IntegerField(min_value=1, required=False, label="Requests/minute")
    tokens_per_minute = forms.IntegerField(min_value=1, required=False, label="Tokens/minute")
    price_per_1k_prompt = forms.DecimalField(
        min_value=0, max_digits=10, decimal_places=6, initial=0, label="Price per 1k prompt tokens"
    )
    price_per_1k_completion = forms.DecimalField(
        min_value=0,
        max_digits=10,
        decimal_places=6,
        initial=0,
        label="Price per 1k completion tokens",
    )

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.project = project
        template_field = cast(forms.ModelChoiceField, self.fields["prompt_template"])
        template_field.queryset = template_choices_for_project(project=project)
        provider_field = cast(forms.ModelChoiceField, self.fields["provider"])
        provider_field.queryset = provider_choices_for_project(project=project)

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if JudgeConfig.objects.filter(project=self.project, name=name).exists():
            raise ValidationError("This project has a judge of that name already.")
        return name

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if "kind" in data:
            for field, message in judge_settings_errors(data).items():
                self.add_error(field, message)
        return data

    def judge_settings(self) -> dict[str, Any]:
        return judge_fields(self.cleaned_data)


class RunCreateForm(forms.Form):
    dataset: forms.ModelChoiceField[Dataset] = forms.ModelChoiceField(
        queryset=None, required=False, empty_label="–"
    )
    campaign: forms.ModelChoiceField[Campaign] = forms.ModelChoiceField(
        queryset=None,
        required=False,
        empty_label="–",
        help_text="Judge exactly what the campaign's annotators score: its models, skills and "
        "the rubric versions pinned when it was activated (so drafts are not listed).",
    )
    budget = forms.DecimalField(
        min_value=Decimal("0.000001"),
        max_digits=14,
        decimal_places=6,
        required=False,
        help_text="Optional: the run pauses once its cost reaches this.",
    )
    pairwise_against = forms.CharField(
        required=False,
        max_length=200,
        label="Pairwise against model",
        help_text="Optional: a model of the dataset. Each other model's response is then "
        "compared with this model's response to the same item, in both orders, and "
        "position-inconsistent verdicts are reported.",
    )

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        dataset_field = cast(forms.ModelChoiceField, self.fields["dataset"])
        dataset_field.queryset = dataset_list_for_project(project=project)
        campaign_field = cast(forms.ModelChoiceField, self.fields["campaign"])
        campaign_field.queryset = campaign_choices_for_project(project=project)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        dataset, campaign = data.get("dataset"), data.get("campaign")
        if campaign is not None and dataset is not None and campaign.dataset_id != dataset.pk:
            self.add_error("campaign", "This campaign scores another dataset.")
        elif campaign is None and dataset is None and not self.errors:
            raise ValidationError("Choose a dataset or a campaign.")
        return data

    def run_settings(self) -> dict[str, Any]:
        data = self.cleaned_data
        dataset = data["campaign"].dataset if data.get("campaign") else data["dataset"]
        return {
            "dataset": dataset,
            "campaign": data.get("campaign"),
            "budget": data["budget"],
            "pairwise_against": (data.get("pairwise_against") or "").strip(),
        }


class RunStartForm(forms.Form):
    """Start or resume, optionally with a new budget (a run paused by its budget needs one)."""

    budget = forms.DecimalField(
        min_value=Decimal("0.000001"), max_digits=14, decimal_places=6, required=False
    )


class PromptTemplateForm(forms.Form):
    name = forms.CharField(max_length=200)
    key = forms.SlugField(
        max_length=80,
        required=False,
        help_text="Versions share a key: a changed text saved under an existing key becomes "
        "its next version. Default: made from the name.",
    )
    system_prompt = forms.CharField(
        required=False,
        strip=False,
        initial=prompts.SYSTEM_PROMPT,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Sent as written; no placeholders. Write {{ and }} for literal braces.",
    )
    user_template = forms.CharField(
        strip=False,
        initial=prompts.builtin_template(with_reference=False).user_template,
        widget=forms.Textarea(attrs={"rows": 18}),
        help_text="Must use {instruction}, {response} and {skills}; {reference} is optional "
        "(the judge then gets the reference answer). Write {{ and }} for literal braces.",
    )

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if "name" not in data:
            return data
        data["key"] = data.get("key") or slugify(data["name"])[:80]
        if not data["key"]:
            self.add_error("key", "Give a key made of letters, digits, - and _.")
            return data
        data["system_prompt"] = _lf(data.get("system_prompt", ""))
        if "user_template" in data:
            data["user_template"] = _lf(data["user_template"])
            try:
                prompts.TemplateText.from_text(
                    data["user_template"], key=data["key"], system_prompt=data["system_prompt"]
                )
            except prompts.TemplateError as exc:
                self.add_error(template_error_field(str(exc)), str(exc))
        return data


def template_error_field(message: str) -> str:
    """The field a prompts.TemplateError is about ("template 'k', system prompt: line 2: …")."""
    return "system_prompt" if ", system prompt:" in message.split("line", 1)[0] else "user_template"


class PromptImportForm(forms.Form):
    file = forms.FileField(
        help_text="The FLASK release's review prompt file (gpt_review/src/prompt.jsonl): one "
        "JSON object per line with prompt_id, system_prompt and prompt_template."
    )

    def clean_file(self) -> str:
        upload = self.cleaned_data["file"]
        limit = min(MAX_PROMPT_FILE_BYTES, settings.FLASKWEB_MAX_UPLOAD_BYTES)
        if upload.size > limit:
            raise ValidationError(f"The file is larger than {limit:,} bytes.")
        try:
            return upload.read().decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ValidationError("The file is not UTF-8 text.")


class PromptPreviewForm(forms.Form):
    dataset: forms.ModelChoiceField[Dataset] = forms.ModelChoiceField(
        queryset=None, empty_label=None
    )
    response = forms.IntegerField(
        min_value=1, required=False, label="Response id", help_text="Default: the first one."
    )

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        #: The datasets offered (the view previews the first when no dataset is chosen).
        self.datasets = dataset_list_for_project(project=project)
        cast(forms.ModelChoiceField, self.fields["dataset"]).queryset = self.datasets
