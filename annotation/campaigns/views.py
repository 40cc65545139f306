"""Campaign pages for a project's admins and researchers: the list, create and edit forms,
the campaign page (progress, throughput, live leases, quality control, rubric pins),
lifecycle buttons, gold tasks and annotator expertise. Annotators get 403, non-members 404.

Study participants (the accounts a campaign's study links make, annotation/study/) are
offered and listed a study at a time, as counts: the form's annotator picker and the
expertise panel never list a crowd study's thousands of accounts one by one.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling

from annotation import access
from annotation.campaigns import selectors as cs
from annotation.campaigns import services
from annotation.campaigns.forms import (
    AnnotatorExpertiseForm,
    CampaignForm,
    CampaignStatusForm,
    GoldPairForm,
    GoldTaskForm,
    GoldTaskRemoveForm,
)
from annotation.models import Campaign, CampaignMode, CampaignStatus, ProjectRole
from annotation.selectors import (
    PARTICIPANTS_EXCLUDE,
    study_get_for_project,
    study_group_list,
    study_id_from,
)
from flaskweb.htmx import HtmxHttpRequest, template_for

DETAIL = "annotation/campaign_detail.html"
FORM = "annotation/campaign_form.html"
#: A study's participants per page of the expertise panel.
EXPERTISE_PAGE_SIZE = 50


def _redirect(request: HtmxHttpRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _detail_url(campaign: Campaign, anchor: str = "") -> str:
    url = reverse("annotation:campaign-detail", args=[campaign.pk])
    return f"{url}#{anchor}" if anchor else url


# --- list, create, edit ---------------------------------------------------------------------------


@require_GET
@login_required
def campaign_list(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project, _ = access.project_get_for_user(request.user, slug)
    context = {"project": project, "campaigns": cs.campaign_list_for_project(project=project)}
    template = template_for(request, "annotation/campaign_list.html", "campaign-table")
    return render(request, template, context)


@require_http_methods(["GET", "POST"])
@login_required
def campaign_create(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project, _ = access.project_get_for_user(request.user, slug)
    form = CampaignForm(
        request.POST or None, project=project, dataset_id=request.GET.get("dataset")
    )
    if request.method == "POST" and form.is_valid():
        try:
            campaign = services.campaign_create(
                project=project, created_by=request.user, **form.campaign_settings()
            )
        except ValidationError as exc:
            form.add_error(None, exc.messages)
        else:
            messages.success(request, f"Campaign {campaign.name} created as a draft.")
            return _redirect(request, _detail_url(campaign))
    context = {"project": project, "form": form, "campaign": None}
    return render(request, _form_template(request), context)


def _form_template(request: HtmxHttpRequest) -> str:
    # A GET from htmx is the dataset select asking for its models' checkboxes.
    return template_for(request, FORM, "model-field") if request.method == "GET" else FORM


@require_http_methods(["GET", "POST"])
@login_required
def campaign_update(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign = access.campaign_get_for_staff(request.user, pk)
    if campaign.status == CampaignStatus.FINISHED:
        messages.error(request, "A finished campaign cannot be edited.")
        return _redirect(request, _detail_url(campaign))
    form = CampaignForm(
        request.POST or None,
        project=campaign.project,
        instance=campaign,
        dataset_id=request.GET.get("dataset"),
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.campaign_update(campaign=campaign, **form.campaign_settings())
        except ValidationError as exc:
            form.add_error(None, exc.messages)
        else:
            messages.success(request, "Campaign settings saved.")
            return _redirect(request, _detail_url(campaign))
    context = {"project": campaign.project, "form": form, "campaign": campaign}
    return render(request, _form_template(request), context)


# --- the campaign page ----------------------------------------------------------------------------


def _live_context(campaign: Campaign) -> dict[str, Any]:
    now = timezone.now()
    leases = cs.campaign_lease_list(campaign=campaign, now=now)
    running = campaign.status in (CampaignStatus.ACTIVE, CampaignStatus.PAUSED)
    return {
        "campaign": campaign,
        "progress": cs.campaign_progress(campaign=campaign, now=now),
        "leases": leases,
        "polling": running or bool(leases),
        "now": now,
    }


def _page_context(
    campaign: Campaign,
    *,
    gold_form: GoldTaskForm | GoldPairForm | None = None,
    expertise_form: AnnotatorExpertiseForm | None = None,
    asked: QueryDict | None = None,
) -> dict[str, Any]:
    """Everything the campaign page shows, from a fixed number of queries (`asked`: the
    expertise panel's study and page)."""
    project = campaign.project
    pins = cs.campaign_rubric_pins(campaign=campaign)
    context = _live_context(campaign)
    context.update(
        project=project,
        pins=pins,
        skill_progress=cs.campaign_skill_progress(campaign=campaign, pins=pins),
        annotators=cs.campaign_annotator_progress(campaign=campaign, now=context["now"]),
        quality=cs.campaign_quality(campaign=campaign),
        flagged=cs.campaign_flagged_list(campaign=campaign),
        fixed_skills=list(campaign.fixed_skills.order_by("order", "name")),
        groups=list(campaign.groups.order_by("name")),
        pool_studies=study_group_list(project=project, in_pool_of=campaign),
    )
    context.update(_gold_context(campaign, gold_form, pins))
    context.update(_expertise_context(campaign, expertise_form, asked))
    return context


def _gold_context(
    campaign: Campaign, form: GoldTaskForm | GoldPairForm | None, pins=None, remove_error=""
) -> dict[str, Any]:
    if form is None:
        form = _gold_form(campaign, None, pins)
    return {
        "gold_form": form,
        "gold_tasks": cs.campaign_gold_task_list(campaign=campaign),
        "gold_remove_error": remove_error,
    }


def _gold_form(campaign: Campaign, data, pins=None) -> GoldTaskForm | GoldPairForm:
    """The gold form that fits the campaign: a response with known scores (pointwise), or
    a pair with known choices (pairwise)."""
    skills = cs.campaign_skill_list(campaign=campaign, pins=pins)
    if campaign.mode == CampaignMode.PAIRWISE:
        models = services.pair_models_of(campaign)
        return GoldPairForm(data, campaign=campaign, skills=skills, model_names=models)
    models = cs.dataset_model_names(dataset=campaign.dataset)
    return GoldTaskForm(data, campaign=campaign, skills=skills, model_names=models)


def _expertise_context(
    campaign: Campaign, form: AnnotatorExpertiseForm | None, asked: QueryDict | None = None
) -> dict[str, Any]:
    """The expertise panel: the annotators who are not study participants, and each
    study as one line; with `?study=<campaign id>` (a GET, or the form's hidden field),
    that study's participants instead, a page at a time."""
    project = campaign.project
    asked = asked if asked is not None else QueryDict()
    study_id = study_id_from(asked.get("study"))
    study = study_get_for_project(project=project, study_id=study_id) if study_id else None
    context: dict[str, Any] = {
        "campaign": campaign,
        "project": project,
        "expertise_study_asked": bool(asked.get("study")),
        "expertise_study": study,
        "expertise_page": None,
        "expertise_studies": [],
    }
    if study is not None:
        people = cs.project_annotator_list(project=project, study_id=study.pk)
        page = Paginator(people.values_list("pk", "username"), EXPERTISE_PAGE_SIZE).get_page(
            asked.get("page")
        )
        users = list(page.object_list)
        context["expertise_page"] = page
    elif context["expertise_study_asked"]:
        users = []  # an unknown study lists nobody, and the panel says so
    else:
        people = cs.project_annotator_list(project=project, participants=PARTICIPANTS_EXCLUDE)
        users = list(people.values_list("pk", "username"))
        context["expertise_studies"] = study_group_list(
            project=project, roles=[ProjectRole.ANNOTATOR]
        )
    if form is None:
        form = AnnotatorExpertiseForm(project=project, shown=users)
    else:
        form.show(users)
    context.update(
        expertise_form=form,
        expertise=cs.project_expertise_list(project=project, users=users),
    )
    return context


def _expertise_url(campaign: Campaign, asked: QueryDict) -> str:
    """The campaign page at its expertise panel, with the study list the form came from."""
    url = reverse("annotation:campaign-detail", args=[campaign.pk])
    study_id = study_id_from(asked.get("study"))
    if study_id is not None:
        url += "?" + urlencode({"study": study_id, "page": asked.get("page") or 1})
    return f"{url}#expertise"


@require_GET
@login_required
def campaign_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign = access.campaign_get_for_staff(request.user, pk)
    if not request.htmx:
        return render(request, DETAIL, _page_context(campaign, asked=request.GET))
    # htmx polls the live panel (progress, ETA, open leases) every few seconds.
    context = _live_context(campaign)
    response = render(request, f"{DETAIL}#campaign-live", context)
    if not context["polling"]:
        return HttpResponseStopPolling(response.content)  # 286: nothing will change any more
    return response


@require_POST
@login_required
def campaign_activate(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign = access.campaign_get_for_staff(request.user, pk)
    try:
        created = services.campaign_activate(campaign=campaign)
    except ValidationError as exc:
        messages.error(request, "Not activated: " + " ".join(exc.messages))
    else:
        messages.success(request, f"Campaign active: {created} new tasks, rubric versions pinned.")
    return _redirect(request, _detail_url(campaign))


@require_POST
@login_required
def campaign_status(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign = access.campaign_get_for_staff(request.user, pk)
    form = CampaignStatusForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Unknown campaign action.")
        return _redirect(request, _detail_url(campaign))
    try:
        campaign = services.campaign_set_status(
            campaign=campaign, status=form.cleaned_data["status"]
        )
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Campaign {campaign.get_status_display().lower()}.")
    return _redirect(request, _detail_url(campaign))


@require_POST
@login_required
def campaign_gold_set(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign = access.campaign_get_for_staff(request.user, pk)
    form = _gold_form(campaign, request.POST)
    saved = None
    if form.is_valid():
        gold_set = (
            services.gold_pair_set
            if campaign.mode == CampaignMode.PAIRWISE
            else services.gold_task_set
        )
        try:
            saved = gold_set(campaign=campaign, **form.gold_settings())
        except ValidationError as exc:
            form.add_error(None, exc.messages)
    if saved is not None and not request.htmx:
        messages.success(request, f"Task {saved.pk} is now a {saved.get_kind_display().lower()}.")
        return redirect(_detail_url(campaign, "gold-tasks"))
    if not request.htmx:  # errors on a full page, answered 200 like every form with errors
        return render(request, DETAIL, _page_context(campaign, gold_form=form))
    context = _gold_context(campaign, None if saved else form)
    context.update(campaign=campaign, saved=saved)
    return render(request, f"{DETAIL}#gold-tasks", context)


@require_POST
@login_required
def campaign_gold_remove(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Remove a gold or attention task no one has answered (the list's Remove button)."""
    campaign = access.campaign_get_for_staff(request.user, pk)
    form = GoldTaskRemoveForm(request.POST)
    error = ""
    if not form.is_valid():
        error = "Say which task to remove."
    else:
        try:
            services.gold_task_remove(campaign=campaign, task_id=form.cleaned_data["task"])
        except ValidationError as exc:
            error = " ".join(exc.messages)
    if not request.htmx:
        if error:
            messages.error(request, error)
        else:
            messages.success(request, f"Task {form.cleaned_data['task']} removed.")
        return redirect(_detail_url(campaign, "gold-tasks"))
    context = _gold_context(campaign, None, remove_error=error)
    context.update(campaign=campaign, removed=None if error else form.cleaned_data["task"])
    return render(request, f"{DETAIL}#gold-tasks", context)


@require_POST
@login_required
def campaign_expertise_set(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    campaign = access.campaign_get_for_staff(request.user, pk)
    form = AnnotatorExpertiseForm(request.POST, project=campaign.project)
    saved = None
    if form.is_valid():
        try:
            services.annotator_expertise_set(
                project=campaign.project,
                user=form.cleaned_data["annotator"],
                domains=form.cleaned_data["domains"],
            )
            saved = form.cleaned_data["annotator"]
        except ValidationError as exc:
            form.add_error(None, exc.messages)
    if saved is not None and not request.htmx:
        messages.success(request, f"Domains of {saved.username} saved.")
        return redirect(_expertise_url(campaign, request.POST))
    if not request.htmx:
        context = _page_context(campaign, expertise_form=form, asked=request.POST)
        return render(request, DETAIL, context)
    context = _expertise_context(campaign, None if saved else form, request.POST)
    context["saved_user"] = saved
    return render(request, f"{DETAIL}#expertise-panel", context)
