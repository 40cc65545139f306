"""Campaign configuration and lifecycle: create, edit, activate (tasks + pinned rubrics),
pause, resume, gold/attention tasks, annotator expertise, and the responses a "sampled"
campaign draws for people (`campaign_sample_record`)."""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotation.campaigns.selectors import KNOWN_KINDS
from annotation.languages.services import campaign_own_texts_record, language_check
from annotation.models import (
    KNOWN_SCORE_KINDS,
    AnnotatorExpertise,
    Assignment,
    AssignmentStatus,
    Campaign,
    CampaignMode,
    CampaignRubric,
    CampaignSample,
    CampaignSelection,
    CampaignStatus,
    Dataset,
    Domain,
    GoldPreference,
    GoldScore,
    ItemSkill,
    PairAsk,
    PairChoice,
    PairDesign,
    Participant,
    Project,
    ProjectMembership,
    Response,
    Skill,
    SkillMode,
    Task,
    TaskKind,
)
from annotation.pairs import PairDesignError, pair_count_possible, pair_design
from annotation.selectors import (
    asked_skill_ids,
    campaign_item_skill_ids,
    campaign_known_task_check,
    model_names_for_dataset,
    rubrics_current_for_project,
)
from annotation.services.pins import items_pin

#: The choices a pairwise campaign offers when it names none.
DEFAULT_PAIR_CHOICES = [PairChoice.A.value, PairChoice.B.value, PairChoice.TIE.value]


class CampaignStateError(ValidationError):
    """The request is well formed, but the campaign's status refuses it: editing a
    finished campaign, changing the structure of a running one, activating a finished
    one, or a status change its status does not allow (the API's 409)."""


@transaction.atomic
def campaign_create(
    *,
    project: Project,
    dataset: Dataset,
    name: str,
    overlap: int = 3,
    skill_mode: str = SkillMode.ITEM,
    fixed_skills: list[Skill] | None = None,
    model_names: list[str] | None = None,
    show_reference: bool = True,
    quota_per_annotator: int | None = None,
    lease_seconds: int = 900,
    instructions: str = "",
    annotators=(),
    groups=(),
    route_by_domain: bool = False,
    gold_rate: float = 0.0,
    repeat_rate: float = 0.0,
    gold_feedback: bool = False,
    mode: str = CampaignMode.POINTWISE,
    pair_design: str = PairDesign.ALL_PAIRS,
    pair_anchor: str = "",
    pair_budget: int | None = None,
    pair_choices: list[str] | None = None,
    pair_ask: str = PairAsk.BOTH,
    pair_strength: bool = False,
    pair_rationale: bool = False,
    selection: str = CampaignSelection.ALL,
    language: str = "",
    completion_message: str = "",
    created_by=None,
) -> Campaign:
    """Create a campaign in draft. Nothing is assigned until `campaign_activate`.

    A pairwise campaign (`mode="pairwise"`) asks which of two responses to the same item
    is better; its `pair_*` settings are checked by `pair_settings_check`. A "sampled"
    campaign (`selection`) gives tasks only to the responses drawn for people
    (`campaign_sample_record`); it is pointwise."""
    if dataset.project_id != project.pk:
        raise ValidationError("the dataset belongs to another project")
    if skill_mode == SkillMode.FIXED and not fixed_skills:
        raise ValidationError("a fixed-skill campaign needs at least one skill")
    campaign = Campaign(
        project=project,
        dataset=dataset,
        name=name.strip(),
        overlap=overlap,
        skill_mode=skill_mode,
        model_names=sorted(set(model_names or [])),
        show_reference=show_reference,
        quota_per_annotator=quota_per_annotator,
        lease_seconds=lease_seconds,
        instructions=instructions,
        route_by_domain=route_by_domain,
        gold_rate=gold_rate,
        repeat_rate=repeat_rate,
        gold_feedback=gold_feedback,
        mode=mode,
        pair_design=pair_design,
        pair_anchor=pair_anchor.strip(),
        pair_budget=pair_budget,
        pair_choices=list(pair_choices or []),
        pair_ask=pair_ask,
        pair_strength=pair_strength,
        pair_rationale=pair_rationale,
        selection=selection,
        language=language_check(language, blank=True),
        completion_message=completion_message.strip(),
        created_by=created_by,
    )
    pair_settings_check(campaign=campaign)
    selection_check(campaign=campaign)
    campaign.full_clean()
    campaign.save()
    if fixed_skills:
        campaign.fixed_skills.set(fixed_skills)
    campaign.annotators.set(annotators)
    campaign.groups.set(groups)
    return campaign


def pair_choices_of(campaign: Campaign) -> list[str]:
    """The choices a pairwise campaign offers, in order (its own, or a, b, tie)."""
    return list(campaign.pair_choices or DEFAULT_PAIR_CHOICES)


