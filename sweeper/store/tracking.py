"""MLflow layout (docs/architecture.md, "The MLflow layout"). Only the driver writes here.

One MLflow experiment per exp; one parent run per sweep (tags ``sweep_key`` and
``role=sweep``) holding the experiment config (``config.yaml``, with the family's ``task``
block), the summary (``summary.json`` and metrics cells/finished/failed/skipped/wall_s/
cells_per_s) and the sweep's table (:mod:`sweeper.store.table`: ``cells.parquet`` and, while it
runs, parts under ``cells/``), one row per recorded cell run (columns cell_key,
run_id, status, one per group of the family's ``task.groups``, seed, error, config (JSON),
the summary metrics, ``curve_step`` and ``curve_<name>`` for each curve the family declares
(downsampled), ``hp_<name>`` for each traced setting (downsampled at the same steps), node,
wall_s and start_time) so reports never download a thousand artifacts; one child run per
cell tagged ``cell_key``, its groups' option names, ``seed``, ``node`` (``<ip>/<Ray node
id>``) and the code that made it (``sweeper.version``, ``mlflow.source.git.commit``), with
the flattened cell config as params, the summary and each declared curve (by ``step``, at
:data:`METRIC_POINTS` points) as metrics, and the full curves and trace as ``cell.npz``.
The run's start is the cell's start and its end when the driver received the outcome, so
MLflow's Duration is the cell's runtime. A FAILED cell is a FAILED run with
``traceback.txt`` and an ``error`` tag.

Resume and reruns. A cell is done when its key has a FINISHED run in the experiment.
``rerun=true`` logs a new run per cell; when it finishes, the cell's older FINISHED runs
get the tag ``superseded_by=<new run id>`` and stay; the newest FINISHED run is the
cell's result (the sweep's table holds it). A rerun marks its parent ``sweeper.rerun_open``
until it ends; a start that finds the mark (a rerun was killed between a new run's end and
its tagging of the old one) re-tags every older FINISHED run of each cell
(:meth:`Tracker.settle_supersession`), so exactly one FINISHED run per cell is untagged.
A run left RUNNING by a killed driver (cell or sweep) is set to KILLED (tag
``sweeper.reaped``) when a sweep next starts in the experiment: they are searched for by
status, whatever the tables say (:meth:`Tracker.leftovers`).

The resume index is lean (mlflow issue #2730: searching thousands of runs is slow): a few
columns of the parents' tables are the index, and each parent's tag ``table_until`` (ms)
says that every child run that ENDED before then is in its table, so only the few runs
that ended after a parent's last table part are searched for (by parent run id and
``end_time``; runs recorded before this contract ended when they were logged, so it covers
them too).
"""

from __future__ import annotations

import io
import json
import logging
import os
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import urlopen

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag, ViewType
from mlflow.exceptions import MlflowException
from sqlalchemy.exc import SQLAlchemyError

from sweeper.cells import Cell, flatten
from sweeper.errors import StoreFailed, SweepError
from sweeper.execute import Outcome, pack
from sweeper.process import driver_alive, driver_id, now_ms
from sweeper.provenance import (
    LIBRARIES_TAG,
    changed_libraries,
    code_tags,
    installed_libraries,
)
from sweeper.store.bulk import RunRecord
from sweeper.store.lock import StoreBusy, prepare_sqlite_store, sqlite_path
from sweeper.store.result import CLOCK_MARGIN_MS, rank, result_of
from sweeper.store.table import ArtifactIO, CellTable, holds, local_artifact_dir
from sweeper.task import GENERIC, Task

CURVE_POINTS = 500
METRIC_POINTS = 100
"""Points of each curve logged as MLflow step metrics (its charts); the table keeps
:data:`CURVE_POINTS` and ``cell.npz`` every round."""
INDEX_COLUMNS = ["cell_key", "run_id", "status", "start_time"]
CELL_ARTIFACT = "cell.npz"
MAX_PARAM_LENGTH = 500
PAGE = 10_000
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
"""Marks an experiment as model training for MLflow 3's UI, which otherwise opens an
experiment without traces on its GenAI overview instead of the runs table."""
MAX_INDEX_PARENTS = 16
"""Past this many sweeps in one experiment, the index is one search of all cell runs."""
ORPHAN_AFTER_MS = 120_000
"""A cell run is RUNNING only while the driver logs it (well under a second): one RUNNING
for longer than this, or whose driver process is gone, was left by a killed driver."""
TABLE_RUNS = "table_runs"
"""The parent's tag counting the runs ever written into its table (see :func:`holds`)."""


