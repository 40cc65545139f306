"""Session keys more than one annotation feature reads. A leaf: it imports nothing, so the
language feature can tell a study session from a member's without importing the study
feature (the features stay independent, pyproject's import contract)."""

from __future__ import annotations

#: the id of the study participant this browser session is (set at study entry)
SESSION_PARTICIPANT = "study_participant"
