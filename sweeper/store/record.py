"""Recording finished cells in batches, with patience for a store that is briefly away.

The driver hands each finished cell to a :class:`Recorder`, which writes them a batch at a
time (``tracking.batch_size`` cells, or whatever has arrived after ``tracking.batch_s``
seconds) in a writer thread, while the driver goes on dispatching and gathers the next
batch: the batch's runs, then its rows as a part of the sweep's table
(:mod:`sweeper.store.table`), then the table's ``table_until`` mark. Runs go in one transaction
straight into the store's database when the driver can reach it (:mod:`sweeper.store.bulk`),
else through MLflow's API (``tracking.log_threads`` in parallel for a tracking server),
where a batch's runs are written RUNNING and committed (their status set) only after the
fence says this driver still holds the experiment (:meth:`Recorder._commit`).

A store that stops answering (a tracking server or its database restarted) is waited for:
each write is retried with a backoff doubling from 1 s to 30 s, said on the progress line,
for up to ``tracking.patience_s`` seconds; past that the sweep stops cleanly
(:class:`~sweeper.store.tracking.StoreFailed`, exit status 3, the resume command printed). Only
errors that a restart explains are waited for (a refused or dropped connection, a busy
database: :mod:`sweeper.store.failures`); a full disk or a bad schema stops the sweep at once.
Each call is bounded by the patience too (:func:`bounded`): a store that holds a call without
answering (its answers lost, the connection left open) stops the sweep as well.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import tenacity
from mlflow.exceptions import MlflowException
from omegaconf import DictConfig

from sweeper import memory
from sweeper.errors import StoreFailed, SweepError, boolean
from sweeper.process import now_ms
from sweeper.store.bulk import BulkWriter, RunRecord, database_of, refuse, schema_revision
from sweeper.store.cellruns import (
    CellLike,
    OutcomeLike,
    commit_record,
    discard_attempts,
    log_record,
    record_of,
    supersede,
)
from sweeper.store.failures import STORE_ERRORS, transient
from sweeper.store.lock import Fence, known_revision
from sweeper.store.parent import SweepRun
from sweeper.store.settle import pending
from sweeper.store.tracking import Tracker
from sweeper.store.tracking import bounded as bounded_uri
from sweeper.uri import redact

T = TypeVar("T")
Logged = tuple[CellLike, OutcomeLike, dict[str, Any]]
"""A recorded cell: the cell, its outcome and its row of the sweep's table."""
Received = tuple[CellLike, OutcomeLike, list[str], int]
"""A cell to record: the cell, its outcome, the runs it supersedes, when it was received
(ms)."""
BACKOFF_S = (1.0, 30.0)
ATTEMPT_TAG = "sweeper.record_id"
"""The tag naming a run's record through MLflow's API (the id the driver chose for it)."""


class Says(Protocol):
    """Where waiting for the store is said (the driver's progress line is one)."""

    def message(self, text: str) -> None: ...


@dataclass
class Batching:
    """How cells are recorded (the ``tracking`` settings)."""

    database: str | None  # the SQL database runs are written into; None: MLflow's API
    batch_size: int = 200
    batch_s: float = 1.0
    log_threads: int = 1
    patience_s: float = 300.0

    @classmethod
    def of(cls, cfg: DictConfig, tracker: Tracker) -> Batching:
        tracking = cfg.tracking
        threads = tracking.get("log_threads")
        if threads is None:
            threads = 4 if tracker.remote else 1
        values = {
            "batch_size": _positive(tracking.get("batch_size", 200), "tracking.batch_size", int),
            "batch_s": _positive(tracking.get("batch_s", 1.0), "tracking.batch_s", float),
            "log_threads": _positive(threads, "tracking.log_threads", int),
            "patience_s": patience_of(cfg),
        }
        direct = boolean(tracking.get("direct_writes", True), "tracking.direct_writes", True)
        database = database_of(tracker.uri, tracking.get("database")) if direct else None
        return cls(database, **values)


