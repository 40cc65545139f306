"""Public read API of the annotation app, and the reads shared by its features.

Downstream apps (judging, analytics) read annotation data only through these functions.
A read used by one feature only lives in that feature's selectors.py
(annotation/<feature>/selectors.py); one used by several features, by the app-wide
services, or by another app lives here.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, F, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce, Substr

from annotation.models import (
    AdjudicatedScore,
    AnnotatorExpertise,
    Assignment,
    AssignmentKind,
    Campaign,
    CampaignRubric,
    CampaignStatus,
    Dataset,
    Domain,
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


def skills_for_response(*, response: Response, campaign: Campaign | None) -> list[TaskSkill]:
    """What a response is scored on: in a campaign, exactly what its annotators see (the
    pinned rubric versions); outside one, the item's skills with the rubric in force. Judge
    prompts are built from this, so people and judges score against the same wording."""
    return skills_for_responses(responses=[response], campaign=campaign)[response.pk]


def skills_for_responses(
    *, responses: Sequence[Response], campaign: Campaign | None
) -> dict[int, list[TaskSkill]]:
    """skills_for_response for many responses of one dataset at once (response id -> its
    skills), in two or three queries whatever their number: a judge batch reads it once."""
    item_ids = {r.item_id for r in responses}
    rows = (
        ItemSkill.objects.filter(item_id__in=item_ids)
        .order_by("item_id", "rank")
        .values_list("item_id", "skill_id", "skill__name", "checklist")
    )
    by_item: dict[int, list[tuple[int, str, list]]] = {item_id: [] for item_id in item_ids}
    for item_id, skill_id, name, checklist in rows:
        by_item[item_id].append((skill_id, name, checklist))
    per_item: dict[int, list[TaskSkill]] = {}
    if campaign is not None:
        for item_id, skills in by_item.items():
            pairs = [[skill_id, checklist] for skill_id, _, checklist in skills]
            per_item[item_id] = skills_for_item(
                item_id=item_id, campaign=campaign, item_skills=pairs
            )
    elif item_ids:
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


def item_skills_sql(item_ref: str) -> str:
    """PostgreSQL: a scalar subquery giving the item's ranked [[skill_id, checklist], ...]
    as JSON, so a statement that reads the item can bring its skills along (one round trip
    less on every claim and submission). None on SQLite: read them with `skills_for_item`.
    """
    if not is_postgres():
        return "NULL"
    return (
        "(SELECT json_agg(json_build_array(s.skill_id, s.checklist) ORDER BY s.rank) "
        f"FROM {ItemSkill._meta.db_table} s WHERE s.item_id = {item_ref})"
    )


def skills_for_item(*, item_id: int, campaign: Campaign, item_skills=None) -> list[TaskSkill]:
    """What a campaign asks of an item's responses. `campaign` needs only its pk,
    updated_at and skill_mode loaded (the submit path builds such a stub). `item_skills`
    is the value of `item_skills_sql` when the caller's statement read it."""
    if item_skills is None:
        rows = fetch_all(_ITEM_SKILLS, [item_id])
        item_skills = [(skill_id, json_value(checklist)) for skill_id, checklist in rows]
    else:
        item_skills = [(skill_id, checklist) for skill_id, checklist in json_value(item_skills)]
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
#: campaign_activate, which also moves updated_at, and Rubric rows never change, so a hit
#: is always current. Saves a three-table join on every claim and every submission.
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
    campaign name, created_at, updated_at, the rubric's project slug or None when built in)

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
    hidden repeats included, marked), by skill order, then time. One query."""
    rows = (
        HumanScore.objects.filter(response_id=response_id)
        .order_by("skill__order", "skill__name", "created_at", "pk")
        .values_list(
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
        )
    )
    return [HumanScoreRow(*row) for row in rows]


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
    that have a normal task for it, by campaign name. One query."""
    rows = (
        Task.objects.filter(
            campaign__project=project,
            kind=TaskKind.NORMAL,
            response_id__in=list(response_ids),
        )
        .exclude(campaign__status=CampaignStatus.DRAFT)
        .order_by("campaign__name", "campaign_id")
        .values_list("response_id", "campaign_id", "campaign__name")
    )
    found: dict[int, list[tuple[int, str]]] = {}
    for response_id, campaign_id, name in rows:
        found.setdefault(response_id, []).append((campaign_id, name))
    return found


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
