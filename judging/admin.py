"""Django admin of the judging app (site admins only). Judges can only be renamed here.
Prompt templates are append-only versions, runs are job rows whose counters the services
move, and judgments, their scores and the LLM cache are the record of what was sent and
answered: all read-only here. Cache entries may be deleted, which only makes the next
identical request call the model again. No API key is stored anywhere, so none can show
up here."""

from django.contrib import admin

from judging.models import (
    JudgeConfig,
    JudgeRun,
    JudgeScore,
    Judgment,
    LLMCacheEntry,
    PromptTemplate,
)


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
        "id", "judge", "dataset", "campaign", "status", "total", "done", "failed",
        "parse_failed", "cost", "created_at",
    ]  # fmt: skip
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
    list_display = ["key", "model", "finish_reason", "prompt_tokens", "completion_tokens"]
    search_fields = ["key", "model"]

    def has_delete_permission(self, request, obj=None):
        return True
