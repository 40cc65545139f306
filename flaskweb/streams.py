"""Byte streams the importers share (pure: no Django, so the pure parsers may use it)."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from typing import IO


class HashingReader(io.RawIOBase):
    """Hashes and counts the bytes read through it, so a file is read once; `on_read` is
    told the running count (progress)."""

    def __init__(self, stream: IO[bytes], on_read: Callable[[int], None] | None = None) -> None:
        self.stream = stream
        self.digest = hashlib.sha256()
        self.count = 0
        self.on_read = on_read

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self.stream.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self.digest.update(data)
        self.count += n
        if self.on_read is not None:
            self.on_read(n)
        return n
