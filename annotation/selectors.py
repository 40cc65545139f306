"""Public read API of the annotation app, and the reads shared by its features.

Downstream apps (judging, analytics) read annotation data only through these functions.
A read used by one feature only lives in that feature's selectors.py
(annotation/<feature>/selectors.py); one used by several features, by the app-wide
services, or by another app lives here.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, F, OuterRef, Prefetch, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce, Substr

from annotation.models import (
    KNOWN_SCORE_KINDS,
    AdjudicatedScore,
    AnnotatorExpertise,
    Assignment,
    AssignmentKind,
    AssignmentStatus,
    Campaign,
    CampaignItemPin,
    CampaignMode,
    CampaignRubric,
    CampaignSample,
    CampaignSelection,
    CampaignStatus,
    Dataset,
    Domain,
    GoldPreference,
    GoldScore,
    HumanPreference,
    HumanScore,
    HumanScoreDeletion,
    Item,
    ItemDomain,
    ItemSkill,
    MetadataProposal,
    MetadataVerification,
    PairAsk,
    PairChoice,
    Participant,
    Project,
    ProjectMembership,
    ProposalStatus,
    Response,
    Rubric,
    Skill,
    SkillMode,
    StudyLink,
    Task,
    TaskKind,
    assignment_is_accepted,
    rubric_label,
)
from flaskweb.db import fetch_all, fetch_one, is_postgres, json_value


def skill_list_for_project(*, project: Project | None) -> QuerySet[Skill]:
    """Built-in skills plus the project's own."""
    scope = Q(project__isnull=True)
    if project is not None:
        scope |= Q(project=project)
    return Skill.objects.filter(scope).order_by("order", "name")


def domain_list_for_project(*, project: Project | None) -> QuerySet[Domain]:
    scope = Q(project__isnull=True)
    if project is not None:
        scope |= Q(project=project)
    return Domain.objects.filter(scope).order_by("order", "name")


def rubrics_current_for_project(*, project: Project | None) -> dict[int, Rubric]:
    """skill id -> rubric in force, in two queries."""
    result: dict[int, Rubric] = {}
    for rubric in Rubric.objects.filter(project__isnull=True).order_by("skill_id", "version"):
        result[rubric.skill_id] = rubric
    if project is not None:
        for rubric in (
            Rubric.objects.filter(project=project)
            .select_related("project")  # its label names the project
            .order_by("skill_id", "version")
        ):
            result[rubric.skill_id] = rubric
    return result


def project_list_for_user(*, user) -> QuerySet[Project]:
    if user.is_superuser or user.is_staff:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user).distinct()


def user_addable_get(*, username: str):
    """The user a project admin may add under this username (an active account), or None;
    one query whatever the reason for None."""
    return get_user_model().objects.filter(username=username, is_active=True).first()


def dataset_list_for_project(*, project: Project) -> QuerySet[Dataset]:
    return project.datasets.annotate(
        item_count=Count("items", distinct=True),
    ).order_by("name")


def item_texts_by_external_id(
    *, dataset_id: int, external_ids: Sequence[str]
) -> list[tuple[int, str, str, str]]:
    """(pk, external id, instruction, reference answer) of the dataset's items among
    `external_ids`."""
    return list(
        Item.objects.filter(dataset_id=dataset_id, external_id__in=external_ids).values_list(
            "pk", "external_id", "instruction", "reference_answer"
        )
    )


def response_texts_for_items(*, item_ids: Sequence[int]) -> list[tuple[int, int, str, str]]:
    """(pk, item pk, model name, text) of every response to the items."""
    return list(
        Response.objects.filter(item_id__in=item_ids).values_list(
            "pk", "item_id", "model_name", "text"
        )
    )


