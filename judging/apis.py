"""REST API of the judging app (machine clients, token or session auth): judges, run
estimates, runs and their lifecycle, and a run's judgments with per-skill scores. The same
services as the pages; the same access rules (non-members 404, annotators 403). API keys are
never accepted nor shown: a judge names a provider, and where the provider's key is kept is
a site admin's decision. A judge's input refuses keys it does not declare (400)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.access import project_get_for_staff
from annotation.models import Project
from annotation.selectors import dataset_list_for_project
from flaskweb.api_errors import ApiPagination, ErrorSerializer, service_error, state_conflict
from judging import access, prompts, selectors, services
from judging.baselines import BASELINES
from judging.forms import (
    PROVIDER_HELP,
    judge_fields,
    judge_settings_errors,
    validate_extra_params,
)
from judging.models import JudgeConfig, JudgeKind, JudgeRun, JudgmentStatus, RunStatus
from judging.services.calls import judge_limits

#: Input keys that would carry a secret (in any case): refused with a message of their own.
SECRET_INPUT_KEYS = ("api_key", "key", "token", "authorization")
#: Input keys that would say where a key is kept: a site admin's decision (providers).
KEY_LOCATION_KEYS = ("api_key_env", "api_key_file", "key_env", "key_file", "env")
#: Keys a browser's form adds to a session request; not a setting, so never refused.
FORM_KEYS = frozenset({"csrfmiddlewaretoken"})
#: A judgment's scores: skill name -> 1..5 or "N/A".
SCORES_SCHEMA = {
    "type": "object",
    "additionalProperties": {
        "oneOf": [
            {"type": "integer", "minimum": 1, "maximum": 5},
            {"type": "string", "enum": ["N/A"]},
        ]
    },
}


class ConflictSerializer(serializers.Serializer):
    detail = serializers.CharField()
    code = serializers.ChoiceField(choices=["run_state"], help_text="always run_state")
    status = serializers.ChoiceField(choices=RunStatus.choices, help_text="the run's status")

    class Meta:
        ref_name = "JudgingRunConflict"


def _conflict(run: JudgeRun, action: str) -> ApiResponse:
    """409: the run's status does not allow the action (docs/API.md, "Errors")."""
    return state_conflict(f"a {run.status} run cannot be {action}", "run_state", run.status)


# --- output shapes --------------------------------------------------------------------------------


class TemplateRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    key = serializers.CharField()
    version = serializers.IntegerField()
    name = serializers.CharField()
    with_reference = serializers.BooleanField()

    class Meta:
        ref_name = "JudgingPromptTemplateRef"


class JudgeOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.CharField()
    baseline = serializers.CharField()
    provider = serializers.SerializerMethodField(help_text="The provider's name.")
    base_url = serializers.CharField()
    model = serializers.CharField()
    temperature = serializers.FloatField()
    max_tokens = serializers.IntegerField()
    extra_params = serializers.JSONField()
    timeout_seconds = serializers.FloatField()
    max_attempts = serializers.IntegerField()
    samples = serializers.IntegerField()
    use_reference = serializers.BooleanField()
    prompt_template = TemplateRefSerializer(allow_null=True)
    requests_per_minute = serializers.IntegerField(allow_null=True)
    tokens_per_minute = serializers.IntegerField(allow_null=True)
    price_per_1k_prompt = serializers.DecimalField(max_digits=10, decimal_places=6)
    price_per_1k_completion = serializers.DecimalField(max_digits=10, decimal_places=6)
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "JudgingJudge"

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_provider(self, judge: JudgeConfig) -> str | None:
        return judge.provider.name if judge.provider is not None else None


class ProviderLiveSerializer(serializers.Serializer):
    in_flight = serializers.IntegerField(
        source="provider.in_flight", help_text="its calls on the wire now, from every run"
    )
    requests_per_minute = serializers.IntegerField(
        allow_null=True, source="rpm", help_text="its declared limit (null: none)"
    )
    tokens_per_minute = serializers.IntegerField(allow_null=True, source="tpm")
    learned_window = serializers.FloatField(
        allow_null=True,
        source="provider.window",
        help_text="with no declared limit: the calls in flight it accepts, learned from its"
        " 429s (null: none refused yet, or a declared limit)",
    )
    throttled_last_minute = serializers.IntegerField(source="provider.throttled_last_minute")
    retries_last_minute = serializers.IntegerField(source="provider.retries_last_minute")
    latency_p50_s = serializers.FloatField(allow_null=True, source="provider.latency_p50_s")
    latency_p95_s = serializers.FloatField(allow_null=True, source="provider.latency_p95_s")

    class Meta:
        ref_name = "JudgingProviderLive"


