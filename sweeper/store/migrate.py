"""Carry results stored under the keys of older sweeper versions over to today's keys.

Cell keys once hashed the cell config alone; they now include the family's identity
(``task: {name, result_version}``, sweeper/cells.py). A run stored under the old key of a
cell is a result of version 1 of its family, so when today's key has no FINISHED run and
the old one has, the run is re-tagged (``cell_key`` = today's key, ``sweeper.legacy_cell_key``
= the old one) and counts as done: existing stores resume instead of recomputing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from sweeper.store.index import ResumeIndex
from sweeper.store.tracking import Tracker

LEGACY_TAG = "sweeper.legacy_cell_key"


class Cells(Protocol):
    """A sweep's cells as the store reads them (:class:`sweeper.grid.Grid` is one): their
    keys, and the cell at a position, built only when asked (a
    :class:`~sweeper.store.cellruns.CellLike` with its ``legacy_key``)."""

    keys: Sequence[str]

    def __getitem__(self, i: int) -> Any: ...


def carry_over(tracker: Tracker, cells: Cells, index: ResumeIndex) -> int:
    """Re-tag the runs of cells finished under their legacy key; return how many.

    The index is updated in place, so the driver skips those cells and writes their rows
    into the sweep's table under today's key.
    """
    carried = 0
    if not index.finished:  # a new experiment: nothing to carry, no cell to build
        return 0
    for i, key in enumerate(cells.keys):
        if key in index.finished:
            continue
        cell = cells[i]
        legacy = cell.legacy_key  # hashed only for the cells not finished under today's key
        if legacy is None or legacy not in index.finished:
            continue
        entry = index.finished[legacy]
        tracker.set_tags(entry.run_id, {"cell_key": cell.key, LEGACY_TAG: legacy})
        row = None if entry.row is None else {**entry.row, "cell_key": cell.key}
        index.finished[cell.key] = replace(entry, row=row)
        carried += 1
    return carried
