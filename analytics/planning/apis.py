"""How many labels are enough, as JSON (docs/LABEL_PLANNING.md):

GET /api/v1/projects/SLUG/label-planning?judge=&half_width=&budget=&dataset=&models=
answers, per skill the judge scored, the pilot's figures, the labels each design needs for
the half-width and the minimum detectable difference for the budget. Computed on request.
The project's researchers and admins; 400 with the field's message for an unknown judge,
dataset or model, a half-width not in (0, 4] or a budget under 2."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from analytics.planning.pilot import ALPHA, POWER, ROUGH_BELOW, SkillPlan
from analytics.planning.selectors import label_plan_for_project, planning_options, planning_rows
from analytics.planning.views import PlanningForm
from annotation.access import project_get_for_staff


def _number(help_text: str = "") -> serializers.FloatField:
    return serializers.FloatField(allow_null=True, help_text=help_text)


class PilotSerializer(serializers.Serializer):
    n_labeled = serializers.IntegerField(
        help_text="labeled responses: a judge score and a non-N/A human score"
    )
    n_human_na = serializers.IntegerField(help_text="judged responses whose human scores are N/A")
    mean_y = _number("the mean of Y (a response's mean human score) over the labeled")
    sd_y = _number("the sd of Y (population), null under 2 labeled")
    rho = _number("Pearson of Y and the judge's score, null when either does not vary")
    lam = _number("PPI++'s lambda, the frame's other responses unlabeled")
    lam_active = _number("the active design's lambda: the least-squares slope, in [0, 1]")
    offset_active = _number("the active design's offset: its prediction is lam_active Yhat + this")
    n_frame = serializers.IntegerField(help_text="T: the frame's responses the judge scored")
    n_frame_labeled = serializers.IntegerField(help_text="of which already labeled")
    own_scale = serializers.BooleanField(help_text="the judge scores on its own scale")

    class Meta:
        ref_name = "LabelPlanningPilot"


class NeedSerializer(serializers.Serializer):
    labels = serializers.IntegerField(allow_null=True)
    reachable = serializers.BooleanField(
        allow_null=True,
        help_text="false: not reachable even labeling the whole frame; null: not computable",
    )

    class Meta:
        ref_name = "LabelPlanningNeed"


class NeedsSerializer(serializers.Serializer):
    human = NeedSerializer(help_text="people only")
    ppi = NeedSerializer(help_text="uniform PPI++ over the frame")
    active = NeedSerializer(help_text="active selection over the frame (expected labels)")

    class Meta:
        ref_name = "LabelPlanningNeeds"


class ResidualBinSerializer(serializers.Serializer):
    label = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.label
    low = _number("included; null: no lower edge")
    high = _number("excluded; null: no upper edge")
    n_labeled = serializers.IntegerField()
    rms = _number("the bin's own RMS error |Y - lambda_a Yhat|, null without labels")
    rms_shrunk = serializers.FloatField(help_text="shrunk toward the overall RMS: what is used")
    n_frame = serializers.IntegerField()

    class Meta:
        ref_name = "LabelPlanningResidualBin"


class DetectableSerializer(serializers.Serializer):
    budget = serializers.IntegerField()
    human = _number("people only")
    ppi = _number("with the judge's differences on the frame's items (PPI++)")
    sd = _number("the sd of the paired differences used")
    rho = _number("the judge's rho on them")
    source = serializers.ChoiceField(  # type: ignore[assignment]  # a field, not Field.source
        choices=["pilot differences", "scores"],
        help_text="scores: too few paired differences, sd_y x sqrt(2) and the rho on scores",
    )
    n_differences = serializers.IntegerField(help_text="the pilot's paired differences")
    n_frame_items = serializers.IntegerField(help_text="frame items with two judged systems")

    class Meta:
        ref_name = "LabelPlanningDetectable"


class SkillPlanSerializer(serializers.Serializer):
    skill = serializers.CharField()
    pilot = PilotSerializer()
    labels_needed = NeedsSerializer()
    residual_bins = ResidualBinSerializer(many=True)
    min_detectable_difference = DetectableSerializer()
    too_few = serializers.CharField(
        allow_null=True, help_text="null, or why the pilot is too small to plan from"
    )
    rough = serializers.BooleanField(help_text=f"fewer than {ROUGH_BELOW} labeled")
    notes = serializers.ListField(child=serializers.CharField())

    class Meta:
        ref_name = "LabelPlanningSkill"


class LabelPlanSerializer(serializers.Serializer):
    judge = serializers.CharField(allow_null=True, help_text="null: no judge has scores")
    judges = serializers.ListField(child=serializers.CharField())
    half_width = serializers.FloatField()
    budget = serializers.IntegerField()
    alpha = serializers.FloatField()
    power = serializers.FloatField()
    dataset = serializers.IntegerField(allow_null=True)
    models = serializers.ListField(child=serializers.CharField())
    skills = SkillPlanSerializer(many=True)

    class Meta:
        ref_name = "LabelPlanning"


def skill_plan_json(plan: SkillPlan) -> dict:
    p, d = plan.pilot, plan.detectable
    return {
        "skill": plan.skill,
        "pilot": {
            "n_labeled": p.n_labeled,
            "n_human_na": p.n_human_na,
            "mean_y": p.mean_y,
            "sd_y": p.sd_y,
            "rho": p.rho,
            "lam": p.lam,
            "lam_active": p.lam_active,
            "offset_active": p.offset_active,
            "n_frame": p.n_frame,
            "n_frame_labeled": p.n_frame_labeled,
            "own_scale": p.own_scale,
        },
        "labels_needed": {
            name: {"labels": need.labels, "reachable": need.reachable}
            for name, need in (("human", plan.human), ("ppi", plan.ppi), ("active", plan.active))
        },
        "residual_bins": [
            {
                "label": b.label,
                "low": b.low,
                "high": b.high,
                "n_labeled": b.n_labeled,
                "rms": b.rms,
                "rms_shrunk": b.rms_shrunk,
                "n_frame": b.n_frame,
            }
            for b in p.bins
        ],
        "min_detectable_difference": {
            "budget": d.budget,
            "human": d.human,
            "ppi": d.ppi,
            "sd": d.sd,
            "rho": d.rho,
            "source": d.source,
            "n_differences": p.differences.n,
            "n_frame_items": p.differences.n_frame_items,
        },
        "too_few": plan.too_few or None,
        "rough": plan.rough,
        "notes": list(plan.notes),
    }


def _parameter(name: str, kind: type, **extra) -> OpenApiParameter:
    return OpenApiParameter(
        name, kind, description=str(PlanningForm.base_fields[name].help_text), **extra
    )


class LabelPlanningApi(APIView):
    """Per skill: the labels needed for a 95% interval of the half-width for people only,
    uniform PPI++ and active selection, and the minimum detectable difference between two
    systems (80% power) for the budget, from the project's labels and the judge's scores."""

    @extend_schema(
        parameters=[
            _parameter("judge", str),
            _parameter("half_width", float),
            _parameter("budget", int),
            _parameter("dataset", int),
            _parameter("models", str, many=True),
        ],
        responses=LabelPlanSerializer,
    )
    def get(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        rows = planning_rows(project=project)
        options = planning_options(project=project, rows=rows)
        form = PlanningForm(request.query_params, options=options)
        if not form.is_valid():
            raise ValidationError(
                {name: [str(e) for e in errors] for name, errors in form.errors.items()}
            )
        plan = label_plan_for_project(rows=rows, **form.plan_params())
        body = {
            "judge": plan.judge,
            "judges": options.judges,
            "half_width": plan.half_width,
            "budget": plan.budget,
            "alpha": ALPHA,
            "power": POWER,
            "dataset": plan.dataset_id,
            "models": plan.models,
            "skills": [skill_plan_json(s) for s in plan.skills],
        }
        return ApiResponse(LabelPlanSerializer(body).data)
