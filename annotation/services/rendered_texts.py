"""Stored renderings of the texts annotators read (annotation.models.RenderedText).

Rendering a response's Markdown and sanitising it costs about 1 ms of Python per 1,000
characters (markdown-it and nh3, annotation/rendering.py); a FLASK response is often 2,000
or more, and every one of its K annotators is shown it, on any of the server's processes.
So a text is rendered once and stored, keyed by a digest of the renderer's version and the
text, and every later card reads it back:

- `texts_prefetch`, before the scoring card renders: the texts this process does not
  remember are read in one statement; the ones never stored are rendered here and stored
  (one statement; a text rendered by two processes at once is stored once);
- `campaign_texts_render`, in the background after a campaign is activated
  (annotation.tasks.campaign_texts_render_task): every text its tasks show, rendered and
  stored ahead of the first annotator, in batches. Idempotent.

Short texts are not stored: below STORE_MIN_CHARS rendering costs about what reading
it back does. Nothing can go stale: the key is the text itself (a digest of it). What is
no longer read (an earlier renderer's rows, deleted texts' rows) is deleted by
`rendered_texts_prune` (`manage.py prune_rendered_texts`, docs/SERVING.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from django.db.models import Q
from django.utils import timezone

from annotation.models import Campaign, Item, RenderedText, Response, Task
from annotation.rendering import (
    CACHE_MAX_CHARS,
    RENDER_VERSION,
    markdown_to_safe_html,
    remembered,
)
from flaskweb.db import db_datetime, execute, fetch_all

#: Texts shorter than this are rendered, not stored and read back.
STORE_MIN_CHARS = 300
#: Texts per statement when a campaign's texts are rendered ahead.
BATCH = 200

_TABLE = RenderedText._meta.db_table


def text_digest(text: str) -> str:
    return hashlib.sha256(f"{RENDER_VERSION}\n{text}".encode()).hexdigest()


def _storable(text: str | None) -> bool:
    return bool(text) and STORE_MIN_CHARS <= len(text or "") <= CACHE_MAX_CHARS


def _stored(digests: list[str]) -> dict[str, str]:
    marks = ", ".join(["%s"] * len(digests))
    rows = fetch_all(f"SELECT digest, html FROM {_TABLE} WHERE digest IN ({marks})", digests)
    return dict(rows)


def _store(rendered: dict[str, str]) -> None:
    """Store renderings (digest -> HTML); a digest already stored is left as it is."""
    if not rendered:
        return
    now = db_datetime(timezone.now())
    values = ", ".join(["(%s, %s, %s)"] * len(rendered))
    params: list = []
    for digest, html in rendered.items():
        params += [digest, html, now]
    execute(
        f"INSERT INTO {_TABLE} (digest, html, created_at) VALUES {values} "
        "ON CONFLICT (digest) DO NOTHING",
        params,
    )


def texts_prefetch(texts: Iterable[str | None]) -> None:
    """Make the texts' renderings ready in this process (annotation.rendering.remembered)
    for a page about to show them: read the stored ones, render and store the others."""
    wanted: dict[str, str] = {}
    for text in texts:
        if _storable(text) and remembered.get(text or "") is None:
            wanted[text_digest(text or "")] = text or ""
    if not wanted:
        return
    found = _stored(list(wanted))
    fresh = {}
    for digest, text in wanted.items():
        html = found.get(digest)
        if html is None:
            html = fresh[digest] = markdown_to_safe_html(text)
        remembered.put(text, html)
    _store(fresh)


def texts_render(texts: Iterable[str | None]) -> int:
    """Render and store every storable text not stored yet; returns how many were."""
    done = 0
    batch: dict[str, str] = {}
    for text in texts:
        if _storable(text):
            batch[text_digest(text or "")] = text or ""
        if len(batch) >= BATCH:
            done += _render_missing(batch)
            batch = {}
    return done + _render_missing(batch)


def _render_missing(batch: dict[str, str]) -> int:
    if not batch:
        return 0
    have = _stored(list(batch))
    fresh = {d: markdown_to_safe_html(t) for d, t in batch.items() if d not in have}
    _store(fresh)
    return len(fresh)


def campaign_texts_render(*, campaign_id: int) -> int:
    """Render and store ahead every text the campaign's tasks show: their responses (both
    of a pair) and their items' instructions and references. Idempotent; a campaign that
    no longer exists renders nothing. Returns how many texts were rendered."""
    if not Campaign.objects.filter(pk=campaign_id).exists():
        return 0
    tasks = Task.objects.filter(campaign_id=campaign_id)
    responses = Response.objects.filter(
        Q(pk__in=tasks.values("response_id")) | Q(pk__in=tasks.values("response_b_id"))
    )
    items = Item.objects.filter(pk__in=responses.values("item_id"))

    def texts():
        yield from responses.values_list("text", flat=True).iterator(chunk_size=BATCH)
        for instruction, reference in items.values_list("instruction", "reference_answer").iterator(
            chunk_size=BATCH
        ):
            yield instruction
            yield reference

    return texts_render(texts())


def rendered_texts_prune(*, dry_run: bool = False) -> int:
    """Delete the stored renderings no current text needs: those of an earlier renderer
    (RENDER_VERSION is part of the key, so a new renderer leaves the old rows unread) and
    those of texts whose responses and items were deleted. Returns how many rows go (or,
    with `dry_run`, would go). Safe beside annotators: a rendering deleted while a new text
    is being shown is rendered and stored again by the next card that shows it."""
    kept: set[str] = set()
    for text in Response.objects.values_list("text", flat=True).iterator(chunk_size=2000):
        if _storable(text):
            kept.add(text_digest(text))
    for pair in Item.objects.values_list("instruction", "reference_answer").iterator(
        chunk_size=2000
    ):
        kept.update(text_digest(text) for text in pair if _storable(text))
    gone = [
        digest
        for digest in RenderedText.objects.values_list("digest", flat=True).iterator(
            chunk_size=2000
        )
        if digest not in kept
    ]
    if not dry_run:
        for start in range(0, len(gone), 1000):
            RenderedText.objects.filter(digest__in=gone[start : start + 1000]).delete()
    return len(gone)
