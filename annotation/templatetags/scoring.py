"""The scoring card's skill rows (templates/annotation/_skill_row.html).

A row is about a hundred template nodes (five score buttons with spoken names, the rubric,
the checklist) and the same for every annotator shown the same skill at the same position:
a fresh (unanswered) row is rendered once per process and language and remembered, keyed by
everything the row template reads. A row redrawn with the annotator's own answers (an
error on submit) is rendered every time.
"""

from __future__ import annotations

from functools import lru_cache

from django import template
from django.template import Context, Template, engines
from django.utils import translation
from django.utils.safestring import SafeString, mark_safe

from annotation.selectors import TaskSkill

register = template.Library()

ROW_TEMPLATE = "annotation/_skill_row.html"
#: Fresh rows remembered per process: a row is about 4 KB, so at most about 8 MB.
ROWS_REMEMBERED = 2048


def _render(compiled: Template, skill: TaskSkill, value, rationale, n, total, limit) -> str:
    context = {
        "skill": skill,
        "row": {"value": value, "rationale": rationale},
        "n": n,
        "total": total,
        "max_rationale": limit,
    }
    return compiled.render(Context(context, autoescape=True))


@lru_cache(maxsize=ROWS_REMEMBERED)
def _fresh_row(
    compiled, language, skill_id, name, rubric_id, criterion, anchors, checklist, n, total, limit
) -> str:
    # `language` is in the key only: the row's translations follow the active language
    skill = TaskSkill(
        skill_id=skill_id,
        name=name,
        rubric_id=rubric_id,
        criterion=criterion,
        anchors=list(anchors),
        checklist=list(checklist),
    )
    return _render(compiled, skill, "", "", n, total, limit)


@register.simple_tag
def skill_row(row: dict, n: int, total: int, max_rationale: int) -> SafeString:
    """One skill row of the card: `row` is {"skill": TaskSkill, "value", "rationale"}. The
    compiled template is part of the key, so a template reloaded in development is a new
    key; the skill's texts, its position and the language are the rest."""
    # the loader's cached, compiled template (the backend's get_template wraps it anew)
    compiled = engines["django"].engine.get_template(ROW_TEMPLATE)  # type: ignore[attr-defined]
    skill, value, rationale = row["skill"], row["value"], row["rationale"]
    if value or rationale:
        html = _render(compiled, skill, value, rationale, n, total, max_rationale)
    else:
        html = _fresh_row(
            compiled,
            translation.get_language(),
            skill.skill_id,
            skill.name,
            skill.rubric_id,
            skill.criterion,
            tuple(skill.anchors),
            tuple(skill.checklist),
            n,
            total,
            max_rationale,
        )
    return mark_safe(html)  # noqa: S308 - a template's own autoescaped output
