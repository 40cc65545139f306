"""Typed readers for environment variables (twelve-factor settings).

Each helper fails loudly on a value it cannot understand, instead of guessing: a typo in
`DJANGO_DEBUG=ture` must stop the boot, not silently switch debug off.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import overload
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@overload
def env_str(name: str, default: str) -> str: ...
@overload
def env_str(name: str, default: str | None = None) -> str | None: ...
def env_str(name: str, default: str | None = None) -> str | None:
    """NAME's value; `default` when it is unset or empty (so a str default gives a str)."""
    value = os.environ.get(name)
    return default if value is None or value == "" else value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use true or false)")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from None


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{name}={value!r} is not a finite number")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return [part.strip() for part in value.split(",") if part.strip()]


def env_secret(name: str, *, required: bool, default: str | None = None) -> str | None:
    """Read a secret from NAME, or from the file named by NAME_FILE (Docker/K8s secrets)."""
    file_path = os.environ.get(f"{name}_FILE")
    if file_path:
        try:
            return Path(file_path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_path!r} cannot be read: {exc}") from exc
    value = os.environ.get(name)
    if value:
        return value
    if required:
        raise ImproperlyConfigured(
            f"{name} (or {name}_FILE) must be set when DJANGO_DEBUG is false"
        )
    return default


def database_from_url(url: str) -> dict:
    """Turn `postgres://user:pw@host:5432/name?sslmode=require` or `sqlite:///path` into
    a Django DATABASES entry. psycopg 3 is picked up by the postgresql backend."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in {"sqlite", "sqlite3"}:
        path = unquote(parts.path)
        # sqlite:///relative.db -> "relative.db"; sqlite:////abs/x.db -> "/abs/x.db"
        name = path[1:] if path.startswith("//") else (path[1:] or ":memory:")
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": name}
    if scheme in {"postgres", "postgresql", "pgsql"}:
        options = dict(parse_qsl(parts.query))
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parts.path.lstrip("/")),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            "OPTIONS": options,
        }
    raise ImproperlyConfigured(
        f"DATABASE_URL scheme {scheme!r} is not supported (postgres or sqlite)"
    )


def embedded_secret_key(path: Path) -> str:
    """The embedded install's own secret key: read from `path`, or made at random and written
    there (mode 0600) on first use. Two processes starting at once agree: the file is created
    exclusively, and the loser reads the winner's key."""
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    return key
