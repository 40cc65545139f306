"""Judging pages for a project's admins and researchers (annotators 403, non-members 404):
judges and their settings, prompt templates (custom, imported, previewed on a real response),
runs (estimate before start, live progress, pause/resume/cancel) and single judgments with
exactly what was sent and what came back."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db import IntegrityError
from django.forms import Form
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling

from annotation.access import project_get_for_staff
from flaskweb.htmx import HtmxHttpRequest, template_for
from judging import access, prompts, selectors, services
from judging.forms import (
    JudgeConfigForm,
    PromptImportForm,
    PromptPreviewForm,
    PromptTemplateForm,
    RunCreateForm,
    RunStartForm,
)
from judging.models import JudgeRun, RunStatus
from judging.probes import views as probe_views
from judging.services.calls import judge_limits

JUDGE_LIST = "judging/judge_list.html"
JUDGE_FORM = "judging/judge_form.html"
JUDGE_DETAIL = "judging/judge_detail.html"
RUN_FORM = "judging/run_form.html"
RUN_DETAIL = "judging/run_detail.html"
JUDGMENT_DETAIL = "judging/judgment_detail.html"
PROBES = "judging/_probe_form.html"
#: what a running run's page says in place of its live figures when their store is away
LIVE_UNAVAILABLE = (
    "What the calls are doing cannot be shown just now: the store of these figures (the"
    " cache's Redis) does not answer. The run goes on; its progress above is up to date."
)
TEMPLATE_LIST = "judging/template_list.html"
TEMPLATE_FORM = "judging/template_form.html"
TEMPLATE_IMPORT = "judging/template_import.html"
TEMPLATE_DETAIL = "judging/template_detail.html"


def _redirect(request: HtmxHttpRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _add_errors(form: Form, exc: ValidationError) -> None:
    """A service's ValidationError on the form: per field where the form has the field."""
    if hasattr(exc, "error_dict"):
        for field, errors in exc.error_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        form.add_error(None, exc.messages)


# --- judges ---------------------------------------------------------------------------------------


