"""Pairwise accuracy of a judge on a preference set, the way reward-model benchmarks count
it (RewardBench, Lambert et al. 2024: the share of prompts whose chosen answer the model
prefers, per subset). Pure: no Django. Docs: docs/JUDGING.md "Accuracy on a preference set".

A preference set is imported as items with the responses of the models `chosen` and
`rejected` (annotation.parsers, format `preference`). A pairwise run against `chosen` asks
each (rejected, chosen) pair in both orders, and stores the Overall verdict of each order as
anchor (chosen preferred), challenger (rejected preferred) or tie.

- A judgment is one (item, order) with an Overall verdict. Its credit is 1 when it prefers
  chosen, 0 when it prefers rejected, 0.5 for a tie (a coin flip's expected credit). A call
  that failed or could not be read has no verdict and is left out (counted as unread).
- Accuracy is the mean credit over the judgments, per subset and over all of them; the
  `macro` figure is the unweighted mean of the subsets' accuracies.
- Its 95% interval is a percentile bootstrap that resamples items (both orders of an item
  stay together), 1000 resamples from a fixed seed: the method of analytics.bootstrap, which
  judging cannot import (judging sits below analytics).
- Per order: order 0 shows rejected first, order 1 chosen first; a judge with position bias
  scores differently on the two. Position consistency: of the items read in both orders, the
  share whose two Overall verdicts agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

#: Verdicts as stored (judging.prompts.pairwise): the anchor is `chosen`.
PREFERS_CHOSEN, PREFERS_REJECTED, TIE = "anchor", "challenger", "tie"
#: The anchor model of such a run: the preferred response of each pair.
CHOSEN = "chosen"
CREDIT = {PREFERS_CHOSEN: 1.0, PREFERS_REJECTED: 0.0, TIE: 0.5}
CONFIDENCE = 0.95
RESAMPLES = 1000
#: Resamples drawn at once (memory: this many x items integers).
_CHUNK = 200


@dataclass(frozen=True)
class Verdict:
    """The Overall verdict of one (item, order) judgment; None when unread."""

    item: int
    subset: str
    order: int
    verdict: str | None


@dataclass(frozen=True)
class AccuracyRow:
    name: str  # a subset, or "all"
    items: int
    judgments: int  # (item, order) judgments with a verdict
    unread: int  # judgments without one (failed, not parseable, no Overall)
    accuracy: float | None
    low: float | None
    high: float | None
    chosen: int  # judgments that preferred chosen
    rejected: int
    ties: int
    accuracy_by_order: tuple[float | None, float | None]  # order 0 (rejected first), order 1
    pairs: int  # items read in both orders
    consistent: int  # of those, both verdicts the same

    @property
    def consistency(self) -> float | None:
        return self.consistent / self.pairs if self.pairs else None

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "items": self.items,
            "judgments": self.judgments,
            "unread": self.unread,
            "accuracy": self.accuracy,
            "low": self.low,
            "high": self.high,
            "chosen": self.chosen,
            "rejected": self.rejected,
            "ties": self.ties,
            "accuracy_order_0": self.accuracy_by_order[0],
            "accuracy_order_1": self.accuracy_by_order[1],
            "pairs": self.pairs,
            "consistent": self.consistent,
            "consistency": self.consistency,
        }


@dataclass(frozen=True)
class PreferenceAccuracy:
    overall: AccuracyRow
    subsets: list[AccuracyRow] = field(default_factory=list)
    macro: float | None = None  # the mean of the subsets' accuracies
    resamples: int = RESAMPLES
    confidence: float = CONFIDENCE

    def as_dict(self) -> dict[str, object]:
        return {
            "overall": self.overall.as_dict(),
            "subsets": [row.as_dict() for row in self.subsets],
            "macro_accuracy": self.macro,
            "resamples": self.resamples,
            "confidence": self.confidence,
            "tie_credit": CREDIT[TIE],
        }


def bootstrap_interval(
    credits: npt.ArrayLike, counts: npt.ArrayLike, *, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float | None, float | None]:
    """The percentile interval of sum(credits) / sum(counts) over resamples of the items
    (each row of `credits`/`counts` is one item's sum of credits and number of judgments)."""
    c = np.asarray(credits, dtype=np.float64)
    n = np.asarray(counts, dtype=np.float64)
    if c.size == 0 or n.sum() == 0:
        return None, None
    rng = np.random.default_rng(seed)
    values: list[npt.NDArray[np.float64]] = []
    done = 0
    while done < resamples:
        take = min(_CHUNK, resamples - done)
        drawn = rng.integers(0, c.size, size=(take, c.size))
        total = n[drawn].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            values.append(c[drawn].sum(axis=1) / total)
        done += take
    every = np.concatenate(values)
    every = every[np.isfinite(every)]
    if every.size == 0:
        return None, None
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(every, [tail, 100 - tail])
    return float(low), float(high)


def _row(name: str, verdicts: Sequence[Verdict], *, resamples: int, seed: int) -> AccuracyRow:
    read = [v for v in verdicts if v.verdict in CREDIT]
    per_item: dict[int, list[float]] = {}
    by_order: dict[int, list[float]] = {0: [], 1: []}
    orders: dict[int, dict[int, str]] = {}
    for v in read:
        assert v.verdict is not None
        credit = CREDIT[v.verdict]
        per_item.setdefault(v.item, []).append(credit)
        by_order.setdefault(v.order, []).append(credit)
        orders.setdefault(v.item, {})[v.order] = v.verdict
    total = sum(sum(c) for c in per_item.values())
    accuracy = total / len(read) if read else None
    items = sorted(per_item)
    low, high = bootstrap_interval(
        [sum(per_item[i]) for i in items],
        [len(per_item[i]) for i in items],
        resamples=resamples,
        seed=seed,
    )
    both = [o for o in orders.values() if 0 in o and 1 in o]

    def mean(values: list[float]) -> float | None:
        return sum(values) / len(values) if values else None

    return AccuracyRow(
        name=name,
        items=len({v.item for v in verdicts}),
        judgments=len(read),
        unread=len(verdicts) - len(read),
        accuracy=accuracy,
        low=low,
        high=high,
        chosen=sum(1 for v in read if v.verdict == PREFERS_CHOSEN),
        rejected=sum(1 for v in read if v.verdict == PREFERS_REJECTED),
        ties=sum(1 for v in read if v.verdict == TIE),
        accuracy_by_order=(mean(by_order[0]), mean(by_order[1])),
        pairs=len(both),
        consistent=sum(1 for o in both if o[0] == o[1]),
    )


def preference_accuracy(
    verdicts: Iterable[Verdict], *, resamples: int = RESAMPLES, seed: int = 0
) -> PreferenceAccuracy | None:
    """Accuracy per subset (sorted by name) and over all judgments; None without any."""
    every = list(verdicts)
    if not every:
        return None
    subsets = sorted({v.subset for v in every})
    rows = [
        _row(s, [v for v in every if v.subset == s], resamples=resamples, seed=seed)
        for s in subsets
    ]
    scored = [r.accuracy for r in rows if r.accuracy is not None]
    return PreferenceAccuracy(
        overall=_row("all", every, resamples=resamples, seed=seed),
        subsets=rows,
        macro=sum(scored) / len(scored) if scored else None,
        resamples=resamples,
    )
