"""Pure: which pairs of responses a pairwise campaign asks about (no Django).

A pairwise campaign's task is two responses to the same item. `pair_design` turns the
items (each with the models that answered it) into the list of pairs to ask about:

- ``all_pairs``: every pair of the chosen models on every item;
- ``anchor``: each model against the anchor model on every item that has both;
- ``sampled``: ``budget`` pairs, chosen so that each model appears equally often (±1)
  while every model pair is available, spreading the pairs over the items.

The two responses of a pair are in a canonical order, model name order: A is the model
whose name sorts first. Which side B is *shown* on is drawn per pair (`b_left`) and stored
on the task, so the on-screen order is random yet reproducible. Everything is deterministic
given the seed.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

ALL_PAIRS = "all_pairs"
ANCHOR = "anchor"
SAMPLED = "sampled"
DESIGNS = (ALL_PAIRS, ANCHOR, SAMPLED)


class PairDesignError(ValueError):
    """The design cannot be built from these items (a clear message for the user)."""


@dataclass(frozen=True)
class PlannedPair:
    item_id: int
    model_a: str  # sorts before model_b
    model_b: str
    b_left: bool  # B is shown on the left


def canonical(model_x: str, model_y: str) -> tuple[str, str]:
    """The pair's models in their canonical (A, B) order: name order."""
    return (model_x, model_y) if model_x < model_y else (model_y, model_x)


def pair_count_possible(
    *, items: Sequence[tuple[int, Sequence[str]]], models: Sequence[str]
) -> int:
    """How many distinct (item, model pair) tasks exist among `models`."""
    wanted = set(models)
    total = 0
    for _, answered in items:
        n = len(wanted.intersection(answered))
        total += n * (n - 1) // 2
    return total


def pair_design(
    *,
    items: Sequence[tuple[int, Sequence[str]]],
    models: Sequence[str],
    design: str,
    anchor: str = "",
    budget: int | None = None,
    seed: int = 0,
) -> list[PlannedPair]:
    """The pairs to ask about. `items` are (item id, the models that answered it); only
    `models` (at least two) take part. Raises PairDesignError on an impossible design."""
    chosen = sorted(set(models))
    if len(chosen) < 2:
        raise PairDesignError("a pairwise design needs at least two models")
    if design not in DESIGNS:
        raise PairDesignError(f"unknown pair design {design!r}")
    rng = random.Random(seed)
    ordered_items = sorted(
        (item_id, sorted(set(answered) & set(chosen))) for item_id, answered in items
    )
    if design == ALL_PAIRS:
        pairs = [
            (item_id, a, b)
            for item_id, answered in ordered_items
            for a, b in itertools.combinations(answered, 2)
        ]
    elif design == ANCHOR:
        if anchor not in chosen:
            raise PairDesignError(f"the anchor model {anchor!r} is not one of the chosen models")
        pairs = [
            (item_id, *canonical(anchor, other))
            for item_id, answered in ordered_items
            if anchor in answered
            for other in answered
            if other != anchor
        ]
    else:
        pairs = _sampled(ordered_items, chosen, budget, rng)
    return [PlannedPair(item_id, a, b, rng.random() < 0.5) for item_id, a, b in pairs]


def _sampled(
    items: list[tuple[int, list[str]]],
    models: list[str],
    budget: int | None,
    rng: random.Random,
) -> list[tuple[int, str, str]]:
    """`budget` (item, A, B) triples: each step takes the model seen least so far and pairs
    it with the least-seen other model that still has an unused item for that pair, so
    appearance counts never differ by more than one while all pairs are available. Ties
    are broken by how often the model pair was used, then at random; each model pair
    walks its items in a shuffled order."""
    if budget is None or budget < 1:
        raise PairDesignError("a sampled design needs a budget of at least one pair")
    possible = pair_count_possible(items=items, models=models)
    if budget > possible:
        raise PairDesignError(
            f"the budget ({budget} pairs) is more than the {possible} pairs these items have"
        )
    queues: dict[tuple[str, str], list[int]] = {}
    for a, b in itertools.combinations(models, 2):
        ids = [item_id for item_id, answered in items if a in answered and b in answered]
        rng.shuffle(ids)
        if ids:
            queues[(a, b)] = ids
    seen = dict.fromkeys(models, 0)
    pair_used = dict.fromkeys(queues, 0)
    tiebreak = {m: rng.random() for m in models}
    chosen: list[tuple[int, str, str]] = []
    while len(chosen) < budget:
        partners: dict[str, list[str]] = {m: [] for m in models}
        for a, b in queues:
            partners[a].append(b)
            partners[b].append(a)
        first = min((m for m in models if partners[m]), key=lambda m: (seen[m], tiebreak[m]))
        second = min(
            partners[first],
            key=lambda m: (seen[m], pair_used[canonical(first, m)], rng.random()),
        )
        key = canonical(first, second)
        item_id = queues[key].pop()
        if not queues[key]:
            del queues[key]
        pair_used[key] += 1
        seen[first] += 1
        seen[second] += 1
        tiebreak[first] = rng.random()
        tiebreak[second] = rng.random()
        chosen.append((item_id, *key))
    chosen.sort()
    return chosen
