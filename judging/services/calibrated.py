"""A judge run's calibrated copy (docs/JUDGE_TRUST.md "Calibration"): the scores of a
finished pointwise run passed through a monotone map per skill (the judge trust report's
isotonic map, fitted on the project's human scores), kept as a run of an imported judge
named "<judge> (calibrated)", labelled in its settings snapshot. The source run is not
touched.

Contract
- One calibrated run per source run: a second request with the same map finds that run and
  writes nothing; with another map it replaces that run's judgments in place. Requests are
  serialized on the calibrated judge's row.
- A response's value is the mean of the source run's samples (N/A left out; N/A when every
  sample said N/A), as the report reads it; the map is linear between its points and flat
  beyond them. The calibrated value is kept in `raw_value`, its half-up rounding onto 1-5 in
  `score`. Skills without a map are left out (the snapshot lists them).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from judging.models import (
    JudgeConfig,
    JudgeKind,
    JudgeRun,
    JudgeScore,
    Judgment,
    JudgmentStatus,
    RunStatus,
)

SUFFIX = " (calibrated)"
PARSE_METHOD = "calibrated"
MAX_NAME = 200
MAX_POINTS = 10_000

#: skill name -> the map's points [[judge value, calibrated value], ...], judge values rising.
CalibrationMaps = Mapping[str, Sequence[Sequence[float]]]


class CalibrationRefused(ValueError):
    """A calibrated copy that cannot be made (the message says why)."""


def calibrated_name(name: str) -> str:
    return f"{name}{SUFFIX}"


def _check_maps(maps: CalibrationMaps) -> dict[str, list[list[float]]]:
    """The maps as plain lists, or CalibrationRefused: each at least one point of two finite
    numbers, judge values strictly rising, calibrated values non-decreasing within 1-5."""
    if not isinstance(maps, Mapping) or not maps:
        raise CalibrationRefused("no calibration map: the trust report has none for this judge")
    clean: dict[str, list[list[float]]] = {}
    for skill, points in maps.items():
        if not isinstance(skill, str) or not isinstance(points, Sequence) or not points:
            raise CalibrationRefused(f"the map of {skill!r} has no points")
        if len(points) > MAX_POINTS:
            raise CalibrationRefused(f"the map of {skill!r} has more than {MAX_POINTS} points")
        rows: list[list[float]] = []
        for point in points:
            if (
                not isinstance(point, Sequence)
                or len(point) != 2
                or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in point)
                or not all(math.isfinite(v) for v in point)
            ):
                raise CalibrationRefused(
                    f"the map of {skill!r} holds a point that is not two numbers"
                )
            rows.append([float(point[0]), float(point[1])])
        xs = [p[0] for p in rows]
        ys = [p[1] for p in rows]
        if any(b <= a for a, b in zip(xs, xs[1:], strict=False)):
            raise CalibrationRefused(f"the map of {skill!r} must have rising judge values")
        if any(b < a for a, b in zip(ys, ys[1:], strict=False)):
            raise CalibrationRefused(f"the map of {skill!r} is not monotone")
        if min(ys) < 1 or max(ys) > 5:
            raise CalibrationRefused(f"the map of {skill!r} leaves the 1-5 scale")
        clean[skill] = rows
    return clean


def map_value(points: Sequence[Sequence[float]], value: float) -> float:
    """The map at `value`: linear between its points, flat beyond its ends (numpy.interp's
    rule, written out so that judging needs no analytics code)."""
    if value <= points[0][0]:
        return float(points[0][1])
    if value >= points[-1][0]:
        return float(points[-1][1])
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        if x0 <= value <= x1:
            return float(y0 + (y1 - y0) * (value - x0) / (x1 - x0))
    raise AssertionError("unreachable: the points rise")  # pragma: no cover


def rounded(value: float) -> int:
    """Half up onto the 1-5 scale (2.5 -> 3), as the trust report rounds."""
    return min(5, max(1, math.floor(value + 0.5)))


def _calibrated_judge(source: JudgeConfig, created_by) -> JudgeConfig:
    name = calibrated_name(source.name)
    if len(name) > MAX_NAME:
        raise CalibrationRefused(f"the calibrated judge's name would pass {MAX_NAME} characters")
    judge = JudgeConfig.objects.filter(project=source.project, name=name).first()
    if judge is None:
        judge = JudgeConfig(
            project=source.project,
            name=name,
            kind=JudgeKind.IMPORTED,
            family=source.family,
            created_by=created_by,
        )
        judge.full_clean(validate_unique=False, validate_constraints=False)
        try:
            with transaction.atomic():
                judge.save()
        except IntegrityError:  # made meanwhile by a concurrent request
            judge = JudgeConfig.objects.get(project=source.project, name=name)
    if judge.kind != JudgeKind.IMPORTED:
        raise CalibrationRefused(
            f"the project has a {judge.get_kind_display()} judge named {name!r}: rename it first"
        )
    return JudgeConfig.objects.select_for_update().get(pk=judge.pk)


@transaction.atomic
def judge_run_calibrated_copy(
    *,
    run: JudgeRun,
    maps: CalibrationMaps,
    source: Mapping[str, Any] | None = None,
    created_by=None,
) -> JudgeRun:
    """The calibrated copy of finished pointwise run `run` under `maps` (skill -> points),
    made or found (see the module's contract). `source` says where the maps come from (the
    report snapshot), kept in the copy's settings snapshot."""
    if run.pairwise_against or run.probe:
        raise CalibrationRefused("only an ordinary pointwise run can be calibrated")
    if run.status != RunStatus.DONE:
        raise CalibrationRefused(f"run {run.pk} has not finished")
    if run.settings_snapshot.get("calibrated_from_run") is not None:
        raise CalibrationRefused(f"run {run.pk} is a calibrated copy already")
    clean = _check_maps(maps)
    digest = hashlib.sha256(
        json.dumps(clean, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    judge = _calibrated_judge(run.judge, created_by)
    existing = (
        JudgeRun.objects.filter(judge=judge, settings_snapshot__calibrated_from_run=run.pk)
        .order_by("pk")
        .first()
    )
    if existing is not None and existing.settings_snapshot.get("map_sha256") == digest:
        return existing
    # the source run's scores, samples averaged from their integer sum and count
    sums: dict[tuple[int, int], list[int]] = {}
    skill_names: dict[int, str] = {}
    for response_id, skill_id, skill, score in JudgeScore.objects.filter(run=run).values_list(
        "response_id", "skill_id", "skill__name", "score"
    ):
        skill_names[skill_id] = skill
        acc = sums.setdefault((response_id, skill_id), [0, 0])
        if score is not None:
            acc[0] += score
            acc[1] += 1
    used = sorted({skill_names[s] for _, s in sums} & set(clean))
    snapshot = {
        "kind": JudgeKind.IMPORTED,
        "calibrated_copy": True,
        "calibrated_from_run": run.pk,
        "calibrated_from_judge": run.judge.name,
        "method": "isotonic map, linear between its points; score rounded half up",
        "map": {skill: clean[skill] for skill in used},
        "map_sha256": digest,
        "skills_without_map": sorted({skill_names[s] for _, s in sums} - set(clean)),
        "source": dict(source or {}),
    }
    now = timezone.now()
    responses = sorted({rid for rid, _ in sums})
    if existing is None:
        copy = JudgeRun(judge=judge, dataset=run.dataset, campaign=run.campaign)
    else:
        copy = existing
        Judgment.objects.filter(run=copy).delete()
    copy.status = RunStatus.DONE
    copy.settings_snapshot = snapshot
    copy.total = copy.done = len(responses)
    copy.created_by = created_by
    copy.started_at = now
    copy.finished_at = now
    copy.save()
    judgments = Judgment.objects.bulk_create(
        Judgment(
            run=copy,
            response_id=rid,
            sample_index=0,
            status=JudgmentStatus.OK,
            request={"calibrated_from_run": run.pk},
            parse_method=PARSE_METHOD,
        )
        for rid in responses
    )
    by_response = {j.response_id: j for j in judgments}
    scores = []
    for (rid, skill_id), (total, count) in sorted(sums.items()):
        skill = skill_names[skill_id]
        if skill not in clean:
            continue
        value = map_value(clean[skill], total / count) if count else None
        scores.append(
            JudgeScore(
                judgment=by_response[rid],
                run=copy,
                response_id=rid,
                skill_id=skill_id,
                score=None if value is None else rounded(value),
                is_na=value is None,
                raw_value=value,
            )
        )
    JudgeScore.objects.bulk_create(scores, batch_size=2000)
    return copy
