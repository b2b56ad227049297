"""A report folder that rebuilds without its MLflow store: ``sweep/cells.parquet`` (the
experiment's cells as the report read them: summaries, configs, and curves and traces
downsampled to :data:`POINTS` points, as float32) and ``sweep/experiment.json`` (its
sweeps' newest config, grid axes and notes). ``python -m sweeper.report --from FOLDER``
reads them back (:func:`read_table`), so that a change of a figure needs no rerun.

Summaries are kept exactly (float64), so the rebuilt tables and ``cells.csv`` equal the
ones built from the store; only the figures see the thinner curves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sweeper.configs import ConfigSearch
from sweeper.report.load import LIBRARY_NOTE, MARKS, Loaded, ReportError, library_notes
from sweeper.task import task_of_config

SWEEP_DIR = "sweep"
TABLE = "cells.parquet"
META = "experiment.json"
POINTS = 200
"""Points kept per curve and trace: 4 per window of a hyperparameter figure (T/50)."""
ARRAYS = ("curve_", "hp_")
READ_NOTE = "read from the published table"


def thin(length: int, points: int = POINTS) -> np.ndarray:
    """Indices of ``points`` evenly spaced entries of an array of ``length`` (the first
    and the last kept; every index when it has no more)."""
    if length <= points:
        return np.arange(length)
    return np.unique(np.linspace(0, length - 1, points).round().astype(int))


def _thinned(row: pd.Series, columns: list[str], points: int) -> dict[str, Any]:
    steps = row.get("curve_step")
    if not hasattr(steps, "__len__"):
        return {c: row[c] for c in columns}
    keep = thin(len(steps), points)
    out = {}
    for column in columns:
        value = row[column]
        if hasattr(value, "__len__") and len(value) == len(steps):
            value = np.asarray(value, dtype=np.float32 if column != "curve_step" else float)
            value = value[keep]
        out[column] = value
    return out


def write_table(out: Path, loaded: Loaded, points: int = POINTS) -> list[Path]:
    """Write ``loaded``'s cells and sweep settings under ``out/sweep/``; the files."""
    folder = out / SWEEP_DIR
    folder.mkdir(parents=True, exist_ok=True)
    cells = loaded.cells.copy()
    arrays = [c for c in cells.columns if c.startswith(ARRAYS)]
    if arrays and len(cells):
        thinned = cells.apply(lambda row: _thinned(row, arrays, points), axis=1)
        cells[arrays] = pd.DataFrame(list(thinned), index=cells.index)[arrays]
    if "config" in cells:
        cells["config"] = cells["config"].map(lambda c: json.dumps(c, sort_keys=True))
    if MARKS in cells:
        cells[MARKS] = cells[MARKS].map(lambda v: None if v is None else list(map(float, v)))
    table = folder / TABLE
    cells.to_parquet(table, index=False, compression="zstd")
    meta = folder / META
    meta.write_text(
        json.dumps(
            {
                "name": loaded.name,
                "uri": loaded.uri,
                "config": loaded.config,
                "grid": loaded.grid,
                "sweeps": loaded.sweeps,
                "description": loaded.description,
                "unfinished": loaded.unfinished,
                "decisions": loaded.decisions,
                "notes": [n for n in loaded.notes if not n.startswith(READ_NOTE)],
                "points": points,
            },
            indent=1,
            default=str,  # in their order: the grid's gives the axes' order
        )
    )
    return [table, meta]


def read_table(source: Path, configs: ConfigSearch | None = None) -> Loaded:
    """The experiment a report folder (or its ``sweep/`` folder) published."""
    source = Path(source)
    folder = source if (source / META).exists() else source / SWEEP_DIR
    if not (folder / META).exists() or not (folder / TABLE).exists():
        raise ReportError(
            f"no published table in {source}: expected {SWEEP_DIR}/{TABLE} and "
            f"{SWEEP_DIR}/{META} (written by python -m sweeper.report NAME); build it from "
            "the MLflow store instead (python -m sweeper.report NAME --tracking-uri URI)"
        )
    meta = json.loads((folder / META).read_text())
    cells = pd.read_parquet(folder / TABLE)
    if "config" in cells:
        cells["config"] = cells["config"].map(json.loads)
    if "seed" in cells:
        cells["seed"] = pd.to_numeric(cells["seed"], errors="coerce").astype("Int64")
    for column in [c for c in cells.columns if c.startswith(ARRAYS)]:
        cells[column] = cells[column].map(lambda v: None if v is None else np.asarray(v))
    note = (
        f"{READ_NOTE} {folder} (no MLflow store; curves and traces "
        f"downsampled to {meta.get('points', POINTS)} points)"
    )
    return Loaded(
        name=meta["name"],
        uri=meta["uri"],
        cells=cells,
        config=meta["config"],
        grid=meta["grid"],
        sweeps=int(meta["sweeps"]),
        task=task_of_config(meta["config"], configs or ConfigSearch.with_dirs()),
        description=meta.get("description", ""),
        unfinished=meta.get("unfinished", []),
        decisions=meta.get("decisions", []),
        notes=[*_notes(meta, cells), note],
    )


def _notes(meta: dict, cells: pd.DataFrame) -> list[str]:
    """The published notes, the one on library versions made again from the cells (a
    folder published before that note compared whole sets of libraries)."""
    notes = meta.get("notes", [])
    if "libraries" not in cells:
        return notes
    return [n for n in notes if not n.startswith(LIBRARY_NOTE)] + library_notes(cells["libraries"])
