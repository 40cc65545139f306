"""The judge comparison's inputs, read through the upstream selectors, and the comparison
computed from them (analytics.judge_compare.figures). Computed on request, bounded: one
read of the project's report rows (analytics.selectors.report_rows), one of the chosen
judges' setups and run costs (judging.selectors), and at most MAX_RESAMPLES resamples
over at most figures.MAX_JUDGES judges (bench/judge_compare_bench.py times it)."""

from __future__ import annotations

from dataclasses import dataclass

from analytics.judge_compare import figures
from analytics.rows import ReportRows
from analytics.selectors import report_rows
from annotation.models import Project
from judging.selectors import JudgeSetup, judge_setups_for_comparison

#: As the report's (analytics.report.selectors): 1,000 resamples by default, at most 10,000.
DEFAULT_RESAMPLES = 1000
MAX_RESAMPLES = 10_000


@dataclass(frozen=True)
class CompareOptions:
    """What the comparison may choose from: the judges with scores in the project and the
    skills they scored (by name)."""

    judges: list[str]
    skills: list[str]


def compare_rows(*, project: Project) -> ReportRows:
    """Every human and judge score row of the project (people's own scores)."""
    return report_rows(project=project)


def compare_options(*, rows: ReportRows) -> CompareOptions:
    return CompareOptions(
        judges=sorted({row[4] for row in rows.judge}),
        skills=sorted({row[3] for row in rows.judge} & {row[3] for row in rows.human}),
    )


def setup_of(found: JudgeSetup) -> figures.Setup:
    """A judging.selectors.JudgeSetup as the pure figures take it."""
    prompt = f"{found.prompt_key} v{found.prompt_version}" if found.prompt_key else ""
    text = (
        f"[system]\n{found.system_prompt}\n[user]\n{found.user_template}"
        if found.system_prompt
        else found.user_template
    )
    return figures.Setup(
        name=found.name,
        kind=found.kind,
        model=found.model,
        provider=found.provider,
        base_url=found.base_url,
        temperature=found.temperature,
        samples=found.samples,
        prompt=prompt,
        prompt_text=text,
        cost=float(found.cost) if found.runs else None,
        judgments=found.judgments,
    )


def judge_comparison_for_project(
    *,
    project: Project,
    rows: ReportRows,
    judges: list[str],
    baseline: str | None = None,
    measure: str = "pearson",
    resamples: int = DEFAULT_RESAMPLES,
    quality_skill: str | None = None,
) -> dict:
    """The comparison of `judges` (checked by the caller against `compare_options`)."""
    setups = {
        found.name: setup_of(found)
        for found in judge_setups_for_comparison(project=project, names=judges)
    }
    wanted = set(judges)
    return figures.compare_judges(
        rows.human,
        [row for row in rows.judge if row[4] in wanted],
        judges=judges,
        baseline=baseline,
        measure=measure,
        resamples=resamples,
        quality_skill=quality_skill,
        setups=setups,
    )
