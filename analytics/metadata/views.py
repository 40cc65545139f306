"""The metadata agreement page (also swapped into the dataset page) and its CSV export.
The project's researchers and admins (404 for non-members, 403 for annotators)."""

from __future__ import annotations

import csv
import io

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from analytics.metadata.selectors import metadata_agreement_for_dataset
from analytics.metadata_agreement import FIGURES
from annotation.access import dataset_get_for_user
from flaskweb.htmx import HtmxHttpRequest, template_for

PAGE = "analytics/metadata_agreement.html"
#: Shown as percentages; the others are counts or coefficients.
SHARES = {"skills_exact", "skills_overlap", "skills_jaccard", "domain_accuracy", "difficulty_exact"}


@require_GET
@login_required
def metadata_agreement_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    dataset, _ = dataset_get_for_user(request.user, pk)
    context = {
        "dataset": dataset,
        "project": dataset.project,
        "origins": metadata_agreement_for_dataset(dataset=dataset),
    }
    return render(request, template_for(request, PAGE, "metadata-agreement"), context)


@require_GET
@login_required
def metadata_agreement_csv(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """One row per origin and group (overall, then each verified domain)."""
    dataset, _ = dataset_get_for_user(request.user, pk)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["dataset", "origin", "source", "group", *FIGURES])
    for entry in metadata_agreement_for_dataset(dataset=dataset):
        groups = [("overall", entry.figures["overall"])]
        groups += [(f"domain:{k}", v) for k, v in entry.figures["per_domain"].items()]
        for group, figures in groups:
            writer.writerow(
                [dataset.name, entry.origin, entry.label, group]
                + ["" if figures[f] is None else round(figures[f], 6) for f in FIGURES]
            )
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="metadata-agreement-dataset-{dataset.pk}.csv"'
    )
    return response
