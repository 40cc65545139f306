"""A local OpenAI-compatible chat server that answers like a FLASK judge.

Tests and benchmarks of the model judges drive it over real HTTP on 127.0.0.1, with latency,
rate limits and faults injected on demand, instead of mocking the client in-process. Standard
library only (plus the pure pair-prompt markers of judging.prompts.pairwise), no Django. The
conventions (skill detection, scores, fault kinds) are described in docs/OPENAI_SERVER.md.

    with FakeOpenAIServer(style="json", latency=0.05) as server:
        ...  # point any OpenAI-compatible client at server.url (http://127.0.0.1:PORT/v1)

    python -m devtools.openai_server --port 8089 --latency 0.2 --rpm 600 --fault-rate 0.3

Modules: `answers` (what the fake judge says: token counts, skill detection, deterministic
scores and verdicts, reply styles), `config` (ServerConfig and its checks), `server`
(FakeOpenAIServer and its HTTP plumbing), `remote` (the /_admin calls for a server in
another process), `__main__` (the command line).
"""

from devtools.openai_server.answers import (
    FLASK_SKILLS,
    NA,
    STYLES,
    count_tokens,
    detect_skills,
    expected_pair_choices,
    expected_scores,
    prompt_tokens_of,
    render_answer,
)
from devtools.openai_server.config import FAULT_KINDS, ServerConfig
from devtools.openai_server.remote import admin_configure, admin_reset, admin_stats
from devtools.openai_server.server import FakeOpenAIServer

__all__ = [
    "FAULT_KINDS",
    "FLASK_SKILLS",
    "NA",
    "STYLES",
    "FakeOpenAIServer",
    "ServerConfig",
    "admin_configure",
    "admin_reset",
    "admin_stats",
    "count_tokens",
    "detect_skills",
    "expected_pair_choices",
    "expected_scores",
    "prompt_tokens_of",
    "render_answer",
]