def response_items_for_export(*, response_ids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """response id -> (item pk, dataset pk) of the responses (the judge-training export
    groups responses by item)."""
    return {
        pk: (item_id, dataset_id)
        for pk, item_id, dataset_id in Response.objects.filter(pk__in=response_ids).values_list(
            "pk", "item_id", "item__dataset_id"
        )
    }


def response_texts_for_export(*, response_ids: Sequence[int]) -> dict[int, tuple]:
    """response id -> (dataset name, item external id, instruction, reference answer, model
    name, response text) of the responses."""
    return {
        row[0]: row[1:]
        for row in Response.objects.filter(pk__in=response_ids).values_list(
            "pk",
            "item__dataset__name",
            "item__external_id",
            "item__instruction",
            "item__reference_answer",
            "model_name",
            "text",
        )
    }


def dataset_get_by_name(*, project: Project, name: str) -> Dataset | None:
    return Dataset.objects.filter(project=project, name=name).first()


def item_get(*, item_id: int) -> Item:
    return (
        Item.objects.select_related("dataset__project")
        .prefetch_related(
            Prefetch("item_skills", queryset=ItemSkill.objects.select_related("skill")),
            "domains",
            Prefetch("responses", queryset=Response.objects.order_by("model_name")),
        )
        .get(pk=item_id)
    )


def item_ids_for_dataset(*, dataset_id: int, after_id: int = 0, limit: int = 500) -> list[int]:
    """Keyset pagination over a dataset's item ids (for fan-out jobs)."""
    return list(
        Item.objects.filter(dataset_id=dataset_id, pk__gt=after_id)
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )


# --- the skills a response is scored on (the human form and the judge prompt alike) ----------


@dataclass(frozen=True)
class TaskSkill:
    skill_id: int
    name: str
    rubric_id: int
    criterion: str
    anchors: list[str]
    checklist: list[str]


def task_skills(*, assignment: Assignment) -> list[TaskSkill]:
    """The skills to score for an assignment, ranked, with the pinned rubric and checklist.

    One raw statement once the campaign's pins are cached (two if the item is not loaded);
    this runs on every claim and every submission.
    """
    task = assignment.task
    if Task.response.is_cached(task):
        item_id = task.response.item_id
    else:
        row = fetch_one(_ITEM_OF_RESPONSE, [task.response_id])
        assert row is not None  # the task's response is a foreign key: its row exists
        item_id = row[0]
    return skills_for_item(item_id=item_id, campaign=assignment.campaign)


_ITEM_OF_RESPONSE = f"SELECT item_id FROM {Response._meta.db_table} WHERE id = %s"
_ITEM_SKILLS = (
    f"SELECT skill_id, checklist FROM {ItemSkill._meta.db_table} WHERE item_id = %s ORDER BY rank"
)
_PINNED_SKILLS = (
    f"SELECT skills FROM {CampaignItemPin._meta.db_table} WHERE campaign_id = %s AND item_id = %s"
)


def skills_for_response(*, response: Response, campaign: Campaign | None) -> list[TaskSkill]:
    """What a response is scored on: in a campaign, exactly what its annotators see (the
    pinned rubric versions and item skills); outside one, the item's skills with the rubric
    in force. Judge prompts are built from this, so people and judges score against the same
    wording."""
    return skills_for_responses(responses=[response], campaign=campaign)[response.pk]


def skills_for_responses(
    *, responses: Sequence[Response], campaign: Campaign | None
) -> dict[int, list[TaskSkill]]:
    """skills_for_response for many responses of one dataset at once (response id -> its
    skills), in two or three queries whatever their number: a judge batch reads it once.
    In a campaign the items' pinned skills are read (one query); an item without a pin (a
    draft campaign) reads its own."""
    item_ids = {r.item_id for r in responses}
    per_item: dict[int, list[TaskSkill]] = {}
    if campaign is not None:
        pinned = item_skills_pinned(campaign_id=campaign.pk, item_ids=item_ids)
        own = _item_skill_rows(item_ids - set(pinned)) if len(pinned) < len(item_ids) else {}
        for item_id in item_ids:
            pairs = pinned[item_id] if item_id in pinned else [[s, c] for s, _, c in own[item_id]]
            per_item[item_id] = skills_for_item(
                item_id=item_id, campaign=campaign, item_skills=pairs
            )
    elif item_ids:
        by_item = _item_skill_rows(item_ids)
        project = Project.objects.filter(datasets__items__id=next(iter(item_ids))).first()
        rubrics = rubrics_current_for_project(project=project)
        for item_id, skills in by_item.items():
            per_item[item_id] = [
                TaskSkill(
                    skill_id=skill_id,
                    name=name,
                    rubric_id=rubric.pk,
                    criterion=rubric.criterion,
                    anchors=rubric.anchors,
                    checklist=checklist,
                )
                for skill_id, name, checklist in skills
                if (rubric := rubrics.get(skill_id)) is not None
            ]
    return {r.pk: per_item[r.item_id] for r in responses}


def _item_skill_rows(item_ids: Iterable[int]) -> dict[int, list[tuple[int, str, list]]]:
    """item id -> its own ranked (skill id, skill name, checklist), every item present."""
    wanted = set(item_ids)
    by_item: dict[int, list[tuple[int, str, list]]] = {item_id: [] for item_id in wanted}
    rows = (
        ItemSkill.objects.filter(item_id__in=wanted)
        .order_by("item_id", "rank")
        .values_list("item_id", "skill_id", "skill__name", "checklist")
    )
    for item_id, skill_id, name, checklist in rows:
        by_item[item_id].append((skill_id, name, checklist))
    return by_item


def item_skills_pinned(*, campaign_id: int, item_ids: Iterable[int]) -> dict[int, list]:
    """item id -> the ranked [[skill id, checklist], ...] the campaign pinned for it, for
    the items among `item_ids` that it pinned (one query)."""
    return dict(
        CampaignItemPin.objects.filter(campaign_id=campaign_id, item_id__in=list(item_ids))
        .order_by()
        .values_list("item_id", "skills")
    )


def item_skills_sql(item_ref: str, campaign_ref: str) -> str:
    """PostgreSQL: a scalar expression giving the ranked [[skill_id, checklist], ...] that
    campaign `campaign_ref` asks of item `item_ref` as JSON: its pin (CampaignItemPin, one
    probe of its unique index), or the item's own skills when it has none (a draft
    campaign), so a statement that reads the item brings its skills along (one round trip
    less on every claim and submission; COALESCE never runs the second subquery when the
    pin is there). "NULL" on SQLite: read them with `skills_for_item`.
    """
    if not is_postgres():
        return "NULL"
    return (
        f"COALESCE((SELECT p.skills FROM {CampaignItemPin._meta.db_table} p "
        f"WHERE p.campaign_id = {campaign_ref} AND p.item_id = {item_ref}), "
        "(SELECT jsonb_agg(jsonb_build_array(s.skill_id, s.checklist) ORDER BY s.rank) "
        f"FROM {ItemSkill._meta.db_table} s WHERE s.item_id = {item_ref}))"
    )


def _item_skills_read(item_id: int, campaign_id: int) -> list[tuple[int, list]]:
    """The ranked (skill id, checklist) a campaign asks of an item, read on their own: the
    pin (one query in a campaign that was activated), else the item's own skills."""
    pinned = fetch_one(_PINNED_SKILLS, [campaign_id, item_id])
    if pinned is not None:
        return [(skill_id, checklist) for skill_id, checklist in json_value(pinned[0]) or []]
    rows = fetch_all(_ITEM_SKILLS, [item_id])
    return [(skill_id, json_value(checklist)) for skill_id, checklist in rows]


def skills_for_item(*, item_id: int, campaign: Campaign, item_skills=None) -> list[TaskSkill]:
    """What a campaign asks of an item's responses: the item skills it pinned (the item's
    own while a draft), each with the rubric version the campaign pinned. `campaign` needs
    only its pk, updated_at and skill_mode loaded (the submit path builds such a stub).
    `item_skills` is the value of `item_skills_sql` when the caller's statement read it."""
    if item_skills is None:
        item_skills = _item_skills_read(item_id, campaign.pk)
    else:
        item_skills = [
            (skill_id, checklist) for skill_id, checklist in json_value(item_skills) or []
        ]
    checklists = dict(item_skills)
    pinned = _campaign_pins(campaign)
    if campaign.skill_mode == SkillMode.FIXED:
        skill_ids = pinned.fixed_order
    else:
        skill_ids = [skill_id for skill_id, _ in item_skills]
    result = []
    for skill_id in skill_ids:
        pin = pinned.pins.get(skill_id)
        if pin is None:
            continue  # a skill added after activation has no pinned rubric: not asked
        result.append(replace(pin, checklist=checklists.get(skill_id, [])))
    return result


#: The choices a pairwise campaign offers when it names none.
DEFAULT_PAIR_CHOICES = (PairChoice.A.value, PairChoice.B.value, PairChoice.TIE.value)


@dataclass(frozen=True)
class PairQuestions:
    """What a pair task asks: the skills (pinned rubrics), whether the overall question is
    asked, the choices offered in order, and whether strength and a rationale are asked."""

    skills: list[TaskSkill]
    overall: bool
    choices: list[str]
    strength: bool
    rationale: bool


def pair_questions(
    *,
    campaign: Campaign,
    item_id: int,
    item_skills=None,
) -> PairQuestions:
    """The questions of a pair task of `campaign` on item `item_id`. `campaign` needs its
    pk, updated_at, skill_mode and pair settings loaded."""
    ask = campaign.pair_ask
    skills = (
        skills_for_item(item_id=item_id, campaign=campaign, item_skills=item_skills)
        if ask in (PairAsk.SKILLS, PairAsk.BOTH)
        else []
    )
    return PairQuestions(
        skills=skills,
        overall=ask in (PairAsk.OVERALL, PairAsk.BOTH) or not skills,
        choices=list(json_value(campaign.pair_choices) or DEFAULT_PAIR_CHOICES),
        strength=bool(campaign.pair_strength),
        rationale=bool(campaign.pair_rationale),
    )


@dataclass(frozen=True)
class _Pinned:
    pins: dict[int, TaskSkill]  # skill id -> the pinned rubric's wording (empty checklist)
    fixed_order: list[int]  # a fixed-skill campaign's skills, in order (frozen at activation)


#: (campaign id, campaign.updated_at) -> pinned TaskSkills. Pins are only ever added by
#: campaign_activate and by applying verified metadata to a campaign, which both move
#: updated_at, and Rubric rows never change, so a hit is always current. Saves a
#: three-table join on every claim and every submission.
_pins_cache: OrderedDict[tuple[int, object], _Pinned] = OrderedDict()
PINS_CACHE_SIZE = 256


def pins_cache_clear() -> None:
    """Forget every cached pin set (tests that count queries start from a cold cache)."""
    _pins_cache.clear()


def _campaign_pins(campaign: Campaign) -> _Pinned:
    key = (campaign.pk, campaign.updated_at)
    pinned = _pins_cache.get(key)
    if pinned is not None:
        _pins_cache.move_to_end(key)
        return pinned
    pins = {
        pin.skill_id: TaskSkill(
            skill_id=pin.skill_id,
            name=pin.skill.name,
            rubric_id=pin.rubric_id,
            criterion=pin.rubric.criterion,
            anchors=pin.rubric.anchors,
            checklist=[],
        )
        for pin in CampaignRubric.objects.filter(campaign_id=campaign.pk).select_related(
            "rubric", "skill"
        )
    }
    fixed_order = []
    if campaign.skill_mode == SkillMode.FIXED:
        fixed_order = list(
            Campaign.fixed_skills.through.objects.filter(campaign_id=campaign.pk)
            .order_by("skill__order", "skill__name")
            .values_list("skill_id", flat=True)
        )
    pinned = _Pinned(pins=pins, fixed_order=fixed_order)
    _pins_cache[key] = pinned
    while len(_pins_cache) > PINS_CACHE_SIZE:
        _pins_cache.popitem(last=False)
    return pinned


# --- pinned item skills: what a running campaign asks of each item -----------------------------


def campaign_item_skill_ids(*, campaign: Campaign, item_ids) -> dict[int, list[int]]:
    """item id -> the ranked skill ids of the item as the campaign reads them: its pin once
    the campaign pinned the item (annotation.models.CampaignItemPin), else the item's own
    (a draft). Two queries at most."""
    wanted = set(item_ids)
    found = {
        item_id: [pair[0] for pair in skills]
        for item_id, skills in item_skills_pinned(campaign_id=campaign.pk, item_ids=wanted).items()
    }
    rest = wanted - set(found)
    if rest:
        for item_id in rest:
            found[item_id] = []
        for item_id, skill_id in (
            ItemSkill.objects.filter(item_id__in=rest)
            .order_by("item_id", "rank")
            .values_list("item_id", "skill_id")
        ):
            found[item_id].append(skill_id)
    return found


def asked_skill_ids(
    *, campaign: Campaign, item_skill_ids: list[int], rubric_pinned: set[int], fixed: list[int]
) -> list[int]:
    """What a task of `campaign` asks, given its item's skills (pinned, or the item's own
    while a draft), the skills with a pinned rubric and the fixed set, as
    annotation.selectors.skills_for_item asks them: the fixed set or the item's skills,
    without the skills that have no pinned rubric once the campaign was activated."""
    ids = fixed if campaign.skill_mode == SkillMode.FIXED else item_skill_ids
    return [pk for pk in ids if pk in rubric_pinned] if rubric_pinned else list(ids)


def _rubric_pinned(campaign: Campaign) -> set[int]:
    return set(CampaignRubric.objects.filter(campaign=campaign).values_list("skill_id", flat=True))


def _fixed_ids(campaign: Campaign) -> list[int]:
    if campaign.skill_mode != SkillMode.FIXED:
        return []
    return list(campaign.fixed_skills.order_by("order", "name").values_list("pk", flat=True))


def _skill_names(skill_ids) -> dict[int, str]:
    return dict(Skill.objects.filter(pk__in=set(skill_ids)).values_list("pk", "name"))


@dataclass(frozen=True)
class KnownTask:
    """A task with known answers on one item: its known scores' skills (a pair: the skills
    of its known choices; the overall question is no skill) and, once checked against what
    the item's tasks ask, the ones they do not ask."""

    task_id: int
    kind: str
    item_id: int
    external_id: str
    model_name: str  # a pair: "m1 vs m2"
    pair: bool
    known: tuple[int, ...]
    known_names: tuple[str, ...] = ()
    unasked: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.unasked

    @property
    def reason(self) -> str:
        what = "known choices" if self.pair else "known scores"
        return (
            f"{self.kind} task {self.task_id} (item {self.external_id}, {self.model_name}) has "
            f"{what} for {', '.join(self.unasked)}, which its item's tasks do not ask"
        )

    @property
    def reason_to_hold(self) -> str:
        """Why applying verified metadata holds the item back because of this task."""
        what = "known choices" if self.pair else "known scores"
        return (
            f"{self.kind} task {self.task_id} (item {self.external_id}, {self.model_name}) has "
            f"{what} for {', '.join(self.unasked)}, which the verified metadata drops; the item "
            f"keeps its pinned skills here until that task's {what} name only skills the "
            "verified metadata lists, or the task is removed"
        )


def campaign_known_tasks(*, campaign: Campaign, item_ids=None) -> list[KnownTask]:
    """The campaign's gold, attention, training and qualification tasks (on `item_ids`
    only, if given) with the skills their known answers name, by task id. Two queries."""
    tasks = Task.objects.filter(campaign=campaign, kind__in=KNOWN_SCORE_KINDS)
    if item_ids is not None:
        tasks = tasks.filter(response__item_id__in=list(item_ids))
    rows = tasks.order_by("pk").values_list(
        "pk",
        "kind",
        "response__item_id",
        "response__item__external_id",
        "response__model_name",
        "response_b__model_name",
    )
    known: dict[int, list[int]] = defaultdict(list)
    answers: QuerySet = (
        GoldPreference.objects.filter(task__in=tasks, skill__isnull=False)
        if campaign.mode == CampaignMode.PAIRWISE
        else GoldScore.objects.filter(task__in=tasks)
    )
    for task_id, skill_id in answers.order_by("task_id", "skill_id").values_list(
        "task_id", "skill_id"
    ):
        known[task_id].append(skill_id)
    return [
        KnownTask(
            task_id=pk,
            kind=kind,
            item_id=item_id,
            external_id=external_id,
            model_name=f"{model} vs {model_b}" if model_b else model,
            pair=model_b is not None,
            known=tuple(known.get(pk, ())),
        )
        for pk, kind, item_id, external_id, model, model_b in rows
    ]


def _checked(task: KnownTask, asked: list[int], names: dict[int, str]) -> KnownTask:
    unasked = tuple(names.get(pk, f"skill {pk}") for pk in task.known if pk not in asked)
    known_names = tuple(names.get(pk, f"skill {pk}") for pk in task.known)
    return replace(task, known_names=known_names, unasked=unasked)


def campaign_known_task_check(*, campaign: Campaign, item_ids=None) -> list[KnownTask]:
    """campaign_known_tasks, each checked against what its item's tasks ask now (the
    pinned skills of a running campaign): a task with `unasked` skills compares known
    answers nobody is asked for, so it is refused (activation, applying metadata) or
    flagged (the screening page) with its `reason`. Five queries at most."""
    tasks = campaign_known_tasks(campaign=campaign, item_ids=item_ids)
    if not tasks:
        return []
    item_skills = campaign_item_skill_ids(campaign=campaign, item_ids={t.item_id for t in tasks})
    rubric_pinned, fixed = _rubric_pinned(campaign), _fixed_ids(campaign)
    names = _skill_names(pk for t in tasks for pk in t.known)
    return [
        _checked(
            t,
            asked_skill_ids(
                campaign=campaign,
                item_skill_ids=item_skills[t.item_id],
                rubric_pinned=rubric_pinned,
                fixed=fixed,
            ),
            names,
        )
        for t in tasks
    ]


# --- applying verified metadata to a running campaign ----------------------------------------


@dataclass(frozen=True)
class PinChange:
    """One item whose verified metadata differs from what a running campaign pinned for
    it: what its tasks ask now and would ask, the work it touches, and why it is held
    back (`refused`), if it is."""

    item_id: int
    external_id: str
    pinned: list  # [[skill id, checklist], ...] as pinned now
    verified: list  # the same from the item's own (verified) skills: the new pin
    asked_before: list[str]
    asked_after: list[str]
    tasks: int  # the campaign's normal tasks on the item
    submitted: int  # annotations already submitted on them (kept, under the old skills)
    leases: int  # leases held now on any of the campaign's tasks on the item
    known: list[KnownTask]
    new_rubrics: list[str]  # skills asked from now on, with the rubric version pinned for them
    refused: str  # "" when it can be applied
    verification_id: int | None
    verdict: str
    verified_by: str
    verified_at: datetime | None

    @property
    def applicable(self) -> bool:
        return not self.refused

    @property
    def asks_the_same(self) -> bool:
        """Only the items' ranking or checklists change, not the skills asked."""
        return self.asked_before == self.asked_after


@dataclass(frozen=True)
class MetadataApplyPlan:
    campaign_id: int
    changes: list[PinChange]
    new_rubric_ids: dict[int, int]  # skill id -> rubric id to pin for the applicable changes

    @property
    def applicable(self) -> list[PinChange]:
        return [c for c in self.changes if c.applicable]

    @property
    def refused(self) -> list[PinChange]:
        return [c for c in self.changes if not c.applicable]

    @property
    def fingerprint(self) -> str:
        """A digest of the plan as listed: applying checks that it is still the plan (the
        items' metadata, their verifications and what is held back), so nothing is applied
        that the researcher did not see."""
        state = [
            [c.item_id, c.pinned, c.verified, c.verification_id, c.refused] for c in self.changes
        ]
        return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:32]

    @property
    def submitted(self) -> int:
        return sum(c.submitted for c in self.applicable)

    @property
    def leases(self) -> int:
        return sum(c.leases for c in self.applicable)


