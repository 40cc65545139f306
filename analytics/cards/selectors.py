"""Reads of the judge leaderboard across projects and of evaluation cards. Both read stored
report snapshots (analytics.report.snapshots) and the judges' configurations; neither
computes a report.

**Who sees what.** The leaderboard lists the projects where the user is an admin or a
researcher (site admins: every project); a project the user cannot see is never read, so it
is neither named nor counted. A user with no such project gets nothing (403 on the page).

**The dataset hash** of a card: the SHA-256 of the UTF-8 JSON text (no spaces, not ASCII-
escaped) of the list `[[item content hash, response id, response text], ...]` of every
response the judge's counted runs scored (an imported judge, with no run of its name: every
response its imported scores cover), within the snapshot's skill, system, domain and
difficulty filters, ordered by response id. Equal responses to equal items in the same rows
give the same hash; a changed text, a new response or another item does not."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from analytics.cards.small_samples import card_flag_small_samples, interval_problem, reason
from analytics.models import ImportedScore, RaterKind, ReportSnapshot, SnapshotStatus
from analytics.report.snapshots import (
    STATUS_FIELDS,
    snapshot_as_of,
    snapshot_key,
    snapshot_latest_done,
    snapshot_params,
    snapshot_part,
)
from annotation.access import STAFF_ROLES, is_site_admin
from annotation.models import Project
from annotation.selectors import item_facets, rubrics_current_for_project, skill_list_for_project
from judging.fingerprints import (
    SHORT,
    JudgeIdentity,
    judge_card_facts,
    judge_identities,
    judged_response_rows,
    scored_response_rows,
)

LEVELS = ("instance", "item", "system")
TRUST_KEYS = ("calibration", "strata", "na", "stochasticity", "probes")
CARD_VERSION = 1
#: Limits the card's "known limitations" are written from.
SMALL_N = 30
FEW_ITEMS = 10
WIDE_INTERVAL = 0.4
NA_AGREEMENT = 0.9  # N/A or not: the share of responses where judge and people agree
NA_RATE_GAP = 0.1
HASH_DEFINITION = (
    "sha256 of the JSON list [[item content hash, response id, response text], ...] of the "
    "responses the judge scored (its counted runs, or its imported scores), by response id"
)


# --- who sees which projects ----------------------------------------------------------------


def leaderboard_projects(*, user) -> list[Project]:
    """The projects whose snapshots the user may compare: all for a site admin, else those
    where the user is an admin or a researcher, by slug."""
    if is_site_admin(user):
        return list(Project.objects.order_by("slug"))
    if not user.is_authenticated:
        return []
    return list(
        Project.objects.filter(memberships__user=user, memberships__role__in=STAFF_ROLES)
        .distinct()
        .order_by("slug")
    )


# --- the leaderboard ------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    value: float | None
    low: float | None = None
    high: float | None = None
    note: str = ""  # why the interval is not shown, "" when it is (small_samples)

    @classmethod
    def of(cls, figures: Mapping[str, Any], measure: str, ci_key: str = "ci") -> Figure:
        ci = (figures.get(ci_key) or {}).get(measure) or {}
        value = figures.get(measure)
        return cls(value, ci.get("low"), ci.get("high"), interval_problem(value, ci))

    def as_dict(self) -> dict[str, float | None]:
        return {"value": self.value, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class LeaderboardRow:
    fingerprint: str
    label: str
    project: str  # slug
    project_name: str
    judge: str
    skill: str
    n: int | None
    pearson: Figure
    spearman: Figure
    ceiling_pearson: Figure
    ceiling_spearman: Figure
    snapshot_id: int
    too_few: str = ""  # the correlations' reason below their minimum (small_samples)
    ceiling_too_few: str = ""  # the human ceiling's

    @property
    def short(self) -> str:
        return self.fingerprint[:SHORT]

    def as_dict(self) -> dict[str, Any]:
        return {
            "configuration": {"fingerprint": self.fingerprint, "label": self.label},
            "project": self.project,
            "judge": self.judge,
            "skill": self.skill,
            "n": self.n,
            "pearson": self.pearson.as_dict(),
            "spearman": self.spearman.as_dict(),
            "human_ceiling": {
                "pearson": self.ceiling_pearson.as_dict(),
                "spearman": self.ceiling_spearman.as_dict(),
            },
            "too_few": {"correlation": self.too_few, "human_ceiling": self.ceiling_too_few},
            "snapshot": self.snapshot_id,
        }


@dataclass(frozen=True)
class Configuration:
    fingerprint: str
    label: str
    projects: int

    @property
    def short(self) -> str:
        return self.fingerprint[:SHORT]


@dataclass
class Leaderboard:
    level: str
    rows: list[LeaderboardRow] = field(default_factory=list)
    configurations: list[Configuration] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)  # every skill seen, unfiltered
    without_snapshot: list[str] = field(default_factory=list)  # visible project slugs


def default_snapshot(*, project: Project) -> ReportSnapshot | None:
    """The project's latest done default report snapshot."""
    return snapshot_latest_done(project=project, key=snapshot_key(snapshot_params()))