def pair_models_of(campaign: Campaign) -> list[str]:
    """The models a pairwise campaign compares: its chosen ones, else the dataset's."""
    if campaign.model_names:
        return sorted(campaign.model_names)
    return sorted(model_names_for_dataset(dataset_id=campaign.dataset_id))


def pair_settings_check(*, campaign: Campaign) -> None:
    """Raise ValidationError (keyed by field) unless a pairwise campaign's settings make
    sense: at least two models, a known design, an anchor among the compared models of
    the dataset, a budget for the sampled design that the items can meet, choices among
    PairChoice without repeats. A pointwise campaign passes (its pair fields are unused).
    """
    if campaign.mode != CampaignMode.PAIRWISE:
        return
    errors: dict[str, str] = {}
    choices = campaign.pair_choices or []
    if not isinstance(choices, list) or any(c not in PairChoice.values for c in choices):
        errors["pair_choices"] = "choices are among: " + ", ".join(PairChoice.values)
    elif len(set(choices)) != len(choices):
        errors["pair_choices"] = "a choice is listed twice"
    elif choices and len(choices) < 2:
        errors["pair_choices"] = "offer at least two choices"
    elif ("a" in choices) != ("b" in choices):
        errors["pair_choices"] = "offer both A and B better, or neither"
    if campaign.pair_design not in PairDesign.values:
        errors["pair_design"] = "the design is all_pairs, anchor or sampled"
    if campaign.pair_ask not in PairAsk.values:
        errors["pair_ask"] = "ask per skill (skills), overall, or both"
    models = pair_models_of(campaign)
    if len(models) < 2:
        errors["model_names"] = "a pairwise campaign compares at least two of the dataset's models"
    if campaign.pair_design == PairDesign.ANCHOR:
        if not campaign.pair_anchor:
            errors["pair_anchor"] = "the anchor design needs an anchor model"
        elif campaign.pair_anchor not in models:
            errors["pair_anchor"] = (
                f"the anchor {campaign.pair_anchor!r} is not one of the compared models of "
                "the dataset"
            )
    elif campaign.pair_anchor:
        errors["pair_anchor"] = "only the anchor design has an anchor model"
    if campaign.pair_design == PairDesign.SAMPLED:
        if not campaign.pair_budget:
            errors["pair_budget"] = "the sampled design needs a budget (number of pairs)"
        elif len(models) >= 2:
            possible = pair_count_possible(items=_items_with_models(campaign), models=models)
            if campaign.pair_budget > possible:
                errors["pair_budget"] = (
                    f"the budget ({campaign.pair_budget} pairs) is more than the {possible} "
                    "pairs the dataset has"
                )
    elif campaign.pair_budget is not None:
        errors["pair_budget"] = "only the sampled design has a budget"
    if errors:
        raise ValidationError(errors)


def selection_check(*, campaign: Campaign) -> None:
    """Raise ValidationError (keyed by field) unless the campaign's selection fits its mode:
    a "sampled" campaign is pointwise, since an inclusion probability is one response's and
    a pair task is two."""
    if campaign.selection not in CampaignSelection.values:
        raise ValidationError({"selection": "the selection is all or sampled"})
    if campaign.selection == CampaignSelection.SAMPLED and campaign.mode == CampaignMode.PAIRWISE:
        raise ValidationError(
            {
                "selection": "a pairwise campaign scores every planned pair: only a pointwise "
                "campaign can have its responses drawn for people (selection sampled)"
            }
        )


def _items_with_models(campaign: Campaign) -> list[tuple[int, list[str]]]:
    """(item id, the models that answered it) for the campaign's dataset."""
    by_item: dict[int, list[str]] = {}
    rows = Response.objects.filter(item__dataset_id=campaign.dataset_id).values_list(
        "item_id", "model_name"
    )
    for item_id, model_name in rows.order_by().iterator(chunk_size=5000):
        by_item.setdefault(item_id, []).append(model_name)
    return list(by_item.items())


def pair_seed(campaign: Campaign) -> int:
    """The seed of a campaign's pair design and shown orders: derived from its id, so
    activating again (idempotent) plans the same pairs."""
    return 7919 * campaign.pk + 17


#: The longest lease a campaign may give (the shortest, 30 s, is a database constraint).
MAX_LEASE_SECONDS = 24 * 3600

# What a running campaign may still change: its pool, pacing, wording and QC rates. The
# rest decides which tasks exist and which rubrics are pinned, so it is fixed at activation.
CAMPAIGN_STRUCTURE = (
    "dataset",
    "model_names",
    "skill_mode",
    "fixed_skills",
    "overlap",
    "mode",
    "pair_design",
    "pair_anchor",
    "pair_budget",
    "pair_choices",
    "pair_ask",
    "selection",
)
#: What a campaign with recorded draws keeps even as a draft: the draws are of its responses.
CAMPAIGN_SAMPLED_FRAME = ("dataset", "model_names")
CAMPAIGN_SETTINGS = (
    "name",
    "instructions",
    "show_reference",
    "quota_per_annotator",
    "lease_seconds",
    "route_by_domain",
    "gold_rate",
    "repeat_rate",
    "gold_feedback",
    "pair_strength",
    "pair_rationale",
    # what annotators read: a running campaign's may be corrected, each change recorded
    "language",
    "completion_message",
)
CAMPAIGN_POOL = ("annotators", "groups")


