"""The disagreement explorer pages (docs/DISAGREEMENTS.md): the ranked list with its filters
and the send-back form, and the page of one response with every score it got. Project
researchers and admins only (annotators 403, everyone else 404)."""

from __future__ import annotations

from typing import cast

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from analytics.explorer.disagreement import PAGE_SIZE, DisagreementFilters
from analytics.explorer.selectors import (
    NAMED_FILTERS,
    disagreement_list,
    filter_choices,
    filter_values_resolve,
    imported_score_list_for_response,
)
from analytics.explorer.steps import step_url
from annotation.access import project_get_for_staff
from annotation.models import Campaign, Response
from annotation.selectors import (
    campaign_list_for_reannotation,
    campaigns_for_responses,
    human_score_list_for_response,
    item_facets,
    response_excerpts,
    response_get_for_project,
)
from annotation.services.reannotation import (
    MAX_EXTRA,
    MAX_OVERLAP,
    MIN_EXTRA,
    Outcome,
    ReannotationResult,
    ResponseOutcome,
    responses_reannotate,
)
from flaskweb.htmx import HtmxHttpRequest, template_for
from judging.selectors import judge_score_list_for_response

PAGE = "analytics/disagreements.html"
RESULT = "analytics/_disagreement_result.html"
RESPONSE_PAGE = "analytics/response_scores.html"
SORT_CHOICES = [("gap", "largest gap to a judge"), ("spread", "largest spread among people")]
EXTRA_CHOICES = [(n, str(n)) for n in range(MIN_EXTRA, MAX_EXTRA + 1)]


class DisagreementFilterForm(forms.Form):
    skill = forms.MultipleChoiceField(required=False)
    judge = forms.MultipleChoiceField(required=False)
    system = forms.MultipleChoiceField(required=False)
    domain = forms.MultipleChoiceField(required=False)
    difficulty = forms.TypedMultipleChoiceField(
        required=False, coerce=int, choices=[(n, str(n)) for n in range(1, 6)]
    )
    min_human = forms.IntegerField(
        required=False, min_value=1, max_value=MAX_OVERLAP, label="At least this many human scores"
    )
    sort = forms.ChoiceField(required=False, choices=SORT_CHOICES, label="Sort by")

    def __init__(self, data=None, *args, choices: dict[str, list[str]], **kwargs) -> None:
        if data is not None:  # names match in any case (?skill=readability), as in the API
            given = {name: data.getlist(name) for name in NAMED_FILTERS}
            named, _ = filter_values_resolve(given=given, choices=choices)
            data = data.copy()
            for name, values in named.items():
                data.setlist(name, values)  # an unknown one stays: its field says so
        super().__init__(data, *args, **kwargs)
        for name, key in (
            ("skill", "skills"),
            ("judge", "judges"),
            ("system", "systems"),
            ("domain", "domains"),
        ):
            field = cast(forms.ChoiceField, self.fields[name])
            field.choices = [(value, value) for value in choices[key]]
            field.widget.attrs["size"] = min(6, max(2, len(choices[key])))

    def filters(self) -> DisagreementFilters:
        data = self.cleaned_data
        return DisagreementFilters(
            skills=tuple(data["skill"]),
            judges=tuple(data["judge"]),
            systems=tuple(data["system"]),
            domains=tuple(data["domain"]),
            difficulties=tuple(data["difficulty"]),
            min_human=data["min_human"] or 1,
            sort=data["sort"] or "gap",
        )


class ResponseIdsField(forms.Field):
    widget = forms.MultipleHiddenInput

    def to_python(self, value) -> list[int]:
        try:
            return sorted({int(v) for v in value or []})
        except (TypeError, ValueError):
            raise ValidationError("response ids are whole numbers") from None


def campaign_of_ticked(form: forms.Form, data: dict) -> None:
    """With no campaign chosen, the one campaign the ticked responses (`response_ids`) are
    in, or a form error: none, or several to choose from (the explorer's and the
    drill-down's forms)."""
    ids = data.get("response_ids")
    if not ids or data.get("campaign"):
        return
    found = campaigns_for_responses(project=form.project, response_ids=ids)  # type: ignore[attr-defined]
    campaigns = {pk for pairs in found.values() for pk, _ in pairs}
    if not campaigns:
        form.add_error(None, "none of the ticked responses is in a campaign")
    elif len(campaigns) > 1:
        form.add_error("campaign", "the ticked responses are in several campaigns: choose one")
    else:
        data["campaign"] = form.fields["campaign"].queryset.get(pk=campaigns.pop())  # type: ignore[attr-defined]


