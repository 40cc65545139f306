"""The message storage: Django's FallbackStorage (a signed cookie first, the session for
what does not fit), with its two storages made on first use.

Django's MessageMiddleware makes the request's storage on every request, and
FallbackStorage makes both of its storages at once: the cookie storage derives its signing
key there. Most requests never read or add a message (every JSON API request, the scoring
card's htmx answers), and a storage nobody used writes nothing back, so making the two on
first use changes no behaviour: a message added on one request is shown on the next, as
before (tests/test_messages_storage.py)."""

from __future__ import annotations

from functools import cached_property

from django.contrib.messages.storage.base import BaseStorage
from django.contrib.messages.storage.fallback import FallbackStorage


class LazyFallbackStorage(FallbackStorage):
    def __init__(self, request, *args, **kwargs):
        BaseStorage.__init__(self, request, *args, **kwargs)
        self._storage_args = (args, kwargs)
        self._used_storages = set()

    @cached_property
    def storages(self):  # type: ignore[override]
        args, kwargs = self._storage_args
        return [
            storage_class(self.request, *args, **kwargs) for storage_class in self.storage_classes
        ]
