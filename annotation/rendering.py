"""Render LLM and user text as safe HTML: Markdown without raw HTML, then an allow-list
sanitiser (defence in depth: even if the Markdown layer let something through, nh3 drops
scripts, event handlers, style and non-http(s)/mailto links)."""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt

# "commonmark" with html disabled: raw <script> in a response becomes visible text.
_md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def _link_allowed(url: str) -> bool:
    """Only http(s) and mailto links survive; markdown-it drops any other target."""
    return url.strip().lower().startswith(("http://", "https://", "mailto:"))


_md.validateLink = _link_allowed  # type: ignore[method-assign]  # markdown-it's link hook

ALLOWED_TAGS = {
    "p",
    "br",
    "hr",
    "pre",
    "code",
    "blockquote",
    "em",
    "strong",
    "del",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "a",
    "img",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "code": {"class"},
    "img": {"alt", "title"},
    "ol": {"start"},
}


def markdown_to_safe_html(text: str) -> str:
    html = _md.render(text or "")
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="nofollow noopener noreferrer",
    )


#: Texts up to this length are remembered rendered (markdown_to_safe_html_cached).
CACHE_MAX_CHARS = 20_000


@lru_cache(maxsize=256)
def _rendered(text: str) -> str:
    return markdown_to_safe_html(text)


def markdown_to_safe_html_cached(text: str) -> str:
    """markdown_to_safe_html, remembered per process for the last 256 texts (at most about
    10 MB): the scoring card shows an item's instruction and reference once per response
    and per annotator, and a response once per annotator (K), each time the same text. A
    pure function of the text, so nothing can go stale."""
    text = str(text or "")
    if len(text) > CACHE_MAX_CHARS:
        return markdown_to_safe_html(text)
    return _rendered(text)
