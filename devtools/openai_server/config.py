"""The fake server's settings (ServerConfig) and the checks every setting goes through,
from the constructor, the command line or `POST /_admin/config`."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from devtools.openai_server.answers import STYLES

FAULT_KINDS: tuple[str, ...] = (
    "http_500",
    "http_503",
    "http_429",
    "timeout",
    "disconnect",
    "truncated",
    "garbage",
    "wrong_json",
    "empty",
    "content_filter",
    "bad_request",
)


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ServerConfig:
    """What the server does; replaced as a whole by `FakeOpenAIServer.configure`."""

    style: str = "python_dict"
    latency: float | tuple[float, float] = 0.0
    rpm: int | None = None
    tpm: int | None = None
    rate_window: float = 60.0
    faults: Mapping[str, float] = dataclasses.field(default_factory=dict)
    fault_seed: int = 0
    fail_first: int = 0
    fail_first_kind: str = "http_503"
    hang_seconds: float = 30.0
    na_rate: float = 0.0
    position_bias: float = 0.0  # pairwise: share of verdicts that pick Response 1 regardless
    # the bias knobs (docs/OPENAI_SERVER.md, "Biases"), for the bias probes' tests
    content_scores: bool = False  # scores keyed on instruction + response's first sentence
    length_bias: float = 0.0  # up to +k for longer responses (k at 200 words)
    self_preference: str = ""  # a family name: +1 for responses that name it
    bandwagon: float = 0.0  # pairwise: share of verdicts that follow "most people preferred"
    distraction: float = 0.0  # pairwise: share of verdicts against a distracted response
    # metadata prompts (docs/OPENAI_SERVER.md, "Metadata"): the answer for listed
    # instructions ({instruction: {"domains", "skills", "difficulty"}}), and the share of
    # instructions answered wrong on purpose
    metadata_truth: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    metadata_wrong_rate: float = 0.0
    api_key: str | None = None
    models: tuple[str, ...] | None = None

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["latency"] = list(self.latency) if isinstance(self.latency, tuple) else self.latency
        data["faults"] = dict(self.faults)
        data["metadata_truth"] = {k: dict(v) for k, v in self.metadata_truth.items()}
        data["models"] = list(self.models) if self.models is not None else None
        data["api_key"] = "***" if self.api_key else None
        return data


_CONFIG_KEYS = frozenset(f.name for f in dataclasses.fields(ServerConfig))


def number_setting(value: Any, name: str, low: float = 0.0, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a number")
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}")
    return float(value)


def _integer(value: Any, name: str, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}")
    return value


def _limit(value: Any, name: str) -> int | None:
    return None if value is None or value == 0 else _integer(value, name, 1)


def fault_kind_setting(value: Any, name: str = "fault kind") -> str:
    if value not in FAULT_KINDS:
        raise ValueError(f"unknown {name} {value!r}; known: {', '.join(FAULT_KINDS)}")
    return value


def latency_setting(value: Any) -> float | tuple[float, float]:
    if isinstance(value, str):
        parts = value.split(",")
        value = float(parts[0]) if len(parts) == 1 else [float(p) for p in parts]
    if isinstance(value, list | tuple):
        if len(value) != 2:
            raise ValueError("latency range must be [min, max]")
        low, high = (number_setting(v, "latency") for v in value)
        if low > high:
            raise ValueError("latency range must be [min, max] with min <= max")
        return (low, high)
    return number_setting(value, "latency")


def _faults(value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise ValueError("faults must be an object {kind: rate}")
    faults = {
        fault_kind_setting(k): number_setting(v, f"rate of {k}", 0.0, 1.0) for k, v in value.items()
    }
    if sum(faults.values()) > 1.0 + 1e-9:
        raise ValueError("fault rates add up to more than 1")
    return {kind: rate for kind, rate in faults.items() if rate > 0}


def _models(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(m, str) and m for m in value):
        raise ValueError("models must be a list of model names")
    return tuple(value)


def _api_key(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError("api_key must be a non-empty string or null")
    return value


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false")
    return value


def _family(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > 100 or not re.fullmatch(r"[\w.\-]*", value):
        raise ValueError("self_preference must be a family name (letters, digits, . _ -) or empty")
    return value


def _metadata_truth(value: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(value, Mapping):
        raise ValueError("metadata_truth must be an object {instruction: metadata}")
    truth = {}
    for instruction, given in value.items():
        if not isinstance(given, Mapping) or set(given) - {"domains", "skills", "difficulty"}:
            raise ValueError(
                "each metadata_truth entry must be an object with domains, skills, difficulty"
            )
        domains, skills = given.get("domains", []), given.get("skills", [])
        if not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in (domains, skills)
        ):
            raise ValueError("metadata_truth domains and skills must be lists of keys")
        difficulty = given.get("difficulty")
        if difficulty is not None and (
            isinstance(difficulty, bool) or not isinstance(difficulty, int)
        ):
            raise ValueError("metadata_truth difficulty must be a whole number or null")
        truth[str(instruction)] = {"domains": domains, "skills": skills, "difficulty": difficulty}
    return truth


def _style(value: Any) -> str:
    if value not in STYLES:
        raise ValueError(f"unknown style {value!r}; known: {', '.join(STYLES)}")
    return value


# Each check returns the value of its own field, so the values differ in type per key.
_CHECKS: dict[str, Callable[[Any], Any]] = {
    "style": _style,
    "latency": latency_setting,
    "rpm": lambda v: _limit(v, "rpm"),
    "tpm": lambda v: _limit(v, "tpm"),
    "rate_window": lambda v: number_setting(v, "rate_window", 1e-3),
    "faults": _faults,
    "fault_seed": lambda v: _integer(v, "fault_seed", -(2**63)),
    "fail_first": lambda v: _integer(v, "fail_first"),
    "fail_first_kind": lambda v: fault_kind_setting(v, "fail_first_kind"),
    "hang_seconds": lambda v: number_setting(v, "hang_seconds"),
    "na_rate": lambda v: number_setting(v, "na_rate", 0.0, 1.0),
    "position_bias": lambda v: number_setting(v, "position_bias", 0.0, 1.0),
    "content_scores": lambda v: _flag(v, "content_scores"),
    "length_bias": lambda v: number_setting(v, "length_bias", 0.0, 4.0),
    "self_preference": lambda v: _family(v),
    "bandwagon": lambda v: number_setting(v, "bandwagon", 0.0, 1.0),
    "distraction": lambda v: number_setting(v, "distraction", 0.0, 1.0),
    "metadata_truth": _metadata_truth,
    "metadata_wrong_rate": lambda v: number_setting(v, "metadata_wrong_rate", 0.0, 1.0),
    "api_key": _api_key,
    "models": _models,
}


def updated_config(base: ServerConfig, updates: Mapping[str, Any]) -> ServerConfig:
    """`base` with `updates` applied and checked (ValueError names the bad key).

    Besides the fields of ServerConfig, `fault_rate` (total) and `fault_kinds` (default: all
    kinds) set `faults` to that rate spread evenly over those kinds.
    """
    updates = dict(updates)
    fault_rate = updates.pop("fault_rate", None)
    fault_kinds = updates.pop("fault_kinds", None)
    unknown = sorted(set(updates) - _CONFIG_KEYS)
    if unknown:
        raise ValueError(f"unknown config keys: {', '.join(unknown)}")
    changes = {key: _CHECKS[key](value) for key, value in updates.items()}
    if fault_rate is not None or fault_kinds is not None:
        if "faults" in changes:
            raise ValueError("give either faults or fault_rate/fault_kinds")
        if isinstance(fault_kinds, str):
            fault_kinds = [k.strip() for k in fault_kinds.split(",") if k.strip()]
        kinds = FAULT_KINDS if fault_kinds is None else tuple(map(fault_kind_setting, fault_kinds))
        if not kinds:
            raise ValueError("fault_kinds is empty")
        total = sum(base.faults.values()) if fault_rate is None else fault_rate
        rate = number_setting(total, "fault_rate", 0.0, 1.0)
        changes["faults"] = {kind: rate / len(kinds) for kind in kinds} if rate > 0 else {}
    return dataclasses.replace(base, **changes)
