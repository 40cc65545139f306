"""Helpers for a fake server running in another process (a benchmark's or the demo's):
its /_admin endpoints over HTTP."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


# --------------------------------------------------------------------------------------------
# Helpers for a server in another process
# --------------------------------------------------------------------------------------------


def _admin_url(url: str, endpoint: str) -> str:
    parts = urlsplit(url)
    if parts.scheme != "http" or parts.hostname not in _LOOPBACK:
        raise ValueError(f"not a local server URL: {url!r}")
    return f"http://{parts.netloc}/_admin/{endpoint}"


def _admin_call(url: str, endpoint: str, payload: Mapping[str, Any] | None) -> dict[str, Any]:
    data = None if payload is None else json.dumps(dict(payload)).encode()
    request = urllib.request.Request(
        _admin_url(url, endpoint),
        data=data,
        method="GET" if payload is None else "POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def admin_configure(url: str, **updates: Any) -> dict[str, Any]:
    """`POST /_admin/config` on the local server at `url` (its base or `/v1` URL)."""
    return _admin_call(url, "config", updates)


def admin_stats(url: str) -> dict[str, Any]:
    """`GET /_admin/stats` on the local server at `url`."""
    return _admin_call(url, "stats", None)


def admin_reset(url: str) -> dict[str, Any]:
    """`POST /_admin/reset` on the local server at `url`."""
    return _admin_call(url, "reset", {})
