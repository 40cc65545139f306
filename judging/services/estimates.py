"""What a run will cost before it starts (calls, tokens, money), and what tokens cost."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from annotation.models import Campaign, Dataset
from annotation.selectors import (
    anchor_response_for,
    pair_challenger_count,
    pair_challenger_ids,
    response_count_for_run,
    response_for_judging,
    response_ids_for_run,
)
from judging import prompts
from judging.models import JudgeConfig, JudgeKind
from judging.services.prompting import judged_response_read, pair_messages, response_messages


@dataclass(frozen=True)
class RunEstimate:
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal


def token_prices(judge: JudgeConfig) -> tuple[float, float]:
    """USD per prompt token and per completion token of `judge` (what the engine's activity
    figures charge an answer: flaskweb_judge_cost_usd_total in docs/OPERATIONS.md)."""
    return (
        float(judge.price_per_1k_prompt) / 1000,
        float(judge.price_per_1k_completion) / 1000,
    )


def tokens_cost(judge: JudgeConfig, prompt_tokens: int, completion_tokens: int) -> Decimal:
    """The price of these tokens at the judge's prices per 1k tokens."""
    return (
        judge.price_per_1k_prompt * Decimal(prompt_tokens)
        + judge.price_per_1k_completion * Decimal(completion_tokens)
    ) / Decimal(1000)


def judge_run_estimate(
    *, judge: JudgeConfig, dataset: Dataset, campaign: Campaign | None, pairwise_against: str = ""
) -> RunEstimate:
    """Calls, tokens and cost before starting: prompt tokens from rendering a sample of the
    responses, completion tokens from the judge's max_tokens (an upper bound)."""
    if pairwise_against:
        return pair_run_estimate(
            judge=judge, dataset=dataset, campaign=campaign, anchor_model=pairwise_against
        )
    models = campaign.model_names if campaign else None
    responses = response_count_for_run(dataset_id=dataset.pk, model_names=models)
    calls = responses * judge.samples
    if judge.kind != JudgeKind.LLM or responses == 0:
        return RunEstimate(calls, 0, 0, Decimal(0))
    sample_ids = response_ids_for_run(dataset_id=dataset.pk, model_names=models, limit=20)
    tokens = [
        prompts.estimate_tokens(
            response_messages(
                judge=judge,
                target=judged_response_read(
                    response=response_for_judging(response_id=rid), campaign=campaign
                ),
            )
        )
        for rid in sample_ids
    ]
    prompt_tokens = int(sum(tokens) / len(tokens) * calls)
    completion_tokens = judge.max_tokens * calls
    return RunEstimate(
        calls,
        prompt_tokens,
        completion_tokens,
        tokens_cost(judge, prompt_tokens, completion_tokens),
    )


def pair_run_estimate(
    *, judge: JudgeConfig, dataset: Dataset, campaign: Campaign | None, anchor_model: str
) -> RunEstimate:
    """Two calls per pair (both orders); prompt tokens from rendering a few pairs."""
    models = campaign.model_names if campaign else None
    pairs = pair_challenger_count(
        dataset_id=dataset.pk, anchor_model=anchor_model, model_names=models
    )
    calls = 2 * pairs
    sample = pair_challenger_ids(
        dataset_id=dataset.pk, anchor_model=anchor_model, model_names=models, limit=10
    )
    tokens = []
    for rid in sample:
        response = response_for_judging(response_id=rid)
        anchor = anchor_response_for(response=response, anchor_model=anchor_model)
        assert anchor is not None, "pair_challenger_ids lists responses that have an anchor"
        target = judged_response_read(response=response, campaign=campaign)
        messages = pair_messages(judge=judge, target=target, anchor=anchor, order=0)
        tokens.append(prompts.estimate_tokens(messages))
    prompt_tokens = int(sum(tokens) / len(tokens) * calls) if tokens else 0
    completion_tokens = judge.max_tokens * calls
    return RunEstimate(
        calls,
        prompt_tokens,
        completion_tokens,
        tokens_cost(judge, prompt_tokens, completion_tokens),
    )
