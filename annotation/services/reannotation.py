"""Send responses back for re-annotation: more annotators for the responses people (or
people and a judge) disagree on.

A request names a campaign, the responses and `extra`, the number of annotations wanted
beyond those submitted now. For each response's normal task it raises the overlap to
`submitted + extra` (never lowers it, never above MAX_OVERLAP), so the claim serves the task
to annotators of the pool who have not had it. Scores already given are never touched.

**Idempotency.** The request states a target, not an increment: "at least `extra` more
annotations than submitted now". Open slots and live leases already count toward it. So the
same request sent twice (a double click, a retried API call) raises nothing the second time
and says so ("already_open"); a request made after the new annotations came in asks for
more, as it should. Every request, including one that changed nothing, leaves a
ReannotationRequest row with its outcome per response; a refused request (ValidationError)
changes nothing and leaves no row.

**Slots nobody can fill are not created.** A task is raised only as far as there are pool
annotators left who could still be served it: never assigned it (in any state, as the claim
requires), not at their quota, and of a matching domain when the campaign routes by domain.
Responses with none left are reported as "no_annotator_left", not raised.

**The campaign's K.** The claim only scans tasks with `assigned < campaign.overlap` (an index
bound, annotation/ASSIGNMENT.md), so a task raised above the campaign's K would never be
served. When a task goes above it, the campaign's overlap is raised to the largest task
overlap (its CHECK allows 1-50). Progress is counted from the tasks' own overlaps, so only
the K shown on the campaign page and tasks created by a later activation see the new value.

**Campaign status.** A finished campaign has to become active again to serve the tasks; the
transition goes through `campaign_set_status`, and while that refuses finished -> active the
responses it would have raised are reported as "campaign_finished" and nothing is raised. A
paused campaign stays paused (a pause is a deliberate stop); the tasks are raised and served
once it is resumed.

**Why, and what would work.** Besides the outcome per response, a result carries `reasons`:
one per kind of answer that did not (or not yet) bring annotations, naming the responses, a
sentence that says why, and the next steps that would work (send back with a larger extra,
send back in the campaign that has the response, add annotators to the pool, resume the
campaign, or create a new campaign over the dataset). `reasons_for` computes them from the
outcomes, so the page and the API say the same thing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, replace

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation.access import campaign_pool_list
from annotation.campaigns.services import campaign_set_status
from annotation.models import (
    AnnotatorExpertise,
    Assignment,
    AssignmentKind,
    Campaign,
    CampaignStatus,
    ItemDomain,
    ReannotationRequest,
    Response,
    Screening,
    ScreeningPhase,
    Task,
    TaskKind,
    accepted_assignment_q,
)

#: The most annotators one response can have (the campaign's CHECK: overlap 1-50).
MAX_OVERLAP = 50
#: Extra annotations one request may ask for, per response.
MIN_EXTRA, MAX_EXTRA = 1, 5
#: Responses one request may name.
MAX_RESPONSES = 1000


class Outcome:
    """What a request did to one response (stored in ReannotationRequest.outcomes)."""

    REOPENED = "reopened"  # raised to the full target
    REOPENED_PARTLY = "reopened_partly"  # raised, but fewer annotators are left than asked
    ALREADY_OPEN = "already_open"  # open slots and live leases already reach the target
    NO_ANNOTATOR_LEFT = "no_annotator_left"  # everyone in the pool has had it (or can't)
    AT_CAP = "at_cap"  # the task is at MAX_OVERLAP already
    NOT_IN_CAMPAIGN = "not_in_campaign"  # no normal task of the campaign scores it
    CAMPAIGN_FINISHED = "campaign_finished"  # would be raised, but the campaign is finished

    RAISED = (REOPENED, REOPENED_PARTLY)


@dataclass(frozen=True)
class ResponseOutcome:
    response: int
    outcome: str
    task: int | None = None
    overlap_before: int | None = None
    overlap_after: int | None = None
    submitted: int | None = None
    eligible: int | None = None  # pool annotators who could still be served the task


class Step:
    """What a person can do next (NextStep.action)."""

    SEND_BACK_WITH_MORE = "send_back_with_more"  # the same responses, a larger extra
    SEND_BACK_IN_CAMPAIGN = "send_back_in_campaign"  # the campaign that has them as tasks
    WAIT = "wait"  # their annotations are on their way; follow the campaign's progress
    ADD_ANNOTATORS = "add_annotators"  # to the campaign's pool (its settings)
    RESUME_CAMPAIGN = "resume_campaign"
    CREATE_CAMPAIGN = "create_campaign"  # a new (review) campaign over the dataset


@dataclass(frozen=True)
class NextStep:
    action: str  # a Step
    text: str
    responses: tuple[int, ...]
    campaign: int | None = None  # the campaign to act on (SEND_BACK_*, WAIT, ADD_*, RESUME_*)
    dataset: int | None = None  # CREATE_CAMPAIGN: the responses' dataset
    extra: int | None = None  # SEND_BACK_*: the extra to send them back with


class Why:
    """The reasons a result gives (Reason.code): the outcomes that brought no annotation
    (or not all), and a raise that waits for a paused campaign."""

    ALREADY_OPEN = Outcome.ALREADY_OPEN
    NO_ANNOTATOR_LEFT = Outcome.NO_ANNOTATOR_LEFT
    REOPENED_PARTLY = Outcome.REOPENED_PARTLY
    AT_CAP = Outcome.AT_CAP
    NOT_IN_CAMPAIGN = Outcome.NOT_IN_CAMPAIGN
    QUALITY_TASK = "quality_task"  # a gold or attention task of the campaign
    CAMPAIGN_FINISHED = Outcome.CAMPAIGN_FINISHED
    CAMPAIGN_PAUSED = "campaign_paused"


@dataclass(frozen=True)
class Reason:
    code: str  # a Why
    responses: tuple[int, ...]
    text: str
    next_steps: tuple[NextStep, ...] = ()


@dataclass(frozen=True)
class ReannotationResult:
    request: ReannotationRequest
    outcomes: list[ResponseOutcome]
    reasons: list[Reason] = field(default_factory=list)

    @property
    def reopened(self) -> list[ResponseOutcome]:
        return [o for o in self.outcomes if o.outcome in Outcome.RAISED]

    @property
    def not_reopened(self) -> list[ResponseOutcome]:
        return [o for o in self.outcomes if o.outcome not in Outcome.RAISED]

    @property
    def campaign_status(self) -> str:
        return self.request.campaign_status_after


@transaction.atomic(durable=True)
def responses_reannotate(
    *, campaign: Campaign, response_ids: list[int], extra: int, requested_by
) -> ReannotationResult:
    """Ask for `extra` more annotations (beyond those submitted now) of each response in
    `campaign`, and record the request. See the module docstring for the rules.

    Locks, in this order: the campaign row, then the responses' tasks by pk (both FOR NO
    KEY UPDATE, which lets concurrent claims and submissions insert their assignments and
    scores; a claim skips a locked task, a submission waits for this short transaction).

    Raises ValidationError (a dict by field: "extra", "response_ids", "campaign") and
    changes nothing when the request is not valid or the campaign is a draft. A finished
    campaign that cannot be made active again is not an error: its responses are reported
    as "campaign_finished", with the result's reasons saying what would work.
    """
    wanted_ids = _validated(response_ids, extra)
    campaign = Campaign.objects.select_for_update(no_key=True).get(pk=campaign.pk)
    if campaign.status == CampaignStatus.DRAFT:
        raise ValidationError(
            {"campaign": [f"{campaign.name} is a draft: it has no tasks to reopen yet"]}
        )
    status_before, overlap_before = campaign.status, campaign.overlap
    tasks = {
        task.response_id: task
        for task in Task.objects.select_for_update(no_key=True)
        .filter(campaign=campaign, kind=TaskKind.NORMAL, response_id__in=wanted_ids)
        .order_by("pk")
    }
    eligible = _eligible_counts(campaign, list(tasks.values()))
    # people who could take a slot beyond the open ones (the open ones are theirs first)
    room = {r: max(0, eligible[t.pk] - (t.overlap - t.assigned)) for r, t in tasks.items()}
    outcomes: list[ResponseOutcome] = []
    for response_id in wanted_ids:
        task = tasks.get(response_id)
        if task is None:
            outcomes.append(ResponseOutcome(response_id, Outcome.NOT_IN_CAMPAIGN))
            continue
        outcome, overlap = _plan(task, extra, eligible[task.pk])
        outcomes.append(
            ResponseOutcome(
                response_id,
                outcome,
                task=task.pk,
                overlap_before=task.overlap,
                overlap_after=overlap,
                submitted=task.submitted,
                eligible=eligible[task.pk],
            )
        )
    if campaign.status == CampaignStatus.FINISHED and _raised(outcomes):
        reactivated = _reactivate(campaign)
        if reactivated is None:  # nothing is raised: the tasks could never be served
            outcomes = [
                replace(o, outcome=Outcome.CAMPAIGN_FINISHED, overlap_after=o.overlap_before)
                if o.outcome in Outcome.RAISED
                else o
                for o in outcomes
            ]
        else:
            campaign = reactivated
    raised = _raised(outcomes)
    for o in raised:
        Task.objects.filter(pk=tasks[o.response].pk).update(overlap=o.overlap_after)
    if raised:
        highest = max(o.overlap_after or 0 for o in raised)
        if highest > campaign.overlap:
            # the claim's index bound is the campaign's K: without this, never served
            Campaign.objects.filter(pk=campaign.pk).update(
                overlap=highest, updated_at=timezone.now()
            )
            campaign.overlap = highest
    request = ReannotationRequest(
        campaign=campaign,
        requested_by=requested_by,
        extra=extra,
        response_ids=wanted_ids,
        outcomes=[asdict(o) for o in outcomes],
        reopened=len(raised),
        campaign_status_before=status_before,
        campaign_status_after=campaign.status,
        campaign_overlap_before=overlap_before,
        campaign_overlap_after=campaign.overlap,
    )
    request.full_clean()
    request.save()
    reasons = reasons_for(campaign=campaign, outcomes=outcomes, extra=extra, room=room)
    return ReannotationResult(request=request, outcomes=outcomes, reasons=reasons)


def _raised(outcomes: list[ResponseOutcome]) -> list[ResponseOutcome]:
    return [o for o in outcomes if o.outcome in Outcome.RAISED]


def _responses(ids: list[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:10]) + (
        f" and {len(ids) - 10} more" if len(ids) > 10 else ""
    )
    return f"response{'s' if len(ids) != 1 else ''} {shown}"


def reasons_for(
    *,
    campaign: Campaign,
    outcomes: list[ResponseOutcome],
    extra: int,
    room: dict[int, int] | None = None,
) -> list[Reason]:
    """Why the responses of a request that got no new annotation slot (or fewer than asked,
    or slots a paused campaign does not serve yet) are as they are, and what would work,
    in the order of the outcomes' kinds. `room`: response id -> pool annotators beyond
    its open slots (a larger extra helps only where there are some; unknown counts as
    none). At most two queries (responses not in the campaign only)."""
    by: dict[str, list[ResponseOutcome]] = {}
    for o in outcomes:
        by.setdefault(o.outcome, []).append(o)
    name, pk = campaign.name, campaign.pk
    reasons: list[Reason] = []
    if by.get(Outcome.ALREADY_OPEN):
        reasons.append(_already_open(campaign, by[Outcome.ALREADY_OPEN], extra, room or {}))
    short = by.get(Outcome.NO_ANNOTATOR_LEFT, []) + by.get(Outcome.REOPENED_PARTLY, [])
    for code, group in (
        (Why.NO_ANNOTATOR_LEFT, by.get(Outcome.NO_ANNOTATOR_LEFT, [])),
        (Why.REOPENED_PARTLY, by.get(Outcome.REOPENED_PARTLY, [])),
    ):
        if not group:
            continue
        ids = tuple(o.response for o in group)
        what = "got no new slot" if code == Why.NO_ANNOTATOR_LEFT else "got fewer slots than asked"
        reasons.append(
            Reason(
                code,
                ids,
                f"{_responses(list(ids)).capitalize()} {what}: everyone in {name}'s pool who "
                "could still be given them has had them (the claim never serves a response "
                "twice to one person; quotas and domain routing count too).",
                (
                    NextStep(
                        Step.ADD_ANNOTATORS,
                        f"Add annotators to {name}'s pool, then send "
                        f"{'them' if len(ids) != 1 else 'it'} back again.",
                        tuple(o.response for o in short),
                        campaign=pk,
                        extra=extra,
                    ),
                ),
            )
        )
    if by.get(Outcome.AT_CAP):
        ids = tuple(o.response for o in by[Outcome.AT_CAP])
        reasons.append(
            Reason(
                Why.AT_CAP,
                ids,
                f"{_responses(list(ids)).capitalize()} already "
                f"{'have' if len(ids) != 1 else 'has'} {MAX_OVERLAP} annotators in {name}, the "
                "most a campaign allows.",
                (_create_step(ids, campaign.dataset_id, "for more annotators"),),
            )
        )
    if by.get(Outcome.NOT_IN_CAMPAIGN):
        reasons.extend(
            _not_in_campaign(campaign, [o.response for o in by[Outcome.NOT_IN_CAMPAIGN]], extra)
        )
    if by.get(Outcome.CAMPAIGN_FINISHED):
        ids = tuple(o.response for o in by[Outcome.CAMPAIGN_FINISHED])
        reasons.append(
            Reason(
                Why.CAMPAIGN_FINISHED,
                ids,
                f"{name} is finished, and a finished campaign cannot be made active again: "
                f"nothing was reopened for {_responses(list(ids))}.",
                (_create_step(ids, campaign.dataset_id, "to annotate them again"),),
            )
        )
    raised = _raised(outcomes)
    if raised and campaign.status == CampaignStatus.PAUSED:
        ids = tuple(o.response for o in raised)
        reasons.append(
            Reason(
                Why.CAMPAIGN_PAUSED,
                ids,
                f"{name} is paused: the reopened tasks are served once it is resumed.",
                (NextStep(Step.RESUME_CAMPAIGN, f"Resume {name}.", ids, campaign=pk),),
            )
        )
    return reasons


def _already_open(
    campaign: Campaign, group: list[ResponseOutcome], extra: int, room: dict[int, int]
) -> Reason:
    """The target (submitted + extra) is already met by open slots and live leases. The
    human scores a person saw elsewhere (imported, or of another campaign) are not the
    campaign's submitted ones: a response with 0 of 3 submitted has 3 on their way."""
    name = campaign.name
    ids = tuple(o.response for o in group)
    counts = "; ".join(
        f"response {o.response}: {(o.overlap_before or 0) - (o.submitted or 0)} on the way, "
        f"{o.submitted} of {o.overlap_before} submitted"
        for o in group[:10]
    )
    text = (
        f"{_responses(list(ids)).capitalize()} already {'have' if len(ids) != 1 else 'has'} "
        f"the {extra} more annotation{'s' if extra != 1 else ''} asked for on the way in "
        f"{name} ({counts}). A send-back asks for more than {name}'s own submitted "
        "annotations: scores imported or given in another campaign do not count toward them."
    )
    # the least extra above what is on its way: overlap - submitted + 1
    need = {o.response: (o.overlap_before or 0) - (o.submitted or 0) + 1 for o in group}
    reachable = [r for r in ids if need[r] <= MAX_EXTRA]
    servable = tuple(r for r in reachable if room.get(r, 0) > 0)
    unserved = tuple(r for r in reachable if room.get(r, 0) <= 0)
    steps = []
    if servable:
        more = max(need[r] for r in servable)
        steps.append(
            NextStep(
                Step.SEND_BACK_WITH_MORE,
                f"Send {'them' if len(servable) != 1 else 'it'} back with {more} extra "
                f"annotations, more than {'are' if more - 1 != 1 else 'is'} already on the way.",
                servable,
                campaign=campaign.pk,
                extra=more,
            )
        )
    if unserved:
        # a larger extra alone would answer "no annotator left": the open slots already
        # wait for everyone in the pool who has not had them
        more = max(need[r] for r in unserved)
        steps.append(
            NextStep(
                Step.ADD_ANNOTATORS,
                f"To ask for more than are on the way, add annotators to {name}'s pool (the "
                f"open slots already wait for everyone in it), then send "
                f"{'them' if len(unserved) != 1 else 'it'} back with {more} extra annotations.",
                unserved,
                campaign=campaign.pk,
                extra=more,
            )
        )
    steps.append(
        NextStep(
            Step.WAIT,
            f"Or wait for the annotations on their way ({name}'s progress), then send back "
            "what people still disagree on.",
            ids,
            campaign=campaign.pk,
        )
    )
    return Reason(Why.ALREADY_OPEN, ids, text, tuple(steps))


