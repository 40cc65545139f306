"""Reads for the judge trust report (docs/JUDGE_TRUST.md) beyond the report rows: each
response's length in words, each judge's per-sample scores and the people's test-retest
pairs, narrowed to the responses and skills of the report's rows. The figures themselves
are pure (analytics.trust.figures)."""

from __future__ import annotations

from collections.abc import Sequence

from analytics.rows import ReportRows
from analytics.trust.figures import TrustInputs
from annotation.models import Project
from annotation.selectors import response_texts_for_items, retest_score_rows
from judging.selectors import judge_sample_rows


def word_count(text: str) -> int:
    """Words of a response: runs of non-white-space characters (str.split())."""
    return len(text.split())


def trust_inputs(
    *, project: Project, rows: ReportRows, judges: Sequence[str] | None = None
) -> TrustInputs:
    """The extra inputs of the trust figures for the report of `rows` (its filters already
    applied: only responses and skills that are in the rows are kept)."""
    responses = {row[0] for row in rows.human} | {row[0] for row in rows.judge}
    items = sorted({row[1] for row in rows.human} | {row[1] for row in rows.judge})
    skills = {row[3] for row in rows.human} | {row[3] for row in rows.judge}
    words = {
        pk: word_count(text)
        for pk, _item, _model, text in response_texts_for_items(item_ids=items)
        if pk in responses
    }
    judged = {row[4] for row in rows.judge}
    samples = {
        name: [r for r in found if r[0] in responses and r[2] in skills]
        for name, found in judge_sample_rows(project=project, judges=judges or ()).items()
        if name in judged
    }
    retest = [r for r in retest_score_rows(project=project) if r[0] in responses and r[2] in skills]
    return TrustInputs(words=words, samples=samples, retest=retest)
