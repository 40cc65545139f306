"""REST API for managing campaigns (a project's admins and researchers): list, create, read
with progress, edit, activate, pause / resume / finish, and a campaign's assignments with
their scores. The same services and rules as the campaign pages
(annotation/campaigns/views.py); annotators get 403, non-members 404.

Campaigns name things as people do: the dataset by id (as the dataset list gives it),
skills by name, annotators by username, groups by name. Bodies are JSON.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Prefetch
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation import access
from annotation.api_parsers import StrictJSONParser
from annotation.campaigns import selectors as cs
from annotation.campaigns import services
from annotation.models import (
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    Campaign,
    CampaignMode,
    CampaignStatus,
    HumanScore,
    PairAsk,
    PairChoice,
    PairDesign,
    Project,
    SkillMode,
)
from annotation.selectors import skill_list_for_project
from flaskweb.api_errors import ApiPagination, ErrorSerializer, service_error, state_conflict

#: A score as the API writes it: 1..5, or "N/A".
SCORE_SCHEMA = {
    "oneOf": [
        {"type": "integer", "minimum": 1, "maximum": 5},
        {"type": "string", "enum": ["N/A"]},
    ]
}
MAX_RATE = 0.5  # gold and repeat shares, as on the campaign form (0-50 %)
MAX_INSTRUCTIONS = 50_000
#: What POST campaigns/{id}/status/ may ask for: pause, resume, finish.
STATUS_CHANGES = [CampaignStatus.PAUSED, CampaignStatus.ACTIVE, CampaignStatus.FINISHED]


class StateConflictSerializer(serializers.Serializer):
    detail = serializers.CharField()
    code = serializers.CharField(help_text="campaign_state")
    status = serializers.ChoiceField(
        choices=CampaignStatus.choices, help_text="the campaign's status now"
    )

    class Meta:
        ref_name = "CampaignStateConflict"


def _state_conflict(campaign: Campaign, exc: ValidationError) -> ApiResponse:
    campaign.refresh_from_db(fields=["status"])
    return state_conflict(" ".join(exc.messages), "campaign_state", campaign.status)


CONFLICT = OpenApiResponse(StateConflictSerializer, description="the campaign's status refuses it")


# --- output shapes --------------------------------------------------------------------------------


class _RowDatasetSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="dataset_id")
    name = serializers.CharField(source="dataset_name")

    class Meta:
        ref_name = "CampaignRowDataset"


class CampaignRowSerializer(serializers.Serializer):
    """A row of the list: what tells campaigns apart, and their slot progress."""

    id = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=CampaignStatus.choices)
    dataset = _RowDatasetSerializer(source="*")
    overlap = serializers.IntegerField()
    tasks = serializers.IntegerField()
    slots_done = serializers.IntegerField()
    slots_needed = serializers.IntegerField()
    percent = serializers.IntegerField()
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "CampaignRow"


class _DatasetSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()

    class Meta:
        ref_name = "CampaignDataset"


class ProgressSerializer(serializers.Serializer):
    tasks = serializers.IntegerField(help_text="normal tasks (one per response scored)")
    tasks_complete = serializers.IntegerField(help_text="tasks with all K scores")
    slots_done = serializers.IntegerField()
    slots_needed = serializers.IntegerField(help_text="tasks × K")
    percent = serializers.IntegerField()
    per_hour = serializers.IntegerField(
        source="recent_per_hour", help_text="slots filled in the last hour"
    )
    eta_seconds = serializers.FloatField(
        allow_null=True, help_text="at the recent rate; null without one"
    )

    class Meta:
        ref_name = "CampaignProgress"


class _NamesField(serializers.ListField):
    """A many-to-many relation, read as a list of the related objects' names."""

    def __init__(self, *, attribute: str, **kwargs) -> None:
        self.attribute = attribute
        super().__init__(child=serializers.CharField(), read_only=True, **kwargs)

    def to_representation(self, manager) -> list[str]:
        return [getattr(o, self.attribute) for o in manager.all()]


