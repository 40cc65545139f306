"""REST API of the drill-down (docs/DRILL_DOWN.md): the responses behind a figure, with
the same filters as the page, paged with limit/offset. Project researchers and admins only
(annotators 403, others 404). A filter that names nothing or a figure that does not exist is
a 400 naming the parameter and the reason."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.views import APIView

from analytics.items.selectors import (
    REPEATABLE,
    SINGLE,
    SelectionError,
    item_entries,
    item_filters_resolve,
    item_selection,
)
from annotation.access import project_get_for_staff
from flaskweb.api_errors import ApiPagination

_HELP = {
    "skill": "skill name (repeatable; any case)",
    "judge": "judge name (repeatable; one for judge_level, stratum and probe)",
    "system": "system (model) name (repeatable)",
    "domain": "domain name (repeatable)",
    "difficulty": "1-5 (repeatable)",
    "campaign": "campaign id or name: responses with a task in it",
    "human_level": "1-5 or na: the people's consensus rounded half up",
    "judge_level": "1-5 or na: the judge's value rounded half up",
    "human_bin": "1-5 in steps of 0.5: a heat-map row, the people's consensus to the nearest 0.5",
    "judge_bin": "1-5 in steps of 0.5: a heat-map column, the judge's value to the nearest 0.5",
    "stratum": "all, human_spread:<low|middle|high>, length:<low|middle|high>, "
    "domain:<name> or difficulty:<1-5> (one judge, one skill)",
    "probe": "a probe run id or probe kind of the judge (its latest run of that kind)",
    "human": "raw (default) or adjudicated human scores",
}


class _UnitSerializer(serializers.Serializer):
    skill = serializers.CharField()
    human = serializers.FloatField(allow_null=True, help_text="consensus; null: N/A or none")
    human_scored = serializers.BooleanField()
    judges = serializers.DictField(child=serializers.FloatField(allow_null=True))
    probe = serializers.JSONField(allow_null=True, help_text="[base, probe] with probe")

    class Meta:
        ref_name = "AnalyticsItemUnit"


class _HumanScoreSerializer(serializers.Serializer):
    annotator = serializers.CharField()
    skill = serializers.CharField()
    score = serializers.IntegerField(allow_null=True, help_text="null: N/A")
    rationale = serializers.CharField(allow_blank=True)
    campaign = serializers.CharField()
    task_kind = serializers.CharField()
    counted = serializers.BooleanField()
    rubric = serializers.CharField(allow_blank=True)

    class Meta:
        ref_name = "AnalyticsItemHumanScore"


class _JudgeScoreSerializer(serializers.Serializer):
    skill = serializers.CharField()
    score = serializers.IntegerField(allow_null=True)
    raw_value = serializers.FloatField(allow_null=True)
    feedback = serializers.CharField(allow_blank=True)
    rubric = serializers.CharField(allow_blank=True)

    class Meta:
        ref_name = "AnalyticsItemJudgeScore"


class _ImportedScoreSerializer(serializers.Serializer):
    rater = serializers.CharField()
    kind = serializers.CharField(help_text="human or judge")
    skill = serializers.CharField()
    score = serializers.FloatField(allow_null=True, help_text="null: N/A")
    rationale = serializers.CharField(allow_blank=True)

    class Meta:
        ref_name = "AnalyticsItemImportedScore"


class _JudgmentSerializer(serializers.Serializer):
    judge = serializers.CharField()
    run = serializers.IntegerField(source="run_id")
    probe = serializers.CharField(allow_blank=True)
    sample = serializers.IntegerField(source="sample_index")
    status = serializers.CharField()
    raw_output = serializers.CharField(allow_blank=True)
    prompt_template = serializers.CharField(allow_blank=True)
    scores = serializers.SerializerMethodField()

    class Meta:
        ref_name = "AnalyticsItemJudgment"

    @extend_schema_field(_JudgeScoreSerializer(many=True))
    def get_scores(self, row) -> list[dict]:
        keys = ("skill", "score", "raw_value", "feedback", "rubric")
        return [dict(zip(keys, score, strict=True)) for score in row.scores]


class _EntrySerializer(serializers.Serializer):
    response = serializers.IntegerField(source="response_id")
    item = serializers.IntegerField(source="texts.item_id")
    item_external_id = serializers.CharField(source="texts.item_external_id")
    dataset = serializers.CharField(source="texts.dataset")
    system = serializers.CharField(source="texts.system")
    instruction = serializers.CharField(source="texts.instruction")
    response_text = serializers.CharField(source="texts.text", allow_blank=True)
    reference_answer = serializers.CharField(source="texts.reference_answer", allow_blank=True)
    domains = serializers.ListField(child=serializers.CharField(), source="facets.domains")
    difficulty = serializers.IntegerField(allow_null=True, source="facets.difficulty")
    units = _UnitSerializer(many=True, help_text="the (response, skill) pairs selected")
    human_scores = _HumanScoreSerializer(many=True)
    judgments = _JudgmentSerializer(many=True, source="judge_outputs")
    probe_judgments = _JudgmentSerializer(many=True, source="probe_outputs")
    imported_scores = _ImportedScoreSerializer(
        many=True, source="imported", help_text="scores imported from files (people and judges)"
    )
    campaigns = serializers.SerializerMethodField()

    class Meta:
        ref_name = "AnalyticsItem"

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_campaigns(self, entry) -> list[str]:
        return [name for _pk, name in entry.campaigns]


class ItemListApi(APIView):
    """The responses behind a figure (docs/DRILL_DOWN.md): each with its instruction,
    response, reference answer, the people's scores and rationales, the judges' scores and
    raw outputs (the probe run's beside them with `probe`), ordered by response id."""

    pagination_class = ApiPagination

    @extend_schema(
        parameters=[
            OpenApiParameter(
                name,
                str,
                many=name in REPEATABLE,
                description=_HELP[name],
                explode=True if name in REPEATABLE else None,
            )
            for name in (*REPEATABLE, *SINGLE)
        ],
        responses=_EntrySerializer(many=True),
    )
    def get(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        given = {
            name: request.query_params.getlist(name)
            for name in (*REPEATABLE, *SINGLE)
            if request.query_params.getlist(name)
        }
        filters, errors = item_filters_resolve(project=project, given=given)
        if errors:
            raise serializers.ValidationError(errors)
        try:
            selection = item_selection(project=project, filters=filters)
        except SelectionError as exc:
            raise serializers.ValidationError(exc.problems) from None
        paginator = self.pagination_class()
        ids: list[int] | None = paginator.paginate_queryset(
            selection.response_ids,  # type: ignore[arg-type]  # DRF slices any sequence
            request,
            view=self,
        )
        entries = item_entries(project=project, selection=selection, response_ids=ids or [])
        data = _EntrySerializer(entries, many=True).data
        return paginator.get_paginated_response(data)
