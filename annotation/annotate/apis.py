"""JSON API of the annotation workflow, for external crowd front-ends and load tests.

The same services as the annotate pages: `assignment_next`, `human_score_submit`,
`assignment_skip`. Responses are blind: they never carry the model name, the task kind
(gold, attention, hidden repeat) or anyone else's scores. Errors are JSON objects
`{"detail": message, "code": code}`; 400s add the offending fields (in `fields`, and at the
top level as v1 clients read them).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation import access
from annotation.annotate import selectors
from annotation.models import Campaign
from annotation.parsers import ScoreRefused, score_read
from annotation.services.assignments import (
    MAX_RATIONALE,
    AssignmentError,
    ScoreInput,
    assignment_next,
    assignment_skip,
    human_score_submit,
)
from flaskweb.api_errors import ApiPagination, ErrorSerializer, invalid_body
from flaskweb.db import instance_from

MAX_TIME_MS = 24 * 3600 * 1000  # a day; also what the submit service accepts per score
#: Ids are bigints: a larger one names nothing, and would overflow the claim's fixed SQL.
MAX_ID = 2**63 - 1
NO_TASK_HEADER = "No-Task-Reason"


def _error(http_status: int, message: str, code: str, **fields) -> ApiResponse:
    return ApiResponse({"detail": message, "code": code, **fields}, status=http_status)


class ScoreField(serializers.IntegerField):
    """A score 1-5 or null (N/A), read by the project's one score rule
    (annotation.parsers.score_read): DRF's IntegerField would take "5 ", "４", 4.0 and
    "4.0" as numbers."""

    def __init__(self, **kwargs) -> None:
        super().__init__(min_value=1, max_value=5, allow_null=True, **kwargs)

    def to_internal_value(self, data):
        try:
            return score_read(data)
        except ScoreRefused as exc:
            raise serializers.ValidationError(str(exc)) from None


def _invalid(errors: dict) -> ApiResponse:
    return ApiResponse(invalid_body(errors), status=400)


# --- campaigns ------------------------------------------------------------------------------


class AnnotatorCampaignListApi(APIView):
    """The caller's campaigns as an annotator."""

    pagination_class = ApiPagination

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        name = serializers.CharField()
        project = serializers.CharField(source="project_name")
        status = serializers.CharField()
        instructions = serializers.CharField()
        submitted = serializers.IntegerField(source="done", help_text="your submitted tasks")
        quota = serializers.IntegerField(
            allow_null=True, help_text="how many tasks you may submit; null = no limit"
        )
        available = serializers.IntegerField(help_text="tasks you could be given now")
        has_open_task = serializers.BooleanField(help_text="you hold a lease: next resumes it")

        class Meta:
            ref_name = "AnnotatorCampaign"

    @extend_schema(responses=OutputSerializer(many=True))
    def get(self, request):
        rows = selectors.campaign_list_for_annotator(user=request.user)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(rows, request, view=self)
        instructions = dict(
            Campaign.objects.filter(pk__in=[r.id for r in page]).values_list("pk", "instructions")
        )
        data = [{**vars(r), "instructions": instructions[r.id]} for r in page]
        return paginator.get_paginated_response(self.OutputSerializer(data, many=True).data)


# --- next task ------------------------------------------------------------------------------


class AssignmentNextApi(APIView):
    """Claim the caller's current or next task in a campaign (a lease)."""

    class OutputSerializer(serializers.Serializer):
        class SkillSerializer(serializers.Serializer):
            skill_id = serializers.IntegerField()
            name = serializers.CharField()
            criterion = serializers.CharField()
            anchors = serializers.ListField(
                child=serializers.CharField(), help_text="what scores 1 to 5 mean"
            )
            checklist = serializers.ListField(child=serializers.CharField())

            class Meta:
                ref_name = "AssignmentSkill"

        assignment_id = serializers.IntegerField()
        expires_at = serializers.DateTimeField()
        instruction = serializers.CharField()
        reference = serializers.CharField(
            required=False, help_text="present only when the campaign shows references"
        )
        response = serializers.CharField(help_text="the text to score (its model is hidden)")
        skills = SkillSerializer(many=True)

        class Meta:
            ref_name = "AssignmentNext"

    @extend_schema(
        request=None,
        responses={
            200: OutputSerializer,
            204: OpenApiResponse(description=f"nothing to do now; see the {NO_TASK_HEADER} header"),
            404: ErrorSerializer,
        },
    )
    def post(self, request, campaign_id: int):
        # This and submit are the hot path (bench/annotate_load.py): each read is one fixed
        # SQL statement, and the payload is built without a serializer pass. The claim
        # checks the pool itself; only an empty claim asks why.
        if campaign_id > MAX_ID:
            return _error(404, "no such campaign", "not_found")
        campaign = instance_from(Campaign, {"id": campaign_id})
        claimed = assignment_next(campaign=campaign, annotator=request.user)
        if claimed is None:
            if not access.campaign_in_pool(user=request.user, campaign_id=campaign_id):
                return _error(404, "no such campaign", "not_found")
            response = ApiResponse(status=status.HTTP_204_NO_CONTENT)
            response[NO_TASK_HEADER] = selectors.no_task_reason(
                campaign=campaign, user=request.user
            )
            return response
        card = selectors.task_card_for_annotator(user=request.user, assignment_id=claimed.pk)
        assert card is not None  # the assignment was just claimed by this user
        return ApiResponse(_task_payload(card))


