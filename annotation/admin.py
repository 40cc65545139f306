"""Django admin (site admins only). Rubric versions and import records are read-only here:
rubrics change through new versions (the catalogue pages), datasets through imports.
Scores and their revisions are read-only too: they change only through the workflow
services, which keep the task counters and the audit trail consistent."""

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError

from annotation.campaigns.services import CAMPAIGN_STRUCTURE
from annotation.models import (
    AnnotatorExpertise,
    Assignment,
    Campaign,
    CampaignRubric,
    CampaignStatus,
    Dataset,
    DatasetUpload,
    Domain,
    GoldScore,
    HumanScore,
    HumanScoreDeletion,
    HumanScoreRevision,
    ImportProblem,
    Item,
    ItemSkill,
    MembershipChange,
    MetadataProposal,
    MetadataVerification,
    Participant,
    Project,
    ProjectMembership,
    ReannotationRequest,
    Response,
    Rubric,
    Screening,
    Skill,
    StudyLink,
    Task,
)
from annotation.services.projects import membership_remove, project_name_check


class MembershipInline(admin.TabularInline):
    model = ProjectMembership
    extra = 1
    autocomplete_fields = ["user"]


class ProjectAdminForm(forms.ModelForm):
    class Meta:
        model = Project
        fields = ["slug", "name", "description"]

    def clean_name(self):
        try:
            return project_name_check(name=self.cleaned_data["name"], project=self.instance)
        except ValidationError as exc:
            raise ValidationError(exc.message_dict["name"]) from None


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    form = ProjectAdminForm
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]

    def save_formset(self, request, form, formset, change):
        """A membership deleted here ends as one removed on the members page: the user
        leaves the project's campaign pools and their open leases end."""
        if formset.model is not ProjectMembership:
            return super().save_formset(request, form, formset, change)
        instances = formset.save(commit=False)
        for membership in formset.deleted_objects:
            membership_remove(membership=membership, actor=request.user)
        for membership in instances:
            membership.save()
        formset.save_m2m()


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


# --- campaigns ----------------------------------------------------------------------------------


class ReadOnlyAdmin(admin.ModelAdmin):
    """Browse only: no add, change or delete from the admin."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(MembershipChange)
class MembershipChangeAdmin(ReadOnlyAdmin):
    """The record of who changed a project's members."""

    list_display = [
        "changed_at",
        "project",
        "username",
        "action",
        "role_before",
        "role_after",
        "changed_by",
    ]
    list_filter = ["action", "project"]
    search_fields = ["username"]


class CampaignRubricInline(admin.TabularInline):
    model = CampaignRubric
    extra = 0
    can_delete = False
    readonly_fields = ["skill", "rubric"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Campaign)
class CampaignAdmin(admin.ModelAdmin):
    """Settings may be corrected here; lifecycle changes (activate, pause, finish) go
    through the campaign page, which calls the services."""

    list_display = ["name", "project", "dataset", "status", "overlap", "created_at"]
    list_filter = ["status", "project"]
    search_fields = ["name"]
    list_select_related = ["project", "dataset"]
    readonly_fields = ["status", "created_by", "created_at", "updated_at"]
    raw_id_fields = ["dataset"]
    filter_horizontal = ["fixed_skills", "annotators", "groups"]
    inlines = [CampaignRubricInline]

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None and obj.status != CampaignStatus.DRAFT:
            fields += list(CAMPAIGN_STRUCTURE)  # tasks and pinned rubrics depend on them
        return fields


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    # assigned/submitted are lease counters kept by the claim/submit/expire transactions
    list_display = ["pk", "campaign", "kind", "response", "overlap", "assigned", "submitted"]
    list_filter = ["kind", "campaign"]
    list_select_related = ["campaign", "response"]
    raw_id_fields = ["campaign", "response"]


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = [
        "pk",
        "campaign",
        "task",
        "annotator",
        "kind",
        "status",
        "expires_at",
        "submitted_at",
        "flagged",
    ]
    list_filter = ["status", "kind", "flagged", "campaign"]
    search_fields = ["annotator__username", "flag_reason", "skip_reason"]
    list_select_related = ["campaign", "task", "annotator"]
    raw_id_fields = ["task", "campaign", "annotator"]