class RunLiveSerializer(serializers.Serializer):
    """What a running run's calls are doing now, from every worker (docs/JUDGING.md,
    "Watching a run")."""

    in_flight = serializers.IntegerField(source="run.in_flight")
    throttled_last_minute = serializers.IntegerField(source="run.throttled_last_minute")
    retries_last_minute = serializers.IntegerField(source="run.retries_last_minute")
    errors_last_minute = serializers.IntegerField(source="run.errors_last_minute")
    judgments_per_minute = serializers.FloatField(
        allow_null=True, help_text="over the last minute (null: too few data yet)"
    )
    eta_seconds = serializers.FloatField(allow_null=True, help_text="null: too few data yet")
    waiting_for_provider = serializers.BooleanField(
        help_text="its calls were refused (429) in the last minute and it is waiting them out"
    )
    provider = ProviderLiveSerializer(source="*")

    class Meta:
        ref_name = "JudgingRunLive"


class RunOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    judge = serializers.IntegerField(source="judge_id")
    judge_name = serializers.CharField(source="judge.name")
    dataset = serializers.IntegerField(source="dataset_id")
    campaign = serializers.IntegerField(source="campaign_id", allow_null=True)
    status = serializers.ChoiceField(choices=RunStatus.choices)
    total = serializers.IntegerField()
    finished = serializers.SerializerMethodField()
    percent = serializers.SerializerMethodField()
    ok = serializers.SerializerMethodField()
    # the metaclass moves declared fields off the class, so BaseSerializer.partial is unshadowed
    partial = serializers.SerializerMethodField()  # type: ignore[assignment]
    parse_failed = serializers.IntegerField()
    failed = serializers.IntegerField()
    cached = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost = serializers.DecimalField(max_digits=14, decimal_places=6)
    budget = serializers.DecimalField(max_digits=14, decimal_places=6, allow_null=True)
    estimate = serializers.JSONField()
    error = serializers.CharField()
    settings_snapshot = serializers.JSONField()
    probe = serializers.CharField(help_text="a bias probe's kind; blank: an ordinary run")
    base_run = serializers.IntegerField(
        source="base_run_id", allow_null=True, help_text="the run a probe run probes"
    )
    probe_params = serializers.JSONField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    live = serializers.SerializerMethodField(
        help_text="while it runs: calls in flight, the provider's pace, 429s and retries in"
        " the last minute, judgments a minute and the ETA; null otherwise (and while the"
        " store of these figures does not answer)"
    )

    class Meta:
        ref_name = "JudgingRun"

    def _progress(self, run: JudgeRun) -> selectors.RunProgress:
        cache = self.context.setdefault("progress", {})
        if run.pk not in cache:
            cache[run.pk] = selectors.run_progress(run=run)
        return cache[run.pk]

    def get_finished(self, run: JudgeRun) -> int:
        return self._progress(run).finished

    def get_percent(self, run: JudgeRun) -> int:
        return self._progress(run).percent

    def get_ok(self, run: JudgeRun) -> int:
        return self._progress(run).ok

    def get_partial(self, run: JudgeRun) -> int:
        return self._progress(run).partial

    @extend_schema_field(RunLiveSerializer(allow_null=True))
    def get_live(self, run: JudgeRun) -> dict[str, Any] | None:
        if run.status != RunStatus.RUNNING or run.judge.provider_id is None:
            return None
        rpm, tpm = judge_limits(run.judge)
        try:
            pace = selectors.run_pace(
                run=selectors.run_key("judge", run.pk),
                provider_id=run.judge.provider_id,
                remaining=self._progress(run).waiting,
                rpm=rpm,
                tpm=tpm,
            )
        except selectors.ActivityUnavailable:  # their store is away: the rest still answers
            return None
        return RunLiveSerializer(pace).data


def _run_data(run: JudgeRun) -> dict[str, Any]:
    return RunOutputSerializer(run, context={}).data


