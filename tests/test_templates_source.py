"""The templates' source: checks on what Django would otherwise render silently."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

TEMPLATES = sorted(Path(settings.BASE_DIR, "templates").rglob("*.html"))
#: `{# ... #}` is a one-line comment in Django: spread over lines it is rendered as text
#: (in <head> that text ends the head, and what follows it lands in the body).
COMMENT_OPEN = re.compile(r"\{#(?!.*#\})")


def test_there_are_templates():
    assert len(TEMPLATES) > 50


def test_no_one_line_comment_is_spread_over_lines():
    found = [
        f"{path.relative_to(settings.BASE_DIR)}:{n}"
        for path in TEMPLATES
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if COMMENT_OPEN.search(line)
    ]
    assert found == [], "use {% comment %} for comments of several lines"


def test_the_page_head_holds_no_text(client):
    """Text in <head> (a comment rendered as text, a stray character) makes the browser end
    the head there; the login page is rendered from base.html."""
    html = client.get("/login/").content.decode()
    head = html[html.index("<head>") + len("<head>") : html.index("</head>")]
    text = re.sub(r"<(script|style|title)\b.*?</\1>|<[^>]+>", "", head, flags=re.S)
    assert text.split() == []
