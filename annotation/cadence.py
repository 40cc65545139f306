"""When a claim serves a check instead of a normal task: the cadence of gold (and attention)
tasks and hidden repeats (annotation/ASSIGNMENT.md), and how many checks an annotator will
still be served, so that their progress total ("7 of 40 done") is right from the first card
instead of growing by one at each check. Pure functions; the claim
(annotation/services/assignments.py) and the progress (annotation/annotate/selectors.py)
both use them."""

from __future__ import annotations

#: A repeat is drawn from the annotator's submitted normal tasks but the last this many.
REPEAT_MIN_GAP = 5


def every(rate: float, served: int) -> bool:
    """True for every round(1/rate)-th task (deterministic, so testable and fair); `served`
    counts the annotator's assignments in the campaign before this claim."""
    if rate <= 0:
        return False
    period = max(2, round(1 / rate))
    return served % period == period - 1


def checks_ahead(
    *,
    normal_left: int,
    served: int,
    gold_rate: float,
    repeat_rate: float,
    gold_left: int,
    normal_submitted: int,
    repeats: int,
    quota: bool,
) -> int:
    """The checks an annotator will be served with `normal_left` more normal tasks to come,
    if every task they are served is submitted: the claim's own rule played forward. At each
    claim (`served` so far), a gold task is due by `every(gold_rate, served)` while one they
    never had is left (`gold_left`); else a repeat is due by `every(repeat_rate, served)`
    while a submitted normal task older than the last REPEAT_MIN_GAP is not yet repeated
    (`normal_submitted`, `repeats` so far); else a normal task comes, and with none left the
    claim ends. Under a `quota` the claim ends as soon as the last normal task is done (it
    checks the quota first); without one, checks due after it are still served. Skips,
    expiries and tasks that others take first are not foreseen."""
    checks = 0
    if gold_rate <= 0 and repeat_rate <= 0:
        return 0
    while normal_left > 0 or not quota:
        if gold_left > 0 and every(gold_rate, served):
            gold_left -= 1
        elif every(repeat_rate, served) and max(0, normal_submitted - REPEAT_MIN_GAP) > repeats:
            repeats += 1
        elif normal_left > 0:
            normal_left -= 1
            normal_submitted += 1
            served += 1
            continue
        else:
            break  # no check due and no normal task left: the claim comes back empty
        checks += 1
        served += 1
    return checks
