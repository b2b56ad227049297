"""The store: the MLflow experiment a sweep records into, as the driver sees it (docs/
architecture.md, "The store").

The driver talks to it in a few verbs, whatever is behind the tracking URI (a sqlite file,
a tracking server through MLflow's API, a server's database written directly)::

    with SweepStore.open(uri, name, task, ...) as store:  # the lock, or lease and fence
        done = store.done(cells)           # what is finished: the resume index
        store.prepare(cfg, writes=...)     # how batches are written; bad settings refused
        store.begin(key, config, ...)      # the parent run; what killed drivers left settled
        recorder = store.recorder(progress)  # record batches (add, due, flush, drain, close)
        store.close(summary, ...)          # the table consolidated, the parent ended

Behind the verbs, and nowhere else: the one-driver rule (:mod:`~sweeper.store.lock`), the
resume index (:mod:`~sweeper.store.index`), the settling of leftovers and supersession
(:mod:`~sweeper.store.settle`), legacy keys (:mod:`~sweeper.store.migrate`), the parent run
and its table parts (:mod:`~sweeper.store.parent`, :mod:`~sweeper.store.table`), and
writing runs in batches or through the API (:mod:`~sweeper.store.record`,
:mod:`~sweeper.store.bulk`). The store imports nothing of the driver: it reads cells and
outcomes by their attributes (:class:`~sweeper.store.cellruns.CellLike`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar

import pandas as pd
from omegaconf import DictConfig

from sweeper.errors import StoreFailed
from sweeper.store.cellruns import row_from_run
from sweeper.store.failures import STORE_ERRORS
from sweeper.store.index import IndexEntry, read_index
from sweeper.store.lock import AdvisoryLock, Fence, Lease, LeaseLost, store_lock
from sweeper.store.migrate import Cells, carry_over
from sweeper.store.parent import SweepRun
from sweeper.store.record import (
    Batching,
    Recorder,
    Says,
    open_writer,
    patience_of,
    patiently,
    refuse_foreign_schema,
)
from sweeper.store.settle import (
    clear_orphans,
    leftovers,
    reap,
    retract,
    settle_own,
    settle_supersession,
)
from sweeper.store.tracking import Tracker, Vocabulary, check_store, quiet_mlflow, resolve_uri
from sweeper.uri import redact, scheme

__all__ = [
    "CLEANUP_S",
    "Done",
    "LeaseLost",
    "Recorder",
    "SweepStore",
    "check_store",
    "patience_of",
    "refuse_foreign_schema",
    "resolve_uri",
    "within",
]

T = TypeVar("T")
CLEANUP_S = 10.0
"""The longest the driver's clean-up after a failure (settling its runs, dropping its lease)
may wait for a store that does not answer: what it leaves, the next start settles."""


def within(seconds: float, action: Callable[[], Any]) -> bool:
    """``action()``, given up after ``seconds`` (it goes on in a daemon thread that dies with
    the process): a store that hangs never holds the driver's exit; its errors are ignored
    (the next start settles what it leaves). Returns whether it ended without one."""
    ended = threading.Event()

    def attempt() -> None:
        with suppress(*STORE_ERRORS):
            action()
            ended.set()

    thread = threading.Thread(target=attempt, name="sweeper-cleanup", daemon=True)
    thread.start()
    thread.join(seconds)
    return ended.is_set()


@dataclass
class Done:
    """What the experiment already holds of a sweep (:meth:`SweepStore.done`).

    Attributes
    ----------
    finished : dict of str to str
        Cell key -> the run that is its result, for the sweep's cells that have one.
    tables, searched_runs, damaged : int
        Sweep tables read, runs searched, tables that lost rows (their runs searched).
    retagged : int
        Runs of an interrupted rerun re-tagged ``superseded_by``.
    carried : int
        Runs stored under an older sweeper's cell keys carried over to today's.
    seconds : float
        How long reading it took.
    retracted : int
        Runs a driver on another host left uncommitted, deleted
        (:func:`~sweeper.store.settle.retract`).
    """

    finished: dict[str, str]
    tables: int = 0
    searched_runs: int = 0
    damaged: int = 0
    retagged: int = 0
    carried: int = 0
    seconds: float = 0.0
    retracted: int = 0


class SweepStore:
    """The experiment a sweep records into, held by this driver alone while it is open.

    Build it with :meth:`open`. ``patience_s`` bounds every call's wait for a store that is
    away (a server or database restarting), said through ``say``; past it,
    :class:`~sweeper.errors.StoreFailed`.
    """

    def __init__(self, tracker: Tracker, fence: Fence | None, patience_s: float, say: Says):
        self.tracker, self.fence = tracker, fence
        self.patience_s, self.say = patience_s, say
        self.parent: SweepRun | None = None
        self.batching: Batching | None = None
        self.writer: Any = None
        self._known: dict[str, IndexEntry] = {}
        self._rerun = False
        self._cleanup_by: float | None = None  # when the clean-up's time is up

    @classmethod
    @contextmanager
    def open(
        cls,
        uri: str,
        experiment: str,
        task: Vocabulary,
        artifacts_destination: str | None,
        command: str,
        patience_s: float,
        say: Says,
    ) -> Iterator[SweepStore]:
        """Open experiment ``experiment`` of the store at ``uri`` for this driver alone: the
        sqlite file's lock, or a PostgreSQL advisory lock, or a lease on a tracking server,
        then the experiment's fencing token (:mod:`sweeper.store.lock`); released on exit.
        ``command`` (the resume command) is recorded as the holder."""
        quiet_mlflow()
        with store_lock(uri, command):
            tracker = _patiently(
                f"opening the MLflow store {uri}",
                lambda: Tracker(uri, experiment, task, artifacts_destination, patience_s),
                patience_s,
                say,
            )
            fence, release = _patiently(
                "taking the experiment's lease", lambda: _hold(tracker, command), patience_s, say
            )
            store = cls(tracker, fence, patience_s, say)
            try:
                tracker.check_artifacts_reachable()  # after the lease: a busy store says so
                yield store
            finally:
                store._cleanup(release)

    # --- what the driver reads ------------------------------------------------------
    @property
    def uri(self) -> str:
        """The tracking URI, a password in it redacted (it is printed)."""
        return redact(self.tracker.uri)

    @property
    def experiment_id(self) -> str:
        return self.tracker.experiment_id

    @property
    def parent_run_id(self) -> str:
        return self._parent().run_id

    @property
    def note(self) -> str:
        """What opening did to a sqlite store (upgraded or repaired whole), or empty."""
        return self.tracker.store_note

    @property
    def library_change(self) -> str:
        """How the libraries differ from the resumed sweep's (empty if they do not)."""
        return self.parent.library_change if self.parent is not None else ""

    # --- the verbs ------------------------------------------------------------------
    def done(self, cells: Cells) -> Done:
        """The cells of ``cells`` that have a result: the resume index, after re-tagging an
        interrupted rerun's runs and carrying over runs under legacy keys."""
        started = time.perf_counter()

        def read() -> tuple[Any, int, int, int]:
            retracted = retract(self.tracker)  # first: what other hosts' drivers left
            parents = self.tracker.sweep_parents()
            index = read_index(self.tracker, parents)
            retagged = settle_supersession(self.tracker, parents, index)
            return index, retagged, carry_over(self.tracker, cells, index), len(retracted)

        index, retagged, carried, retracted = self._patiently(
            "reading what the experiment holds", read
        )
        self._known = {k: index.finished[k] for k in cells.keys if k in index.finished}
        finished = {k: entry.run_id for k, entry in self._known.items()}
        seconds = time.perf_counter() - started
        return Done(
            finished, index.tables, index.searched_runs, index.damaged, retagged, carried,
            seconds, retracted,
        )  # fmt: skip

    def prepare(self, cfg: DictConfig, writes: bool) -> None:
        """How batches will be written (the ``tracking`` settings), and the writer into the
        store's database when there is one and ``writes``: bad settings, or a database that
        is not the store's own, are refused here, before anything runs."""
        self.batching = Batching.of(cfg, self.tracker)
        self.writer = open_writer(self.batching, self.tracker) if writes else None

    def begin(
        self, sweep_key: str, config_yaml: str, description: str, cells: Cells, rerun: bool
    ) -> tuple[int, int]:
        """The sweep's parent run (reused when the same sweep starts again); then what
        killed drivers left is settled: their RUNNING runs set KILLED, their table parts
        consolidated, the table given a row for each cell finished before that it lacks.
        Returns (runs reaped, rows rebuilt from their runs)."""
        self._rerun = rerun
        self.parent = self._patiently(
            "creating the sweep's parent run",
            lambda: SweepRun.open(self.tracker, sweep_key, config_yaml, description),
        )
        try:
            return self._patiently(
                "settling the runs a killed driver left RUNNING", lambda: self._settle(cells)
            )
        except BaseException as err:
            self.abandon("KILLED" if isinstance(err, KeyboardInterrupt) else "FAILED")
            raise

    def recorder(self, progress: Says) -> Recorder:
        """The recorder of this sweep's cells (:class:`~sweeper.store.record.Recorder`): a
        cell that has a result already gets a run that supersedes it."""
        assert self.parent is not None and self.batching is not None, "begin() first"
        known = {k: e.run_id for k, e in self._known.items()}
        return Recorder(
            self.tracker, self.parent, self.batching, progress, self.writer, self.fence, known
        )

    def close(
        self,
        summary: Mapping[str, float],
        details: Mapping[str, Any],
        failed: bool,
        status: str | None,
        rerun_ended: bool,
        say: Says,
        away: bool = False,
    ) -> str:
        """Consolidate the table, log the summary and end the parent run (``status``, else
        FAILED when ``failed``, else FINISHED); ``rerun_ended``: a rerun that ran to its end
        clears its mark. Returns the store's error when it fails now (the parent is then
        set FAILED and the next start settles what is left), else an empty string.
        ``away``: the store has just failed (it was waited for already): one attempt within
        the clean-up time (:data:`CLEANUP_S`), not a new wait."""
        parent = self._parent()

        def end() -> None:
            parent.table.consolidate()
            if self._rerun and self._known and rerun_ended:
                self.tracker.client.delete_tag(parent.run_id, "sweeper.rerun_open")
            parent.finish(summary, failed=failed, status=status, details=details)

        if away:
            if not self._cleanup(end):
                self._cleanup(lambda: parent.settle("FAILED"))
            return ""
        try:
            patiently("ending the sweep's parent run", end, self.patience_s, say)
        except StoreFailed as err:  # recorded by the caller
            self._cleanup(lambda: parent.settle("FAILED"))
            return str(err)
        return ""

    def show(self, axis: str, colours: Mapping[str, str], view: tuple[str, str] | None) -> None:
        """How MLflow's UI shows the sweep (sweeper/ui.py): each cell run recorded from now
        on is drawn in ``colours[its axis tag]``, and ``view`` (an experiment tag: name,
        value) is the comparison its link opens."""
        self.tracker.colour_by = (axis, dict(colours))
        if view is not None:
            experiment = self.tracker.experiment_id
            self._patiently(
                "storing the sweep's view",
                lambda: self.tracker.client.set_experiment_tag(experiment, *view),
            )

    def attach(self, name: str, data: bytes) -> None:
        """Artifact ``name`` of the sweep's parent run (e.g. ``decisions.json``); waited
        for like every store call."""
        parent = self._parent()
        self._patiently(
            f"writing {name}", lambda: self.tracker.write_artifact(parent.run_id, name, data)
        )

    def abandon(self, status: str | None = None) -> None:
        """After a failure: end the parent run ``status`` (if given) and set KILLED the cell
        runs this driver left RUNNING, within the clean-up time (:meth:`_cleanup`)."""
        parent = self.parent
        if parent is None:
            return
        if status is not None:
            self._cleanup(lambda: parent.settle(status))
        self._cleanup(lambda: settle_own(self.tracker, parent.run_id))

    def table(
        self, keys: Sequence[str], columns: Sequence[str] | None = None
    ) -> pd.DataFrame | None:
        """The sweep's table read back: one row per cell of ``keys`` (its result's row)."""
        wanted = None if columns is None else list(dict.fromkeys(["cell_key", "status", *columns]))
        parent = self._parent()
        table = self._patiently("reading the sweep's table", lambda: parent.table.current(wanted))
        if table is None:
            return None
        return table[table["cell_key"].isin(set(keys))].reset_index(drop=True)

    # --- internals ------------------------------------------------------------------
    def _cleanup(self, action: Callable[[], Any]) -> bool:
        """``action()`` within the clean-up time: one budget of :data:`CLEANUP_S` for all the
        clean-up after a failure (a store that does not answer holds the exit that long in
        all, not once per call); whether it ended (:func:`within`)."""
        if self._cleanup_by is None:
            self._cleanup_by = time.monotonic() + CLEANUP_S
        return within(max(self._cleanup_by - time.monotonic(), 0.1), action)

    def _parent(self) -> SweepRun:
        assert self.parent is not None, "begin() first"
        return self.parent

    def _patiently(self, what: str, action: Callable[[], T]) -> T:
        return _patiently(what, action, self.patience_s, self.say)

    def _settle(self, cells: Cells) -> tuple[int, int]:
        parent = self._parent()
        reaped = len(reap(self.tracker, leftovers(self.tracker, parent.run_id), parent.run_id))
        orphans = clear_orphans(self.tracker, self.tracker.artifact_root)
        if orphans:
            self.say.message(
                f"  {orphans} artifact director(ies) of runs a failed batch never committed removed"
            )
        parent.table.consolidate()  # the parts a killed driver left
        rebuilt = _carry_rows(self.tracker, parent, cells, self._known)
        if self._rerun and self._known:  # cleared when the rerun ends; a start that finds it
            parent.set_tags({"sweeper.rerun_open": "1"})  # re-tags (settle_supersession)
        return reaped, rebuilt