def campaign_metadata_plan(*, campaign: Campaign, item_ids=None) -> MetadataApplyPlan:
    """What applying the verified metadata to `campaign` would change (of `item_ids` only,
    if given): the items it pinned whose verified skills (the item's own, with their
    checklists) differ from the pin, each with its tasks, the annotations already
    submitted on them, the leases held, the known-answer tasks on it checked against the
    skills it would ask, and the rubric versions that would be pinned for skills asked
    from now on. An item is held back (`refused`, with the reason) when a known-answer
    task on it names a skill it would no longer ask, or a skill it would ask has no
    rubric. A fixed number of queries (nine) whatever the number of items."""
    verified = MetadataVerification.objects.filter(item__dataset_id=campaign.dataset_id)
    if item_ids is not None:
        verified = verified.filter(item_id__in=list(item_ids))
    latest: dict[int, tuple] = {}
    for row in verified.order_by("item_id", "verified_at", "id").values_list(
        "item_id", "id", "verdict", "verified_by__username", "verified_at"
    ):
        latest[row[0]] = row[1:]
    pins = item_skills_pinned(campaign_id=campaign.pk, item_ids=latest)
    own: dict[int, list] = {item_id: [] for item_id in pins}
    external: dict[int, str] = {}
    for item_id, skill_id, checklist, external_id in (
        ItemSkill.objects.filter(item_id__in=list(pins))
        .order_by("item_id", "rank")
        .values_list("item_id", "skill_id", "checklist", "item__external_id")
    ):
        own[item_id].append([skill_id, checklist])
        external[item_id] = external_id
    differing = sorted(item_id for item_id, skills in pins.items() if own[item_id] != skills)
    if not differing:
        return MetadataApplyPlan(campaign_id=campaign.pk, changes=[], new_rubric_ids={})
    for item_id, external_id in Item.objects.filter(pk__in=differing).values_list(
        "pk", "external_id"
    ):
        external[item_id] = external_id
    normal = dict(
        (item_id, (n, done))
        for item_id, n, done in Task.objects.filter(
            campaign=campaign, kind=TaskKind.NORMAL, response__item_id__in=differing
        )
        .order_by()
        .values("response__item_id")
        .annotate(n=Count("pk"), done=Coalesce(Sum("submitted"), 0))
        .values_list("response__item_id", "n", "done")
    )
    leases = dict(
        Assignment.objects.filter(
            campaign=campaign,
            status=AssignmentStatus.ACTIVE,
            task__response__item_id__in=differing,
        )
        .order_by()
        .values("task__response__item_id")
        .annotate(n=Count("pk"))
        .values_list("task__response__item_id", "n")
    )
    known = defaultdict(list)
    for task in campaign_known_tasks(campaign=campaign, item_ids=differing):
        known[task.item_id].append(task)
    rubric_pinned, fixed = _rubric_pinned(campaign), _fixed_ids(campaign)
    in_force = rubrics_current_for_project(project=campaign.project)
    names = _skill_names(
        [pair[0] for item_id in differing for pair in [*pins[item_id], *own[item_id]]]
        + [pk for tasks in known.values() for t in tasks for pk in t.known]
        + fixed
    )
    new_rubric_ids: dict[int, int] = {}
    changes = []
    for item_id in differing:
        before = [pair[0] for pair in pins[item_id]]
        after_ids = [pair[0] for pair in own[item_id]]
        asked_before = asked_skill_ids(
            campaign=campaign, item_skill_ids=before, rubric_pinned=rubric_pinned, fixed=fixed
        )
        ids = fixed if campaign.skill_mode == SkillMode.FIXED else after_ids
        no_rubric = [pk for pk in ids if pk not in rubric_pinned and pk not in in_force]
        to_pin = [pk for pk in ids if pk not in rubric_pinned and pk in in_force]
        asked_after = [pk for pk in ids if pk in rubric_pinned or pk in in_force]
        checked = [_checked(t, asked_after, names) for t in known[item_id]]
        reasons = [t.reason_to_hold for t in checked if not t.ok]
        if no_rubric:
            reasons.append(f"no rubric for {', '.join(names[pk] for pk in no_rubric)}")
        if not reasons:
            for pk in to_pin:
                new_rubric_ids[pk] = in_force[pk].pk
        n_tasks, done = normal.get(item_id, (0, 0))
        verification_id, verdict, username, verified_at = latest[item_id]
        changes.append(
            PinChange(
                item_id=item_id,
                external_id=external.get(item_id, str(item_id)),
                pinned=pins[item_id],
                verified=own[item_id],
                asked_before=[names[pk] for pk in asked_before],
                asked_after=[names[pk] for pk in asked_after],
                tasks=n_tasks,
                submitted=done,
                leases=leases.get(item_id, 0),
                known=checked,
                new_rubrics=[f"{names[pk]} ({in_force[pk].label})" for pk in to_pin],
                refused="; ".join(reasons),
                verification_id=verification_id,
                verdict=verdict,
                verified_by=username or "",
                verified_at=verified_at,
            )
        )
    return MetadataApplyPlan(
        campaign_id=campaign.pk, changes=changes, new_rubric_ids=new_rubric_ids
    )