def refuse_foreign_schema(uri: str, tracking: DictConfig) -> None:
    """Refuse direct writes (``tracking.database``) into a tracking server's database whose
    MLflow schema is not this MLflow's (a server a release behind, say MLflow 2.22): one
    paragraph, before anything is opened or written; the API path is named. A database that
    cannot be reached, or holds no MLflow schema yet, is left to the store's opening and
    :func:`open_writer`."""
    direct = boolean(tracking.get("direct_writes", True), "tracking.direct_writes", True)
    database = tracking.get("database")
    if not direct or not database or str(database) == uri:
        return  # the store itself: this MLflow opens it (and a sqlite store it upgrades)
    try:
        revision, head = schema_revision(bounded_uri(str(database), 30.0))
    except (*STORE_ERRORS, ImportError, ValueError):
        return
    if revision is None or revision == head:
        return  # this MLflow's schema, or none yet: the store creates it when it opens
    import mlflow

    made = "an older MLflow" if known_revision(revision) else "a newer MLflow"
    raise SweepError(
        f"tracking.database={redact(str(database))} holds the schema of {made} (revision "
        f"{revision}), not this MLflow's ({mlflow.__version__}, revision {head}): direct writes "
        "write only the schema they know, so nothing was written into it. Leave "
        "tracking.database unset (or set tracking.direct_writes=false): the runs then go "
        f"through the tracking server's API at {redact(uri)}, which works with a server of "
        "another MLflow release (2.22 and later); or run the server with this MLflow, after "
        "`mlflow db upgrade` on a backup of its database"
    )


def open_writer(batching: Batching, tracker: Tracker) -> BulkWriter | None:
    """The writer into ``batching.database`` (None without one); a database that cannot be
    used, or that is not the tracking store's own (its experiment of this id has another
    name), is a one-paragraph error saying what to do, before anything runs."""
    if batching.database is None:
        return None
    try:
        database = tracker.database_uri(batching.database)
        writer = BulkWriter(database, tracker.experiment_id, tracker.artifact_location)
        found = writer.experiment_name()
    except SweepError:  # said already (MlflowChanged: a private name of MLflow missing)
        raise
    except (*STORE_ERRORS, ImportError, ValueError) as err:  # a wrong URI or port, a database
        # down, a missing driver, a schema of another MLflow
        # Through a tracking server, its MLflow writes the runs (its schema is its own);
        # a database tracking.uri is read by this MLflow either way: no way around it.
        way_out = (
            ", or set tracking.direct_writes=false to write through the server's API"
            if tracker.remote
            else ", or bring its schema to this MLflow's (mlflow db upgrade, after a backup)"
        )
        reason = " ".join(str(err).split("(Background on this error")[0].split())[:300]
        raise SweepError(
            f"cannot write runs into the database {redact(batching.database)} "
            f"(tracking.database, or a sqlite/postgresql tracking.uri): {type(err).__name__}: "
            f"{redact(reason)}. Fix the URI, start the database, install its driver "
            f"(pip install 'sweeper[postgres]' for PostgreSQL){way_out}"
        ) from None
    if found != tracker.experiment_name:
        writer.close()
        what = "has no experiment" if found is None else f"names experiment '{found}'"
        raise SweepError(
            f"tracking.database={redact(batching.database)} is not the database of the tracking "
            f"store {redact(tracker.uri)}: where the store's experiment "
            f"'{tracker.experiment_name}' has id {tracker.experiment_id}, that database {what} "
            "of this id, so the runs would go into another store. Set tracking.database to "
            "the tracking server's --backend-store-uri, or leave it null (runs go through "
            "the server's API)"
        )
    return writer


def patience_of(cfg: DictConfig) -> float:
    """``tracking.patience_s``: how long a store that is away is waited for."""
    return _positive(cfg.tracking.get("patience_s", 300), "tracking.patience_s", float)


def _positive(value: Any, key: str, kind: type) -> Any:
    try:
        number = kind(value)
    except (TypeError, ValueError):
        number = 0
    if number <= 0 or (kind is int and number != float(value)):
        raise SweepError(f"{key} must be a positive {kind.__name__}, got {value!r}")
    return number