class ReannotateForm(forms.Form):
    response_ids = ResponseIdsField(
        error_messages={"required": "tick at least one response to send back"}
    )
    extra = forms.TypedChoiceField(
        choices=EXTRA_CHOICES, coerce=int, label="Extra annotations per response"
    )
    campaign = forms.ModelChoiceField(queryset=Campaign.objects.none(), required=False)

    def __init__(self, *args, project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.project = project
        campaign_field = cast(forms.ModelChoiceField, self.fields["campaign"])
        campaign_field.queryset = campaign_list_for_reannotation(project=project)

    def clean(self):
        data = super().clean()
        campaign_of_ticked(self, data)
        return data


@require_GET
@login_required
def disagreements(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    form = DisagreementFilterForm(request.GET or None, choices=filter_choices(project=project))
    filters = form.filters() if form.is_valid() else None
    if not form.is_bound:
        filters = DisagreementFilters()
    rows = [] if filters is None else disagreement_list(project=project, filters=filters)
    page = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    shown = [row.response_id for row in page]
    excerpts = response_excerpts(response_ids=shown)
    campaigns = campaigns_for_responses(project=project, response_ids=shown)
    context = {
        "project": project,
        "form": form,
        "page": page,
        "rows": [
            {
                "row": row,
                "excerpt": excerpts.get(row.response_id, {}),
                "campaigns": campaigns.get(row.response_id, []),
            }
            for row in page
        ],
        "campaign_choices": sorted(
            {c for pairs in campaigns.values() for c in pairs}, key=lambda c: (c[1], c[0])
        ),
        "extra_choices": EXTRA_CHOICES,
        "filters": filters,
        "query": request.GET.urlencode(),
    }
    return render(request, template_for(request, PAGE, "disagreement-results"), context)


@require_POST
@login_required
def disagreements_reannotate(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    form = ReannotateForm(request.POST, project=project)
    result = None
    if form.is_valid():
        data = form.cleaned_data
        try:
            result = responses_reannotate(
                campaign=data["campaign"],
                response_ids=data["response_ids"],
                extra=data["extra"],
                requested_by=request.user,
            )
        except ValidationError as exc:
            if not hasattr(exc, "error_dict"):
                form.add_error(None, exc.messages)
            else:  # a message about a field the form does not have is about the whole form
                for name, errors in exc.message_dict.items():
                    form.add_error(name if name in form.fields else None, errors)
    context = {
        "project": project,
        "reannotate_form": form,
        "result": result,
        "query": request.POST.get("query", ""),
        **_described(result, project),
    }
    if not request.htmx:  # no script: back to the list, the outcome as messages
        if result is not None:
            for line in [context["summary"], *context["lines"]]:
                messages.info(request, line)
            for reason in context["reasons"]:
                steps = " ".join(s["step"].text for s in reason["steps"])
                messages.warning(request, f"{reason['reason'].text} {steps}".strip())
        for field_errors in form.errors.values():
            messages.error(request, " ".join(str(e) for e in field_errors))
        query = QueryDict(request.POST.get("query", "")).urlencode()
        url = reverse("analytics:disagreements", args=[project.slug])
        return redirect(f"{url}?{query}" if query else url)
    return render(request, RESULT, context)  # 200 with the errors too: htmx 2 swaps no 4xx


def _described(result: ReannotationResult | None, project) -> dict:
    if result is None:
        return {"summary": "", "lines": [], "reasons": []}
    request = result.request
    n = len(result.reopened)
    summary = (
        f"Reopened {n} task{'s' if n != 1 else ''} in {request.campaign.name} "
        f"(at least {request.extra} more annotation{'s' if request.extra != 1 else ''} each)."
    )
    if request.campaign_status_before != request.campaign_status_after:
        summary += f" The campaign is {request.campaign_status_after} again."
    elif n and request.campaign_status_after == "paused":
        summary += " The campaign is paused: the tasks are served once it is resumed."
    partly = sum(o.outcome == Outcome.REOPENED_PARTLY for o in result.outcomes)
    if partly:
        summary += f" {partly} of them only partly: too few annotators are left (below)."
    failed = [o for o in result.not_reopened if o.outcome != Outcome.ALREADY_OPEN]
    if failed:
        summary += f" {len(failed)} could not be reopened (below)."
    waiting = len(result.not_reopened) - len(failed)
    if waiting:
        summary += (
            f" {waiting} already had enough annotations on their way and "
            f"{'was' if waiting == 1 else 'were'} left as they are."
        )
    if not n:
        summary += " Nothing was changed: why, and what would work, is said below."
    lines = [f"Response {o.response}: {_outcome_text(o)}" for o in result.outcomes]
    reasons = [
        {
            "reason": reason,
            "steps": [
                {"step": step, "url": step_url(step, project=project)} for step in reason.next_steps
            ],
        }
        for reason in result.reasons
    ]
    return {"summary": summary, "lines": lines, "reasons": reasons}


def _outcome_text(o: ResponseOutcome) -> str:
    if o.outcome == Outcome.REOPENED:
        return f"reopened, {o.overlap_before} → {o.overlap_after} annotators"
    if o.outcome == Outcome.REOPENED_PARTLY:
        return (
            f"reopened only to {o.overlap_after} annotators (from {o.overlap_before}): too few "
            "annotators in the pool have not had it yet"
        )
    if o.outcome == Outcome.ALREADY_OPEN:
        return (
            f"not changed: {o.submitted} submitted and {o.overlap_before} wanted, so enough "
            "annotations are already on their way"
        )
    if o.outcome == Outcome.NO_ANNOTATOR_LEFT:
        return (
            "not reopened: no annotator is left in the campaign's pool who has not already "
            "had it (add annotators to the pool, then send it back again)"
        )
    if o.outcome == Outcome.CAMPAIGN_FINISHED:
        return "not reopened: the campaign is finished"
    if o.outcome == Outcome.AT_CAP:
        return (
            f"not reopened: it already has the most annotators a response can have ({MAX_OVERLAP})"
        )
    return "not reopened: it is not a normal task of this campaign"


@require_GET
@login_required
def response_scores(request: HtmxHttpRequest, slug: str, pk: int) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    try:
        response = response_get_for_project(project=project, response_id=pk)
    except Response.DoesNotExist:
        raise Http404("no such response") from None
    context = {
        "project": project,
        "response": response,
        "item": response.item,
        "facets": item_facets(item_ids=[response.item_id]).get(response.item_id, {}),
        "human_scores": human_score_list_for_response(response_id=pk),
        "judge_scores": judge_score_list_for_response(project=project, response_id=pk),
        "imported_scores": imported_score_list_for_response(project=project, response_id=pk),
    }
    return render(request, RESPONSE_PAGE, context)
