"""Instance-level intervals of a judge whose values fill a wide joint table.

A metric's raw values are mostly distinct: against 13 distinct human means, 1,000 responses
make a joint table of 13,000 cells of which at most 1,000 are ever filled, and the table's
way (report.resampled.instance_register) spends each resample on every cell. Here a
resample's sums are those of the cells the sample holds (bootstrap.CellTable), and Pearson
and Spearman (from the margins' midranks), MAE and the agreement shares follow from them
with the same formulas: the same figures up to the last place of the cross sums, at the
cost of the responses, not of the distinct values squared. Kendall's tau-b needs the whole
table: above bootstrap.WIDE_TABLE_CELLS it is not resampled either way.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

from analytics.bootstrap import (
    WIDE_TABLE_CELLS,
    Resampler,
    Sink,
    _codes,
    _stats_from_cells,
    cell_table,
)


def is_wide(h: ArrayLike, j: ArrayLike) -> bool:
    """Whether the joint table of (human value, judge value) has more than
    WIDE_TABLE_CELLS cells."""
    return int(np.unique(np.asarray(h)).size) * int(np.unique(np.asarray(j)).size) > (
        WIDE_TABLE_CELLS
    )


def instance_cells_register(
    rs: Resampler,
    h: ArrayLike,
    j: ArrayLike,
    items: ArrayLike,
    *,
    sink: Sink,
    key: str = "ci",
    agreement: bool = True,
) -> None:
    """report.resampled.instance_register for a wide table (`is_wide`), over its cells."""
    # scipy is imported where used: at module top it added ~0.5 s of CPU to every process start
    from scipy import sparse

    vx, cx = _codes(h)
    vy, cy = _codes(j)
    table, cell = cell_table(cx, cy, vy.size)
    diff = np.abs(vx[table.x] - vy[table.y])

    def fn(sums: npt.NDArray[np.float64]) -> dict[str, npt.NDArray[np.float64]]:
        cells = np.ascontiguousarray(sums)
        n = cells.sum(axis=1)
        pearson, spearman = _stats_from_cells(cells, table, vx, vy)
        few = n < 2
        pearson[few] = np.nan
        spearman[few] = np.nan
        out = {"pearson": pearson, "spearman": spearman}
        if agreement:
            with np.errstate(divide="ignore", invalid="ignore"):
                out["mae"] = np.where(n > 0, (cells * diff).sum(axis=1) / n, np.nan)
                out["exact"] = np.where(n > 0, (cells * (diff < 0.5)).sum(axis=1) / n, np.nan)
                out["within_one"] = np.where(n > 0, (cells * (diff <= 1)).sum(axis=1) / n, np.nan)
        return out

    onehot = sparse.coo_matrix(
        (np.ones(cell.size), (np.arange(cell.size), cell)), shape=(cell.size, table.x.size)
    )
    rs.add(items, onehot, fn, sink=sink, key=key)
