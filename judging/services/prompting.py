"""What a judge is sent: a response paired with its skills (read once per task), and the chat
messages for one response or for one order of a pair."""

from __future__ import annotations

from dataclasses import dataclass

from annotation.models import Campaign, Response
from annotation.selectors import TaskSkill, skills_for_response
from judging import prompts
from judging.models import JudgeConfig
from judging.prompts import pairwise
from judging.selectors import prompt_of


@dataclass(frozen=True)
class JudgedResponse:
    """A response (with its item loaded) and the skills and rubrics it is judged on. Read
    once per task, so the prompt and the recorded scores use the same read (and 8 queries
    fewer per judgment than reading it three times)."""

    response: Response
    skills: list[TaskSkill]

    @property
    def skill_names(self) -> list[str]:
        return [s.name for s in self.skills]


def judged_response_read(*, response: Response, campaign: Campaign | None) -> JudgedResponse:
    """`response` with what it is scored on: in a campaign, what its annotators see."""
    return JudgedResponse(
        response=response, skills=skills_for_response(response=response, campaign=campaign)
    )


def response_messages(*, judge: JudgeConfig, target: JudgedResponse) -> list[dict]:
    """The chat messages asking `judge` to score `target`. Raises prompts.PromptError (e.g. a
    reference template on an item without a reference answer)."""
    template = judge.prompt_template
    assert template is not None, "an LLM judge gets a template when it is made"
    item = target.response.item
    return prompts.render(
        prompt_of(template),
        instruction=item.instruction,
        response=target.response.text,
        skills=target.skills,
        reference=item.reference_answer if template.with_reference else None,
    )


def pair_messages(
    *, judge: JudgeConfig, target: JudgedResponse, anchor: Response, order: int
) -> list[dict]:
    """The chat messages comparing challenger `target` with `anchor` on target's skills:
    order 0 shows the challenger first, order 1 the anchor first."""
    response = target.response
    item = response.item
    first, second = (response, anchor) if order == 0 else (anchor, response)
    template = pairwise.pair_template(with_reference=judge.use_reference)
    return pairwise.render_pair(
        template,
        instruction=item.instruction,
        first=first.text,
        second=second.text,
        skills=target.skills,
        reference=item.reference_answer if template.with_reference else None,
    )
