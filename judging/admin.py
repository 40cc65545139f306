"""Django admin of the judging app (site admins only). Judges can only be renamed here.
Prompt templates are append-only versions, runs are job rows whose counters the services
move, and judgments, their scores and the LLM cache are the record of what was sent and
answered: all read-only here. Cache entries may be deleted, which only makes the next
identical request call the model again. No API key is stored anywhere, so none can show
up here: providers name where the workers find a key, never the key itself.

Providers (the APIs judge calls may go to, where their keys are, their prices and limits)
are declared here by superusers only: that is the operator's decision, not a researcher's.
"""

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from judging.models import (
    JudgeConfig,
    JudgeRun,
    JudgeScore,
    Judgment,
    LLMCacheEntry,
    MetadataRun,
    PromptTemplate,
    Provider,
)
from judging.services import provider_problems


class ProviderForm(forms.ModelForm):
    class Meta:
        model = Provider
        fields = [
            "name",
            "label",
            "base_urls",
            "api_key_env",
            "api_key_file",
            "is_local",
            "approved",
            "projects",
            "shared_cache",
            "prices",
            "requests_per_minute",
            "tokens_per_minute",
            "note",
        ]
        help_texts = {
            "base_urls": 'A JSON list: ["https://api.openai.com/v1"]. The key is only ever '
            "sent to these.",
            "api_key_env": "The NAME of the workers' environment variable with the key "
            "(NAME_FILE is read too). Blank with no file: the server needs no key.",
            "api_key_file": "Or the absolute path of a secret file on the workers.",
            "is_local": "Allow loopback and private addresses (a vLLM, Ollama or llama.cpp "
            "server on this machine or the LAN). Otherwise they are refused.",
            "approved": "No call goes out before this is ticked.",
            "projects": "Projects that may use it; none = every project.",
            "shared_cache": "Let identical requests of different projects share cached "
            "answers (by default a project only gets answers it paid for).",
            "prices": 'Per 1k tokens by model, "*" for any: {"gpt-4o": {"prompt": "0.0025", '
            '"completion": "0.01"}}. Judges made afterwards take these prices.',
        }

    def clean(self):
        data = super().clean()
        errors = provider_problems(
            base_urls=data.get("base_urls"),
            api_key_env=data.get("api_key_env") or "",
            api_key_file=data.get("api_key_file") or "",
            is_local=bool(data.get("is_local")),
            prices=data.get("prices") if data.get("prices") is not None else {},
        )
        if errors:
            raise ValidationError(errors)
        return data


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    """Superusers only, whatever model permissions a staff user was given."""

    form = ProviderForm
    list_display = ["name", "label", "approved", "is_local", "shared_cache", "updated_at"]
    list_filter = ["approved", "is_local"]
    search_fields = ["name", "label"]
    filter_horizontal = ["projects"]

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_superuser

    has_add_permission = has_change_permission = has_delete_permission = has_view_permission


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(PromptTemplate)
class PromptTemplateAdmin(ReadOnlyAdmin):
    list_display = ["key", "version", "name", "project", "source", "with_reference", "created_at"]
    list_filter = ["source", "with_reference", "project"]
    search_fields = ["key", "name"]


@admin.register(JudgeConfig)
class JudgeConfigAdmin(admin.ModelAdmin):
    """Only the name can change: runs read their judge's settings while they run, so an
    edited setting would split a run (or its resumption) into two configurations."""

    list_display = ["name", "project", "kind", "model", "baseline", "samples", "created_at"]
    list_filter = ["kind", "project"]
    search_fields = ["name", "model"]

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in JudgeConfig._meta.fields if f.name != "name"]

    def has_add_permission(self, request, obj=None):
        return False  # judges are created through judge_config_create (the judges page)


@admin.register(JudgeRun)
class JudgeRunAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "judge",
        "dataset",
        "campaign",
        "status",
        "total",
        "done",
        "failed",
        "parse_failed",
        "cost",
        "created_at",
    ]
    list_filter = ["status"]
    list_select_related = ["judge", "dataset", "campaign"]


@admin.register(Judgment)
class JudgmentAdmin(ReadOnlyAdmin):
    list_display = ["id", "run", "response", "sample_index", "status", "attempts", "from_cache"]
    list_filter = ["status", "from_cache"]
    list_select_related = ["run", "response"]
    raw_id_fields = ["run", "response", "prompt_template"]


@admin.register(JudgeScore)
class JudgeScoreAdmin(ReadOnlyAdmin):
    list_display = ["id", "judgment", "skill", "score", "is_na", "raw_value"]
    list_filter = ["is_na"]
    list_select_related = ["judgment", "skill"]
    raw_id_fields = ["judgment", "run", "response", "skill", "rubric"]


@admin.register(LLMCacheEntry)
class LLMCacheEntryAdmin(ReadOnlyAdmin):
    list_display = [
        "key",
        "provider",
        "project",
        "model",
        "finish_reason",
        "prompt_tokens",
        "completion_tokens",
    ]
    search_fields = ["key", "model"]

    def has_delete_permission(self, request, obj=None):
        return True


@admin.register(MetadataRun)
class MetadataRunAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "judge",
        "dataset",
        "status",
        "total",
        "done",
        "failed",
        "parse_failed",
        "cost",
        "created_at",
    ]
    list_filter = ["status"]
    list_select_related = ["judge", "dataset"]
