"""The judge leaderboard across projects (researchers and site admins), evaluation card
downloads and the page listing a project's judges with their cards (a project's staff).
Every page reads stored snapshots; none computes a report."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.text import slugify
from django.views.decorators.http import require_GET

from analytics.cards import selectors
from analytics.cards.markdown import card_markdown
from analytics.models import ReportSnapshot
from annotation.access import project_get_for_staff
from annotation.models import Project
from flaskweb.htmx import HtmxHttpRequest, template_for

PAGE = "analytics/cards/leaderboard.html"
CARDS = "analytics/cards/judge_cards.html"
FORMATS = {
    "md": "text/markdown; charset=utf-8",
    "json": "application/json",
}


class LeaderboardForm(forms.Form):
    level = forms.ChoiceField(
        required=False,
        choices=[("instance", "Instance"), ("item", "Item"), ("system", "System")],
    )
    skill = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    configuration = forms.RegexField(
        required=False, regex=r"^[0-9a-f]{6,64}$", max_length=64, label="Fingerprint"
    )
    shared = forms.BooleanField(required=False, label="Only configurations on two projects or more")

    def __init__(self, data):
        super().__init__(data)
        # names taken as given (an unknown one matches no row); the page offers the
        # leaderboard's own skills
        given = [v for v in data.getlist("skill") if len(v) <= 200] if data else []
        self.fields["skill"].choices = [(s, s) for s in given]  # type: ignore[attr-defined]


def leaderboard_for(user, data) -> tuple[LeaderboardForm, selectors.Leaderboard]:
    """The form and the leaderboard it asks for (PermissionDenied: no project to show)."""
    projects = selectors.leaderboard_projects(user=user)
    if not projects:
        raise PermissionDenied("the leaderboard compares the projects you are a researcher of")
    form = LeaderboardForm(data)
    if not form.is_valid():
        return form, selectors.judge_leaderboard(projects=projects)
    cleaned = form.cleaned_data
    board = selectors.judge_leaderboard(
        projects=projects,
        level=cleaned.get("level") or "instance",
        skills=cleaned.get("skill") or (),
        fingerprint=cleaned.get("configuration") or "",
        shared_only=bool(cleaned.get("shared")),
    )
    return form, board


@require_GET
@login_required
def judge_leaderboard(request: HtmxHttpRequest) -> HttpResponse:
    form, board = leaderboard_for(request.user, request.GET or None)
    context = {"form": form, "board": board}
    return render(request, template_for(request, PAGE, "leaderboard-table"), context)


# --- cards ----------------------------------------------------------------------------------


def card_filename(project: Project, judge: str, snapshot_id: int, fmt: str) -> str:
    """ASCII and safe in a Content-Disposition header whatever the names."""
    name = slugify(judge)[:60] or "judge"
    return f"card-{project.slug}-{name}-snapshot{snapshot_id}.{fmt}"


def card_document(card: dict, fmt: str) -> bytes:
    """The card as the bytes a download serves: the same card gives the same bytes."""
    if fmt == "json":
        text = json.dumps(card, ensure_ascii=False, indent=2, allow_nan=False) + "\n"
    else:
        text = card_markdown(card)
    return text.encode("utf-8")


def _judge_name(request: HtmxHttpRequest) -> str:
    judge = request.GET.get("judge", "")
    if not judge or len(judge) > 200:
        raise Http404("no such judge")
    return judge


def card_response(
    *, project: Project, snapshot: ReportSnapshot, judge: str, fmt: str
) -> HttpResponse:
    card = selectors.card_build(project=project, snapshot=snapshot, judge=judge)
    if card is None:
        raise Http404("no such judge in this snapshot")
    response = HttpResponse(card_document(card, fmt), content_type=FORMATS[fmt])
    filename = card_filename(project, judge, snapshot.pk, fmt)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _card(request: HtmxHttpRequest, slug: str, snapshot_id: int, fmt: str) -> HttpResponse:
    project = project_get_for_staff(request.user, slug)
    judge = _judge_name(request)
    snapshot = selectors.snapshot_done_get(project=project, snapshot_id=snapshot_id)
    if snapshot is None:
        raise Http404("no such finished report snapshot")
    return card_response(project=project, snapshot=snapshot, judge=judge, fmt=fmt)


@require_GET
@login_required
def judge_card_markdown(request: HtmxHttpRequest, slug: str, snapshot_id: int) -> HttpResponse:
    return _card(request, slug, snapshot_id, "md")


@require_GET
@login_required
def judge_card_json(request: HtmxHttpRequest, slug: str, snapshot_id: int) -> HttpResponse:
    return _card(request, slug, snapshot_id, "json")


@require_GET
@login_required
def judge_card_current(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The card of `?judge=` in the project's current snapshot (the latest done default one,
    else the latest done one): a redirect to that snapshot's card, so what is downloaded
    names the snapshot it was built from. Without a judge: the page listing the project's
    judges, each with the links to its card."""
    project = project_get_for_staff(request.user, slug)
    if not request.GET.get("judge"):
        snapshot = selectors.snapshot_current(project=project)
        judges = selectors.card_judges(project=project, snapshot=snapshot)
        context = {"project": project, "snapshot": snapshot, "judges": judges}
        return render(request, CARDS, context)
    judge = _judge_name(request)
    fmt = request.GET.get("format", "md")
    if fmt not in FORMATS:
        raise Http404("no such format")
    snapshot = selectors.snapshot_current(project=project)
    if snapshot is None:
        raise Http404("the project has no finished report yet")
    name = "analytics:judge-card-json" if fmt == "json" else "analytics:judge-card-md"
    url = reverse(name, args=[project.slug, snapshot.pk])
    return redirect(f"{url}?{urlencode({'judge': judge})}")
