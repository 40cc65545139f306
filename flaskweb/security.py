"""Site-wide protections that are not a view's business: security headers on every
response (a Content-Security-Policy that allows no inline or foreign script), and login
throttling (failed sign-ins counted per username and per client address in the cache,
which is Redis in production, shared by every web process)."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache

#: Scripts, styles, images and fonts come from this site only; no plugins, no framing, no
#: foreign form targets. Inline style attributes are allowed (a few <pre> blocks use them;
#: they cannot run code); inline scripts and eval are not.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ]
)
PERMISSIONS_POLICY = "camera=(), microphone=(), geolocation=(), payment=(), usb=()"


class SecurityHeadersMiddleware:
    """Content-Security-Policy, Permissions-Policy and Cross-Origin-Opener-Policy on every
    response that does not set its own."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers.setdefault("Permissions-Policy", PERMISSIONS_POLICY)
        response.headers.setdefault("Cross-Origin-Opener-Policy", "same-origin")
        return response


def _keys(request) -> list[str]:
    username = request.POST.get("username", "")[:150].strip().casefold()
    digest = hashlib.sha256(username.encode()).hexdigest()[:32]
    address = request.META.get("REMOTE_ADDR", "") or "unknown"
    return [f"login-fail:user:{digest}", f"login-fail:addr:{address}"]


class ThrottledLoginView(auth_views.LoginView):
    """Django's login, refusing (429) further attempts for a username after
    LOGIN_FAILURES_PER_USER failures, or from one client address after
    LOGIN_FAILURES_PER_ADDRESS, within LOGIN_FAILURE_WINDOW seconds. A success clears the
    username's count. A refused attempt does not check the password at all."""

    def post(self, request, *args, **kwargs):
        user_key, address_key = _keys(request)
        limits = {
            user_key: settings.LOGIN_FAILURES_PER_USER,
            address_key: settings.LOGIN_FAILURES_PER_ADDRESS,
        }
        if any((cache.get(key) or 0) >= limit for key, limit in limits.items()):
            form = self.get_form()
            minutes = max(1, settings.LOGIN_FAILURE_WINDOW // 60)
            form.errors.clear()
            form.add_error(
                None,
                f"Too many failed sign-ins. Try again in {minutes} minutes, or ask an admin "
                "to reset your password.",
            )
            return self.render_to_response(self.get_context_data(form=form), status=429)
        response = super().post(request, *args, **kwargs)
        if response.status_code == 302:
            cache.delete(user_key)
        else:
            for key in limits:
                cache.add(key, 0, timeout=settings.LOGIN_FAILURE_WINDOW)
                try:
                    cache.incr(key)
                except ValueError:  # expired between add and incr
                    cache.set(key, 1, timeout=settings.LOGIN_FAILURE_WINDOW)
        return response
