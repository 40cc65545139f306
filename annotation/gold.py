"""The one rule of whether an answer to a known score (a gold, attention, training or
qualification task's GoldScore) is correct: N/A is correct only for a known N/A; a score
only for a known score, within the known score's tolerance. Campaign quality control
(annotation/campaigns/selectors.py), the reviewers' gold misses (annotation/review/
selectors.py) and screening (annotation/screening/services.py score_agrees, with the rule's
tolerance) all judge answers by it.

A pair task's known answer (GoldPreference) is a choice: an answer is correct when it is
that choice (`preference_correct`), on the same skill or the overall question."""

from __future__ import annotations

from django.db.models import Case, F, IntegerField, Q, Value, When
from django.db.models.functions import Abs


def answer_correct(*, given: int | None, known: int | None, tolerance: int) -> bool:
    """The rule in Python: `given` and `known` are scores, None for N/A."""
    if given is None or known is None:
        return given is None and known is None
    return abs(given - known) <= tolerance


def gold_correct_annotations(gold: str) -> dict[str, Case | Abs]:
    """Annotations for a HumanScore queryset joined to its GoldScore through the path `gold`
    (e.g. "assignment__task__gold_scores", filtered to the score's own skill): `diff`, the
    distance to the known score, and `correct`, 1 when the answer is correct (the rule of
    `answer_correct`) else 0."""
    return {
        "diff": Abs(F("score") - F(f"{gold}__score")),
        "correct": Case(
            When(Q(is_na=True) & Q(**{f"{gold}__is_na": True}), then=Value(1)),
            When(
                Q(is_na=False)
                & Q(**{f"{gold}__is_na": False})
                & Q(diff__lte=F(f"{gold}__tolerance")),
                then=Value(1),
            ),
            default=Value(0),
            output_field=IntegerField(),
        ),
    }


def preference_correct(*, given: str, known: str) -> bool:
    """The rule for pairs in Python: the same PairChoice (a, b, tie, both_bad)."""
    return given == known


def gold_preference_correct_annotations(gold: str) -> dict[str, Case]:
    """Annotations for a HumanPreference queryset joined to its GoldPreference through the
    path `gold` (e.g. "assignment__task__gold_preferences", on the same question):
    `correct`, 1 when the choice is the known one (`preference_correct`) else 0."""
    return {
        "correct": Case(
            When(choice=F(f"{gold}__choice"), then=Value(1)),
            default=Value(0),
            output_field=IntegerField(),
        )
    }