def response_ids_for_run(
    *,
    dataset_id: int,
    model_names: list[str] | None = None,
    after_id: int = 0,
    limit: int = 500,
    last_id: int | None = None,
) -> list[int]:
    """Keyset pagination over a dataset's response ids (judge-run fan-out): after
    `after_id`, up to `last_id` (included) if given."""
    qs = Response.objects.filter(item__dataset_id=dataset_id, pk__gt=after_id)
    if last_id is not None:
        qs = qs.filter(pk__lte=last_id)
    if model_names:
        qs = qs.filter(model_name__in=model_names)
    return list(qs.order_by("pk").values_list("pk", flat=True)[:limit])


def response_count_for_run(*, dataset_id: int, model_names: list[str] | None = None) -> int:
    qs = Response.objects.filter(item__dataset_id=dataset_id)
    if model_names:
        qs = qs.filter(model_name__in=model_names)
    return qs.count()


def response_for_judging(*, response_id: int) -> Response:
    """A response with its item (instruction, reference) loaded."""
    return Response.objects.select_related("item").get(pk=response_id)


def responses_for_judging(*, response_ids: Sequence[int]) -> list[Response]:
    """The responses (with their items loaded) of `response_ids` that exist, in id order."""
    return list(Response.objects.select_related("item").filter(pk__in=response_ids).order_by("pk"))


def anchor_responses_for(
    *, responses: Sequence[Response], anchor_model: str
) -> dict[int, Response]:
    """anchor_response_for for many responses: item id -> the anchor model's response (with
    its item loaded), for the items that have one."""
    anchors: dict[int, Response] = {}
    for anchor in (
        Response.objects.select_related("item")
        .filter(item_id__in={r.item_id for r in responses}, model_name=anchor_model)
        .order_by("-pk")
    ):
        anchors[anchor.item_id] = anchor  # the lowest pk wins, as in anchor_response_for
    return anchors


# --- pairwise judging: a challenger response and the anchor model's response to its item ---


def model_names_for_dataset(*, dataset_id: int) -> list[str]:
    """The names of the models that answered the dataset's items."""
    return list(
        Response.objects.filter(item__dataset_id=dataset_id)
        .values_list("model_name", flat=True)
        .distinct()
        .order_by()
    )


def dataset_has_model(*, dataset_id: int, model_name: str) -> bool:
    return Response.objects.filter(item__dataset_id=dataset_id, model_name=model_name).exists()


def _pair_challengers(dataset_id: int, anchor_model: str, model_names: list[str] | None):
    anchors = Response.objects.filter(item_id=OuterRef("item_id"), model_name=anchor_model)
    qs = Response.objects.filter(item__dataset_id=dataset_id).exclude(model_name=anchor_model)
    if model_names:
        qs = qs.filter(model_name__in=model_names)
    return qs.filter(Exists(anchors))


def pair_challenger_ids(
    *,
    dataset_id: int,
    anchor_model: str,
    model_names: list[str] | None = None,
    after_id: int = 0,
    limit: int = 500,
    last_id: int | None = None,
) -> list[int]:
    """Keyset page over the responses that have an anchor response on their item (after
    `after_id`, up to `last_id` included if given)."""
    qs = _pair_challengers(dataset_id, anchor_model, model_names).filter(pk__gt=after_id)
    if last_id is not None:
        qs = qs.filter(pk__lte=last_id)
    return list(qs.order_by("pk").values_list("pk", flat=True)[:limit])


def pair_challenger_count(
    *, dataset_id: int, anchor_model: str, model_names: list[str] | None = None
) -> int:
    return _pair_challengers(dataset_id, anchor_model, model_names).count()


def anchor_response_for(*, response: Response, anchor_model: str) -> Response | None:
    """The anchor model's response to the same item (with its item loaded), or None."""
    return (
        Response.objects.select_related("item")
        .filter(item_id=response.item_id, model_name=anchor_model)
        .order_by("pk")
        .first()
    )


# --- analytics: every human score of a project, as plain rows -----------------------------------


