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
request is refused with a message (nothing changed). A paused campaign stays paused (a
pause is a deliberate stop); the result says the tasks are served once it is resumed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass

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


@dataclass(frozen=True)
class ReannotationResult:
    request: ReannotationRequest
    outcomes: list[ResponseOutcome]

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
    changes nothing when the request is not valid, the campaign is a draft, or it is
    finished and cannot be made active again.
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
    outcomes: list[ResponseOutcome] = []
    for response_id in wanted_ids:
        task = tasks.get(response_id)
        if task is None:
            outcomes.append(ResponseOutcome(response_id, Outcome.NOT_IN_CAMPAIGN))
            continue
        outcome, overlap = _plan(task, extra, eligible[task.pk])
        if overlap != task.overlap:
            Task.objects.filter(pk=task.pk).update(overlap=overlap)
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
    raised = [o for o in outcomes if o.outcome in Outcome.RAISED]
    if raised:
        highest = max(o.overlap_after or 0 for o in raised)
        if highest > campaign.overlap:
            # the claim's index bound is the campaign's K: without this, never served
            Campaign.objects.filter(pk=campaign.pk).update(
                overlap=highest, updated_at=timezone.now()
            )
            campaign.overlap = highest
        if campaign.status == CampaignStatus.FINISHED:
            campaign = _reactivate(campaign)
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
    return ReannotationResult(request=request, outcomes=outcomes)


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


def _reactivate(campaign: Campaign) -> Campaign:
    """A finished campaign made active again through the campaign state machine; its
    refusal becomes the request's (and rolls the request back)."""
    try:
        return campaign_set_status(campaign=campaign, status=CampaignStatus.ACTIVE)
    except ValidationError:
        raise ValidationError(
            {
                "campaign": [
                    f"{campaign.name} is finished, and a finished campaign cannot be made "
                    "active again; nothing was changed"
                ]
            }
        ) from None