class HumanScoreRevisionInline(admin.TabularInline):
    model = HumanScoreRevision
    extra = 0
    can_delete = False
    readonly_fields = ["edited_by", "edited_at", "before", "after"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(HumanScore)
class HumanScoreAdmin(ReadOnlyAdmin):
    list_display = [
        "pk",
        "campaign",
        "annotator",
        "response",
        "skill",
        "score",
        "is_na",
        "updated_at",
    ]
    list_filter = ["campaign", "skill", "is_na"]
    search_fields = ["annotator__username"]
    list_select_related = ["campaign", "annotator", "response", "skill"]
    raw_id_fields = ["assignment", "campaign", "response", "annotator", "rubric"]
    inlines = [HumanScoreRevisionInline]


@admin.register(HumanScoreDeletion)
class HumanScoreDeletionAdmin(ReadOnlyAdmin):
    """Deleted human scores as they were (annotation.audit)."""

    list_display = [
        "pk",
        "score_ref",
        "annotator_username",
        "skill_name",
        "deleted_by",
        "deleted_at",
        "context",
    ]
    list_filter = ["skill_name"]
    search_fields = ["annotator_username", "context"]
    list_select_related = ["deleted_by"]


@admin.register(HumanScoreRevision)
class HumanScoreRevisionAdmin(ReadOnlyAdmin):
    list_display = ["pk", "score", "score_ref", "edited_by", "edited_at"]
    list_select_related = ["score", "edited_by"]
    raw_id_fields = ["score", "edited_by"]


@admin.register(GoldScore)
class GoldScoreAdmin(admin.ModelAdmin):
    list_display = ["task", "skill", "score", "is_na", "tolerance"]
    list_filter = ["task__campaign", "skill"]
    list_select_related = ["task", "skill"]
    raw_id_fields = ["task"]


@admin.register(AnnotatorExpertise)
class AnnotatorExpertiseAdmin(admin.ModelAdmin):
    list_display = ["user", "domain"]
    list_filter = ["domain"]
    search_fields = ["user__username"]
    list_select_related = ["user", "domain"]
    autocomplete_fields = ["user"]


@admin.register(ReannotationRequest)
class ReannotationRequestAdmin(ReadOnlyAdmin):
    """The audit trail of send-backs for re-annotation (annotation.services.reannotation)."""

    list_display = ["id", "campaign", "requested_by", "created_at", "extra", "reopened"]
    list_filter = ["campaign__project"]
    list_select_related = ["campaign", "requested_by"]


@admin.register(Screening)
class ScreeningAdmin(ReadOnlyAdmin):
    """Each annotator's screening in a campaign (annotation/screening/): written only by the
    workflow, which decides it once."""

    list_display = ["pk", "campaign", "annotator", "phase", "score", "decided_at"]
    list_filter = ["phase", "campaign__project"]
    search_fields = ["annotator__username"]
    list_select_related = ["campaign", "annotator"]


@admin.register(StudyLink)
class StudyLinkAdmin(ReadOnlyAdmin):
    """Campaigns' study links (annotation/study/); made, closed and reopened on the
    campaign's study page."""

    list_display = ["pk", "campaign", "platform", "is_open", "max_participants", "created_at"]
    list_filter = ["platform", "is_open", "campaign__project"]
    list_select_related = ["campaign"]
    exclude = ["token"]  # the link itself is on the study page, for the campaign's staff


@admin.register(Participant)
class ParticipantAdmin(ReadOnlyAdmin):
    """Workers who came through study links, with their platform ids. To keep one out,
    deactivate their user (their link then answers 403)."""

    list_display = ["pk", "campaign", "user", "platform", "worker_id", "state", "created_at"]
    list_filter = ["platform", "state", "campaign__project"]
    search_fields = ["worker_id", "user__username"]
    list_select_related = ["campaign", "user"]


# --- metadata (docs/METADATA.md): verdicts go through the verification page -----------------


@admin.register(MetadataProposal)
class MetadataProposalAdmin(ReadOnlyAdmin):
    list_display = ["id", "item", "origin", "source", "label", "status", "difficulty", "created_at"]
    list_filter = ["source", "status"]
    list_select_related = ["item"]


@admin.register(MetadataVerification)
class MetadataVerificationAdmin(ReadOnlyAdmin):
    list_display = ["id", "item", "verdict", "difficulty", "verified_by", "verified_at"]
    list_filter = ["verdict"]
    list_select_related = ["item", "verified_by"]