def scores_narrowed(
    qs: QuerySet,
    *,
    skills: Sequence[str] = (),
    dataset_id: int | None = None,
    systems: Sequence[str] = (),
) -> QuerySet:
    """Scores of any kind (human, judge, imported: each has `skill` and `response`) narrowed
    to skill names, a dataset and systems (model names); empty narrows nothing."""
    if skills:
        qs = qs.filter(skill__name__in=skills)
    if dataset_id is not None:
        qs = qs.filter(response__item__dataset_id=dataset_id)
    if systems:
        qs = qs.filter(response__model_name__in=systems)
    return qs


def human_scores_accepted(*, project: Project) -> QuerySet[HumanScore]:
    """The project's campaign scores that count as data: of normal tasks and normal
    assignments, submitted (gold, attention checks and hidden repeats are quality control).
    The report (human_score_rows) and the exports read these."""
    return HumanScore.objects.filter(campaign__project=project).accepted()


def human_preferences_changed_since(*, project: Project, since: datetime) -> int:
    """How many of the project's accepted preferences were written or edited after `since`
    (an index range scan per campaign: humanpreference_updated)."""
    campaigns = list(Campaign.objects.filter(project=project).values_list("pk", flat=True))
    if not campaigns:
        return 0
    return (
        HumanPreference.objects.filter(campaign_id__in=campaigns, updated_at__gt=since)
        .accepted()
        .count()
    )


def human_scores_changed_since(*, project: Project, since: datetime) -> int:
    """How many of the project's accepted campaign scores were written or edited after
    `since`, plus how many of its scores were deleted after it (analytics' snapshots say
    "N new scores since"). An index range scan per campaign (humanscore_campaign_updated)."""
    campaigns = list(Campaign.objects.filter(project=project).values_list("pk", flat=True))
    if not campaigns:
        return 0
    changed = (
        HumanScore.objects.filter(campaign_id__in=campaigns, updated_at__gt=since)
        .accepted()
        .count()
    )
    deleted = HumanScoreDeletion.objects.filter(
        campaign_ref__in=campaigns, deleted_at__gt=since
    ).count()
    return changed + deleted


def human_score_rows(*, project: Project) -> list[tuple]:
    """(response id, item id, system, skill name, rater, score or None for N/A) for every
    accepted human score in the project's campaigns (human_scores_accepted)."""
    return list(
        human_scores_accepted(project=project)
        .order_by("response_id", "skill__order", "skill__name", "annotator__username")
        .values_list(
            "response_id",
            "response__item_id",
            "response__model_name",
            "skill__name",
            "annotator__username",
            "score",
        )
    )


# --- analytics: pairwise preferences as plain rows ---------------------------------------------


@dataclass(frozen=True)
class HumanPreferenceRow:
    """One accepted preference (HumanPreference.objects.accepted()). `choice` is in the
    pair's canonical terms: "a" means response_a (model_a) is better, whichever side it
    was shown on; `b_left` says B was shown on the left."""

    campaign_id: int
    item_id: int
    item_external_id: str
    response_a_id: int
    response_b_id: int
    model_a: str
    model_b: str
    b_left: bool
    annotator_id: int
    annotator: str  # username
    skill: str | None  # skill name; None: the overall question
    choice: str  # PairChoice value: a, b, tie, both_bad
    strength: int | None  # 1 slightly, 2 much; None when not asked
    rationale: str
    time_ms: int | None
    submitted_at: datetime | None
    language: str = ""  # the language the pair was shown in ("": unknown)


def human_preference_rows(
    *, project: Project, campaign_ids: Iterable[int] | None = None
) -> list[HumanPreferenceRow]:
    """Every accepted preference of the project's pairwise campaigns (or of the campaigns
    `campaign_ids` among them), ordered by campaign, item, pair, annotator, skill (overall
    last). One query."""
    qs = HumanPreference.objects.accepted().filter(campaign__project=project)
    if campaign_ids is not None:
        qs = qs.filter(campaign_id__in=list(campaign_ids))
    rows = qs.order_by(
        "campaign_id",
        "response_a__item_id",
        "response_a_id",
        "response_b_id",
        "annotator__username",
        F("skill__order").asc(nulls_last=True),
        "skill__name",
    ).values_list(
        "campaign_id",
        "response_a__item_id",
        "response_a__item__external_id",
        "response_a_id",
        "response_b_id",
        "response_a__model_name",
        "response_b__model_name",
        "assignment__task__b_left",
        "annotator_id",
        "annotator__username",
        "skill__name",
        "choice",
        "strength",
        "rationale",
        "time_ms",
        "assignment__submitted_at",
        "assignment__language",
    )
    return [HumanPreferenceRow(*row) for row in rows]