class CampaignSerializer(serializers.Serializer):
    """A campaign's settings (the names of the campaign form's fields) and its progress."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    project = serializers.CharField(source="project.slug", help_text="the project's slug")
    dataset = _DatasetSerializer()
    status = serializers.ChoiceField(choices=CampaignStatus.choices)
    model_names = serializers.ListField(child=serializers.CharField())
    skill_mode = serializers.ChoiceField(choices=SkillMode.choices)
    fixed_skills = _NamesField(attribute="name", help_text="skill names (skill_mode fixed)")
    overlap = serializers.IntegerField()
    show_reference = serializers.BooleanField()
    annotators = _NamesField(attribute="username", help_text="usernames")
    groups = _NamesField(attribute="name", help_text="group names")
    route_by_domain = serializers.BooleanField()
    quota_per_annotator = serializers.IntegerField(allow_null=True)
    lease_seconds = serializers.IntegerField()
    instructions = serializers.CharField()
    gold_rate = serializers.FloatField()
    repeat_rate = serializers.FloatField()
    gold_feedback = serializers.BooleanField()
    mode = serializers.ChoiceField(choices=CampaignMode.choices)
    pair_design = serializers.ChoiceField(choices=PairDesign.choices)
    pair_anchor = serializers.CharField()
    pair_budget = serializers.IntegerField(allow_null=True)
    pair_choices = serializers.ListField(child=serializers.ChoiceField(choices=PairChoice.choices))
    pair_ask = serializers.ChoiceField(choices=PairAsk.choices)
    pair_strength = serializers.BooleanField()
    pair_rationale = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    progress = serializers.SerializerMethodField()

    class Meta:
        ref_name = "Campaign"

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, campaign: Campaign) -> dict:
        progress = cs.campaign_progress(campaign=campaign, now=timezone.now())
        return ProgressSerializer(progress).data


def _campaign_data(campaign: Campaign) -> dict[str, Any]:
    campaign = (
        Campaign.objects.select_related("project", "dataset")
        .prefetch_related("fixed_skills", "annotators", "groups")
        .get(pk=campaign.pk)
    )
    return CampaignSerializer(campaign).data


# --- input ----------------------------------------------------------------------------------------


def _names(**kwargs) -> serializers.ListField:
    return serializers.ListField(
        child=serializers.CharField(max_length=200), max_length=10_000, required=False, **kwargs
    )


class CampaignInputSerializer(serializers.Serializer):
    """Create (name and dataset required) or, with PATCH, change any subset. A running
    campaign keeps its dataset, models, skills and K (409 if they differ)."""

    name = serializers.CharField(max_length=200)
    dataset = serializers.IntegerField(
        min_value=1, max_value=2**63 - 1, help_text="id of one of the project's datasets"
    )
    model_names = _names(help_text="models whose responses are scored; empty = every model")
    skill_mode = serializers.ChoiceField(choices=SkillMode.choices, required=False)
    fixed_skills = _names(help_text="skill names, for skill_mode fixed")
    overlap = serializers.IntegerField(
        min_value=1, max_value=50, required=False, help_text="annotators per response (K)"
    )
    show_reference = serializers.BooleanField(required=False)
    annotators = _names(help_text="usernames of the project's annotators")
    groups = _names(help_text="group names; a group admits its members with a project role")
    route_by_domain = serializers.BooleanField(required=False)
    quota_per_annotator = serializers.IntegerField(
        min_value=1, max_value=2**31 - 1, allow_null=True, required=False
    )
    lease_seconds = serializers.IntegerField(
        min_value=30, max_value=services.MAX_LEASE_SECONDS, required=False
    )
    instructions = serializers.CharField(
        max_length=MAX_INSTRUCTIONS, allow_blank=True, trim_whitespace=False, required=False
    )
    gold_rate = serializers.FloatField(min_value=0, max_value=MAX_RATE, required=False)
    repeat_rate = serializers.FloatField(min_value=0, max_value=MAX_RATE, required=False)
    gold_feedback = serializers.BooleanField(required=False)
    mode = serializers.ChoiceField(
        choices=CampaignMode.choices, required=False, help_text="pairwise: compare two responses"
    )
    pair_design = serializers.ChoiceField(choices=PairDesign.choices, required=False)
    pair_anchor = serializers.CharField(
        max_length=200, allow_blank=True, required=False, help_text="the anchor design's model"
    )
    pair_budget = serializers.IntegerField(
        min_value=1,
        max_value=2**31 - 1,
        allow_null=True,
        required=False,
        help_text="the sampled design's number of pairs",
    )
    pair_choices = serializers.ListField(
        child=serializers.ChoiceField(choices=PairChoice.choices),
        max_length=4,
        required=False,
        help_text="the answers offered, in order; empty = a, b, tie",
    )
    pair_ask = serializers.ChoiceField(choices=PairAsk.choices, required=False)
    pair_strength = serializers.BooleanField(required=False)
    pair_rationale = serializers.BooleanField(required=False)

    class Meta:
        ref_name = "CampaignInput"

    def validate_name(self, value: str) -> str:
        name = value.strip()
        project: Project = self.context["project"]
        taken = Campaign.objects.filter(project=project, name=name)
        if self.instance is not None:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise serializers.ValidationError("this project already has a campaign with that name")
        return name

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Names to objects, each unknown name reported under its field."""
        project: Project = self.context["project"]
        campaign: Campaign | None = self.instance
        errors: dict[str, list[str]] = {}
        if "dataset" in attrs:
            attrs["dataset"] = project.datasets.filter(pk=attrs["dataset"]).first()
            if attrs["dataset"] is None:
                errors["dataset"] = ["no dataset with this id in the project"]
        dataset = attrs.get("dataset") or (campaign.dataset if campaign else None)
        if "model_names" in attrs and dataset is not None:
            known = set(cs.dataset_model_names(dataset=dataset))
            unknown = sorted(set(attrs["model_names"]) - known)
            if unknown:
                errors["model_names"] = [f"not a model of the dataset: {', '.join(unknown)}"]
        keep = campaign.groups.values_list("pk", flat=True) if campaign else ()
        lookups = (
            ("fixed_skills", skill_list_for_project(project=project), "name", "no such skill"),
            (
                "annotators",
                cs.project_annotator_list(project=project),
                "username",
                "not an annotator of this project",
            ),
            (
                "groups",
                cs.group_list_for_project(project=project, keep=keep),
                "name",
                "no group of that name with a member in this project",
            ),
        )
        for field_name, queryset, key, message in lookups:
            if field_name not in attrs:
                continue
            wanted = list(dict.fromkeys(attrs[field_name]))
            found = {getattr(o, key): o for o in queryset.filter(**{f"{key}__in": wanted})}
            unknown = [n for n in wanted if n not in found]
            if unknown:
                errors[field_name] = [f"{message}: {', '.join(unknown)}"]
            attrs[field_name] = [found[n] for n in wanted if n in found]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