def judge_leaderboard(
    *,
    projects: Sequence[Project],
    level: str = "instance",
    skills: Sequence[str] = (),
    fingerprint: str = "",
    shared_only: bool = False,
) -> Leaderboard:
    """Each judge configuration's correlation with people per skill on every one of
    `projects` it ran on, from each project's latest done default snapshot. `fingerprint`
    narrows to one configuration (a prefix of at least 6 characters is enough);
    `shared_only` keeps configurations found on two projects or more."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}")
    board = Leaderboard(level=level)
    identities: dict[tuple[int, str], JudgeIdentity] = {
        (i.project_id, i.name): i for i in judge_identities(project_ids=[p.pk for p in projects])
    }
    rows: list[LeaderboardRow] = []
    seen_skills: list[str] = []
    for project in projects:
        snapshot = default_snapshot(project=project)
        report = None
        if snapshot is not None:
            # its own small part; a snapshot made before that part existed has the report
            report = snapshot_part(snapshot, "leaderboard") or snapshot_part(snapshot, "report")
        if snapshot is None or not report:
            board.without_snapshot.append(project.slug)
            continue
        agreement = report.get("agreement") or {}
        for judge, by_skill in (report.get("correlation") or {}).items():
            identity = identities.get((project.pk, judge))
            if identity is None:  # imported scores without a configuration
                continue
            if fingerprint and not identity.fingerprint.startswith(fingerprint):
                continue
            for skill, levels in by_skill.items():
                if skill not in seen_skills:
                    seen_skills.append(skill)
                if skills and skill not in skills:
                    continue
                figures = levels.get(level) or {}
                human = agreement.get(skill) or {}
                flagged = {"correlation": {skill: {level: dict(figures)}}, "human_ceiling": {}}
                if human:
                    flagged["human_ceiling"][skill] = dict(human)
                card_flag_small_samples(flagged)  # a snapshot's own flags, or the same rule
                rows.append(
                    LeaderboardRow(
                        fingerprint=identity.fingerprint,
                        label=identity.label,
                        project=project.slug,
                        project_name=project.name,
                        judge=judge,
                        skill=skill,
                        n=figures.get("n"),
                        pearson=Figure.of(figures, "pearson"),
                        spearman=Figure.of(figures, "spearman"),
                        ceiling_pearson=_ceiling(human, "pearson"),
                        ceiling_spearman=_ceiling(human, "spearman"),
                        snapshot_id=snapshot.pk,
                        too_few=reason(flagged["correlation"][skill][level], "pearson"),
                        ceiling_too_few=reason(flagged["human_ceiling"].get(skill), "loo_ceiling"),
                    )
                )
    on_projects: dict[str, set[str]] = {}
    labels: dict[str, str] = {}
    for row in rows:
        on_projects.setdefault(row.fingerprint, set()).add(row.project)
        labels[row.fingerprint] = row.label
    if shared_only:
        rows = [row for row in rows if len(on_projects[row.fingerprint]) >= 2]
    rows.sort(
        key=lambda r: (r.label, r.fingerprint, r.project, r.judge, seen_skills.index(r.skill))
    )
    board.rows = rows
    board.configurations = sorted(
        (
            Configuration(fp, labels[fp], len(slugs))
            for fp, slugs in on_projects.items()
            if not shared_only or len(slugs) >= 2
        ),
        key=lambda c: (c.label, c.fingerprint),
    )
    board.skills = seen_skills
    return board


def _ceiling(agreement: Mapping[str, Any], measure: str) -> Figure:
    """The skill's leave-one-out human ceiling (its interval sits beside it)."""
    ci = (agreement.get("loo_ceiling_ci") or {}).get(measure) or {}
    value = (agreement.get("loo_ceiling") or {}).get(measure)
    return Figure(value, ci.get("low"), ci.get("high"), interval_problem(value, ci))


