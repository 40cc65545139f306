"""Reads of the drill-down (docs/DRILL_DOWN.md): the responses behind a figure.

A selection is a set of units, (response, skill) pairs, read from the same report rows the
report and the trust page compute from (analytics.selectors.report_rows), so the number of
responses it holds equals the number a figure shows for the same filters:

- human_level / judge_level: the people's consensus (mean of their scores, N/A left out)
  and the judge's value, each rounded onto the scale half up (analytics.trust.figures.
  round_scale) or "na", over the responses the confusion matrix counts (human rows and a
  judge row on the skill);
- stratum: the trust page's groups (analytics.trust.figures._tercile_strata, _groups),
  over the responses with a numeric consensus and a numeric judge value;
- probe: the (response, skill) pairs both a probe run and its base run scored
  (analytics.trust.probes.run_figures), or the responses of a pairwise probe's verdicts.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from analytics.explorer.selectors import NAMED_FILTERS, filter_choices, filter_values_resolve
from analytics.models import ImportedScore, RaterKind
from analytics.report.chart_data import half_step
from analytics.rows import ReportRows
from analytics.selectors import report_rows
from analytics.trust.figures import human_spread, round_scale, terciles
from analytics.trust_inputs import word_count
from annotation.models import Project
from annotation.selectors import (
    campaign_names_for_project,
    campaigns_for_responses,
    human_score_lists_for_responses,
    item_facets,
    response_texts_for_drill_down,
    response_texts_for_items,
)
from judging.selectors import (
    ProbeRunData,
    judge_outputs_for_responses,
    latest_run_ids_for_project,
    probe_data,
)

LEVELS = ("1", "2", "3", "4", "5", "na")
TERCILES = ("low", "middle", "high")
STRATA = ("all", "human_spread", "length", "domain", "difficulty")
HUMAN_SCORES = ("raw", "adjudicated")
#: Responses per page of the drill-down page and the default page of the API.
PAGE_SIZE = 25
#: The pairwise probes' unit: one Overall verdict per order.
OVERALL = "Overall"
#: The parameters a selection takes (a repeatable one may be given several times).
REPEATABLE = ("skill", "judge", "system", "domain", "difficulty")
SINGLE = (
    "campaign",
    "human_level",
    "judge_level",
    "human_bin",
    "judge_bin",
    "stratum",
    "probe",
    "human",
)


@dataclass(frozen=True)
class ItemFilters:
    """A drill-down selection's filters, as the project spells its names."""

    skills: tuple[str, ...] = ()
    judges: tuple[str, ...] = ()
    systems: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    difficulties: tuple[int, ...] = ()
    campaign: int | None = None
    human_level: str = ""
    judge_level: str = ""
    human_bin: float | None = None  # a heat-map row: the consensus to the nearest 0.5
    judge_bin: float | None = None  # a heat-map column: the judge's value to the nearest 0.5
    stratum: tuple[str, str] | None = None  # (kind, label); ("all", "") for every pair
    probe: str = ""
    human_scores: str = "raw"

    def described(self) -> list[tuple[str, str]]:
        """(parameter, value) pairs of the filters that are set, for the page's summary."""
        out: list[tuple[str, str]] = []
        for name, values in (
            ("skill", self.skills),
            ("judge", self.judges),
            ("system", self.systems),
            ("domain", self.domains),
            ("difficulty", tuple(str(d) for d in self.difficulties)),
        ):
            out += [(name, v) for v in values]
        if self.campaign is not None:
            out.append(("campaign", str(self.campaign)))
        if self.human_level:
            out.append(("human_level", self.human_level))
        if self.judge_level:
            out.append(("judge_level", self.judge_level))
        for name, value in (("human_bin", self.human_bin), ("judge_bin", self.judge_bin)):
            if value is not None:
                out.append((name, f"{value:g}"))
        if self.stratum is not None:
            kind, label = self.stratum
            out.append(("stratum", f"{kind}:{label}" if label else kind))
        if self.probe:
            out.append(("probe", self.probe))
        if self.human_scores != "raw":
            out.append(("human", self.human_scores))
        return out