@transaction.atomic
def campaign_update(*, campaign: Campaign, **changes: Any) -> Campaign:
    """Change a campaign's settings; keyword names are those of `campaign_create`.

    A draft may change anything. An active or paused campaign may change its pool, quota,
    lease time, instructions and QC rates, but not what decides its tasks and pinned
    rubrics (CAMPAIGN_STRUCTURE); passing those unchanged is allowed. A finished campaign
    cannot be edited. Raises ValidationError.

    A new list of `annotators` keeps the campaign's own study participants who are in its
    pool, listed or not: they come in through its study links and leave by declining
    consent or leaving the project (annotation/study/), not by an edit of the pool.
    """
    unknown = set(changes) - {*CAMPAIGN_STRUCTURE, *CAMPAIGN_SETTINGS, *CAMPAIGN_POOL}
    if unknown:
        raise TypeError(f"campaign_update() got unexpected settings: {', '.join(sorted(unknown))}")
    campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
    if campaign.status == CampaignStatus.FINISHED:
        raise CampaignStateError("a finished campaign cannot be edited")
    if "name" in changes:
        changes["name"] = changes["name"].strip()
    if "model_names" in changes:
        changes["model_names"] = sorted(set(changes["model_names"] or []))
    if "pair_choices" in changes:
        changes["pair_choices"] = list(changes["pair_choices"] or [])
    if "pair_anchor" in changes:
        changes["pair_anchor"] = (changes["pair_anchor"] or "").strip()
    if "language" in changes:
        language_check(changes["language"], blank=True)
    if "completion_message" in changes:
        changes["completion_message"] = (changes["completion_message"] or "").strip()
    own_texts = ("language", "completion_message")
    texts_before = {name: getattr(campaign, name) for name in own_texts}
    fixed = changes.pop("fixed_skills", None)
    fixed_ids = None if fixed is None else {s.pk for s in fixed}
    if CampaignSample.objects.filter(campaign=campaign).exists():
        moved = [
            name
            for name in CAMPAIGN_SAMPLED_FRAME
            if name in changes and getattr(campaign, name) != changes[name]
        ]
        if moved:
            raise CampaignStateError(
                f"responses of this campaign were already drawn for people: its "
                f"{' and '.join(moved)} cannot change"
            )
    if campaign.status != CampaignStatus.DRAFT:
        changed = [
            name
            for name in CAMPAIGN_STRUCTURE
            if name in changes and getattr(campaign, name) != changes[name]
        ]
        if fixed_ids is not None and fixed_ids != set(
            campaign.fixed_skills.values_list("pk", flat=True)
        ):
            changed.append("fixed_skills")
        if changed:
            raise CampaignStateError(
                f"only a draft campaign can change {', '.join(changed)}; this one is "
                f"{campaign.status}"
            )
    pool = {name: changes.pop(name) for name in CAMPAIGN_POOL if name in changes}
    if "annotators" in pool:
        own = Participant.objects.filter(campaign=campaign, user__campaigns=campaign)
        pool["annotators"] = [*pool["annotators"], *own.values_list("user_id", flat=True)]
    for name, value in changes.items():
        setattr(campaign, name, value)
    if campaign.dataset.project_id != campaign.project_id:
        raise ValidationError("the dataset belongs to another project")
    if campaign.skill_mode == SkillMode.FIXED and not (
        fixed_ids if fixed_ids is not None else campaign.fixed_skills.exists()
    ):
        raise ValidationError("a fixed-skill campaign needs at least one skill")
    pair_settings_check(campaign=campaign)
    selection_check(campaign=campaign)
    campaign.full_clean()
    campaign.save()
    campaign_own_texts_record(
        campaign=campaign,
        before=texts_before,
        after={name: getattr(campaign, name) for name in own_texts},
    )
    if fixed is not None:
        campaign.fixed_skills.set(fixed)
    for name, value in pool.items():
        getattr(campaign, name).set(value)
    return campaign


