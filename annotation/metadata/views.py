"""The verification page (docs/METADATA.md): a dataset's proposals of one origin (a metadata
run's, or the dataset's own) one item at a time, the proposal beside the instruction and the
item's current metadata, and what a verdict changes (running campaigns keep the skills they
pinned); accept, edit or reject with the keyboard. And the page that applies verified
metadata to a running campaign (the tasks and gold it affects listed first). The project's
researchers and admins (404 for non-members, 403 for annotators)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from annotation import access
from annotation.metadata import selectors as ms
from annotation.metadata.forms import MetadataApplyForm, VerificationForm
from annotation.metadata.services import DATASET_ORIGIN, metadata_dataset_snapshot, metadata_verify
from annotation.models import Campaign, CampaignStatus, Dataset, Difficulty, MetadataProposal
from annotation.selectors import campaign_metadata_plan, metadata_catalogue, metadata_origins
from annotation.services.pins import campaign_metadata_apply
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
                "domains": list(start.domains if start else current["domains"]),
                "skills": list(enumerate(edit_skills[:3], start=1)),
                "difficulty": start.difficulty if start else current["difficulty"],
            },
            verification=ms.metadata_latest_verification(item_id=item.pk),
            around=ms.metadata_neighbours(dataset=dataset, origin=origin, item_id=item.pk),
            **_effects_context(item, proposal, skill_names),
        )
    return context


def _effects_context(item, proposal: MetadataProposal, skill_names: dict[str, str]) -> dict:
    """What an accept changes beyond the item, for the card: the running campaigns that keep
    the skills they pinned for it (with the skills they ask, and the known-answer tasks that
    would hold the item back if the proposal were applied to them), the finished ones, the
    drafts that will read the new values, and the drafts' known-answer tasks on the item
    whose known skills the proposal drops."""
    effects = ms.metadata_verification_effects(item=item)
    proposed = list(proposal.skills) if proposal.status == "ok" else []

    def named(conflicts) -> list[tuple]:
        return [(task, [skill_names.get(k, k) for k in dropped]) for task, dropped in conflicts]

    running = []
    for c in effects.running:
        held = named(effects.conflicts(proposed, campaign_ids=[c.campaign_id])) if proposed else []
        running.append((c, [skill_names.get(k, k) for k in c.pinned], c.pinned == proposed, held))
    drafts = [pk for pk, _ in effects.drafts]
    return {
        "effects": effects,
        "running_pins": running,
        "draft_conflicts": named(effects.conflicts(proposed, campaign_ids=drafts))
        if proposed
        else [],
    }


def _edit_as_posted(values: dict, shown: dict) -> dict:
    """The editor's values as the person posted them (a refused edit is shown again as it
    was entered, every domain ticked as it was), where they gave them."""
    posted = list(values["skills"])
    skills = [key for _, key in shown["skills"]]
    return {
        "domains": values["domains"],
        "skills": list(enumerate((posted + skills[len(posted) :])[:3], start=1)),
        "difficulty": values["difficulty"] or shown["difficulty"],
    }


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
        if form.is_valid() and form.cleaned_data["verdict"] == "edited":
            context["edit"] = _edit_as_posted(form.edited_values(), context["edit"])
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
    context["notice_running"] = ms.metadata_verification_effects(item=proposal.item).running
    context["notice_item"] = proposal.item
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


# --- applying verified metadata to a running campaign ------------------------------------------

APPLY_PAGE = "annotation/metadata_apply.html"


def _apply_item_ids(request: HtmxHttpRequest) -> list[int] | None:
    """The items a page narrowed to (?item=, repeated), or None for all of them."""
    ids = [int(v) for v in request.GET.getlist("item") if v.isdigit() and len(v) < 19]
    return ids or None


def _apply_context(campaign: Campaign, item_ids: list[int] | None, **extra) -> dict:
    return {
        "campaign": campaign,
        "project": campaign.project,
        "plan": campaign_metadata_plan(campaign=campaign, item_ids=item_ids),
        "item_ids": item_ids or [],
        "running": campaign.status in (CampaignStatus.ACTIVE, CampaignStatus.PAUSED),
        **extra,
    }


@require_GET
@login_required
def metadata_apply_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """What applying the verified metadata to a running campaign would change: the items
    whose verified skills differ from those the campaign pinned, each with its tasks,
    annotations, leases and known-answer tasks, and those held back with the reason."""
    campaign = access.campaign_get_for_staff(request.user, pk)
    context = _apply_context(campaign, _apply_item_ids(request))
    return render(request, template_for(request, APPLY_PAGE, "metadata-apply"), context)


@require_POST
@login_required
def metadata_apply(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Apply the plan the researcher was shown, all or nothing; a plan that changed since is
    shown again with the reason and nothing applied."""
    campaign = access.campaign_get_for_staff(request.user, pk)
    form = MetadataApplyForm(request.POST)
    item_ids = form.item_ids() if form.is_valid() else None
    error = "" if form.is_valid() else "Look at the list, then apply it."
    if not error:
        try:
            applied = campaign_metadata_apply(
                campaign=campaign,
                fingerprint=form.cleaned_data["plan"],
                item_ids=item_ids,
                user=request.user,
            )
        except ValidationError as exc:
            error = " ".join(str(m) for m in exc.messages)
        else:
            n = len(applied.applicable)
            messages.success(
                request,
                f"Applied the verified metadata of {n} item{pluralize(n)} to {campaign.name}: "
                "their tasks ask the verified skills from now on.",
            )
            url = reverse("annotation:metadata-apply-page", args=[campaign.pk])
            if request.htmx:
                return HttpResponseClientRedirect(url)
            return redirect(url)
    context = _apply_context(campaign, item_ids, error=error)
    return render(request, template_for(request, APPLY_PAGE, "metadata-apply"), context)