def item_filters_resolve(
    *, project: Project, given: Mapping[str, Sequence[str]]
) -> tuple[ItemFilters, dict[str, list[str]]]:
    """The filters of a query (parameter -> its values) checked against the project: an
    ItemFilters and a problem list per parameter (a selection with problems is not read).
    Names match in any case, as in the disagreement explorer."""
    errors: dict[str, list[str]] = {}
    named, unknown = filter_values_resolve(
        given={name: list(given.get(name, [])) for name in NAMED_FILTERS},
        choices=filter_choices(project=project),
    )
    errors.update(unknown)
    difficulties: list[int] = []
    for value in given.get("difficulty", []):
        if value.strip() in {"1", "2", "3", "4", "5"}:
            difficulties.append(int(value))
        else:
            errors.setdefault("difficulty", []).append(f"{value!r} is not a difficulty (1-5)")
    for name in SINGLE:
        if len(given.get(name, [])) > 1:
            errors.setdefault(name, []).append(f"give {name} once")

    def one(name: str) -> str:
        values = given.get(name, [])
        return values[0].strip() if values else ""

    campaign: int | None = None
    if text := one("campaign"):
        campaigns = campaign_names_for_project(project=project)
        by_name = {name.casefold(): pk for pk, (name, _d, _i) in campaigns.items()}
        if text.isdigit() and int(text) in campaigns:
            campaign = int(text)
        elif text.casefold() in by_name:
            campaign = by_name[text.casefold()]
        else:
            errors.setdefault("campaign", []).append(f"no campaign {text!r} in this project")
    levels = {}
    for name in ("human_level", "judge_level"):
        levels[name] = one(name).lower()
        if levels[name] and levels[name] not in LEVELS:
            errors.setdefault(name, []).append(f"{one(name)!r} is not a level: 1, 2, 3, 4, 5 or na")
    bins: dict[str, float | None] = {}
    for name in ("human_bin", "judge_bin"):
        bins[name] = _bin_parse(one(name), name, errors)
    stratum = _stratum_parse(one("stratum"), errors)
    human = one("human") or "raw"
    if human not in HUMAN_SCORES:
        errors.setdefault("human", []).append(f"{human!r} is not one of raw, adjudicated")
    judges = named["judge"]
    probe = one("probe")
    per_judge = [
        n for n in ("judge_level", "judge_bin", "stratum", "probe") if one(n) and n not in errors
    ]
    if per_judge and len(judges) != 1:
        for name in per_judge:
            errors.setdefault(name, []).append(f"{name} is a judge's figure: give one judge")
    if stratum is not None and len(named["skill"]) != 1 and "stratum" not in errors:
        errors["stratum"] = ["the strata are per skill: give one skill"]
    filters = ItemFilters(
        skills=tuple(named["skill"]),
        judges=tuple(judges),
        systems=tuple(named["system"]),
        domains=tuple(named["domain"]),
        difficulties=tuple(difficulties),
        campaign=campaign,
        human_level=levels["human_level"],
        judge_level=levels["judge_level"],
        human_bin=bins["human_bin"],
        judge_bin=bins["judge_bin"],
        stratum=stratum,
        probe=probe,
        human_scores=human,
    )
    return filters, errors


def _bin_parse(text: str, name: str, errors: dict[str, list[str]]) -> float | None:
    """A heat-map bin: a score to the nearest 0.5 on 1-5 (as 4 or 4.5)."""
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (1 <= value <= 5 and (value * 2).is_integer()):
        errors.setdefault(name, []).append(
            f"{text!r} is not a heat-map bin: 1 to 5 in steps of 0.5 (as 4.5)"
        )
        return None
    return value


