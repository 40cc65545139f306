"""Analytics pages for a project's researchers and admins (annotators 403, non-members 404).

No page computes a report: the dashboard serves the latest stored snapshot of the report its
filters ask for (analytics/report/snapshots.py), says how fresh it is, and asks a worker for
one when there is none; a refresh is one POST, deduplicated while it runs. The snapshot's
progress is a partial polled by htmx, which reloads the page when it is done."""

from __future__ import annotations

from typing import cast
from urllib.parse import urlencode

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST

from analytics.models import ReportSnapshot
from analytics.report import snapshots
from analytics.report.selectors import DEFAULT_RESAMPLES
from annotation.access import project_get_for_staff
from annotation.models import Project
from flaskweb.htmx import HtmxHttpRequest

DASHBOARD = "analytics/dashboard.html"
STATUS = "analytics/_snapshot_status.html"
FILTERS = ("skill", "judge", "system", "domain", "difficulty")
RESAMPLE_CHOICES = (0, 200, 1000, 2000, 10_000)
#: The parts the report section draws (analytics/report/parts.py).
REPORT_PARTS = ("tables", "charts", "heatmaps", "summary")


class ReportFilterForm(forms.Form):
    """The filters `project_report` takes, each repeatable, the resamples, and judge pairs
    to compare (compare_a[i] with compare_b[i]). With `options` (the values present in the
    project's scores) anything else is refused with the field's message; without, names are
    taken as given (an unknown one matches no score) and only the difficulty is checked."""

    skill = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    judge = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    system = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    domain = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    difficulty = forms.TypedMultipleChoiceField(
        required=False, coerce=int, widget=forms.CheckboxSelectMultiple
    )
    resamples = forms.TypedChoiceField(
        required=False,
        coerce=int,
        empty_value=DEFAULT_RESAMPLES,
        choices=[(str(n), f"{n:,}") for n in RESAMPLE_CHOICES],
        label="Bootstrap resamples",
    )
    compare_a = forms.MultipleChoiceField(required=False, widget=forms.MultipleHiddenInput)
    compare_b = forms.MultipleChoiceField(required=False, widget=forms.MultipleHiddenInput)

    def __init__(self, data, *, options: dict[str, list] | None = None):
        super().__init__(data)
        for name in (*FILTERS, "compare_a", "compare_b"):
            field = cast(forms.ChoiceField, self.fields[name])
            source = "judge" if name.startswith("compare_") else name
            if options is not None:
                values = options.get(source, [])
            elif name == "difficulty":
                values = [1, 2, 3, 4, 5]
            else:
                values = [v for v in data.getlist(name) if len(v) <= 200]
            field.choices = [(str(v), str(v)) for v in values]

    def clean(self):
        data = super().clean()
        if len(data.get("compare_a") or []) != len(data.get("compare_b") or []):
            raise forms.ValidationError("Judge pairs to compare need a judge A and a judge B each.")
        return data

    def report_filters(self) -> dict:
        """The cleaned values as `project_report` / `report_rows` keyword arguments."""
        data = self.cleaned_data
        return {
            "skills": data["skill"] or None,
            "judges": data["judge"] or None,
            "systems": data["system"] or None,
            "domains": data["domain"] or None,
            "difficulties": data["difficulty"] or None,
        }

    def snapshot_params(self) -> dict:
        data = self.cleaned_data
        resamples = data.get("resamples")
        return snapshots.snapshot_params(
            **self.report_filters(),
            resamples=DEFAULT_RESAMPLES if resamples is None else resamples,
            compare=list(zip(data["compare_a"], data["compare_b"], strict=True)),
        )


def project_options(project: Project) -> dict[str, list] | None:
    """The values present in the project's scores, from its latest default snapshot (None
    before there is one: names are then taken as given)."""
    default = snapshots.snapshot_latest_done(
        project=project, key=snapshots.snapshot_key(snapshots.snapshot_params())
    )
    return None if default is None else snapshots.snapshot_part(default, "options")


def _dashboard_url(project: Project, query: str = "") -> str:
    url = reverse("analytics:dashboard", args=[project.slug])
    return f"{url}?{query}" if query else url


def _query_of(form: ReportFilterForm) -> str:
    """The form's values as the dashboard's query string (for links and the refresh)."""
    return urlencode(
        [(name, value) for name in form.data for value in form.data.getlist(name)], doseq=False
    )


@require_GET
@login_required
def dashboard(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    options = project_options(project)
    form = ReportFilterForm(request.GET, options=options)
    context: dict = {
        "project": project,
        "form": form,
        "query": request.GET.urlencode(),
        "default_resamples": DEFAULT_RESAMPLES,
    }
    if form.is_valid():
        context.update(_snapshot_context(request, project, form))
    response = render(request, DASHBOARD, context)
    patch_vary_headers(response, ["HX-Request"])
    return response


def _snapshot_context(request, project: Project, form: ReportFilterForm) -> dict:
    params = form.snapshot_params()
    key = snapshots.snapshot_key(params)
    done = snapshots.snapshot_latest_done(project=project, key=key)
    in_flight = snapshots.snapshot_in_flight(project=project, key=key)
    refused = ""
    if done is None and in_flight is None:
        try:
            in_flight, _ = snapshots.snapshot_request(
                project=project,
                params=params,
                user=request.user,
                reason="default" if snapshots.params_are_default(params) else "requested",
            )
        except snapshots.SnapshotRefused as exc:
            refused = str(exc)
    context: dict = {
        "snapshot": done,
        "in_flight": in_flight,
        "failed": snapshots.snapshot_last_failed(project=project, key=key),
        "refused": refused,
        "params": params,
    }
    if done is not None:
        context["changes"] = snapshots.snapshot_freshness(project=project, snapshot=done)
        for name in REPORT_PARTS:
            context[name] = snapshots.snapshot_part(done, name)
        summary = context["summary"] or {}
        context["has_rows"] = summary.get("has_rows", False)
        context["resamples"] = summary.get("resamples", 0)
    return context


@require_POST
@login_required
def report_refresh(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Ask for the report of the posted filters again (deduplicated while one computes)."""
    project = project_get_for_staff(request.user, slug)
    form = ReportFilterForm(request.POST, options=project_options(project))
    query = _query_of(form)
    if not form.is_valid():
        return redirect(_dashboard_url(project, query))
    try:
        snapshot, _created = snapshots.snapshot_request(
            project=project, params=form.snapshot_params(), user=request.user
        )
    except snapshots.SnapshotRefused as exc:
        if request.htmx:
            return render(request, STATUS, {"project": project, "refused": str(exc)}, status=429)
        return redirect(_dashboard_url(project, query))
    if request.htmx:
        return render(request, STATUS, {"project": project, "in_flight": snapshot})
    return redirect(_dashboard_url(project, query))


@require_GET
@login_required
def snapshot_status(request: HtmxHttpRequest, slug: str, snapshot_id: int) -> HttpResponse:
    """A snapshot's progress (polled by htmx every second while it computes). Once it is
    done the page reloads to show it (HX-Refresh); a failure is said with its error."""
    project = project_get_for_staff(request.user, slug)
    snapshot: ReportSnapshot | None = snapshots.snapshot_get(
        project=project, snapshot_id=snapshot_id
    )
    if snapshot is None:
        raise Http404("no such report snapshot")
    if snapshot.status == "done" and request.htmx:
        response = HttpResponse("")
        response["HX-Refresh"] = "true"
        return response
    context = {"project": project, "in_flight": snapshot if snapshot.is_in_flight else None}
    if snapshot.status == "failed":
        context["failed"] = snapshot
    return render(request, STATUS, context)
