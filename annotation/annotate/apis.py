"""JSON API of the annotation workflow, for external crowd front-ends and load tests.

The same services as the annotate pages: `assignment_next`, `human_score_submit`,
`assignment_skip`. Responses are blind: they never carry the model name, the task kind
(gold, attention, hidden repeat) or anyone else's scores. Errors are JSON objects
`{"detail": message, "code": code}`; 400s add the offending fields (in `fields`, and at the
top level as v1 clients read them).
"""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation import access
from annotation.annotate import selectors
from annotation.models import Campaign, TaskKind
from annotation.parsers import ScoreRefused, score_read
from annotation.services.assignments import (
    MAX_RATIONALE,
    AssignmentError,
    ScoreInput,
    assignment_next,
    assignment_skip,
    human_score_submit,
)
from annotation.services.preferences import (
    SHOWN_CHOICES,
    PreferenceInput,
    human_preference_submit,
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


class JsonFirstNegotiation(DefaultContentNegotiation):
    """DRF's content negotiation with its common answer given without parsing: a request
    that asks for nothing in particular (no Accept header, `*/*` or `application/json`; no
    `?format=` or format suffix) gets the first renderer, JSON, with the media type DRF
    would pick. Anything else is DRF's own negotiation. On next and submit, DRF's parsing
    of the Accept header cost about a twentieth of the web process's CPU (bench/README.md
    "Hot-path CPU"); tests/annotation/test_api_negotiation.py holds the two equal."""

    PLAIN_ACCEPT = frozenset({None, "*/*", "application/json"})

    def select_renderer(self, request, renderers, format_suffix=None):
        meta = request.META
        if (
            not format_suffix
            and not meta.get("QUERY_STRING")
            and meta.get("HTTP_ACCEPT") in self.PLAIN_ACCEPT
            and renderers
            and renderers[0].media_type == "application/json"
        ):
            return renderers[0], renderers[0].media_type
        return super().select_renderer(request, renderers, format_suffix)


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


# --- progress -------------------------------------------------------------------------------


class AnnotatorProgressApi(APIView):
    """The caller's progress and pace in a campaign, as the scoring page shows it. Kept out
    of next/submit, which are the hot path: a front-end asks for it when it redraws."""

    class OutputSerializer(serializers.Serializer):
        done = serializers.IntegerField(help_text="tasks you submitted here (every kind)")
        total = serializers.IntegerField(
            help_text="your quota, or without one: done + the task you hold + the tasks "
            "still open to you now"
        )
        total_is_quota = serializers.BooleanField()
        remaining = serializers.IntegerField(help_text="total - done, at least 0")
        percent = serializers.IntegerField(help_text="done of total, 0-100")
        active_ms = serializers.IntegerField(
            help_text="focused time of your submitted tasks here, in milliseconds"
        )
        break_every = serializers.IntegerField(
            allow_null=True,
            help_text="a break is suggested after every N submitted tasks (training and "
            "qualification tasks do not count)",
        )
        break_minutes = serializers.IntegerField(allow_null=True)
        tasks_until_break = serializers.IntegerField(allow_null=True)
        break_due = serializers.BooleanField(
            help_text="your last submitted task that counts completed a round of break_every tasks"
        )

        class Meta:
            ref_name = "AnnotatorProgress"

    @extend_schema(responses={200: OutputSerializer, 404: ErrorSerializer})
    def get(self, request, campaign_id: int):
        if campaign_id > MAX_ID:
            return _error(404, "no such campaign", "not_found")
        try:
            campaign = access.campaign_get_for_annotator(user=request.user, campaign_id=campaign_id)
        except Campaign.DoesNotExist:
            return _error(404, "no such campaign", "not_found")
        progress = selectors.annotator_progress(campaign=campaign, user=request.user)
        return ApiResponse(progress.as_json())


# --- next task ------------------------------------------------------------------------------


class AssignmentNextApi(APIView):
    """Claim the caller's current or next task in a campaign (a lease)."""

    content_negotiation_class = JsonFirstNegotiation

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

        class PairSerializer(serializers.Serializer):
            class QuestionSerializer(serializers.Serializer):
                skill_id = serializers.IntegerField(
                    allow_null=True, help_text="null: the overall question"
                )
                name = serializers.CharField(help_text='the skill, or "Overall"')

                class Meta:
                    ref_name = "AssignmentPairQuestion"

            left = serializers.CharField(help_text="the response shown on the left (A)")
            right = serializers.CharField(help_text="the response shown on the right (B)")
            questions = QuestionSerializer(many=True, help_text="answer each one")
            choices = serializers.ListField(
                child=serializers.ChoiceField(choices=list(SHOWN_CHOICES)),
                help_text="the choices offered, by side: left, right, tie, both_bad",
            )
            strength = serializers.BooleanField(
                help_text="a left or right choice may say how much: 1 slightly, 2 much"
            )
            rationale = serializers.BooleanField(help_text="a rationale may be given")

            class Meta:
                ref_name = "AssignmentPair"

        assignment_id = serializers.IntegerField()
        expires_at = serializers.DateTimeField()
        instruction = serializers.CharField()
        reference = serializers.CharField(
            required=False, help_text="present only when the campaign shows references"
        )
        response = serializers.CharField(
            help_text="the text to score (its model is hidden); empty for a pair task"
        )
        skills = SkillSerializer(many=True)
        pair = PairSerializer(
            required=False,
            help_text="a pairwise campaign's task: two responses to compare (no scores)",
        )

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


#: How the payload writes `expires_at` (one field for every payload: its output depends
#: only on the settings and the active time zone, not on any state of its own).
_EXPIRES_AT = serializers.DateTimeField()


def _task_payload(card: selectors.TaskCard) -> dict:
    """The card as OutputSerializer describes it (and tests check it field by field)."""
    payload = {
        "assignment_id": card.assignment_id,
        "expires_at": _EXPIRES_AT.to_representation(card.expires_at),
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
    if card.pair is not None:
        questions = [{"skill_id": s.skill_id, "name": s.name} for s in card.pair.questions.skills]
        if card.pair.questions.overall:
            questions.append({"skill_id": None, "name": "Overall"})
        payload["pair"] = {
            "left": card.pair.left,
            "right": card.pair.right,
            "questions": questions,
            "choices": card.pair.choices,
            "strength": card.pair.questions.strength,
            "rationale": card.pair.questions.rationale,
        }
    return payload


# --- submit and skip ------------------------------------------------------------------------


class FeedbackSerializer(serializers.Serializer):
    class SkillSerializer(serializers.Serializer):
        skill = serializers.CharField()
        given = serializers.CharField(help_text='"1".."5" or "N/A"')
        expected = serializers.CharField(help_text='"1".."5" or "N/A"')
        agrees = serializers.BooleanField()

        class Meta:
            ref_name = "TrainingFeedbackSkill"

    skills = SkillSerializer(many=True)
    explanations = serializers.ListField(child=serializers.CharField(), help_text="Markdown")

    class Meta:
        ref_name = "TrainingFeedback"


def _training_feedback(assignment) -> dict | None:
    """The expected scores and explanations after a training answer (docs/SCREENING.md)."""
    found = selectors.gold_feedback_for_assignment(assignment=assignment)
    if found is None:
        return None
    return {
        "skills": [
            {"skill": r.skill_name, "given": r.given, "expected": r.known, "agrees": r.agrees}
            for r in found.rows
        ],
        "explanations": found.explanations,
    }


_SUBMIT_KEYS = frozenset({"scores", "active_ms", "next", "language"})
_SCORE_KEYS = frozenset({"skill_id", "score", "rationale", "time_ms"})
_LANGUAGES = frozenset(code for code, _ in settings.LANGUAGES)


def _plain_int(value, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _plain_ms(row: dict, key: str) -> bool:
    value = row.get(key)
    return value is None or _plain_int(value, 0, MAX_TIME_MS)


def _plain_text(value) -> bool:
    """A rationale CharField keeps as it is: no surrounding space, NUL or lone surrogate."""
    if type(value) is not str:
        return False
    if value != value.strip() or len(value) > MAX_RATIONALE or "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def submit_body_plain(body) -> dict | None:
    """The submit body's validated data when it is in the plain form clients send (JSON
    scores with int skill ids and scores, no extra keys), exactly as InputSerializer would
    return it; None for anything else, which the serializer then validates (and explains).

    The submit is the hot path: building InputSerializer (DRF deep-copies its declared
    fields, nested ones included, per instance) and running its fields cost about a tenth
    of the web process's CPU per next + submit cycle (bench/README.md "Hot-path CPU").
    tests/annotation/test_submit_body_plain.py checks that both give the same result."""
    if type(body) is not dict or not body.keys() <= _SUBMIT_KEYS:
        return None
    scores = body.get("scores")
    if type(scores) is not list or not scores:
        return None
    rows = []
    for row in scores:
        if type(row) is not dict or not row.keys() <= _SCORE_KEYS:
            return None
        score = row.get("score", ...)
        if not _plain_int(row.get("skill_id"), 1, MAX_ID) or not (
            score is None or _plain_int(score, 1, 5)
        ):
            return None
        if not _plain_ms(row, "time_ms"):
            return None
        rationale = row.get("rationale", "")
        if not _plain_text(rationale):
            return None
        rows.append(
            {
                "skill_id": row["skill_id"],
                "score": score,
                "rationale": rationale,
                "time_ms": row.get("time_ms"),
            }
        )
    nxt = body.get("next", False)
    language = body.get("language", "")  # absent: ""; sent, a code ("" is refused)
    if type(nxt) is not bool or not _plain_ms(body, "active_ms"):
        return None
    if "language" in body and (type(language) is not str or language not in _LANGUAGES):
        return None
    return {"scores": rows, "active_ms": body.get("active_ms"), "next": nxt, "language": language}


class AssignmentSubmitApi(APIView):
    """Record the scores of a task: one per asked skill, 1-5 or null for N/A; or, for a
    pair task, the preferences: one per question, by side (left, right, tie, both_bad)."""

    content_negotiation_class = JsonFirstNegotiation

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

        class PreferenceSerializer(serializers.Serializer):
            skill_id = serializers.IntegerField(
                min_value=1, max_value=MAX_ID, allow_null=True, help_text="null: overall"
            )
            choice = serializers.ChoiceField(choices=list(SHOWN_CHOICES))
            strength = serializers.ChoiceField(
                choices=[1, 2], required=False, allow_null=True, default=None
            )
            rationale = serializers.CharField(
                required=False, allow_blank=True, max_length=MAX_RATIONALE, default=""
            )
            time_ms = serializers.IntegerField(
                required=False, allow_null=True, min_value=0, max_value=MAX_TIME_MS, default=None
            )

            class Meta:
                ref_name = "AssignmentPreferenceInput"

        scores = ScoreSerializer(
            many=True, allow_empty=False, required=False, help_text="a task scoring one response"
        )
        preferences = PreferenceSerializer(
            many=True, allow_empty=False, required=False, help_text="a pair task"
        )
        active_ms = serializers.IntegerField(
            required=False, allow_null=True, min_value=0, max_value=MAX_TIME_MS, default=None
        )
        next = serializers.BooleanField(
            required=False,
            default=False,
            help_text="also claim the next task and return it in `next` (one round trip "
            "per item, as the scoring page does)",
        )
        language = serializers.ChoiceField(
            choices=[code for code, _ in settings.LANGUAGES],
            required=False,
            default="",
            help_text="the language the client showed the task in, recorded with the scores "
            "(a code of the site's languages; left out: unknown)",
        )

        class Meta:
            ref_name = "AssignmentSubmit"

        def validate(self, attrs):
            if "scores" in attrs and "preferences" in attrs:
                raise serializers.ValidationError(
                    {"scores": ["send scores (one response) or preferences (a pair), not both"]}
                )
            if "scores" not in attrs and "preferences" not in attrs:
                raise serializers.ValidationError(
                    {"scores": ["This field is required (or preferences, for a pair task)."]}
                )
            return attrs

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
        feedback = FeedbackSerializer(
            required=False,
            help_text="only after a training task of screening: the expected scores and why",
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
        data = submit_body_plain(request.data)
        if data is None:  # anything but the plain form: the serializer decides, and explains
            serializer = self.InputSerializer(data=request.data)
            if not serializer.is_valid():
                return _invalid(serializer.errors)
            data = serializer.validated_data
        field = "scores" if "scores" in data else "preferences"
        try:
            if field == "scores":
                result = human_score_submit(
                    assignment_id=assignment_id,
                    annotator=request.user,
                    scores=[ScoreInput(**row) for row in data["scores"]],
                    active_ms=data["active_ms"],
                    language=data["language"],
                )
            else:
                result = human_preference_submit(
                    assignment_id=assignment_id,
                    annotator=request.user,
                    preferences=[PreferenceInput(**row) for row in data["preferences"]],
                    active_ms=data["active_ms"],
                    shown=True,
                    language=data["language"],
                )
        except AssignmentError as exc:
            # not_found (also someone else's assignment) / lease_lost, skipped / invalid,
            # incomplete / invalid: the scores do not match the skills the task asks, a 400
            # on the scores field like any field error, keeping its own stable code
            code = {"not_found": 404, "lease_lost": 409, "skipped": 409}.get(exc.code)
            if code is None:
                body = {**invalid_body({field: [str(exc)]}), "code": exc.code}
                return ApiResponse(body, status=status.HTTP_400_BAD_REQUEST)
            return _error(code, str(exc), exc.code)
        if not result.created:
            body = {"assignment_id": assignment_id, "duplicate": True}
        else:
            body = {"assignment_id": assignment_id, "status": "submitted", "late": result.late}
        if result.task_kind == TaskKind.TRAINING:  # screening's training: always explained
            body["feedback"] = _training_feedback(result.assignment)
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
