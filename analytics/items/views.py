"""The drill-down page (docs/DRILL_DOWN.md): the responses behind a figure, with the
filters that chose them, and two actions on the ticked ones: send back for more annotation
(the disagreement explorer's send-back) and add to gold. Project researchers and admins
only (annotators 403, everyone else 404)."""

from __future__ import annotations

from typing import Any, cast
from urllib.parse import urlsplit

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from analytics.explorer.selectors import filter_choices
from analytics.explorer.views import (
    EXTRA_CHOICES,
    ReannotateForm,
    ResponseIdsField,
    _described,
    campaign_of_ticked,
)
from analytics.items.selectors import (
    LEVELS,
    PAGE_SIZE,
    REPEATABLE,
    SINGLE,
    SelectionError,
    item_entries,
    item_filters_resolve,
    item_selection,
)
from analytics.items.services import items_gold_add
from annotation.access import project_get_for_staff
from annotation.models import Campaign, Project
from annotation.selectors import campaign_list_for_reannotation
from annotation.services.reannotation import responses_reannotate
from flaskweb.htmx import HtmxHttpRequest, template_for

PAGE = "analytics/items/items.html"
RESULT = "analytics/items/_gold_result.html"
REANNOTATE_RESULT = "analytics/_disagreement_result.html"
#: How many responses one action may take (the page shows PAGE_SIZE at a time).
MAX_ACTION = 200


def back_path(value: str | None) -> str:
    """The `from` parameter if it is a path of this site ("/…", no scheme or host), else ""."""
    if not value or not value.startswith("/") or value.startswith("//"):
        return ""
    if not url_has_allowed_host_and_scheme(value, allowed_hosts=None):
        return ""
    parts = urlsplit(value)
    return value if not parts.scheme and not parts.netloc and len(value) <= 2000 else ""


def query_filters(query: QueryDict) -> dict[str, list[str]]:
    """The selection's parameters of a query (every other key is left out)."""
    return {name: query.getlist(name) for name in (*REPEATABLE, *SINGLE) if query.getlist(name)}


def _page_context(request: HtmxHttpRequest, project: Project) -> dict[str, Any]:
    given = query_filters(request.GET)
    filters, errors = item_filters_resolve(project=project, given=given)
    context: dict[str, Any] = {
        "project": project,
        "choices": filter_choices(project=project),
        "given": given,
        "levels": LEVELS,
        "back": back_path(request.GET.get("from")),
        "query": request.GET.urlencode(),
        "errors": errors,
        "filters": filters,
        "extra_choices": EXTRA_CHOICES,
    }
    if errors:
        return context
    try:
        selection = item_selection(project=project, filters=filters)
    except SelectionError as exc:
        context["errors"] = exc.problems
        return context
    page = Paginator(selection.response_ids, PAGE_SIZE).get_page(request.GET.get("page"))
    entries = item_entries(project=project, selection=selection, response_ids=list(page))
    context.update(
        selection=selection,
        page=page,
        entries=entries,
        campaign_choices=sorted(
            {c for e in entries for c in e.campaigns}, key=lambda c: (c[1], c[0])
        ),
    )
    return context


@require_GET
@login_required
def items(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    context = _page_context(request, project)
    status = 400 if context["errors"] and not request.htmx else 200
    return render(request, template_for(request, PAGE, "items-results"), context, status=status)


def _back_to_list(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    query = QueryDict(request.POST.get("query", "")).urlencode()
    url = reverse("analytics:items", args=[project.slug])
    return redirect(f"{url}?{query}" if query else url)


@require_POST
@login_required
def items_reannotate(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Send the ticked responses back for more annotation (the disagreement explorer's
    form and service: idempotent, docs/DISAGREEMENTS.md)."""
    project = project_get_for_staff(request.user, slug)
    form = ReannotateForm(request.POST, project=project)
    result = None
    if form.is_valid():
        data = form.cleaned_data
        try:
            result = responses_reannotate(
                campaign=data["campaign"],
                response_ids=data["response_ids"][:MAX_ACTION],
                extra=data["extra"],
                requested_by=request.user,
            )
        except ValidationError as exc:
            form.add_error(None, exc.messages)
    context = {
        "project": project,
        "reannotate_form": form,
        "result": result,
        "query": request.POST.get("query", ""),
        **_described(result, project),
    }
    if not request.htmx:
        if result is not None:
            for line in [context["summary"], *context["lines"]]:
                messages.info(request, line)
        for errors in form.errors.values():
            messages.error(request, " ".join(str(e) for e in errors))
        return _back_to_list(request, project)
    return render(request, REANNOTATE_RESULT, context)


class GoldForm(forms.Form):
    response_ids = ResponseIdsField(error_messages={"required": "tick at least one response"})
    campaign = forms.ModelChoiceField(queryset=Campaign.objects.none(), required=False)
    skill = forms.MultipleChoiceField(required=False)

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.project = project
        campaign_field = cast(forms.ModelChoiceField, self.fields["campaign"])
        campaign_field.queryset = campaign_list_for_reannotation(project=project)
        skills = filter_choices(project=project)["skills"]
        cast(forms.ChoiceField, self.fields["skill"]).choices = [(s, s) for s in skills]

    def clean(self):
        data = super().clean()
        ids = data.get("response_ids")
        if ids and len(ids) > MAX_ACTION:
            self.add_error("response_ids", f"at most {MAX_ACTION} responses at once")
        campaign_of_ticked(self, data)
        return data


@require_POST
@login_required
def items_gold(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Make the ticked responses gold tasks of their campaign, known scores the people's
    rounded consensus (analytics.items.services.items_gold_add: idempotent)."""
    project = project_get_for_staff(request.user, slug)
    form = GoldForm(request.POST, project=project)
    outcomes = None
    if form.is_valid():
        data = form.cleaned_data
        outcomes = items_gold_add(
            project=project,
            campaign=data["campaign"],
            response_ids=data["response_ids"],
            skills=data["skill"],
        )
    added = sum(o.added for o in outcomes or [])
    summary = (
        ""
        if outcomes is None
        else f"{added} of {len(outcomes)} response{'s' if len(outcomes) != 1 else ''} "
        f"{'is' if added == 1 else 'are'} gold now."
    )
    if not request.htmx:
        if outcomes is not None:
            messages.info(request, summary)
            for o in outcomes:
                messages.info(request, f"Response {o.response_id}: {o.text}")
        for errors in form.errors.values():
            messages.error(request, " ".join(str(e) for e in errors))
        return _back_to_list(request, project)
    context = {"gold_form": form, "outcomes": outcomes, "summary": summary}
    return render(request, RESULT, context)
