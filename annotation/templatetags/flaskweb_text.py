from django import template
from django.utils.safestring import mark_safe

from annotation.rendering import markdown_to_safe_html_cached

register = template.Library()


@register.filter
def markdown_safe(text: str) -> str:
    """Markdown -> sanitised HTML (see annotation.rendering; remembered per text)."""
    return mark_safe(markdown_to_safe_html_cached(text))  # noqa: S308 - sanitised by nh3


@register.filter
def percent(done, total) -> int:
    try:
        return max(0, min(100, round(100 * float(done) / float(total))))
    except (TypeError, ValueError, ZeroDivisionError):
        return 0
