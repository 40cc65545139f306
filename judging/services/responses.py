"""Judging one response in one run (tests, tools): a batch of one
(judging.services.batches)."""

from __future__ import annotations

from judging.services.batches import judge_batch


def judge_response(*, run_id: int, response_id: int) -> None:
    """Make the missing judgments (samples, or both orders of its pair) of one response in
    one run, as a batch of one, waiting for it to complete."""
    judge_batch(run_id=run_id, response_ids=[response_id])
