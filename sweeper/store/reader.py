"""The one reader of what an experiment holds: which run is each cell's result.

Resume (:mod:`sweeper.store.index`), the dry run, the report and ``sweeper.load`` all read
through :func:`read`, so they agree on every cell. It writes nothing (settling and carrying
runs over are the driver's: :mod:`sweeper.store.settle`, :mod:`sweeper.store.migrate`).

Where it looks (mlflow issue #2730: searching thousands of runs is slow): each sweep's
parent run (tag ``role=sweep``) holds a table of the runs it recorded (its parent's tag
``table_until`` says that every run that ENDED before then is in it); a sweep that ended
FINISHED with its whole table needs no search; the others' runs that ended after their
mark (less :data:`~sweeper.store.result.CLOCK_MARGIN_MS`) are found by one search. A table
that holds fewer runs than its parent's ``table_runs`` tag counts (a part deleted or
damaged), or none at all, is not trusted: its sweep's runs are searched. Past
:data:`MAX_INDEX_PARENTS` sweeps, every cell run is searched at once. Which of a cell's runs
is its result is :func:`sweeper.store.result.result_of`'s rule: the newest FINISHED, else
the newest FAILED; a cell with neither (its runs left RUNNING or KILLED) has none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import yaml
from mlflow import MlflowClient

from sweeper.cellnpz import unpack
from sweeper.errors import SweepError
from sweeper.store.lock import sqlite_path
from sweeper.store.result import CLOCK_MARGIN_MS, result_of
from sweeper.store.table import ArtifactIO, CellTable, holds, local_artifact_dir
from sweeper.store.tracking import (
    CELL_ARTIFACT,
    MAX_PARAM_LENGTH,
    TABLE_RUNS,
    check_store,
    number_or_none,
    resolve_uri,
    search_all,
)
from sweeper.tree import unflatten

LEAN = ("cell_key", "run_id", "status", "start_time")
"""The columns the resume index and the dry run read of the sweeps' tables."""
MAX_INDEX_PARENTS = 16
"""Past this many sweeps in one experiment, every cell run is searched at once."""
__all__ = ["Experiment", "NotFound", "Reading", "read", "resolve_uri"]
CONFIG = "config.yaml"
DECISIONS = "decisions.json"


class NotFound(SweepError):
    """No store at a URI, or no experiment of that name in it (said with what is there)."""


@dataclass
class Candidate:
    """One run of a cell, as a sweep table's row and/or as the run itself."""

    run_id: str
    key: str
    status: str
    start_time: int
    order: int
    row: dict[str, Any] | None = None
    run: Any = None
    parent: str | None = None

    def merge(self, other: Candidate) -> None:
        """The same run seen again: keep what both know; the run's own status and start
        time win over a table row's."""
        self.row = self.row if other.row is None else other.row
        self.parent = self.parent or other.parent
        if other.run is not None:
            self.run, self.status, self.start_time = other.run, other.status, other.start_time


@dataclass
class Reading:
    """What an experiment holds (:func:`read`)."""

    parents: list[Any]
    candidates: dict[str, list[Candidate]] = field(default_factory=dict)
    running: list[Any] = field(default_factory=list)
    tables: int = 0
    searched_runs: int = 0
    damaged: int = 0
    untrusted: list[tuple[str, str]] = field(default_factory=list)  # (parent, why)

    def results(self) -> dict[str, Candidate]:
        """Cell key -> the run that is its result, for every cell that has one."""
        chosen = {}
        for key, runs in self.candidates.items():
            best = result_of(runs, lambda c: (c.status, c.start_time))
            if best is not None:
                chosen[key] = best
        return chosen

    def finished(self) -> dict[str, Candidate]:
        """Cell key -> its result, for the cells whose result is FINISHED (done)."""
        return {k: c for k, c in self.results().items() if c.status == "FINISHED"}

    def unfinished(self) -> list[Candidate]:
        """The newest run of each cell that has no result (left RUNNING or KILLED)."""
        chosen = self.results()
        return [
            max(runs, key=lambda c: (c.start_time, c.order))
            for key, runs in self.candidates.items()
            if key not in chosen
        ]

    def superseded(self) -> int:
        """Runs of cells with a result that are not it (older runs of a cell run again)."""
        return sum(len(self.candidates[k]) - 1 for k in self.results())


