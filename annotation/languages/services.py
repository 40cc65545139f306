"""A campaign's languages: its own language and completion message, and its texts in more
languages (CampaignTranslation). A live campaign's texts may be corrected at any time; each
change is recorded (CampaignTextChange) with who made it and the texts before and after,
and moves the campaign's updated_at, which is what the pages' cache of a campaign's
languages is keyed by (annotation/languages/selectors.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from annotation.audit import actor_get
from annotation.campaigns.selectors import campaign_skill_list
from annotation.languages.selectors import LEVELS, TEXT_FIELDS, site_languages
from annotation.models import Campaign, CampaignTextChange, CampaignTranslation, Skill

MAX_TEXT = 50_000  # a consent text, instructions or a completion message
MAX_ANCHOR = 2_000


def language_check(language: str, *, field: str = "language", blank: bool = False) -> str:
    """`language` if it is a code of LANGUAGES (or empty, with `blank`); ValidationError
    naming the known codes otherwise."""
    if blank and language == "":
        return language
    if language not in site_languages():
        known = ", ".join(site_languages())
        raise ValidationError({field: f"unknown language {language!r}: one of {known}"})
    return language


def campaign_skill_keys(*, campaign: Campaign) -> dict[str, str]:
    """skill key -> name of the skills the campaign scores (campaign_skill_list: the pinned
    ones once active, else the fixed set or the dataset's item skills)."""
    ids = [skill_id for skill_id, _ in campaign_skill_list(campaign=campaign)]
    return dict(
        Skill.objects.filter(pk__in=ids).order_by("order", "name").values_list("key", "name")
    )


def anchors_clean(*, campaign: Campaign, anchors: Any) -> dict[str, list[str]]:
    """The anchors of a translation: skill key -> exactly five non-empty texts (level 1 to
    5), each skill one the campaign scores. ValidationError under "anchors" saying which
    skill is wrong and how."""
    if not isinstance(anchors, Mapping):
        raise ValidationError({"anchors": "an object of skill key -> five anchors"})
    known = campaign_skill_keys(campaign=campaign) if anchors else {}
    errors: list[str] = []
    clean: dict[str, list[str]] = {}
    for key, levels in anchors.items():
        if key not in known:
            errors.append(
                f"{key}: not a skill of this campaign (its skills: {', '.join(known) or 'none'})"
            )
            continue
        if not isinstance(levels, list | tuple) or not all(isinstance(v, str) for v in levels):
            errors.append(f"{key}: a list of {LEVELS} texts, level 1 to {LEVELS}")
            continue
        texts = [v.strip() for v in levels]
        if len(texts) != LEVELS:
            errors.append(
                f"{key}: exactly {LEVELS} anchors, level 1 to {LEVELS} (got {len(texts)})"
            )
        elif missing := [str(i) for i, v in enumerate(texts, 1) if not v]:
            errors.append(f"{key}: the anchor of level {', '.join(missing)} is empty")
        elif too_long := [str(i) for i, v in enumerate(texts, 1) if len(v) > MAX_ANCHOR]:
            errors.append(f"{key}: level {', '.join(too_long)} longer than {MAX_ANCHOR} characters")
        else:
            clean[key] = texts
    if errors:
        raise ValidationError({"anchors": errors})
    return clean


def _texts_check(values: Mapping[str, str]) -> dict[str, str]:
    clean = {name: (value or "").strip() for name, value in values.items()}
    errors = {
        name: f"at most {MAX_TEXT} characters" for name, v in clean.items() if len(v) > MAX_TEXT
    }
    if errors:
        raise ValidationError(errors)
    return clean


def _record(campaign: Campaign, *, language: str, action: str, before: dict, after: dict) -> None:
    actor = actor_get()
    CampaignTextChange.objects.create(
        campaign=campaign,
        language=language,
        action=action,
        before=before,
        after=after,
        changed_by_id=actor.user_id if actor else None,
        context=actor.context if actor else "",
    )


def _touch(campaign: Campaign) -> None:
    """Move the campaign's updated_at: the pages' cache of its languages is keyed by it."""
    now = timezone.now()
    Campaign.objects.filter(pk=campaign.pk).update(updated_at=now)
    campaign.updated_at = now


def campaign_own_texts_record(*, campaign: Campaign, before: dict, after: dict) -> None:
    """Record a change of the campaign's own language or completion message (campaign_update
    and campaign_language_set), if anything changed."""
    if before != after:
        _record(
            campaign, language="", action=CampaignTextChange.Action.SET, before=before, after=after
        )


@transaction.atomic
def campaign_language_set(
    *, campaign: Campaign, language: str, completion_message: str
) -> Campaign:
    """Set the campaign's own language ("" = the site's default, pages follow the browser)
    and its completion message; recorded when they change."""
    language_check(language, blank=True)
    message = _texts_check({"completion_message": completion_message})["completion_message"]
    campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
    before = {"language": campaign.language, "completion_message": campaign.completion_message}
    after = {"language": language, "completion_message": message}
    if before != after:
        Campaign.objects.filter(pk=campaign.pk).update(
            language=language, completion_message=message, updated_at=timezone.now()
        )
        campaign.refresh_from_db()
        campaign_own_texts_record(campaign=campaign, before=before, after=after)
    return campaign


@transaction.atomic
def campaign_translation_set(
    *,
    campaign: Campaign,
    language: str,
    consent_text: str = "",
    instructions: str = "",
    completion_message: str = "",
    anchors: Mapping[str, Any] | None = None,
) -> CampaignTranslation:
    """Create or replace the campaign's texts in `language` (a code of LANGUAGES). Empty
    texts and skills left out of `anchors` fall back to the campaign's own. Raises
    ValidationError keyed by field."""
    errors: dict[str, Any] = {}
    texts: dict[str, str] = {}
    try:
        language_check(language)
    except ValidationError as exc:
        errors.update(exc.message_dict)
    try:
        texts = _texts_check(
            {
                "consent_text": consent_text,
                "instructions": instructions,
                "completion_message": completion_message,
            }
        )
    except ValidationError as exc:
        errors.update(exc.message_dict)
    try:
        clean_anchors = anchors_clean(campaign=campaign, anchors=anchors or {})
    except ValidationError as exc:
        errors.update(exc.message_dict)
    if errors:
        raise ValidationError(errors)
    Campaign.objects.select_for_update().filter(pk=campaign.pk).first()  # one writer at a time
    existing = CampaignTranslation.objects.filter(campaign=campaign, language=language).first()
    before = _snapshot(existing) if existing else {}
    row = existing or CampaignTranslation(campaign=campaign, language=language)
    for name in TEXT_FIELDS:
        setattr(row, name, texts[name])
    row.anchors = clean_anchors
    after = _snapshot(row)
    if before != after:
        row.full_clean()
        row.save()
        _touch(campaign)
        _record(
            campaign,
            language=language,
            action=CampaignTextChange.Action.SET,
            before=before,
            after=after,
        )
    return row


@transaction.atomic
def campaign_translation_delete(*, campaign: Campaign, language: str) -> bool:
    """Remove the campaign's texts in `language` (its pages fall back to the campaign's own
    texts); False when there were none. Recorded."""
    Campaign.objects.select_for_update().filter(pk=campaign.pk).first()
    row = CampaignTranslation.objects.filter(campaign=campaign, language=language).first()
    if row is None:
        return False
    before = _snapshot(row)
    row.delete()
    _touch(campaign)
    _record(
        campaign,
        language=language,
        action=CampaignTextChange.Action.REMOVED,
        before=before,
        after={},
    )
    return True


def _snapshot(row: CampaignTranslation) -> dict[str, Any]:
    return {**{name: getattr(row, name) for name in TEXT_FIELDS}, "anchors": row.anchors}
