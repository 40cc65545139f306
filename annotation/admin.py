"""Django admin (site admins only). Rubric versions and import records are read-only here:
rubrics change through new versions (the catalogue pages), datasets through imports."""

from django.contrib import admin

from annotation.models import (
    Dataset,
    DatasetUpload,
    Domain,
    ImportProblem,
    Item,
    ItemSkill,
    Project,
    ProjectMembership,
    Response,
    Rubric,
    Skill,
)


class MembershipInline(admin.TabularInline):
    model = ProjectMembership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]


@admin.register(Skill)
class SkillAdmin(admin.ModelAdmin):
    list_display = ["name", "ability", "project", "order"]
    list_filter = ["ability", "project"]
    search_fields = ["name"]


@admin.register(Rubric)
class RubricAdmin(admin.ModelAdmin):
    list_display = ["skill", "version", "project", "source", "created_by", "created_at"]
    list_filter = ["source", "project", "skill"]

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False


@admin.register(Domain)
class DomainAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "order"]


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["name", "project", "created_at", "updated_at"]
    list_filter = ["project"]
    search_fields = ["name"]


class ItemSkillInline(admin.TabularInline):
    model = ItemSkill
    extra = 0


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ["external_id", "dataset", "difficulty", "source_task"]
    list_filter = ["dataset__project", "difficulty"]
    search_fields = ["external_id", "instruction"]
    raw_id_fields = ["dataset", "upload"]
    inlines = [ItemSkillInline]
    list_select_related = ["dataset"]


@admin.register(Response)
class ResponseAdmin(admin.ModelAdmin):
    list_display = ["item", "model_name", "created_at"]
    search_fields = ["model_name", "item__external_id"]
    raw_id_fields = ["item", "upload"]
    list_select_related = ["item"]


class ImportProblemInline(admin.TabularInline):
    model = ImportProblem
    extra = 0
    can_delete = False
    readonly_fields = ["file_name", "line", "field", "code", "action", "message"]


@admin.register(DatasetUpload)
class DatasetUploadAdmin(admin.ModelAdmin):
    list_display = ["pk", "project", "dataset_name", "status", "source", "created_at"]
    list_filter = ["status", "source", "project"]
    readonly_fields = [f.name for f in DatasetUpload._meta.fields]
    inlines = [ImportProblemInline]

    def has_add_permission(self, request):
        return False