def item_facets(*, item_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """item id -> {"difficulty": 1-5 or None, "domains": [domain names]} (two queries)."""
    ids = list(item_ids)
    # plain dicts, not a TypedDict: analytics' ReportRows holds them as dict[str, Any]
    facets: dict[int, dict[str, Any]] = {
        pk: {"difficulty": difficulty, "domains": []}
        for pk, difficulty in Item.objects.filter(pk__in=ids).values_list("pk", "difficulty")
    }
    rows = (
        ItemDomain.objects.filter(item_id__in=ids)
        .order_by("domain__order", "domain__name")
        .values_list("item_id", "domain__name")
    )
    for item_id, name in rows:
        facets[item_id]["domains"].append(name)
    return facets


# --- analytics: a project's human scores for a score export, streamed as plain rows --------------


def _human_scores_for_export(
    *,
    project: Project,
    skills: Sequence[str],
    dataset_id: int | None,
    systems: Sequence[str],
    campaign_id: int | None,
) -> QuerySet[HumanScore]:
    """The accepted campaign scores (human_scores_accepted), narrowed to a campaign,
    skills, a dataset and systems."""
    qs = human_scores_accepted(project=project)
    if campaign_id is not None:
        qs = qs.filter(campaign_id=campaign_id)
    return scores_narrowed(qs, skills=skills, dataset_id=dataset_id, systems=systems)


def human_score_export_rows(
    *,
    project: Project,
    skills: Sequence[str] = (),
    dataset_id: int | None = None,
    systems: Sequence[str] = (),
    campaign_id: int | None = None,
    chunk_size: int = 2000,
) -> Iterator[tuple]:
    """Every accepted human score of the project (as `human_score_rows` counts them),
    streamed `chunk_size` rows per round trip (a server-side cursor on PostgreSQL), ordered
    by (response id, skill id, annotator, pk). One tuple per score:

    (response id, skill id, dataset name, item external id, system, skill name, annotator
    username, score, is_na, rationale, time_ms, the assignment's active_ms, rubric version,
    campaign name, created_at, updated_at, the rubric's project slug or None when built in,
    the language the task was shown in: "" when unknown)

    `score` is as stored (an N/A row says so in `is_na`); `time_ms` is None when the form did
    not report it. Empty `skills` / `systems` and None ids do not narrow."""
    qs = _human_scores_for_export(
        project=project,
        skills=skills,
        dataset_id=dataset_id,
        systems=systems,
        campaign_id=campaign_id,
    )
    rows = qs.order_by("response_id", "skill_id", "annotator__username", "pk").values_list(
        "response_id",
        "skill_id",
        "response__item__dataset__name",
        "response__item__external_id",
        "response__model_name",
        "skill__name",
        "annotator__username",
        "score",
        "is_na",
        "rationale",
        "time_ms",
        "assignment__active_ms",
        "rubric__version",
        "campaign__name",
        "created_at",
        "updated_at",
        "rubric__project__slug",
        "assignment__language",
    )
    return rows.iterator(chunk_size=chunk_size)


def human_score_export_annotators(
    *,
    project: Project,
    skills: Sequence[str] = (),
    dataset_id: int | None = None,
    systems: Sequence[str] = (),
    campaign_id: int | None = None,
) -> list[str]:
    """The usernames of the annotators with at least one score among the rows
    `human_score_export_rows` gives for the same arguments, each once, sorted."""
    qs = _human_scores_for_export(
        project=project,
        skills=skills,
        dataset_id=dataset_id,
        systems=systems,
        campaign_id=campaign_id,
    )
    return sorted(qs.values_list("annotator__username", flat=True).distinct().order_by())


# --- analytics: single responses for the researchers' pages ----------------------------------
#
# The disagreement explorer and the response page in analytics: a response with its item,
# every human score of it, short excerpts of many responses' instructions, and which
# campaigns score which responses. Plain rows (dataclasses, dicts), never lazy model
# relations, except the one Response the response page shows.

#: Characters of an instruction shown in a list (the database cuts it: instructions can
#: be long, and a page lists fifty).
EXCERPT_CHARS = 160


def response_get_for_project(*, project: Project, response_id: int) -> Response:
    """The response with its item and dataset, if it belongs to one of the project's
    datasets; raises Response.DoesNotExist otherwise."""
    return Response.objects.select_related("item__dataset").get(
        pk=response_id, item__dataset__project=project
    )


@dataclass(frozen=True)
class HumanScoreRow:
    annotator: str
    skill: str
    score: int | None  # None: N/A
    rationale: str
    time_ms: int | None  # time on this skill, as the scoring page measured it
    active_ms: int | None  # focused time on the whole task (all its skills)
    campaign_id: int
    campaign: str
    task_kind: str  # normal, gold, attention
    assignment_kind: str  # normal, repeat
    status: str  # of the assignment: submitted (or expired/skipped for a late edit)
    submitted_at: datetime | None
    created_at: datetime
    rubric: str = ""  # rubric_label of the version it was scored under ("" before rubrics)

    @property
    def active_seconds(self) -> float | None:
        return None if self.active_ms is None else self.active_ms / 1000

    @property
    def time_seconds(self) -> float | None:
        return None if self.time_ms is None else self.time_ms / 1000

    @property
    def counted(self) -> bool:
        """Whether analytics counts it (normal task, normal submitted assignment)."""
        return assignment_is_accepted(
            status=self.status, kind=self.assignment_kind, task_kind=self.task_kind
        )


def human_score_list_for_response(*, response_id: int) -> list[HumanScoreRow]:
    """Every human score of the response, in every campaign (gold, attention checks and
    hidden repeats included, marked), by skill order, then time, with the rubric version of
    each. One query."""
    return human_score_lists_for_responses(response_ids=[response_id]).get(response_id, [])


def human_score_lists_for_responses(
    *, response_ids: Iterable[int]
) -> dict[int, list[HumanScoreRow]]:
    """response id -> its human scores (gold, attention checks and hidden repeats included,
    marked), by skill order, then time, with the rubric version of each. One query."""
    rows = (
        HumanScore.objects.filter(response_id__in=list(response_ids))
        .order_by("response_id", "skill__order", "skill__name", "created_at", "pk")
        .values_list(
            "response_id",
            "annotator__username",
            "skill__name",
            "score",
            "rationale",
            "time_ms",
            "assignment__active_ms",
            "campaign_id",
            "campaign__name",
            "assignment__task__kind",
            "assignment__kind",
            "assignment__status",
            "assignment__submitted_at",
            "created_at",
            "rubric__project__slug",
            "rubric__version",
        )
    )
    found: dict[int, list[HumanScoreRow]] = {}
    for response_id, *fields, slug, version in rows:
        label = "" if version is None else rubric_label(project_slug=slug, version=version)
        found.setdefault(response_id, []).append(replace(HumanScoreRow(*fields), rubric=label))
    return found


def response_texts_for_drill_down(*, response_ids: Iterable[int]) -> dict[int, dict]:
    """response id -> {"item_id", "item_external_id", "dataset", "instruction",
    "reference_answer", "system", "text"}: everything a drill-down entry shows of the
    response and its item, in full. One query."""
    rows = Response.objects.filter(pk__in=list(response_ids)).values_list(
        "pk",
        "item_id",
        "item__external_id",
        "item__dataset__name",
        "item__instruction",
        "item__reference_answer",
        "model_name",
        "text",
    )
    keys = ("item_id", "item_external_id", "dataset", "instruction", "reference_answer")
    return {pk: dict(zip((*keys, "system", "text"), rest, strict=True)) for pk, *rest in rows}


def response_excerpts(*, response_ids: Iterable[int]) -> dict[int, dict]:
    """response id -> {"item_external_id", "instruction"} (the first EXCERPT_CHARS
    characters of the item's instruction, and whether it was cut). One query."""
    rows = (
        Response.objects.filter(pk__in=list(response_ids))
        .annotate(excerpt=Substr("item__instruction", 1, EXCERPT_CHARS + 1))
        .values_list("pk", "item__external_id", "excerpt")
    )
    return {
        pk: {
            "item_external_id": external_id,
            "instruction": excerpt[:EXCERPT_CHARS],
            "cut": len(excerpt) > EXCERPT_CHARS,
        }
        for pk, external_id, excerpt in rows
    }


def campaigns_for_responses(
    *, project: Project, response_ids: Iterable[int]
) -> dict[int, list[tuple[int, str]]]:
    """response id -> [(campaign id, name)] of the project's started campaigns (not drafts)
    that have a normal task for it (each campaign once), by campaign name. One query."""
    rows = (
        Task.objects.filter(
            campaign__project=project,
            kind=TaskKind.NORMAL,
            response_id__in=list(response_ids),
        )
        .exclude(campaign__status=CampaignStatus.DRAFT)
        .order_by("campaign__name", "campaign_id")
        .values_list("response_id", "campaign_id", "campaign__name")
        .distinct()  # a response in several tasks of one campaign (pairs, repeats)
    )
    found: dict[int, list[tuple[int, str]]] = {}
    for response_id, campaign_id, name in rows:
        found.setdefault(response_id, []).append((campaign_id, name))
    return found


# --- active selection: the responses a "sampled" campaign drew for people ----------------------


def sampling_design(*, project: Project) -> dict[int, tuple[float, bool]]:
    """response id -> (inclusion probability, drawn for people) for every response decided
    in the project's "sampled" campaigns that were started (not drafts: nobody scores a
    draft's draws yet). A response decided in several campaigns takes the most recent
    campaign's decision. The report weights the labels of the drawn responses by these
    probabilities (analytics/report/prediction_powered.py). One query."""
    rows = (
        CampaignSample.objects.filter(
            campaign__project=project, campaign__selection=CampaignSelection.SAMPLED
        )
        .exclude(campaign__status=CampaignStatus.DRAFT)
        .order_by("campaign__created_at", "campaign_id")
        .values_list("response_id", "probability", "drawn")
    )
    return {response_id: (probability, drawn) for response_id, probability, drawn in rows}


def campaign_sample_rows(*, campaign: Campaign) -> list[tuple[int, int, float, bool]]:
    """(batch, response id, inclusion probability, drawn) of every response the campaign
    decided, by batch and response. One query."""
    return list(
        CampaignSample.objects.filter(campaign=campaign)
        .order_by("batch", "response_id")
        .values_list("batch", "response_id", "probability", "drawn")
    )


def campaign_response_skill_ids(*, campaign: Campaign) -> dict[int, list[int]]:
    """response id -> the skill ids a task of the campaign on it asks (or would ask: the
    fixed set, or its item's pinned skills, or while unpinned the item's own), for every
    response of the campaign's dataset and models, by id. Five queries."""
    responses = Response.objects.filter(item__dataset_id=campaign.dataset_id)
    if campaign.model_names:
        responses = responses.filter(model_name__in=campaign.model_names)
    rows = list(responses.order_by("pk").values_list("pk", "item_id"))
    per_item = campaign_item_skill_ids(campaign=campaign, item_ids={item for _, item in rows})
    pinned, fixed = _rubric_pinned(campaign), _fixed_ids(campaign)
    asked = {
        item_id: asked_skill_ids(
            campaign=campaign, item_skill_ids=skills, rubric_pinned=pinned, fixed=fixed
        )
        for item_id, skills in per_item.items()
    }
    return {pk: asked[item_id] for pk, item_id in rows}


def campaign_label_means(*, campaign: Campaign) -> dict[int, dict[int, float]]:
    """response id -> skill id -> the mean of the campaign's accepted human scores of the
    response on the skill (N/A left out; a skill scored only N/A is absent). One query."""
    rows = (
        HumanScore.objects.filter(campaign=campaign, score__isnull=False)
        .accepted()
        .values("response_id", "skill_id")
        .annotate(total=Sum("score"), n=Count("pk"))
        .order_by()
        .values_list("response_id", "skill_id", "total", "n")
    )
    means: dict[int, dict[int, float]] = {}
    for response_id, skill_id, total, n in rows:
        means.setdefault(response_id, {})[skill_id] = total / n
    return means


def campaign_list_for_reannotation(*, project: Project) -> QuerySet[Campaign]:
    """The project's campaigns that have tasks (every status but draft), by name."""
    return (
        Campaign.objects.filter(project=project)
        .exclude(status=CampaignStatus.DRAFT)
        .order_by("name", "pk")
    )


def project_system_names(*, project: Project) -> list[str]:
    """The systems (model names) that answered items of the project's datasets, by name."""
    return list(
        Response.objects.filter(item__dataset__project=project)
        .order_by("model_name")
        .values_list("model_name", flat=True)
        .distinct()
    )


# --- projects and campaigns by name (the analytics commands, imports and exports) ---------------


def project_get_by_slug(*, slug: str) -> Project | None:
    return Project.objects.filter(slug=slug).first()


def project_lock(*, slug: str) -> Project | None:
    """The project, locked FOR NO KEY UPDATE until the caller's transaction ends (None if
    there is none): serialises the writers of one project's analytics (score imports, the
    export cap) without blocking inserts elsewhere that reference the row (those take FOR
    KEY SHARE)."""
    return Project.objects.select_for_update(no_key=True).filter(slug=slug).first()


def campaign_get_by_name(*, project: Project, name: str) -> Campaign | None:
    return Campaign.objects.filter(project=project, name=name).first()


# --- study participants (annotation/study/) --------------------------------------------------


def participant_ids_for_project(*, project: Project) -> dict[str, tuple[str, str]]:
    """{username: (platform, worker id)} of the project's study participants: the exports'
    platform and worker_id columns (for the project's staff only)."""
    rows = Participant.objects.filter(campaign__project=project).values_list(
        "user__username", "platform", "worker_id"
    )
    return {username: (platform, worker) for username, platform, worker in rows}


#: The `participants` filter of the staff's member and annotator lists: everyone (the APIs'
#: default), everyone but the accounts study links made, or only those accounts.
PARTICIPANTS_INCLUDE = "include"
PARTICIPANTS_EXCLUDE = "exclude"
PARTICIPANTS_ONLY = "only"
PARTICIPANT_FILTERS = (PARTICIPANTS_INCLUDE, PARTICIPANTS_EXCLUDE, PARTICIPANTS_ONLY)


def study_participant_exists(
    *, project: Project, user_field: str = "pk", study_id: int | None = None
) -> Exists:
    """True for rows whose user (`user_field`, an outer user id) came in through a study
    link of one of the project's campaigns (of campaign `study_id` only, if given). A
    correlated EXISTS on Participant's unique user index: cheap per row, and a staff list
    of a project with thousands of participants stays one query."""
    rows = Participant.objects.filter(user_id=OuterRef(user_field), campaign__project_id=project.pk)
    if study_id is not None:
        rows = rows.filter(campaign_id=study_id)
    return Exists(rows)


def participants_narrowed(
    rows: QuerySet,
    *,
    project: Project,
    participants: str = PARTICIPANTS_INCLUDE,
    user_field: str = "pk",
    study_id: int | None = None,
) -> QuerySet:
    """`rows` (users, or rows with a user in `user_field`) as the participants filter
    asks: all of them, none of the project's study participants, or only those (of one
    study: campaign `study_id`, which implies "only")."""
    if participants not in PARTICIPANT_FILTERS:
        raise ValueError(f"participants is one of {', '.join(PARTICIPANT_FILTERS)}")
    if study_id is not None:
        participants = PARTICIPANTS_ONLY
    if participants == PARTICIPANTS_INCLUDE:
        return rows
    found = study_participant_exists(project=project, user_field=user_field, study_id=study_id)
    return rows.filter(found) if participants == PARTICIPANTS_ONLY else rows.filter(~found)


def study_id_from(value: str | None) -> int | None:
    """The campaign id a page's `?study=` names (a positive 64-bit integer), or None."""
    try:
        study_id = int(value or "")
    except ValueError:
        return None
    return study_id if 0 < study_id < 2**63 else None


def study_get_for_project(*, project: Project, study_id: int) -> Campaign | None:
    """The campaign of the project whose study participants a staff list asks for (its id
    and name), or None."""
    return Campaign.objects.filter(project=project, pk=study_id).only("pk", "name").first()


@dataclass(frozen=True)
class StudyGroup:
    """A campaign's study participants, as one line of a staff list."""

    campaign_id: int
    campaign_name: str
    links: int  # the campaign's study links (one per platform link), open or closed
    participants: int  # its participants counted by study_group_list's rules


def study_group_list(
    *,
    project: Project,
    roles: Sequence[str] = (),
    in_pool_of: Campaign | None = None,
) -> list[StudyGroup]:
    """One line per campaign of the project whose study links brought in members (with
    one of `roles`, if given; in the direct pool of campaign `in_pool_of`, if given), by
    campaign name: the staff pages show a study's thousands of accounts as this line.
    One query whatever the number of participants."""
    member = ProjectMembership.objects.filter(project_id=project.pk, user_id=OuterRef("user_id"))
    if roles:
        member = member.filter(role__in=list(roles))
    people = Participant.objects.filter(campaign__project_id=project.pk).filter(Exists(member))
    if in_pool_of is not None:
        pool = Campaign.annotators.through.objects.filter(
            campaign_id=in_pool_of.pk, user_id=OuterRef("user_id")
        )
        people = people.filter(Exists(pool))
    links = (
        StudyLink.objects.filter(campaign_id=OuterRef("campaign_id"))
        .order_by()
        .values("campaign_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    # grouped over the participants (not a count per campaign row, which PostgreSQL would
    # run twice: in the select list and in the filter)
    rows = (
        people.order_by()
        .values("campaign_id", "campaign__name")
        .annotate(n=Count("pk"), link_count=Coalesce(Subquery(links), 0))
        .order_by("campaign__name", "campaign_id")
        .values_list("campaign_id", "campaign__name", "link_count", "n")
    )
    return [StudyGroup(*row) for row in rows]


# --- analytics: adjudicated scores (annotation/review/), kept apart from the raw ones ----------


def adjudicated_score_rows(
    *,
    project: Project,
    campaign_id: int | None = None,
    skills: Sequence[str] = (),
    dataset_id: int | None = None,
    systems: Sequence[str] = (),
) -> list[tuple]:
    """(response id, item id, system, skill name, score or None for N/A) of every
    adjudicated (response, skill) of the project's campaigns (or of one; narrowed as
    `scores_narrowed` narrows), one each: when reviewers of two campaigns settled the same
    (response, skill), the latest one counts. The report's "adjudicated" mode puts these in
    place of the raw human scores of that pair; the wide export shows them in its
    `adjudicated` column."""
    qs = AdjudicatedScore.objects.filter(campaign__project=project)
    if campaign_id is not None:
        qs = qs.filter(campaign_id=campaign_id)
    qs = scores_narrowed(qs, skills=skills, dataset_id=dataset_id, systems=systems)
    rows = qs.order_by("response_id", "skill_id", "-updated_at", "-pk").values_list(
        "response_id",
        "response__item_id",
        "response__model_name",
        "skill__name",
        "score",
        "skill_id",
    )
    found: dict[tuple[int, int], tuple] = {}
    for response_id, item_id, system, skill, score, skill_id in rows:
        found.setdefault((response_id, skill_id), (response_id, item_id, system, skill, score))
    return list(found.values())


def adjudicated_scores_changed_since(*, project: Project, since: datetime) -> int:
    """How many of the project's adjudicated scores were written or changed after `since`."""
    return AdjudicatedScore.objects.filter(campaign__project=project, updated_at__gt=since).count()


def adjudicated_export_map(
    *, project: Project, campaign_id: int | None = None
) -> dict[tuple[str, int, int], tuple[int | None, bool, str, str]]:
    """(campaign name, response id, skill id) -> (score, is_na, note, reviewer username or
    "") of the project's adjudicated scores (of one campaign when `campaign_id` is given):
    the exports' adjudicated columns. One query; as many rows as reviewers settled."""
    qs = AdjudicatedScore.objects.filter(campaign__project=project)
    if campaign_id is not None:
        qs = qs.filter(campaign_id=campaign_id)
    return {
        (campaign, response_id, skill_id): (score, is_na, note, reviewer or "")
        for campaign, response_id, skill_id, score, is_na, note, reviewer in qs.values_list(
            "campaign__name",
            "response_id",
            "skill_id",
            "score",
            "is_na",
            "note",
            "reviewer__username",
        )
    }


def retest_score_rows(*, project: Project) -> list[tuple[int, int, str, int | None, int | None]]:
    """(response id, item id, skill name, first score, repeat score), None for N/A, for
    every hidden repeat's score in the project's campaigns paired with the same annotator's
    first score of that task and skill (the campaign page's test-retest pairs: a repeat
    whose first score is missing is left out). One query."""
    first = HumanScore.objects.filter(
        assignment__task_id=OuterRef("assignment__task_id"),
        assignment__kind=AssignmentKind.NORMAL,
        annotator_id=OuterRef("annotator_id"),
        skill_id=OuterRef("skill_id"),
    )
    rows = (
        HumanScore.objects.filter(campaign__project=project, assignment__kind=AssignmentKind.REPEAT)
        .annotate(
            first_score=Subquery(first.values("score")[:1]),
            first_na=Subquery(first.values("is_na")[:1]),
        )
        .filter(first_na__isnull=False)
        .order_by("response_id", "skill__order", "skill__name", "pk")
        .values_list(
            "response_id",
            "response__item_id",
            "skill__name",
            "first_score",
            "first_na",
            "score",
            "is_na",
        )
    )
    return [
        (rid, item, skill, None if first_na else first_score, None if is_na else score)
        for rid, item, skill, first_score, first_na, score, is_na in rows
    ]


# --- proposed and verified metadata (docs/METADATA.md): what a metadata run and the agreement
# figures read -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CatalogueEntry:
    key: str
    name: str
    text: str = ""  # a skill's criterion in force
    subdomains: tuple[str, ...] = ()


@dataclass(frozen=True)
class MetadataCatalogue:
    skills: list[CatalogueEntry]
    domains: list[CatalogueEntry]

    @property
    def skill_keys(self) -> set[str]:
        return {s.key for s in self.skills}

    @property
    def domain_keys(self) -> set[str]:
        return {d.key for d in self.domains}


def metadata_catalogue(*, project: Project) -> MetadataCatalogue:
    """The skills (with the criterion in force) and domains a proposal may name."""
    rubrics = rubrics_current_for_project(project=project)
    skills = [
        CatalogueEntry(s.key, s.name, rubrics[s.pk].criterion if s.pk in rubrics else "")
        for s in skill_list_for_project(project=project)
    ]
    domains = [
        CatalogueEntry(d.key, d.name, subdomains=tuple(d.subdomains or ()))
        for d in domain_list_for_project(project=project)
    ]
    return MetadataCatalogue(skills=skills, domains=domains)


def item_ids_for_metadata(*, dataset_id: int, after_id: int, limit: int) -> list[int]:
    return list(
        Item.objects.filter(dataset_id=dataset_id, pk__gt=after_id)
        .order_by("pk")
        .values_list("pk", flat=True)[:limit]
    )


def item_count_for_metadata(*, dataset_id: int) -> int:
    return Item.objects.filter(dataset_id=dataset_id).count()


def item_instructions(*, item_ids: list[int]) -> dict[int, str]:
    return dict(Item.objects.filter(pk__in=item_ids).values_list("pk", "instruction"))


def metadata_proposal_items_present(*, origin: str, item_ids: list[int]) -> set[int]:
    """The items among `item_ids` that already hold a proposal of `origin`."""
    return set(
        MetadataProposal.objects.filter(origin=origin, item_id__in=item_ids).values_list(
            "item_id", flat=True
        )
    )


def metadata_origins(*, dataset: Dataset) -> list[tuple[str, str, int]]:
    """The proposal origins of a dataset: (origin, label, proposals), newest run first."""
    rows = (
        MetadataProposal.objects.filter(item__dataset=dataset)
        .values_list("origin", "label", "run_id")
        .distinct()
    )
    seen: dict[str, tuple[str, str, int]] = {}
    for origin, label, run_id in rows:
        seen[origin] = (origin, label or origin, run_id or 0)
    return sorted(seen.values(), key=lambda row: (row[0] != "dataset", -row[2]))


def metadata_pair_rows(*, dataset_id: int, origin: str) -> list[dict]:
    """For each verified item with a parsed proposal of `origin`: the proposal's values and
    the item's latest verified values (plain rows, for analytics)."""
    latest: dict[int, tuple] = {}
    for item_id, *verified in (
        MetadataVerification.objects.filter(item__dataset_id=dataset_id)
        .order_by("item_id", "verified_at", "id")
        .values_list("item_id", "domains", "skills", "difficulty", "verdict")
    ):
        latest[item_id] = tuple(verified)
    rows = []
    for item_id, domains, skills, difficulty in MetadataProposal.objects.filter(
        item__dataset_id=dataset_id, origin=origin, status=ProposalStatus.OK
    ).values_list("item_id", "domains", "skills", "difficulty"):
        if item_id not in latest:
            continue
        v_domains, v_skills, v_difficulty, verdict = latest[item_id]
        rows.append(
            {
                "item_id": item_id,
                "proposed": {"domains": domains, "skills": skills, "difficulty": difficulty},
                "verified": {"domains": v_domains, "skills": v_skills, "difficulty": v_difficulty},
                "verdict": verdict,
            }
        )
    return rows


def campaign_names_for_project(*, project: Project) -> dict[int, tuple[str, str, int]]:
    """campaign id -> (campaign name, its dataset's name, its dataset's id), for the
    project's campaigns."""
    return {
        pk: (name, dataset, dataset_id)
        for pk, name, dataset, dataset_id in Campaign.objects.filter(project=project).values_list(
            "pk", "name", "dataset__name", "dataset_id"
        )
    }


def pair_responses_for_import(
    *, project: Project, keys: Iterable[tuple[str, str, str]]
) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(dataset name, item external id, system) -> (response id, item id) of the project's
    responses among `keys` (a preference import resolves its rows with it)."""
    wanted = set(keys)
    datasets = {d for d, _, _ in wanted}
    items = {i for _, i, _ in wanted}
    rows = Response.objects.filter(
        item__dataset__project=project,
        item__dataset__name__in=datasets,
        item__external_id__in=items,
    ).values_list("item__dataset__name", "item__external_id", "model_name", "pk", "item_id")
    return {(d, i, m): (pk, item) for d, i, m, pk, item in rows if (d, i, m) in wanted}


def open_normal_tasks(*, user) -> QuerySet:
    """The campaign's (OuterRef "pk") normal tasks with a free slot that `user` never had,
    routed by domain as the claim routes them (the annotate page's progress, the study's
    "no task left for you")."""
    never_mine = ~Exists(
        Assignment.objects.filter(
            task_id=OuterRef("pk"), annotator=user, kind=AssignmentKind.NORMAL
        )
    )
    mine = AnnotatorExpertise.objects.filter(user=user)
    routed = (
        Q(campaign__route_by_domain=False)
        | ~Exists(mine)
        | Exists(
            ItemDomain.objects.filter(
                item_id=OuterRef("response__item_id"),
                domain_id__in=mine.values("domain_id"),
            )
        )
    )
    return Task.objects.filter(
        campaign_id=OuterRef("pk"), kind=TaskKind.NORMAL, assigned__lt=F("overlap")
    ).filter(never_mine, routed)


def campaign_settings_for_project(*, project: Project) -> list[dict[str, Any]]:
    """Each campaign of the project with the settings a published dataset states (an export's
    dataset card, analytics/exports/): plain values, by name, and the rubric versions its
    skills were pinned to at activation ({skill name: rubric label}). Two queries."""
    campaigns: list[dict[str, Any]] = [
        dict(row)
        for row in Campaign.objects.filter(project=project)
        .order_by("name")
        .values(
            "pk",
            "name",
            "dataset__name",
            "status",
            "mode",
            "skill_mode",
            "selection",
            "overlap",
            "show_reference",
            "gold_rate",
            "repeat_rate",
            "gold_feedback",
            "screening",
            "quota_per_annotator",
            "model_names",
        )
    ]
    pins: dict[int, dict[str, str]] = defaultdict(dict)
    for campaign_id, skill, version, scope in (
        CampaignRubric.objects.filter(campaign__project=project)
        .order_by("campaign_id", "skill__name")
        .values_list("campaign_id", "skill__name", "rubric__version", "rubric__project__slug")
    ):
        pins[campaign_id][skill] = rubric_label(project_slug=scope, version=version)
    for campaign in campaigns:
        campaign["rubrics"] = pins.get(campaign.pop("pk"), {})
    return campaigns
