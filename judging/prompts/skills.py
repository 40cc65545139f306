"""The skills block of a prompt: each skill with its criterion, five anchors and the
item's checklist, in the wording of the annotator's scoring card."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import PromptError
from .names import SkillMatcher

SKILLS_BLOCK_START = "[Skills to score]"
SKILLS_BLOCK_END = "[End of skills to score]"
#: Bumped whenever render_skills_block's layout changes: it is part of every template's
#: content hash, because the block is part of what the judge reads.
SKILLS_BLOCK_VERSION = 1


# --- skills ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeSkill:
    """One skill as the judge sees it: the same wording as the annotator's scoring card."""

    name: str
    criterion: str
    anchors: tuple[str, ...]  # five level descriptions, score 1 (worst) to 5
    checklist: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "anchors", tuple(self.anchors))
        object.__setattr__(self, "checklist", tuple(self.checklist or ()))
        if not isinstance(self.name, str) or not _one_line(self.name):
            raise PromptError("a skill needs a name")
        if len(self.anchors) != 5 or not all(
            isinstance(a, str) and a.strip() for a in self.anchors
        ):
            raise PromptError(f"skill {self.name!r} needs exactly five non-empty score anchors")

    @classmethod
    def of(cls, skill: Any) -> JudgeSkill:
        """A JudgeSkill from a JudgeSkill, a mapping, or any object with the same attributes
        (annotation's TaskSkill, a SkillText plus checklist, ...)."""
        if isinstance(skill, JudgeSkill):
            return skill
        if isinstance(skill, Mapping):
            get = skill.get
        else:

            def get(attr: str, default: Any = None) -> Any:
                return getattr(skill, attr, default)

        return cls(
            name=get("name", ""),
            criterion=get("criterion", "") or "",
            anchors=tuple(get("anchors", ()) or ()),
            checklist=tuple(get("checklist", ()) or ()),
        )


def _one_line(text: str) -> str:
    # The scoring card shows these texts in HTML, where runs of whitespace collapse to one
    # space; the judge gets the same. It also keeps a stray "Skill:" at a line start out of
    # the skills block.
    return " ".join(str(text).split())


def _checked_skills(skills: Iterable[Any]) -> list[JudgeSkill]:
    result = [JudgeSkill.of(s) for s in skills]
    if not result:
        raise PromptError("at least one skill is needed")
    SkillMatcher([s.name for s in result])  # rejects names a reply could not tell apart
    return result


def render_skills_block(skills: Iterable[Any]) -> str:
    """The {skills} text: a delimited block with, per skill, a `Skill: <name>` line, the
    criterion, the five anchors as `Score 1: ...` to `Score 5: ...`, and the item's checklist."""
    lines = [SKILLS_BLOCK_START]
    for index, skill in enumerate(_checked_skills(skills)):
        if index:
            lines.append("")
        lines.append(f"Skill: {_one_line(skill.name)}")
        if skill.criterion.strip():
            lines.append(f"Criterion: {_one_line(skill.criterion)}")
        lines.extend(
            f"Score {level}: {_one_line(anchor)}" for level, anchor in enumerate(skill.anchors, 1)
        )
        checks = [_one_line(c) for c in skill.checklist if str(c).strip()]
        if checks:
            lines.append("Check for this item:")
            lines.extend(f"- {c}" for c in checks)
    lines.append(SKILLS_BLOCK_END)
    return "\n".join(lines)


def skill_names_from_prompt(prompt: str | Sequence[Mapping[str, Any]]) -> list[str]:
    """The skill names of the first skills block in a rendered prompt (a user message's text,
    or the message list): what a fake judge needs to answer in the expected shape."""
    if not isinstance(prompt, str):
        prompt = "\n".join(
            str(m.get("content") or "") for m in prompt if m.get("role") in ("user", None)
        )
    start = prompt.find(SKILLS_BLOCK_START)
    if start < 0:
        return []
    end = prompt.find(SKILLS_BLOCK_END, start)
    block = prompt[start : end if end >= 0 else len(prompt)]
    return [
        line[len("Skill: ") :].strip() for line in block.splitlines() if line.startswith("Skill: ")
    ]