class Experiment:
    """An experiment of a store, opened for reading only (nothing is created or written).

    Parameters
    ----------
    uri : str
        The tracking URI.
    name : str
        The experiment's name.
    """

    def __init__(self, uri: str, name: str) -> None:
        path = sqlite_path(uri)
        if path is not None and not Path(path).exists():
            raise NotFound(
                f"no MLflow store at {Path(path).resolve()} (tracking URI {uri}): run the sweep "
                "first (python -m sweeper +exp=NAME), or point the tracking URI at the store "
                "that holds it"
            )
        check_store(uri)
        self.uri, self.name = uri, name
        self.client = MlflowClient(tracking_uri=uri)
        found = self.client.get_experiment_by_name(name)
        if found is None or found.lifecycle_stage == "deleted":
            names = sorted(e.name for e in self.client.search_experiments())
            raise NotFound(
                f"no experiment '{name}' in the MLflow store {uri}; experiments there: "
                f"{', '.join(names) or 'none'}. Run it first: python -m sweeper +exp={name}"
            )
        self.experiment_id = found.experiment_id
        self.artifacts = ArtifactIO(self.client, self._local_dir)

    def _local_dir(self, run_id: str) -> Path | None:
        return local_artifact_dir(self.client.get_run(run_id).info.artifact_uri)

    def table(self, run_id: str) -> CellTable:
        return CellTable(self.artifacts, run_id)

    def runs(self, filter_string: str = "") -> list[Any]:
        return search_all(self.client, self.experiment_id, filter_string)

    def sweep_parents(self) -> list[Any]:
        """The sweeps' parent runs, oldest first."""
        return sorted(self.runs("tags.role = 'sweep'"), key=lambda r: r.info.start_time)

    def artifact(self, run_id: str, name: str, parse: Any, instead: str) -> Any:
        """Artifact ``name`` of run ``run_id`` read by ``parse``, or None (absent; a damaged
        one is said, with ``instead``)."""
        return self.artifacts.load(run_id, name, parse, instead)

    def sweep_config(self, parent: Any, instead: str) -> dict[str, Any] | None:
        return self.artifact(parent.info.run_id, CONFIG, _yaml_mapping, instead)

    def decisions(self, parent: Any, instead: str) -> list[dict[str, Any]] | None:
        import json

        found = self.artifact(parent.info.run_id, DECISIONS, json.loads, instead)
        return found if isinstance(found, list) else None

    def row_from_run(
        self, run: Any, groups: Sequence[str], curves: Iterable[str], top_keys: set[str]
    ) -> dict[str, Any]:
        """A cell's row rebuilt from its run (no table holds it): tags, metrics, each
        declared curve's step history, and its config from its params (from ``cell.npz``
        when MLflow cut a param to its length)."""
        tags = run.data.tags
        params = {k: _parse_param(v) for k, v in run.data.params.items()}
        if top_keys:
            params = {k: v for k, v in params.items() if k.split(".")[0] in top_keys}
        config = unflatten(params)
        if any(_cut(v) for v in run.data.params.values()):
            instead = "its config is read from its run's params, cut to MLflow's length"
            whole = self.artifact(run.info.run_id, CELL_ARTIFACT, unpack, instead)
            config = whole["config"] if whole is not None else config
        curves = list(curves)
        row: dict[str, Any] = {
            "cell_key": tags["cell_key"],
            "run_id": run.info.run_id,
            **{g: tags.get(g) for g in groups},
            "seed": tags.get("seed"),
            "error": tags.get("error"),
            "config": config,
            "source": "run",
        }
        if run.info.status == "FINISHED":
            row.update({k: v for k, v in run.data.metrics.items() if k not in curves})
            for name in (c for c in curves if c in run.data.metrics):
                history = self.client.get_metric_history(run.info.run_id, name)
                history = sorted(history, key=lambda m: m.step)
                row["curve_step"] = np.array([m.step for m in history])
                row[f"curve_{name}"] = np.array([m.value for m in history])
        return row