def _stratum_parse(text: str, errors: dict[str, list[str]]) -> tuple[str, str] | None:
    if not text:
        return None
    kind, _, label = text.partition(":")
    kind, label = kind.strip(), label.strip()
    if kind not in STRATA:
        errors["stratum"] = [f"{kind!r} is not a stratum kind: {', '.join(STRATA)}"]
    elif kind == "all" and label:
        errors["stratum"] = ["stratum all takes no label"]
    elif kind in ("human_spread", "length") and label not in TERCILES:
        errors["stratum"] = [f"stratum {kind} takes low, middle or high (as {kind}:low)"]
    elif kind == "difficulty" and label not in {"1", "2", "3", "4", "5"}:
        errors["stratum"] = ["stratum difficulty takes 1-5 (as difficulty:3)"]
    elif kind == "domain" and not label:
        errors["stratum"] = ["stratum domain takes a domain name (as domain:Coding)"]
    else:
        return kind, label
    return None


def _half_step(value: float | None) -> float | None:
    """A value's heat-map bin (analytics.report.chart_data.half_step), None for N/A."""
    return None if value is None else half_step(value)


def level_of(value: float | None) -> str:
    """A value's level on the scale as the confusion matrix counts it: rounded half up
    (round_scale) and clipped to 1-5, "na" for N/A."""
    return "na" if value is None else str(int(round_scale([value])[0]))


@dataclass(frozen=True)
class Unit:
    """One (response, skill) of a selection with the figures' values for it."""

    response_id: int
    skill: str
    human: float | None  # the people's consensus (None: N/A or no human score)
    human_scored: bool  # whether it has human rows on the skill
    judges: dict[str, float | None]  # the selected judges' values (None: N/A)
    probe: tuple[Any, Any] | None = None  # (base, probe) score or verdicts


@dataclass
class Selection:
    """The responses behind a figure: response ids in order (by id), each with its units."""

    filters: ItemFilters
    response_ids: list[int]
    units: dict[int, list[Unit]]
    probe_run: ProbeRunData | None = None
    off_scale: set[tuple[str, str]] = field(default_factory=set)

    @property
    def count(self) -> int:
        return len(self.response_ids)

    @property
    def pairs(self) -> int:
        return sum(len(u) for u in self.units.values())


