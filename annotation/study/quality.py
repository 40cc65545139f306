"""Annotator quality before payment: per annotator of a campaign, the figures a researcher
reads before approving their work (docs/QUALITY.md), and the flags the campaign's rules
raise on them.

Three reads, whatever the number of annotators (submitted assignments, the campaign's
numeric scores, answers to known-answer tasks), then numpy. The figures:

- work: normal tasks done, focused time (all kinds), median seconds per normal task and its
  ratio to the campaign's median;
- gold and attention checks, judged by annotation/gold.py's one rule (the same join and
  rule as the campaign's quality page): a known-answer task is correct when every answer
  that has a known value is correct;
- straight-lining: the share of their scores equal to their most common score;
- agreement with the others: within one point of the median of the others' scores of the
  same response and skill, and a Dawid-Skene competence (`dawid_skene`, pure numpy).

Every figure travels with its n; below its minimum (the MIN_* constants) it is None and
`notes` says why. A flag needs the rule's own minimum n on top (QUALITY_RULE_DEFAULTS).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from django.core.exceptions import ValidationError
from django.db.models import Count, F, Q, Sum

from annotation.gold import gold_correct_annotations, gold_preference_correct_annotations
from annotation.models import (
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignMode,
    HumanPreference,
    HumanScore,
    TaskKind,
    assignment_is_accepted,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

#: Scores are 1-5; N/A is left out of every score figure.
LABELS = 5

# The fewest observations a figure is computed from; below it the figure is None (with a
# note), never a ratio of two tiny counts.
MIN_TIMED_TASKS = 3  # median_seconds, speed_ratio: the annotator's timed normal tasks
MIN_CAMPAIGN_TIMED_TASKS = 10  # speed_ratio: the campaign's timed normal tasks
MIN_SCORES = 5  # straightline_share: the annotator's numeric scores
MIN_COMPARED = 5  # agreement, competence: their scores of responses someone else scored too

#: Points between a score and the others' median that still count as agreeing.
AGREEMENT_WITHIN = 1

# Dawid-Skene as run on a campaign: each confusion row gets this many pseudo-scores spread
# like the crowd's pooled row (a Dirichlet prior). Crowd workers score few responses, so a
# row often rests on one or two scores, or none (a true score they never met); the prior
# keeps such rows at the crowd's level instead of at 0/1 or at chance.
DS_PRIOR_STRENGTH = 2.0
DS_MAX_ITER = 500
DS_TOL = 1e-5
_EPS = 1e-12  # floor of a probability before its log: no -inf, so no NaN
_COUNT_FLOOR = 1e-10  # floor of a soft count in a confusion row (as crowd-kit clips)

#: The researcher's rules (a JSON object on the campaign; docs/QUALITY.md). A rule whose
#: value is None is off; the min_*_for_flags / min_gold_tasks keys are the n a flag needs.
QUALITY_RULE_DEFAULTS: dict[str, float | int | None] = {
    "min_gold_accuracy": 0.6,  # share of gold tasks correct; flagged below it
    "min_gold_tasks": 3,  # gold tasks answered before min_gold_accuracy may flag
    "max_attention_failed": 0,  # flagged above this many failed attention checks
    "min_speed_ratio": 0.3,  # median time / campaign median; flagged below it
    "min_median_seconds": None,  # median seconds per normal task; flagged below it
    "min_tasks_for_flags": 5,  # timed normal tasks before the two speed rules may flag
    "max_straightline_share": 0.9,  # flagged at or above it
    "min_agreement": None,  # share within one point of the others' median; flagged below
    "min_competence": None,  # Dawid-Skene accuracy; flagged below it
    "min_scores_for_flags": 10,  # scores before straight-lining, agreement, competence flag
}


@dataclass(frozen=True)
class _Rule:
    integer: bool
    low: float
    high: float
    low_open: bool = False  # the low bound itself is refused
    nullable: bool = True


_RULES: dict[str, _Rule] = {
    "min_gold_accuracy": _Rule(False, 0, 1),
    "min_gold_tasks": _Rule(True, 1, 10_000, nullable=False),
    "max_attention_failed": _Rule(True, 0, 10_000),
    "min_speed_ratio": _Rule(False, 0, 1, low_open=True),
    "min_median_seconds": _Rule(False, 0, 86_400, low_open=True),
    "min_tasks_for_flags": _Rule(True, MIN_TIMED_TASKS, 100_000, nullable=False),
    # a most common score is at least a fifth of the scores: lower would flag everyone
    "max_straightline_share": _Rule(False, 1 / LABELS, 1),
    "min_agreement": _Rule(False, 0, 1),
    "min_competence": _Rule(False, 0, 1),
    "min_scores_for_flags": _Rule(True, max(MIN_SCORES, MIN_COMPARED), 100_000, nullable=False),
}

#: The rules that cannot be turned off (None is refused): the minimum n of the flags.
REQUIRED_RULES = frozenset(name for name, rule in _RULES.items() if not rule.nullable)


@dataclass(frozen=True)
class AnnotatorQuality:
    user_id: int
    tasks_done: int  # submitted normal tasks (accepted assignments)
    active_seconds: float  # focused time of every submitted assignment, all kinds
    median_seconds: float | None  # per timed normal task; n = timed_n
    speed_ratio: float | None  # median_seconds / the campaign's median; n = timed_n
    gold_n: int  # gold tasks answered (on at least one skill with a known value)
    gold_correct: int  # of which every such answer was correct
    attention_n: int
    attention_failed: int
    straightline_share: float | None  # n = scores_n
    scores_n: int  # numeric scores of normal tasks (N/A left out)
    agreement: float | None  # n = agreement_n
    agreement_n: int  # their scores of a response and skill someone else scored too
    competence: float | None  # Dawid-Skene accuracy; n = agreement_n
    flags: tuple[tuple[str, str], ...]  # (code, reason)
    timed_n: int = 0  # normal tasks with a focused time: the n of the two speed figures
    notes: tuple[tuple[str, str], ...] = ()  # (figure, why it is None)

    @property
    def gold_accuracy(self) -> float | None:
        return self.gold_correct / self.gold_n if self.gold_n else None


# --- rules ----------------------------------------------------------------------------------------


def quality_rules_clean(rules: Mapping[str, Any] | None) -> dict[str, float | int | None]:
    """The researcher's rules merged over QUALITY_RULE_DEFAULTS, checked: an unknown key, a
    value of the wrong type or out of range raises ValidationError keyed by the rule's name.
    None turns a rule off (the minimum-n keys cannot be off). Idempotent."""
    if rules is None:
        return dict(QUALITY_RULE_DEFAULTS)
    if not isinstance(rules, Mapping):
        raise ValidationError("The quality rules are a JSON object of rule names to values.")
    errors: dict[str, str] = {}
    cleaned = dict(QUALITY_RULE_DEFAULTS)
    for key, value in rules.items():
        rule = _RULES.get(key) if isinstance(key, str) else None
        if rule is None:
            errors[str(key)] = f"{key}: unknown rule; the rules are {', '.join(_RULES)}."
            continue
        try:
            cleaned[key] = _rule_value(rule, value)
        except ValueError as error:
            errors[key] = f"{key}: {error}"
    if errors:
        raise ValidationError(errors)
    return cleaned


def _rule_value(rule: _Rule, value: Any) -> float | int | None:
    kind = "a whole number" if rule.integer else "a number"
    low = "above" if rule.low_open else "from"
    bounds = f"{kind} {low} {_number(rule.low)} to {_number(rule.high)}"
    if value is None:
        if rule.nullable:
            return None
        raise ValueError(f"must be {bounds} (this one cannot be turned off).")
    off = ", or null to turn it off" if rule.nullable else ""
    # bool is an int in Python, and a JSON true is no threshold
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be {bounds}{off}.")
    if not np.isfinite(value) or (rule.integer and not float(value).is_integer()):
        raise ValueError(f"must be {bounds}{off}.")
    too_low = value <= rule.low if rule.low_open else value < rule.low
    if too_low or value > rule.high:
        raise ValueError(f"must be {bounds}{off}.")
    return int(value) if rule.integer else float(value)


def _number(value: float) -> str:
    return f"{value:g}"


def quality_flags(
    row: AnnotatorQuality, rules: Mapping[str, Any] | None
) -> tuple[tuple[str, str], ...]:
    """The (code, reason) flags `rules` raise on one annotator's figures (the row's own
    `flags` are ignored). Codes: gold, attention, speed_ratio, median_seconds, straightline,
    agreement, competence. A figure that is None, or whose n is below the rule's minimum,
    raises nothing."""
    return _flags(row, quality_rules_clean(rules))


def _flags(row: AnnotatorQuality, rules: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    flags: list[tuple[str, str]] = []
    bar = rules["min_gold_accuracy"]
    if bar is not None and row.gold_n >= rules["min_gold_tasks"]:
        accuracy = row.gold_correct / row.gold_n
        if accuracy < bar:
            flags.append(
                (
                    "gold",
                    f"{row.gold_correct} of {row.gold_n} gold tasks correct ({_pct(accuracy)}), "
                    f"below the required {_pct(bar)}",
                )
            )
    bar = rules["max_attention_failed"]
    if bar is not None and row.attention_failed > bar:
        flags.append(
            (
                "attention",
                f"failed {row.attention_failed} of {row.attention_n} attention checks "
                f"(at most {bar} allowed)",
            )
        )
    timed = row.timed_n >= rules["min_tasks_for_flags"]
    bar = rules["min_speed_ratio"]
    if bar is not None and timed and row.speed_ratio is not None and row.speed_ratio < bar:
        median = f"median {row.median_seconds:.0f} s per task, " if row.median_seconds else ""
        flags.append(
            (
                "speed_ratio",
                f"{median}{row.speed_ratio:.2f} times the campaign's median "
                f"(below {bar:g}; {row.timed_n} timed tasks)",
            )
        )
    bar = rules["min_median_seconds"]
    if bar is not None and timed and row.median_seconds is not None and row.median_seconds < bar:
        flags.append(
            (
                "median_seconds",
                f"median {row.median_seconds:.1f} s per task, below {bar:g} s "
                f"({row.timed_n} timed tasks)",
            )
        )
    scored = rules["min_scores_for_flags"]
    bar = rules["max_straightline_share"]
    share = row.straightline_share
    if bar is not None and share is not None and row.scores_n >= scored and share >= bar:
        if share == 1:
            reason = f"the same score on every skill of every task ({row.scores_n} scores)"
        else:
            reason = (
                f"{_pct(share)} of {row.scores_n} scores are their most common score "
                f"(at or above {_pct(bar)})"
            )
        flags.append(("straightline", reason))
    compared = row.agreement_n >= scored
    bar = rules["min_agreement"]
    if bar is not None and compared and row.agreement is not None and row.agreement < bar:
        flags.append(
            (
                "agreement",
                f"{_pct(row.agreement)} of {row.agreement_n} scores within "
                f"{AGREEMENT_WITHIN} point of the others' median (below {_pct(bar)})",
            )
        )
    bar = rules["min_competence"]
    if bar is not None and compared and row.competence is not None and row.competence < bar:
        flags.append(
            (
                "competence",
                f"estimated accuracy {row.competence:.2f} from {row.agreement_n} scores "
                f"shared with others (below {bar:g})",
            )
        )
    return tuple(flags)


def _pct(share: float) -> str:
    return f"{share:.0%}"


# --- the campaign's figures -----------------------------------------------------------------------


def campaign_quality(
    *, campaign: Campaign, rules: Mapping[str, Any] | None = None
) -> dict[int, AnnotatorQuality]:
    """Each annotator who submitted anything in the campaign (any kind of task, screening
    included), by user id in id order: their figures and the flags `rules` raise on them
    (QUALITY_RULE_DEFAULTS when None; checked by quality_rules_clean, so a bad mapping
    raises ValidationError). Three queries; the rest is numpy."""
    cleaned = quality_rules_clean(rules)
    work = _submitted_work(campaign)
    scores = _campaign_scores(campaign)
    known = _known_answers(campaign)
    users = np.unique(work[:, 1]) if work.size else np.empty(0, np.int64)
    n = users.size
    if n == 0:
        return {}

    # work: tasks done, time, median per timed normal task and its ratio to the campaign's
    who = np.searchsorted(users, work[:, 1])
    accepted = work[:, 2] == 1
    ms = work[:, 3]
    timed = accepted & (ms > 0)
    tasks_done = np.bincount(who[accepted], minlength=n)
    active_seconds = np.bincount(who, weights=np.where(ms > 0, ms, 0), minlength=n) / 1000
    timed_n = np.bincount(who[timed], minlength=n)
    medians = _group_medians(who[timed], ms[timed] / 1000, n)
    campaign_median = float(np.median(ms[timed])) / 1000 if timed.sum() else 0.0
    campaign_timed = int(timed.sum())

    # gold and attention: one row per answered task, correct when all its known answers are
    gold_n = np.zeros(n, np.int64)
    gold_ok = np.zeros(n, np.int64)
    att_n = np.zeros(n, np.int64)
    att_failed = np.zeros(n, np.int64)
    for user_id, kind, answers, correct in known:
        i = int(np.searchsorted(users, user_id))
        if i >= n or users[i] != user_id:
            continue
        if kind == TaskKind.GOLD:
            gold_n[i] += 1
            gold_ok[i] += correct == answers
        else:
            att_n[i] += 1
            att_failed[i] += correct != answers

    # scores: those of accepted assignments only (normal tasks, not repeats or gold)
    scores = scores[np.isin(scores[:, 0], work[accepted, 0])]
    figures = score_figures(
        annotators=np.searchsorted(users, scores[:, 1]),
        responses=scores[:, 2],
        skills=scores[:, 3],
        scores=scores[:, 4],
        n_annotators=n,
    )
    pairwise = campaign.mode == CampaignMode.PAIRWISE

    rows: dict[int, AnnotatorQuality] = {}
    for i in range(n):
        notes: list[tuple[str, str]] = []
        median = _median_figure(int(timed_n[i]), float(medians[i]), notes)
        ratio = _ratio_figure(median, campaign_median, campaign_timed, notes)
        share, agreement, competence = figures.for_annotator(i, notes, pairwise=pairwise)
        row = AnnotatorQuality(
            user_id=int(users[i]),
            tasks_done=int(tasks_done[i]),
            active_seconds=float(active_seconds[i]),
            median_seconds=median,
            speed_ratio=ratio,
            gold_n=int(gold_n[i]),
            gold_correct=int(gold_ok[i]),
            attention_n=int(att_n[i]),
            attention_failed=int(att_failed[i]),
            straightline_share=share,
            scores_n=int(figures.scores_n[i]),
            agreement=agreement,
            agreement_n=int(figures.compared_n[i]),
            competence=competence,
            flags=(),
            timed_n=int(timed_n[i]),
            notes=tuple(notes),
        )
        rows[row.user_id] = _with_flags(row, cleaned)
    return rows


def _with_flags(row: AnnotatorQuality, rules: Mapping[str, Any]) -> AnnotatorQuality:
    return replace(row, flags=_flags(row, rules))


def _median_figure(timed_n: int, median: float, notes: list[tuple[str, str]]) -> float | None:
    if timed_n >= MIN_TIMED_TASKS:
        return median
    notes.append(
        (
            "median_seconds",
            f"{timed_n} timed normal task{'s' if timed_n != 1 else ''}; "
            f"a median needs at least {MIN_TIMED_TASKS}",
        )
    )
    return None


def _ratio_figure(
    median: float | None,
    campaign_median: float,
    campaign_timed: int,
    notes: list[tuple[str, str]],
) -> float | None:
    if median is None:
        notes.append(("speed_ratio", "no median of their own (see median_seconds)"))
        return None
    if campaign_timed < MIN_CAMPAIGN_TIMED_TASKS or campaign_median <= 0:
        notes.append(
            (
                "speed_ratio",
                f"the campaign has {campaign_timed} timed normal tasks; the comparison needs "
                f"at least {MIN_CAMPAIGN_TIMED_TASKS}",
            )
        )
        return None
    return median / campaign_median


def _submitted_work(campaign: Campaign) -> npt.NDArray[np.int64]:
    """(assignment id, annotator id, accepted 0/1, active_ms or 0) per submitted assignment
    of any kind; accepted by the model's one rule (its plain-values form)."""
    rows = Assignment.objects.filter(
        campaign=campaign, status=AssignmentStatus.SUBMITTED
    ).values_list("pk", "annotator_id", "kind", "task__kind", "active_ms")
    return np.array(
        [
            (
                pk,
                user_id,
                assignment_is_accepted(status=AssignmentStatus.SUBMITTED, kind=kind, task_kind=tk),
                ms or 0,
            )
            for pk, user_id, kind, tk, ms in rows
        ],
        dtype=np.int64,
    ).reshape(-1, 4)


