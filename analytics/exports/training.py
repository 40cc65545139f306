"""The judge-training export (docs/EXPORTS.md "judge_training"): a project's human
judgments as text-to-text tasks, one JSON object per line, in the spirit of FLAMe (Vu et
al. 2024, arXiv 2407.10817), which trains autoraters on many human-judgment tasks cast in
one text-to-text shape.

Contract
- Reads the project's accepted campaign scores (annotation.selectors.human_score_export_rows,
  the report's inclusion rules), imported human scores on the 1-5 levels (unless
  `imported` is off) and, with `adjudicated`, reviewers' adjudicated scores; no judge
  scores (the tasks teach a judge what people said). A rater counts once per (response,
  skill): their earliest campaign score there, else their imported score.
- One task per (response, skill) (`unit="skill"`) or per response (`unit="item"`); the target
  is the raters' consensus (`consensus_of`), or the adjudicated score where there is one.
- Blind: the training text (instruction, context, response(s), rubric, target) never names
  the system that wrote a response unless `name_systems` is set; `metadata` (provenance,
  not training text) always does.
- Memory: pass 1 keeps a few small integers per (response, skill); texts are read per chunk
  of items, and lines are written in chunks.
- The job is an ExportJob like the others: kind `judge_training`, format `jsonl`, with the
  options under `filters["training"]`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Any

from analytics.exports.selectors import FETCH_CHUNK, ExportFilters, imported_scores_for_export
from analytics.models import ExportKind, RaterKind
from annotation import selectors as annotation_selectors
from annotation.models import Project, Rubric, rubric_label

#: The kind asked for on the page, the API and the command.
TRAINING_KIND = ExportKind.JUDGE_TRAINING.value
NA = "N/A"
#: The rubric's levels: imported scores on another scale are left out.
LEVELS = (1, 2, 3, 4, 5)
#: Items whose texts are read per round trip.
ITEMS_PER_READ = 200
#: Filters a judge-training export takes (it reads people's scores only).
TRAINING_FILTERS = ("skill", "campaign", "dataset", "system")

UNITS = ("skill", "item")
CONSENSUS = ("mean", "median")
NA_POLICIES = ("skip", "include")

# --- the task instructions (our own wording) ------------------------------------------------------

_READ = (
    "Read the instruction, the reference answer when there is one, and the response written "
    "for the instruction."
)
_READ_PAIR = (
    "Read the instruction, the reference answer when there is one, and the two responses "
    "written for the instruction."
)
INSTRUCTIONS = {
    "pointwise_skill": (
        f"{_READ} Score the response on the one skill the rubric describes, from 1 to 5: pick "
        "the level whose description fits the response best. Answer with the score alone."
    ),
    "pointwise_item": (
        f"{_READ} Score the response on each skill the rubric describes, from 1 to 5: for "
        "each, pick the level whose description fits the response best. Answer with a JSON "
        "object that maps each skill to its score."
    ),
    "pairwise_skill": (
        f"{_READ_PAIR} On the one skill the rubric describes, decide which response is "
        "better. Answer 1 for the first response or 2 for the second."
    ),
    "pairwise_item": (
        f"{_READ_PAIR} On each skill the rubric describes, decide which response is better: "
        "1 for the first, 2 for the second, tie when neither is; then decide which is better "
        'overall. Answer with a JSON object that maps each skill and "Overall" to 1, 2 or tie.'
    ),
}
NA_SENTENCE = " Answer N/A for a skill that does not apply to this instruction."


@dataclass(frozen=True)
class TrainingOptions:
    unit: str = "skill"  # one task per (response, skill), or per response ("item")
    consensus: str = "mean"  # "mean": mean rounded half up; "median": the lower median
    na: str = "skip"  # "skip" N/A targets, or "include" them as "N/A"
    adjudicated: bool = False  # a reviewer's adjudicated score replaces the consensus
    pairwise: bool = False  # also pairs of responses to one item whose consensus differs
    name_systems: bool = False  # put the system's name in the context (not blind)
    imported: bool = True  # imported human scores (manage.py import_scores) count as raters


def training_options_clean(raw: Any) -> tuple[TrainingOptions, dict[str, list[str]]]:
    """The options of a judge-training export from a JSON object; errors per field, under
    "training"."""
    errors: list[str] = []
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        return TrainingOptions(), {"training": ["the options must be a JSON object"]}
    known = {name for name in TrainingOptions.__dataclass_fields__}
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:
        errors.append(
            f"unknown option(s): {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )
    values: dict[str, Any] = {}
    for name, allowed in (("unit", UNITS), ("consensus", CONSENSUS), ("na", NA_POLICIES)):
        value = raw.get(name, getattr(TrainingOptions, name))
        if value not in allowed:
            errors.append(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
        else:
            values[name] = value
    for name in ("adjudicated", "pairwise", "name_systems", "imported"):
        value = raw.get(name, getattr(TrainingOptions, name))
        if not isinstance(value, bool):
            errors.append(f"{name} must be true or false, not {value!r}")
        else:
            values[name] = value
    if errors:
        return TrainingOptions(), {"training": errors}
    return TrainingOptions(**values), {}


# --- consensus (pure) -----------------------------------------------------------------------------

Value = int | None  # a rater's score; None is N/A
Target = int | str  # a score 1-5, or "N/A"


def consensus_of(values: Sequence[Value], method: str) -> Target:
    """The raters' consensus on one (response, skill).

    - N/A when more raters said N/A than gave a score (a tie goes to the scores).
    - `mean`: the mean of the scores, rounded half up (3.5 -> 4, 2.5 -> 3): floor(mean + 1/2),
      in integers so no float rounds it the other way.
    - `median`: the lower median of the scores (of 1, 2, 4, 5: 2), always a score someone gave.
    """
    scores = sorted(v for v in values if v is not None)
    n_na = len(values) - len(scores)
    if not scores or n_na > len(scores):
        return NA
    if method == "median":
        return scores[(len(scores) - 1) // 2]
    return (2 * sum(scores) + len(scores)) // (2 * len(scores))


def agreement_of(values: Sequence[Value], target: Target) -> float:
    """The share of raters whose answer is the target (N/A matches N/A), 4 decimals."""
    same = sum(1 for v in values if (NA if v is None else v) == target)
    return round(same / len(values), 4) if values else 0.0


def rubric_text(name: str, rubric: Rubric | None) -> str:
    """A skill's rubric as training text: the skill, its criterion and its five levels."""
    if rubric is None:
        return f"Skill: {name}"
    anchors = [rubric.anchor_1, rubric.anchor_2, rubric.anchor_3, rubric.anchor_4, rubric.anchor_5]
    lines = [f"Skill: {name}", f"Criterion: {rubric.criterion}"]
    lines += [f"Score {level}: {text}" for level, text in enumerate(anchors, start=1)]
    return "\n".join(lines)