@transaction.atomic
def campaign_activate(*, campaign: Campaign) -> int:
    """Create the campaign's tasks (one per selected response: every response of its models,
    or, selection "sampled", those drawn for people so far), pin the rubric in force for
    each skill and pin each task's item skills (CampaignItemPin: what its tasks ask from now
    on, whatever the item's metadata becomes). Idempotent: tasks and pins already there are
    kept; the items of new tasks are pinned. Returns the number of tasks created.

    A draft is refused (ValidationError, nothing changed) when one of its gold, attention,
    training or qualification tasks has known answers for a skill its item's tasks would
    not ask (the item's metadata changed since the known answers were set)."""
    campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
    if campaign.status == CampaignStatus.FINISHED:
        raise CampaignStateError("a finished campaign cannot be activated again")
    skill_ids = _campaign_skill_ids(campaign)
    rubrics = rubrics_current_for_project(project=campaign.project)
    missing = [sid for sid in skill_ids if sid not in rubrics]
    if missing:
        names = ", ".join(Skill.objects.filter(pk__in=missing).values_list("name", flat=True))
        raise ValidationError(f"no rubric for: {names}")
    pinned = set(
        CampaignRubric.objects.filter(campaign=campaign).values_list("skill_id", flat=True)
    )
    CampaignRubric.objects.bulk_create(
        CampaignRubric(campaign=campaign, skill_id=sid, rubric=rubrics[sid])
        for sid in skill_ids
        if sid not in pinned
    )
    created = _tasks_create(campaign)
    items_pin(campaign=campaign)
    if campaign.status == CampaignStatus.DRAFT:
        refused = [t.reason for t in campaign_known_task_check(campaign=campaign) if not t.ok]
        if refused:
            raise ValidationError(
                "the campaign cannot start: "
                + "; ".join(refused)
                + ". Set their known answers again, or remove them."
            )
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.ACTIVE, updated_at=timezone.now()
    )
    _texts_render_later(campaign.pk)
    return created


def _texts_render_later(campaign_id: int) -> None:
    """After the commit, ask a worker to render the campaign's texts ahead of its first
    annotators (annotation/services/rendered_texts.py). Best effort: a card renders a text
    it finds unrendered itself, so a broker that cannot take the message now is logged
    (robust on_commit), never an error of the activation."""
    from annotation.tasks import campaign_texts_render_task  # the Celery adapters' module

    transaction.on_commit(lambda: campaign_texts_render_task.delay(campaign_id), robust=True)


def _campaign_skill_ids(campaign: Campaign) -> list[int]:
    if campaign.skill_mode == SkillMode.FIXED:
        return list(campaign.fixed_skills.values_list("pk", flat=True))
    return list(
        ItemSkill.objects.filter(item__dataset=campaign.dataset)
        .order_by()  # Meta.ordering would otherwise leak into DISTINCT
        .values_list("skill_id", flat=True)
        .distinct()
    )


def _tasks_create(campaign: Campaign) -> int:
    """One normal task per selected response that has no task yet: every response of the
    dataset's chosen models, or (selection "sampled") those drawn for people."""
    if campaign.mode == CampaignMode.PAIRWISE:
        return _pair_tasks_create(campaign)
    responses = Response.objects.filter(item__dataset=campaign.dataset)
    if campaign.model_names:
        responses = responses.filter(model_name__in=campaign.model_names)
    if campaign.selection == CampaignSelection.SAMPLED:
        drawn = CampaignSample.objects.filter(campaign=campaign, drawn=True)
        responses = responses.filter(pk__in=drawn.values("response_id"))
    # Gold/attention responses are not also normal tasks: seeing one twice would give it away.
    existing = Task.objects.filter(campaign=campaign)
    ids = responses.exclude(pk__in=existing.values("response_id")).order_by("pk")
    created = 0
    batch: list[Task] = []
    for response_id in ids.values_list("pk", flat=True).iterator(chunk_size=5000):
        batch.append(
            Task(
                campaign=campaign,
                response_id=response_id,
                kind=TaskKind.NORMAL,
                overlap=campaign.overlap,
            )
        )
        if len(batch) == 5000:
            created += len(Task.objects.bulk_create(batch))
            batch = []
    if batch:
        created += len(Task.objects.bulk_create(batch))
    return created


def _pair_tasks_create(campaign: Campaign) -> int:
    """One task per planned pair (annotation/pairs.py): A = the model whose name sorts
    first, B the other, `b_left` drawn per pair. Pairs already there (a second activation,
    or a gold pair) are kept and not planned again."""
    models = pair_models_of(campaign)
    try:
        planned = pair_design(
            items=_items_with_models(campaign),
            models=models,
            design=campaign.pair_design,
            anchor=campaign.pair_anchor,
            budget=campaign.pair_budget,
            seed=pair_seed(campaign),
        )
    except PairDesignError as exc:
        raise ValidationError(str(exc)) from exc
    response_ids: dict[tuple[int, str], int] = {
        (item_id, model): pk
        for pk, item_id, model in Response.objects.filter(
            item__dataset_id=campaign.dataset_id, model_name__in=models
        ).values_list("pk", "item_id", "model_name")
    }
    existing = {
        frozenset(pair)
        for pair in Task.objects.filter(campaign=campaign).values_list(
            "response_id", "response_b_id"
        )
    }
    tasks = []
    for pair in planned:
        a = response_ids[(pair.item_id, pair.model_a)]
        b = response_ids[(pair.item_id, pair.model_b)]
        if frozenset((a, b)) in existing:
            continue
        tasks.append(
            Task(
                campaign=campaign,
                response_id=a,
                response_b_id=b,
                b_left=pair.b_left,
                kind=TaskKind.NORMAL,
                overlap=campaign.overlap,
            )
        )
    return len(Task.objects.bulk_create(tasks, batch_size=5000))


