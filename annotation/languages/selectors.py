"""Which language an annotator's page is in, and a campaign's texts in that language
(docs/LANGUAGES.md).

A campaign *offers* its own language (`Campaign.language`, or the site's default language
when that is empty) and every language it has a translation for (CampaignTranslation).
`language_choose` applies the order: the language the annotator picked (if offered), the
study's language (if set), the browser's Accept-Language among the offered ones, the site's
default. What a campaign offers and its translations are cached per process by (campaign id,
updated_at), as the rubric pins are (annotation.selectors._campaign_pins): every change of a
translation moves the campaign's updated_at, so a hit is always current and the scoring
pages pay no query for it."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from django.conf import settings
from django.db.models import Q
from django.utils.translation import get_supported_language_variant
from django.utils.translation.trans_real import parse_accept_lang_header

from annotation.models import Campaign, CampaignTranslation, Skill
from annotation.selectors import TaskSkill

#: The fields of a campaign that a translation may give in another language.
TEXT_FIELDS = ("consent_text", "instructions", "completion_message")
LEVELS = 5


def site_languages() -> tuple[str, ...]:
    """The codes of LANGUAGES, in their order."""
    return tuple(code for code, _ in settings.LANGUAGES)


def language_names() -> dict[str, str]:
    """code -> the language's own name (as LANGUAGES spells it)."""
    return dict(settings.LANGUAGES)


def default_language() -> str:
    """The site's default language as a code of LANGUAGES ("en-us" -> "en")."""
    try:
        return get_supported_language_variant(settings.LANGUAGE_CODE)
    except LookupError:
        return site_languages()[0]


@dataclass(frozen=True)
class Translation:
    language: str
    consent_text: str
    instructions: str
    completion_message: str
    anchors: dict[int, list[str]]  # skill id -> five anchors (the skills it translates)


@dataclass(frozen=True)
class CampaignLanguages:
    """What a campaign offers: `fixed` is Campaign.language ("" = follow the browser),
    `offered` its own language first, then its translations' in LANGUAGES order."""

    fixed: str
    offered: tuple[str, ...]
    translations: dict[str, Translation]


_cache: OrderedDict[tuple[int, object], CampaignLanguages] = OrderedDict()
CACHE_SIZE = 256


def languages_cache_clear() -> None:
    """Forget every cached campaign (tests that count queries start from a cold cache)."""
    _cache.clear()


def campaign_languages(*, campaign: Campaign) -> CampaignLanguages:
    """The languages `campaign` offers and its translations: no query when cached (by id
    and updated_at), else one (two when a translation gives anchors)."""
    key = (campaign.pk, campaign.updated_at)
    hit = _cache.get(key)
    if hit is not None:
        _cache.move_to_end(key)
        return hit
    rows = list(
        CampaignTranslation.objects.filter(campaign_id=campaign.pk).values_list(
            "language", *TEXT_FIELDS, "anchors"
        )
    )
    keys = {k for *_, anchors in rows for k in (anchors or {})}
    skill_ids = _skill_ids_by_key(campaign, keys) if keys else {}
    translations = {
        language: Translation(
            language,
            consent,
            instructions,
            completion,
            {skill_ids[k]: list(v) for k, v in (anchors or {}).items() if k in skill_ids},
        )
        for language, consent, instructions, completion, anchors in rows
    }
    own = campaign.language or default_language()
    offered = [own] + [c for c in site_languages() if c in translations and c != own]
    result = CampaignLanguages(campaign.language, tuple(offered), translations)
    _cache[key] = result
    if len(_cache) > CACHE_SIZE:
        _cache.popitem(last=False)
    return result


def _skill_ids_by_key(campaign: Campaign, keys: set[str]) -> dict[str, int]:
    """skill key -> id among the skills the campaign's project sees (its own win)."""
    rows = (
        Skill.objects.filter(Q(project__isnull=True) | Q(project_id=campaign.project_id))
        .filter(key__in=keys)
        .order_by("project_id")  # NULLs (built in) last on PostgreSQL, first on SQLite
        .values_list("key", "id", "project_id")
    )
    found: dict[str, int] = {}
    for key, skill_id, project_id in rows:
        if key not in found or project_id is not None:
            found[key] = skill_id
    return found


# --- choosing the language ---------------------------------------------------------------------


def browser_language(accept: str, offered: Sequence[str]) -> str:
    """The first language of an Accept-Language header that is offered (a regional variant
    matches its language: es-MX -> es), or ""."""
    if not accept:
        return ""
    for code, _q in parse_accept_lang_header(accept[:500]):
        code = code.lower()
        if code == "*":
            continue
        for candidate in (code, code.split("-")[0]):
            if candidate in offered:
                return candidate
    return ""


def language_choose(*, picked: str, fixed: str, offered: Sequence[str], accept: str) -> str:
    """The language of an annotator's page: the one they picked (if offered), the study's
    (`fixed`, if set), the browser's among the offered ones, else the site's default."""
    if picked and picked in offered:
        return picked
    if fixed:
        return fixed
    return browser_language(accept, offered) or default_language()


# --- the campaign's texts in a language --------------------------------------------------------


@dataclass(frozen=True)
class CampaignTexts:
    """What an annotator reads in `language`: each field the translation's when it gives
    one, else the campaign's own; `anchors` skill id -> five anchors where translated."""

    language: str
    consent_text: str
    instructions: str
    completion_message: str
    anchors: dict[int, list[str]]


def campaign_texts(*, campaign: Campaign, language: str) -> CampaignTexts:
    """The campaign's texts to show in `language`, with fallback per field (and per skill
    for the anchors) to the campaign's own (no query when cached)."""
    found = campaign_languages(campaign=campaign).translations.get(language)
    own = {name: getattr(campaign, name) for name in TEXT_FIELDS}
    if found is None:
        return CampaignTexts(language, anchors={}, **own)
    given = {name: getattr(found, name) or own[name] for name in TEXT_FIELDS}
    return CampaignTexts(language, anchors=found.anchors, **given)


def skills_translated(skills: Sequence[TaskSkill], texts: CampaignTexts) -> list[TaskSkill]:
    """The task's skills with the anchors the texts translate (others as pinned)."""
    if not texts.anchors:
        return list(skills)
    return [
        replace(s, anchors=texts.anchors[s.skill_id]) if s.skill_id in texts.anchors else s
        for s in skills
    ]
