"""Site-wide protections that are not a view's business: security headers on every
response (a Content-Security-Policy that allows no inline or foreign script), and sign-in
throttling for /login/ and the Django admin's login alike (attempts counted per username and
per client address in the cache, which is Redis in production, shared by every web
process)."""

from __future__ import annotations

import hashlib
import unicodedata

from django import forms
from django.conf import settings
from django.contrib.admin import AdminSite
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
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


# --- sign-in throttling -------------------------------------------------------------------------
#
# Invariant: an attempt is counted *before* its password is checked (a reservation), and it is
# checked only if its count is within the limits. Counting is Redis INCR (atomic; LocMem takes
# a lock), so of N parallel attempts at most `limit` are ever checked. A refused attempt gives
# its reservation back, and so does a success (which clears the username's count): a counter
# holds the failures in its window plus the attempts in flight. The window starts with the
# counter (the expiry is set when it is made, never extended).


def signin_username_key(username: str) -> str:
    """The username as Django's login form reads it (stripped, NFKC: "ｒｉｔａ" and "𝐫𝐢𝐭𝐚"
    are "rita"), case-folded; every spelling that may sign in as one user shares a count."""
    name = unicodedata.normalize("NFKC", username[:1000].strip()).casefold()
    return unicodedata.normalize("NFKC", name).strip()


def signin_keys(*, username: str, address: str) -> list[str]:
    """The cache keys of a sign-in attempt: its username's count and its address's."""
    digest = hashlib.sha256(signin_username_key(username).encode()).hexdigest()[:32]
    return [f"login-fail:user:{digest}", f"login-fail:addr:{address or 'unknown'}"]


def _count_up(key: str, window: int) -> int:
    if cache.add(key, 1, timeout=window):
        return 1
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr
        return 1 if cache.add(key, 1, timeout=window) else cache.incr(key)
    if count == 1:  # expired between the backend's exists and INCR: INCR made it, with no expiry
        cache.touch(key, window)
    return count


def _count_down(key: str) -> None:
    try:
        if cache.decr(key) <= 0:
            cache.delete(key)
    except ValueError:  # expired meanwhile
        pass


def rate_limit_exceeded(key: str, *, limit: int, window: int) -> bool:
    """Count one use of `key` in a fixed window of `window` seconds (the counters above,
    in the shared cache) and say whether it went past `limit`. For other throttles than
    sign-in (study links: annotation/study/); a refused use stays counted."""
    return _count_up(key, window) > limit


class SigninAttempt:
    """One sign-in attempt's place in the counts of its username and client address;
    `allowed` says whether its password may be checked."""

    def __init__(self, *, username: str, address: str) -> None:
        self.user_key, self.address_key = signin_keys(username=username, address=address)
        self.allowed = False
        window = settings.LOGIN_FAILURE_WINDOW
        if _count_up(self.user_key, window) > settings.LOGIN_FAILURES_PER_USER:
            _count_down(self.user_key)
            return
        if _count_up(self.address_key, window) > settings.LOGIN_FAILURES_PER_ADDRESS:
            _count_down(self.address_key)
            _count_down(self.user_key)
            return
        self.allowed = True

    def succeeded(self) -> None:
        cache.delete(self.user_key)
        _count_down(self.address_key)


def signin_refusal_message() -> str:
    minutes = max(1, settings.LOGIN_FAILURE_WINDOW // 60)
    return (
        f"Too many failed sign-ins. Try again in {minutes} minutes, or ask an admin to reset "
        "your password."
    )


class SigninThrottleMixin:
    """For AuthenticationForm subclasses: the password is checked only if the attempt's
    reservation is within LOGIN_FAILURES_PER_USER for its username and
    LOGIN_FAILURES_PER_ADDRESS for its client address (REMOTE_ADDR) within
    LOGIN_FAILURE_WINDOW seconds; otherwise the form is invalid with the code "throttled".
    A success clears the username's count; a failure stays counted."""

    def clean(self):
        request = self.request
        attempt = SigninAttempt(
            username=str(self.data.get("username", "")),
            address=request.META.get("REMOTE_ADDR", "") if request is not None else "",
        )
        if not attempt.allowed:
            raise forms.ValidationError(signin_refusal_message(), code="throttled")
        cleaned = super().clean()  # authenticates; raises if it fails
        if self.get_user() is not None:
            attempt.succeeded()
        return cleaned


class ThrottledAuthenticationForm(SigninThrottleMixin, AuthenticationForm):
    pass


class ThrottledAdminAuthenticationForm(SigninThrottleMixin, AdminAuthenticationForm):
    pass


def signin_refused_status(response):
    """429 for a login page answering a throttled attempt (its form is in the context)."""
    form = (getattr(response, "context_data", None) or {}).get("form")
    if form is not None and form.has_error(forms.forms.NON_FIELD_ERRORS, "throttled"):
        response.status_code = 429
    return response


class ThrottledLoginView(auth_views.LoginView):
    """Django's login with the sign-in throttle (429 when refused)."""

    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form):
        return signin_refused_status(super().form_invalid(form))


class ThrottledAdminSite(AdminSite):
    """The Django admin (the default site, through flaskweb.admin_config), whose login
    follows the same throttle as /login/."""

    login_form = ThrottledAdminAuthenticationForm

    def login(self, request, extra_context=None):
        return signin_refused_status(super().login(request, extra_context))