# --- views ----------------------------------------------------------------------------------------


class CampaignStatusFilter(serializers.Serializer):
    status = serializers.ChoiceField(choices=CampaignStatus.choices, required=False)

    class Meta:
        ref_name = "CampaignFilters"


class CampaignListApi(APIView):
    """GET: the project's campaigns, newest first (`?status=` filters). POST: create one, as
    a draft; activating it creates its tasks."""

    pagination_class = ApiPagination
    parser_classes = [StrictJSONParser]

    @extend_schema(parameters=[CampaignStatusFilter], responses=CampaignRowSerializer(many=True))
    def get(self, request, slug: str):
        project, _ = access.project_get_for_user(request.user, slug)
        params = CampaignStatusFilter(data=request.query_params)
        params.is_valid(raise_exception=True)
        rows = cs.campaign_list_for_project(project=project)
        wanted = params.validated_data.get("status")
        if wanted:
            rows = [r for r in rows if r.status == wanted]
        paginator = self.pagination_class()
        page: list[cs.CampaignRow] | None = paginator.paginate_queryset(rows, request, view=self)  # type: ignore[arg-type]  # DRF slices any sequence; the stub wants a QuerySet
        return paginator.get_paginated_response(CampaignRowSerializer(page, many=True).data)

    @extend_schema(request=CampaignInputSerializer, responses={201: CampaignSerializer})
    def post(self, request, slug: str):
        project, _ = access.project_get_for_user(request.user, slug)
        serializer = CampaignInputSerializer(data=request.data, context={"project": project})
        serializer.is_valid(raise_exception=True)
        try:
            campaign = services.campaign_create(
                project=project, created_by=request.user, **serializer.validated_data
            )
        except ValidationError as exc:
            raise service_error(exc) from None
        return ApiResponse(_campaign_data(campaign), status=status.HTTP_201_CREATED)


