"""The resume index: which cells of an experiment are done (docs/architecture.md, "Resume
and reruns"), as :mod:`sweeper.store.reader` reads them: the tables' lean columns, then the
runs they may lack. A cell is done when its result (:func:`sweeper.store.result.result_of`)
is FINISHED."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sweeper.store.reader import LEAN, read
from sweeper.store.result import rank
from sweeper.store.tracking import Tracker


@dataclass
class IndexEntry:
    """The result run of a finished cell, its (lean) table row when a table had it, and
    the parent run whose table had it."""

    run_id: str
    start_time: int
    row: dict[str, Any] | None = None
    run: Any = None
    parent: str | None = None


@dataclass
class ResumeIndex:
    """What the experiment already holds: finished cells, and RUNNING leftovers."""

    finished: dict[str, IndexEntry] = field(default_factory=dict)
    running: list[Any] = field(default_factory=list)
    searched_runs: int = 0
    tables: int = 0
    damaged: int = 0  # tables that lost rows (a part deleted or damaged): their runs searched
    ranks: dict[str, tuple[int, int, int]] = field(default_factory=dict, repr=False)
    seen: int = 0

    def add(self, key: str, entry: IndexEntry) -> None:
        """A FINISHED run of cell ``key``: the cell's entry when it is the cell's result
        (:func:`sweeper.store.result.rank`); the same run seen again keeps what both know."""
        old = self.finished.get(key)
        self.seen += 1
        if old is not None and old.run_id == entry.run_id:
            old.row = old.row if old.row is not None else entry.row
            old.run = old.run if old.run is not None else entry.run
            old.parent = old.parent or entry.parent
            return
        ranked = rank("FINISHED", entry.start_time, self.seen)
        if old is None or ranked > self.ranks.get(key, ranked):
            self.finished[key], self.ranks[key] = entry, ranked


def read_index(tracker: Tracker, parents: list[Any] | None = None) -> ResumeIndex:
    """Finished cells and RUNNING leftovers of the experiment (the reader's, lean)."""
    reading = read(tracker, LEAN, parents)
    index = ResumeIndex(
        running=reading.running,
        searched_runs=reading.searched_runs,
        tables=reading.tables,
        damaged=reading.damaged,
    )
    for key, result in reading.finished().items():
        row = None if result.row is None else {k: result.row.get(k) for k in LEAN}
        entry = IndexEntry(result.run_id, result.start_time, row, result.run, result.parent)
        index.finished[key] = entry
        index.ranks[key] = rank("FINISHED", result.start_time, result.order)
        index.seen = max(index.seen, result.order)
    return index