class StrictInputSerializer(serializers.Serializer):
    """An input serializer that refuses keys it does not declare (400, one message per key
    under the key) instead of ignoring them: a client that sends `API_KEY_ENV`, `headers`
    or `provider_id` learns that they did nothing, rather than getting a 201 for a judge
    that does something else. The unknown keys are reported with the other fields'
    errors, in one answer."""

    def unknown_key_message(self, key: str) -> str:
        writable = [name for name, field in self.fields.items() if not field.read_only]
        close = difflib.get_close_matches(key.lower(), writable, n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]!r}?" if close else "."
        return f"Unknown field {key!r}: it is not one of this request's fields{hint}"

    def to_internal_value(self, data: Any) -> Any:
        unknown: dict[str, list[str]] = {}
        if isinstance(data, Mapping):
            unknown = {
                str(key): [self.unknown_key_message(str(key))]
                for key in data
                if key not in self.fields and key not in FORM_KEYS
            }
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                raise serializers.ValidationError({**exc.detail, **unknown}) from None
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


# --- providers ------------------------------------------------------------------------------------


class ProviderOutputSerializer(serializers.Serializer):
    """What a researcher needs to pick a provider; never where its key is kept."""

    name = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.label
    base_urls = serializers.ListField(child=serializers.CharField())
    needs_key = serializers.BooleanField()
    is_local = serializers.BooleanField()
    shared_cache = serializers.BooleanField()
    prices = serializers.JSONField()
    requests_per_minute = serializers.IntegerField(allow_null=True)
    tokens_per_minute = serializers.IntegerField(allow_null=True)

    class Meta:
        ref_name = "JudgingProvider"


