"""The verification page (docs/METADATA.md): a dataset's proposals of one origin (a metadata
run's, or the dataset's own) one item at a time, the proposal beside the instruction and the
item's current metadata; accept, edit or reject with the keyboard. The project's researchers
and admins (404 for non-members, 403 for annotators)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation import access
from annotation.metadata import selectors as ms
from annotation.metadata.forms import VerificationForm
from annotation.metadata.services import DATASET_ORIGIN, metadata_dataset_snapshot, metadata_verify
from annotation.models import Dataset, Difficulty, MetadataProposal
from annotation.selectors import metadata_catalogue, metadata_origins
from flaskweb.htmx import HtmxHttpRequest, template_for

PAGE = "annotation/metadata_verify.html"


def _card_context(dataset: Dataset, origin: str, proposal: MetadataProposal | None) -> dict:
    catalogue = metadata_catalogue(project=dataset.project)
    context: dict = {
        "dataset": dataset,
        "project": dataset.project,
        "origin": origin,
        "origins": metadata_origins(dataset=dataset),
        "proposal": proposal,
        "counts": ms.metadata_counts(dataset_id=dataset.pk, origin=origin),
        "skills": catalogue.skills,
        "domains": catalogue.domains,
        "skill_names": {s.key: s.name for s in catalogue.skills},
        "domain_names": {d.key: d.name for d in catalogue.domains},
        "levels": Difficulty.choices,
    }
    if proposal is not None:
        item = ms.metadata_item_current(item=proposal.item)
        current = ms.item_metadata(item=item)
        skill_names, domain_names = context["skill_names"], context["domain_names"]

        def named(values: dict) -> dict:
            return {
                "domains": [domain_names.get(k, k) for k in values["domains"]],
                "skills": [skill_names.get(k, k) for k in values["skills"]],
                "difficulty": values["difficulty"],
            }

        start = proposal if proposal.status == "ok" else None
        edit_skills = list(start.skills if start else current["skills"])
        edit_skills += [s.key for s in catalogue.skills if s.key not in edit_skills]
        context.update(
            item=item,
            proposed=named(
                {
                    "domains": proposal.domains,
                    "skills": proposal.skills,
                    "difficulty": proposal.difficulty,
                }
            ),
            current=named(current),
            edit={
                "domain": (start.domains if start else current["domains"] or [""])[0],
                "skills": list(enumerate(edit_skills[:3], start=1)),
                "difficulty": start.difficulty if start else current["difficulty"],
            },
            verification=ms.metadata_latest_verification(item_id=item.pk),
            around=ms.metadata_neighbours(dataset=dataset, origin=origin, item_id=item.pk),
        )
    return context


def _proposal_for(dataset: Dataset, origin: str, item_id: str | None) -> MetadataProposal | None:
    proposals = MetadataProposal.objects.filter(item__dataset=dataset, origin=origin)
    if item_id:
        if not item_id.isdigit():
            raise Http404("no such item")
        found = proposals.select_related("item").filter(item_id=int(item_id)).first()
        if found is None:
            raise Http404("this item has no proposal of that origin")
        return found
    return ms.metadata_queue(dataset=dataset, origin=origin).first() or (
        proposals.select_related("item").order_by("item_id").first()
    )


def _default_origin(dataset: Dataset) -> str:
    origins = metadata_origins(dataset=dataset)
    runs = [o for o in origins if o[0] != DATASET_ORIGIN]
    return (runs or origins or [(DATASET_ORIGIN, "", 0)])[0][0]


@require_GET
@login_required
def metadata_verify_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    dataset, _ = access.dataset_get_for_user(request.user, pk)
    origin = request.GET.get("origin") or _default_origin(dataset)
    proposal = _proposal_for(dataset, origin, request.GET.get("item"))
    context = _card_context(dataset, origin, proposal)
    return render(request, template_for(request, PAGE, "metadata-card"), context)


@require_POST
@login_required
def metadata_verify_post(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    try:
        proposal = ms.metadata_proposal_get(pk=pk)
    except MetadataProposal.DoesNotExist:
        raise Http404("no such proposal") from None
    dataset, _ = access.dataset_get_for_user(request.user, proposal.item.dataset_id)
    form = VerificationForm(request.POST)
    error = ""
    if form.is_valid():
        try:
            metadata_verify(
                proposal=proposal,
                verdict=form.cleaned_data["verdict"],
                user=request.user,
                **(form.edited_values() if form.cleaned_data["verdict"] == "edited" else {}),
            )
        except ValidationError as exc:
            error = " ".join(str(m) for m in exc.messages)
    else:
        error = " ".join(f"{k}: {' '.join(str(m) for m in v)}" for k, v in form.errors.items())
    if error:
        context = _card_context(dataset, proposal.origin, proposal)
        context.update(error=error, editing=True)
        return render(request, template_for(request, PAGE, "metadata-card"), context)
    around = ms.metadata_neighbours(
        dataset=dataset, origin=proposal.origin, item_id=proposal.item_id
    )
    url = reverse("annotation:metadata-verify-page", args=[dataset.pk])
    query = f"?origin={proposal.origin}"
    if around["next_pending"]:
        query += f"&item={around['next_pending']}"
    else:
        query += f"&item={proposal.item_id}"
    if not request.htmx:
        return redirect(url + query)
    following = _proposal_for(
        dataset, proposal.origin, str(around["next_pending"] or proposal.item_id)
    )
    context = _card_context(dataset, proposal.origin, following)
    context["notice"] = f"Item {proposal.item.external_id}: {form.cleaned_data['verdict']}."
    response = render(request, f"{PAGE}#metadata-card", context)
    response["HX-Push-Url"] = url + query
    return response


@require_POST
@login_required
def metadata_snapshot(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Record the dataset's own metadata as its "dataset" proposals (once per item)."""
    dataset, _ = access.dataset_get_for_user(request.user, pk)
    metadata_dataset_snapshot(dataset=dataset)
    url = reverse("annotation:metadata-verify-page", args=[dataset.pk])
    return redirect(f"{url}?origin={DATASET_ORIGIN}")