class CampaignDetailApi(APIView):
    """GET: a campaign's settings and progress. PATCH: change settings (any subset)."""

    parser_classes = [StrictJSONParser]

    @extend_schema(responses=CampaignSerializer)
    def get(self, request, pk: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        return ApiResponse(_campaign_data(campaign))

    @extend_schema(
        request=CampaignInputSerializer(partial=True),
        responses={200: CampaignSerializer, 409: CONFLICT},
    )
    def patch(self, request, pk: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        serializer = CampaignInputSerializer(
            campaign, data=request.data, partial=True, context={"project": campaign.project}
        )
        serializer.is_valid(raise_exception=True)
        try:
            services.campaign_update(campaign=campaign, **serializer.validated_data)
        except services.CampaignStateError as exc:
            return _state_conflict(campaign, exc)
        except ValidationError as exc:
            raise service_error(exc) from None
        return ApiResponse(_campaign_data(campaign))


class ActivateOutputSerializer(serializers.Serializer):
    tasks_created = serializers.IntegerField()
    campaign = CampaignSerializer()

    class Meta:
        ref_name = "CampaignActivated"


class CampaignActivateApi(APIView):
    """Create the campaign's tasks and pin its rubrics; it becomes active. Idempotent:
    activating again adds tasks only for responses added to the dataset since."""

    @extend_schema(
        request=None,
        responses={
            200: ActivateOutputSerializer,
            400: OpenApiResponse(ErrorSerializer, description="a skill has no rubric"),
            409: CONFLICT,
        },
    )
    def post(self, request, pk: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        try:
            created = services.campaign_activate(campaign=campaign)
        except services.CampaignStateError as exc:
            return _state_conflict(campaign, exc)
        except ValidationError as exc:
            raise service_error(exc) from None
        return ApiResponse({"tasks_created": created, "campaign": _campaign_data(campaign)})


class CampaignStatusApi(APIView):
    """Pause an active campaign, resume a paused one, or finish either (final)."""

    parser_classes = [StrictJSONParser]

    class InputSerializer(serializers.Serializer):
        status = serializers.ChoiceField(
            choices=STATUS_CHANGES,
            help_text="paused, active (resume) or finished",
        )

        class Meta:
            ref_name = "CampaignStatusInput"

    @extend_schema(request=InputSerializer, responses={200: CampaignSerializer, 409: CONFLICT})
    def post(self, request, pk: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            services.campaign_set_status(
                campaign=campaign, status=serializer.validated_data["status"]
            )
        except ValidationError as exc:
            return _state_conflict(campaign, exc)
        return ApiResponse(_campaign_data(campaign))


# --- a campaign's assignments ------------------------------------------------------------------


@extend_schema_field({"type": "object", "additionalProperties": SCORE_SCHEMA})
class _ScoresField(serializers.Field):
    """skill name -> 1..5 or "N/A"."""

    def to_representation(self, scores) -> dict:
        return {s.skill.name: "N/A" if s.is_na else s.score for s in scores.all()}


class AssignmentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    annotator = serializers.CharField(source="annotator.username")
    kind = serializers.ChoiceField(
        choices=AssignmentKind.choices, help_text="normal, or a hidden repeat"
    )
    task_kind = serializers.CharField(source="task.kind", help_text="normal, gold or attention")
    status = serializers.ChoiceField(choices=AssignmentStatus.choices)
    response = serializers.IntegerField(source="task.response_id")
    item = serializers.CharField(source="task.response.item.external_id")
    model = serializers.CharField(source="task.response.model_name")
    claimed_at = serializers.DateTimeField(source="created_at")
    expires_at = serializers.DateTimeField()
    submitted_at = serializers.DateTimeField(allow_null=True)
    active_ms = serializers.IntegerField(allow_null=True, help_text="focused time on the task")
    skip_reason = serializers.CharField()
    flagged = serializers.BooleanField()
    flag_reason = serializers.CharField()
    scores = _ScoresField()

    class Meta:
        ref_name = "CampaignAssignment"


class AssignmentFilterSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=AssignmentStatus.choices, required=False)
    annotator = serializers.CharField(required=False, max_length=150, help_text="a username")
    flagged = serializers.ChoiceField(
        choices=[("true", "true"), ("false", "false")], required=False
    )

    class Meta:
        ref_name = "AssignmentFilters"


class CampaignAssignmentListApi(APIView):
    """A campaign's assignments, newest first, with who, what (item and model), when, and
    the scores given."""

    pagination_class = ApiPagination

    @extend_schema(
        parameters=[AssignmentFilterSerializer], responses=AssignmentSerializer(many=True)
    )
    def get(self, request, pk: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        params = AssignmentFilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        v = params.validated_data
        rows = Assignment.objects.filter(campaign=campaign)
        if v.get("status"):
            rows = rows.filter(status=v["status"])
        if v.get("annotator"):
            rows = rows.filter(annotator__username=v["annotator"])
        if v.get("flagged"):
            rows = rows.filter(flagged=v["flagged"] == "true")
        rows = (
            rows.select_related("annotator", "task__response__item")
            .prefetch_related(
                Prefetch("scores", queryset=HumanScore.objects.select_related("skill"))
            )
            .order_by("-pk")
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(AssignmentSerializer(page, many=True).data)
