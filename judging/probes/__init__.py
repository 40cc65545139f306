"""Bias probes on the web and the API: start a probe run from a finished run's page, and
declare the model families of a project's systems and judges (docs/JUDGE_TRUST.md). The
writes are judging.services.probes; the prompt changes judging.prompts.probes."""
