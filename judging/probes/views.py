"""Probe pages: start a probe run from a finished run's page, and the model families page
(a project's admins and researchers; annotators 403, non-members 404)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from annotation.access import project_get_for_staff
from flaskweb.htmx import HtmxHttpRequest
from judging import access
from judging.probes.forms import FamiliesForm, ProbeRunForm
from judging.probes.selectors import families_for_project, probe_runs_of
from judging.services.probes import families_set, probe_run_create

FAMILIES = "judging/families.html"
PROBE_FORM = "judging/_probe_form.html"


def _probe_context(run, form) -> dict:
    return {"run": run, "probe_form": form, "probe_runs": probe_runs_of(run=run)}


def run_page_context(run) -> dict:
    """What the run page's probes section shows: the form and the run's probe runs."""
    return {"probe_form": ProbeRunForm(run=run), "probe_runs": probe_runs_of(run=run)}


@require_POST
@login_required
def probe_create(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Start a probe run of finished run `pk`; to the new run's page, or the form again
    with the reason it was refused."""
    run = access.run_get_for_staff(request.user, pk)
    form = ProbeRunForm(request.POST, run=run)
    if form.is_valid():
        try:
            probe = probe_run_create(
                base_run=run,
                probe=form.cleaned_data["probe"],
                params=form.params(),
                budget=form.cleaned_data.get("budget"),
                created_by=request.user,
            )
        except ValidationError as exc:
            for message in exc.messages:
                form.add_error(None, message)
        else:
            url = reverse("judging:run-detail", args=[probe.pk])
            if request.htmx:
                response = HttpResponse(status=204)
                response["HX-Redirect"] = url
                return response
            messages.info(request, f"Probe run #{probe.pk} started.")
            return redirect(url)
    return render(request, PROBE_FORM, _probe_context(run, form), status=400)


@require_http_methods(["GET", "POST"])
@login_required
def families(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The model family of each system and judge of the project (self-preference)."""
    project = project_get_for_staff(request.user, slug)
    systems, judges = families_for_project(project=project)
    data = request.POST if request.method == "POST" else None
    form = FamiliesForm(data, systems=systems, judges=judges)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            system_families, judge_families = form.families()
            try:
                families_set(project=project, systems=system_families, judges=judge_families)
            except ValidationError as exc:
                for message in exc.messages:
                    form.add_error(None, message)
            else:
                messages.info(request, "Families saved.")
                return redirect("judging:families", slug=project.slug)
        status = 400
    context = {"project": project, "form": form}
    return render(request, FAMILIES, context, status=status)
