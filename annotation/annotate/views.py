"""Annotator pages: the dashboard of one's campaigns and the scoring card.

The scoring page is one template with one swappable region, the `task-card` partial: GET
renders the current (or next) task; submit and skip POST from the card and get the next
card (or the same card with a message) back, always with status 200 so htmx 2 swaps it.
What reaches the templates is blind: no model name, judge score, other annotator's score
or gold status (annotation/annotate/selectors.py).
"""

from __future__ import annotations

from typing import cast

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.utils import translation
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET, require_POST

from annotation import access
from annotation.annotate import selectors
from annotation.annotate.forms import (
    PreferenceSubmission,
    ScoreSubmission,
    SkipForm,
    preference_submission_from_post,
    score_submission_from_post,
)
from annotation.languages.middleware import language_activate_for_campaign
from annotation.languages.selectors import campaign_texts, skills_translated
from annotation.models import Assignment, Campaign, TaskKind
from annotation.services import assignments as workflow
from annotation.services.preferences import human_preference_submit
from annotation.services.rendered_texts import texts_prefetch
from flaskweb.htmx import HtmxHttpRequest, template_for

PAGE = "annotation/annotate.html"
CARD = "task-card"
# Errors the annotator can fix on the same card; any other one moves on to the next task.
REDRAW_CODES = {"incomplete", "invalid"}


def _campaign_get_for_annotator(request: HtmxHttpRequest, pk: int) -> Campaign:
    try:
        return access.campaign_get_for_annotator(user=request.user, campaign_id=pk)
    except Campaign.DoesNotExist:
        raise Http404("no such campaign")


def _assignment_read_for_annotator(request: HtmxHttpRequest, pk: int) -> selectors.AssignmentRead:
    try:
        return selectors.assignment_read_for_annotator(user=request.user, assignment_id=pk)
    except Assignment.DoesNotExist:
        raise Http404("no such task")


def _assignment_get_for_annotator(request: HtmxHttpRequest, pk: int) -> Assignment:
    return _assignment_read_for_annotator(request, pk).assignment


@require_GET
@login_required
def my_campaigns(request: HtmxHttpRequest) -> HttpResponse:
    rows = selectors.campaign_list_for_annotator(user=request.user)
    template = template_for(request, "annotation/my_campaigns.html", "campaign-list")
    return render(request, template, {"rows": rows})