def _campaign_scores(campaign: Campaign) -> npt.NDArray[np.int64]:
    """(assignment id, annotator id, response id, skill id, score) per numeric score of the
    campaign, whatever its assignment: the caller keeps those of the accepted assignments it
    read. No join, so the read is one pass of the (campaign, updated_at) index, and what is
    kept matches the assignments read even if a submission lands between the two reads."""
    rows = HumanScore.objects.filter(campaign=campaign, is_na=False).values_list(
        "assignment_id", "annotator_id", "response_id", "skill_id", "score"
    )
    return np.array(list(rows), dtype=np.int64).reshape(-1, 5)


def _known_answers(campaign: Campaign) -> list[tuple[int, str, int, int]]:
    """(annotator id, task kind, answers, correct) per submitted gold or attention task: each
    answer against the known value of the same question (a skill; for pairs also the overall
    question), by annotation/gold.py's rule, as the campaign's quality page counts them.
    Questions without a known value drop out; a task with none drops out. One query."""
    kinds = (TaskKind.GOLD, TaskKind.ATTENTION)
    if campaign.mode == CampaignMode.PAIRWISE:
        gold = "assignment__task__gold_preferences"
        answers = HumanPreference.objects.filter(
            Q(**{f"{gold}__skill_id": F("skill_id")})
            | Q(**{f"{gold}__skill__isnull": True, "skill__isnull": True}),
            campaign=campaign,
            assignment__status=AssignmentStatus.SUBMITTED,
            assignment__task__kind__in=kinds,
        ).annotate(**gold_preference_correct_annotations(gold))
    else:
        gold = "assignment__task__gold_scores"
        answers = HumanScore.objects.filter(
            campaign=campaign,
            assignment__status=AssignmentStatus.SUBMITTED,
            assignment__task__kind__in=kinds,
            **{f"{gold}__skill_id": F("skill_id")},
        ).annotate(**gold_correct_annotations(gold))
    return [
        (user_id, kind, n, ok)
        for user_id, _, kind, n, ok in answers.order_by()
        .values("annotator_id", "assignment_id", "assignment__task__kind")
        .annotate(n=Count("pk"), ok=Sum("correct"))
        .values_list("annotator_id", "assignment_id", "assignment__task__kind", "n", "ok")
    ]


