"""Render LLM and user text as safe HTML: Markdown without raw HTML, then an allow-list
sanitiser (defence in depth: even if the Markdown layer let something through, nh3 drops
scripts, event handlers, style and non-http(s)/mailto links)."""

from __future__ import annotations

import threading
from collections import OrderedDict

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


#: Bump when the rendering changes (markdown-it's options, the allow-lists above): stored
#: renderings (annotation/rendered_texts.py) are keyed by it, so the old ones are not read.
RENDER_VERSION = 1

#: Texts up to this length are remembered rendered (markdown_to_safe_html_cached).
CACHE_MAX_CHARS = 20_000
#: Characters remembered per process, texts and their HTML together: a budget in characters,
#: not a number of texts, so that the short texts of a campaign (instructions, references,
#: short answers: rendered, not stored, annotation/services/rendered_texts.py) all stay,
#: where 256 texts of any length let a campaign of a thousand items render its short texts
#: on most cards. At most about 16 MB of ASCII (a str is 1 to 4 bytes a character).
CACHE_CHARS = 16_000_000
#: And at most this many texts (each costs about 200 bytes besides its characters).
CACHE_TEXTS = 40_000


class _Remembered:
    """A bounded, thread-safe map text -> rendered HTML, least recently used out first,
    within `chars` characters (texts and HTML) and `size` texts (functools.lru_cache
    cannot be given a value rendered elsewhere: the stored renderings are put here)."""

    def __init__(self, size: int, chars: int = CACHE_CHARS) -> None:
        self.size = size
        self.chars = chars
        self._map: OrderedDict[str, str] = OrderedDict()
        self._held = 0  # characters of the texts and HTML held
        self._lock = threading.Lock()

    def get(self, text: str) -> str | None:
        with self._lock:
            html = self._map.get(text)
            if html is not None:
                self._map.move_to_end(text)
            return html

    def put(self, text: str, html: str) -> None:
        with self._lock:
            old = self._map.pop(text, None)
            if old is not None:
                self._held -= len(text) + len(old)
            self._map[text] = html
            self._held += len(text) + len(html)
            while len(self._map) > self.size or (self._held > self.chars and len(self._map) > 1):
                gone, gone_html = self._map.popitem(last=False)
                self._held -= len(gone) + len(gone_html)

    def held(self) -> tuple[int, int]:
        """Texts and characters held."""
        with self._lock:
            return len(self._map), self._held

    def clear(self) -> None:
        with self._lock:
            self._map.clear()
            self._held = 0


remembered = _Remembered(CACHE_TEXTS)


def markdown_to_safe_html_cached(text: str) -> str:
    """markdown_to_safe_html, remembered per process (the last CACHE_CHARS): the scoring
    card shows an item's instruction and reference once per response and per annotator,
    and a response once per annotator (K), each time the same text. A pure function of the
    text, so nothing can go stale. The scoring card puts its texts here first, read from
    the stored renderings (annotation/rendered_texts.py)."""
    text = str(text or "")
    if len(text) > CACHE_MAX_CHARS:
        return markdown_to_safe_html(text)
    html = remembered.get(text)
    if html is None:
        html = markdown_to_safe_html(text)
        remembered.put(text, html)
    return html
