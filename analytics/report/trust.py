"""The judge trust page (docs/JUDGE_TRUST.md): one judge's calibration, strata, N/A and
stochasticity figures from the report snapshot of the query's filters (never computed in the
request: the worker stores them as the "trust.N" parts), and the calibrated copy of a judge's
run, asked for from the page (POST) or the API and made by a worker.

- GET  /projects/SLUG/analytics/trust/?trust_judge=NAME&filters: the page (the report's own
  `judge` filter keeps its meaning).
- POST /projects/SLUG/analytics/trust/calibrate/ (judge, snapshot, optional run): a copy.
- POST /api/v1/projects/SLUG/analytics/trust/calibrated-copy {"judge", "snapshot"?, "run"?}:
  202 with the source run and the calibrated judge's name.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from analytics import tasks
from analytics.models import ReportSnapshot
from analytics.report import chart_data, parts, snapshots
from analytics.report.views import ReportFilterForm, project_options
from annotation.access import project_get_for_staff
from annotation.models import Project
from flaskweb.htmx import HtmxHttpRequest, template_for
from judging.models import JudgeRun
from judging.selectors import judge_get_by_name, pointwise_run_get, pointwise_run_latest
from judging.services.calibrated import CalibrationRefused, calibrated_name

TRUST = "analytics/report/trust.html"
COPY_STATUS = "analytics/report/_trust_copy.html"

# --- reads of the snapshot ------------------------------------------------------------------


def trust_judges(snapshot: ReportSnapshot) -> list[str]:
    """The judges of the snapshot's trust report (none for a snapshot made before it)."""
    return snapshots.snapshot_part(snapshot, "trust.judges") or []


def trust_of(snapshot: ReportSnapshot, judge: str) -> dict[str, Any] | None:
    judges = trust_judges(snapshot)
    if judge not in judges:
        return None
    return snapshots.snapshot_part(snapshot, parts.trust_part(judges.index(judge)))


def prediction_powered_of(snapshot: ReportSnapshot, judge: str) -> dict[str, Any]:
    """The judge's prediction-powered estimates laid out per skill ({"skills"}: chart_data.
    prediction_powered_skills; none when the report has none for it), or {"missing": True}
    for a snapshot made before these figures existed."""
    judges = snapshots.snapshot_part(snapshot, parts.PREDICTION_POWERED_JUDGES)
    if judges is None:
        return {"missing": True}
    if judge not in judges:
        return {"skills": []}
    stored = snapshots.snapshot_part(snapshot, parts.prediction_powered_part(judges.index(judge)))
    return {"skills": chart_data.prediction_powered_skills(stored)}


def calibration_maps(figures: dict[str, Any] | None) -> dict[str, list[list[float]]]:
    """skill -> the fitted isotonic map of the judge's trust figures (skills with one)."""
    calibration = (figures or {}).get("calibration") or {}
    return {skill: cal["map"] for skill, cal in sorted(calibration.items()) if cal.get("map")}


# --- the calibrated copy ----------------------------------------------------------------------


def calibrated_copy_request(
    *, project: Project, snapshot: ReportSnapshot, judge: str, run_id: int | None, user
) -> JudgeRun:
    """Check that the copy can be made (the judge has maps in the snapshot and a finished
    pointwise run: `run_id`, else its latest) and enqueue the worker's task on commit.
    Returns the source run. Raises CalibrationRefused with the reason."""
    if not calibration_maps(trust_of(snapshot, judge)):
        raise CalibrationRefused(f"the report has no calibration map for judge {judge!r}")
    config = judge_get_by_name(project=project, name=judge)
    if config is None:
        raise CalibrationRefused(f"the project has no judge {judge!r}")
    run = (
        pointwise_run_get(project=project, run_id=run_id)
        if run_id is not None
        else pointwise_run_latest(judge=config)
    )
    if run is None or run.judge_id != config.pk:
        raise CalibrationRefused(f"judge {judge!r} has no such finished pointwise run")
    if run.status != "done" or run.probe or run.settings_snapshot.get("calibrated_from_run"):
        raise CalibrationRefused(
            f"run {run.pk} cannot be calibrated (not an ordinary finished run)"
        )
    user_id = user.pk if user is not None and user.is_authenticated else 0
    transaction.on_commit(
        lambda: tasks.trust_calibrated_copy_task.delay(snapshot.pk, judge, run.pk, user_id)  # type: ignore[attr-defined]
    )
    return run


