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
#: or a careless admin would otherwise send the site's own secrets as a bearer token. Every
#: name the settings, the test settings, gunicorn.conf.py and `serve` read from the
#: environment is among them (tests/judging/test_credentials.py reads those files to check
#: it), and so are the usual variables of the database client, the cloud SDKs and the shell.
SERVER_VARIABLES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), why)
    for pattern, why in (
        (r"SECRET_KEY$", "Django's secret key"),
        (r"DJANGO_", "DJANGO_* variables are refused"),
        (r"FLASKWEB_", "FLASKWEB_* variables are refused"),
        (r"DATABASE_", "DATABASE_* variables are refused"),
        (r"REDIS_", "REDIS_* variables are refused"),
        (r"CELERY_", "CELERY_* variables are refused"),
        (r"TEST_", "TEST_* variables are refused"),
        (r"PYTEST_", "PYTEST_* variables are refused"),
        (r"GUNICORN_", "GUNICORN_* variables are refused"),
        (r"WEB_CONCURRENCY$", "gunicorn's number of workers"),
        (r"PROMETHEUS_", "PROMETHEUS_* variables are refused"),
        (r"POSTGRES", "POSTGRES* variables are refused"),
        (r"PG[A-Z]*$", "PG* variables are refused"),
        (r"AWS_", "AWS_* variables are refused"),
        (r"GOOGLE_APPLICATION", "GOOGLE_APPLICATION* variables are refused"),
        (r"(HOME|PATH|USER|SHELL|PWD|HOSTNAME)$", "a variable of the shell"),
    )
)
#: Where no key file may be, after `..` and symlinks are resolved: the kernel's views of
#: processes and devices (/proc/self/environ is the worker's whole environment, /dev/stdin
#: whatever it reads), none of which is a secret file of the provider's own.
SYSTEM_DIRECTORIES = ("/proc", "/sys", "/dev")


def server_variable(name: str) -> str:
    """Why `name` is one of the server's own variables ("FLASKWEB_* variables are
    refused"), or "" when it is not."""
    for pattern, why in SERVER_VARIABLES:
        if pattern.match(name):
            return why
    return ""


def _server_setting_files() -> dict[str, str]:
    """The files the server's own `*_FILE` settings name (DJANGO_SECRET_KEY_FILE…), resolved,
    with the variable that names each."""
    return {
        os.path.realpath(value): name
        for name, value in os.environ.items()
        if name.endswith("_FILE")
        and value.startswith("/")
        and (server_variable(name) or server_variable(name.removesuffix("_FILE")))
    }


def key_file_problem(path: str) -> str:
    """Why `path` cannot be a provider's key file, or "": an absolute path, neither under
    /proc, /sys or /dev (as written with its `..` resolved, and with its symlinks
    resolved as far as they exist on this machine) nor the file of one of the server's own
    settings. Checked when a provider is saved and again when a worker reads the key."""
    if not path.startswith("/"):
        return "Give an absolute path, e.g. /run/secrets/openai_key."
    if "\x00" in path:
        return "The path holds a NUL character."
    written = "/" + os.path.normpath(path).lstrip("/")
    resolved = os.path.realpath(path)
    for where in (written, resolved):
        for root in SYSTEM_DIRECTORIES:
            if where == root or where.startswith(root + "/"):
                via = "" if where == path else f" (it leads to {where})"
                return (
                    f"{path} is under {root}{via}: a key file is a secret file of the "
                    "provider's own, e.g. /run/secrets/openai_key, never the system's view "
                    "of processes or devices."
                )
    setting = _server_setting_files().get(resolved)
    if setting:
        return f"{path} is the file of the server's own setting {setting}."
    return ""


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
        elif why := server_variable(api_key_env):
            errors["api_key_env"] = (
                f"{api_key_env} is one of the server's own settings ({why}): name the "
                "variable that holds this provider's key, e.g. OPENAI_API_KEY."
            )
    if api_key_file and "api_key_file" not in errors:
        problem = key_file_problem(api_key_file)
        if problem:
            errors["api_key_file"] = problem
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
        # checked again here: a symlink may have been pointed elsewhere since it was saved
        if key_file_problem(path):
            raise JudgeError(
                f"the key file of provider {provider.name} is in a place no key may be read "
                "from (a site admin must move it)",
                retryable=False,
                code="no_key",
            )
        try:
            # a regular file only: reading a FIFO would block the worker
            value = Path(path).read_text().strip() if Path(path).is_file() else ""
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