# --- the writer -----------------------------------------------------------------------------------


@dataclass
class _Judged:
    """One (response, skill): the raters' values and the target."""

    values: list[Value]
    target: Target
    adjudicated: bool


class TrainingExport:
    """One judge-training export as text chunks of `chunk_rows` lines; `rows` counts lines."""

    def __init__(
        self,
        *,
        project: Project,
        options: TrainingOptions,
        skills: Sequence[str] = (),
        dataset_id: int | None = None,
        systems: Sequence[str] = (),
        campaign_id: int | None = None,
        chunk_rows: int = 2000,
    ) -> None:
        self.project = project
        self.options = options
        self.skills = tuple(skills)
        self.dataset_id = dataset_id
        self.systems = tuple(systems)
        self.campaign_id = campaign_id
        self.chunk_rows = chunk_rows
        self.rows = 0

    def chunks(self) -> Iterator[str]:
        lines: list[str] = []
        for obj in self.tasks():
            lines.append(_json_line(obj))
            self.rows += 1
            if len(lines) >= self.chunk_rows:
                yield "".join(lines)
                lines = []
        if lines:
            yield "".join(lines)

    # --- pass 1: every (response, skill)'s values

    def _judged(self) -> tuple[dict[int, dict[int, _Judged]], dict[int, str], dict[int, str]]:
        rows = annotation_selectors.human_score_export_rows(
            project=self.project,
            skills=self.skills,
            dataset_id=self.dataset_id,
            systems=self.systems,
            campaign_id=self.campaign_id,
            chunk_size=FETCH_CHUNK,
        )
        # (response, skill) -> rater -> answer: a rater counts once, by their earliest
        # campaign score there, else their imported score
        values: dict[int, dict[int, dict[str, Value]]] = {}
        campaigns: dict[tuple[int, int], list[str]] = {}
        skill_names: dict[int, str] = {}
        labels: dict[int, str] = {}
        for row in rows:
            response_id, skill_id, skill, rater, score, is_na, campaign = (
                row[0],
                row[1],
                row[5],
                row[6],
                row[7],
                row[8],
                row[13],
            )
            values.setdefault(response_id, {}).setdefault(skill_id, {}).setdefault(
                rater, None if is_na else score
            )
            skill_names[skill_id] = skill
            if row[12] is not None:
                labels[skill_id] = rubric_label(project_slug=row[16], version=row[12])
            if self.options.adjudicated:
                campaigns.setdefault((response_id, skill_id), []).append(campaign)
        if self.options.imported:
            for response_id, skill_id, skill, rater, value, is_na in self._imported():
                if not is_na and (value is None or value not in LEVELS):
                    continue  # another scale than the rubric's five levels
                values.setdefault(response_id, {}).setdefault(skill_id, {}).setdefault(
                    rater, None if is_na else int(value)
                )
                skill_names[skill_id] = skill
        settled = (
            annotation_selectors.adjudicated_export_map(
                project=self.project, campaign_id=self.campaign_id
            )
            if self.options.adjudicated
            else {}
        )
        judged: dict[int, dict[int, _Judged]] = {}
        for response_id, per_skill in values.items():
            mine = judged[response_id] = {}
            for skill_id, by_rater in per_skill.items():
                given = list(by_rater.values())
                found = None
                for campaign in sorted(set(campaigns.get((response_id, skill_id), ()))):
                    found = settled.get((campaign, response_id, skill_id))
                    if found is not None:
                        break
                if found is not None:
                    score, is_na = found[0], found[1]
                    mine[skill_id] = _Judged(given, NA if is_na or score is None else score, True)
                else:
                    target = consensus_of(given, self.options.consensus)
                    mine[skill_id] = _Judged(given, target, False)
        return judged, skill_names, labels

    def _imported(self) -> Iterator[tuple]:
        """The imported human scores of the export (analytics.exports.selectors: a
        campaign's export has none)."""
        filters = ExportFilters(
            skills=self.skills,
            rater_kind=RaterKind.HUMAN,
            campaign_id=self.campaign_id,
            dataset_id=self.dataset_id,
            systems=self.systems,
        )
        rows = (
            imported_scores_for_export(project=self.project, filters=filters)
            .order_by("response_id", "skill_id", "rater", "pk")
            .values_list("response_id", "skill_id", "skill__name", "rater", "value", "is_na")
        )
        return rows.iterator(chunk_size=FETCH_CHUNK)

    # --- pass 2: the tasks, item by item

    def tasks(self) -> Iterator[dict[str, Any]]:
        judged, skill_names, labels = self._judged()
        if not judged:
            return
        order = {
            name: n
            for n, name in enumerate(
                annotation_selectors.skill_list_for_project(project=self.project).values_list(
                    "name", flat=True
                )
            )
        }
        rubrics = annotation_selectors.rubrics_current_for_project(project=self.project)
        self._rubric = {sid: rubric_text(skill_names[sid], rubrics.get(sid)) for sid in skill_names}
        self._skill_order = sorted(
            skill_names, key=lambda sid: (order.get(skill_names[sid], 1e9), sid)
        )
        self._skill_names = skill_names
        self._labels = labels
        where: dict[int, tuple[int, int]] = {}
        ids = list(judged)
        for start in range(0, len(ids), FETCH_CHUNK):  # bounded IN lists (SQLite's too)
            where.update(
                annotation_selectors.response_items_for_export(
                    response_ids=ids[start : start + FETCH_CHUNK]
                )
            )
        by_item: dict[int, list[int]] = {}
        for response_id in sorted(judged, key=lambda rid: (where[rid][0], rid)):
            by_item.setdefault(where[response_id][0], []).append(response_id)
        items = list(by_item)
        for start in range(0, len(items), ITEMS_PER_READ):
            chunk = items[start : start + ITEMS_PER_READ]
            ids = [rid for item in chunk for rid in by_item[item]]
            texts = annotation_selectors.response_texts_for_export(response_ids=ids)
            for item in chunk:
                responses = by_item[item]
                for response_id in responses:
                    yield from self._pointwise(response_id, texts[response_id], judged[response_id])
                if self.options.pairwise:
                    yield from self._pairs(responses, texts, judged)

    def _context(self, text: tuple, systems: Sequence[str]) -> dict[str, Any]:
        _, _, instruction, reference, _, _ = text
        context: dict[str, Any] = {"instruction": instruction, "reference": reference or None}
        if self.options.name_systems:
            if len(systems) == 1:
                context["system"] = systems[0]
            else:
                context["systems"] = list(systems)
        return context

    def _instruction(self, task: str) -> str:
        text = INSTRUCTIONS[task]
        if self.options.na == "include" and task.startswith("pointwise"):
            text += NA_SENTENCE
        return text

    def _metadata(self, text: tuple, **more: Any) -> dict[str, Any]:
        dataset, item = text[0], text[1]
        return {
            "project": self.project.slug,
            "dataset": dataset,
            "item": item,
            **more,
            "consensus": self.options.consensus,
        }

    def _skills(self, per_skill: Mapping[int, _Judged]) -> list[int]:
        """The skills with a target, in catalogue order; N/A targets dropped unless kept."""
        keep = self.options.na == "include"
        return [
            sid
            for sid in self._skill_order
            if sid in per_skill and (keep or per_skill[sid].target != NA)
        ]

    def _pointwise(
        self, response_id: int, text: tuple, per_skill: Mapping[int, _Judged]
    ) -> Iterator[dict[str, Any]]:
        skill_ids = self._skills(per_skill)
        if not skill_ids:
            return
        system, answer = text[4], text[5]
        context = self._context(text, [system])
        if self.options.unit == "skill":
            for sid in skill_ids:
                one = per_skill[sid]
                yield {
                    "task_type": "pointwise_skill",
                    "instruction": self._instruction("pointwise_skill"),
                    "context": context,
                    "response": answer,
                    "rubric": self._rubric[sid],
                    "target": one.target,
                    "metadata": self._metadata(
                        text,
                        system=system,
                        skill=self._skill_names[sid],
                        raters=len(one.values),
                        scores=_shown(one.values),
                        agreement=agreement_of(one.values, one.target),
                        adjudicated=one.adjudicated,
                        rubric_label=self._labels.get(sid),
                    ),
                }
            return
        names = [self._skill_names[sid] for sid in skill_ids]
        yield {
            "task_type": "pointwise_item",
            "instruction": self._instruction("pointwise_item"),
            "context": context,
            "response": answer,
            "rubric": "\n\n".join(self._rubric[sid] for sid in skill_ids),
            "target": {self._skill_names[sid]: per_skill[sid].target for sid in skill_ids},
            "metadata": self._metadata(
                text,
                system=system,
                skills=names,
                raters={n: len(per_skill[s].values) for n, s in zip(names, skill_ids, strict=True)},
                scores={
                    n: _shown(per_skill[s].values) for n, s in zip(names, skill_ids, strict=True)
                },
                agreement={
                    n: agreement_of(per_skill[s].values, per_skill[s].target)
                    for n, s in zip(names, skill_ids, strict=True)
                },
                adjudicated=sorted(
                    n for n, s in zip(names, skill_ids, strict=True) if per_skill[s].adjudicated
                ),
            ),
        }

    def _pairs(
        self,
        responses: Sequence[int],
        texts: Mapping[int, tuple],
        judged: Mapping[int, Mapping[int, _Judged]],
    ) -> Iterator[dict[str, Any]]:
        """Pairs of responses to one item (the earlier-imported one first) whose consensus
        differs: per skill, or (unit item) on the mean of the skills both have a score on."""
        for first, second in combinations(responses, 2):
            a, b = judged[first], judged[second]
            shared = [
                sid
                for sid in self._skill_order
                if sid in a and sid in b and a[sid].target != NA and b[sid].target != NA
            ]
            if not shared:
                continue
            systems = [texts[first][4], texts[second][4]]
            context = self._context(texts[first], systems)
            answers = [texts[first][5], texts[second][5]]
            if self.options.unit == "skill":
                for sid in shared:
                    ta, tb = a[sid].target, b[sid].target
                    if ta == tb:
                        continue
                    yield {
                        "task_type": "pairwise",
                        "instruction": self._instruction("pairwise_skill"),
                        "context": context,
                        "responses": answers,
                        "rubric": self._rubric[sid],
                        "target": "1" if _num(ta) > _num(tb) else "2",
                        "metadata": self._metadata(
                            texts[first],
                            systems=systems,
                            skill=self._skill_names[sid],
                            targets=[ta, tb],
                            raters=[len(a[sid].values), len(b[sid].values)],
                        ),
                    }
                continue
            mean_a = sum(_num(a[sid].target) for sid in shared) / len(shared)
            mean_b = sum(_num(b[sid].target) for sid in shared) / len(shared)
            if mean_a == mean_b:
                continue
            target = {
                self._skill_names[sid]: _prefer(_num(a[sid].target), _num(b[sid].target))
                for sid in shared
            }
            target["Overall"] = _prefer(mean_a, mean_b)
            yield {
                "task_type": "pairwise",
                "instruction": self._instruction("pairwise_item"),
                "context": context,
                "responses": answers,
                "rubric": "\n\n".join(self._rubric[sid] for sid in shared),
                "target": target,
                "metadata": self._metadata(
                    texts[first],
                    systems=systems,
                    skills=[self._skill_names[sid] for sid in shared],
                    targets=[
                        {self._skill_names[s]: a[s].target for s in shared},
                        {self._skill_names[s]: b[s].target for s in shared},
                    ],
                ),
            }


def _json_line(obj: Mapping[str, Any]) -> str:
    """One JSONL line: UTF-8 as is, except the line and paragraph separators (U+2028,
    U+2029), escaped: readers that split lines on them (Python's str.splitlines, older
    JavaScript) would cut a task in two."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029") + "\n"


def _num(target: Target) -> int:
    assert isinstance(target, int), "N/A targets are left out of pairs"
    return target


def _prefer(a: float, b: float) -> str:
    return "1" if a > b else "2" if b > a else "tie"


def _shown(values: Sequence[Value]) -> list[Target]:
    """The raters' answers, N/A spelled out, sorted (scores first): who gave which is not
    part of the task."""
    scores = sorted(v for v in values if v is not None)
    return [*scores, *([NA] * (len(values) - len(scores)))]


def training_options_stored(options: TrainingOptions) -> dict[str, Any]:
    return asdict(options)