def _next_for(user, campaign_id: int) -> dict:
    """The `next` / `next_reason` fields of a chained submit (claimed after the submission
    committed, in a transaction of its own, exactly as POST …/next/ would)."""
    campaign = instance_from(Campaign, {"id": campaign_id})
    claimed = assignment_next(campaign=campaign, annotator=user)
    if claimed is None:
        return {"next": None, "next_reason": selectors.no_task_reason(campaign=campaign, user=user)}
    card = selectors.task_card_for_annotator(user=user, assignment_id=claimed.pk)
    assert card is not None  # the assignment was just claimed by this user
    return {"next": _task_payload(card)}


def _task_payload(card: selectors.TaskCard) -> dict:
    """The card as OutputSerializer describes it (and tests check it field by field)."""
    payload = {
        "assignment_id": card.assignment_id,
        "expires_at": serializers.DateTimeField().to_representation(card.expires_at),
        "instruction": card.instruction,
        "response": card.response,
        "skills": [
            {
                "skill_id": skill.skill_id,
                "name": skill.name,
                "criterion": skill.criterion,
                "anchors": list(skill.anchors),
                "checklist": list(skill.checklist),
            }
            for skill in card.skills
        ],
    }
    if card.reference is not None:
        payload["reference"] = card.reference
    return payload


# --- submit and skip ------------------------------------------------------------------------


class AssignmentSubmitApi(APIView):
    """Record the scores of a task: one per asked skill, 1-5 or null for N/A."""

    class InputSerializer(serializers.Serializer):
        class ScoreSerializer(serializers.Serializer):
            skill_id = serializers.IntegerField(min_value=1)
            score = ScoreField()
            rationale = serializers.CharField(
                required=False, allow_blank=True, max_length=MAX_RATIONALE, default=""
            )
            time_ms = serializers.IntegerField(
                required=False, allow_null=True, min_value=0, max_value=MAX_TIME_MS, default=None
            )

            class Meta:
                ref_name = "AssignmentScoreInput"

        scores = ScoreSerializer(many=True, allow_empty=False)
        active_ms = serializers.IntegerField(
            required=False, allow_null=True, min_value=0, max_value=MAX_TIME_MS, default=None
        )
        next = serializers.BooleanField(
            required=False,
            default=False,
            help_text="also claim the next task and return it in `next` (one round trip "
            "per item, as the scoring page does)",
        )

        class Meta:
            ref_name = "AssignmentSubmit"

    class OutputSerializer(serializers.Serializer):
        assignment_id = serializers.IntegerField()
        status = serializers.CharField()
        late = serializers.BooleanField(help_text="accepted after the lease ran out")
        next = AssignmentNextApi.OutputSerializer(
            required=False, allow_null=True, help_text="with next=true: the next task, or null"
        )
        next_reason = serializers.CharField(
            required=False, help_text=f"with next=true and no task: why (as {NO_TASK_HEADER})"
        )

        class Meta:
            ref_name = "AssignmentSubmitted"

    class DuplicateSerializer(serializers.Serializer):
        assignment_id = serializers.IntegerField()
        duplicate = serializers.BooleanField()
        next = AssignmentNextApi.OutputSerializer(required=False, allow_null=True)
        next_reason = serializers.CharField(required=False)

        class Meta:
            ref_name = "AssignmentSubmitDuplicate"

    @extend_schema(
        request=InputSerializer,
        responses={
            201: OutputSerializer,
            200: DuplicateSerializer,
            400: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
        },
    )
    def post(self, request, assignment_id: int):
        serializer = self.InputSerializer(data=request.data)
        if not serializer.is_valid():
            return _invalid(serializer.errors)
        data = serializer.validated_data
        try:
            result = human_score_submit(
                assignment_id=assignment_id,
                annotator=request.user,
                scores=[ScoreInput(**row) for row in data["scores"]],
                active_ms=data["active_ms"],
            )
        except AssignmentError as exc:
            # not_found (also someone else's assignment) / lease_lost, skipped / invalid,
            # incomplete / invalid: the scores do not match the skills the task asks, a 400
            # on the scores field like any field error, keeping its own stable code
            code = {"not_found": 404, "lease_lost": 409, "skipped": 409}.get(exc.code)
            if code is None:
                body = {**invalid_body({"scores": [str(exc)]}), "code": exc.code}
                return ApiResponse(body, status=status.HTTP_400_BAD_REQUEST)
            return _error(code, str(exc), exc.code)
        if not result.created:
            body = {"assignment_id": assignment_id, "duplicate": True}
        else:
            body = {"assignment_id": assignment_id, "status": "submitted", "late": result.late}
        if data["next"]:
            body.update(_next_for(request.user, result.assignment.campaign_id))
        return ApiResponse(body, status=201 if result.created else 200)


class AssignmentSkipApi(APIView):
    """Give a task back with a reason; `flag` reports the item as broken."""

    class InputSerializer(serializers.Serializer):
        reason = serializers.CharField(max_length=300)
        flag = serializers.BooleanField(required=False, default=False)

        class Meta:
            ref_name = "AssignmentSkip"

    class OutputSerializer(serializers.Serializer):
        assignment_id = serializers.IntegerField(source="pk")
        status = serializers.CharField()
        flagged = serializers.BooleanField()

        class Meta:
            ref_name = "AssignmentSkipped"

    @extend_schema(
        request=InputSerializer,
        responses={
            200: OutputSerializer,
            400: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
        },
    )
    def post(self, request, assignment_id: int):
        serializer = self.InputSerializer(data=request.data)
        if not serializer.is_valid():
            return _invalid(serializer.errors)
        try:
            assignment = assignment_skip(
                assignment_id=assignment_id, annotator=request.user, **serializer.validated_data
            )
        except AssignmentError as exc:
            if exc.code == "not_found":
                return _error(404, str(exc), exc.code)
            # the reason was validated above, so what is left is a task no longer active
            return _error(409, str(exc), "not_active")
        return ApiResponse(self.OutputSerializer(assignment).data)
