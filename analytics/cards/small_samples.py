"""The evaluation card's small-sample flags (docs/SMALL_SAMPLES.md; pure: no Django).

A card copies its figures from a report snapshot, and follows the report's one rule for
them: analytics/report/small_samples.py says which kind of figure (analytics.minimums) each
one is and which count is its n, and adds to each figure group a `too_few` dict (figure ->
"too few: n = 6 (at least 10 responses)" for each figure below its kind's minimum); each
interval carries its own `flags` (analytics.bootstrap.interval_flags). The card applies the
same functions to its copies (they are idempotent), so a card built from a snapshot made
before the report carried the flags has them too, and its ceiling, a part of the report's
agreement figures, names only the figures it copies. The JSON card carries the reasons
beside the numbers; the Markdown (analytics.cards.markdown) shows the reason instead of the
number and its interval."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from analytics.bootstrap import interval_note
from analytics.minimums import interval_holds
from analytics.report import small_samples as rule

#: The figures of a card's human ceiling (a part of the report's agreement on a skill).
CEILING_FIGURES = ("krippendorff_alpha", "loo_ceiling", "mean_pairwise_spearman")


def _dicts(value: object) -> list[dict[str, Any]]:
    if isinstance(value, Mapping):
        return [v for v in value.values() if isinstance(v, dict)]
    return []


def _flag_ceiling(ceiling: dict[str, Any]) -> None:
    view = dict(ceiling)
    for name in ("loo_ceiling", "mean_pairwise_spearman"):
        found = ceiling.get(name)
        if isinstance(found, dict) and "units" not in found:
            # a snapshot made before the report counted these figures' own responses: the
            # responses two people or more scored, which they are computed on; unknown
            # there too (the leaderboard's part of such a snapshot), it is not judged
            if ceiling.get("n_units") is None:
                del view[name]
            else:
                view[name] = {**found, "units": ceiling["n_units"]}
    ceiling["too_few"] = rule.flag_agreement(view)["too_few"]


def card_flag_small_samples(card: MutableMapping[str, Any]) -> None:
    """Flag every figure group of `card` in place (module docstring)."""
    for levels in _dicts(card.get("correlation")):
        rule.flag_correlation(levels)
    for ceiling in _dicts(card.get("human_ceiling")):
        _flag_ceiling(ceiling)
    trust = card.get("trust")
    if not isinstance(trust, dict):
        return
    rule.flag_trust(
        {
            name: {skill: figure for skill, figure in value.items() if isinstance(figure, dict)}
            for name in ("calibration", "strata", "na", "stochasticity")
            if isinstance(value := trust.get(name), Mapping)
        }
    )
    if isinstance(trust.get("probes"), dict):
        rule.flag_probes(trust["probes"])


def reason(group: object, figure: str) -> str:
    """Why `figure` of a flagged figure group is not shown ("" when it is)."""
    if not isinstance(group, Mapping):
        return ""
    found = group.get("too_few")
    return str(found.get(figure) or "") if isinstance(found, Mapping) else ""


def interval_problem(value: object, interval: object) -> str:
    """Why an interval is not shown beside `value` ("" when it is): its own flags, or, for an
    interval made before intervals carried them, that it does not contain the value."""
    if not isinstance(interval, Mapping):
        return ""
    note = interval_note(interval)
    if note or "flags" in interval:
        return note
    low, high = interval.get("low"), interval.get("high")
    if not all(isinstance(v, int | float) for v in (value, low, high)):
        return ""
    holds = interval_holds(float(value), float(low), float(high))  # type: ignore[arg-type]
    return "" if holds else "it does not contain the estimate"
