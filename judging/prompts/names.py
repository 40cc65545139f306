"""How a skill name written by a judge is matched to the name it was asked about."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from .errors import PromptError


def name_key(text: str) -> str:
    return " ".join(re.sub(r"[\W_]+", " ", text.casefold()).split())


_NAME_PREFIXES = ("skill ", "score for ", "score of ", "rating for ", "rating of ")
_NAME_SUFFIXES = (" score", " rating")


class SkillMatcher:
    """Maps a key written by the judge to the asked skill name: case, spaces, underscores,
    hyphens and markdown do not matter, and a "skill"/"score for" prefix or "score" suffix
    is dropped. Nothing fuzzier: "Correctness" is not "Logical Correctness"."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = list(names)
        if not self.names:
            raise PromptError("at least one skill name is needed")
        self.by_norm: dict[str, str] = {}
        for name in self.names:
            key = name_key(name) if isinstance(name, str) else ""
            if not key:
                raise PromptError(f"invalid skill name {name!r}")
            if key in self.by_norm:
                raise PromptError(f"skill names {self.by_norm[key]!r} and {name!r} are the same")
            self.by_norm[key] = name

    def __call__(self, raw: Any) -> str | None:
        if not isinstance(raw, str):
            return None
        key = name_key(raw)
        if key in self.by_norm:
            return self.by_norm[key]
        for prefix in _NAME_PREFIXES:
            if key.startswith(prefix) and key[len(prefix) :] in self.by_norm:
                return self.by_norm[key[len(prefix) :]]
        for suffix in _NAME_SUFFIXES:
            if key.endswith(suffix) and key[: -len(suffix)] in self.by_norm:
                return self.by_norm[key[: -len(suffix)]]
        return None