def calibrated_copy_make(*, snapshot_id: int, judge: str, run_id: int, user_id: int = 0):
    """The worker's side: the copy of run `run_id` under the maps of snapshot `snapshot_id`
    (judging.services.calibrated.judge_run_calibrated_copy: idempotent). None when the
    snapshot or the run is gone."""
    from judging.services.calibrated import judge_run_calibrated_copy

    snapshot = ReportSnapshot.objects.select_related("project").filter(pk=snapshot_id).first()
    if snapshot is None:
        return None
    run = pointwise_run_get(project=snapshot.project, run_id=run_id)
    if run is None:
        return None
    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    return judge_run_calibrated_copy(
        run=run,
        maps=calibration_maps(trust_of(snapshot, judge)),
        source={
            "report_snapshot": snapshot.pk,
            "params": snapshot.params,
            "computed": snapshot.finished_at.isoformat() if snapshot.finished_at else None,
        },
        created_by=user,
    )


# --- the page -------------------------------------------------------------------------------

#: The Bland-Altman chart's frame (SVG user units) and ranges.
BA_WIDTH, BA_HEIGHT, BA_PAD = 320, 200, 28
BA_X = (1.0, 5.0)
BA_Y = (-4.0, 4.0)


def _bland_altman_svg(ba: dict[str, Any], *, lines: bool = True) -> dict[str, Any]:
    """Coordinates of the Bland-Altman chart (mean of judge and human on x, judge - human
    on y): circles sized by count, the bias and the limits of agreement as lines (not
    drawn without `lines`: too few responses)."""
    w, h, pad = BA_WIDTH, BA_HEIGHT, BA_PAD

    def x(v: float) -> float:
        return round(pad + (min(max(v, BA_X[0]), BA_X[1]) - BA_X[0]) / 4 * (w - 2 * pad), 1)

    def y(v: float) -> float:
        span = BA_Y[1] - BA_Y[0]
        return round(h - pad - (min(max(v, BA_Y[0]), BA_Y[1]) - BA_Y[0]) / span * (h - 2 * pad), 1)

    points = ba.get("points") or []
    most = max((p[2] for p in points), default=1)
    drawn = [
        {"name": name, "y": y(ba[key]), "value": ba[key]}
        for name, key in (("bias", "bias"), ("−1.96 SD", "loa_low"), ("+1.96 SD", "loa_high"))
        if lines and ba.get(key) is not None
    ]
    return {
        "width": w,
        "height": h,
        "left": pad,
        "right": w - pad,
        "top": pad,
        "bottom": h - pad,
        "zero": y(0.0),
        "points": [
            {"x": x(m), "y": y(d), "r": round(1.5 + 3.5 * (c / most) ** 0.5, 1), "n": c}
            for m, d, c in points
        ],
        "lines": drawn,
        "xticks": [{"x": x(v), "label": v} for v in (1, 2, 3, 4, 5)],
        "yticks": [{"y": y(v), "label": v} for v in (-4, -2, 0, 2, 4)],
    }


def _level(label: object) -> str:
    """A confusion label as the drill-down's human_level / judge_level (docs/DRILL_DOWN.md)."""
    return "na" if label == "N/A" else str(label)


def drill_filters(form: ReportFilterForm) -> dict[str, Any]:
    """The report filters a drill-down link from the trust page carries: those that narrow
    the rows the figures are computed from (the skill and judge come from the figure)."""
    data = form.cleaned_data
    return {
        "system": data["system"],
        "domain": data["domain"],
        "difficulty": data["difficulty"],
        "human": "adjudicated" if data.get("human") == "adjudicated" else "",
    }


def _page_context(figures: dict[str, Any]) -> dict[str, Any]:
    """The figures laid out per skill for the template."""
    calibration = []
    for skill, cal in sorted((figures.get("calibration") or {}).items()):
        if cal.get("off_scale"):
            calibration.append({"skill": skill, "off_scale": True})
            continue
        ba = cal["bland_altman"]
        conf = cal["confusion"]
        # on too few responses (docs/SMALL_SAMPLES.md) the figures say so, and the chart
        # shows the points without the bias and limit lines
        too_few = (cal.get("too_few") or {}).get("offset", "")
        calibration.append(
            {
                "skill": skill,
                "cal": cal,
                "too_few": too_few,
                "ci": ba.get("ci") or {},
                "iso_ci": cal["isotonic"].get("ci") or {},
                "svg": _bland_altman_svg(ba, lines=not too_few),
                "confusion": [
                    {
                        "label": label,
                        "counts": row,
                        # each count with the levels its drill-down link selects
                        "cells": [
                            {"count": c, "judge_level": _level(label), "human_level": _level(h)}
                            for h, c in zip(conf["labels"], row, strict=True)
                        ],
                    }
                    for label, row in zip(conf["labels"], conf["counts"], strict=True)
                ],
                "labels": conf["labels"],
            }
        )
    return {
        "calibration": calibration,
        "strata": sorted((figures.get("strata") or {}).items()),
        "na": sorted((figures.get("na") or {}).items()),
        "stochasticity": sorted((figures.get("stochasticity") or {}).items()),
        "probes": figures.get("probes"),
    }


