"""Prompt templates as versioned, append-only rows: the built-in ones, custom ones and those
imported from a FLASK review-prompt file."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from annotation.models import Project
from judging import prompts
from judging.models import PromptTemplate, TemplateSource


def json_digest(value: Any) -> str:
    """sha256 of `value` as canonical JSON (sorted keys): the content hash of a template and
    the key of a cached LLM answer."""
    return hashlib.sha256(
        json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode()
    ).hexdigest()


def prompt_template_builtin(*, with_reference: bool) -> PromptTemplate:
    """The built-in FLASK-style template (project wording) as a versioned row."""
    text = prompts.builtin_template(with_reference=with_reference)
    key = "flask-reference" if with_reference else "flask-no-reference"
    digest = json_digest([text.system_prompt, text.user_template, with_reference])
    existing = PromptTemplate.objects.filter(project__isnull=True, key=key).order_by("-version")
    latest = existing.first()
    if latest is not None and latest.content_hash == digest:
        return latest
    return PromptTemplate.objects.create(
        project=None,
        key=key,
        version=(latest.version + 1) if latest else 1,
        name="FLASK judge, " + ("with" if with_reference else "without") + " reference answer",
        system_prompt=text.system_prompt,
        user_template=text.user_template,
        with_reference=with_reference,
        source=TemplateSource.BUILTIN,
        content_hash=digest,
    )


def prompt_template_save(
    *,
    project: Project,
    template: prompts.TemplateText,
    name: str,
    source: str,
    created_by=None,
) -> tuple[PromptTemplate, bool]:
    """Save `template` as a version of the project's template `template.key`. Append-only:
    when the latest version has the same content hash it is returned (created=False);
    otherwise the text becomes version latest + 1. Two saves racing for one version number
    meet on the unique constraint, and the loser retries on top of the winner's row."""
    for _ in range(3):
        latest = (
            PromptTemplate.objects.filter(project=project, key=template.key)
            .order_by("-version")
            .first()
        )
        if latest is not None and latest.content_hash == template.content_hash:
            return latest, False
        row = PromptTemplate(
            project=project,
            key=template.key,
            version=(latest.version + 1) if latest else 1,
            name=(name or template.key)[:200],
            system_prompt=template.system_prompt,
            user_template=template.user_template,
            with_reference=template.with_reference,
            source=source,
            content_hash=template.content_hash,
            created_by=created_by,
        )
        row.full_clean(validate_constraints=False)
        try:
            with transaction.atomic():
                row.save()
        except IntegrityError:
            continue
        return row, True
    raise ValidationError("the template was saved by someone else meanwhile; try again")


def prompt_template_create(
    *,
    project: Project,
    key: str,
    name: str,
    user_template: str,
    system_prompt: str | None = None,
    created_by=None,
) -> tuple[PromptTemplate, bool]:
    """A custom template (see prompt_template_save for versioning). Raises
    prompts.TemplateError, naming the line of every bad placeholder."""
    template = prompts.TemplateText.from_text(user_template, key=key, system_prompt=system_prompt)
    return prompt_template_save(
        project=project,
        template=template,
        name=name,
        source=TemplateSource.CUSTOM,
        created_by=created_by,
    )


@transaction.atomic
def prompt_template_import(
    *, project: Project, text: str, created_by=None
) -> list[tuple[PromptTemplate, bool]]:
    """Every prompt of a FLASK review-prompt file (judging.prompts.import_flask_prompt_file),
    keyed flask-file-<prompt_id>, or none: raises prompts.PromptFileError listing the bad
    lines. Unchanged prompts keep their version."""
    return [
        prompt_template_save(
            project=project,
            template=template,
            name=template.description or template.key,
            source=TemplateSource.IMPORT,
            created_by=created_by,
        )
        for template in prompts.import_flask_prompt_file(text)
    ]
