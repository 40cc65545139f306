"""Site-wide views of the composition root: error pages and the favicon."""

from __future__ import annotations

from django.http import HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe

# The site's icon: a rounded square with a check mark, in the app's accent colour. Served at
# /favicon.ico, where every browser looks (the Django admin and the API docs too).
FAVICON_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<rect width="32" height="32" rx="7" fill="#2458c6"/>'
    '<path d="M8 17l5 5 11-12" fill="none" stroke="#fff" stroke-width="3.5" '
    'stroke-linecap="round" stroke-linejoin="round"/></svg>'
)


@require_safe
@cache_control(public=True, max_age=7 * 24 * 3600)
def favicon(request):
    return HttpResponse(FAVICON_SVG, content_type="image/svg+xml")


def not_found(request, exception=None):
    """404 for a path no route matches: JSON under /api/ (what API clients parse, in the
    API's error shape), the usual page elsewhere. Used when DEBUG is off."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"detail": f"no API endpoint at {request.path}", "code": "not_found"}, status=404
        )
    return defaults.page_not_found(request, exception)
