"""The resume index: which cells of an experiment are done, read leanly (docs/architecture.md,
"Resume and reruns").

A few columns of the sweeps' tables are the index; each parent's tag ``table_until`` (ms)
says that every cell run that ENDED before then is in its table, so only the runs that ended
after a parent's last table part are searched (mlflow issue #2730: searching thousands of
runs is slow). A table that holds fewer runs than its parent's ``table_runs`` tag counts (a
part lost or damaged) is not trusted: its runs are searched instead. Which run is a cell's
result is :func:`sweeper.store.result.rank`'s rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from mlflow import MlflowClient

from sweeper.store.result import CLOCK_MARGIN_MS, rank
from sweeper.store.table import holds
from sweeper.store.tracking import TABLE_RUNS, Tracker, number_or_none, search_all

INDEX_COLUMNS = ["cell_key", "run_id", "status", "start_time"]
MAX_INDEX_PARENTS = 16
"""Past this many sweeps in one experiment, the index is one search of all cell runs."""


@dataclass
class IndexEntry:
    """The newest FINISHED run of a cell, its (lean) table row when a table had it, and
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
        (:func:`sweeper.store.result.rank`); the same run seen again (a table's row, then the run
        itself) keeps what both know."""
        old = self.finished.get(key)
        self.seen += 1
        if old is not None and old.run_id == entry.run_id:
            old.row = old.row if old.row is not None else entry.row
            old.run = old.run if old.run is not None else entry.run
            old.parent = old.parent or entry.parent
            return
        ranked = rank("FINISHED", entry.start_time, self.seen)
        if old is None or ranked > self.ranks[key]:
            self.finished[key], self.ranks[key] = entry, ranked


def search_mark(parent: Any, has_table: bool) -> int | None:
    """From when (``end_time``, ms) the cell runs of sweep ``parent`` must be searched
    because its table may lack them; None when its table holds them all. A sweep that ended
    FINISHED wrote every run's row before it ended; another one (RUNNING, KILLED, FAILED)
    holds every run that ended before its ``table_until`` mark; one without a table, none.
    """
    if has_table and parent.info.status == "FINISHED":
        return None
    until = int(number_or_none(parent.data.tags.get("table_until")) or 0) if has_table else 0
    return until - CLOCK_MARGIN_MS


def runs_after_marks(client: MlflowClient, experiment_id: str, marks: Mapping[str, int]) -> list:
    """The cell runs of each sweep of ``marks`` (parent run id -> :func:`search_mark`) that
    ended at or after its mark: one search by ``end_time`` (a search that joins the parent
    tag is slow), matched to their parent here."""
    if not marks:
        return []
    after = search_all(client, experiment_id, f"attributes.end_time >= {min(marks.values())}")
    return [
        r
        for r in after
        if r.data.tags.get("mlflow.parentRunId") in marks
        and int(r.info.end_time or 0) >= marks[r.data.tags["mlflow.parentRunId"]]
    ]


def read_index(tracker: Tracker, parents: list[Any] | None = None) -> ResumeIndex:
    """Finished cells and RUNNING leftovers of the experiment (see the module docstring).

    The tables' lean columns, then the runs they may lack (:func:`search_mark`,
    :func:`runs_after_marks`)."""
    parents = tracker.sweep_parents() if parents is None else parents
    if len(parents) > MAX_INDEX_PARENTS:
        return _index_from_runs(tracker.runs("tags.cell_key != ''"))
    index = ResumeIndex()
    marks: dict[str, int] = {}  # parent -> its table's mark, for those searched
    for parent in parents:
        run_id = parent.info.run_id
        tables = tracker.table(run_id).arrow(INDEX_COLUMNS)  # unreadable files: skipped, said
        whole = holds(tables, parent.data.tags.get(TABLE_RUNS))
        for table in tables:
            _index_table(table, run_id, index)
        index.tables += bool(tables)
        index.damaged += bool(tables) and not whole
        mark = search_mark(parent, bool(tables) and whole)
        if mark is not None:
            marks[run_id] = mark
    _index_from_runs(runs_after_marks(tracker.client, tracker.experiment_id, marks), index)
    return index


def _index_table(table: pa.Table, parent: str, index: ResumeIndex) -> None:
    """Add the FINISHED rows of a sweep table's lean columns to ``index``."""
    if not {"cell_key", "run_id", "status"} <= set(table.column_names):
        return
    finished = table.filter(pc.equal(table["status"], "FINISHED"))
    finished = finished.filter(pc.is_valid(finished["run_id"]))
    keys, runs = finished["cell_key"].to_pylist(), finished["run_id"].to_pylist()
    if "start_time" in finished.column_names:
        starts = pc.fill_null(pc.cast(finished["start_time"], pa.int64(), safe=False), 0)
        starts = starts.to_pylist()
    else:
        starts = [0] * len(keys)
    for key, run, start in zip(keys, runs, starts, strict=True):
        row = {"cell_key": key, "run_id": run, "status": "FINISHED", "start_time": start}
        index.add(key, IndexEntry(run, start, row=row, parent=parent))


def _index_from_runs(runs: Iterable[Any], index: ResumeIndex | None = None) -> ResumeIndex:
    index = ResumeIndex() if index is None else index
    for run in runs:
        index.searched_runs += 1
        key = run.data.tags.get("cell_key")
        if not key:
            continue
        if run.info.status == "FINISHED":
            index.add(key, IndexEntry(run.info.run_id, int(run.info.start_time), run=run))
        elif run.info.status == "RUNNING":
            index.running.append(run)
    return index


def finished_cells(tracker: Tracker) -> dict[str, Any]:
    """cell_key -> the newest FINISHED run id of that cell (a lean view of the index)."""
    return {k: e.run_id for k, e in read_index(tracker).finished.items()}
