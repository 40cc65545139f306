"""REST API for reading a project's data (its admins and researchers): a dataset with its
composition, its items (filtered as on the dataset page), one item with its responses, and a
campaign's assignments with their scores. Annotators get 403, non-members 404.

Unlike the annotators' API these reads are not blind: they carry model names and every
annotator's scores, which is what the project's staff analyse.
"""

from __future__ import annotations

from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation import access, selectors
from annotation.models import (
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    Difficulty,
    HumanScore,
)
from flaskweb.api_errors import ApiPagination

#: A score as the API writes it: 1..5, or "N/A".
SCORE_SCHEMA = {
    "oneOf": [
        {"type": "integer", "minimum": 1, "maximum": 5},
        {"type": "string", "enum": ["N/A"]},
    ]
}


# --- datasets ------------------------------------------------------------------------------------


class _CountSerializer(serializers.Serializer):
    name = serializers.CharField()
    n = serializers.IntegerField()

    class Meta:
        ref_name = "DatasetCount"


class _LevelSerializer(serializers.Serializer):
    level = serializers.IntegerField(allow_null=True)
    n = serializers.IntegerField()

    class Meta:
        ref_name = "DatasetLevelCount"


class DatasetSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    project = serializers.CharField(source="project.slug")
    description = serializers.CharField()
    items = serializers.IntegerField()
    responses = serializers.IntegerField()
    models = _CountSerializer(many=True, help_text="responses per model")
    skills = _CountSerializer(many=True, help_text="items per skill")
    domains = _CountSerializer(many=True, help_text="items per domain")
    difficulty = _LevelSerializer(many=True, help_text="items per level (null: none given)")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    class Meta:
        ref_name = "DatasetDetail"


class DatasetDetailApi(APIView):
    """A dataset and its composition: responses per model, items per skill, domain and
    difficulty level."""

    @extend_schema(responses=DatasetSerializer)
    def get(self, request, pk: int):
        dataset, _ = access.dataset_get_for_user(request.user, pk)
        stats = selectors.dataset_stats(dataset=dataset)
        data = {
            "id": dataset.pk,
            "name": dataset.name,
            "project": dataset.project,
            "description": dataset.description,
            "items": stats["items"],
            "responses": stats["responses"],
            "models": [{"name": r["model_name"], "n": r["n"]} for r in stats["models"]],
            "skills": [{"name": r["skill__name"], "n": r["n"]} for r in stats["skills"]],
            "domains": stats["domains"],
            "difficulty": [{"level": r["difficulty"], "n": r["n"]} for r in stats["difficulty"]],
            "created_at": dataset.created_at,
            "updated_at": dataset.updated_at,
        }
        return ApiResponse(DatasetSerializer(data).data)


class _ItemSkillSerializer(serializers.Serializer):
    name = serializers.CharField(source="skill.name")
    rank = serializers.IntegerField()
    checklist = serializers.ListField(child=serializers.CharField())

    class Meta:
        ref_name = "ItemSkill"


class _Names(serializers.ListField):
    def __init__(self, **kwargs) -> None:
        super().__init__(child=serializers.CharField(), read_only=True, **kwargs)

    def to_representation(self, manager) -> list[str]:
        return [o.name for o in manager.all()]


class ItemRowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    external_id = serializers.CharField(help_text="the item's id in the imported file")
    instruction = serializers.CharField()
    difficulty = serializers.IntegerField(allow_null=True)
    skills = _ItemSkillSerializer(source="item_skills", many=True)
    domains = _Names()
    response_count = serializers.IntegerField()

    class Meta:
        ref_name = "ItemRow"


class _ResponseSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    model = serializers.CharField(source="model_name")
    text = serializers.CharField()

    class Meta:
        ref_name = "ItemResponse"


class ItemSerializer(ItemRowSerializer):
    reference_answer = serializers.CharField()
    source_task = serializers.CharField()
    responses = _ResponseSerializer(many=True)
    response_count = None

    class Meta:
        ref_name = "Item"


class ItemFilterSerializer(serializers.Serializer):
    skill = serializers.CharField(required=False, max_length=200, help_text="a skill's name")
    domain = serializers.CharField(required=False, max_length=200, help_text="a domain's name")
    difficulty = serializers.ChoiceField(choices=Difficulty.choices, required=False)
    q = serializers.CharField(
        required=False, max_length=200, help_text="words of the instruction, or an item id"
    )

    class Meta:
        ref_name = "ItemFilters"


class ItemListApi(APIView):
    """A dataset's items, in import order, with their skills, domains and level (response
    texts are on each item: GET items/{id}/)."""

    pagination_class = ApiPagination

    @extend_schema(parameters=[ItemFilterSerializer], responses=ItemRowSerializer(many=True))
    def get(self, request, pk: int):
        dataset, _ = access.dataset_get_for_user(request.user, pk)
        params = ItemFilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        v = params.validated_data
        project = dataset.project
        errors, ids = {}, {}
        for key, queryset in (
            ("skill", selectors.skill_list_for_project(project=project)),
            ("domain", selectors.domain_list_for_project(project=project)),
        ):
            if key in v:
                found = queryset.filter(name=v[key]).values_list("pk", flat=True).first()
                if found is None:
                    errors[key] = [f"no {key} named {v[key]} in this project"]
                ids[key] = found
        if errors:
            raise serializers.ValidationError(errors)
        items = selectors.item_list_for_dataset(
            dataset=dataset,
            skill_id=ids.get("skill"),
            domain_id=ids.get("domain"),
            difficulty=v.get("difficulty"),
            search=v.get("q", "").strip(),
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(items, request, view=self)
        return paginator.get_paginated_response(ItemRowSerializer(page, many=True).data)


class ItemDetailApi(APIView):
    """An item with its reference answer, skills (with checklists), domains and every
    response."""

    @extend_schema(responses=ItemSerializer)
    def get(self, request, pk: int):
        item = access.item_get_for_user(request.user, pk)
        return ApiResponse(ItemSerializer(item).data)


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