def downsample(curve: np.ndarray, points: int = CURVE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``points`` (round, value) pairs, evenly spaced, always with the last round."""
    n = len(curve)
    index = np.unique(np.linspace(0, n - 1, min(points, n)).round().astype(int))
    return index + 1, np.asarray(curve)[index]


def resolve_uri(uri: str | None) -> str:
    """The URI given (config or command line) wins; else $MLFLOW_TRACKING_URI; else a local
    sqlite store in the working directory. (The config's default already reads the variable.)
    """
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"


SERVER_TIMEOUT_S = 3.0
SERVER_PATIENCE_S = 30.0


def check_store(uri: str) -> None:
    """Refuse in seconds a store that cannot be used (minutes of retries otherwise): an
    MLflow server that does not answer, a sqlite file in a directory that is missing or
    cannot be written."""
    scheme = uri.split(":", 1)[0]
    if scheme in ("http", "https"):
        _check_server(uri)
        return
    if scheme != "sqlite" or not uri.startswith("sqlite:///"):
        return
    path = Path(uri.removeprefix("sqlite:///"))
    if path.exists():
        if not os.access(path, os.R_OK | os.W_OK):
            raise SweepError(f"the MLflow store {path} (tracking.uri) cannot be read and written")
        _check_free(path.parent or Path("."), MIN_FREE_BYTES, path, uri)
        return
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent or "."):
            pass
    except OSError as err:
        raise SweepError(
            f"cannot create the MLflow store {path} (tracking.uri={uri}): {err.strerror or err}. "
            "Point tracking.uri at a writable directory (e.g. tracking.uri=sqlite:///mlflow.db)"
        ) from None
    _check_free(path.parent or Path("."), NEW_STORE_BYTES, path, uri)


NEW_STORE_BYTES = 8 << 20
"""Free space a new sqlite store needs (its empty schema is about 1 MB, its journal as much)."""
MIN_FREE_BYTES = 1 << 20
"""Free space below which an existing sqlite store is refused (a batch could not be written)."""


def _check_free(directory: Path, needed: int, path: Path, uri: str) -> None:
    """Refuse a store on a disk without ``needed`` bytes free, before a lock file exists."""
    try:
        stat = os.statvfs(directory)
    except OSError:
        return
    free = stat.f_bavail * stat.f_frsize
    if free < needed:
        raise SweepError(
            f"the disk holding the MLflow store {path} (tracking.uri={uri}) has "
            f"{free / 1024:.0f} kB free, less than the {needed >> 20} MB a sweep needs there: "
            "free disk space, or point tracking.uri at another disk"
        )


STORE_ERRORS: tuple[type[BaseException], ...] = (
    MlflowException,
    SQLAlchemyError,
    sqlite3.Error,
    OSError,
)
"""What a failing store raises through MLflow (an HTTP error is an ``OSError`` too)."""


class _OneParagraph(logging.Filter):
    """MLflow logs each database error with its traceback before raising it; the driver
    says what failed itself (:func:`store_calls`), so only the message is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info, record.exc_text = None, None
        return True


logging.getLogger("mlflow.store.db.utils").addFilter(_OneParagraph())


@contextmanager
def store_calls(what: str) -> Iterator[None]:
    """Turn an error of the store during ``what`` into :class:`StoreFailed`."""
    try:
        yield
    except STORE_ERRORS as err:
        reason = " ".join(str(err).split())
        reason = reason if len(reason) <= 400 else reason[:397] + "..."
        raise StoreFailed(f"{what}: {type(err).__name__}: {reason}") from err


def _check_server(uri: str) -> None:
    """A server that refuses the connection (or whose host is unknown) is refused at once;
    one that accepts it but is slow to answer (a loaded machine) gets SERVER_PATIENCE_S."""
    deadline = time.monotonic() + SERVER_PATIENCE_S
    while True:
        try:
            with urlopen(f"{uri.rstrip('/')}/health", timeout=SERVER_TIMEOUT_S):
                return
        except (OSError, ValueError) as err:
            slow = isinstance(getattr(err, "reason", err), TimeoutError)
            if slow and time.monotonic() < deadline:
                continue
            raise SweepError(
                f"no MLflow tracking server answers at {uri} (tracking.uri): {err}. Start it "
                "(mlflow server --host HOST --port PORT ...), fix tracking.uri, or use a local "
                "store (tracking.uri=sqlite:///mlflow.db)"
            ) from None


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


def search_all(client: MlflowClient, experiment_id: str, filter_string: str = "") -> list[Any]:
    """Every active run of the experiment that matches ``filter_string``, page by page."""
    runs, token = [], None
    while True:
        page = client.search_runs(
            [experiment_id],
            filter_string=filter_string,
            run_view_type=ViewType.ACTIVE_ONLY,
            max_results=PAGE,
            page_token=token,
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


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


class Tracker:
    """The driver's MLflow writer and the resume index."""

    def __init__(
        self,
        uri: str | None,
        experiment: str,
        task: Task = GENERIC,
        artifacts_destination: str | None = None,
    ) -> None:
        """``artifacts_destination``: a tracking server's ``--artifacts-destination`` as
        this machine sees it (``tracking.artifacts_destination``), so that artifacts are
        written there directly instead of through the server."""
        self.artifacts_destination = Path(artifacts_destination) if artifacts_destination else None
        # MLflow prints a "View run at <url>" line per run on an HTTP server: not per cell.
        os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
        # A server that is away fails a call at once; the driver waits for it itself, saying
        # so (sweeper/store/record.py), instead of MLflow's silent minutes of HTTP retries.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        self.uri = resolve_uri(uri)
        check_store(self.uri)
        path = sqlite_path(self.uri)
        self.store_note = "" if path is None else prepare_sqlite_store(path)
        self.client = MlflowClient(tracking_uri=self.uri)
        self.experiment_name = experiment
        self.task = task
        self.metric_points = METRIC_POINTS
        self._tables: dict[str, CellTable] = {}
        self._table_runs: dict[str, int] = {}  # parent -> its tag TABLE_RUNS, as written
        self.library_change = ""  # how the libraries differ from the resumed sweep's
        self.driver = driver_id()
        found = self.client.get_experiment_by_name(experiment)
        if found is None:
            self.experiment_id = self.client.create_experiment(
                experiment, artifact_location=self._artifact_location(experiment)
            )
        else:
            if found.lifecycle_stage == "deleted":
                self.client.restore_experiment(found.experiment_id)
            self.experiment_id = found.experiment_id
        if found is None or found.tags.get(EXPERIMENT_KIND[0]) != EXPERIMENT_KIND[1]:
            self.client.set_experiment_tag(self.experiment_id, *EXPERIMENT_KIND)

    def _artifact_location(self, experiment: str) -> str | None:
        """Beside a local sqlite store, artifacts go to ``mlartifacts/`` next to the file."""
        if self.uri.startswith("sqlite:///"):
            db = Path(self.uri.removeprefix("sqlite:///")).resolve()
            return (db.parent / "mlartifacts" / experiment).as_uri()
        return None

    # --- searches -------------------------------------------------------------------
    def runs(self, filter_string: str = "") -> list[Any]:
        return search_all(self.client, self.experiment_id, filter_string)

    @property
    def remote(self) -> bool:
        """True for a tracking server (HTTP): calls are round trips, worth doing in parallel."""
        return self.uri.split(":", 1)[0] in ("http", "https", "databricks")

    def sweep_parents(self) -> list[Any]:
        return self.runs("tags.role = 'sweep'")

    def resume_index(self, parents: list[Any] | None = None) -> ResumeIndex:
        """Finished cells and RUNNING leftovers of the experiment (see the module docstring).

        The tables' lean columns, then the runs they may lack (:func:`search_mark`,
        :func:`runs_after_marks`)."""
        parents = self.sweep_parents() if parents is None else parents
        if len(parents) > MAX_INDEX_PARENTS:
            return self._index_from_runs(self.runs("tags.cell_key != ''"))
        index = ResumeIndex()
        marks: dict[str, int] = {}  # parent -> its table's mark, for those searched
        for parent in parents:
            run_id = parent.info.run_id
            try:
                tables = self.table(run_id).arrow(INDEX_COLUMNS)
            except Exception:  # unreadable: the runs rebuild it
                tables = []
            whole = holds(tables, parent.data.tags.get(TABLE_RUNS))
            for table in tables:
                self._index_table(table, run_id, index)
            index.tables += bool(tables)
            index.damaged += bool(tables) and not whole
            mark = search_mark(parent, bool(tables) and whole)
            if mark is not None:
                marks[run_id] = mark
        self._index_from_runs(runs_after_marks(self.client, self.experiment_id, marks), index)
        return index

    @staticmethod
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

    def _index_from_runs(self, runs: Iterable[Any], index: ResumeIndex | None = None):
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

    def finished_cells(self) -> dict[str, Any]:
        """cell_key -> the newest FINISHED run id of that cell (a lean view of the index)."""
        return {k: e.run_id for k, e in self.resume_index().finished.items()}

    def leftovers(self, parent_id: str | None = None) -> list[Any]:
        """The RUNNING cell runs and sweep parents (but ``parent_id``) of the experiment,
        found by status: a run created after a table's last flush but before its
        ``table_until`` mark (a driver aborted while logging) is found too."""
        running = self.runs("attributes.status = 'RUNNING'")
        return [
            r
            for r in running
            if r.info.run_id != parent_id
            and ("cell_key" in r.data.tags or r.data.tags.get("role") == "sweep")
        ]

    def reap(self, running: Iterable[Any], parent_id: str | None = None) -> list[str]:
        """Set KILLED the RUNNING runs left by killed drivers; return their run ids.

        A run is left over when it belongs to ``parent_id`` (this sweep, now driven by this
        process), or was made by this process (an earlier sweep it aborted), or its driver
        process is not known to be alive (gone, or on another host: the caller holds the
        store's lock or the experiment's lease, so no other driver writes here), or it has
        been RUNNING for longer than :data:`ORPHAN_AFTER_MS`. A RUNNING run of a live
        driver on this host that holds no lock (an older sweeper) is left alone.
        """
        reaped = []
        for run in running:
            tags = run.data.tags
            driver = tags.get("sweeper.driver")
            stale = now_ms() - int(run.info.start_time) > ORPHAN_AFTER_MS
            mine = tags.get("mlflow.parentRunId") == parent_id or driver == self.driver
            if mine or driver_alive(driver) is not True or stale:
                self.client.set_tag(
                    run.info.run_id, "sweeper.reaped", "left RUNNING by a killed driver"
                )
                self.client.set_terminated(run.info.run_id, "KILLED")
                reaped.append(run.info.run_id)
        return reaped

    def settle_own(self, parent_id: str | None = None) -> int:
        """Set KILLED the cell runs this process left RUNNING (a second Ctrl-C cut one off
        while it was being logged); best effort. Returns how many."""
        try:
            mine = self.runs(
                f"tags.`sweeper.driver` = '{self.driver}' and attributes.status = 'RUNNING'"
            )
            own = [r for r in mine if r.info.run_id != parent_id and "cell_key" in r.data.tags]
            for run in own:
                self.client.set_tag(run.info.run_id, "sweeper.reaped", "its driver was stopped")
                self.client.set_terminated(run.info.run_id, "KILLED")
            return len(own)
        except Exception:  # noqa: BLE001 - the next start settles them
            return 0

    def settle_supersession(self, parents: Iterable[Any], index: ResumeIndex) -> int:
        """After a rerun that did not end (a parent tagged ``sweeper.rerun_open``): tag every
        FINISHED run of each cell but the newest ``superseded_by`` the newest, untag the
        newest, make the newest each cell's entry in ``index``, and clear the marks.
        Returns how many runs were re-tagged."""
        marked = [p for p in parents if p.data.tags.get("sweeper.rerun_open")]
        if not marked:
            return 0
        finished = self.runs("tags.cell_key != '' and attributes.status = 'FINISHED'")
        by_key: dict[str, list[Any]] = {}
        for run in finished:
            by_key.setdefault(run.data.tags["cell_key"], []).append(run)
        newest = {
            key: result_of(runs, lambda r: (r.info.status, r.info.start_time))
            for key, runs in by_key.items()
        }
        for key, run in newest.items():
            index.add(key, IndexEntry(run.info.run_id, int(run.info.start_time), run=run))
        fixed = 0
        for run in finished:
            current = newest[run.data.tags["cell_key"]].info.run_id
            tag = run.data.tags.get("superseded_by")
            if run.info.run_id == current and tag is not None:
                self.client.delete_tag(run.info.run_id, "superseded_by")
                fixed += 1
            elif run.info.run_id != current and tag != current:
                self.client.set_tag(run.info.run_id, "superseded_by", current)
                fixed += 1
        for parent in marked:
            self.client.delete_tag(parent.info.run_id, "sweeper.rerun_open")
        return fixed

    # --- parent run -----------------------------------------------------------------
    def parent_run(self, sweep_key: str, config_yaml: str, description: str = "") -> str:
        """The sweep's parent run, reused when the same sweep is started again.

        Refuses to drive a sweep whose parent is RUNNING under another live process on this
        host (the same sweep started twice).
        """
        found = self.runs(f"tags.sweep_key = '{sweep_key}'")
        if found:
            run = max(found, key=lambda r: r.info.start_time)
            other = run.data.tags.get("sweeper.driver")
            if (
                run.info.status == "RUNNING"
                and other != self.driver
                and driver_alive(other) is True
            ):
                pid = other.split(":")[1]
                raise StoreBusy(
                    f"this sweep is already running in process {pid} on this host; wait for "
                    f"it to finish or stop it (kill -INT {pid}), then run the command again"
                )
            run_id = run.info.run_id
            before = run.data.tags.get(LIBRARIES_TAG)
            self.library_change = changed_libraries(before, installed_libraries())
            tags = {"sweeper.driver": self.driver, **code_tags()}
            tags[LIBRARIES_TAG] = installed_libraries()
            self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])
            self.client.update_run(run_id, status="RUNNING")
            return run_id
        run = self.client.create_run(
            self.experiment_id,
            run_name=f"sweep-{sweep_key[:8]}",
            tags={
                "sweep_key": sweep_key,
                "role": "sweep",
                "mlflow.note.content": description,
                "sweeper.driver": self.driver,
                LIBRARIES_TAG: installed_libraries(),
                **code_tags(),
            },
        )
        self.client.log_text(run.info.run_id, config_yaml, "config.yaml")
        return run.info.run_id

    def finish_parent(
        self,
        run_id: str,
        summary: Mapping[str, float],
        failed: bool,
        status: str | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Log the sweep's summary (metrics, and ``summary.json``) and end the parent run."""
        now = now_ms()
        metrics = [Metric(k, float(v), now, 0) for k, v in summary.items()]
        self.client.log_batch(run_id, metrics=metrics)
        if details is not None:
            self._write_artifact(
                run_id, "summary.json", json.dumps(details, indent=2, default=str).encode()
            )
        self.client.set_terminated(run_id, status or ("FAILED" if failed else "FINISHED"))

    def settle_parent(self, run_id: str, status: str) -> None:
        """End the parent run of a sweep that stopped abnormally; best effort (the store
        itself may be what failed: then the next start settles it)."""
        try:
            self.client.set_terminated(run_id, status)
        except Exception:  # noqa: BLE001 - nothing more to do; the original error follows
            pass

    def table(self, run_id: str) -> CellTable:
        """The sweep table of parent run ``run_id`` (:mod:`sweeper.store.table`)."""
        if run_id not in self._tables:
            uri = self.client.get_run(run_id).info.artifact_uri
            io_ = ArtifactIO(self.client, lambda _: self.artifact_dir(run_id, uri))
            self._tables[run_id] = CellTable(io_, run_id)
        return self._tables[run_id]

    def write_cells_table(
        self,
        run_id: str,
        rows: pd.DataFrame | list[dict[str, Any]],
        until: int | None = None,
        move_mark: bool = True,
    ) -> None:
        """Append ``rows`` to the parent's table as a part; then move its ``table_until``
        mark (``move_mark``): every cell run of this parent that ended before ``until`` (ms,
        default now) is in the table. The tag ``table_runs`` counts the runs ever written
        into the table: a table that holds fewer (a part lost or damaged) is not trusted
        (:func:`sweeper.store.table.holds`) and its runs are searched instead."""
        until = now_ms() if until is None else int(until)
        records = rows.to_dict("records") if isinstance(rows, pd.DataFrame) else list(rows)
        if not records and not move_mark:
            return
        self.table(run_id).append(records)
        count = self._table_runs_of(run_id) + len({r.get("run_id") for r in records})
        tags = {TABLE_RUNS: str(count)}
        if move_mark:
            tags["table_until"] = str(until)
        self.set_tags(run_id, tags)
        self._table_runs[run_id] = count

    def _table_runs_of(self, run_id: str) -> int:
        if run_id not in self._table_runs:
            tag = self.client.get_run(run_id).data.tags.get(TABLE_RUNS)
            self._table_runs[run_id] = int(number_or_none(tag) or 0)
        return self._table_runs[run_id]

    def read_cells_table(
        self, run_id: str, columns: list[str] | None = None
    ) -> pd.DataFrame | None:
        """Every row of the parent's table (each run once), or None when it has none."""
        try:
            return self.table(run_id).read(columns)
        except Exception:  # unreadable: the runs rebuild it
            return None

    # --- artifacts ------------------------------------------------------------------
    def artifact_dir(self, run_id: str, artifact_uri: str | None = None) -> Path | None:
        """The run's artifact directory when it is on this file system (a local store, or a
        server's artifact destination given as ``artifacts_destination``)."""
        uri = artifact_uri or self.client.get_run(run_id).info.artifact_uri
        if self.artifacts_destination is not None and uri.startswith("mlflow-artifacts:"):
            return self.artifacts_destination / urlparse(uri).path.lstrip("/")
        return local_artifact_dir(uri)

    def _write_artifact(
        self, run_id: str, name: str, data: bytes, artifact_uri: str | None = None
    ) -> None:
        """Write ``data`` as artifact ``name``: straight into a local artifact directory
        (atomically, by rename), else through the MLflow client."""
        local = self.artifact_dir(run_id, artifact_uri)
        if local is not None:
            local.mkdir(parents=True, exist_ok=True)
            partial = local / f".{name}.partial"
            partial.write_bytes(data)
            partial.replace(local / name)
            return
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_bytes(data)
            self.client.log_artifact(run_id, str(path))

    # --- cell runs ------------------------------------------------------------------
    def record_of(
        self,
        cell: Cell,
        outcome: Outcome,
        parent_id: str | None,
        supersedes: Iterable[str] = (),
        received_ms: int | None = None,
    ) -> tuple[RunRecord, dict[str, Any]]:
        """A cell's run (not yet written) and its row of the sweep's table.

        The run ends when the driver received the outcome (``received_ms``) and starts the
        cell's ``wall_s`` before, so MLflow's Duration is the cell's runtime. The resume
        index relies on the end: a run is written after its ``received_ms``, and the
        table's ``table_until`` mark is only moved past runs that are in the table. Curves
        are logged as step metrics at ``metric_points`` points (MLflow's charts); the table
        keeps :data:`CURVE_POINTS`.
        """
        received = now_ms() if received_ms is None else int(received_ms)
        start = received - int(round(outcome.wall_s * 1000))
        tags = dict(cell.tags)
        tags["node"] = outcome.where
        if outcome.node_id:
            tags["ray_node_id"] = outcome.node_id
        tags["sweeper.driver"] = self.driver
        tags.update(code_tags())
        if outcome.libraries:
            tags[LIBRARIES_TAG] = outcome.libraries
        if parent_id:
            tags["mlflow.parentRunId"] = parent_id
        if outcome.error:
            tags["error"] = outcome.error[:5000]
        result = outcome.result or {}
        params = {k: _param_value(v) for k, v in flatten(cell.config).items()}
        params.update({k: _param_value(v) for k, v in result.get("params", {}).items()})
        record = RunRecord(
            run_id=uuid.uuid4().hex,
            name=cell.label,
            status=outcome.status,
            start_time=start,
            end_time=received,
            tags=tags,
            params=params,
            metrics=[("wall_s", float(outcome.wall_s), 0)],
            supersedes=list(supersedes) if outcome.status == "FINISHED" else [],
        )
        row: dict[str, Any] = {
            "cell_key": cell.key,
            "run_id": record.run_id,
            "status": outcome.status,
            **{g: cell.tags.get(g) for g in cell.groups},
            "seed": cell.config.get("seed"),
            "error": outcome.error,
            "config": json.dumps(cell.config, sort_keys=True, default=str),
            "node": outcome.where,
            "wall_s": outcome.wall_s,
            "start_time": start,
            "libraries": outcome.libraries or None,
        }
        if outcome.status == "FINISHED":
            summary = {k: float(v) for k, v in result.get("summary", {}).items()}
            record.metrics += [(k, v, 0) for k, v in summary.items()]
            row.update(summary)
            curves = result.get("curves") or {}
            for name in self.task.curves:
                if name in curves:
                    steps, values = downsample(np.asarray(curves[name]), self.metric_points)
                    points = zip(values.tolist(), steps.tolist(), strict=True)
                    record.metrics += [(name, v, step) for v, step in points]
            row.update(_curve_columns(result, self.task.curves))
            packed = outcome.artifact if outcome.artifact is not None else pack(result)
            if packed is not None:
                record.artifacts[CELL_ARTIFACT] = packed
        elif outcome.traceback:
            record.artifacts["traceback.txt"] = outcome.traceback.encode()
        return record, row

    def log_record(self, record: RunRecord) -> None:
        """Write one run through MLflow's API (a store the driver cannot write in batches):
        create it with its tags, one ``log_batch`` per chunk of params and metrics, its
        artifacts, its final status; then tag the runs it supersedes."""
        run = self.client.create_run(
            self.experiment_id, start_time=record.start_time, run_name=record.name,
            tags=record.tags,
        )  # fmt: skip
        record.run_id = record.created = run.info.run_id
        params = [Param(k, v) for k, v in record.params.items()]
        end = record.end_time
        metrics = [Metric(k, v, end, int(step)) for k, v, step in record.metrics]
        param_chunks = [params[i : i + 100] for i in range(0, len(params), 100)]
        metric_chunks = [metrics[i : i + 900] for i in range(0, len(metrics), 900)]
        for i in range(max(len(param_chunks), len(metric_chunks))):
            self.client.log_batch(
                record.run_id,
                params=param_chunks[i] if i < len(param_chunks) else [],
                metrics=metric_chunks[i] if i < len(metric_chunks) else [],
            )
        for name, data in record.artifacts.items():
            self._write_artifact(record.run_id, name, data, run.info.artifact_uri)
        self.client.set_terminated(record.run_id, record.status, end_time=record.end_time)
        for old in record.supersedes:
            self.client.set_tag(old, "superseded_by", record.run_id)

    def discard_attempts(self, record_id: str) -> int:
        """Remove the runs an earlier attempt made of the record ``record_id`` (tag
        ``sweeper.record_id``): set KILLED, then deleted. Returns how many."""
        found = self.runs(f"tags.`sweeper.record_id` = '{record_id}'")
        for run in found:
            if run.info.status == "RUNNING":
                self.client.set_terminated(run.info.run_id, "KILLED")
            self.client.delete_run(run.info.run_id)
        return len(found)

    def write_run_artifact(self, run_id: str, artifact_uri: str, name: str, data: bytes) -> None:
        """Artifact ``name`` of a run whose artifact directory is ``artifact_uri``."""
        self._write_artifact(run_id, name, data, artifact_uri)

    @property
    def artifact_location(self) -> str:
        """The experiment's artifact location (a run's is ``<it>/<run id>/artifacts``)."""
        return self.client.get_experiment(self.experiment_id).artifact_location

    def log_cell(
        self,
        cell: Cell,
        outcome: Outcome,
        parent_id: str | None,
        supersedes: Iterable[str] = (),
    ) -> dict[str, Any]:
        """Record one cell through MLflow's API; return its table row."""
        record, row = self.record_of(cell, outcome, parent_id, supersedes)
        self.log_record(record)
        row["run_id"] = record.run_id
        return row

    def row_from_run(self, cell: Cell, run: Any) -> dict[str, Any]:
        """Rebuild a finished cell's table row from its run (when no table had it): the
        summary from its metrics, the curve and hyperparameters from its ``cell.npz``
        (else the curves from their step metrics)."""
        if isinstance(run, str):
            run = self.client.get_run(run)
        curves = [c for c in self.task.curves if c in run.data.metrics]
        skip = {*curves, "wall_s"}
        summary = {k: v for k, v in run.data.metrics.items() if k not in skip}
        row = {
            "cell_key": cell.key,
            "run_id": run.info.run_id,
            "status": "FINISHED",
            **{g: cell.tags.get(g) for g in cell.groups},
            "seed": cell.config.get("seed"),
            "error": None,
            "config": json.dumps(cell.config, sort_keys=True, default=str),
            "node": run.data.tags.get("node"),
            "wall_s": run.data.metrics.get("wall_s"),
            "start_time": int(run.info.start_time),
            **summary,
        }
        result = self._read_npz(run.info.run_id, run.info.artifact_uri)
        if result is not None:
            row.update(_curve_columns(result, self.task.curves))
        else:
            for name in curves:
                history = sorted(
                    self.client.get_metric_history(run.info.run_id, name), key=lambda m: m.step
                )
                row["curve_step"] = [m.step for m in history]
                row[f"curve_{name}"] = [m.value for m in history]
        return row

    def _read_npz(self, run_id: str, artifact_uri: str) -> dict[str, Any] | None:
        """A cell's curves and trace back from its ``cell.npz``, or None."""
        try:
            local = self.artifact_dir(run_id, artifact_uri)
            if local is not None:
                data = (local / CELL_ARTIFACT).read_bytes()
            else:
                with tempfile.TemporaryDirectory() as tmp:
                    data = Path(
                        self.client.download_artifacts(run_id, CELL_ARTIFACT, tmp)
                    ).read_bytes()
            with np.load(io.BytesIO(data)) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except Exception:
            return None
        return {
            "curves": {k[6:]: v for k, v in arrays.items() if k.startswith("curve_")},
            "trace": {k[6:]: v for k, v in arrays.items() if k.startswith("trace_")},
        }

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])


def _curve_columns(result: Mapping[str, Any], declared: Iterable[str]) -> dict[str, Any]:
    """The table's curve_step, curve_<name> (each ``declared`` curve the result has) and
    hp_<name> columns of a cell's result, as arrays of at most :data:`CURVE_POINTS`; the
    declared curves share one length."""
    columns: dict[str, Any] = {}
    curves = result.get("curves") or {}
    for name in declared:
        if name in curves:
            steps, values = downsample(np.asarray(curves[name]))
            columns["curve_step"] = steps
            columns[f"curve_{name}"] = values
    trace = result.get("trace") or {}
    names = [str(n) for n in trace.get("names", [])]
    if names:
        values = np.asarray(trace["values"], dtype=float)
        values = values[:, None] if values.ndim == 1 else values
        for i, name in enumerate(names):
            columns[f"hp_{name}"] = downsample(values[:, i])[1]
    return columns


def number_or_none(value: Any) -> float | None:
    """``value`` as a float, or None when it is missing, NaN or not a number (MLflow tags)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if np.isnan(number) else number


def _param_value(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, list | dict) else str(value)
    return text if len(text) <= MAX_PARAM_LENGTH else text[: MAX_PARAM_LENGTH - 3] + "..."
