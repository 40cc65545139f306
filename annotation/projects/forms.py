"""The new-project form (site admins): a name, the slug of the project's address (derived
from the name when left empty) and a description."""

from __future__ import annotations

from dataclasses import dataclass

from django import forms
from django.utils.text import slugify

from annotation import access
from annotation.models import Project
from annotation.services.projects import RESERVED_SLUGS

SLUG_MAX = Project._meta.get_field("slug").max_length


@dataclass(frozen=True)
class SlugHint:
    """The slug a new project would get and, when it cannot have it, why."""

    slug: str
    derived: bool  # made from the name, not typed
    problem: str = ""


def slug_hint(*, name: str, slug: str) -> SlugHint:
    """The slug typed, else the name's; the problem with it, in words an admin can act on."""
    typed = slug.strip()
    candidate = typed or slugify(name)[:SLUG_MAX].strip("-_")
    return SlugHint(slug=candidate, derived=not typed, problem=_problem(candidate, typed, name))


def _problem(candidate: str, typed: str, name: str) -> str:
    if not candidate:
        return "type a slug: letters, digits and hyphens" if name.strip() else ""
    if typed and slugify(typed) != typed:
        suggestion = slugify(typed)
        return "a slug has only lower-case letters, digits, hyphens and underscores" + (
            f": {suggestion} would do" if suggestion else ""
        )
    if candidate in RESERVED_SLUGS:
        return f"{candidate} is the name of a page of the site: choose another slug"
    if access.project_exists(candidate):
        return f"a project with the slug {candidate} exists: choose another slug"
    return ""


class ProjectCreateForm(forms.Form):
    name = forms.CharField(max_length=200)
    slug = forms.CharField(
        max_length=SLUG_MAX,
        required=False,
        help_text="The project's address, /projects/<slug>/. Left empty, it is made from the name.",
    )
    description = forms.CharField(
        max_length=5000, required=False, widget=forms.Textarea(attrs={"rows": 3})
    )

    def clean(self):
        data = super().clean()
        if "name" not in data:
            return data
        hint = slug_hint(name=data["name"], slug=data.get("slug", ""))
        if hint.problem or not hint.slug:
            self.add_error("slug", hint.problem or "type a slug: letters, digits and hyphens")
        else:
            data["slug"] = hint.slug
        return data