def _not_in_campaign(campaign: Campaign, ids: list[int], extra: int) -> list[Reason]:
    """Responses the campaign has no normal task for: a gold or attention task of it,
    normal tasks of other started campaigns of the project, or in no campaign at all."""
    name = campaign.name
    quality: list[int] = []
    elsewhere: dict[tuple[int, str], list[int]] = {}
    for response_id, campaign_id, campaign_name, kind in (
        Task.objects.filter(response_id__in=ids, campaign__project_id=campaign.project_id)
        .exclude(campaign__status=CampaignStatus.DRAFT)
        .order_by("campaign__name", "campaign_id", "response_id")
        .values_list("response_id", "campaign_id", "campaign__name", "kind")
    ):
        if campaign_id == campaign.pk:
            quality.append(response_id)
        elif kind == TaskKind.NORMAL:
            elsewhere.setdefault((campaign_id, campaign_name), []).append(response_id)
    reasons: list[Reason] = []
    quality = sorted(set(quality))
    if quality:
        reasons.append(
            Reason(
                Why.QUALITY_TASK,
                tuple(quality),
                f"{_responses(quality).capitalize()} {'are' if len(quality) != 1 else 'is'} "
                f"a gold or attention check of {name} (known scores, for quality control): "
                "checks are never reopened.",
                (_create_step(tuple(quality), campaign.dataset_id, "to annotate them as data"),),
            )
        )
    placed = set(quality) | {r for rs in elsewhere.values() for r in rs}
    if elsewhere:
        others = sorted({r for rs in elsewhere.values() for r in rs} - set(quality))
        reasons.append(
            Reason(
                Why.NOT_IN_CAMPAIGN,
                tuple(others),
                f"{_responses(others).capitalize()} {'are' if len(others) != 1 else 'is'} "
                f"not a task of {name} but of another campaign.",
                tuple(
                    NextStep(
                        Step.SEND_BACK_IN_CAMPAIGN,
                        f"Send {_responses(rs)} back in {other_name}.",
                        tuple(rs),
                        campaign=other_pk,
                        extra=extra,
                    )
                    for (other_pk, other_name), rs in elsewhere.items()
                ),
            )
        )
    nowhere = [r for r in ids if r not in placed]
    if nowhere:
        datasets = dict(
            Response.objects.filter(
                pk__in=nowhere, item__dataset__project_id=campaign.project_id
            ).values_list("pk", "item__dataset_id")
        )
        by_dataset: dict[int, list[int]] = {}
        for r in nowhere:
            if r in datasets:
                by_dataset.setdefault(datasets[r], []).append(r)
        reasons.append(
            Reason(
                Why.NOT_IN_CAMPAIGN,
                tuple(nowhere),
                f"{_responses(nowhere).capitalize()} {'are' if len(nowhere) != 1 else 'is'} "
                "a task of no started campaign of the project (their human scores, if any, "
                "were imported), so there is no task to reopen.",
                tuple(
                    _create_step(tuple(rs), dataset_id, "to have them annotated")
                    for dataset_id, rs in sorted(by_dataset.items())
                ),
            )
        )
    return reasons