class Recorder:
    """Records finished cells in batches (see the module docstring), one batch at a time in
    a writer thread while the driver goes on dispatching: :meth:`flush` hands a batch over
    and returns the cells of the batch written before it, :meth:`drain` waits for all.

    Parameters
    ----------
    tracker : Tracker
    parent : SweepRun
        The sweep's parent run: its table gets a part per batch.
    batching : Batching
    progress : Says
        Where waiting for the store is said.
    writer : BulkWriter or None
        Writes runs straight into the store's database; None: through MLflow's API.
    fence : Fence or None
        This driver's hold on the experiment (a lease, an advisory lock), checked by every
        batch (in its transaction when it goes into the database); None: a file lock.
    results : mapping of str to str, optional
        Cell key -> the run that is its result now: a new run of that cell supersedes it.
    """

    def __init__(
        self,
        tracker: Tracker,
        parent: SweepRun,
        batching: Batching,
        progress: Says,
        writer: BulkWriter | None = None,
        fence: Fence | None = None,
        results: Mapping[str, str] | None = None,
    ) -> None:
        self.results = results or {}
        self.fence = fence  # the experiment still this driver's: checked by every batch
        self.tracker, self.parent, self.batching, self.progress = (
            tracker, parent, batching, progress,
        )  # fmt: skip
        self.writer = writer  # None: runs through MLflow's API (:func:`open_writer`)
        if writer is not None:
            writer.fence = fence
        threads = batching.log_threads
        self.pool = ThreadPoolExecutor(threads, "sweeper-log") if threads > 1 else None
        self.thread = ThreadPoolExecutor(1, "sweeper-record")
        self.pending: Future[list[Logged]] | None = None  # the batch being written
        self.batch: list[Received] = []
        self.opened = 0.0
        self.mark = 0  # the last batch's closing time (ms): later cells are received at or after it
        self.cut: list[Logged] = []
        self.stop: Any = None  # the driver's stop request: a Ctrl-C ends a wait for the store
        self.closing = False

    @property
    def requested(self) -> bool:
        """Whether a wait for the store should end (a Ctrl-C, or :meth:`close`)."""
        return self.closing or (self.stop is not None and self.stop.requested)

    def add(
        self, cell: CellLike, outcome: OutcomeLike, supersedes: list[str] | None = None
    ) -> None:
        """Take a finished cell into the open batch; ``supersedes``: the runs its run
        supersedes (default: the cell's result in ``results``, if any)."""
        if supersedes is None:
            old = self.results.get(cell.key)
            supersedes = [old] if old else []
        if not self.batch:
            self.opened = time.monotonic()
        self.batch.append((cell, outcome, supersedes, max(now_ms(), self.mark)))

    def due(self) -> bool:
        """A full batch, or one open for ``batch_s`` seconds."""
        if not self.batch:
            return False
        full = len(self.batch) >= self.batching.batch_size
        return full or time.monotonic() - self.opened >= self.batching.batch_s

    def flush(self) -> list[Logged]:
        """Wait for the batch in flight, then hand the open batch to the writer thread;
        return the cells the batch in flight recorded (with their rows). Its failure
        (:class:`StoreFailed`, a second Ctrl-C) is raised here, the open batch kept."""
        done = self._wait()
        if self.batch:
            batch, self.batch = self.batch, []
            self.mark = max(received for _, _, _, received in batch) + 1
            self.pending = self.thread.submit(self._record, batch, self.mark)
        return done

    def drain(self) -> list[Logged]:
        """Write every cell added; return those not yet returned by :meth:`flush`."""
        return self.flush() + self._wait()

    def take_cut(self) -> list[Logged]:
        """The cells recorded by a batch that failed part way (once)."""
        cut, self.cut = self.cut, []
        return cut

    def close(self) -> list[Logged]:
        """End the writer thread (a batch in flight is finished, a wait for the store cut
        short) and the log threads; return the cells recorded but not yet returned."""
        self.closing = True
        left: list[Logged] = []
        try:
            left = self._wait()
        except (StoreFailed, KeyboardInterrupt):  # its recorded part is in the cut
            pass
        self.thread.shutdown(wait=True)
        if self.pool is not None:
            self.pool.shutdown(wait=True)
        if self.writer is not None:
            self.writer.close()
        return left + self.take_cut()

    # --- internals (the writer thread) ------------------------------------------------
    def _wait(self) -> list[Logged]:
        pending, self.pending = self.pending, None
        return [] if pending is None else pending.result()

    def _record(self, batch: list[Received], closed: int) -> list[Logged]:
        """Write a batch: its runs, then its table part, then the table's mark, ``closed``
        (ms): every cell received before it is in this batch or an earlier one, every cell
        received at or after it in a later one (so the resume index searches only those,
        ``end_time >= mark``). When the store fails part way, the cells whose runs were
        written are kept in :attr:`cut` (their rows are rebuilt by the next start)."""
        checked = [self._made(*received) for received in batch]
        made = [(record, row) for _, record, row in checked]
        logged = [(c, o, row) for (c, _, _, _), (o, _, row) in zip(batch, checked, strict=True)]
        try:
            self._patiently("recording a batch of cells", lambda: self._write([r for r, _ in made]))
        except BaseException:
            self.cut = [x for x, (record, _) in zip(logged, made, strict=True) if record.written]
            raise
        finally:
            for record, row in made:
                row["run_id"] = record.run_id
        rows = [row for _, _, row in logged]
        try:
            self._patiently(
                "writing the sweep's table",
                lambda: self.parent.append(rows, until=closed),
            )
        except BaseException:
            self.cut = logged
            raise
        memory.give_back()
        return logged

    def _made(
        self, cell: CellLike, outcome: OutcomeLike, supersedes: list[str], received: int
    ) -> tuple[OutcomeLike, RunRecord, dict[str, Any]]:
        """The cell's outcome, run and table row. A result that cannot be recorded (a value
        that is not a number, a key MLflow's API refuses: one the worker did not check,
        :mod:`sweeper.outcome`) makes the cell FAILED, saying why; the batch goes on."""
        parent = self.parent.run_id
        try:
            record, row = record_of(self.tracker, cell, outcome, parent, supersedes, received)
            refuse(record)
        except (TypeError, ValueError, MlflowException) as err:
            outcome = unrecordable(outcome, err)
            record, row = record_of(self.tracker, cell, outcome, parent, supersedes, received)
        return outcome, record, row

    def _write(self, records: list[RunRecord]) -> None:
        if self.fence is not None:
            self.fence.before_batch(api=self.writer is None)
        if self.writer is not None:
            self._write_direct(records)
            return
        self._each(self._log, [r for r in records if not r.logged])
        self._commit(records)

    def _commit(self, records: list[RunRecord]) -> None:
        """Commit a batch written through MLflow's API, where nothing is atomic: its runs
        were written whole but RUNNING (no reader takes one for a result), and they get
        their status only if this driver still holds the experiment, checked just before.
        A driver that takes the experiment over deletes every run another driver left
        uncommitted before it reads what is done (:func:`~sweeper.store.settle.retract`),
        so a commit that comes later (this driver paused, or a call stalled, between its
        check and its commit) fails, MLflow refusing to change a deleted run, or lands on a
        deleted one. The check after the commit keeps a driver that lost the experiment
        meanwhile from writing the batch's table part and supersession tags."""
        if self.fence is not None:
            self.fence.check()
        try:
            self._each(self._commit_one, [r for r in records if not r.written])
        except STORE_ERRORS as err:
            if self.fence is not None and not transient(err):
                self.fence.check()  # a run another driver retracted: this one lost
            raise
        if self.fence is not None:
            self.fence.check()
        self._each(lambda r: supersede(self.tracker, r), [r for r in records if r.supersedes])

    def _each(self, write: Callable[[RunRecord], None], records: list[RunRecord]) -> None:
        """``write`` each record, in the log threads when there are several."""
        if self.pool is None:
            for record in records:
                write(record)
            return
        futures = [self.pool.submit(write, r) for r in records]
        wait(futures)  # every write of this attempt has ended before a retry starts
        for future in futures:
            future.result()

    def _commit_one(self, record: RunRecord) -> None:
        commit_record(self.tracker, record)
        record.written = True

    def _write_direct(self, records: list[RunRecord]) -> None:
        """Runs in one transaction into the store's database: local artifacts first (a run
        is never without its files; their directories named in a manifest until the runs
        commit, :func:`~sweeper.store.settle.pending`), remote ones once their run exists
        (MLflow's client finds where to upload from the run)."""
        assert self.writer is not None
        later, local_runs = [], []
        for record in records:
            uri = self.writer.artifact_uri(record.run_id)
            local = self.tracker.artifact_dir(record.run_id, uri)
            if local is None:
                later += [(record.run_id, n, d, uri) for n, d in record.artifacts.items()]
            elif record.artifacts:
                local_runs.append((record, uri, local.parent))
        with pending([directory for _, _, directory in local_runs]):
            for record, uri, _ in local_runs:
                for name, data in record.artifacts.items():
                    self.tracker.write_artifact(record.run_id, name, data, uri)
            self.writer.write(records)
        for artifact in later:
            self.tracker.write_artifact(*artifact)

    def _log(self, record: RunRecord) -> None:
        """One run through MLflow's API, written whole but not committed (:meth:`_commit`).
        Each run carries its record's id (tag :data:`ATTEMPT_TAG`), so a retry first
        removes whatever an earlier attempt left of it, a run whose creation's answer was
        lost included: a retried batch leaves no runs behind."""
        record.tags.setdefault(ATTEMPT_TAG, record.run_id)
        if record.attempted:
            discard_attempts(self.tracker, record.tags[ATTEMPT_TAG])
        record.attempted = True
        log_record(self.tracker, record, commit=False)
        record.logged = True

    def _patiently(self, what: str, action: Callable[[], T]) -> T:
        return patiently(what, action, self.batching.patience_s, self.progress, self)


