"""Which figures of the report, its breakdowns and the judge trust figures rest on too few
data (docs/SMALL_SAMPLES.md): the one place that says which kind of figure
(analytics.minimums) each figure is and which count is its n.

Each function adds a `too_few` dict to a dict of figures: the name of every figure in it
whose n is below its kind's minimum, mapped to the reason (`minimums.too_few`: "too few:
n = 3 (at least 10 responses)"). A figure named there keeps its value in the JSON, for
reference, but pages show "too few" with the reason instead of the number and its
interval, charts leave it out, and a judge's mean over skills does not count it. A figure
is named by the key its value sits under in the same dict ("pearson", "icc", "estimate"),
so `figures["too_few"].get(key)` answers for `figures[key]`. Intervals carry their own
flags (analytics.bootstrap.interval_flags). Pure: no Django."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from analytics import minimums

Json = dict[str, Any]

#: The kind of each correlation level's figures (the instance level's agreement figures are
#: means over its responses).
LEVEL_KINDS = {"instance": "correlation", "item": "item_level", "system": "ranking"}
CORRELATIONS = ("pearson", "spearman", "kendall")
AGREEMENT_FIGURES = ("mae", "exact", "within_one")


def reason(kind: str, n: int | None) -> str:
    """`minimums.too_few`, without formatting a reason for a figure that has enough (the
    report flags tens of thousands of figures, its breakdowns included)."""
    if n is not None and n >= minimums.MINIMUMS[kind].n:
        return ""
    return minimums.too_few(kind, n)


def too_few_of(figures: Iterable[tuple[str, str, int | None]]) -> dict[str, str]:
    """{figure: reason} for the (figure, kind, n) below their kind's minimum."""
    found = {}
    for name, kind, n in figures:
        why = reason(kind, n)
        if why:
            found[name] = why
    return found


def _flag(figures: Json, entries: Iterable[tuple[str, str, int | None]]) -> Json:
    figures["too_few"] = too_few_of(entries)
    return figures


# --- the report ----------------------------------------------------------------------------


def flag_agreement(figures: Json) -> Json:
    """Agreement among people on one skill (report["agreement"][skill]): alpha, Fleiss' kappa,
    AC1 and Cohen's kappa on the units with two or more scores; the ICCs on the units of
    their design; the mean pairwise Spearman and the leave-one-out ceiling on the responses
    their annotators share."""
    units = figures.get("n_units")
    entries = [
        (name, "agreement", units)
        for name in ("krippendorff_alpha", "fleiss_kappa", "gwet_ac1", "cohen_kappa")
        if name in figures and (name != "cohen_kappa" or figures[name] is not None)
    ]
    if "icc" in figures:
        entries.append(("icc", "icc", (figures["icc"] or {}).get("n", 0)))
    for name in ("mean_pairwise_spearman", "loo_ceiling"):
        if name in figures:
            entries.append((name, "correlation", (figures[name] or {}).get("units", 0)))
    return _flag(figures, entries)


def flag_level(level: str, figures: Json) -> Json:
    """One correlation level of a judge on a skill: its correlations by the level's kind
    (`LEVEL_KINDS`) on its n (responses, items, systems); at the instance level MAE, exact
    and within-one as means over the responses (not for a judge on its own scale)."""
    kind = LEVEL_KINDS[level]
    n = figures.get("n")
    found: dict[str, str] = {}
    why = reason(kind, n)
    if why:
        found.update((name, why) for name in CORRELATIONS if name in figures)
    if figures.get("judge_scale") != "raw":
        why = reason("mean", n) if level == "instance" else why
        if why:
            found.update((name, why) for name in AGREEMENT_FIGURES if name in figures)
    figures["too_few"] = found
    return figures


def flag_correlation(levels: Json) -> Json:
    """Every level of a judge's correlation on a skill (report["correlation"][judge][skill])."""
    for level, figures in levels.items():
        if level in LEVEL_KINDS and isinstance(figures, dict):
            flag_level(level, figures)
    return levels


def flag_comparison(pair: Json) -> Json:
    """A judge comparison (report["judge_comparison"][skill]["A vs B"]): a difference of
    two correlations on the `n` responses both judges scored."""
    return _flag(pair, [("estimate", "correlation", pair.get("n"))])


def flag_leaderboard(rows: Iterable[Json]) -> None:
    """A skill's leaderboard: each system's human mean on its `n` responses and each judge's
    mean on that judge's `n`. A judge's entry carries `too_few` only when its mean is too
    few: a large project's breakdowns hold hundreds of thousands of these entries, and an
    empty dict on each made the report a third larger."""
    for row in rows:
        why = reason("mean", row.get("n"))
        row["too_few"] = {"humans": why} if why else {}
        for standing in (row.get("judges") or {}).values():
            why = reason("mean", standing.get("n"))
            if why:
                standing["too_few"] = {"mean": why}
            else:
                standing.pop("too_few", None)


