"""Judge providers (declared by site admins): their settings' checks, whether a project's
judges may call one, its key (read on the worker, never stored) and its price table."""

from __future__ import annotations

import os
import re
from decimal import Decimal
from pathlib import Path

from django.core.exceptions import ValidationError

from judging.llm import outbound
from judging.llm.clients import JudgeError
from judging.models import Provider

ENV_VAR_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
#: Variables of the server itself that no provider may name, whoever declares it: a typo
#: or a careless admin would otherwise send the site's own secrets as a bearer token.
SERVER_VARIABLES = re.compile(
    r"(DJANGO_|DATABASE_|REDIS_|CELERY_|POSTGRES|PG[A-Z]*$|AWS_|GOOGLE_APPLICATION"
    r"|HOME$|PATH$|USER$|SHELL$|PWD$|HOSTNAME$)"
)


def provider_problems(
    *, base_urls, api_key_env: str, api_key_file: str, is_local: bool, prices
) -> dict[str, str]:
    """What is wrong with a provider's settings, per field (the admin form, the command and
    provider_save alike). Base URLs of a provider that is not local must resolve to public
    addresses now (and are checked again at every connection: judging.llm.outbound)."""
    errors: dict[str, str] = {}
    if (
        not isinstance(base_urls, list)
        or not base_urls
        or not all(isinstance(u, str) and u for u in base_urls)
    ):
        errors["base_urls"] = 'Give a list of base URLs, e.g. ["https://api.openai.com/v1"].'
    else:
        for url in base_urls:
            problem = outbound.url_problem(url)
            if not problem and not is_local:
                parts = url.split("//", 1)[1].split("/", 1)[0]
                host = parts.rsplit("@", 1)[-1]
                host = host[1:].split("]", 1)[0] if host.startswith("[") else host.split(":")[0]
                problem = outbound.host_problem(host)
                if problem:
                    problem += "; mark the provider as local if that is intended"
            if problem:
                errors["base_urls"] = f"{url}: {problem}"
                break
    if api_key_env and api_key_file:
        errors["api_key_file"] = "Give the key's environment variable or a secret file, not both."
    if api_key_env:
        if not ENV_VAR_NAME.fullmatch(api_key_env):
            errors["api_key_env"] = (
                "Enter the NAME of an environment variable (capital letters, digits and _), "
                "never the key itself."
            )
        elif api_key_env.endswith("_FILE"):
            errors["api_key_env"] = (
                f"Enter {api_key_env.removesuffix('_FILE')}: the workers read {api_key_env} "
                "by themselves."
            )
        elif SERVER_VARIABLES.match(api_key_env):
            errors["api_key_env"] = f"{api_key_env} is one of the server's own settings."
    if api_key_file and not api_key_file.startswith("/"):
        errors["api_key_file"] = "Give an absolute path, e.g. /run/secrets/openai_key."
    if not isinstance(prices, dict) or not all(
        isinstance(v, dict) and set(v) <= {"prompt", "completion"} for v in prices.values()
    ):
        errors["prices"] = (
            'Prices per 1k tokens by model ("*" for any): '
            '{"gpt-4o": {"prompt": "0.0025", "completion": "0.01"}}.'
        )
    else:
        try:
            for v in prices.values():
                for price in v.values():
                    if Decimal(str(price)) < 0:
                        raise ValueError
        except (ArithmeticError, ValueError):
            errors["prices"] = 'Prices are non-negative numbers, e.g. "0.0025".'
    return errors


def provider_save(*, provider: Provider) -> Provider:
    """Validate and save a provider (site admins only: the admin and judge_provider)."""
    errors = provider_problems(
        base_urls=provider.base_urls,
        api_key_env=provider.api_key_env,
        api_key_file=provider.api_key_file,
        is_local=provider.is_local,
        prices=provider.prices,
    )
    if errors:
        raise ValidationError(errors)
    provider.full_clean()
    provider.save()
    return provider


def provider_usable_problem(provider: Provider | None, project_id: int) -> str:
    """Why judges of project `project_id` may not call `provider` now, or ""."""
    if provider is None:
        return "the judge has no provider: a site admin must declare one"
    if not provider.approved:
        return f"provider {provider.name} awaits a site admin's approval"
    allowed = list(provider.projects.values_list("pk", flat=True))
    if allowed and project_id not in allowed:
        return f"provider {provider.name} is not offered to this project"
    return ""


def provider_api_key(provider: Provider) -> str:
    """The provider's key, read on the worker from the variable or file a site admin
    declared; never stored, never logged. "" for a provider that needs none."""
    path = provider.api_key_file
    if provider.api_key_env and not path:
        path = os.environ.get(f"{provider.api_key_env}_FILE", "")
    if path:
        try:
            value = Path(path).read_text().strip()
        except OSError:
            value = ""
    else:
        value = os.environ.get(provider.api_key_env, "") if provider.api_key_env else ""
    if provider.needs_key and not value:
        raise JudgeError(
            f"the key of provider {provider.name} is not available on the judging workers "
            "(a site admin must set it)",
            retryable=False,
            code="no_key",
        )
    return value


def provider_price(provider: Provider | None, model: str) -> tuple[Decimal, Decimal] | None:
    """The provider's price per 1k prompt and completion tokens of `model` ("*" = any)."""
    if provider is None:
        return None
    entry = provider.prices.get(model) or provider.prices.get("*")
    if not entry:
        return None
    return Decimal(str(entry.get("prompt", 0))), Decimal(str(entry.get("completion", 0)))
