"""API answers and export files as pandas DataFrames, typed the same way whatever the format:

- N/A (the API's and the exports' spelling of "not applicable") and empty cells are missing
  values (`pd.NA`);
- whole numbers are the nullable `Int64`, other numbers `Float64`, true/false `boolean`,
  text `string`, `*_at` columns UTC timestamps;
- a score column holding any fraction (a raw-scale judge) is `Float64` as a whole.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

# answers that mean "not applicable" (the importers' spellings); missing values in a frame
NA_SPELLINGS = frozenset({"n/a", "na", "not applicable"})
# columns that are names and ids, never numbers, whatever they look like ("17" is an item id)
TEXT_COLUMNS = frozenset(
    {
        "project",
        "dataset",
        "item",
        "system",
        "model_name",
        "skill",
        "rater",
        "rater_kind",
        "rationale",
        "source",
        "rubric_label",
        "platform",
        "worker_id",
        "adjudicated_note",
        "adjudicated_by",
        "judge",
        "level",
        "too_few",
        "status",
        "name",
    }
)
# the export columns that hold numbers: when every value is missing (no N/A-free score, no
# timed task), nothing else says so
NUMBER_COLUMNS = frozenset(
    {"score", "adjudicated_score", "time_on_task_ms", "rubric_version", "prompt_version", "sample"}
)
_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def _cell(text: str) -> Any:
    """A CSV cell as the value it stands for: None when empty, a number, a boolean, or the
    text; N/A stays text here (it is missing only in a column of numbers)."""
    if text == "":
        return None
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if text in ("true", "false"):
        return text == "true"
    return text


def _is_na(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() in NA_SPELLINGS


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def column(name: str, values: Sequence[Any]) -> pd.Series:
    """One typed column of a frame from its Python values (None for missing)."""
    present = [v for v in values if v is not None and not _is_nan(v)]
    if name in TEXT_COLUMNS:
        return pd.Series([None if v is None or v == "" else str(v) for v in values], dtype="string")
    if not present and name in NUMBER_COLUMNS:
        return pd.Series([None] * len(values), dtype="Int64")
    if name.endswith("_at") and present and all(isinstance(v, str) for v in present):
        return pd.Series(pd.to_datetime(list(values), utc=True, format="ISO8601"))
    if present and all(_is_number(v) or _is_na(v) for v in present):
        numbers = [v if _is_number(v) else None for v in values]
        kept = [v for v in numbers if v is not None]
        if all(isinstance(v, int) for v in kept):
            return pd.Series(numbers, dtype="Int64")
        return pd.Series([None if v is None else float(v) for v in numbers], dtype="Float64")
    if present and all(isinstance(v, bool) for v in present):
        return pd.Series(list(values), dtype="boolean")
    if present and all(isinstance(v, str) for v in present):
        return pd.Series([None if v == "" else v for v in values], dtype="string")
    return pd.Series(list(values), dtype="object")


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def frame(
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[str] = (),
    dtypes: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """A typed DataFrame of dict rows; `columns` first, in that order, then any others in
    the order they first appear. `dtypes` fixes the type of columns whose values may all be
    missing (a run's `stdev` with one sample each), which no value could tell."""
    rows = list(rows)
    names = list(columns)
    for row in rows:
        names += [key for key in row if key not in names]
    fixed = dict(dtypes or {})
    return pd.DataFrame(
        {
            name: (
                pd.Series([row.get(name) for row in rows], dtype=fixed[name])
                if name in fixed
                else column(name, [row.get(name) for row in rows])
            )
            for name in names
        }
    )


def csv_frame(data: bytes) -> pd.DataFrame:
    """An export's CSV (UTF-8, RFC 4180) as a typed DataFrame."""
    text = data.decode("utf-8-sig")
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, [])
    rows = []
    for cells in reader:
        rows.append(
            {
                name: (cell if name in TEXT_COLUMNS else _cell(cell))
                for name, cell in zip(header, cells, strict=False)
            }
        )
    return frame(rows, header)


def parquet_frame(data: bytes) -> pd.DataFrame:
    """An export's Parquet file as a DataFrame with the file's own types, on pandas'
    nullable dtypes: int columns with nulls stay integers (N/A scores are missing values),
    booleans `boolean`, timestamps UTC."""
    if importlib.util.find_spec("pyarrow") is None:  # pandas reads Parquet with it
        raise ImportError("reading Parquet needs pyarrow: pip install 'flaskweb-client[parquet]'")
    found = pd.read_parquet(io.BytesIO(data), dtype_backend="numpy_nullable")
    for name in found.columns:  # text as the CSV and JSONL readers give it
        if str(found[name].dtype) == "object":
            found[name] = found[name].astype("string")
    return found


def jsonl_frame(data: bytes) -> pd.DataFrame:
    """An export's JSON Lines as a typed DataFrame (nested objects stay Python objects)."""
    rows = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    return frame(rows)


def _too_few(figures: Mapping[str, Any]) -> str | None:
    """The reasons this dict's figures rest on too few data, as one line (None: none)."""
    found = figures.get("too_few")
    if isinstance(found, Mapping):
        by_reason: dict[str, list[str]] = {}
        for key, why in found.items():
            if why:
                by_reason.setdefault(str(why), []).append(str(key))
        return "; ".join(f"{', '.join(keys)}: {why}" for why, keys in by_reason.items()) or None
    return str(found) if found else None


def _scalars(figures: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of one dict, nested ones one level down as `outer.inner`; intervals
    (`*_ci`, `ci`) and the too-few flags are left to their own columns."""
    found: dict[str, Any] = {}
    for key, value in figures.items():
        if key == "too_few" or key == "ci" or key.endswith("_ci"):
            continue
        if _is_number(value) or value is None:
            found[key] = value
        elif isinstance(value, Mapping):
            for inner, leaf in value.items():
                if _is_number(leaf):
                    found[f"{key}.{inner}"] = leaf
    return found


def _figures(found: pd.DataFrame) -> pd.DataFrame:
    """A figures' frame whose all-missing columns (a coefficient undefined everywhere, such
    as Cohen's kappa without exactly two annotators) are `Float64`, as a figure would be."""
    for name in found.columns:
        if found[name].dtype == object and found[name].isna().all():
            found[name] = found[name].astype("Float64")
    return found


def agreement_frame(report: Mapping[str, Any]) -> pd.DataFrame:
    """One row per skill: the people's agreement (n first) and what rests on too few."""
    rows = []
    for skill, figures in (report.get("agreement") or {}).items():
        if isinstance(figures, Mapping):
            rows.append({"skill": skill, **_scalars(figures), "too_few": _too_few(figures)})
    return _figures(frame(rows, ("skill", "n_units", "n_raters", "n_scores", "n_na")))


def correlation_frame(report: Mapping[str, Any]) -> pd.DataFrame:
    """One row per judge, skill and level (instance, item, system): the judge's correlation
    with the people, with its n and what rests on too few."""
    rows = []
    for judge, skills in (report.get("correlation") or {}).items():
        for skill, levels in (skills or {}).items():
            for level in ("instance", "item", "system"):
                figures = (levels or {}).get(level)
                if isinstance(figures, Mapping):
                    rows.append(
                        {
                            "judge": judge,
                            "skill": skill,
                            "level": level,
                            **_scalars(figures),
                            "too_few": _too_few(figures),
                        }
                    )
    return _figures(frame(rows, ("judge", "skill", "level", "n", "pearson", "spearman", "kendall")))
