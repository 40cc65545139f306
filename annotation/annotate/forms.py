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
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from annotation.parsers import ScoreRefused, score_read
from annotation.services.assignments import ScoreInput
from annotation.services.preferences import SHOWN_CHOICES, PreferenceInput

MAX_MS = 24 * 3600 * 1000  # the service's bound for a row's time; longer is a broken clock


@dataclass
class ScoreSubmission:
    scores: list[ScoreInput] = field(default_factory=list)
    active_ms: int | None = None
    error: str = ""
    values: dict[int, str] = field(default_factory=dict)  # skill id -> posted value, to redraw
    rationales: dict[int, str] = field(default_factory=dict)


def _ms(raw: str | None) -> int | None:
    """A client-measured duration; a missing or implausible one is dropped, not refused.

    0 is dropped too: the scoring page cannot submit a task, or score a row, in no focused
    time at all, so a 0 means the clock did not run (a row it never saw focused, a page
    without its script), and is stored as no value (NULL), which exports print empty."""
    try:
        value = int(raw or "")
    except ValueError:
        return None
    return value if 0 < value <= MAX_MS else None


def score_submission_from_post(post) -> ScoreSubmission:
    result = ScoreSubmission(active_ms=_ms(post.get("active_ms")))
    for key, raw in post.items():
        if not key.startswith("score-"):
            continue
        try:
            skill_id = int(key.removeprefix("score-"))
        except ValueError:
            result.error = gettext("the form was damaged; please reload the page")
            continue
        rationale = post.get(f"rationale-{skill_id}", "").strip()
        result.values[skill_id] = raw.lower()
        try:
            score = score_read(raw)
        except ScoreRefused:
            result.error = gettext("a score is 1 to 5, or N/A")
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


@dataclass
class PreferenceSubmission:
    """A pair card's POST: `pref-<skill id>` or `pref-overall` (a side: left, right, tie,
    both_bad), optional `strength-<key>` (1 or 2), `rationale-<key>`, `time-<key>`."""

    preferences: list[PreferenceInput] = field(default_factory=list)
    active_ms: int | None = None
    error: str = ""
    values: dict[str, str] = field(default_factory=dict)  # key -> posted side, to redraw
    strengths: dict[str, str] = field(default_factory=dict)
    rationales: dict[str, str] = field(default_factory=dict)


def preference_submission_from_post(post) -> PreferenceSubmission:
    result = PreferenceSubmission(active_ms=_ms(post.get("active_ms")))
    for key, raw in post.items():
        if not key.startswith("pref-"):
            continue
        name = key.removeprefix("pref-")
        if name != "overall" and not name.isdigit():
            result.error = gettext("the form was damaged; please reload the page")
            continue
        result.values[name] = raw
        strength_raw = post.get(f"strength-{name}", "")
        if strength_raw:
            result.strengths[name] = strength_raw
        if raw not in SHOWN_CHOICES:
            result.error = gettext("choose one of the offered answers")
            continue
        if strength_raw not in ("", "1", "2"):
            result.error = gettext("how much better is 1 (slightly) or 2 (much)")
            continue
        # a strength left over from an earlier A or B choice goes with a tie or both bad
        directed = raw in ("left", "right")
        result.preferences.append(
            PreferenceInput(
                skill_id=None if name == "overall" else int(name),
                choice=raw,
                strength=int(strength_raw) if strength_raw and directed else None,
                rationale=post.get(f"rationale-{name}", "").strip(),
                time_ms=_ms(post.get(f"time-{name}")),
            )
        )
    for key, raw in post.items():
        suffix = key.removeprefix("rationale-")
        if suffix != key:
            result.rationales[suffix] = raw.strip()
    return result


class SkipForm(forms.Form):
    reason = forms.CharField(
        max_length=300,
        strip=True,
        error_messages={"required": _("Please say why you skip this task.")},
    )
    action = forms.ChoiceField(choices=[("skip", "Skip"), ("flag", "Flag")], required=False)

    @property
    def flag(self) -> bool:
        return self.cleaned_data.get("action") == "flag"
