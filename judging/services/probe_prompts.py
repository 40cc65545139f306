"""What a probe run's judge is sent: the base run's prompt with the probe's one change
(judging.prompts.probes), and which responses a probe run judges. Used by the batches (the
messages of each call, so the cache is keyed on what is really sent) and by the run's
fan-out (its responses: the base run's, or a deterministic sample of them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from annotation.models import Response
from judging import prompts
from judging.models import JudgeConfig, JudgeRun, Judgment, PairJudgment
from judging.prompts import pairwise
from judging.prompts import probes as transforms
from judging.selectors import prompt_of
from judging.services.prompting import JudgedResponse


@dataclass(frozen=True)
class Probe:
    """A probe run's change, with what it needs of the base run: the Overall verdict of
    each (challenger response, order) for the bandwagon probe."""

    kind: str
    params: Mapping[str, Any]
    base_overall: Mapping[tuple[int, int], str] = field(default_factory=dict)


def run_probe(run: JudgeRun, response_ids: list[int] | None = None) -> Probe | None:
    """The probe of `run` (None for an ordinary run); for a bandwagon probe, with the base
    run's verdicts of `response_ids` (all when None)."""
    if not run.probe:
        return None
    base_overall: dict[tuple[int, int], str] = {}
    if run.probe == "bandwagon" and run.base_run_id:
        rows = PairJudgment.objects.filter(run_id=run.base_run_id)
        if response_ids is not None:
            rows = rows.filter(response_id__in=response_ids)
        for response_id, order, verdicts in rows.values_list("response_id", "order", "verdicts"):
            overall = (verdicts or {}).get(pairwise.OVERALL)
            if isinstance(overall, str):
                base_overall[(response_id, order)] = overall
    return Probe(run.probe, dict(run.probe_params or {}), base_overall)


def probe_response_messages(
    *, judge: JudgeConfig, target: JudgedResponse, probe: Probe
) -> list[dict]:
    """The messages of a pointwise probe: response_messages with the probe's change."""
    template = judge.prompt_template
    assert template is not None, "an LLM judge gets a template when it is made"
    text = prompt_of(template)
    response = target.response
    item = response.item
    body = response.text
    skills: list[Any] = list(target.skills)
    if probe.kind == "pad":
        body = transforms.pad(body)
    elif probe.kind == "truncate":
        body = transforms.truncate(body, probe.params.get("share", transforms.DEFAULT_SHARE))
    elif probe.kind == "names_shown":
        body = transforms.names_shown(body, response.model_name)
    elif probe.kind == "rubric_order":
        skills = transforms.reorder(skills, probe.params.get("order", "reverse"))
    elif probe.kind == "reference":
        counterpart = None
        for builtin in prompts.BUILTIN_TEMPLATES.values():
            if builtin.content_hash == text.content_hash:
                counterpart = prompts.builtin_template(with_reference=not builtin.with_reference)
        text = transforms.reference_template(text, counterpart)
    else:
        raise prompts.PromptError(f"probe {probe.kind!r} is not a pointwise probe")
    return prompts.render(
        text,
        instruction=item.instruction,
        response=body,
        skills=skills,
        reference=item.reference_answer if text.with_reference else None,
    )


def probe_pair_messages(
    *, judge: JudgeConfig, target: JudgedResponse, anchor: Response, order: int, probe: Probe
) -> list[dict]:
    """The messages of one order of a pair with a pairwise probe's change."""
    response = target.response
    item = response.item
    challenger_text, anchor_text = response.text, anchor.text
    template = pairwise.pair_template(with_reference=judge.use_reference)
    if probe.kind == "distraction":
        sentence = probe.params.get("sentence", 0)
        if probe.params.get("target", "challenger") == "anchor":
            anchor_text = transforms.distraction(anchor_text, sentence)
        else:
            challenger_text = transforms.distraction(challenger_text, sentence)
    elif probe.kind == "bandwagon":
        line = transforms.bandwagon_line(
            target=str(probe.params.get("target", "unpreferred")),
            order=order,
            base_overall=probe.base_overall.get((response.pk, order)),
        )
        template = pairwise.PairTemplate(
            key=f"{template.key}-probe",
            version=template.version,
            system_prompt=template.system_prompt,
            user_template=transforms.with_note_after_responses(
                template.user_template, line, pairwise.SECOND_END
            ),
            with_reference=template.with_reference,
        )
    else:
        raise prompts.PromptError(f"probe {probe.kind!r} is not a pairwise probe")
    first, second = (challenger_text, anchor_text) if order == 0 else (anchor_text, challenger_text)
    return pairwise.render_pair(
        template,
        instruction=item.instruction,
        first=first,
        second=second,
        skills=target.skills,
        reference=item.reference_answer if template.with_reference else None,
    )


def probe_run_response_ids(
    run: JudgeRun, *, after_id: int, limit: int, last_id: int | None = None
) -> list[int]:
    """The responses a probe run judges, by id, after `after_id` (up to `last_id`): those
    its base run judged, narrowed to the probe's sample (probe_params["responses"]) when it
    has one."""
    rows = PairJudgment.objects if run.pairwise_against else Judgment.objects
    qs = rows.filter(run_id=run.base_run_id, response_id__gt=after_id)
    if last_id is not None:
        qs = qs.filter(response_id__lte=last_id)
    sample = (run.probe_params or {}).get("responses")
    if sample is not None:
        qs = qs.filter(response_id__in=sample)
    return list(qs.order_by("response_id").values_list("response_id", flat=True).distinct()[:limit])