@require_GET
@login_required
def trust_page(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """One judge's trust report (the query's `trust_judge`, else the first), from the latest done
    snapshot of the query's filters."""
    project = project_get_for_staff(request.user, slug)
    form = ReportFilterForm(request.GET, options=project_options(project))
    context: dict[str, Any] = {"project": project, "form": form}
    query = request.GET.copy()
    query.pop("trust_judge", None)
    context["dashboard_url"] = reverse("analytics:dashboard", args=[project.slug]) + (
        f"?{query.urlencode()}" if query else ""
    )
    if form.is_valid():
        params = form.snapshot_params()
        done = snapshots.snapshot_latest_done(project=project, key=snapshots.snapshot_key(params))
        context["snapshot"] = done
        if done is not None:
            judges = trust_judges(done)
            wanted = request.GET.get("trust_judge")
            judge = wanted if wanted in judges else (judges[0] if judges else None)
            context["judges"] = judges
            context["judge"] = judge
            context["filter_query"] = query.urlencode()
            context["drill"] = drill_filters(form)
            context["trust_path"] = request.get_full_path()
            if judge is not None:
                figures = trust_of(done, judge) or {}
                context.update(_page_context(figures))
                context["can_calibrate"] = bool(calibration_maps(figures))
                context["ppi"] = prediction_powered_of(done, judge)
                context["calibrated_name"] = calibrated_name(judge)
    response = render(request, template_for(request, TRUST, "trust-body"), context)
    patch_vary_headers(response, ["HX-Request"])
    return response


@require_POST
@login_required
def trust_calibrate(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Ask for the calibrated copy of the posted judge's latest finished pointwise run (or
    the posted run) under the posted snapshot's maps. Admins and researchers."""
    project = project_get_for_staff(request.user, slug)
    judge = request.POST.get("judge", "")[:200]
    context: dict[str, Any] = {"project": project, "judge": judge}
    try:
        snapshot = snapshots.snapshot_get(
            project=project, snapshot_id=int(request.POST.get("snapshot", "0"))
        )
        run_text = request.POST.get("run", "")
        run_id = int(run_text) if run_text else None
    except ValueError:
        snapshot, run_id = None, None
    if snapshot is None or snapshot.status != "done":
        context["error"] = "That report snapshot is not available: reload the page."
    else:
        try:
            with transaction.atomic():
                run = calibrated_copy_request(
                    project=project,
                    snapshot=snapshot,
                    judge=judge,
                    run_id=run_id,
                    user=request.user,
                )
            context["run"] = run
            context["calibrated_name"] = calibrated_name(judge)
        except CalibrationRefused as exc:
            context["error"] = str(exc)
    if request.htmx:
        return render(request, COPY_STATUS, context, status=200)
    url = reverse("analytics:trust", args=[project.slug])
    return redirect(f"{url}?{urlencode({'trust_judge': judge})}" if "error" not in context else url)


# --- the API ----------------------------------------------------------------------------------


class CalibratedCopySerializer(serializers.Serializer):
    judge = serializers.CharField(max_length=200)
    snapshot = serializers.IntegerField(
        min_value=1,
        required=False,
        help_text="a done report snapshot (default: the latest default one)",
    )
    run = serializers.IntegerField(
        min_value=1,
        required=False,
        help_text="the judge's run to copy (default: its latest finished pointwise run)",
    )

    class Meta:
        ref_name = "TrustCalibratedCopy"


class TrustCalibratedCopyApi(APIView):
    """Ask for a judge run's calibrated copy (docs/JUDGE_TRUST.md "Calibration"): an imported
    judge "<judge> (calibrated)" whose run holds the run's scores mapped by the report's
    isotonic maps. Made by a worker; a second request with the same maps changes nothing."""

    @extend_schema(
        request=CalibratedCopySerializer,
        responses={
            202: OpenApiResponse(description="queued"),
            400: OpenApiResponse(description="refused"),
        },
    )
    def post(self, request, slug: str):
        project = project_get_for_staff(request.user, slug)
        given = CalibratedCopySerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        if "snapshot" in data:
            snapshot = snapshots.snapshot_get(project=project, snapshot_id=data["snapshot"])
            if snapshot is None or snapshot.status != "done":
                raise NotFound("no such done report snapshot")
        else:
            snapshot = snapshots.snapshot_latest_done(
                project=project, key=snapshots.snapshot_key(snapshots.snapshot_params())
            )
            if snapshot is None:
                raise NotFound("the project has no report snapshot yet: ask for the report first")
        try:
            with transaction.atomic():
                run = calibrated_copy_request(
                    project=project,
                    snapshot=snapshot,
                    judge=data["judge"],
                    run_id=data.get("run"),
                    user=request.user,
                )
        except CalibrationRefused as exc:
            raise ValidationError({"judge": [str(exc)]}) from None
        return ApiResponse(
            {
                "judge": data["judge"],
                "run": run.pk,
                "snapshot": snapshot.pk,
                "calibrated_judge": calibrated_name(data["judge"]),
            },
            status=status.HTTP_202_ACCEPTED,
        )
