"""Pairwise campaigns' submissions: an annotator's preferences between a pair task's two
responses, per asked skill and/or overall.

The claim is the pointwise one (a pair task is a Task row: same leases, overlap K, gold,
attention checks, hidden repeats, quotas and routing). The submission keeps the gating of
`human_score_submit` exactly, through the same backend write (annotation/services/
hot_path.py `submission_record`, which inserts preference rows instead of score rows): a
live lease is accepted, a repeated submission is idempotent, a late one only while the
task has a free slot, and a submission is never counted twice.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from django.utils.translation import gettext

from annotation.models import (
    Campaign,
    PairChoice,
)
from annotation.selectors import PairQuestions, TaskSkill, pair_questions
from annotation.services.assignments import (
    _SUBMIT_ROUNDS,
    MAX_RATIONALE,
    AssignmentError,
    SubmitResult,
    submission_language,
    submission_write,
    submit_read,
)
from flaskweb.db import instance_from

#: Choices that say one response is better, and so may carry a strength.
DIRECTED = (PairChoice.A.value, PairChoice.B.value)
#: What the scoring page and the annotators' API say: the side shown, never A or B (which
#: would tell the stored order). Tie and both bad read the same either way.
SHOWN_CHOICES = ("left", "right", PairChoice.TIE.value, PairChoice.BOTH_BAD.value)


def choice_from_shown(shown: str, *, b_left: bool) -> str:
    """The PairChoice of an answer given by side ("left", "right", "tie", "both_bad") on a
    task whose B was shown on the left when `b_left`; any other value is returned as is
    (and refused by the validation)."""
    if shown == "left":
        return PairChoice.B.value if b_left else PairChoice.A.value
    if shown == "right":
        return PairChoice.A.value if b_left else PairChoice.B.value
    return shown


def choice_to_shown(choice: str, *, b_left: bool) -> str:
    """The side of a PairChoice on the page (the inverse of choice_from_shown)."""
    if choice == PairChoice.A.value:
        return "left" if not b_left else "right"
    if choice == PairChoice.B.value:
        return "right" if not b_left else "left"
    return choice


@dataclass(frozen=True)
class PreferenceInput:
    skill_id: int | None  # None: the overall question
    choice: str  # PairChoice value, in the task's terms (A = Task.response)
    strength: int | None = None  # 1 slightly, 2 much (campaigns that ask it)
    rationale: str = ""
    time_ms: int | None = None


def human_preference_submit(
    *,
    assignment_id: int,
    annotator,
    preferences: list[PreferenceInput],
    active_ms: int | None = None,
    shown: bool = False,
    language: str = "",
) -> SubmitResult:
    """Record an annotator's preferences for one pair task: exactly one per asked skill and
    one for the overall question when it is asked, each a choice the campaign offers.

    Same contract as `human_score_submit`: idempotent (a repeated submission changes
    nothing and returns created=False); a late submission on an expired lease is accepted
    only while the task still has a free slot; refused inside a caller's transaction
    (durable). Raises AssignmentError with a clear message otherwise.

    With `shown`, the choices are by side as the annotator saw them ("left", "right",
    "tie", "both_bad"; SHOWN_CHOICES) and are turned into A/B with the task's stored order.
    `language` is recorded on the assignment, as by `human_score_submit`.
    """
    language = submission_language(language)
    for _ in range(_SUBMIT_ROUNDS):
        result = _submit_round(assignment_id, annotator, preferences, active_ms, shown, language)
        if result is not None:
            return result
    raise RuntimeError(f"assignment {assignment_id} kept changing during its submission")


def _submit_round(
    assignment_id, annotator, preferences, active_ms, shown, language
) -> SubmitResult | None:
    read = submit_read(assignment_id, annotator, pair=True)
    if isinstance(read, SubmitResult):
        return read
    pair_ask, pair_choices, pair_strength, pair_rationale, b_left = read.pair
    if shown:
        preferences = [
            replace(value, choice=choice_from_shown(value.choice, b_left=bool(b_left)))
            for value in preferences
        ]
    campaign = instance_from(
        Campaign,
        {
            "id": read.campaign_id,
            "updated_at": read.campaign_updated_at,
            "skill_mode": read.skill_mode,
            "pair_ask": pair_ask,
            "pair_choices": pair_choices,
            "pair_strength": pair_strength,
            "pair_rationale": pair_rationale,
        },
    )
    questions = pair_questions(
        campaign=campaign, item_id=read.item_id, item_skills=read.item_skills
    )
    answers = preferences_validate(questions, preferences, shown=shown)
    now = read.now
    return submission_write(
        read,
        active_ms=active_ms,
        language=language,
        preference_rows=[
            (
                assignment_id,
                read.campaign_id,
                read.response_id,
                read.response_b_id,
                annotator.pk,
                None if skill is None else skill.skill_id,
                None if skill is None else skill.rubric_id,
                value.choice,
                value.strength,
                value.rationale,
                value.time_ms,
                now,
                now,
            )
            for skill, value in answers
        ],
    )


def preferences_validate(
    questions: PairQuestions, preferences: list[PreferenceInput], *, shown: bool = False
) -> list[tuple[TaskSkill | None, PreferenceInput]]:
    """(asked skill or None for overall, its answer), in the order asked; AssignmentError
    when an answer is missing, repeated, not asked, or not one the campaign offers."""
    by_skill: dict[int | None, PreferenceInput] = {}
    for value in preferences:
        if value.skill_id in by_skill:
            raise AssignmentError("a question was answered twice", code="invalid")
        by_skill[value.skill_id] = value
    asked: list[TaskSkill | None] = list(questions.skills)
    if questions.overall:
        asked.append(None)
    asked_ids = {None if s is None else s.skill_id for s in asked}
    if set(by_skill) - asked_ids:
        raise AssignmentError(
            "an answer was given to a question this task does not ask", code="invalid"
        )
    missing = [
        gettext("overall") if s is None else s.name
        for s in asked
        if (None if s is None else s.skill_id) not in by_skill
    ]
    if missing:
        raise AssignmentError(
            gettext("please choose for: %(questions)s") % {"questions": ", ".join(missing)},
            code="incomplete",
        )
    answers = []
    for skill in asked:
        value = by_skill[None if skill is None else skill.skill_id]
        name = gettext("overall") if skill is None else skill.name
        if value.choice not in questions.choices:
            offered = ", ".join(
                choice_to_shown(c, b_left=False) if shown else c for c in questions.choices
            )
            raise AssignmentError(
                gettext("%(question)s: choose one of %(offered)s")
                % {"question": name, "offered": offered},
                code="invalid",
            )
        if value.strength is not None:
            if not questions.strength:
                raise AssignmentError(
                    f"{name}: this campaign does not ask how much", code="invalid"
                )
            if value.strength not in (1, 2):
                raise AssignmentError(
                    gettext("%(question)s: strength is 1 (slightly) or 2 (much)")
                    % {"question": name},
                    code="invalid",
                )
            if value.choice not in DIRECTED:
                raise AssignmentError(
                    gettext("%(question)s: only a choice of A or B has a strength")
                    % {"question": name},
                    code="invalid",
                )
        if value.rationale and not questions.rationale:
            raise AssignmentError(f"{name}: this campaign asks no rationale", code="invalid")
        if len(value.rationale) > MAX_RATIONALE:
            raise AssignmentError(
                gettext("%(skill)s: the rationale is longer than %(max)d characters")
                % {"skill": name, "max": MAX_RATIONALE},
                code="invalid",
            )
        if value.time_ms is not None and not 0 <= value.time_ms <= 24 * 3600 * 1000:
            raise AssignmentError(gettext("time on task is out of range"), code="invalid")
        answers.append((skill, value))
    return answers


__all__ = [
    "SHOWN_CHOICES",
    "PairQuestions",
    "PreferenceInput",
    "choice_from_shown",
    "choice_to_shown",
    "human_preference_submit",
    "pair_questions",
    "preferences_validate",
]