def read(
    source: Any, columns: Sequence[str] | None = LEAN, parents: list[Any] | None = None
) -> Reading:
    """What the experiment of ``source`` holds (see the module docstring).

    Parameters
    ----------
    source : Experiment or sweeper.store.tracking.Tracker
        Anything with ``client``, ``experiment_id``, ``runs(filter)``, ``sweep_parents()``
        and ``table(run_id)``.
    columns : sequence of str or None
        The table columns to read into each candidate's row (None: every column, as the
        report wants; :data:`LEAN` for the resume index and the dry run).
    parents : list, optional
        The sweeps' parent runs, when the caller has them.

    A run seen twice (in two sweeps' tables, a cell carried over to today's key, or in a
    table and found by search) is one candidate: a later sweep's row wins over an earlier
    one's, and the run itself (its ``cell_key`` tag) over both.
    """
    parents = source.sweep_parents() if parents is None else parents
    parents = sorted(parents, key=lambda p: int(p.info.start_time or 0))  # later rows win
    reading = Reading(parents)
    seen: dict[str, Candidate] = {}
    order = 0

    def add(candidate: Candidate) -> None:
        nonlocal order
        order += 1
        candidate.order = order
        known = seen.get(candidate.run_id)
        if known is not None:  # the same run again: a later row, or the run itself, whose
            known.merge(candidate)  # cell_key tag says where it is now (a carried-over run)
            if candidate.key != known.key:
                reading.candidates[known.key].remove(known)
                if not reading.candidates[known.key]:
                    del reading.candidates[known.key]
                known.key = candidate.key
                reading.candidates.setdefault(known.key, []).append(known)
            return
        seen[candidate.run_id] = candidate
        reading.candidates.setdefault(candidate.key, []).append(candidate)

    lean = len(parents) <= MAX_INDEX_PARENTS
    marks: dict[str, int] = {}
    if lean or columns is None:
        for parent in parents:
            mark = _read_table(source, parent, columns, reading, add)
            if mark is not None:
                marks[parent.info.run_id] = mark
    if lean:
        searched = _runs_after_marks(source, marks)
    else:
        searched = source.runs("tags.cell_key != ''")
    for run in searched:
        reading.searched_runs += 1
        key = run.data.tags.get("cell_key")
        if not key:
            continue
        if run.info.status == "RUNNING":
            reading.running.append(run)
        start = int(number_or_none(run.info.start_time) or 0)
        parent = run.data.tags.get("mlflow.parentRunId")
        add(Candidate(run.info.run_id, key, run.info.status, start, 0, run=run, parent=parent))
    return reading


def _read_table(source: Any, parent: Any, columns: Sequence[str] | None, reading: Reading,
                add: Any) -> int | None:  # fmt: skip
    """Add the rows of ``parent``'s table; return from when its runs must be searched
    (``end_time``, ms), or None when its table holds them all."""
    run_id = parent.info.run_id
    wanted = None if columns is None else list(dict.fromkeys([*LEAN, *columns]))
    tables = source.table(run_id).arrow(wanted)  # unreadable files: skipped, said
    whole = holds(tables, parent.data.tags.get(TABLE_RUNS))
    reading.tables += bool(tables)
    reading.damaged += bool(tables) and not whole
    if not tables:
        reading.untrusted.append((run_id, "has no table"))
    elif not whole:
        reading.untrusted.append((run_id, "table lost rows"))
    for row in _rows(tables, full=columns is None):
        start = int(number_or_none(row.get("start_time")) or 0)
        add(Candidate(str(row["run_id"]), str(row["cell_key"]), str(row.get("status")), start,
                      0, row=row, parent=run_id))  # fmt: skip
    if tables and whole and parent.info.status == "FINISHED":
        return None
    until = number_or_none(parent.data.tags.get("table_until")) if tables and whole else 0
    return int(until or 0) - CLOCK_MARGIN_MS


def _rows(tables: list[pa.Table], full: bool) -> list[dict[str, Any]]:
    """The rows of a table's files that name a run and a cell; each run's last row when
    ``full`` (a cell re-keyed by sweeper/store/migrate.py has a newer row for its run)."""
    frames = [t for t in tables if {"cell_key", "run_id"} <= set(t.column_names)]
    if not frames:
        return []
    if not full:
        rows = [r for t in frames for r in t.to_pylist()]
    else:
        table = pd.concat([t.to_pandas() for t in frames], ignore_index=True)
        table = table.drop_duplicates("run_id", keep="last")
        rows = [{k: v for k, v in r.items() if not _missing(v)} for r in table.to_dict("records")]
    return [r for r in rows if r.get("run_id") and r.get("cell_key")]


def _runs_after_marks(source: Any, marks: Mapping[str, int]) -> list[Any]:
    """The cell runs of each sweep of ``marks`` (parent run id -> its mark) that ended at
    or after its mark: one search by ``end_time`` (a search that joins the parent tag is
    slow), matched to their parent here."""
    if not marks:
        return []
    after = source.runs(f"attributes.end_time >= {max(min(marks.values()), 0)}")
    return [
        r
        for r in after
        if r.data.tags.get("mlflow.parentRunId") in marks
        and int(r.info.end_time or 0) >= marks[r.data.tags["mlflow.parentRunId"]]
    ]


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _yaml_mapping(data: bytes) -> dict | None:
    loaded = yaml.safe_load(data)
    return loaded if isinstance(loaded, dict) else None


def _parse_param(text: str) -> Any:
    import json

    if text == "None":
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def _cut(text: str) -> bool:
    """Whether a param's value was cut to MLflow's length (sweeper/store/cellruns.py)."""
    return len(text) >= MAX_PARAM_LENGTH and text.endswith("...")
