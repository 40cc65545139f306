"""The client's address behind a reverse proxy (docs/SERVING.md).

Behind Caddy or nginx every request reaches the web server from the proxy, so REMOTE_ADDR
is the proxy's address for everyone, and the per-address limits (sign-in throttling, study
link visits) would count the whole crowd as one client. When REMOTE_ADDR is one of
FLASKWEB_TRUSTED_PROXIES, the client is the right-most address of X-Forwarded-For that is
not a trusted proxy (each proxy appends the address it was reached from; what the client
wrote itself is further left and never read). Off when FLASKWEB_TRUSTED_PROXIES is empty.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings


def forwarded_client(header: str, trusted: frozenset[str]) -> str | None:
    """The right-most address of an X-Forwarded-For value that is not a trusted proxy;
    None when there is none or a value on the way is not an IP address."""
    for part in reversed(header.split(",")):
        try:
            address = str(ipaddress.ip_address(part.strip()))
        except ValueError:
            return None
        if address not in trusted:
            return address
    return None


class ForwardedForMiddleware:
    """REMOTE_ADDR from X-Forwarded-For for requests a trusted proxy passed on. First in
    MIDDLEWARE, so every later reader (throttles, logs) sees the client."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        trusted = frozenset(settings.FLASKWEB_TRUSTED_PROXIES)
        if trusted and request.META.get("REMOTE_ADDR") in trusted:
            client = forwarded_client(request.META.get("HTTP_X_FORWARDED_FOR", ""), trusted)
            if client:
                request.META["REMOTE_ADDR"] = client
        return self.get_response(request)
