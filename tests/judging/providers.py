"""Providers for tests: what a site admin declares before a researcher can make an LLM
judge. The project's local OpenAI-compatible server listens on 127.0.0.1, so the providers
made here are marked local (judging.llm.outbound refuses loopback addresses otherwise)."""

from __future__ import annotations

import hashlib

from judging.models import Provider


def provider_for(url: str, *, key_env: str = "", local: bool = True, **extra) -> Provider:
    """The approved provider of `url` with the key in variable `key_env` (made once)."""
    digest = hashlib.sha256(f"{url}|{key_env}|{local}|{sorted(extra.items())}".encode())
    name = "test-" + digest.hexdigest()[:12]
    provider, _ = Provider.objects.get_or_create(
        name=name,
        defaults={
            "base_urls": [url],
            "api_key_env": key_env,
            "is_local": local,
            "approved": True,
            **extra,
        },
    )
    return provider


def llm_fields(url: str, *, api_key_env: str = "", **extra) -> dict:
    """The provider and base URL fields of judge_config_create for a judge calling `url`."""
    return {"provider": provider_for(url, key_env=api_key_env, **extra), "base_url": url}