# --- cards ----------------------------------------------------------------------------------


def snapshot_done_get(*, project: Project, snapshot_id: int) -> ReportSnapshot | None:
    return (
        ReportSnapshot.objects.filter(project=project, pk=snapshot_id, status=SnapshotStatus.DONE)
        .only(*STATUS_FIELDS)
        .first()
    )


def snapshot_current(*, project: Project) -> ReportSnapshot | None:
    """The snapshot a run page's card link means: the latest done default one, else the
    project's latest done snapshot of any params."""
    found = default_snapshot(project=project)
    if found is not None:
        return found
    return (
        ReportSnapshot.objects.filter(project=project, status=SnapshotStatus.DONE)
        .only(*STATUS_FIELDS)
        .order_by("-finished_at", "-pk")
        .first()
    )


@dataclass(frozen=True)
class CardJudge:
    """A judge a card can be built for, as the cards page lists it."""

    name: str
    label: str  # its configuration's fingerprint label; "" for imported scores
    skills: list[tuple[str, int | None]]  # (skill, instance-level n) in the snapshot


def card_judges(*, project: Project, snapshot: ReportSnapshot | None) -> list[CardJudge]:
    """Every judge of the project (its configurations) and every judge `snapshot`
    correlates with people (imported scores included), by name: each has a card. Reads the
    snapshot's small leaderboard part (its report when made before that part existed)."""
    correlation: Mapping[str, Any] = {}
    if snapshot is not None:
        report = snapshot_part(snapshot, "leaderboard") or snapshot_part(snapshot, "report")
        correlation = (report or {}).get("correlation") or {}
    labels = {i.name: i.label for i in judge_identities(project_ids=[project.pk])}
    return [
        CardJudge(
            name=name,
            label=labels.get(name, ""),
            skills=[
                (skill, (levels.get("instance") or {}).get("n"))
                for skill, levels in (correlation.get(name) or {}).items()
            ],
        )
        for name in sorted(set(labels) | set(correlation), key=lambda n: (n.casefold(), n))
    ]


def imported_judge_response_rows(
    *, project: Project, rater: str, skills: Sequence[str] = (), systems: Sequence[str] = ()
) -> list[tuple[int, int, str, str, str]]:
    """judged_response_rows for an imported judge: the responses its imported scores cover."""
    return scored_response_rows(
        ImportedScore.objects.filter(project=project, rater_kind=RaterKind.JUDGE, rater=rater),
        skills=skills,
        systems=systems,
    )


def imported_judge_datasets(*, project: Project, rater: str) -> list[str]:
    return sorted(
        set(
            ImportedScore.objects.filter(
                project=project, rater_kind=RaterKind.JUDGE, rater=rater
            ).values_list("batch__dataset__name", flat=True)
        )
    )