# --- score figures (pure numpy) -------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreFigures:
    """Per annotator index: numeric scores, their most common score's count, scores compared
    with others, of which agreeing, and the Dawid-Skene accuracy (NaN: not estimated)."""

    scores_n: IntArray
    mode_n: IntArray
    compared_n: IntArray
    agreed_n: IntArray
    competence: FloatArray

    def for_annotator(
        self, i: int, notes: list[tuple[str, str]], *, pairwise: bool = False
    ) -> tuple[float | None, float | None, float | None]:
        """(straightline_share, agreement, competence) of annotator `i`, None below their
        minimums with a note for each."""
        if pairwise:
            why = "a pairwise campaign has preferences, not scores"
            notes += [("straightline_share", why), ("agreement", why), ("competence", why)]
            return None, None, None
        n, compared = int(self.scores_n[i]), int(self.compared_n[i])
        share = agreement = competence = None
        if n >= MIN_SCORES:
            share = float(self.mode_n[i] / n)
        else:
            notes.append(
                ("straightline_share", f"{n} numeric scores; the share needs at least {MIN_SCORES}")
            )
        if compared >= MIN_COMPARED:
            agreement = float(self.agreed_n[i] / compared)
            if np.isfinite(self.competence[i]):
                competence = float(self.competence[i])
        else:
            why = (
                f"{compared} of their scores are of responses someone else scored too; "
                f"it needs at least {MIN_COMPARED}"
            )
            notes += [("agreement", why), ("competence", why)]
        return share, agreement, competence


