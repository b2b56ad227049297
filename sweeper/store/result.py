"""Which run is a cell's result: one rule for the resume index, the sweep's table, the
report and the re-tagging of an interrupted rerun (issue #26, item 2).

A cell's result is its newest FINISHED run, else its newest FAILED run (a recomputation
that fails never hides an earlier result); newest by start time, then by the order the
runs were seen (a table's later row, a later search). A cell with neither (its runs left
RUNNING or KILLED) has no result.

**Committed runs only.** A run counts once it is committed, and committed is its status:
FINISHED or FAILED, on an active (not deleted) run. The direct writes commit a batch's runs
in one transaction that checks the driver's fencing token (:mod:`sweeper.store.bulk`).
Through MLflow's API, where nothing is atomic, a driver writes each run whole but RUNNING
and sets its status only after checking that it still holds the experiment
(:mod:`sweeper.store.record`, ``Recorder._commit``); a driver that takes the experiment
over deletes the runs another host's driver left RUNNING before it reads what is done
(:func:`sweeper.store.settle.retract`), so a commit that comes later never makes a second
result. So every reader (the resume index, the sweep's table, the report, the Python API)
honours: a RUNNING or KILLED run is no result, a deleted run is none (MLflow's searches of
active runs never return one), a run tagged ``role=lease`` is no cell, and a sweep table's
rows name committed runs only (a batch's table part is written after its runs commit).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import numpy as np
import pandas as pd

T = TypeVar("T")
PREFERENCE = {"FINISHED": 2, "FAILED": 1}
"""A FINISHED run over a FAILED one over any other status."""
CLOCK_MARGIN_MS = 5_000
"""How far apart two machines' clocks (or a run's end and its table's mark) may be: a search
for the runs a table may lack starts this much before the table's mark."""


def rank(status: str | None, start_time: Any, order: int = 0) -> tuple[int, int, int]:
    """The sort key of a run as a cell's result: the greatest is the result."""
    try:
        start = int(start_time)
    except (TypeError, ValueError):
        start = 0
    return PREFERENCE.get(str(status), 0), start, order


def result_of(runs: Iterable[T], key: Callable[[T], tuple[str | None, Any]]) -> T | None:
    """The result among one cell's ``runs`` (``key(run) -> (status, start_time)``; ties go
    to the later run of ``runs``), or None when none is FINISHED or FAILED."""
    best, best_rank = None, None
    for order, run in enumerate(runs):
        status, start = key(run)
        ranked = rank(status, start, order)
        if best_rank is None or ranked > best_rank:
            best, best_rank = run, ranked
    return best if best_rank is not None and best_rank[0] > 0 else None


def results(table: pd.DataFrame) -> pd.DataFrame:
    """One row per ``cell_key`` of ``table`` (columns ``cell_key``, ``status`` and, when
    present, ``start_time``): the row :func:`result_of` picks, in the table's order. The
    vectorised form of the same rule (tests check one against the other)."""
    if not len(table):
        return table
    preference = table["status"].map(PREFERENCE).fillna(0).to_numpy(dtype=np.int64)
    if "start_time" in table:
        start = pd.to_numeric(table["start_time"], errors="coerce").fillna(0).to_numpy()
    else:
        start = np.zeros(len(table))
    ranked = table.assign(_p=preference, _s=start.astype(np.int64), _o=np.arange(len(table)))
    ranked = ranked[ranked["_p"] > 0].sort_values(["_p", "_s", "_o"], kind="stable")
    best = ranked.drop_duplicates("cell_key", keep="last").sort_values("_o")
    return best.drop(columns=["_p", "_s", "_o"]).reset_index(drop=True)