def unrecordable(outcome: OutcomeLike, err: BaseException) -> OutcomeLike:
    """``outcome`` (a dataclass, as :class:`sweeper.execute.Outcome`) made FAILED because its
    result cannot be recorded (``err`` says why)."""
    reason = " ".join(str(getattr(err, "message", None) or err).split())[:2000]
    return dataclasses.replace(
        outcome,
        status="FAILED",
        result=None,
        artifact=None,
        traceback=None,
        error=f"the cell's result cannot be recorded: {type(err).__name__}: {reason}",
    )


def patiently(
    what: str, action: Callable[[], T], patience_s: float, progress: Says, stop: Any = None
) -> T:
    """``action()``, retried while the store is away (:func:`~sweeper.store.failures.transient`)
    with a backoff doubling from ``BACKOFF_S[0]`` to ``BACKOFF_S[1]`` seconds, each wait said
    on the progress line, as long as the next wait would end within ``patience_s`` seconds of
    the first attempt; then, or at once for another store error, :class:`StoreFailed`. A
    Ctrl-C (``stop.requested``) ends the wait. Each attempt is bounded by what is left of
    ``patience_s`` (:func:`bounded`): a store that holds a call without ever answering (a
    connection whose answer was lost) stops the sweep too, instead of a silent hang."""
    started = time.monotonic()
    deadline = started + patience_s

    def attempt() -> T:
        return bounded(action, deadline - time.monotonic())

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(_waited_for),
        wait=tenacity.wait_exponential(min=BACKOFF_S[0], max=BACKOFF_S[1]),
        stop=tenacity.stop_before_delay(patience_s),
        before_sleep=lambda state: progress.message(_waiting(state, patience_s)),
        sleep=lambda seconds: _sleep(seconds, stop),
        reraise=True,
    )
    try:
        return retrying(attempt)
    except Unanswered:
        raise StoreFailed(
            f"{what}: the MLflow store did not answer for {patience_s:.0f} s "
            "(tracking.patience_s): a call to it neither returned nor failed"
        ) from None
    except STORE_ERRORS as err:
        waited = time.monotonic() - started if retrying.statistics.get("idle_for") else 0.0
        extra = f" (waited {waited:.0f} s: tracking.patience_s)" if waited else ""
        raise StoreFailed(f"{what}: {type(err).__name__}: {_reason(err)}{extra}") from err


