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
