"""Site-wide error views of the composition root."""

from __future__ import annotations

from django.http import JsonResponse
from django.views import defaults


def not_found(request, exception=None):
    """404 for a path no route matches: JSON under /api/ (what API clients parse, in the
    API's error shape), the usual page elsewhere. Used when DEBUG is off."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"detail": f"no API endpoint at {request.path}", "code": "not_found"}, status=404
        )
    return defaults.page_not_found(request, exception)
