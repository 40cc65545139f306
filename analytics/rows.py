"""The rows every analytics computation reads (pure, no Django): one score as a plain
tuple, and the rows of a report after its filters. analytics.selectors reads them from the
project's campaigns, judge runs and imports; the report (analytics.report.build), the
dashboard (analytics.report.chart_data) and the disagreement explorer
(analytics.explorer.disagreement) compute from them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: (response id, item id, system, skill, rater, value or None for N/A). Human values are the
#: 1-5 integers of campaigns or imported numbers; a judge's value is the mean of its samples.
Row = tuple[int, int, str, str, str, float | None]


@dataclass(frozen=True)
class ReportRows:
    """The rows a report is computed from, after the filters: human and judge score rows
    (judge rows carry the judge's name as rater), each item's facets ({"domains": [...],
    "difficulty": n}) and the (judge, skill) pairs scored on a judge's own scale."""

    human: list[Row]
    judge: list[Row]
    facets: dict[int, dict[str, Any]]
    off_scale: set[tuple[str, str]]
    # "adjudicated" rows (report_rows(human_scores="adjudicated")): `human` holds one row
    # per adjudicated (response, skill) in place of its people's scores (rater ADJUDICATED),
    # `raw_human` the people's own scores, which agreement among people is computed on;
    # `adjudicated` counts the pairs replaced. None / 0 for the default (raw) rows.
    raw_human: list[Row] | None = None
    adjudicated: int = 0


#: The rater of an adjudicated row (no username can contain parentheses).
ADJUDICATED = "(adjudicated)"