def score_figures(
    *,
    annotators: npt.ArrayLike,
    responses: npt.ArrayLike,
    skills: npt.ArrayLike,
    scores: npt.ArrayLike,
    n_annotators: int,
    prior_strength: float = DS_PRIOR_STRENGTH,
) -> ScoreFigures:
    """The score figures from parallel arrays of accepted numeric scores: annotator index
    (0..n_annotators-1), response id, skill id, score 1-5. One score per annotator, response
    and skill (the claim never gives a response twice to one annotator)."""
    who = np.asarray(annotators, dtype=np.intp)
    values = np.asarray(scores, dtype=np.intp)
    n = n_annotators
    scores_n = np.bincount(who, minlength=n).astype(np.intp)
    per_label = np.bincount(who * LABELS + (values - 1), minlength=n * LABELS)
    mode_n = per_label.reshape(n, LABELS).max(axis=1).astype(np.intp)

    # an item is a (response, skill); only items someone else scored too say anything of
    # an annotator's agreement or competence. One confusion matrix per annotator, pooled
    # over the skills: a crowd worker's few scores split five ways per skill would leave
    # most rows empty, and carelessness belongs to the person more than to the skill.
    pairs = np.stack([np.asarray(responses, np.int64), np.asarray(skills, np.int64)], axis=1)
    if pairs.size:
        _, item = np.unique(pairs, axis=0, return_inverse=True)
        item = item.reshape(-1)
    else:
        item = np.empty(0, np.intp)
    shared = np.bincount(item)[item] >= 2 if item.size else np.zeros(0, bool)
    others = leave_one_out_medians(item[shared], values[shared].astype(np.float64))
    agreed = np.abs(values[shared] - others) <= AGREEMENT_WITHIN
    compared_n = np.bincount(who[shared], minlength=n).astype(np.intp)
    agreed_n = np.bincount(who[shared], weights=agreed, minlength=n).astype(np.intp)

    competence = np.full(n, np.nan)
    if shared.any():
        _, shared_item = np.unique(item[shared], return_inverse=True)
        fit = dawid_skene(
            items=shared_item.reshape(-1),
            workers=who[shared],
            labels=values[shared] - 1,
            n_classes=LABELS,
            n_workers=n,
            prior_strength=prior_strength,
        )
        competence = np.where(compared_n > 0, fit.accuracy, np.nan)
    return ScoreFigures(scores_n, mode_n, compared_n, agreed_n, competence)


