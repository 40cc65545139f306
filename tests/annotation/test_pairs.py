"""The pure pair designs of pairwise campaigns (annotation/pairs.py): no database."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from annotation.pairs import PairDesignError, pair_count_possible, pair_design

MODELS = ["delta", "alpha", "charlie", "bravo", "echo"]


def items(n: int, models=MODELS):
    return [(i, list(models)) for i in range(1, n + 1)]


def appearances(planned) -> Counter:
    seen: Counter = Counter()
    for pair in planned:
        seen[pair.model_a] += 1
        seen[pair.model_b] += 1
    return seen


def test_all_pairs_gives_every_pair_of_models_on_every_item_in_name_order():
    planned = pair_design(items=items(3), models=MODELS, design="all_pairs", seed=1)
    assert len(planned) == 3 * 10
    expected = {(i, a, b) for i in (1, 2, 3) for a, b in itertools.combinations(sorted(MODELS), 2)}
    assert {(p.item_id, p.model_a, p.model_b) for p in planned} == expected
    assert all(p.model_a < p.model_b for p in planned)


def test_all_pairs_leaves_out_models_not_chosen_and_models_an_item_lacks():
    data = [(1, ["alpha", "bravo", "charlie"]), (2, ["alpha", "charlie", "zulu"])]
    planned = pair_design(items=data, models=["alpha", "charlie", "bravo"], design="all_pairs")
    assert sorted((p.item_id, p.model_a, p.model_b) for p in planned) == [
        (1, "alpha", "bravo"),
        (1, "alpha", "charlie"),
        (1, "bravo", "charlie"),
        (2, "alpha", "charlie"),
    ]


def test_anchor_pairs_each_other_model_with_the_anchor():
    planned = pair_design(items=items(4), models=MODELS, design="anchor", anchor="charlie")
    assert len(planned) == 4 * 4
    assert all("charlie" in (p.model_a, p.model_b) for p in planned)
    assert appearances(planned)["charlie"] == 16
    assert {m: c for m, c in appearances(planned).items() if m != "charlie"} == dict.fromkeys(
        ["alpha", "bravo", "delta", "echo"], 4
    )


def test_anchor_must_be_a_chosen_model():
    with pytest.raises(PairDesignError, match="anchor model 'zulu'"):
        pair_design(items=items(2), models=MODELS, design="anchor", anchor="zulu")


@pytest.mark.parametrize("budget", [1, 7, 10, 23, 40, 101])
@pytest.mark.parametrize("model_count", [2, 3, 4, 5])
def test_sampled_design_keeps_each_model_within_one_appearance_of_the_others(budget, model_count):
    models = sorted(MODELS)[:model_count]
    planned = pair_design(
        items=items(120, models), models=models, design="sampled", budget=budget, seed=budget
    )
    assert len(planned) == budget
    counts = appearances(planned)
    every = [counts.get(m, 0) for m in models]
    assert max(every) - min(every) <= 1, counts
    assert sum(every) == 2 * budget
    # no (item, pair) twice
    assert len({(p.item_id, p.model_a, p.model_b) for p in planned}) == budget


def test_sampled_design_spreads_the_model_pairs_and_the_items():
    models = sorted(MODELS)
    planned = pair_design(items=items(50), models=models, design="sampled", budget=100, seed=3)
    per_pair = Counter((p.model_a, p.model_b) for p in planned)
    assert len(per_pair) == 10  # every model pair is asked
    assert max(per_pair.values()) - min(per_pair.values()) <= 2
    per_item = Counter(p.item_id for p in planned)
    assert len(per_item) >= 40  # the 100 pairs are not piled on a few items


def test_sampled_design_is_deterministic_given_the_seed():
    def plan(seed):
        return pair_design(items=items(30), models=MODELS, design="sampled", budget=25, seed=seed)

    assert plan(5) == plan(5)
    assert plan(5) != plan(6)


def test_sampled_design_refuses_a_budget_the_items_cannot_meet_or_none():
    with pytest.raises(PairDesignError, match=r"budget \(31 pairs\) is more than the 30 pairs"):
        pair_design(items=items(3), models=MODELS, design="sampled", budget=31)
    with pytest.raises(PairDesignError, match="needs a budget"):
        pair_design(items=items(3), models=MODELS, design="sampled", budget=None)


def test_a_design_needs_two_models():
    with pytest.raises(PairDesignError, match="at least two models"):
        pair_design(items=items(3), models=["alpha", "alpha"], design="all_pairs")


def test_the_shown_side_is_drawn_per_pair_and_reproducible():
    first = pair_design(items=items(40), models=MODELS, design="all_pairs", seed=11)
    again = pair_design(items=items(40), models=MODELS, design="all_pairs", seed=11)
    assert [p.b_left for p in first] == [p.b_left for p in again]
    left = sum(p.b_left for p in first)
    # 400 fair coin flips: B on the left between 35 % and 65 % of the time
    assert 140 <= left <= 260


def test_pair_count_possible_counts_pairs_among_the_models_each_item_has():
    data = [(1, ["a", "b", "c"]), (2, ["a", "b"]), (3, ["a"])]
    assert pair_count_possible(items=data, models=["a", "b", "c"]) == 3 + 1 + 0
    assert pair_count_possible(items=data, models=["a", "c"]) == 1