class Unanswered(Exception):
    """A store call that neither returned nor failed within its time (:func:`bounded`)."""


def bounded(action: Callable[[], T], seconds: float) -> T:
    """``action()``, waited for at most ``seconds``, else :class:`Unanswered`. It runs in a
    daemon thread, which a call the store never answers holds until the process ends
    (nothing can cut a call short from outside it: libpq, like HTTP, waits for an answer
    that a stalled proxy or a half-open connection never sends). A KeyboardInterrupt of the
    waiting (main) thread ends the wait."""
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = action()
        except BaseException as err:  # raised in the caller's thread below
            outcome["error"] = err
        finally:
            done.set()

    caller = threading.current_thread().name  # its call's thread is named after it
    threading.Thread(target=run, name=f"{caller}/store-call", daemon=True).start()
    end = time.monotonic() + seconds
    while not done.is_set():
        left = end - time.monotonic()
        if left <= 0:
            raise Unanswered
        done.wait(min(0.1, left))
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _waited_for(err: BaseException) -> bool:
    return isinstance(err, STORE_ERRORS) and transient(err)


def _waiting(state: tenacity.RetryCallState, patience_s: float) -> str:
    """The progress line's word on a wait for the store."""
    reason = _reason(state.outcome.exception())[:120]
    return (
        f"the MLflow store does not answer ({reason}); retrying in {state.upcoming_sleep:.0f} s "
        f"(waited {state.seconds_since_start:.0f} s of tracking.patience_s={patience_s:.0f})"
    )


def _sleep(seconds: float, stop: Any) -> None:
    """Sleep ``seconds``, ended by a Ctrl-C (``stop.requested``: KeyboardInterrupt)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if stop is not None and stop.requested:
            raise KeyboardInterrupt
        time.sleep(0.1)


def _reason(err: BaseException | None) -> str:
    return " ".join(str(err).split())[:200]