class SampleRefused(ValidationError):
    """`campaign_sample_record` refused the batch: nothing was recorded."""


#: Probabilities of a replayed batch are compared to this relative tolerance (they went
#: through JSON or a float column on the way).
_SAME_PROBABILITY = 1e-12


@transaction.atomic
def campaign_sample_record(
    *, campaign: Campaign, batch: int, draws: Sequence[tuple[int, float, bool]]
) -> int:
    """Record batch `batch` of a "sampled" campaign's draws: (response id, inclusion
    probability, drawn for people) per response decided in it. Returns how many were drawn.

    The campaign row is locked, so batches are recorded one at a time, numbered 1, 2, ...
    without gaps. Each response is decided once: a response already decided, one outside
    the campaign's dataset and models, a probability outside (0, 1] or a response twice in
    the batch refuses the whole batch (SampleRefused, nothing recorded). Sending a batch
    already recorded again with the same draws returns the same count and changes nothing
    (a retried request never draws twice); with other draws it is refused.

    The drawn responses of an active or paused campaign get their normal task (K
    annotators) at once, their items pinned; a draft's get theirs at activation
    (`_tasks_create`). A finished campaign records nothing (CampaignStateError)."""
    campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
    if campaign.selection != CampaignSelection.SAMPLED:
        raise SampleRefused(
            "this campaign gives every response a task (selection all): set its selection "
            "to sampled, while a draft, to draw responses for people"
        )
    if campaign.status == CampaignStatus.FINISHED:
        raise CampaignStateError("a finished campaign draws no more responses")
    wanted = _draws_checked(batch, draws)
    recorded = CampaignSample.objects.filter(campaign=campaign)
    last = recorded.order_by("-batch").values_list("batch", flat=True).first() or 0
    if batch <= last:
        return _sample_replayed(campaign, batch, wanted)
    if batch != last + 1:
        raise SampleRefused(f"the next batch of this campaign is {last + 1}, not {batch}")
    decided = sorted(recorded.filter(response_id__in=wanted).values_list("response_id", flat=True))
    if decided:
        raise SampleRefused(
            f"{len(decided)} of these responses were decided in an earlier batch (each is "
            f"decided once): {_ids(decided)}"
        )
    selected = Response.objects.filter(pk__in=wanted, item__dataset_id=campaign.dataset_id)
    if campaign.model_names:
        selected = selected.filter(model_name__in=campaign.model_names)
    outside = sorted(set(wanted) - set(selected.values_list("pk", flat=True)))
    if outside:
        raise SampleRefused(
            f"{len(outside)} responses are not among the campaign's (its dataset's responses "
            f"of its models): {_ids(outside)}"
        )
    CampaignSample.objects.bulk_create(
        [
            CampaignSample(
                campaign=campaign, response_id=pk, batch=batch, probability=p, drawn=drawn
            )
            for pk, (p, drawn) in sorted(wanted.items())
        ],
        batch_size=5000,
    )
    if campaign.status != CampaignStatus.DRAFT:
        _tasks_create(campaign)
        drawn_items = Response.objects.filter(
            pk__in=[pk for pk, (_, drawn) in wanted.items() if drawn]
        ).values_list("item_id", flat=True)
        items_pin(campaign=campaign, item_ids=set(drawn_items))
        Campaign.objects.filter(pk=campaign.pk).update(updated_at=timezone.now())
    return sum(1 for _, drawn in wanted.values() if drawn)


