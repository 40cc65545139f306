"""Django admin of the analytics app (site admins only). Export jobs are job rows the
export service moves: read-only here; deleting one deletes the row, not its file."""

from django.contrib import admin

from analytics.models import ExportJob


@admin.register(ExportJob)
class ExportJobAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "project",
        "kind",
        "format",
        "status",
        "rows",
        "requested_by",
        "created_at",
        "finished_at",
    ]
    list_filter = ["status", "kind", "format"]
    list_select_related = ["project", "requested_by"]
    search_fields = ["project__slug", "error"]

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False
