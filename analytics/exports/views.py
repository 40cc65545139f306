"""The exports page of a project (admins and researchers; annotators 403, non-members 404):
ask for an export, watch the project's export jobs (the list polls while one is waiting or
running), download a finished one. Formats: docs/EXPORTS.md."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseStopPolling

from analytics.exports.selectors import (
    export_get_for_staff,
    export_list_for_project,
    judge_names_for_export,
)
from analytics.exports.services import (
    FILTER_KEYS,
    ExportOptionsError,
    export_file_open,
    export_job_create,
)
from analytics.exports.training import CONSENSUS, NA_POLICIES, TRAINING_KIND, UNITS
from analytics.models import ExportFormat, ExportJob, ExportKind, RaterKind
from annotation.access import project_get_for_staff
from annotation.models import Project
from annotation.selectors import dataset_list_for_project, skill_list_for_project
from flaskweb.htmx import HtmxHttpRequest, template_for

EXPORTS_PAGE = "analytics/exports.html"


class ExportRequestForm(forms.Form):
    kind = forms.ChoiceField(
        choices=ExportKind.choices,
        initial=ExportKind.LONG,
    )
    format = forms.ChoiceField(
        choices=[("", "the kind's default"), *ExportFormat.choices],
        required=False,
        help_text="Long tables and preferences: CSV, JSON Lines or Parquet; wide tables CSV or "
        "Parquet; FLASK review files JSONL or Parquet; a Hugging Face dataset: zip.",
    )
    skill = forms.MultipleChoiceField(required=False, help_text="None chosen: every skill.")
    rater_kind = forms.ChoiceField(
        choices=[("", "people and judges"), *RaterKind.choices], required=False
    )
    judge = forms.MultipleChoiceField(
        required=False,
        help_text="Narrows the judges (people are kept). A FLASK review file needs exactly one.",
    )
    campaign = forms.ChoiceField(required=False)
    dataset = forms.ChoiceField(required=False)
    system = forms.CharField(
        required=False, max_length=2000, help_text="Model names, separated by commas."
    )

    # judge-training options (docs/EXPORTS.md "judge_training")
    unit = forms.ChoiceField(
        choices=[(u, f"per {u}") for u in UNITS], required=False, initial="skill"
    )
    consensus = forms.ChoiceField(choices=[(c, c) for c in CONSENSUS], required=False)
    na = forms.ChoiceField(
        choices=[(n, n) for n in NA_POLICIES], required=False, label="N/A targets"
    )
    adjudicated = forms.BooleanField(required=False, label="adjudicated scores win")
    pairwise = forms.BooleanField(required=False, label="pairwise tasks too")
    name_systems = forms.BooleanField(required=False, label="name the systems (not blind)")
    imported = forms.BooleanField(required=False, initial=True, label="imported human scores")

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        skill, judge, campaign, dataset = (
            cast(forms.ChoiceField, self.fields[name])
            for name in ("skill", "judge", "campaign", "dataset")
        )
        skill.choices = [
            (name, name)
            for name in skill_list_for_project(project=project).values_list("name", flat=True)
        ]
        judge.choices = [(name, name) for name in judge_names_for_export(project=project)]
        campaign.choices = [("", "–")] + [
            (name, name)
            for name in project.campaigns.order_by("name").values_list("name", flat=True)
        ]
        dataset.choices = [("", "–")] + [
            (d.name, d.name) for d in dataset_list_for_project(project=project)
        ]

    def export_filters(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        data["system"] = [s.strip() for s in data["system"].split(",") if s.strip()]
        filters = {key: data[key] for key in FILTER_KEYS if key in data and data[key]}
        if data.get("kind") == TRAINING_KIND:
            filters["training"] = {
                "unit": data.get("unit") or "skill",
                "consensus": data.get("consensus") or "mean",
                "na": data.get("na") or "skip",
                "adjudicated": bool(data.get("adjudicated")),
                "pairwise": bool(data.get("pairwise")),
                "name_systems": bool(data.get("name_systems")),
                "imported": bool(data.get("imported")),
            }
        return filters


def _context(project: Project, form: ExportRequestForm) -> dict[str, Any]:
    jobs = list(export_list_for_project(project=project))
    return {
        "project": project,
        "form": form,
        "jobs": jobs,
        # only unfinished jobs change by themselves: the list polls while there is one
        "polling": any(not job.is_finished for job in jobs),
    }


@require_http_methods(["GET", "POST"])
@login_required
def exports(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    form = ExportRequestForm(request.POST or None, project=project)
    if request.method == "POST" and form.is_valid():
        try:
            job = export_job_create(
                project=project,
                kind=form.cleaned_data["kind"],
                fmt=form.cleaned_data["format"],
                filters=form.export_filters(),
                requested_by=request.user,
            )
        except ExportOptionsError as exc:
            for field, errors in exc.errors.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            if not request.htmx:
                messages.success(request, f"Export {job.pk} asked for.")
                return redirect("analytics:exports", slug=project.slug)
            form = ExportRequestForm(project=project)
    context = _context(project, form)
    if request.htmx and request.method == "GET":
        # the job list polling itself every 2 s; 286 stops it once nothing moves any more
        response = render(request, f"{EXPORTS_PAGE}#export-list", context)
        return response if context["polling"] else HttpResponseStopPolling(response.content)
    return render(request, template_for(request, EXPORTS_PAGE, "export-panel"), context)


def export_file_response(job: ExportJob) -> FileResponse | None:
    """The finished export as an attachment; None while it is not done."""
    download = export_file_open(job=job)
    if download is None:
        return None
    return FileResponse(
        download.file,
        as_attachment=True,
        filename=download.name,
        content_type=download.content_type,
    )


@require_GET
@login_required
def export_download(request: HtmxHttpRequest, pk: int) -> FileResponse:
    job = export_get_for_staff(request.user, pk)
    response = export_file_response(job)
    if response is None:
        raise Http404("this export has no file (yet)")
    return response