def dataset_hash(rows: Sequence[tuple[int, str, str]]) -> str:
    """SHA-256 (hex) of the JSON list [[item content hash, response id, text], ...] sorted by
    response id (module docstring)."""
    ordered = [[h, rid, text] for rid, h, text in sorted(rows, key=lambda r: r[0])]
    text = json.dumps(ordered, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def card_build(*, project: Project, snapshot: ReportSnapshot, judge: str) -> dict[str, Any] | None:
    """The evaluation card of `judge` from `snapshot` (None if the project has neither a
    judge of that name nor a correlation of it in the snapshot): JSON-ready, in a fixed
    order, every figure copied as the snapshot stores it, each figure group with its
    `too_few` reason beside its n (analytics/cards/small_samples.py)."""
    report = snapshot_part(snapshot, "report") or {}
    correlation = (report.get("correlation") or {}).get(judge)
    as_of = snapshot_as_of(snapshot) or snapshot.finished_at
    facts = judge_card_facts(project=project, name=judge, as_of=as_of) if as_of else None
    if correlation is None and facts is None:
        return None
    params = snapshot.params or {}
    runs = facts.runs if facts is not None else []
    rows = judged_response_rows(
        run_ids=[run.id for run in runs],
        skills=params.get("skills") or (),
        systems=params.get("systems") or (),
    )
    imported = not runs and correlation is not None
    if imported:
        # an imported judge (no run of this name): the responses its imported scores cover
        rows = imported_judge_response_rows(
            project=project,
            rater=judge,
            skills=params.get("skills") or (),
            systems=params.get("systems") or (),
        )
    domains, difficulties = params.get("domains") or [], params.get("difficulties") or []
    if rows and (domains or difficulties):
        facets = item_facets(item_ids={row[1] for row in rows})

        def kept(item_id: int) -> bool:
            found = facets.get(item_id, {})
            if domains and not set(found.get("domains") or []) & set(domains):
                return False
            return not difficulties or found.get("difficulty") in difficulties

        rows = [row for row in rows if kept(row[1])]
    skills = list(correlation or {})
    agreement = report.get("agreement") or {}
    ceiling = {
        skill: {
            key: agreement[skill][key]
            for key in (
                "loo_ceiling",
                "loo_ceiling_ci",
                "n_raters",
                "n_units",
                "krippendorff_alpha",
                "krippendorff_alpha_ci",
                "mean_pairwise_spearman",
            )
            if key in agreement[skill]
        }
        for skill in skills
        if skill in agreement
    }
    trust_all = report.get("trust") or {}
    trust = trust_all.get(judge) if isinstance(trust_all, dict) else None
    configuration = facts.configuration if facts is not None else None
    total = sum((run.cost for run in runs), Decimal(0))
    card: dict[str, Any] = {
        "card_version": CARD_VERSION,
        "project": {"slug": project.slug, "name": project.name},
        "judge": judge,
        "snapshot": {
            "id": snapshot.pk,
            "key": snapshot.key,
            "params": params,
            "finished_at": snapshot.finished_at.isoformat() if snapshot.finished_at else None,
            "as_of": as_of.isoformat() if as_of else None,
            "resamples": report.get("resamples", params.get("resamples")),
            "human_scores": report.get("human_scores", "raw"),
        },
        "configuration": configuration,
        "prompt_template": facts.template if facts is not None else None,
        "k": configuration["samples"] if configuration else None,
        "data": {
            "dataset_hash": dataset_hash([(r[0], r[2], r[4]) for r in rows]),
            "hash_definition": HASH_DEFINITION,
            "datasets": sorted({run.dataset for run in runs})
            if not imported
            else imported_judge_datasets(project=project, rater=judge),
            "source": "imported scores" if imported else "runs",
            "items": len({row[1] for row in rows}),
            "responses": len(rows),
            "models": sorted({row[3] for row in rows}),
        },
        "rubrics": _rubrics(project, skills),
        "runs": [
            {
                "id": run.id,
                "dataset": run.dataset,
                "finished_at": run.finished_at,
                "judgments": run.judgments,
                "cost": str(run.cost),
                "prompt_tokens": run.prompt_tokens,
                "completion_tokens": run.completion_tokens,
            }
            for run in runs
        ],
        "cost": {
            "total": str(total),
            "prompt_tokens": sum(run.prompt_tokens for run in runs),
            "completion_tokens": sum(run.completion_tokens for run in runs),
        },
        "correlation": correlation or {},
        "human_ceiling": ceiling,
        "prediction_powered": _prediction_powered(report, judge),
        "trust": trust if trust else None,
    }
    card_flag_small_samples(card)
    card["limitations"] = card_limitations(card)
    return card


def _prediction_powered(report: Mapping[str, Any], judge: str) -> list[dict[str, Any]] | None:
    """The judge's prediction-powered rows of all systems together, one per skill, as the
    report holds them (docs/PREDICTION_POWERED.md) but for the judge and the system, which
    the card and "all systems" say; None for a snapshot made before the report had them."""
    rows = report.get("prediction_powered")
    if not isinstance(rows, list):
        return None
    return [
        {key: value for key, value in row.items() if key not in ("judge", "system")}
        for row in rows
        if isinstance(row, Mapping) and row.get("judge") == judge and row.get("system") is None
    ]


def _rubrics(project: Project, skills: Sequence[str]) -> dict[str, dict[str, Any]]:
    """skill name -> the rubric version in force for it in the project."""
    by_name = {skill.name: skill.pk for skill in skill_list_for_project(project=project)}
    rubrics = rubrics_current_for_project(project=project)
    found: dict[str, dict[str, Any]] = {}
    for name in skills:
        rubric = rubrics.get(by_name.get(name, -1))
        if rubric is not None:
            found[name] = {
                "version": rubric.version,
                "source": "project" if rubric.project_id else "built-in",
            }
    return found


def card_limitations(card: Mapping[str, Any]) -> list[str]:
    """What the card's own figures say the reader should be careful about (in a fixed
    order: general first, then skill by skill)."""
    said: list[str] = []
    config = card["configuration"]
    if config is None:
        said.append(
            "No configuration of this judge in the project (imported scores): its model, "
            "prompt and parameters are not known here."
        )
    if not card["correlation"]:
        said.append("This snapshot holds no correlation of this judge with people.")
    if not card["snapshot"]["resamples"]:
        said.append(
            "The snapshot was computed without bootstrap resamples: no figure has an interval."
        )
    if card["snapshot"]["params"] and any(
        card["snapshot"]["params"].get(k) for k in ("skills", "judges", "systems", "domains")
    ):
        said.append("The snapshot is filtered (see its params): the figures hold for that subset.")
    trust = card["trust"] or {}
    missing = [key for key in TRUST_KEYS if key not in trust]
    if missing:
        said.append(f"Trust figures not in this snapshot: {', '.join(missing)}.")
    if "probes" in trust and not trust["probes"]:
        said.append("No bias probe was run for this judge.")
    if config is not None and config.get("samples") == 1 and "stochasticity" not in trust:
        said.append("One sample per response (k = 1): how stable the judge is was not measured.")
    if config is not None and config.get("kind") == "baseline":
        said.append("A baseline metric, not a model: read it as a floor to beat.")
    ceiling = card["human_ceiling"]
    for skill, levels in card["correlation"].items():
        instance = levels.get("instance") or {}
        n = instance.get("n") or 0
        if n < SMALL_N:
            said.append(
                f"{skill}: only {n} response{'' if n == 1 else 's'} scored by both the judge"
                " and people."
            )
        items = (levels.get("item") or {}).get("n")
        if items is not None and items < FEW_ITEMS:
            said.append(
                f"{skill}: the item level rests on {items} item{'' if items == 1 else 's'}."
            )
        ci = (instance.get("ci") or {}).get("pearson") or {}
        low, high = ci.get("low"), ci.get("high")
        shown = not reason(instance, "pearson") and not interval_problem(
            instance.get("pearson"), ci
        )
        if shown and low is not None and high is not None and high - low > WIDE_INTERVAL:
            said.append(f"{skill}: the Pearson interval is wide ({low:.2f} to {high:.2f}).")
        if instance.get("pearson") is None and n:
            said.append(f"{skill}: Pearson is undefined (a constant side).")
        human = ceiling.get(skill) or {}
        if (human.get("loo_ceiling") or {}).get("pearson") is None:
            said.append(f"{skill}: no human ceiling (fewer than two annotators per response).")
    for row in card.get("prediction_powered") or []:
        skill, few = row.get("skill"), row.get("too_few")
        if few:
            said.append(f"{skill}: no prediction-powered estimate ({few}).")
            continue
        judge_mean, low, high = row.get("judge_mean"), row.get("ci_low"), row.get("ci_high")
        if all(isinstance(v, int | float) for v in (judge_mean, low, high)) and not (
            low <= judge_mean <= high
        ):
            said.append(
                f"{skill}: the judge alone says {judge_mean:.2f} on average, outside the"
                f" interval of what people would say ({low:.2f} to {high:.2f}): read its"
                " scores as biased there."
            )
    na = trust.get("na")
    if isinstance(na, Mapping):
        for skill, figures in na.items():
            if not isinstance(figures, Mapping):
                continue
            agree = figures.get("agreement")
            if isinstance(agree, int | float) and agree < NA_AGREEMENT:
                said.append(
                    f"N/A: the judge and people agree on whether {skill} applies for only "
                    f"{agree:.0%} of the responses."
                )
            judge_rate, people_rate = figures.get("judge_rate"), figures.get("people_rate")
            if (
                isinstance(judge_rate, int | float)
                and isinstance(people_rate, int | float)
                and abs(judge_rate - people_rate) > NA_RATE_GAP
            ):
                said.append(
                    f"N/A: the judge says N/A on {skill} for {judge_rate:.0%} of its scores, "
                    f"people for {people_rate:.0%}."
                )
    return said
