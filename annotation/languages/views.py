"""The languages of a campaign (staff: its own language and completion message, its texts
in more languages) and the annotators' language picker (docs/LANGUAGES.md)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from annotation import access
from annotation.languages import services
from annotation.languages.forms import CampaignLanguageForm, LanguagePickForm, TranslationForm
from annotation.languages.middleware import SESSION_OFFER, SESSION_PICKED
from annotation.languages.selectors import (
    TEXT_FIELDS,
    campaign_languages,
    language_names,
    site_languages,
)
from annotation.models import Campaign, CampaignTextChange, CampaignTranslation
from annotation.session_keys import SESSION_PARTICIPANT
from flaskweb.htmx import HtmxHttpRequest

PAGE = "annotation/languages/campaign_languages.html"
EDIT = "annotation/languages/translation_form.html"
MESSAGE = "annotation/study/message.html"


# --- annotators: the picker ---------------------------------------------------------------------


def _offered(request: HtmxHttpRequest, campaign_id: int | None) -> tuple[str, ...] | None:
    """What the campaign in view offers (None: not a campaign this user may see); every
    language of the site when no campaign is in view."""
    if campaign_id is None:
        return site_languages()
    if request.session.get(SESSION_PARTICIPANT) is not None:
        offer = request.session.get(SESSION_OFFER)
        if isinstance(offer, list) and len(offer) == 3 and offer[0] == campaign_id:
            return tuple(offer[2])
        return None
    if not request.user.is_authenticated:
        return None
    try:
        campaign = access.campaign_get_for_annotator(user=request.user, campaign_id=campaign_id)
    except Campaign.DoesNotExist:
        return None
    return campaign_languages(campaign=campaign).offered


@require_POST
def language_pick(request: HtmxHttpRequest) -> HttpResponse:
    """The language the annotator picked, kept in their session: refused (400) unless the
    campaign in view offers it. Back to the page they were on."""
    form = LanguagePickForm(request.POST)
    offered = _offered(request, form.cleaned_data["campaign"]) if form.is_valid() else None
    if offered is None or form.cleaned_data["language"] not in offered:
        names = language_names()
        choices = ", ".join(names.get(c, c) for c in offered or ())
        message = _("This study is not offered in that language.")
        if choices:
            message += " " + _("Choose one of: %(languages)s.") % {"languages": choices}
        return render(
            request, MESSAGE, {"title": _("Language not offered"), "message": message}, status=400
        )
    request.session[SESSION_PICKED] = form.cleaned_data["language"]
    target = form.cleaned_data["next"]
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        study = request.session.get(SESSION_PARTICIPANT) is not None
        target = reverse("annotation:study-resume" if study else "annotation:my-campaigns")
    return redirect(target)


# --- staff: a campaign's languages --------------------------------------------------------------


def _page(request: HtmxHttpRequest, campaign: Campaign, **extra: Any) -> HttpResponse:
    translations = list(CampaignTranslation.objects.filter(campaign=campaign))
    names = language_names()
    taken = {t.language for t in translations}
    context = {
        "campaign": campaign,
        "project": campaign.project,
        "form": extra.pop("form", None)
        or CampaignLanguageForm(
            initial={
                "language": campaign.language,
                "completion_message": campaign.completion_message,
            }
        ),
        "translations": [(t, names.get(t.language, t.language)) for t in translations],
        "addable": [(c, names[c]) for c in site_languages() if c not in taken],
        "changes": CampaignTextChange.objects.filter(campaign=campaign).select_related(
            "changed_by"
        )[:20],
        **extra,
    }
    return render(request, PAGE, context)


@require_http_methods(["GET", "POST"])
@login_required
def campaign_languages_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """GET: the campaign's language, completion message, translations and their changes.
    POST: set the language and completion message."""
    campaign = access.campaign_get_for_staff(request.user, pk)
    if request.method == "GET":
        return _page(request, campaign)
    form = CampaignLanguageForm(request.POST)
    if form.is_valid():
        try:
            services.campaign_language_set(campaign=campaign, **form.cleaned_data)
        except ValidationError as exc:
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, "Language and completion message saved.")
            return redirect(reverse("annotation:campaign-languages", args=[pk]))
    return _page(request, campaign, form=form)


@require_http_methods(["GET", "POST"])
@login_required
def campaign_translation(request: HtmxHttpRequest, pk: int, language: str) -> HttpResponse:
    """The campaign's texts in one language: GET the form (empty for a new language), POST
    save it (errors by field, 200)."""
    campaign = access.campaign_get_for_staff(request.user, pk)
    if language not in site_languages():
        raise Http404("no such language")
    skills = services.campaign_skill_keys(campaign=campaign)
    row = CampaignTranslation.objects.filter(campaign=campaign, language=language).first()
    if request.method == "GET":
        texts = {name: getattr(row, name) for name in TEXT_FIELDS} if row else {}
        initial = TranslationForm.initial_for(texts, row.anchors if row else {})
        form = TranslationForm(initial=initial, skills=skills, language=language)
    else:
        form = TranslationForm(request.POST, skills=skills, language=language)
        if form.is_valid():
            try:
                services.campaign_translation_set(
                    campaign=campaign,
                    language=language,
                    anchors=form.anchors(),
                    **{name: form.cleaned_data[name] for name in TEXT_FIELDS},
                )
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, errors)
            else:
                messages.success(request, f"Texts in {language_names()[language]} saved.")
                return redirect(reverse("annotation:campaign-languages", args=[pk]))
    context = {
        "campaign": campaign,
        "project": campaign.project,
        "language": language,
        "language_name": language_names()[language],
        "form": form,
        "exists": row is not None,
    }
    return render(request, EDIT, context)


@require_POST
@login_required
def campaign_translation_delete(request: HtmxHttpRequest, pk: int, language: str) -> HttpResponse:
    campaign = access.campaign_get_for_staff(request.user, pk)
    if services.campaign_translation_delete(campaign=campaign, language=language):
        messages.success(request, f"Texts in {language_names().get(language, language)} removed.")
    return redirect(reverse("annotation:campaign-languages", args=[pk]))
