"""Metadata run pages (docs/METADATA.md): choose an LLM judge for a dataset (with the
estimate before anything is spent), start it, and watch its progress. The project's
researchers and admins (404 for non-members, 403 for annotators)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseStopPolling

from annotation.access import dataset_get_for_user, project_require_role
from flaskweb.htmx import HtmxHttpRequest
from judging import selectors
from judging.metadata.forms import MetadataRunActionForm, MetadataRunForm
from judging.models import MetadataRun, RunStatus
from judging.services.calls import judge_limits
from judging.services.metadata import (
    metadata_run_create,
    metadata_run_estimate,
    metadata_run_set_status,
    metadata_run_start,
)
from judging.services.runs import KEEP_BUDGET
from judging.views import LIVE_UNAVAILABLE

FORM = "judging/metadata_run_form.html"
DETAIL = "judging/metadata_run.html"


def metadata_run_get_for_staff(user, pk: int) -> MetadataRun:
    run = get_object_or_404(
        MetadataRun.objects.select_related("judge", "dataset__project", "prompt_template"), pk=pk
    )
    project_require_role(user, run.dataset.project, what="metadata run")
    return run


@require_http_methods(["GET", "POST"])
@login_required
def metadata_run_create_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """GET with a judge chosen shows the estimate; POST creates the run and starts it."""
    dataset, _ = dataset_get_for_user(request.user, pk)
    data = request.POST if request.method == "POST" else (request.GET or None)
    form = MetadataRunForm(data, project=dataset.project)
    estimate = None
    if form.is_bound and form.is_valid():
        judge, budget = form.cleaned_data["judge"], form.cleaned_data["budget"]
        try:
            if request.method == "POST":
                run = metadata_run_create(
                    judge=judge, dataset=dataset, budget=budget, created_by=request.user
                )
                metadata_run_start(run=run)
                return redirect("judging:metadata-run-detail", pk=run.pk)
            estimate = metadata_run_estimate(judge=judge, dataset=dataset)
        except ValidationError as exc:
            form.add_error(None, " ".join(exc.messages))
    runs = MetadataRun.objects.filter(dataset=dataset).select_related("judge")[:20]
    context = {
        "dataset": dataset,
        "project": dataset.project,
        "form": form,
        "estimate": estimate,
        "runs": runs,
    }
    return render(request, FORM, context)


def _run_pace(run: MetadataRun) -> selectors.RunPace | str | None:
    """What a running metadata run's calls are doing now (judging.llm.activity), or why it
    cannot be said (judging.views.run_pace)."""
    if run.status != RunStatus.RUNNING or run.judge.provider_id is None:
        return None
    rpm, tpm = judge_limits(run.judge)
    try:
        return selectors.run_pace(
            run=selectors.run_key("metadata", run.pk),
            provider_id=run.judge.provider_id,
            remaining=max(0, run.total - run.done - run.failed - run.parse_failed),
            rpm=rpm,
            tpm=tpm,
        )
    except selectors.ActivityUnavailable:
        return LIVE_UNAVAILABLE


@require_GET
@login_required
def metadata_run_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    run = metadata_run_get_for_staff(request.user, pk)
    context = {
        "run": run,
        "dataset": run.dataset,
        "project": run.dataset.project,
        "live": _run_pace(run),
    }
    if not request.htmx:
        return render(request, DETAIL, context)
    # htmx polls the progress section (with the buttons) every 2 s while the run runs; 286
    # stops it once nothing moves any more (the section swapped in then has no poll)
    response = render(request, f"{DETAIL}#metadata-run-progress", context)
    if run.status != RunStatus.RUNNING:
        return HttpResponseStopPolling(response.content)
    return response


@require_POST
@login_required
def metadata_run_action(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Pause, resume (a posted budget field replaces the budget, blank = no limit; none keeps
    it) or cancel; back to the run page with a notice of what happened or why not."""
    run = metadata_run_get_for_staff(request.user, pk)
    form = MetadataRunActionForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(f"{k}: {' '.join(str(m) for m in v)}" for k, v in form.errors.items())
        messages.error(request, f"Nothing done: {problems}")
        return redirect("judging:metadata-run-detail", pk=run.pk)
    action = form.cleaned_data["action"]
    done = {"pause": "paused", "resume": "resumed", "cancel": "cancelled"}[action]
    try:
        if action == "resume":
            budget = form.cleaned_data["budget"] if "budget" in request.POST else KEEP_BUDGET
            changed = metadata_run_start(run=run, budget=budget)
        else:
            status = RunStatus.PAUSED if action == "pause" else RunStatus.CANCELLED
            changed = metadata_run_set_status(run=run, status=status)
    except ValidationError as exc:  # e.g. the provider awaits a site admin's approval
        messages.error(request, "Not " + done + ": " + " ".join(exc.messages))
        return redirect("judging:metadata-run-detail", pk=run.pk)
    if changed:
        messages.info(request, f"Run {done}.")
    else:
        messages.error(request, f"A {run.get_status_display().lower()} run cannot be {done}.")
    return redirect("judging:metadata-run-detail", pk=run.pk)
