"""Typed htmx request and the "page.html#partial" picker (django-htmx + template partials)."""

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def template_for(request: HttpRequest, page: str, partial: str) -> str:
    """Render only the named partial for htmx requests, the whole page otherwise."""
    return f"{page}#{partial}" if getattr(request, "htmx", False) else page