def leave_one_out_medians(groups: npt.ArrayLike, values: npt.ArrayLike) -> FloatArray:
    """For each value, the median of the other values of its group (NaN when it is alone)."""
    g = np.asarray(groups, dtype=np.intp)
    v = np.asarray(values, dtype=np.float64)
    out = np.full(v.shape, np.nan)
    if not g.size:
        return out
    order = np.argsort(g, kind="stable")
    sorted_groups = g[order]
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    sizes = np.diff(np.r_[starts, g.size])
    # groups are small (the overlap, a few extra annotations): one block per group size
    for m in np.unique(sizes):
        if m < 2:
            continue
        at = starts[sizes == m][:, None] + np.arange(m)
        block = v[order[at]]
        for p in range(m):
            out[order[at[:, p]]] = np.median(np.delete(block, p, axis=1), axis=1)
    return out


def _group_medians(groups: IntArray, values: FloatArray, n: int) -> FloatArray:
    """The median of `values` per group index 0..n-1 (NaN for an empty group)."""
    out = np.full(n, np.nan)
    if not groups.size:
        return out
    order = np.lexsort((values, groups))
    g, v = groups[order], values[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    sizes = np.diff(np.r_[starts, g.size])
    out[g[starts]] = (v[starts + (sizes - 1) // 2] + v[starts + sizes // 2]) / 2
    return out


# --- Dawid-Skene (pure numpy) ---------------------------------------------------------------------


@dataclass(frozen=True)
class DawidSkeneFit:
    priors: FloatArray  # [K] estimated class marginals
    confusion: FloatArray  # [W, K, K]: confusion[w, j, l] = P(w answers l | true class j)
    posteriors: FloatArray  # [I, K]: P(item's true class | all answers)
    accuracy: FloatArray  # [W]: sum_j priors[j] * confusion[w, j, j]
    iterations: int
    converged: bool

    @property
    def labels(self) -> IntArray:
        """Each item's most probable class."""
        return np.asarray(self.posteriors.argmax(axis=1), dtype=np.intp)


def dawid_skene(
    *,
    items: npt.ArrayLike,
    workers: npt.ArrayLike,
    labels: npt.ArrayLike,
    n_classes: int,
    n_workers: int | None = None,
    max_iter: int = DS_MAX_ITER,
    tol: float = DS_TOL,
    prior_strength: float = 0.0,
) -> DawidSkeneFit:
    """Dawid & Skene (1979): the maximum-likelihood class marginals and per-worker confusion
    matrices by EM, from parallel arrays of observations (item index, worker index, class
    0..n_classes-1; a worker may answer an item more than once, as observer 1 of the paper).

    Starts from each item's share of answers per class (the paper's eq. 3.1), then M-step,
    E-step until no prior or confusion entry moves by `tol`, or `max_iter` rounds.
    `prior_strength` > 0 adds that many pseudo-answers to each confusion row, spread like
    the pooled row of all workers (a Dirichlet prior: MAP instead of ML); 0 is the paper's
    estimator. Probabilities are floored before their logs, so no input (no observation,
    one worker per item, one label throughout, a worker without answers) gives NaN.
    """
    item = np.asarray(items, dtype=np.intp).reshape(-1)
    worker = np.asarray(workers, dtype=np.intp).reshape(-1)
    label = np.asarray(labels, dtype=np.intp).reshape(-1)
    k = n_classes
    w = int(n_workers if n_workers is not None else (worker.max() + 1 if worker.size else 0))
    if not item.size:
        return DawidSkeneFit(
            priors=np.full(k, 1 / k),
            confusion=np.full((w, k, k), 1 / k),
            posteriors=np.empty((0, k)),
            accuracy=np.full(w, 1 / k),
            iterations=0,
            converged=True,
        )
    n_items = int(item.max()) + 1
    answered = np.bincount(item, minlength=n_items) > 0
    cell = worker * k + label

    posteriors = np.zeros((n_items, k))
    np.add.at(posteriors, (item, label), 1.0)
    posteriors[~answered] = 1.0
    posteriors /= posteriors.sum(axis=1, keepdims=True)

    priors = np.full(k, 1 / k)
    confusion = np.full((w, k, k), 1 / k)
    converged = False
    iterations = 0
    for iterations in range(1, max_iter + 1):
        new_priors, new_confusion = _m_step(posteriors, answered, item, cell, w, k, prior_strength)
        posteriors = _e_step(new_priors, new_confusion, item, worker, label, n_items, answered)
        moved = max(
            float(np.abs(new_priors - priors).max()),
            float(np.abs(new_confusion - confusion).max()) if w else 0.0,
        )
        priors, confusion = new_priors, new_confusion
        if iterations > 1 and moved < tol:
            converged = True
            break
    accuracy = (np.diagonal(confusion, axis1=1, axis2=2) * priors).sum(axis=1)
    return DawidSkeneFit(priors, confusion, posteriors, accuracy, iterations, converged)


def _m_step(
    posteriors: FloatArray,
    answered: npt.NDArray[np.bool_],
    item: IntArray,
    cell: IntArray,
    w: int,
    k: int,
    prior_strength: float,
) -> tuple[FloatArray, FloatArray]:
    """Class marginals (eq. 2.4) and confusion rows (eq. 2.3) from soft class counts."""
    priors = posteriors[answered].mean(axis=0)
    counts = np.empty((w, k, k))
    for j in range(k):
        counts[:, j, :] = np.bincount(cell, weights=posteriors[item, j], minlength=w * k).reshape(
            w, k
        )
    if prior_strength > 0:
        pooled = counts.sum(axis=0)
        pooled_total = pooled.sum(axis=1, keepdims=True)
        pooled = np.divide(
            pooled, pooled_total, out=np.full_like(pooled, 1 / k), where=pooled_total > 0
        )
        counts += prior_strength * pooled
    # a row with (next to) no mass, a class the worker never met without a prior: chance,
    # not a ratio of two vanishing numbers
    counts = np.maximum(counts, _COUNT_FLOOR)
    return priors, counts / counts.sum(axis=2, keepdims=True)


def _e_step(
    priors: FloatArray,
    confusion: FloatArray,
    item: IntArray,
    worker: IntArray,
    label: IntArray,
    n_items: int,
    answered: npt.NDArray[np.bool_],
) -> FloatArray:
    """Each item's class posterior (eq. 2.5), in logs: products of many probabilities
    underflow, and the row maximum is taken out before exponentiating."""
    k = priors.size
    log_confusion = np.log(np.maximum(confusion, _EPS))
    per_answer = log_confusion[worker, :, label]  # [N, K]: log P(label | class j)
    log_post = np.tile(np.log(np.maximum(priors, _EPS)), (n_items, 1))
    for j in range(k):
        log_post[:, j] += np.bincount(item, weights=per_answer[:, j], minlength=n_items)
    log_post -= log_post.max(axis=1, keepdims=True)
    post = np.exp(log_post)
    post /= post.sum(axis=1, keepdims=True)
    post[~answered] = priors
    return post