def _draws_checked(
    batch: int, draws: Sequence[tuple[int, float, bool]]
) -> dict[int, tuple[float, bool]]:
    """response id -> (probability, drawn), or SampleRefused with what is wrong."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise SampleRefused("batches are numbered from 1")
    if not draws:
        raise SampleRefused("a batch decides at least one response")
    wanted: dict[int, tuple[float, bool]] = {}
    for response_id, probability, drawn in draws:
        p = float(probability)
        if not (math.isfinite(p) and 0 < p <= 1):
            raise SampleRefused(
                f"response {response_id}: an inclusion probability is in (0, 1], not {p!r}"
            )
        if response_id in wanted:
            raise SampleRefused(f"response {response_id} is twice in the batch")
        wanted[int(response_id)] = (p, bool(drawn))
    return wanted


def _sample_replayed(campaign: Campaign, batch: int, wanted: dict[int, tuple[float, bool]]) -> int:
    """A batch already recorded, sent again: the same count if the draws are the same."""
    recorded = {
        pk: (p, drawn)
        for pk, p, drawn in CampaignSample.objects.filter(
            campaign=campaign, batch=batch
        ).values_list("response_id", "probability", "drawn")
    }
    same = set(recorded) == set(wanted) and all(
        recorded[pk][1] == wanted[pk][1]
        and math.isclose(recorded[pk][0], wanted[pk][0], rel_tol=_SAME_PROBABILITY)
        for pk in wanted
    )
    if not same:
        raise SampleRefused(
            f"batch {batch} of this campaign was already recorded with other draws: a "
            "recorded batch is never changed"
        )
    return sum(1 for _, drawn in recorded.values() if drawn)


def _ids(ids: Sequence[int], shown: int = 10) -> str:
    """Some ids for a message: the first `shown`, then how many more."""
    head = ", ".join(str(pk) for pk in ids[:shown])
    return head + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


def campaign_set_status(*, campaign: Campaign, status: str) -> Campaign:
    """Pause, resume or finish. Pausing stops new claims; open leases may still submit."""
    # keyed by str: `status` is the value a caller sent, looked up as is
    allowed: dict[str, set[CampaignStatus]] = {
        CampaignStatus.PAUSED: {CampaignStatus.ACTIVE},
        CampaignStatus.ACTIVE: {CampaignStatus.PAUSED},
        CampaignStatus.FINISHED: {CampaignStatus.ACTIVE, CampaignStatus.PAUSED},
    }
    if status not in allowed:
        raise ValidationError(f"cannot set a campaign to {status!r} directly")
    changed = Campaign.objects.filter(pk=campaign.pk, status__in=allowed[status]).update(
        status=status, updated_at=timezone.now()
    )
    campaign.refresh_from_db()
    if not changed:
        raise CampaignStateError(f"a {campaign.status} campaign cannot become {status}")
    return campaign


@transaction.atomic
def gold_task_set(
    *,
    campaign: Campaign,
    response: Response,
    scores: dict[int, int | None],
    kind: str = TaskKind.GOLD,
    tolerance: int = 0,
    explanation: str = "",
) -> Task:
    """Make `response` a task with known scores per skill id (None = N/A): gold or an
    attention check, or a training or qualification task of screening
    (annotation/screening/). Replaces earlier known scores of that task."""
    if campaign.mode == CampaignMode.PAIRWISE:
        raise ValidationError("a pairwise campaign's gold tasks are pairs (gold_pair_set)")
    if kind not in KNOWN_SCORE_KINDS:
        raise ValidationError(
            "a task with known scores is gold, attention, training or qualification"
        )
    if response.item.dataset_id != campaign.dataset_id:
        raise ValidationError("the response is not in the campaign's dataset")
    for value in scores.values():
        if value is not None and not 1 <= value <= 5:
            raise ValidationError("known scores are 1-5 or None (N/A)")
    if not scores:
        raise ValidationError("give the known score of at least one skill")
    if campaign.status != CampaignStatus.DRAFT:
        items_pin(campaign=campaign, item_ids=[response.item_id])
    asked = _asked_skill_ids(campaign, response.item_id)
    extra = [pk for pk in scores if pk not in asked]
    if extra:
        raise ValidationError(_not_asked_message(campaign, response.item, asked, extra))
    # A normal task for the same response would show it twice; drop it while unassigned.
    Task.objects.filter(
        campaign=campaign, response=response, kind=TaskKind.NORMAL, assigned=0, submitted=0
    ).delete()
    task, _ = Task.objects.get_or_create(
        campaign=campaign, response=response, kind=kind, defaults={"overlap": 0}
    )
    GoldScore.objects.filter(task=task).delete()
    GoldScore.objects.bulk_create(
        GoldScore(
            task=task,
            skill_id=skill_id,
            score=value,
            is_na=value is None,
            tolerance=tolerance,
            explanation=explanation,
        )
        for skill_id, value in scores.items()
    )
    return task


#: The kinds a pair task with known choices may have. Screening (training and qualification,
#: annotation/screening/) judges scores of one response, so a pair is gold or an attention check.
PAIR_KNOWN_KINDS = KNOWN_KINDS
#: A known choice in the other order of the pair: A and B trade places.
_SWAPPED = {PairChoice.A.value: PairChoice.B.value, PairChoice.B.value: PairChoice.A.value}


@transaction.atomic
def gold_pair_set(
    *,
    campaign: Campaign,
    response_a: Response,
    response_b: Response,
    choices: dict[int | None, str],
    kind: str = TaskKind.GOLD,
    b_left: bool | None = None,
    explanation: str = "",
) -> Task:
    """Make a pair of responses to one item a pairwise campaign's gold or attention task
    with known choices per skill id (None: overall), in the pair's terms (A = `response_a`).

    The choices must be questions a task of this pair asks (the item's skills or the fixed
    set, with `pair_ask`) and answers the campaign offers. The pair is stored in its
    canonical order like every pair task (A: the model whose name sorts first), the choices
    and `b_left` turned with it; `b_left` None draws the shown side at random. A normal task
    of the same pair is dropped while unassigned (seeing it twice would give it away).
    Setting the pair again replaces its known choices and explanation; its shown order may
    change only while no one was given it. Raises ValidationError, and changes nothing."""
    if campaign.mode != CampaignMode.PAIRWISE:
        raise ValidationError("gold pairs belong to a pairwise campaign")
    if kind in (TaskKind.TRAINING, TaskKind.QUALIFICATION):
        raise ValidationError(
            f"a pair cannot be a {kind} task: screening compares the scores of single "
            "responses, so a pair is a gold pair or an attention check"
        )
    if kind not in PAIR_KNOWN_KINDS:
        raise ValidationError("a task with known choices is gold or an attention check")
    if response_a.pk == response_b.pk or response_a.item_id != response_b.item_id:
        raise ValidationError("a pair is two different responses to the same item")
    if response_a.item.dataset_id != campaign.dataset_id:
        raise ValidationError("the responses are not in the campaign's dataset")
    if not choices:
        raise ValidationError("a gold pair needs at least one known choice")
    offered = pair_choices_of(campaign)
    for choice in choices.values():
        if choice not in PairChoice.values:
            raise ValidationError("known choices are among: " + ", ".join(PairChoice.values))
        if choice not in offered:
            raise ValidationError(
                f"the campaign does not offer {choice!r}; its choices are: {', '.join(offered)}"
            )
    if campaign.status != CampaignStatus.DRAFT:
        items_pin(campaign=campaign, item_ids=[response_a.item_id])
    _pair_questions_check(campaign, response_a.item_id, list(choices))
    if response_b.model_name < response_a.model_name:
        response_a, response_b = response_b, response_a
        choices = {question: _SWAPPED.get(c, c) for question, c in choices.items()}
        b_left = None if b_left is None else not b_left
    task = _known_pair_task(campaign, response_a, response_b, kind, b_left)
    GoldPreference.objects.filter(task=task).delete()
    GoldPreference.objects.bulk_create(
        GoldPreference(task=task, skill_id=skill_id, choice=choice, explanation=explanation)
        for skill_id, choice in choices.items()
    )
    return task


def _asked_skill_ids(campaign: Campaign, item_id: int) -> list[int]:
    """The skills a task of `campaign` on item `item_id` asks, as the scoring card asks them
    (annotation.selectors.skills_for_item): the fixed set or the item skills the campaign
    pinned, limited to the skills with a pinned rubric; while a draft, those it will pin
    (the item's own skills)."""
    item_skills = campaign_item_skill_ids(campaign=campaign, item_ids=[item_id])[item_id]
    return asked_skill_ids(
        campaign=campaign,
        item_skill_ids=item_skills,
        rubric_pinned=set(
            CampaignRubric.objects.filter(campaign=campaign).values_list("skill_id", flat=True)
        ),
        fixed=list(campaign.fixed_skills.values_list("pk", flat=True))
        if campaign.skill_mode == SkillMode.FIXED
        else [],
    )


def _not_asked_message(campaign: Campaign, item, asked: list[int], extra: list[int]) -> str:
    """Why known scores were refused: the skills a task on the item asks, and which of the
    given ones it does not."""
    where = (
        "the campaign's fixed skills"
        if campaign.skill_mode == SkillMode.FIXED
        else f"item {item.external_id}'s skills"
        + (
            " as pinned when the campaign started"
            if campaign.status != CampaignStatus.DRAFT
            else ""
        )
    )
    asks = _skill_names(asked) if asked else "no skill"
    return (
        f"this item is not scored on: {_skill_names(extra)} (its tasks ask {asks}: {where}); "
        "known scores are compared only on skills the task asks"
    )


def _skill_names(skill_ids: list[int]) -> str:
    """The skills' names, joined, for a message."""
    names = dict(Skill.objects.filter(pk__in=skill_ids).values_list("pk", "name"))
    return ", ".join(names.get(pk, f"skill {pk}") for pk in skill_ids)


def _pair_questions_check(campaign: Campaign, item_id: int, questions: list[int | None]) -> None:
    """Raise ValidationError unless a pair task on `item_id` asks every question (skill id,
    None: overall), as annotation.selectors.pair_questions asks them."""
    skill_ids = [] if campaign.pair_ask == PairAsk.OVERALL else _asked_skill_ids(campaign, item_id)
    overall = campaign.pair_ask in (PairAsk.OVERALL, PairAsk.BOTH) or not skill_ids
    if None in questions and not overall:
        raise ValidationError("the campaign asks per skill only: there is no overall question")
    extra = [pk for pk in questions if pk is not None and pk not in skill_ids]
    if extra:
        raise ValidationError(f"a task of this pair does not ask: {_skill_names(extra)}")


def _known_pair_task(
    campaign: Campaign, response_a: Response, response_b: Response, kind: str, b_left
) -> Task:
    """The known-answer task of the pair (A, B in canonical order), created or locked."""
    pair = Q(response=response_a, response_b=response_b) | Q(
        response=response_b, response_b=response_a
    )
    clash = (
        Task.objects.filter(pair, campaign=campaign, kind__in=KNOWN_SCORE_KINDS)
        .exclude(kind=kind)
        .first()
    )
    if clash is not None:
        what = {TaskKind.GOLD: "a gold pair", TaskKind.ATTENTION: "an attention check"}.get(
            TaskKind(clash.kind), f"a {clash.kind} task"
        )
        raise ValidationError(
            f"this pair is already {what} of the campaign (task {clash.pk}); remove that one first"
        )
    Task.objects.filter(
        pair, campaign=campaign, kind=TaskKind.NORMAL, assigned=0, submitted=0
    ).delete()
    task = (
        Task.objects.select_for_update()
        .filter(campaign=campaign, response=response_a, response_b=response_b, kind=kind)
        .first()
    )
    if task is None:
        shown_left = secrets.randbelow(2) == 1 if b_left is None else b_left
        return Task.objects.create(
            campaign=campaign,
            response=response_a,
            response_b=response_b,
            kind=kind,
            overlap=0,
            b_left=shown_left,
        )
    if b_left is not None and b_left != task.b_left:
        if Assignment.objects.filter(task=task).exists():
            raise ValidationError(
                f"task {task.pk} was already given to annotators: its shown order is kept"
            )
        task.b_left = b_left
        task.save(update_fields=["b_left"])
    return task


class GoldTaskKeptError(ValidationError):
    """The gold task exists, but was answered or is being answered: it is kept (the API's
    409)."""


@transaction.atomic
def gold_task_remove(*, campaign: Campaign, task_id: int) -> None:
    """Remove a gold or attention task (a response, or a pair) that no one has answered.
    Once answered, its answers count in the annotators' gold accuracy, so it is kept; while
    someone holds a lease on it, it is kept too. The task's assignments are locked first, so
    a submission racing the removal either lands before it (and the task is kept) or finds
    its task gone. Activating the campaign again gives the response or pair its normal
    task back. Raises GoldTaskKeptError when it is kept, ValidationError when the campaign
    has no such task."""
    task = (
        Task.objects.select_for_update()
        .filter(pk=task_id, campaign=campaign, kind__in=KNOWN_KINDS)
        .first()
    )
    if task is None:
        raise ValidationError("no such gold or attention task in this campaign")
    statuses = list(
        Assignment.objects.select_for_update()
        .filter(task=task)
        .order_by("pk")
        .values_list("status", flat=True)
    )
    answered = statuses.count(AssignmentStatus.SUBMITTED)
    if answered:
        raise GoldTaskKeptError(
            f"task {task.pk} was already answered by {answered} annotator"
            f"{'s' if answered != 1 else ''}; it is kept with their answers"
        )
    if AssignmentStatus.ACTIVE in statuses:
        raise GoldTaskKeptError(
            f"an annotator is working on task {task.pk} now; remove it once the lease ends"
        )
    task.delete()


@transaction.atomic
def annotator_expertise_set(*, project: Project, user, domains) -> list[Domain]:
    """Set the domains `user` is qualified for, among the domains `project` uses (built-in
    plus its own); expertise in other projects' domains is kept. Campaigns that route by
    domain give an annotator with declared domains only items of those domains.
    Raises ValidationError when the user is not a member or a domain is out of scope."""
    if not ProjectMembership.objects.filter(project=project, user=user).exists():
        raise ValidationError("the user is not a member of this project")
    scope = Domain.objects.filter(Q(project__isnull=True) | Q(project=project))
    wanted = {d.pk for d in domains}
    if wanted - set(scope.filter(pk__in=wanted).values_list("pk", flat=True)):
        raise ValidationError("a domain is not used by this project")
    AnnotatorExpertise.objects.filter(user=user, domain__in=scope).exclude(
        domain_id__in=wanted
    ).delete()
    AnnotatorExpertise.objects.bulk_create(
        [AnnotatorExpertise(user=user, domain_id=pk) for pk in sorted(wanted)],
        ignore_conflicts=True,  # already declared (or declared concurrently): keep it
    )
    return list(scope.filter(pk__in=wanted).order_by("order", "name"))