def flag_report(report: Json) -> Json:
    """Every figure of a report (build_report's keys; its breakdowns are reports too)."""
    for figures in (report.get("agreement") or {}).values():
        flag_agreement(figures)
    for by_skill in (report.get("correlation") or {}).values():
        for levels in by_skill.values():
            flag_correlation(levels)
    for pairs in (report.get("judge_comparison") or {}).values():
        for pair in pairs.values():
            flag_comparison(pair)
    for rows in (report.get("leaderboard") or {}).values():
        flag_leaderboard(rows)
    return report


def flag_prediction_powered(found: Json) -> Json:
    """The prediction-powered rows (analytics.report.prediction_powered): an estimate of a
    judge, skill and system on its `n_labeled` responses (kind "prediction_powered"), a
    difference between two systems on its `n_labeled` items ("prediction_powered_difference").
    Each row is one figure with its interval, so its `too_few` is the reason itself, or None
    (not a dict of figures)."""
    kinds = (
        ("prediction_powered", "prediction_powered"),
        ("prediction_powered_differences", "prediction_powered_difference"),
    )
    for key, kind in kinds:
        for row in found.get(key) or []:
            row["too_few"] = reason(kind, row.get("n_labeled")) or None
    return found


# --- the judge trust figures ---------------------------------------------------------------


def flag_calibration(cal: Json) -> Json:
    """A judge's calibration on a skill: every figure on its `n` responses."""
    if cal.get("off_scale"):
        return cal
    n = cal.get("n")
    return _flag(
        cal,
        [(name, "calibration", n) for name in ("offset", "bland_altman", "isotonic")],
    )


def flag_group(group: Json, kind: str = "stratum") -> Json:
    """A group of responses in the strata (a tercile, a domain, a difficulty; `kind`
    "correlation" for all the responses): Pearson, Spearman and MAE on its `n`."""
    n = group.get("n")
    return _flag(group, [(name, kind, n) for name in ("pearson", "spearman", "mae")])


def flag_strata(strata: Json) -> Json:
    """A judge's strata on a skill."""
    if isinstance(strata.get("all"), dict):
        flag_group(strata["all"], "correlation")
    for name in ("human_spread", "length"):
        for group in (strata.get(name) or {}).get("groups") or []:
            flag_group(group)
    for name in ("domain", "difficulty"):
        for group in strata.get(name) or []:
            flag_group(group)
    return strata


def flag_na(na: Json) -> Json:
    """N/A behaviour on a skill: the rates on their scores, agreement on whether the skill
    applies and its kappa on the responses both sides scored."""
    return _flag(
        na,
        [
            ("people_rate", "mean", na.get("people_scores")),
            ("judge_rate", "mean", na.get("judge_scores")),
            ("agreement", "accuracy", na.get("responses")),
            ("kappa", "accuracy", na.get("responses")),
        ],
    )


def flag_stochasticity(found: Json) -> Json:
    """The judge's samples as raters (on its responses with two samples or more) and the
    people's test-retest (on the repeat pairs)."""
    judge, people = found.get("judge"), found.get("people")
    if isinstance(judge, dict):
        n = judge.get("responses")
        _flag(judge, [("alpha", "agreement", n), ("unanimous", "mean", n)])
    if isinstance(people, dict):
        n = people.get("pairs")
        _flag(people, [("alpha", "agreement", n), ("exact", "mean", n)])
    return found


def flag_trust(figures: Mapping[str, Json]) -> None:
    """A judge's trust figures (calibration, strata, N/A, stochasticity), every skill."""
    for cal in (figures.get("calibration") or {}).values():
        flag_calibration(cal)
    for strata in (figures.get("strata") or {}).values():
        flag_strata(strata)
    for na in (figures.get("na") or {}).values():
        flag_na(na)
    for found in (figures.get("stochasticity") or {}).values():
        flag_stochasticity(found)


def flag_probes(probes: Json) -> Json:
    """A judge's bias probe figures: a pointwise probe's effect (a mean over its n pairs,
    per skill on each skill's), a pairwise probe's flip rate (a share of its n decisions),
    the length figure (a partial correlation on n pairs) and self-preference (a difference
    of two means: n is the smaller group)."""
    for run in probes.get("runs") or []:
        if run.get("pairwise"):
            _flag(run, [("flip_rate", "accuracy", run.get("n"))])
            continue
        _flag(run, [("effect", "mean", run.get("n"))])
        for effect in (run.get("skills") or {}).values():
            _flag(effect, [("estimate", "mean", effect.get("n"))])
    length = probes.get("length")
    if isinstance(length, dict):
        _flag(length, [("partial_r", "correlation", length.get("n"))])
    own = probes.get("self_preference")
    if isinstance(own, dict):
        smaller = min(own.get("own") or 0, own.get("other") or 0)
        _flag(own, [("difference", "mean", smaller)])
    return probes
