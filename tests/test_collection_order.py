"""The suite's order for xdist's worksteal (tests/conftest.py, pytest_collection_modifyitems)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.conftest import _long_first_in_every_share


@dataclass(eq=False)
class Item:
    name: str
    module: object
    marks: set[str] = field(default_factory=set)

    def get_closest_marker(self, name):
        return name if name in self.marks else None


def worksteal_shares(items: list, workers: int) -> list[list]:
    """What xdist's worksteal sends each worker first: equal consecutive shares."""
    shares, left = [], list(items)
    for i in range(workers):
        size = len(left) // (workers - i)
        shares.append(left[:size])
        left = left[size:]
    return shares


def make_items() -> list[Item]:
    a, b, c, d = object(), object(), object(), object()
    items = [Item(f"a{i}", a) for i in range(40)]
    items += [Item(f"b{i}", b, {"browser"}) for i in range(3)]
    items += [Item(f"c{i}", c, {"slow"} if i < 4 else set()) for i in range(10)]
    items += [Item(f"d{i}", d, {"slow"}) for i in range(2)]
    return items


def test_every_worker_starts_on_its_part_of_the_long_tests():
    items = make_items()
    for workers in (1, 2, 3, 4):
        ordered = _long_first_in_every_share(items, workers)
        assert sorted(i.name for i in ordered) == sorted(i.name for i in items)
        shares = worksteal_shares(ordered, workers)
        long_counts = [sum(bool(i.marks) for i in share) for share in shares]
        assert sum(long_counts) == 9
        # each share opens with its long items, and they are spread evenly
        for share, count in zip(shares, long_counts, strict=True):
            assert all(i.marks for i in share[:count])
        assert max(long_counts) - min(long_counts) <= 4  # the largest run (c0-c3) is 4


def test_one_modules_long_items_stay_together_and_short_items_keep_their_order():
    ordered = _long_first_in_every_share(make_items(), 3)
    names = [i.name for i in ordered]
    c_long = [names.index(f"c{i}") for i in range(4)]
    assert c_long == list(range(c_long[0], c_long[0] + 4))
    short = [n for n in names if n.startswith("a") or n in {f"c{i}" for i in range(4, 10)}]
    assert short == [f"a{i}" for i in range(40)] + [f"c{i}" for i in range(4, 10)]
