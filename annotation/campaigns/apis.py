"""REST API for managing campaigns (a project's admins and researchers): list, create, read
with progress, edit, activate, pause / resume / finish, and a campaign's assignments with
their scores. The same services and rules as the campaign pages
(annotation/campaigns/views.py); annotators get 403, non-members 404.

Campaigns name things as people do: the dataset by id (as the dataset list gives it),
skills by name, annotators by username, groups by name. Bodies are JSON.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
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
    KNOWN_SCORE_KINDS,
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    Campaign,
    CampaignMode,
    CampaignSelection,
    CampaignStatus,
    HumanScore,
    PairAsk,
    PairChoice,
    PairDesign,
    Project,
    Response,
    SkillMode,
    Task,
    TaskKind,
)
from annotation.parsers import ScoreRefused, score_read
from annotation.selectors import (
    PARTICIPANT_FILTERS,
    PARTICIPANTS_INCLUDE,
    participants_narrowed,
    skill_list_for_project,
)
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
    annotators = _NamesField(
        attribute="username",
        help_text="usernames of the pool, the campaign's study participants included "
        "(GET ?participants= narrows them)",
    )
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
    selection = serializers.ChoiceField(
        choices=CampaignSelection.choices,
        help_text="all: every response gets a task; sampled: only those drawn for people "
        "(active selection, /api/v1/campaigns/{id}/active-selection)",
    )
    language = serializers.CharField(
        help_text="the language of the campaign's own texts (a code of the site's languages); "
        "empty: the site's default, and pages follow the browser (docs/LANGUAGES.md)"
    )
    completion_message = serializers.CharField(
        help_text="shown on the study's finish page above the completion code"
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    progress = serializers.SerializerMethodField()

    class Meta:
        ref_name = "Campaign"

    @extend_schema_field(ProgressSerializer)
    def get_progress(self, campaign: Campaign) -> dict:
        progress = cs.campaign_progress(campaign=campaign, now=timezone.now())
        return ProgressSerializer(progress).data


def _campaign_data(campaign: Campaign, participants: str = PARTICIPANTS_INCLUDE) -> dict[str, Any]:
    """The campaign as CampaignSerializer shows it; `participants` narrows its annotators
    (include: everyone in the pool; exclude, only: as the members list's filter)."""
    people = participants_narrowed(
        get_user_model().objects.order_by("username"),
        project=campaign.project,
        participants=participants,
    )
    campaign = (
        Campaign.objects.select_related("project", "dataset")
        .prefetch_related("fixed_skills", Prefetch("annotators", queryset=people), "groups")
        .get(pk=campaign.pk)
    )
    return CampaignSerializer(campaign).data


class CampaignReadFilter(serializers.Serializer):
    participants = serializers.ChoiceField(
        choices=PARTICIPANT_FILTERS,
        default=PARTICIPANTS_INCLUDE,
        help_text="which of the pool's annotators to list: include (default: all), exclude "
        "(no accounts made by study links) or only those accounts",
    )

    class Meta:
        ref_name = "CampaignReadFilters"


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
    annotators = _names(
        help_text="usernames of the project's annotators: the new pool, which keeps the "
        "campaign's own study participants whether listed or not"
    )
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
    selection = serializers.ChoiceField(
        choices=CampaignSelection.choices,
        required=False,
        help_text="sampled (pointwise only): only the responses drawn for people get tasks; "
        "set while a draft",
    )
    language = serializers.ChoiceField(
        choices=[("", "follow the browser"), *settings.LANGUAGES],
        required=False,
        help_text="the language of the campaign's own texts; empty: the site's default, and "
        "pages follow the browser among the campaign's translations (docs/LANGUAGES.md)",
    )
    completion_message = serializers.CharField(
        max_length=MAX_INSTRUCTIONS,
        allow_blank=True,
        trim_whitespace=False,
        required=False,
        help_text="shown on the study's finish page above the completion code",
    )

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
    """GET: a campaign's settings and progress (`?participants=` narrows its annotators).
    PATCH: change settings (any subset); a new `annotators` list keeps the campaign's own
    study participants in its pool."""

    parser_classes = [StrictJSONParser]

    @extend_schema(parameters=[CampaignReadFilter], responses=CampaignSerializer)
    def get(self, request, pk: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        params = CampaignReadFilter(data=request.query_params)
        params.is_valid(raise_exception=True)
        return ApiResponse(_campaign_data(campaign, params.validated_data["participants"]))

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
    language = serializers.CharField(
        help_text="the language the task was shown in when submitted (empty: unknown)"
    )
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


# --- a campaign's gold tasks ----------------------------------------------------------------------

#: Ids are bigints: a larger one names nothing.
MAX_ID = 2**63 - 1
#: Known answers per gold task: more than any campaign asks.
MAX_KNOWN = 100
MAX_EXPLANATION = 2000
#: The key of a pair's overall question in `choices` and `known`.
OVERALL = cs.OVERALL
_POINTWISE_FIELDS = ("response", "scores", "tolerance")
_PAIR_FIELDS = ("response_a", "response_b", "choices", "b_left")


class GoldTaskSerializer(serializers.Serializer):
    """A gold or attention task: a response with known scores (pointwise), or a pair with
    known choices (pairwise; `response` and `model` are A)."""

    task_id = serializers.IntegerField()
    kind = serializers.CharField(help_text="gold or attention")
    item = serializers.CharField(source="external_id", help_text="the item's id in the file")
    response = serializers.IntegerField(source="response_id", help_text="a pair's A")
    model = serializers.CharField(source="model_name")
    response_b = serializers.IntegerField(
        source="response_b_id", allow_null=True, help_text="a pair's B; null for one response"
    )
    model_b = serializers.CharField(allow_null=True, help_text="null for one response")
    b_left = serializers.BooleanField(
        allow_null=True, help_text="a pair: B is shown on the left; null for one response"
    )
    known = serializers.DictField(
        child=serializers.CharField(),
        help_text='{skill: "1".."5" or "N/A"}; a pair: {skill or "overall": a, b, tie or '
        "both_bad}, in the pair's terms (A = response)",
    )
    tolerance = serializers.IntegerField(help_text="how far a score may be (0 for a pair)")
    explanation = serializers.CharField()
    served = serializers.IntegerField(help_text="assignments of the task")
    submitted = serializers.IntegerField()
    answers = serializers.IntegerField(help_text="scores or choices given on known skills")
    correct = serializers.IntegerField(help_text="of those, correct (annotation/gold.py)")
    accuracy = serializers.FloatField(allow_null=True, help_text="correct / answers")

    class Meta:
        ref_name = "CampaignGoldTask"


def _gold_row_data(row: cs.GoldTaskRow) -> dict[str, Any]:
    values = {**dataclasses.asdict(row), "known": dict(row.known), "accuracy": row.accuracy}
    if not row.is_pair:
        values["model_b"] = values["b_left"] = None
    return GoldTaskSerializer(values).data


@extend_schema_field(SCORE_SCHEMA)
class _KnownScoreField(serializers.Field):
    """A known score: 1..5, or "N/A" (read by the project's one score rule)."""

    def to_internal_value(self, data) -> int | None:
        if data is None:
            raise serializers.ValidationError('give a score 1-5, or "N/A"')
        try:
            return score_read(data)
        except ScoreRefused as exc:
            raise serializers.ValidationError(str(exc)) from None

    def to_representation(self, value):
        return "N/A" if value is None else value


class GoldTaskInputSerializer(serializers.Serializer):
    """Create or replace a gold task. Pointwise: `response`, `scores` and `tolerance`.
    Pairwise: `response_a`, `response_b`, `choices` and `b_left`. Both: `kind` and
    `explanation`. Responses are named by id (as the dataset's items list them), skills by
    name; a pair's overall question is `overall`."""

    kind = serializers.ChoiceField(
        choices=KNOWN_SCORE_KINDS,
        default=TaskKind.GOLD,
        help_text="gold or attention (training and qualification belong to screening)",
    )
    explanation = serializers.CharField(
        max_length=MAX_EXPLANATION,
        allow_blank=True,
        required=False,
        default="",
        help_text="Markdown, shown to annotators when gold feedback is on",
    )
    response = serializers.IntegerField(
        min_value=1, max_value=MAX_ID, required=False, help_text="pointwise: the response"
    )
    scores = serializers.DictField(
        child=_KnownScoreField(),
        allow_empty=False,
        required=False,
        help_text='pointwise: {skill name: 1..5 or "N/A"}',
    )
    tolerance = serializers.IntegerField(
        min_value=0, max_value=4, required=False, help_text="pointwise: how far a score may be"
    )
    response_a = serializers.IntegerField(
        min_value=1, max_value=MAX_ID, required=False, help_text="pairwise: response A"
    )
    response_b = serializers.IntegerField(
        min_value=1, max_value=MAX_ID, required=False, help_text="pairwise: response B"
    )
    choices = serializers.DictField(
        child=serializers.ChoiceField(choices=PairChoice.choices),
        allow_empty=False,
        required=False,
        help_text='pairwise: {skill name or "overall": a, b, tie or both_bad}, A = response_a',
    )
    b_left = serializers.BooleanField(
        required=False,
        allow_null=True,
        help_text="pairwise: show B on the left; absent or null: drawn at random",
    )

    class Meta:
        ref_name = "CampaignGoldTaskInput"

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """The mode's fields, present and the other mode's absent; responses of the
        campaign's dataset; skills of the campaign, by name."""
        campaign: Campaign = self.context["campaign"]
        pairwise = campaign.mode == CampaignMode.PAIRWISE
        errors: dict[str, list[str]] = {}
        own, other = (
            (_PAIR_FIELDS, _POINTWISE_FIELDS) if pairwise else (_POINTWISE_FIELDS, _PAIR_FIELDS)
        )
        what = "a pair: response_a, response_b, choices" if pairwise else "response, scores"
        for name in other:
            if name in attrs:
                errors[name] = [f"not for a {campaign.mode} campaign, whose gold task is {what}"]
        for name in own[:3] if pairwise else own[:2]:
            if name not in attrs:
                errors.setdefault(name, ["This field is required."])
        if attrs["kind"] not in services.PAIR_KNOWN_KINDS:
            errors["kind"] = [
                "a pair is a gold pair or an attention check: screening compares the scores "
                "of single responses"
                if pairwise
                else "training and qualification tasks are set on the campaign's screening page"
            ]
        known_field = "choices" if pairwise else "scores"
        known = attrs.get(known_field) or {}
        if len(known) > MAX_KNOWN:
            errors[known_field] = [f"at most {MAX_KNOWN} known answers"]
        skill_ids = {name: pk for pk, name in cs.campaign_skill_list(campaign=campaign)}
        unknown = [k for k in known if k not in skill_ids and not (pairwise and k == OVERALL)]
        if unknown and known_field not in errors:
            errors[known_field] = [f"not a skill of this campaign: {', '.join(unknown[:10])}"]
        for name in ("response", "response_a", "response_b"):
            if name in attrs and name not in errors:
                found = (
                    Response.objects.filter(pk=attrs[name], item__dataset_id=campaign.dataset_id)
                    .select_related("item")
                    .first()
                )
                if found is None:
                    errors[name] = ["no response with this id in the campaign's dataset"]
                attrs[name] = found
        if errors:
            raise serializers.ValidationError(errors)
        attrs[known_field] = {
            None if k == OVERALL and pairwise else skill_ids[k]: v for k, v in known.items()
        }
        return attrs

    def gold_settings(self) -> dict[str, Any]:
        """Keyword arguments for gold_pair_set or gold_task_set."""
        v = self.validated_data
        common = {"kind": v["kind"], "explanation": v["explanation"]}
        if "choices" in v:
            return common | {
                "response_a": v["response_a"],
                "response_b": v["response_b"],
                "choices": v["choices"],
                "b_left": v.get("b_left"),
            }
        return common | {
            "response": v["response"],
            "scores": v["scores"],
            "tolerance": v.get("tolerance", 0),
        }


def _gold_row(campaign: Campaign, task_id: int) -> cs.GoldTaskRow | None:
    return next(
        (r for r in cs.campaign_gold_task_list(campaign=campaign) if r.task_id == task_id), None
    )


class CampaignGoldListApi(APIView):
    """GET: the campaign's gold and attention tasks with their known answers and the
    annotators' accuracy on them. POST: make a response (pointwise) or a pair (pairwise) a
    gold or attention task, or replace the known answers of one (201 new, 200 replaced)."""

    pagination_class = ApiPagination
    parser_classes = [StrictJSONParser]

    @extend_schema(responses=GoldTaskSerializer(many=True))
    def get(self, request, pk: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        rows = [_gold_row_data(r) for r in cs.campaign_gold_task_list(campaign=campaign)]
        paginator = self.pagination_class()
        page: list[dict] | None = paginator.paginate_queryset(rows, request, view=self)  # type: ignore[arg-type]  # DRF slices any sequence; the stub wants a QuerySet
        return paginator.get_paginated_response(page)

    @extend_schema(
        request=GoldTaskInputSerializer,
        responses={201: GoldTaskSerializer, 200: GoldTaskSerializer},
    )
    def post(self, request, pk: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        serializer = GoldTaskInputSerializer(data=request.data, context={"campaign": campaign})
        serializer.is_valid(raise_exception=True)
        before = set(
            Task.objects.filter(campaign=campaign, kind__in=cs.KNOWN_KINDS).values_list(
                "pk", flat=True
            )
        )
        gold_set = (
            services.gold_pair_set
            if campaign.mode == CampaignMode.PAIRWISE
            else services.gold_task_set
        )
        try:
            task = gold_set(campaign=campaign, **serializer.gold_settings())
        except ValidationError as exc:
            raise service_error(exc) from None
        row = _gold_row(campaign, task.pk)
        assert row is not None  # just written, of a known kind
        created = task.pk not in before
        return ApiResponse(_gold_row_data(row), status=201 if created else 200)


class CampaignGoldDetailApi(APIView):
    """GET: one gold or attention task. DELETE: remove it while no one has answered it
    (409 once answered, or while an annotator holds it)."""

    @extend_schema(responses=GoldTaskSerializer)
    def get(self, request, pk: int, task_id: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        row = _gold_row(campaign, task_id) if task_id <= MAX_ID else None
        if row is None:
            return _no_gold_task()
        return ApiResponse(_gold_row_data(row))

    @extend_schema(
        responses={
            204: None,
            409: OpenApiResponse(ErrorSerializer, description="answered, or being answered"),
        }
    )
    def delete(self, request, pk: int, task_id: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        if task_id > MAX_ID:
            return _no_gold_task()
        try:
            services.gold_task_remove(campaign=campaign, task_id=task_id)
        except services.GoldTaskKeptError as exc:
            body = {"detail": " ".join(exc.messages), "code": "gold_task_kept"}
            return ApiResponse(body, status=status.HTTP_409_CONFLICT)
        except ValidationError:
            return _no_gold_task()
        return ApiResponse(status=status.HTTP_204_NO_CONTENT)


def _no_gold_task() -> ApiResponse:
    body = {"detail": "no such gold or attention task in this campaign", "code": "not_found"}
    return ApiResponse(body, status=status.HTTP_404_NOT_FOUND)
