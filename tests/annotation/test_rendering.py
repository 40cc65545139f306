from html.parser import HTMLParser

import pytest

from annotation.rendering import markdown_to_safe_html

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "[click](JaVaScRiPt:alert(1))",
    '<a href="javascript:alert(1)">x</a>',
    "<iframe src=//evil></iframe>",
    "![x](javascript:alert(1))",
    '<svg onload="alert(1)">',
    "<style>body{display:none}</style>",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[x](vbscript:msgbox)",
    "<a href='https://ok.org' onclick='alert(1)'>x</a>",
]
DANGEROUS_TAGS = {"script", "iframe", "svg", "style", "object", "embed", "form", "input"}


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _tags(html: str):
    parser = _Tags()
    parser.feed(html)
    return parser.tags


@pytest.mark.parametrize("payload", HOSTILE)
def test_hostile_markup_renders_inert(payload):
    for tag, attrs in _tags(markdown_to_safe_html(payload)):
        assert tag not in DANGEROUS_TAGS
        assert not any(name.startswith("on") for name in attrs), attrs
        for name in ("href", "src"):
            if name in attrs:
                assert attrs[name].lower().startswith(("http://", "https://", "mailto:"))


def test_markdown_renders_code_lists_and_safe_links():
    html = markdown_to_safe_html(
        "**b**\n\n- one\n\n```python\nprint(1)\n```\n\n[ok](https://x.org)"
    )
    assert "<strong>b</strong>" in html and "<li>one</li>" in html
    assert '<code class="language-python">print(1)' in html
    assert 'href="https://x.org"' in html and "noopener" in html


# --- remembered renderings (a budget in characters) -----------------------------------------


def test_the_remembered_renderings_keep_to_their_character_budget_oldest_out_first():
    from annotation.rendering import _Remembered

    cache = _Remembered(size=100, chars=100)
    for i in range(10):
        cache.put(f"text {i:04d}", "<p>" + "x" * 10 + "</p>")  # 9 + 17 characters
    texts, held = cache.held()
    assert texts == 3 and held == 3 * 26  # a fourth would pass 100
    assert [cache.get(f"text {i:04d}") is not None for i in (6, 7, 8, 9)] == [0, 1, 1, 1]
    cache.put("text 0009", "<p>y</p>")  # put again: counted once, with its new HTML
    assert cache.held() == (3, 2 * 26 + 9 + 8)
    cache.get("text 0007")  # used: the least recently used goes first
    cache.put("another", "<p>" + "z" * 60 + "</p>")
    assert cache.get("text 0008") is None and cache.get("text 0007") is not None
    assert cache.held()[1] <= 100
    numbered = _Remembered(size=2, chars=10**6)
    for text in ("a", "b", "c"):
        numbered.put(text, text)
    assert numbered.held() == (2, 4) and numbered.get("a") is None


def test_a_thousand_items_short_texts_are_rendered_once_per_process(monkeypatch):
    # a campaign's short instructions and references are rendered, not stored: every one of
    # them stays remembered, where 256 texts let most cards render them again
    from annotation import rendering

    rendering.remembered.clear()
    calls = []
    real = rendering.markdown_to_safe_html
    monkeypatch.setattr(
        rendering, "markdown_to_safe_html", lambda text: calls.append(text) or real(text)
    )
    texts = [f"Question {i}: explain **why** the sky looks blue at noon." for i in range(2000)]
    for _ in range(3):
        for text in texts:
            assert "<strong>why</strong>" in rendering.markdown_to_safe_html_cached(text)
    assert len(calls) == len(texts)
    rendering.remembered.clear()
