"""Parsing of the scoring card's POST: one `score-<skill id>` per skill ("1".."5" or "na",
read by the project's one score rule, annotation.parsers.score_read),
optional `rationale-<skill id>` and `time-<skill id>`, and the card's `active_ms`.

Only the shape and the score values are checked here. Which skills must be scored and the
rationale length are the service's rules (human_score_submit), so its messages are the
ones the annotator sees.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django import forms

from annotation.parsers import ScoreRefused, score_read
from annotation.services.assignments import ScoreInput

MAX_MS = 24 * 3600 * 1000  # the service's bound for a row's time; longer is a broken clock


@dataclass
class ScoreSubmission:
    scores: list[ScoreInput] = field(default_factory=list)
    active_ms: int | None = None
    error: str = ""
    values: dict[int, str] = field(default_factory=dict)  # skill id -> posted value, to redraw
    rationales: dict[int, str] = field(default_factory=dict)


def _ms(raw: str | None) -> int | None:
    """A client-measured duration; a missing or implausible one is dropped, not refused."""
    try:
        value = int(raw or "")
    except ValueError:
        return None
    return value if 0 <= value <= MAX_MS else None


def score_submission_from_post(post) -> ScoreSubmission:
    result = ScoreSubmission(active_ms=_ms(post.get("active_ms")))
    for key, raw in post.items():
        if not key.startswith("score-"):
            continue
        try:
            skill_id = int(key.removeprefix("score-"))
        except ValueError:
            result.error = "the form was damaged; please reload the page"
            continue
        rationale = post.get(f"rationale-{skill_id}", "").strip()
        result.values[skill_id] = raw.lower()
        try:
            score = score_read(raw)
        except ScoreRefused:
            result.error = "a score is 1 to 5, or N/A"
            continue
        result.scores.append(
            ScoreInput(
                skill_id=skill_id,
                score=score,
                rationale=rationale,
                time_ms=_ms(post.get(f"time-{skill_id}")),
            )
        )
    # Rationales are kept for the redraw even on rows not scored yet.
    for key, raw in post.items():
        suffix = key.removeprefix("rationale-")
        if suffix != key and suffix.isdigit():
            result.rationales[int(suffix)] = raw.strip()
    return result


class SkipForm(forms.Form):
    reason = forms.CharField(
        max_length=300,
        strip=True,
        error_messages={"required": "Please say why you skip this task."},
    )
    action = forms.ChoiceField(choices=[("skip", "Skip"), ("flag", "Flag")], required=False)

    @property
    def flag(self) -> bool:
        return self.cleaned_data.get("action") == "flag"
