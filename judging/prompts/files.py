"""The official FLASK review-prompt file format: one JSON object per line, read into
TemplateTexts with every bad line reported."""

from __future__ import annotations

import json
import re

from .errors import PromptError, PromptFileError, TemplateError
from .templates import (
    TEMPLATE_TOKEN,
    TemplateText,
    escape_braces,
    placeholder_list,
    template_fields,
)

# --- the official FLASK prompt-file format ------------------------------------------------------

#: Longest template key stored (judging.models.TemplateText.key, a slug).
MAX_KEY_CHARS = 80
_SLUG = re.compile(r"[-a-zA-Z0-9_]+")
#: What no text column takes: NUL, and half of a UTF-16 surrogate pair.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

#: FLASK placeholder -> ours. {prompt1}/{prompt2} (any key of "defaults") are filled in.
_FLASK_PLACEHOLDERS = {
    "question": "instruction",
    "instruction": "instruction",
    "answer": "reference",
    "sample_answer": "reference",
    "reference": "reference",
    "response": "response",
    "skills": "skills",
}


def import_flask_prompt_file(
    text: str, *, key_prefix: str = "flask-file", version: str = "1"
) -> list[TemplateText]:
    """Templates from a FLASK review-prompt file: one JSON object per line with `prompt_id`,
    `system_prompt`, `prompt_template` and optional `defaults` (texts for {prompt1}, ...) and
    `description`. {question} becomes {instruction}, {answer} or {sample_answer} becomes
    {reference}. Raises PromptFileError listing every bad line."""
    errors: list[tuple[int, str]] = []
    templates: list[TemplateText] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            template = _flask_line(raw, key_prefix=key_prefix, version=version)
        except (PromptError, ValueError) as exc:
            errors.append((number, str(exc)))
            continue
        if template.key in seen:
            errors.append((number, f"prompt_id repeats line {seen[template.key]}"))
            continue
        seen[template.key] = number
        templates.append(template)
    if not templates and not errors:
        errors.append((1, "the file holds no prompt"))
    if errors:
        raise PromptFileError(errors)
    return templates


def _flask_line(raw: str, *, key_prefix: str, version: str) -> TemplateText:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise PromptError(f"not valid JSON ({exc.msg} at column {exc.colno})")
    except RecursionError:
        raise PromptError("not valid JSON (nested too deeply)")
    if not isinstance(data, dict):
        raise PromptError("a line must be a JSON object")
    missing = [k for k in ("prompt_id", "system_prompt", "prompt_template") if k not in data]
    if missing:
        raise PromptError(f"missing key(s): {', '.join(missing)}")
    prompt_id = data["prompt_id"]
    if isinstance(prompt_id, bool) or not isinstance(prompt_id, int | str) or prompt_id == "":
        raise PromptError("prompt_id must be a number or a non-empty string")
    longest = MAX_KEY_CHARS - len(key_prefix) - 1
    if not _SLUG.fullmatch(str(prompt_id)) or len(str(prompt_id)) > longest:
        raise PromptError(
            f"prompt_id must be 1-{longest} letters, digits, '-' or '_', not {prompt_id!r}"
        )
    system_prompt, body = data["system_prompt"], data["prompt_template"]
    if not isinstance(system_prompt, str) or not isinstance(body, str):
        raise PromptError("system_prompt and prompt_template must be strings")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in defaults.items()
    ):
        raise PromptError("defaults must be an object of strings")
    description = data.get("description") or ""
    if not isinstance(description, str):
        raise PromptError("description must be a string")
    texts = [("system_prompt", system_prompt), ("prompt_template", body)]
    texts += [("description", description), *((f"defaults[{k!r}]", v) for k, v in defaults.items())]
    for label, text in texts:
        if found := _UNSTORABLE.search(text):  # a database error otherwise
            code = ord(found.group())
            what = "a NUL character" if code == 0 else "half a surrogate pair"
            raise PromptError(f"{label} holds {what} (\\u{code:04x}), which cannot be stored")
    clash = sorted(set(defaults) & set(_FLASK_PLACEHOLDERS))
    if clash:
        raise PromptError(f"defaults may not replace {placeholder_list(clash)}")
    allowed = set(_FLASK_PLACEHOLDERS) | set(defaults)
    used = {
        _FLASK_PLACEHOLDERS.get(n, n)
        for n in template_fields(body, allowed=allowed, where="prompt_template")
    }
    absent = [
        flask_name
        for flask_name, ours in (
            ("question", "instruction"),
            ("response", "response"),
            ("skills", "skills"),
        )
        if ours not in used
    ]
    if absent:
        raise PromptError(f"prompt_template must contain {placeholder_list(absent)}")

    def translate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return match.group(0)  # "{{" or "}}": stays escaped
        if name in defaults:
            return escape_braces(defaults[name])
        return "{" + _FLASK_PLACEHOLDERS[name] + "}"

    user_template = TEMPLATE_TOKEN.sub(translate, body)
    try:
        return TemplateText(
            key=f"{key_prefix}-{prompt_id}",
            version=version,
            system_prompt=escape_braces(system_prompt),
            user_template=user_template,
            with_reference="{reference}" in user_template,
            description=description,
        )
    except TemplateError as exc:  # only reachable through an odd key_prefix
        raise PromptError(str(exc))