@require_GET
@login_required
def annotate(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign = _campaign_get_for_annotator(request, pk)
    language_activate_for_campaign(request, campaign)
    return _next_card(request, campaign)


@require_POST
@login_required
def annotate_submit(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    read = _assignment_read_for_annotator(request, pk)
    assignment = read.assignment
    language_activate_for_campaign(request, assignment.campaign)
    if assignment.task.response_b_id is not None:
        return _pair_submit(request, assignment)
    submission = score_submission_from_post(request.POST)
    try:
        if submission.error:
            raise workflow.AssignmentError(submission.error, code="invalid")
        workflow.human_score_submit(
            assignment_id=assignment.pk,
            annotator=request.user,
            scores=submission.scores,
            active_ms=submission.active_ms,
            language=translation.get_language(),
            # the assignment as it was read just now: the first round reads nothing more
            first_read=workflow.submit_read_of_assignment(
                assignment, request.user, item_id=read.item_id, item_skills=read.item_skills
            ),
        )
    except workflow.AssignmentError as exc:
        if exc.code in REDRAW_CODES:
            return _card(request, assignment, error=str(exc), submission=submission)
        return _next_card(request, assignment.campaign, notice=str(exc))
    return _after_submit(request, assignment)


def _after_submit(request: HtmxHttpRequest, assignment: Assignment) -> HttpResponse:
    """After an accepted submission: the gold feedback card (training tasks always show
    their known answers and explanations; gold and attention ones when the campaign turns
    gold feedback on; a pair's by the sides the annotator saw), else the next card. Only a
    task that counts toward breaks can bring one: never a screening (training or
    qualification) task."""
    pace = assignment.task.kind not in selectors.SCREENING_KINDS
    if assignment.campaign.gold_feedback or assignment.task.kind == TaskKind.TRAINING:
        feedback = selectors.gold_feedback_for_assignment(assignment=assignment)
        if feedback is not None:
            return _render(request, assignment.campaign, {"feedback": feedback}, pace=pace)
    return _next_card(request, assignment.campaign, notice=gettext("Saved."), pace=pace)


def _pair_submit(request: HtmxHttpRequest, assignment: Assignment) -> HttpResponse:
    """annotate_submit for a pair task: the choices by side, as the card showed them."""
    submission = preference_submission_from_post(request.POST)
    try:
        if submission.error:
            raise workflow.AssignmentError(submission.error, code="invalid")
        human_preference_submit(
            assignment_id=assignment.pk,
            annotator=request.user,
            preferences=submission.preferences,
            active_ms=submission.active_ms,
            shown=True,
            language=translation.get_language(),
        )
    except workflow.AssignmentError as exc:
        if exc.code in REDRAW_CODES:
            return _card(request, assignment, error=str(exc), submission=submission)
        return _next_card(request, assignment.campaign, notice=str(exc))
    return _after_submit(request, assignment)


@require_POST
@login_required
def annotate_skip(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    assignment = _assignment_get_for_annotator(request, pk)
    language_activate_for_campaign(request, assignment.campaign)
    form = SkipForm(request.POST)
    if not form.is_valid():
        submission: ScoreSubmission | PreferenceSubmission
        if assignment.task.response_b_id is not None:
            submission = preference_submission_from_post(request.POST)
        else:
            submission = score_submission_from_post(request.POST)
        # ErrorList's items are the messages (it unwraps each ValidationError)
        error = cast(str, next(iter(form.errors.values()))[0])
        return _card(request, assignment, skip_error=error, submission=submission)
    try:
        workflow.assignment_skip(
            assignment_id=assignment.pk,
            annotator=request.user,
            reason=form.cleaned_data["reason"],
            flag=form.flag,
        )
    except workflow.AssignmentError as exc:
        return _next_card(request, assignment.campaign, notice=str(exc))
    notice = (
        gettext("Thank you: the item was flagged as broken.")
        if form.flag
        else gettext("Task skipped.")
    )
    return _next_card(request, assignment.campaign, notice=notice)


# --- rendering the card ------------------------------------------------------------------------


def _next_card(
    request: HtmxHttpRequest, campaign: Campaign, *, notice: str = "", pace: bool = False
) -> HttpResponse:
    """The next task's card. With `pace` (right after a submission), a break card instead
    when the campaign suggests one now: no task is claimed, so no lease runs out during the
    break; its Continue button asks for this page again."""
    if pace and campaign.break_every:
        progress = selectors.annotator_progress(campaign=campaign, user=request.user)
        if progress.break_due:
            return _render(request, campaign, {"on_break": True, "notice": notice}, progress)
    claimed = workflow.assignment_next(campaign=campaign, annotator=request.user)
    if claimed is None:
        reason = gettext(
            selectors.NO_TASK_MESSAGES[
                selectors.no_task_reason(campaign=campaign, user=request.user)
            ]
        )
        return _render(request, campaign, {"idle_reason": reason, "notice": notice})
    # the claimed task as the JSON API's card reads it: one fixed statement (texts and the
    # pinned skills), not the ORM's join plus the skills' own statement; the same statement
    # counts what the progress bar shows
    card = selectors.task_card_for_annotator(
        user=request.user, assignment_id=claimed.pk, progress_of=campaign
    )
    assert card is not None  # just claimed by this user
    if card.pair is not None:
        return _pair_card(request, claimed, notice, "", "", None, campaign=campaign, card=card)
    progress = selectors.annotator_progress(campaign=campaign, user=request.user, mine=card.mine)
    texts = campaign_texts(campaign=campaign, language=translation.get_language())
    rows = [
        {"skill": skill, "value": "", "rationale": ""}
        for skill in skills_translated(card.skills, texts)
    ]
    texts_prefetch([card.instruction, card.reference, card.response])
    context = {
        "assignment": claimed,
        "item": {"instruction": card.instruction, "reference_answer": card.reference or ""},
        "response_text": card.response,
        "rows": rows,
        "notice": notice,
        "error": "",
        "skip_error": "",
    }
    return _render(request, campaign, context, progress)


def _card(
    request: HtmxHttpRequest,
    assignment: Assignment,
    *,
    notice: str = "",
    error: str = "",
    skip_error: str = "",
    submission: ScoreSubmission | PreferenceSubmission | None = None,
) -> HttpResponse:
    if assignment.task.response_b_id is not None:
        assert not isinstance(submission, ScoreSubmission)
        return _pair_card(request, assignment, notice, error, skip_error, submission)
    assert not isinstance(submission, PreferenceSubmission)
    values = submission.values if submission else {}
    rationales = submission.rationales if submission else {}
    texts = campaign_texts(campaign=assignment.campaign, language=translation.get_language())
    rows = [
        {
            "skill": skill,
            "value": values.get(skill.skill_id, ""),
            "rationale": rationales.get(skill.skill_id, ""),
        }
        for skill in skills_translated(workflow.task_skills(assignment=assignment), texts)
    ]
    item = assignment.task.response.item
    shown_reference = item.reference_answer if assignment.campaign.show_reference else None
    texts_prefetch([item.instruction, shown_reference, assignment.task.response.text])
    context = {
        "assignment": assignment,
        "item": item,
        "response_text": assignment.task.response.text,
        "rows": rows,
        "notice": notice,
        "error": error,
        "skip_error": skip_error,
    }
    return _render(request, assignment.campaign, context)


#: The choices of a pair card by side: (label, key).
PAIR_LABELS = {
    "left": (_("A is better"), "a"),
    "right": (_("B is better"), "b"),
    "tie": (_("Tie"), "t"),
    "both_bad": (_("Both bad"), "x"),
}


def _pair_card(
    request: HtmxHttpRequest,
    assignment: Assignment,
    notice: str,
    error: str,
    skip_error: str,
    submission: PreferenceSubmission | None,
    *,
    campaign: Campaign | None = None,
    card: selectors.TaskCard | None = None,
) -> HttpResponse:
    """A pair task's card: both responses in the stored shown order, no model names.
    `card` (with `campaign`): the card already read, for a task just claimed."""
    if card is None:
        card = selectors.task_card_for_annotator(user=request.user, assignment_id=assignment.pk)
        campaign = assignment.campaign
    assert card is not None and card.pair is not None  # the user's own pair assignment
    assert campaign is not None
    values = submission.values if submission else {}
    strengths = submission.strengths if submission else {}
    rationales = submission.rationales if submission else {}
    asked = [(str(s.skill_id), s.name, s.criterion) for s in card.pair.questions.skills]
    if card.pair.questions.overall:
        asked.append(
            (
                "overall",
                gettext("Overall"),
                gettext("All things considered, which response is better?"),
            )
        )
    questions = [
        {
            "key": key,
            "name": name,
            "criterion": criterion,
            "value": values.get(key, ""),
            "strength": strengths.get(key, ""),
            "rationale": rationales.get(key, ""),
        }
        for key, name, criterion in asked
    ]
    choices = [
        {"value": c, "label": PAIR_LABELS[c][0], "key": PAIR_LABELS[c][1]}
        for c in card.pair.choices
    ]
    texts_prefetch([card.instruction, card.reference, card.pair.left, card.pair.right])
    context = {
        "assignment": assignment,
        "item": {"instruction": card.instruction, "reference_answer": card.reference or ""},
        "pair": card.pair,
        "questions": questions,
        "choices": choices,
        "notice": notice,
        "error": error,
        "skip_error": skip_error,
    }
    progress = None
    if card.mine is not None:  # read with the card
        progress = selectors.annotator_progress(
            campaign=campaign, user=request.user, mine=card.mine
        )
    return _render(request, campaign, context, progress)


def _render(
    request: HtmxHttpRequest,
    campaign: Campaign,
    context: dict,
    progress: selectors.AnnotatorProgress | None = None,
    *,
    pace: bool = False,
) -> HttpResponse:
    """Every card shows the annotator's progress (one query, annotator_progress). With
    `pace`, a card shown after a submission (gold feedback) also says when a break is due."""
    if progress is None:
        progress = selectors.annotator_progress(campaign=campaign, user=request.user)
    context = {
        "campaign": campaign,
        "texts": campaign_texts(campaign=campaign, language=translation.get_language()),
        "max_rationale": workflow.MAX_RATIONALE,
        "progress": progress,
        "break_now": pace and progress.break_due,
        **context,
    }
    return render(request, template_for(request, PAGE, CARD), context)
