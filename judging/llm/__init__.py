"""How the workers talk to LLM providers, with no database: `clients` (the OpenAI-compatible
chat clients, sync and asyncio, and JudgeError(retryable)), `outbound` (where a call may
connect: public addresses only, unless a provider is local), `ratelimit` (the request and
token limit shared by every worker through Redis, or kept in the process without Redis) and
`engine` (many calls in flight per worker process on one event loop). judging.services.calls
says what a call is and judging.services.batches drives the engine."""
