"""Parquet files of the exports (docs/EXPORTS.md, "Parquet"), written with pyarrow.

Contract
- An explicit schema, never inferred: each column is declared as (name, type), the type one
  of COLUMN_TYPES, so an export with no rows, or a first batch where a column is all
  null, has the same types as any other.
- Streamed: rows are gathered into record batches of `batch_rows` rows and each batch is
  written as its own row group, so memory holds one batch, never the whole table.
- Values go in as they are: texts are not CSV-escaped (csv_safe is for spreadsheets), N/A is
  null, times are UTC timestamps in microseconds.

pyarrow costs a few hundred milliseconds to import: this module is imported where an export
is written in a columnar format (analytics.exports.services.export_write), not by the pages
and tasks at start.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

#: Rows per record batch, written as one row group: ~10,000 rows of ~25 short columns is a
#: few MB of Python objects while the batch is gathered.
BATCH_ROWS = 10_000

#: Key of the file's key-value metadata holding what was exported (kind, project, filters).
METADATA_KEY = b"flaskweb.export"


def _types() -> dict[str, pa.DataType]:
    return {
        "string": pa.string(),
        "large_string": pa.large_string(),  # texts that may pass 2 GB per batch together
        "int8": pa.int8(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "bool": pa.bool_(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "strings": pa.list_(pa.string()),
        "scores": pa.map_(pa.string(), pa.int8()),  # skill -> score, null for N/A
    }


COLUMN_TYPES = _types()

#: The `datasets` library's name of each flat type (a dataset card's `dataset_info`).
HF_DTYPES = {
    "string": "string",
    "large_string": "large_string",
    "int8": "int8",
    "int64": "int64",
    "float64": "float64",
    "bool": "bool",
    "timestamp": "timestamp[us, tz=UTC]",
}


def schema_of(
    columns: Sequence[tuple[str, str]], metadata: Mapping[str, Any] | None = None
) -> pa.Schema:
    names = [name for name, _ in columns]
    if len(set(names)) != len(names):
        duplicated = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"two columns would have the same name: {', '.join(duplicated)}")
    fields = [pa.field(name, COLUMN_TYPES[kind], nullable=True) for name, kind in columns]
    meta = None if metadata is None else {METADATA_KEY: json.dumps(metadata, ensure_ascii=False)}
    return pa.schema(fields, metadata=meta)


@dataclass
class ParquetStats:
    rows: int = 0
    nbytes: int = 0  # the Arrow size of the data written (what `datasets` calls num_bytes)


def parquet_write(
    out: IO[bytes] | str,
    columns: Sequence[tuple[str, str]],
    rows: Iterable[Sequence[Any]],
    *,
    metadata: Mapping[str, Any] | None = None,
    batch_rows: int = BATCH_ROWS,
) -> ParquetStats:
    """Write `rows` (cell values in `columns` order) as one Parquet file to `out` (a binary
    stream or a path), one row group per `batch_rows` rows. Raises ValueError (a value that
    does not fit its column's type, as pyarrow words it)."""
    schema = schema_of(columns, metadata)
    stats = ParquetStats()
    with pq.ParquetWriter(out, schema, compression="zstd") as writer:
        batch: list[Sequence[Any]] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= batch_rows:
                _write_batch(writer, schema, batch, stats)
                batch = []
        if batch or stats.rows == 0:  # a file with no row still carries its schema
            _write_batch(writer, schema, batch, stats)
    return stats


def _write_batch(
    writer: pq.ParquetWriter, schema: pa.Schema, batch: list[Sequence[Any]], stats: ParquetStats
) -> None:
    arrays = []
    for i, field in enumerate(schema):
        try:
            arrays.append(pa.array([row[i] for row in batch], type=field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise ValueError(f"column {field.name!r} ({field.type}): {exc}") from exc
    record_batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    if batch:
        writer.write_batch(record_batch)
    else:
        writer.write_table(pa.Table.from_batches([record_batch], schema=schema))
    stats.rows += len(batch)
    stats.nbytes += record_batch.nbytes
