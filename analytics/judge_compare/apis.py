"""The judge comparison as JSON (docs/JUDGE_COMPARISON.md, docs/API.md):

GET /api/v1/projects/SLUG/analytics/judge-comparison?judge=A&judge=B&baseline=A
    (&measure=&skill=&resamples=)
answers the page's numbers: paired correlation differences per skill, cost against quality
with the Pareto set, system ranking agreement and the configuration differences. Computed
on request (bounded: at most 12 judges and 10,000 resamples). The project's researchers and
admins; 400 with the field's message for an unknown judge or skill, fewer than 2 judges,
a baseline that is not one of them, or resamples out of range."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from analytics.judge_compare import figures
from analytics.judge_compare.selectors import (
    compare_options,
    compare_rows,
    judge_comparison_for_project,
)
from analytics.judge_compare.views import CompareForm
from annotation.access import project_get_for_staff


def _number(help_text: str = "") -> serializers.FloatField:
    return serializers.FloatField(allow_null=True, help_text=help_text)


class IntervalSerializer(serializers.Serializer):
    estimate = _number()
    low = _number("2.5th percentile of the resamples")
    high = _number("97.5th percentile of the resamples")
    resamples = serializers.IntegerField(help_text="resamples where the figure was defined")
    items = serializers.IntegerField(required=False, help_text="distinct items resampled")
    flags = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="why the interval cannot be read as shown (empty: it can)",
    )

    class Meta:
        ref_name = "JudgeComparisonInterval"


class DifferenceSerializer(IntervalSerializer):
    p_value_a_not_better = _number("share of resamples where A - B <= 0 (one-sided)")

    class Meta:
        ref_name = "JudgeComparisonDifference"


class PairSerializer(serializers.Serializer):
    skill = serializers.CharField()
    a = serializers.CharField(help_text="judge A")
    b = serializers.CharField(help_text="judge B (the baseline, when there is one)")
    n = serializers.IntegerField(help_text="responses both judges scored, with a human score")
    items = serializers.IntegerField(help_text="the items (instructions) of those responses")
    a_value = _number("A's correlation with the people's consensus on those responses")
    b_value = _number("B's correlation on the same responses")
    a_ci = IntervalSerializer(allow_null=True)
    b_ci = IntervalSerializer(allow_null=True)
    difference = DifferenceSerializer(help_text="A - B, paired: both on the same resamples")
    too_few = serializers.CharField(help_text="empty, or why n is too few")
    note = serializers.CharField(help_text="empty, or why the interval is not shown")

    class Meta:
        ref_name = "JudgeComparisonPair"


class SkillFigureSerializer(serializers.Serializer):
    value = _number()
    n = serializers.IntegerField(help_text="responses every chosen judge scored")
    too_few = serializers.CharField(required=False)

    class Meta:
        ref_name = "JudgeComparisonSkillFigure"


class QualitySerializer(serializers.Serializer):
    judge = serializers.CharField()
    quality = _number("mean correlation over the skills counted (or the chosen skill's)")
    skills_counted = serializers.IntegerField()
    per_skill = serializers.DictField(child=SkillFigureSerializer())
    too_few = serializers.CharField()
    cost = _number("recorded cost of the runs the scores come from; null: no cost")
    judgments = serializers.IntegerField(help_text="judgments of those runs")
    per_1000 = _number("cost per 1,000 judgments; null: no cost recorded")
    no_cost = serializers.BooleanField()
    pareto = serializers.BooleanField(help_text="no other judge is as cheap and as good")

    class Meta:
        ref_name = "JudgeComparisonQuality"


class SystemSerializer(serializers.Serializer):
    system = serializers.CharField()
    human_mean = serializers.FloatField()
    judge_mean = serializers.FloatField()
    human_rank = serializers.IntegerField()
    judge_rank = serializers.IntegerField()

    class Meta:
        ref_name = "JudgeComparisonSystem"


class RankingSerializer(serializers.Serializer):
    judge = serializers.CharField()
    skill = serializers.CharField()
    n_systems = serializers.IntegerField()
    n = serializers.IntegerField(help_text="the judge's responses with a human score")
    items = serializers.IntegerField()
    kendall = _number("Kendall's tau-b of the systems' judge and human means")
    ci = IntervalSerializer(allow_null=True)
    too_few = serializers.CharField()
    note = serializers.CharField()
    systems = SystemSerializer(many=True)

    class Meta:
        ref_name = "JudgeComparisonRanking"


class DiffLineSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["head", "hunk", "del", "add", "same"])
    text = serializers.CharField(allow_blank=True)

    class Meta:
        ref_name = "JudgeComparisonDiffLine"


class ConfigSerializer(serializers.Serializer):
    judge = serializers.CharField()
    reference = serializers.BooleanField(help_text="the judge the others are diffed against")
    known = serializers.BooleanField(help_text="false: a rater of imported scores, no judge")
    kind = serializers.CharField(allow_blank=True)
    model = serializers.CharField(allow_blank=True)
    provider = serializers.CharField(allow_blank=True)
    base_url = serializers.CharField(allow_blank=True, help_text="without any credentials")
    temperature = _number()
    samples = serializers.IntegerField(allow_null=True)
    prompt = serializers.CharField(allow_blank=True, help_text="template key and version")
    differs = serializers.ListField(child=serializers.CharField())
    prompt_diff = DiffLineSerializer(many=True, allow_null=True)

    class Meta:
        ref_name = "JudgeComparisonConfig"


class JudgeComparisonSerializer(serializers.Serializer):
    judges = serializers.ListField(child=serializers.CharField())
    baseline = serializers.CharField(allow_null=True)
    reference = serializers.CharField()
    measure = serializers.ChoiceField(choices=list(figures.MEASURES))
    resamples = serializers.IntegerField()
    skills = serializers.ListField(child=serializers.CharField())
    quality_skill = serializers.CharField(allow_null=True)
    pairs = PairSerializer(many=True)
    quality = QualitySerializer(many=True)
    ranking = RankingSerializer(many=True)
    configs = ConfigSerializer(many=True)

    class Meta:
        ref_name = "JudgeComparison"


def _parameter(name: str, kind: type, **extra) -> OpenApiParameter:
    return OpenApiParameter(
        name, kind, description=str(CompareForm.base_fields[name].help_text), **extra
    )


class JudgeComparisonApi(APIView):
    """Chosen judges compared on the same responses: per skill each pair's correlations with
    the people and their paired difference, cost per 1,000 judgments against quality (the
    Pareto set), system ranking agreement (Kendall's tau-b) and configuration differences."""

    @extend_schema(
        parameters=[
            _parameter("judge", str, many=True, required=True),
            _parameter("baseline", str),
            _parameter("measure", str, enum=list(figures.MEASURES)),
            _parameter("skill", str),
            _parameter("resamples", int),
        ],
        responses=JudgeComparisonSerializer,
    )
    def get(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        rows = compare_rows(project=project)
        data = request.query_params.copy()
        data.setlist("judge", data.getlist("judge"))  # absent: none chosen (refused below)
        form = CompareForm(data, options=compare_options(rows=rows))
        if not form.is_valid():
            raise ValidationError(
                {name: [str(e) for e in errors] for name, errors in form.errors.items()}
            )
        result = judge_comparison_for_project(project=project, rows=rows, **form.compare_params())
        return ApiResponse(JudgeComparisonSerializer(result).data)