class ProviderListApi(APIView):
    """The providers the project's LLM judges may use (declared and approved by site
    admins); give one's `name` as `provider` when creating a judge."""

    pagination_class = ApiPagination

    @extend_schema(responses=ProviderOutputSerializer(many=True))
    def get(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        providers = selectors.provider_choices_for_project(project=project)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(providers, request, view=self)
        return paginator.get_paginated_response(ProviderOutputSerializer(page, many=True).data)


# --- judges ---------------------------------------------------------------------------------------


class JudgeListApi(APIView):
    pagination_class = ApiPagination

    @extend_schema(responses=JudgeOutputSerializer(many=True))
    def get(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        judges = selectors.judge_list_for_project(project=project)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(judges, request, view=self)
        return paginator.get_paginated_response(JudgeOutputSerializer(page, many=True).data)


class JudgeCreateApi(APIView):
    """Create an LLM judge (a provider a site admin declared, by name; a model; optionally
    one of the provider's base URLs) or a baseline judge (baseline: token-f1 or rouge-l)."""

    class InputSerializer(StrictInputSerializer):
        name = serializers.CharField(max_length=200)
        kind = serializers.ChoiceField(choices=[JudgeKind.LLM, JudgeKind.BASELINE])
        baseline = serializers.ChoiceField(choices=sorted(BASELINES), required=False)
        provider = serializers.CharField(
            max_length=60, required=False, allow_blank=True, help_text=PROVIDER_HELP
        )
        base_url = serializers.CharField(
            max_length=500,
            required=False,
            allow_blank=True,
            help_text="One of the provider's base URLs; blank for its first.",
        )
        model = serializers.CharField(max_length=200, required=False, allow_blank=True)
        temperature = serializers.FloatField(min_value=0, max_value=2, default=0.0)
        max_tokens = serializers.IntegerField(min_value=1, max_value=1_000_000, default=1024)
        extra_params = serializers.JSONField(default=dict, validators=[validate_extra_params])
        timeout_seconds = serializers.FloatField(min_value=1, max_value=900, default=60.0)
        max_attempts = serializers.IntegerField(min_value=1, max_value=20, default=5)
        samples = serializers.IntegerField(min_value=1, max_value=20, default=1)
        use_reference = serializers.BooleanField(default=True)
        prompt_template = serializers.IntegerField(
            required=False, allow_null=True, help_text="Id of one of the project's templates."
        )
        requests_per_minute = serializers.IntegerField(min_value=1, required=False, allow_null=True)
        tokens_per_minute = serializers.IntegerField(min_value=1, required=False, allow_null=True)
        price_per_1k_prompt = serializers.DecimalField(
            max_digits=10, decimal_places=6, min_value=Decimal(0), default=Decimal(0)
        )
        price_per_1k_completion = serializers.DecimalField(
            max_digits=10, decimal_places=6, min_value=Decimal(0), default=Decimal(0)
        )

        class Meta:
            ref_name = "JudgingJudgeCreate"

        def unknown_key_message(self, key: str) -> str:
            if key.lower() in SECRET_INPUT_KEYS:
                return "Never send an API key: keys belong to providers, which site admins declare."
            if key.lower() in KEY_LOCATION_KEYS:
                return "Where a key is kept is a site admin's decision: choose a provider."
            return super().unknown_key_message(key)

        def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
            project: Project = self.context["project"]
            name = attrs["name"].strip()
            if JudgeConfig.objects.filter(project=project, name=name).exists():
                raise serializers.ValidationError(
                    {"name": ["This project has a judge of that name."]}
                )
            provider_name = attrs.get("provider") or ""
            attrs["provider"] = None
            if provider_name:
                attrs["provider"] = (
                    selectors.provider_choices_for_project(project=project)
                    .filter(name=provider_name)
                    .first()
                )
                if attrs["provider"] is None:
                    raise serializers.ValidationError(
                        {"provider": ["No such provider is offered to this project."]}
                    )
            template_id = attrs.get("prompt_template")
            if template_id is not None:
                attrs["prompt_template"] = (
                    selectors.template_choices_for_project(project=project)
                    .filter(pk=template_id)
                    .first()
                )
                if attrs["prompt_template"] is None:
                    raise serializers.ValidationError(
                        {"prompt_template": ["No such template in this project."]}
                    )
            errors = judge_settings_errors(attrs)
            if errors:
                raise serializers.ValidationError({k: [v] for k, v in errors.items()})
            return attrs

    @extend_schema(
        request=InputSerializer,
        responses={201: JudgeOutputSerializer},
        examples=[
            OpenApiExample(
                "LLM judge",
                request_only=True,
                value={
                    "name": "GPT judge",
                    "kind": "llm",
                    "provider": "openai",
                    "model": "gpt-4o-mini",
                },
            ),
            OpenApiExample(
                "Baseline",
                request_only=True,
                value={"name": "ROUGE-L", "kind": "baseline", "baseline": "rouge-l"},
            ),
        ],
    )
    def post(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        serializer = self.InputSerializer(data=request.data, context={"project": project})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            judge = services.judge_config_create(
                project=project,
                name=data["name"],
                kind=data["kind"],
                created_by=request.user,
                **judge_fields(data),
            )
        except ValidationError as exc:
            raise service_error(exc) from None
        return ApiResponse(JudgeOutputSerializer(judge).data, status=status.HTTP_201_CREATED)


class JudgeDetailApi(APIView):
    @extend_schema(responses=JudgeOutputSerializer)
    def get(self, request, pk: int):
        judge = access.judge_get_for_staff(request.user, pk)
        return ApiResponse(JudgeOutputSerializer(judge).data)


# --- runs -----------------------------------------------------------------------------------------


class _RunScopeSerializer(serializers.Serializer):
    """A dataset of the judge's project, or one of its campaigns (which names its dataset)."""

    dataset = serializers.IntegerField(required=False, allow_null=True)
    campaign = serializers.IntegerField(required=False, allow_null=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        project: Project = self.context["project"]
        dataset = campaign = None
        if attrs.get("dataset") is not None:
            dataset = dataset_list_for_project(project=project).filter(pk=attrs["dataset"]).first()
            if dataset is None:
                raise serializers.ValidationError({"dataset": ["No such dataset in this project."]})
        if attrs.get("campaign") is not None:
            campaigns = selectors.campaign_choices_for_project(project=project)
            campaign = campaigns.filter(pk=attrs["campaign"]).first()
            if campaign is None:
                raise serializers.ValidationError(
                    {"campaign": ["No activated campaign of that id in this project."]}
                )
            if dataset is not None and campaign.dataset_id != dataset.pk:
                raise serializers.ValidationError(
                    {"campaign": ["This campaign scores another dataset."]}
                )
            dataset = campaign.dataset
        if dataset is None:
            raise serializers.ValidationError(
                {"non_field_errors": ["Give a dataset or a campaign."]}
            )
        attrs.update(dataset=dataset, campaign=campaign)
        return attrs


class EstimateOutputSerializer(serializers.Serializer):
    calls = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField(help_text="An upper bound: max_tokens a call.")
    cost = serializers.DecimalField(max_digits=14, decimal_places=6)

    class Meta:
        ref_name = "JudgingRunEstimate"


class JudgeRunEstimateApi(APIView):
    """What a run of this judge would take (calls, tokens, cost). Creates nothing."""

    class InputSerializer(_RunScopeSerializer):
        class Meta:
            ref_name = "JudgingRunEstimateInput"

    @extend_schema(request=InputSerializer, responses=EstimateOutputSerializer)
    def post(self, request, pk: int):
        judge = access.judge_get_for_staff(request.user, pk)
        serializer = self.InputSerializer(data=request.data, context={"project": judge.project})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            estimate = services.judge_run_estimate(
                judge=judge, dataset=data["dataset"], campaign=data["campaign"]
            )
        except prompts.PromptError as exc:
            raise serializers.ValidationError({"non_field_errors": [str(exc)]}) from None
        return ApiResponse(EstimateOutputSerializer(estimate).data)


class JudgeRunCreateApi(APIView):
    """A pending run with its estimate; POST runs/<id>/start/ to start it."""

    class InputSerializer(_RunScopeSerializer):
        budget = serializers.DecimalField(
            max_digits=14,
            decimal_places=6,
            min_value=Decimal("0.000001"),
            required=False,
            allow_null=True,
        )
        pairwise_against = serializers.CharField(
            required=False,
            allow_blank=True,
            max_length=200,
            help_text="a model of the dataset: compare every other model's response with its "
            "response to the same item, in both orders (blank: score one by one)",
        )

        class Meta:
            ref_name = "JudgingRunCreate"

    @extend_schema(request=InputSerializer, responses={201: RunOutputSerializer})
    def post(self, request, pk: int):
        judge = access.judge_get_for_staff(request.user, pk)
        serializer = self.InputSerializer(data=request.data, context={"project": judge.project})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            run = services.judge_run_create(
                judge=judge,
                dataset=data["dataset"],
                campaign=data["campaign"],
                budget=data.get("budget"),
                pairwise_against=data.get("pairwise_against", ""),
                created_by=request.user,
            )
        except ValidationError as exc:
            raise service_error(exc) from None
        except prompts.PromptError as exc:
            raise serializers.ValidationError({"non_field_errors": [str(exc)]}) from None
        return ApiResponse(_run_data(run), status=status.HTTP_201_CREATED)


class JudgeRunDetailApi(APIView):
    @extend_schema(responses=RunOutputSerializer)
    def get(self, request, pk: int):
        run = access.run_get_for_staff(request.user, pk)
        return ApiResponse(_run_data(run))


class RunStartInputSerializer(serializers.Serializer):
    budget = serializers.DecimalField(
        max_digits=14,
        decimal_places=6,
        min_value=Decimal("0.000001"),
        required=False,
        allow_null=True,
        help_text="A new budget (null: no limit); leave it out to keep the run's budget.",
    )


def _start(request, pk: int, input_class: type[serializers.Serializer], action: str):
    run = access.run_get_for_staff(request.user, pk)
    serializer = input_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    budget = serializer.validated_data.get("budget", services.KEEP_BUDGET)
    try:
        started = services.judge_run_start(run=run, budget=budget)
    except ValidationError as exc:  # e.g. the provider awaits a site admin's approval
        raise service_error(exc) from None
    if not started:
        return _conflict(run, action)
    run.refresh_from_db()
    return ApiResponse(_run_data(run))


class JudgeRunStartApi(APIView):
    """pending -> running: the fan-out is enqueued once the request commits. 409 otherwise."""

    class InputSerializer(RunStartInputSerializer):
        class Meta:
            ref_name = "JudgingRunStart"

    @extend_schema(
        request=InputSerializer, responses={200: RunOutputSerializer, 409: ConflictSerializer}
    )
    def post(self, request, pk: int):
        return _start(request, pk, self.InputSerializer, "started")


class JudgeRunResumeApi(APIView):
    """paused or failed -> running (judgments already made are kept). A run paused by its
    budget needs a higher one. 409 otherwise."""

    class InputSerializer(RunStartInputSerializer):
        class Meta:
            ref_name = "JudgingRunResume"

    @extend_schema(
        request=InputSerializer, responses={200: RunOutputSerializer, 409: ConflictSerializer}
    )
    def post(self, request, pk: int):
        return _start(request, pk, self.InputSerializer, "resumed")


def _set_status(request, pk: int, run_status: str, action: str):
    run = access.run_get_for_staff(request.user, pk)
    if not services.judge_run_set_status(run=run, status=run_status):
        return _conflict(run, action)
    run.refresh_from_db()
    return ApiResponse(_run_data(run))


class JudgeRunPauseApi(APIView):
    """running -> paused: queued calls do nothing until the run is resumed. 409 otherwise."""

    @extend_schema(request=None, responses={200: RunOutputSerializer, 409: ConflictSerializer})
    def post(self, request, pk: int):
        return _set_status(request, pk, RunStatus.PAUSED, "paused")


class JudgeRunCancelApi(APIView):
    """pending, running or paused -> cancelled, for good. 409 otherwise."""

    @extend_schema(request=None, responses={200: RunOutputSerializer, 409: ConflictSerializer})
    def post(self, request, pk: int):
        return _set_status(request, pk, RunStatus.CANCELLED, "cancelled")


# --- judgments ------------------------------------------------------------------------------------


class JudgmentListApi(APIView):
    pagination_class = ApiPagination

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        response = serializers.IntegerField(source="response_id")
        item = serializers.CharField(source="response.item.external_id")
        model_name = serializers.CharField(source="response.model_name")
        sample_index = serializers.IntegerField()
        status = serializers.ChoiceField(choices=JudgmentStatus.choices)
        scores = serializers.SerializerMethodField()
        feedback = serializers.SerializerMethodField()
        rubrics = serializers.SerializerMethodField()
        parse_method = serializers.CharField()
        error = serializers.CharField()
        raw_output = serializers.CharField()
        prompt_tokens = serializers.IntegerField()
        completion_tokens = serializers.IntegerField()
        latency_ms = serializers.IntegerField(allow_null=True)
        attempts = serializers.IntegerField()
        from_cache = serializers.BooleanField()
        prompt_template = serializers.IntegerField(source="prompt_template_id", allow_null=True)
        created_at = serializers.DateTimeField()

        class Meta:
            ref_name = "JudgingJudgment"

        @extend_schema_field(SCORES_SCHEMA)
        def get_scores(self, judgment) -> dict:
            return {s.skill.name: "N/A" if s.is_na else s.score for s in judgment.scores.all()}

        @extend_schema_field(OpenApiTypes.OBJECT)
        def get_feedback(self, judgment) -> dict:
            return {s.skill.name: s.feedback for s in judgment.scores.all() if s.feedback}

        @extend_schema_field(OpenApiTypes.OBJECT)
        def get_rubrics(self, judgment) -> dict:
            """skill -> the rubric version scored under ("built-in v1", "project:demo v1")."""
            return {s.skill.name: s.rubric.label for s in judgment.scores.all() if s.rubric}

    @extend_schema(
        parameters=[
            OpenApiParameter("status", str, enum=JudgmentStatus.values, required=False),
        ],
        responses=OutputSerializer(many=True),
    )
    def get(self, request, pk: int):
        run = access.run_get_for_staff(request.user, pk)
        wanted = request.query_params.get("status") or None
        if wanted is not None and wanted not in JudgmentStatus.values:
            raise serializers.ValidationError(
                {"status": [f"one of {', '.join(JudgmentStatus.values)}"]}
            )
        judgments = selectors.judgment_list_for_run(run=run, status=wanted)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(judgments, request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)


# --- scores, k samples aggregated -----------------------------------------------------------------


class RunScoresApi(APIView):
    """Each judged response's score per skill, aggregated over the run's k samples (mean of
    the scores, N/A left out), with the spread kept. Keyset pages by response id."""

    class OutputSerializer(serializers.Serializer):
        class RowSerializer(serializers.Serializer):
            response = serializers.IntegerField(source="response_id")
            item = serializers.CharField()
            model_name = serializers.CharField()
            skill = serializers.CharField()
            samples = serializers.IntegerField()
            na = serializers.IntegerField(help_text="samples that said N/A")
            mean = serializers.FloatField(
                allow_null=True, help_text="null when every sample said N/A"
            )
            median = serializers.FloatField(allow_null=True)
            min = serializers.IntegerField(source="low", allow_null=True)
            max = serializers.IntegerField(source="high", allow_null=True)
            stdev = serializers.FloatField(
                allow_null=True, help_text="null with fewer than two scores"
            )

            class Meta:
                ref_name = "JudgingScoreSummary"

        results = RowSerializer(many=True)
        next_after = serializers.IntegerField(
            allow_null=True, help_text="pass as ?after= for the next page; null at the end"
        )

        class Meta:
            ref_name = "JudgingScoreSummaryPage"

    @extend_schema(
        parameters=[
            OpenApiParameter("after", int, required=False, description="a response id"),
            OpenApiParameter("limit", int, required=False, description="responses, 1-500"),
        ],
        responses=OutputSerializer,
    )
    def get(self, request, pk: int):
        run = access.run_get_for_staff(request.user, pk)
        numbers = {}
        for name, default in (("after", 0), ("limit", 100)):
            try:
                numbers[name] = int(request.query_params.get(name, default))
            except ValueError:
                raise serializers.ValidationError({name: ["a whole number"]}) from None
        after, limit = numbers["after"], numbers["limit"]
        if not 1 <= limit <= 500:
            raise serializers.ValidationError({"limit": ["1 to 500"]})
        ids = selectors.run_judged_response_ids(run=run, after_id=after, limit=limit)
        rows = selectors.run_score_summaries(run=run, response_ids=ids)
        body = {"results": rows, "next_after": ids[-1] if len(ids) == limit else None}
        return ApiResponse(self.OutputSerializer(body).data)


class PairwiseRowSerializer(serializers.Serializer):
    name = serializers.CharField()
    pairs = serializers.IntegerField(help_text="pairs with a verdict in both orders")
    consistent = serializers.IntegerField()
    inconsistent = serializers.IntegerField()
    inconsistency_rate = serializers.FloatField(allow_null=True)
    first_position_share = serializers.FloatField(
        allow_null=True, help_text="share of non-tie verdicts that favoured the first shown"
    )
    challenger_wins = serializers.IntegerField()
    anchor_wins = serializers.IntegerField()
    ties = serializers.IntegerField()
    challenger_win_rate = serializers.FloatField(allow_null=True)

    class Meta:
        ref_name = "PairwiseRow"


class PairwiseModelRowSerializer(PairwiseRowSerializer):
    model = serializers.CharField(help_text="the challenger model")

    class Meta:
        ref_name = "PairwiseModelRow"


class RunPairwiseApi(APIView):
    """Position consistency and outcomes of a pairwise run (per skill and Overall; Overall
    per challenger model). Verdicts count only where both orders were read. 400 (code
    not_pairwise) for a run that scores responses one by one."""

    RowSerializer = PairwiseRowSerializer

    class OutputSerializer(serializers.Serializer):
        anchor_model = serializers.CharField()
        rows = PairwiseRowSerializer(many=True, help_text="per skill, and Overall")
        by_model = PairwiseModelRowSerializer(many=True, help_text="Overall, per challenger model")
        preference_accuracy = serializers.JSONField(
            allow_null=True,
            help_text="a run against 'chosen' on a preference set: accuracy per subset and "
            "overall, with bootstrap intervals (docs/JUDGING.md); null otherwise",
        )

        class Meta:
            ref_name = "PairwiseReport"

    @extend_schema(responses={200: OutputSerializer, 400: ErrorSerializer})
    def get(self, request, pk: int):
        run = access.run_get_for_staff(request.user, pk)
        if not run.pairwise_against:
            return ApiResponse(
                {
                    "detail": "this run scores responses one by one; it has no pairs",
                    "code": "not_pairwise",
                },
                status=400,
            )
        report = selectors.pairwise_report(run=run)
        rows = self.RowSerializer(report.rows, many=True).data
        by_model = [
            {"model": model, **self.RowSerializer(row).data} for model, row in report.by_model
        ]
        accuracy = selectors.preference_accuracy(run=run)
        return ApiResponse(
            {
                "anchor_model": report.anchor_model,
                "rows": rows,
                "by_model": by_model,
                "preference_accuracy": None if accuracy is None else accuracy.as_dict(),
            }
        )
