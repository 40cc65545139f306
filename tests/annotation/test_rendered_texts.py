"""Stored renderings of the texts annotators read (annotation/services/rendered_texts.py):
rendered once, read back by any process, the same HTML as rendering, escaped as ever."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from annotation import rendering
from annotation.models import RenderedText
from annotation.services import rendered_texts
from annotation.services.rendered_texts import (
    STORE_MIN_CHARS,
    campaign_texts_render,
    text_digest,
    texts_prefetch,
    texts_render,
)
from tests.annotation.test_annotate_views import HX, build_campaign, build_dataset

LONG = "A **long** answer <script>alert(1)</script> with [a link](javascript:alert(2)). " * 8
SHORT = "a *short* one"


@pytest.fixture(autouse=True)
def _forget():
    rendering.remembered.clear()
    yield
    rendering.remembered.clear()


def test_a_long_text_is_rendered_once_and_read_back_by_another_process(db, monkeypatch):
    assert len(LONG) >= STORE_MIN_CHARS
    texts_prefetch([LONG, SHORT, None, ""])
    stored = RenderedText.objects.get()
    assert stored.digest == text_digest(LONG)
    assert stored.html == rendering.markdown_to_safe_html(LONG)
    # escaped as ever: the script is text, the javascript: link is gone
    assert "&lt;script&gt;" in stored.html and 'href="javascript' not in stored.html
    # another process (nothing remembered) reads it back and renders nothing
    rendering.remembered.clear()
    calls = []
    real = rendered_texts.markdown_to_safe_html
    monkeypatch.setattr(
        rendered_texts, "markdown_to_safe_html", lambda t: calls.append(t) or real(t)
    )
    texts_prefetch([LONG])
    assert calls == []
    assert rendering.markdown_to_safe_html_cached(LONG) == stored.html
    assert RenderedText.objects.count() == 1


def test_short_texts_and_ones_over_the_limit_are_not_stored(db):
    texts_prefetch([SHORT, "x" * (rendering.CACHE_MAX_CHARS + 1)])
    assert not RenderedText.objects.exists()


def test_a_new_renderer_version_does_not_read_old_renderings(db, monkeypatch):
    texts_prefetch([LONG])
    old = text_digest(LONG)
    monkeypatch.setattr(rendered_texts, "RENDER_VERSION", rendering.RENDER_VERSION + 1)
    assert text_digest(LONG) != old
    rendering.remembered.clear()
    texts_prefetch([LONG])
    assert RenderedText.objects.count() == 2


def test_a_text_stored_twice_at_once_is_stored_once(db):
    assert texts_render([LONG, LONG]) == 1
    assert texts_render([LONG]) == 0  # idempotent
    rendered_texts._store({text_digest(LONG): "<p>another process's copy</p>"})
    assert RenderedText.objects.get().html == rendering.markdown_to_safe_html(LONG)


def test_a_campaign_s_texts_are_rendered_ahead_and_its_cards_read_them(
    project, tmp_path, annotator, monkeypatch
):
    dataset = build_dataset(project, tmp_path, texts=[LONG + " one", LONG + " two"])
    campaign = build_campaign(project, dataset, annotators=[annotator])
    assert campaign_texts_render(campaign_id=campaign.pk) == 2  # the two responses
    assert campaign_texts_render(campaign_id=campaign.pk) == 0
    assert campaign_texts_render(campaign_id=campaign.pk + 10**6) == 0
    calls = []
    monkeypatch.setattr(rendered_texts, "markdown_to_safe_html", lambda t: calls.append(t))
    client = Client()
    client.force_login(annotator)
    card = client.get(reverse("annotation:annotate", args=[campaign.pk]), headers=HX)
    assert card.status_code == 200 and calls == []
    html = card.content.decode()
    stored = {r.html for r in RenderedText.objects.all()}
    assert any(h in html for h in stored)
    assert "&lt;script&gt;" in html and "<script>alert" not in html


def test_activating_a_campaign_asks_a_worker_to_render_its_texts(
    project, tmp_path, annotator, django_capture_on_commit_callbacks, monkeypatch
):
    from annotation import tasks

    asked = []
    monkeypatch.setattr(tasks.campaign_texts_render_task, "delay", asked.append)
    dataset = build_dataset(project, tmp_path, texts=[LONG])
    with django_capture_on_commit_callbacks(execute=True):
        campaign = build_campaign(project, dataset, annotators=[annotator])
    assert asked == [campaign.pk]
    assert tasks.campaign_texts_render_task.run(campaign.pk) == 1


def test_pruning_deletes_old_versions_and_deleted_texts_and_keeps_what_cards_show(
    project, tmp_path, annotator, monkeypatch
):
    from io import StringIO

    from django.core.management import call_command

    from annotation.models import Response

    dataset = build_dataset(project, tmp_path, texts=[LONG + " one", LONG + " two"])
    campaign = build_campaign(project, dataset, annotators=[annotator])
    assert campaign_texts_render(campaign_id=campaign.pk) == 2
    texts_render([LONG + " of a deleted response"])  # its response is gone
    current = set(RenderedText.objects.values_list("digest", flat=True))
    monkeypatch.setattr(rendered_texts, "RENDER_VERSION", rendering.RENDER_VERSION - 1)
    texts_render([LONG + " one"])  # what an earlier renderer stored
    monkeypatch.undo()
    assert RenderedText.objects.count() == 4

    out = StringIO()
    call_command("prune_rendered_texts", "--dry-run", stdout=out)
    assert out.getvalue().strip() == "2 stored rendering(s) would be deleted"
    assert RenderedText.objects.count() == 4
    call_command("prune_rendered_texts", stdout=out)
    kept = set(RenderedText.objects.values_list("digest", flat=True))
    assert kept == {text_digest(LONG + " one"), text_digest(LONG + " two")}
    assert kept < current
    assert rendered_texts.rendered_texts_prune() == 0  # idempotent

    # a response deleted later: its rendering goes at the next prune
    Response.objects.filter(text=LONG + " two").delete()
    assert rendered_texts.rendered_texts_prune() == 1
    assert set(RenderedText.objects.values_list("digest", flat=True)) == {
        text_digest(LONG + " one")
    }