def _create_step(ids: tuple[int, ...], dataset_id: int, why: str) -> NextStep:
    return NextStep(
        Step.CREATE_CAMPAIGN,
        f"Create a new (review) campaign over the dataset {why}.",
        ids,
        dataset=dataset_id,
    )


def _validated(response_ids, extra) -> list[int]:
    errors: dict[str, list[str]] = {}
    if (
        isinstance(extra, bool)
        or not isinstance(extra, int)
        or not (MIN_EXTRA <= extra <= MAX_EXTRA)
    ):
        errors["extra"] = [f"a whole number from {MIN_EXTRA} to {MAX_EXTRA}"]
    given = list(response_ids or [])
    ids: list[int] = []
    if any(isinstance(i, bool) or not isinstance(i, int) or i < 1 for i in given):
        errors["response_ids"] = ["response ids are positive whole numbers"]
    else:
        ids = sorted(set(given))
        if not ids:
            errors["response_ids"] = ["choose at least one response"]
        elif len(ids) > MAX_RESPONSES:
            errors["response_ids"] = [f"at most {MAX_RESPONSES} responses per request"]
    if errors:
        raise ValidationError(errors)
    return ids


def _plan(task: Task, extra: int, eligible: int) -> tuple[str, int]:
    """(outcome, new overlap) of one locked task."""
    wanted = task.submitted + extra
    target = min(MAX_OVERLAP, wanted)
    if target <= task.overlap:
        return (Outcome.AT_CAP if wanted > task.overlap else Outcome.ALREADY_OPEN), task.overlap
    # Open slots are filled from the same people: only those beyond them can take new ones.
    room = max(0, eligible - (task.overlap - task.assigned))
    overlap = task.overlap + min(target - task.overlap, room)
    if overlap == task.overlap:
        return Outcome.NO_ANNOTATOR_LEFT, overlap
    return (Outcome.REOPENED if overlap == target else Outcome.REOPENED_PARTLY), overlap


