"""Writes of the judging app, by concern (docs/JUDGING.md has the contract of a run):

- `templates`: prompt templates as versioned rows (built-in, custom, imported);
- `providers`: a provider's checks, its usability by a project, its key and prices;
- `judges`: judge configurations (LLM judges and baselines);
- `prompting`: a response with its skills (`JudgedResponse`) and the messages sent;
- `estimates`: a run's calls, tokens and cost before it starts, and what tokens cost;
- `runs`: a run's life: create, start/resume, pause/cancel, dispatch, budget, finish, sweeps;
- `calls`: what one LLM call is: its request, provider and key, cache key, rate limit;
- `batches`: a batch of judgments (the unit of work of a task) on this process's judging
  engine (judging.llm.engine): planned, answered from the cache, called many at a time,
  written many per transaction, stopped by a pause, cancel or budget;
- `recording`: judgments (many at a time), their scores and the run's counters, in one
  transaction; an offline baseline's judgment;
- `pairwise`: recording one order of a pair;
- `responses`: judging one response (a batch of one).

What views, APIs, commands, tasks and other apps call is re-exported here.
"""

from judging.services.batches import judge_batch, judge_batch_range
from judging.services.estimates import judge_run_estimate
from judging.services.judges import judge_config_create
from judging.services.providers import provider_problems, provider_save
from judging.services.responses import judge_response
from judging.services.runs import (
    KEEP_BUDGET,
    judge_run_create,
    judge_run_dispatch,
    judge_run_set_status,
    judge_run_start,
    judge_runs_fail_stale,
    judge_runs_redispatch_stalled,
)
from judging.services.templates import (
    prompt_template_builtin,
    prompt_template_create,
    prompt_template_import,
)

__all__ = [
    "KEEP_BUDGET",
    "judge_batch",
    "judge_batch_range",
    "judge_config_create",
    "judge_response",
    "judge_run_create",
    "judge_run_dispatch",
    "judge_run_estimate",
    "judge_run_set_status",
    "judge_run_start",
    "judge_runs_fail_stale",
    "judge_runs_redispatch_stalled",
    "prompt_template_builtin",
    "prompt_template_create",
    "prompt_template_import",
    "provider_problems",
    "provider_save",
]