@require_GET
@login_required
def judge_list(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    context = {
        "project": project,
        "judges": selectors.judge_list_for_project(project=project),
        "runs": selectors.run_list_for_project(project=project),
    }
    return render(request, template_for(request, JUDGE_LIST, "judge-table"), context)


@require_http_methods(["GET", "POST"])
@login_required
def judge_create(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    form = JudgeConfigForm(request.POST or None, project=project)
    if request.method == "POST" and form.is_valid():
        try:
            judge = services.judge_config_create(
                project=project,
                name=form.cleaned_data["name"],
                kind=form.cleaned_data["kind"],
                created_by=request.user,
                **form.judge_settings(),
            )
        except ValidationError as exc:
            _add_errors(form, exc)
        else:
            messages.success(request, f"Judge {judge.name} created.")
            return _redirect(request, reverse("judging:judge-detail", args=[judge.pk]))
    context = {"project": project, "form": form}
    return render(request, template_for(request, JUDGE_FORM, "judge-form"), context)


@require_GET
@login_required
def judge_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    judge = access.judge_get_for_staff(request.user, pk)
    context = {
        "project": judge.project,
        "judge": judge,
        "runs": selectors.run_list_for_judge(judge=judge),
    }
    return render(request, template_for(request, JUDGE_DETAIL, "run-table"), context)


# --- runs -----------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@login_required
def run_create(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """GET (with a dataset or campaign chosen) shows the estimate; POST creates the run as
    pending, and the run page starts it: nothing is spent before a second, informed click."""
    judge = access.judge_get_for_staff(request.user, pk)
    data = request.POST if request.method == "POST" else (request.GET or None)
    form = RunCreateForm(data, project=judge.project)
    estimate, estimate_error = None, ""
    if form.is_bound and form.is_valid():
        scope = form.run_settings()
        try:
            if request.method == "POST":
                run = services.judge_run_create(judge=judge, created_by=request.user, **scope)
                return _redirect(request, reverse("judging:run-detail", args=[run.pk]))
            scope.pop("budget")
            estimate = services.judge_run_estimate(judge=judge, **scope)
        except ValidationError as exc:
            _add_errors(form, exc)
        except prompts.PromptError as exc:  # e.g. a reference template, items without one
            estimate_error = str(exc)
            form.add_error(None, f"The judge cannot be run on these responses: {exc}")
    context = {
        "project": judge.project,
        "judge": judge,
        "form": form,
        "estimate": estimate,
        "estimate_error": estimate_error,
    }
    return render(request, template_for(request, RUN_FORM, "run-form"), context)


def run_pace(run: JudgeRun, remaining: int) -> selectors.RunPace | str | None:
    """What a running LLM judge run is doing now (calls in flight, the provider's pace, 429s
    and retries, judgments a minute, ETA), from every worker's activity; why not, when the
    store of those figures does not answer; None when the run is not running."""
    if run.status != RunStatus.RUNNING or run.judge.provider_id is None:
        return None
    rpm, tpm = judge_limits(run.judge)
    try:
        return selectors.run_pace(
            run=selectors.run_key("judge", run.pk),
            provider_id=run.judge.provider_id,
            remaining=remaining,
            rpm=rpm,
            tpm=tpm,
        )
    except selectors.ActivityUnavailable:
        return LIVE_UNAVAILABLE


def _run_context(run: JudgeRun, notice: str = "") -> dict[str, Any]:
    progress = selectors.run_progress(run=run)
    return {
        "project": run.judge.project,
        "judge": run.judge,
        "run": run,
        "progress": progress,
        "live": run_pace(run, progress.waiting),
        "problems": selectors.run_problem_list(run=run),
        # read over every score of the run: not on each progress poll of a running run
        "skill_summaries": (
            [] if run.status == RunStatus.RUNNING else selectors.run_skill_summaries(run=run)
        ),
        "samples": (run.settings_snapshot or {}).get("samples", run.judge.samples),
        "pairwise": (
            selectors.pairwise_report(run=run)
            if run.pairwise_against and run.status != RunStatus.RUNNING
            else None
        ),
        "preference": (  # a preference set's pairwise run: accuracy per subset
            selectors.preference_accuracy(run=run) if run.status != RunStatus.RUNNING else None
        ),
        "start_form": RunStartForm(initial={"budget": run.budget}),
        "notice": notice,
        **probe_views.run_page_context(run),
    }


@require_GET
@login_required
def run_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    run = access.run_get_for_staff(request.user, pk)
    context = _run_context(run)
    if not request.htmx:
        return render(request, RUN_DETAIL, context)
    # htmx polls the progress panel every 2 s while the run is running.
    response = render(request, f"{RUN_DETAIL}#run-progress", context)
    if not context["progress"].polling:
        # 286: nothing moves any more. The run stopped since the page was drawn, so the
        # sections that depend on its status come along (e.g. the probe form once it is done)
        return HttpResponseStopPolling(response.content + _status_sections(request, context))
    return response


def _status_sections(request: HtmxHttpRequest, context: dict[str, Any]) -> bytes:
    """The page's sections outside the progress panel that depend on the run's status, as
    htmx out-of-band swaps (each replaces the element with its id)."""
    return render_to_string(PROBES, {**context, "oob": True}, request).encode()


def _after_action(request: HtmxHttpRequest, run: JudgeRun, notice: str) -> HttpResponse:
    """htmx swaps the progress panel in place (polling again if the run now runs), and the
    sections that depend on its status; a plain form post goes back to the run page."""
    run.refresh_from_db()
    if request.htmx:
        context = _run_context(run, notice)
        response = render(request, f"{RUN_DETAIL}#run-progress", context)
        response.content += _status_sections(request, context)
        return response
    messages.info(request, notice)
    return redirect("judging:run-detail", pk=run.pk)


def _start(request: HtmxHttpRequest, pk: int, done: str) -> HttpResponse:
    run = access.run_get_for_staff(request.user, pk)
    form = RunStartForm(request.POST)
    if not form.is_valid():
        return _after_action(
            request, run, "Not started: " + " ".join(str(e) for e in form.errors["budget"])
        )
    # A posted budget field replaces the budget (blank = no limit); none keeps it.
    budget = form.cleaned_data["budget"] if "budget" in request.POST else services.KEEP_BUDGET
    try:
        started = services.judge_run_start(run=run, budget=budget)
    except ValidationError as exc:  # e.g. the provider awaits a site admin's approval
        return _after_action(request, run, "Not started: " + " ".join(exc.messages))
    if started:
        notice = f"Run {done}."
    else:
        notice = f"A {run.get_status_display().lower()} run cannot be {done}."
    return _after_action(request, run, notice)


@require_POST
@login_required
def run_start(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return _start(request, pk, "started")


@require_POST
@login_required
def run_resume(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return _start(request, pk, "resumed")


def _set_status(request: HtmxHttpRequest, pk: int, status: str, done: str) -> HttpResponse:
    run = access.run_get_for_staff(request.user, pk)
    if services.judge_run_set_status(run=run, status=status):
        notice = f"Run {done}."
    else:
        notice = f"A {run.get_status_display().lower()} run cannot be {done}."
    return _after_action(request, run, notice)


@require_POST
@login_required
def run_pause(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return _set_status(request, pk, RunStatus.PAUSED, "paused")


@require_POST
@login_required
def run_cancel(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return _set_status(request, pk, RunStatus.CANCELLED, "cancelled")


@require_GET
@login_required
def judgment_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    judgment = access.judgment_get_for_staff(request.user, pk)
    context = {
        "project": judgment.run.judge.project,
        "run": judgment.run,
        "judgment": judgment,
        "request_json": json.dumps(judgment.request, indent=2, ensure_ascii=False),
    }
    # htmx: the run page opens the raw output and error inline
    return render(request, template_for(request, JUDGMENT_DETAIL, "judgment-output"), context)


# --- prompt templates -----------------------------------------------------------------------------


def _builtin_templates() -> None:
    """Make sure the current built-in template versions have rows, so they are listed and
    can be previewed like any other (get-or-create; a concurrent first call may win)."""
    for with_reference in (False, True):
        try:
            services.prompt_template_builtin(with_reference=with_reference)
        except IntegrityError:
            pass


@require_GET
@login_required
def template_list(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    _builtin_templates()
    context = {
        "project": project,
        "templates": selectors.template_list_for_project(project=project),
    }
    return render(request, template_for(request, TEMPLATE_LIST, "template-table"), context)


@require_http_methods(["GET", "POST"])
@login_required
def template_create(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    form = PromptTemplateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            template, created = services.prompt_template_create(
                project=project,
                key=data["key"],
                name=data["name"],
                user_template=data["user_template"],
                system_prompt=data["system_prompt"],
                created_by=request.user,
            )
        except ValidationError as exc:
            _add_errors(form, exc)
        else:
            what = "saved as" if created else "unchanged: the same text is"
            messages.success(request, f"Template {what} {template.key} v{template.version}.")
            url = reverse("judging:template-detail", args=[project.slug, template.pk])
            return _redirect(request, url)
    context = {"project": project, "form": form}
    return render(request, template_for(request, TEMPLATE_FORM, "template-form"), context)


@require_http_methods(["GET", "POST"])
@login_required
def template_import(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    form = PromptImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            saved = services.prompt_template_import(
                project=project, text=form.cleaned_data["file"], created_by=request.user
            )
        except prompts.PromptFileError as exc:
            for line, message in exc.errors:
                form.add_error("file", f"line {line}: {message}")
        else:
            new = [f"{t.key} v{t.version}" for t, created in saved if created]
            messages.success(
                request,
                f"{len(saved)} prompts read: "
                + (f"new versions {', '.join(new)}." if new else "all unchanged."),
            )
            return _redirect(request, reverse("judging:template-list", args=[project.slug]))
    context = {"project": project, "form": form}
    return render(request, template_for(request, TEMPLATE_IMPORT, "import-form"), context)


@require_GET
@login_required
def template_detail(request: HtmxHttpRequest, slug: str, pk: int) -> HttpResponse:
    """The template's text and versions, and a preview of what a judge gets with it for one
    response of a dataset (?dataset=&response=)."""
    project, template = access.template_get_for_staff(request.user, slug, pk)
    form = PromptPreviewForm(request.GET or None, project=project)
    if not form.is_bound:
        first = form.datasets.first()
        form = PromptPreviewForm({"dataset": first.pk} if first else None, project=project)
    preview = None
    if form.is_bound and form.is_valid():
        preview = selectors.prompt_preview(
            template=template,
            dataset_id=form.cleaned_data["dataset"].pk,
            response_id=form.cleaned_data["response"],
        )
    context = {
        "project": project,
        "template": template,
        "versions": selectors.template_versions(template=template),
        "form": form,
        "preview": preview,
    }
    return render(request, template_for(request, TEMPLATE_DETAIL, "template-preview"), context)