def _patiently(what: str, action: Callable[[], T], patience_s: float, say: Says) -> T:
    return patiently(redact(what), action, patience_s, say)


def _hold(tracker: Tracker, command: str) -> tuple[Fence, Callable[[], None]]:
    """Take the experiment for this driver (:mod:`sweeper.store.lock`): on a PostgreSQL
    store its advisory lock, then on every store a lease recorded in the store itself (what
    a driver through a tracking server on the same database sees: the sqlite file lock and
    the advisory lock reach no such driver), then its fencing token. Returns the fence and
    its release (the sqlite file lock is :func:`store_lock`'s)."""
    lock = None
    if scheme(tracker.uri) == "postgresql":
        lock = AdvisoryLock(tracker.database_uri(), tracker.experiment_id, tracker.driver, command)
        lock.acquire()
    where = redact(tracker.uri)
    lease = Lease(tracker.client, tracker.experiment_id, tracker.driver, command, where=where)

    def release() -> None:
        lease.release()
        if lock is not None:
            lock.release()

    try:
        lease.acquire()
        fence = Fence(tracker.client, tracker.experiment_id, tracker.driver, lease, lock)
        fence.claim()
    except BaseException:
        release()
        raise
    return fence, release


def _carry_rows(
    tracker: Tracker, parent: SweepRun, cells: Cells, known: dict[str, IndexEntry]
) -> int:
    """Give the parent's table a row for each cell finished earlier that it lacks (or holds
    under a legacy key): copied from another sweep's table, else rebuilt from the run.
    Returns how many were rebuilt."""
    by_parent: dict[str, dict[str, str]] = {}  # table's parent -> run id -> cell key
    rebuilt: list[dict[str, Any]] = []
    for i, key in enumerate(cells.keys):
        entry = known.get(key)
        if entry is None:
            continue
        if entry.row is not None and entry.parent:
            held = entry.parent == parent.run_id and entry.row.get("cell_key") == key
            if not held:
                by_parent.setdefault(entry.parent, {})[entry.run_id] = key
        else:
            rebuilt.append(row_from_run(tracker, cells[i], entry.run or entry.run_id))
    for other, keys in by_parent.items():
        table = SweepRun(tracker, other).rows()
        rows = [] if table is None else table[table["run_id"].isin(keys)].to_dict("records")
        rows = [{**_present(r), "cell_key": keys[r["run_id"]]} for r in rows]
        if rows:
            parent.append(rows, move_mark=False)
    if rebuilt:
        parent.append(rebuilt, move_mark=False)
    return len(rebuilt)


def _present(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not _missing(v)}


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)
