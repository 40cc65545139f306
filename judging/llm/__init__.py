"""How the workers talk to LLM providers, with no database: `clients` (the OpenAI-compatible
chat client and JudgeError(retryable)), `outbound` (where a call may connect: public
addresses only, unless a provider is local) and `ratelimit` (the request and token limit
shared by every worker through Redis). judging.services.calls puts them together."""
