"""Where the next steps of a send-back lead (annotation.services.reannotation.NextStep):
the page a person acts on, shared by the explorer's page and its API."""

from __future__ import annotations

from django.urls import reverse

from annotation.models import Project
from annotation.services.reannotation import NextStep, Step


def step_url(step: NextStep, *, project: Project) -> str | None:
    """The page (or, to resume a campaign, the form action) of a step; None for a step
    that is a send-back (it is made with the send-back form or API itself)."""
    if step.action == Step.WAIT:
        return reverse("annotation:campaign-detail", args=[step.campaign])
    if step.action == Step.ADD_ANNOTATORS:
        return reverse("annotation:campaign-update", args=[step.campaign])
    if step.action == Step.RESUME_CAMPAIGN:
        return reverse("annotation:campaign-status", args=[step.campaign])
    if step.action == Step.CREATE_CAMPAIGN:
        url = reverse("annotation:campaign-create", args=[project.slug])
        return f"{url}?dataset={step.dataset}" if step.dataset else url
    return None