def _eligible_counts(campaign: Campaign, tasks: list[Task]) -> Counter:
    """task id -> pool annotators the claim could still serve it to: never assigned it (a
    normal assignment in any state), under their quota, and of a matching domain when the
    campaign routes by domain. A fixed number of queries."""
    counts: Counter = Counter()
    if not tasks:
        return counts
    pool = {pk for pk, _ in campaign_pool_list(campaign=campaign)}
    if campaign.quota_per_annotator is not None and pool:
        done = (
            get_user_model()
            .objects.filter(pk__in=pool)
            .annotate(
                n=Count(
                    "assignments",
                    filter=Q(assignments__campaign=campaign)
                    & accepted_assignment_q(path="assignments__"),
                )
            )
            .filter(n__gte=campaign.quota_per_annotator)
            .values_list("pk", flat=True)
        )
        pool -= set(done)
    if campaign.screening and pool:
        # those the qualification test screened out are never served a real task again
        pool -= set(
            Screening.objects.filter(
                campaign=campaign, annotator_id__in=pool, phase=ScreeningPhase.FAILED
            ).values_list("annotator_id", flat=True)
        )
    had: dict[int, set[int]] = {task.pk: set() for task in tasks}
    for task_id, annotator_id in Assignment.objects.filter(
        task_id__in=list(had), kind=AssignmentKind.NORMAL
    ).values_list("task_id", "annotator_id"):
        had[task_id].add(annotator_id)
    expertise: dict[int, set[int]] = {}
    item_domains: dict[int, set[int]] = {}
    if campaign.route_by_domain and pool:
        for user_id, domain_id in AnnotatorExpertise.objects.filter(user_id__in=pool).values_list(
            "user_id", "domain_id"
        ):
            expertise.setdefault(user_id, set()).add(domain_id)
        for item_id, domain_id in ItemDomain.objects.filter(
            item__responses__tasks__in=list(had)
        ).values_list("item_id", "domain_id"):
            item_domains.setdefault(item_id, set()).add(domain_id)
        items = dict(Task.objects.filter(pk__in=list(had)).values_list("pk", "response__item_id"))
    for task in tasks:
        people = pool - had[task.pk]
        if expertise:
            domains = item_domains.get(items[task.pk], set())
            people = {p for p in people if p not in expertise or expertise[p] & domains}
        counts[task.pk] = len(people)
    return counts


def _reactivate(campaign: Campaign) -> Campaign | None:
    """A finished campaign made active again through the campaign state machine, or None
    when it refuses (today it allows no finished -> active): the refused transition runs in
    a savepoint, so it leaves nothing behind."""
    try:
        with transaction.atomic():
            return campaign_set_status(campaign=campaign, status=CampaignStatus.ACTIVE)
    except ValidationError:
        campaign.refresh_from_db()
        return None
