"""Who changed what: the actor of the current request for audit records written far from
the view (signals on cascading deletes), and the record of every deleted human score.

`AuditActorMiddleware` puts the request in a context variable for the length of the
request, and a record takes the user signed in by then (a session, or an API token) and the
path; `actor_set()` names the actor for commands and scripts. A HumanScore deleted in any
way — a view, the admin's cascade from a campaign or project, the ORM — leaves a
HumanScoreDeletion row with the score as it was, written in the deleting transaction (a
rolled-back delete leaves none). Edits are recorded by
`annotation.services.assignments.human_score_edit` (HumanScoreRevision), which also
survive the score's deletion.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass

from django.db.models.signals import pre_delete
from django.dispatch import receiver
from django.http import HttpRequest


@dataclass(frozen=True)
class Actor:
    user_id: int | None
    context: str


#: an Actor (actor_set), or the request whose user is the actor (AuditActorMiddleware)
_actor: ContextVar[Actor | HttpRequest | None] = ContextVar("audit_actor", default=None)


@contextlib.contextmanager
def actor_set(*, user=None, context: str = ""):
    """Attribute audit records written inside the block to `user` (commands, scripts)."""
    token = _actor.set(Actor(getattr(user, "pk", None), context[:300]))
    try:
        yield
    finally:
        _actor.reset(token)


def actor_get() -> Actor | None:
    """The actor of the current request or `actor_set` block (None outside both).

    A request's actor is its user when the record is written, not when the request came
    in: an API request signs in with its token inside the view (DRF), after every
    middleware has run, and a token user's changes were recorded with no actor while the
    middleware read the user up front."""
    value = _actor.get()
    if value is None or isinstance(value, Actor):
        return value
    user = getattr(value, "user", None)
    user_id = user.pk if user is not None and user.is_authenticated else None
    return Actor(user_id, f"{value.method} {value.path}"[:300])


class AuditActorMiddleware:
    """The request's user and path as the actor of audit records (after authentication)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token = _actor.set(request)  # read by actor_get() when a record is written
        try:
            return self.get_response(request)
        finally:
            _actor.reset(token)


@receiver(pre_delete, sender="annotation.HumanScore", dispatch_uid="humanscore-deletion-audit")
def _human_score_deleted(sender, instance, **kwargs) -> None:
    from annotation.models import HumanScoreDeletion, HumanScoreRevision

    actor = actor_get()
    HumanScoreDeletion.objects.create(
        score_ref=instance.pk,
        campaign_ref=instance.campaign_id,
        response_ref=instance.response_id,
        annotator_ref=instance.annotator_id,
        annotator_username=_username(instance.annotator_id),
        skill_name=_skill_name(instance.skill_id),
        before={
            "score": instance.score,
            "is_na": instance.is_na,
            "rationale": instance.rationale,
            "time_ms": instance.time_ms,
            "rubric_id": instance.rubric_id,
            "assignment_id": instance.assignment_id,
            "created_at": instance.created_at.isoformat() if instance.created_at else None,
            "updated_at": instance.updated_at.isoformat() if instance.updated_at else None,
        },
        deleted_by_id=actor.user_id if actor else None,
        context=actor.context if actor else "",
    )
    HumanScoreRevision.objects.filter(score_id=instance.pk, score_ref__isnull=True).update(
        score_ref=instance.pk
    )


def _username(user_id: int | None) -> str:
    from django.contrib.auth import get_user_model

    if user_id is None:
        return ""
    return (
        get_user_model().objects.filter(pk=user_id).values_list("username", flat=True).first() or ""
    )


def _skill_name(skill_id: int | None) -> str:
    from annotation.models import Skill

    if skill_id is None:
        return ""
    return Skill.objects.filter(pk=skill_id).values_list("name", flat=True).first() or ""
