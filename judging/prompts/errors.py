"""The errors of prompt building: a prompt, a template or a prompt file that cannot be used."""

from __future__ import annotations


class PromptError(ValueError):
    """A prompt cannot be built from these inputs."""


class TemplateError(PromptError):
    """A template's text is invalid (unknown, missing or malformed placeholders)."""


class PromptFileError(PromptError):
    """A prompt file has bad lines; `errors` holds (line number, message) for each."""

    def __init__(self, errors: list[tuple[int, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"line {line}: {message}" for line, message in errors))