class SelectionError(ValueError):
    """A filter that names nothing here, or a figure the trust page does not draw: the
    parameter and the reason."""

    def __init__(self, problems: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{k}: {' '.join(v)}" for k, v in problems.items()))
        self.problems = problems


def item_selection(*, project: Project, filters: ItemFilters) -> Selection:
    """The units `filters` select (docs/DRILL_DOWN.md). Raises SelectionError for a
    figure that does not exist (a judge level of a judge scored on its own scale, an unknown
    probe run). A constant number of queries."""
    rows = report_rows(
        project=project,
        skills=list(filters.skills) or None,
        judges=list(filters.judges) or None,
        systems=list(filters.systems) or None,
        domains=list(filters.domains) or None,
        difficulties=list(filters.difficulties) or None,
        human_scores=filters.human_scores,
    )
    judge = filters.judges[0] if len(filters.judges) == 1 else None
    if (filters.judge_level or filters.judge_bin is not None) and judge is not None:
        raw = sorted(s for j, s in rows.off_scale if j == judge and s in _skills_of(rows, judge))
        if filters.skills:
            raw = [s for s in raw if s in filters.skills]
        if raw:
            name, figure = (
                ("judge_level", "the trust page draws no confusion matrix for it")
                if filters.judge_level
                else ("judge_bin", "the report draws no heat map for it")
            )
            raise SelectionError(
                {
                    name: [
                        f"judge {judge} scores {', '.join(raw)} on its own scale: {figure}, "
                        "so it has no levels"
                    ]
                }
            )
    human_sums: dict[tuple[int, str], list[float]] = defaultdict(lambda: [0.0, 0])
    human_rows: dict[str, list] = defaultdict(list)
    for row in rows.human:
        key = (row[0], row[3])
        acc = human_sums[key]
        human_rows[row[3]].append(row)
        if row[5] is not None:
            acc[0] += float(row[5])
            acc[1] += 1
    consensus = {k: (t / c if c else None) for k, (t, c) in human_sums.items()}
    judged: dict[tuple[int, str], dict[str, float | None]] = defaultdict(dict)
    for rid, _item, _system, skill, name, value in rows.judge:
        judged[(rid, skill)][name] = value
    probe_run: ProbeRunData | None = None
    probe_values: dict[tuple[int, str], tuple[Any, Any]] = {}
    if filters.probe:
        assert judge is not None  # item_filters_resolve asks for one judge
        probe_run = _probe_run(project, judge, filters.probe)
        probe_values = _probe_units(probe_run, filters.skills)
        keys = set(probe_values)
        keys = _narrowed(keys, probe_run.items, filters)
    elif filters.judges:
        keys = set(judged)
    else:
        keys = set(consensus) | set(judged)

    if filters.human_bin is not None or filters.judge_bin is not None:
        # a heat-map cell: responses with a numeric consensus and (with a judge) a numeric
        # judge value, each to the nearest 0.5 as the heat map bins them
        keys = {k for k in keys if consensus.get(k) is not None}
        if judge is not None:
            keys = {k for k in keys if judged.get(k, {}).get(judge) is not None}
        if filters.human_bin is not None:
            keys = {k for k in keys if _half_step(consensus[k]) == filters.human_bin}
        if filters.judge_bin is not None:
            assert judge is not None
            keys = {k for k in keys if _half_step(judged[k][judge]) == filters.judge_bin}
    if filters.human_level or filters.judge_level:
        keys = {k for k in keys if k in consensus and (not filters.judges or k in judged)}
        if judge is not None:
            keys = {k for k in keys if judge in judged.get(k, {})}
        if filters.human_level:
            keys = {k for k in keys if level_of(consensus[k]) == filters.human_level}
        if filters.judge_level:
            assert judge is not None
            keys = {k for k in keys if level_of(judged[k][judge]) == filters.judge_level}
    if filters.stratum is not None:
        assert judge is not None
        keys &= _stratum_keys(rows, filters, judge, consensus, judged, human_rows)
    if filters.campaign is not None:
        found = campaigns_for_responses(project=project, response_ids={k[0] for k in keys})
        keys = {k for k in keys if any(c == filters.campaign for c, _ in found.get(k[0], []))}

    units: dict[int, list[Unit]] = defaultdict(list)
    for rid, skill in sorted(keys):
        units[rid].append(
            Unit(
                rid,
                skill,
                consensus.get((rid, skill)),
                (rid, skill) in consensus,
                {
                    j: v
                    for j, v in judged.get((rid, skill), {}).items()
                    if not filters.judges or j in filters.judges
                },
                probe_values.get((rid, skill)),
            )
        )
    return Selection(filters, sorted(units), dict(units), probe_run, set(rows.off_scale))


def _skills_of(rows: ReportRows, judge: str) -> set[str]:
    return {row[3] for row in rows.judge if row[4] == judge}


def _probe_run(project: Project, judge: str, probe: str) -> ProbeRunData:
    """The judge's probe run `probe` names: its run id, else its kind (the latest run)."""
    runs = probe_data(project=project, judges=[judge]).runs
    if probe.isdigit():
        found = [r for r in runs if r.run_id == int(probe)]
    else:
        found = sorted((r for r in runs if r.probe == probe), key=lambda r: r.run_id)[-1:]
    if not found:
        kinds = sorted({r.probe for r in runs})
        known = f" (its probes: {', '.join(kinds)})" if kinds else " (it has none)"
        raise SelectionError(
            {"probe": [f"judge {judge} has no finished probe run {probe!r}{known}"]}
        )
    return found[-1]


def _probe_units(
    run: ProbeRunData, skills: Sequence[str]
) -> dict[tuple[int, str], tuple[Any, Any]]:
    """(response, skill) -> (base, probe) of what the probe's figure counts."""
    if run.pairwise:
        if skills:
            raise SelectionError(
                {"skill": ["a pairwise probe's flip rate is on Overall verdicts: give no skill"]}
            )
        out: dict[tuple[int, str], tuple[Any, Any]] = {}
        for rid, order in sorted(set(run.base_verdicts) & set(run.probe_verdicts)):
            base, probe = out.get((rid, OVERALL), ({}, {}))
            base[order] = run.base_verdicts[(rid, order)]
            probe[order] = run.probe_verdicts[(rid, order)]
            out[(rid, OVERALL)] = (base, probe)
        return out
    keys = set(run.base_scores) & set(run.probe_scores)
    return {
        k: (run.base_scores[k], run.probe_scores[k]) for k in keys if not skills or k[1] in skills
    }


def _narrowed(
    keys: set[tuple[int, str]], items: Mapping[int, int], filters: ItemFilters
) -> set[tuple[int, str]]:
    """A probe's pairs narrowed by system, domain and difficulty (its figure is not: the
    trust page's probe links carry none of them)."""
    if not (filters.systems or filters.domains or filters.difficulties):
        return keys
    rids = {k[0] for k in keys}
    texts = response_texts_for_drill_down(response_ids=rids)
    facets = item_facets(item_ids={items[r] for r in rids if r in items})
    kept = set()
    for rid in rids:
        facet = facets.get(items.get(rid, 0), {})
        system = texts.get(rid, {}).get("system")
        if (
            (not filters.systems or system in filters.systems)
            and (not filters.domains or set(filters.domains) & set(facet.get("domains", [])))
            and (not filters.difficulties or facet.get("difficulty") in filters.difficulties)
        ):
            kept.add(rid)
    return {k for k in keys if k[0] in kept}


def _stratum_keys(
    rows: ReportRows,
    filters: ItemFilters,
    judge: str,
    consensus: Mapping[tuple[int, str], float | None],
    judged: Mapping[tuple[int, str], Mapping[str, float | None]],
    human_rows: Mapping[str, list],
) -> set[tuple[int, str]]:
    """The (response, skill) pairs of a trust page stratum: among the responses with a
    numeric consensus and a numeric judge value (analytics.trust.figures._pairs), those of
    the group, terciles cut as _tercile_strata cuts them."""
    assert filters.stratum is not None
    kind, label = filters.stratum
    skill = filters.skills[0]
    pairs = sorted(
        rid
        for (rid, s), values in judged.items()
        if s == skill and values.get(judge) is not None and consensus.get((rid, s)) is not None
    )
    items_of = {row[0]: row[1] for row in (*rows.human, *rows.judge)}
    if kind == "all":
        chosen = pairs
    elif kind in ("human_spread", "length"):
        if kind == "human_spread":
            value_of = human_spread(human_rows.get(skill, []))
        else:
            responses = {row[0] for row in rows.human} | {row[0] for row in rows.judge}
            value_of = {
                pk: float(word_count(text))
                for pk, _item, _model, text in response_texts_for_items(
                    item_ids=sorted({items_of[r] for r in pairs})
                )
                if pk in responses
            }
        known = [r for r in pairs if r in value_of]
        _cuts, group = terciles([value_of[r] for r in known])
        wanted = TERCILES.index(label)
        chosen = [r for r, g in zip(known, group.tolist(), strict=True) if g == wanted]
    elif kind == "domain":
        chosen = [
            r
            for r in pairs
            if label.casefold()
            in {d.casefold() for d in rows.facets.get(items_of[r], {}).get("domains", [])}
        ]
    else:  # difficulty
        chosen = [
            r for r in pairs if str(rows.facets.get(items_of[r], {}).get("difficulty")) == label
        ]
    return {(r, skill) for r in chosen}


@dataclass(frozen=True)
class Entry:
    """One response of a page of the drill-down, with everything shown of it."""

    response_id: int
    texts: dict[str, Any]
    facets: dict[str, Any]
    units: list[Unit]
    human_scores: list[Any]
    judge_outputs: list[Any]
    probe_outputs: list[Any]
    campaigns: list[tuple[int, str]]
    imported: list[ImportedRow] = field(default_factory=list)  # scores imported from files

    @property
    def imported_human(self) -> list[ImportedRow]:
        return [r for r in self.imported if r.kind == RaterKind.HUMAN]

    @property
    def imported_judge(self) -> list[ImportedRow]:
        return [r for r in self.imported if r.kind == RaterKind.JUDGE]


@dataclass(frozen=True)
class ImportedRow:
    """A score imported from a file (analytics/imports) for a response of the page."""

    rater: str
    kind: str  # RaterKind: human or judge
    skill: str
    score: float | None  # None: N/A
    rationale: str


def _imported_rows(
    *, project: Project, response_ids: Sequence[int], filters: ItemFilters
) -> dict[int, list[ImportedRow]]:
    """The imported scores of the page's responses, of the selected skills, and of the
    selected judges for judge raters. One query."""
    rows = ImportedScore.objects.filter(project=project, response_id__in=list(response_ids))
    if filters.skills:
        rows = rows.filter(skill__name__in=filters.skills)
    if filters.judges:
        rows = rows.filter(Q(rater_kind=RaterKind.HUMAN) | Q(rater__in=filters.judges))
    out: dict[int, list[ImportedRow]] = defaultdict(list)
    for rid, rater, kind, skill, value, rationale in rows.order_by(
        "response_id", "rater_kind", "rater", "skill__name"
    ).values_list("response_id", "rater", "rater_kind", "skill__name", "value", "rationale"):
        out[rid].append(ImportedRow(rater, kind, skill, value, rationale))
    return out


def item_entries(
    *, project: Project, selection: Selection, response_ids: Sequence[int]
) -> list[Entry]:
    """The entries of one page (`response_ids` of the selection): texts, facets, people's
    scores (of the selected skills), the selected judges' judgments of the report's runs
    (and of the probe run and its base), scores imported from files, and the response's
    campaigns. Seven queries, whatever the page's size."""
    ids = list(response_ids)
    f = selection.filters
    texts = response_texts_for_drill_down(response_ids=ids)
    facets = item_facets(item_ids={t["item_id"] for t in texts.values()})
    human = human_score_lists_for_responses(response_ids=ids)
    run_ids = latest_run_ids_for_project(project=project, judges=f.judges)
    probe = selection.probe_run
    if probe is not None:
        run_ids = [*run_ids, probe.run_id, probe.base_run_id]
    outputs = judge_outputs_for_responses(project=project, response_ids=ids, run_ids=run_ids)
    campaigns = campaigns_for_responses(project=project, response_ids=ids)
    imported = _imported_rows(project=project, response_ids=ids, filters=f)
    skills = set(f.skills)
    probe_id = probe.run_id if probe is not None else None
    out = []
    for rid in ids:
        judged = [o for o in outputs.get(rid, []) if (not f.judges or o.judge in f.judges)]
        out.append(
            Entry(
                rid,
                texts.get(rid, {}),
                {"domains": [], "difficulty": None}
                | facets.get(texts.get(rid, {}).get("item_id", 0), {}),
                selection.units.get(rid, []),
                [h for h in human.get(rid, []) if not skills or h.skill in skills],
                [o for o in judged if o.run_id != probe_id],
                [o for o in judged if o.run_id == probe_id],
                campaigns.get(rid, []),
                imported.get(rid, []),
            )
        )
    return out
