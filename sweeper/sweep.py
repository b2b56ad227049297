"""The driver: expand, skip what is done, dispatch, record (docs/architecture.md).

``run_sweep`` never loses finished work: finished cells are recorded in batches
(:mod:`sweeper.store.record`: at most ``tracking.batch_size`` cells or ``tracking.batch_s``
seconds old; in one transaction straight into the store's database when the driver can
reach it, :mod:`sweeper.store.bulk`), each batch followed by a part of the parent's table
(:mod:`sweeper.store.table`), consolidated when the sweep ends; Ctrl-C (or SIGTERM, as ``ray job
stop`` sends) cancels only what is in flight. Starting the same command again resumes:
cells with a FINISHED run are skipped, RUNNING leftovers of a killed driver are set KILLED,
and table rows a killed driver never wrote are rebuilt from their runs. The driver keeps
the cells' keys and counts, never their rows: its memory does not grow with their results.

Exactly once under faults (issues #15, #17): the driver holds the store's lock (a local
sqlite file) or the experiment's lease (a tracking server) for its whole life
(:mod:`sweeper.store.lock`), so no other driver computes the same cells; a store that stops
answering is waited for (``tracking.patience_s``), one that fails ends the sweep cleanly
(``SweepResult.store_error``, exit status 3); a run whose logging was cut off is settled
KILLED and kept out of the table's ``table_until`` mark.
"""

from __future__ import annotations

import hashlib
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TextIO, TypeVar

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from sweeper import settings
from sweeper.cells import Cell, canonical_json
from sweeper.dryrun import dry_run
from sweeper.errors import SweepError
from sweeper.execute import Outcome, cell_function
from sweeper.grid import Composer, Grid, expand, task_of
from sweeper.launch import check_launcher, init_ray, launch
from sweeper.progress import Progress, format_duration
from sweeper.store.bulk import BulkWriter
from sweeper.store.lock import AdvisoryLock, Fence, Lease, LeaseLost, sqlite_path, store_lock
from sweeper.store.migrate import carry_over
from sweeper.store.record import Batching, Recorder, open_writer, patience_of, patiently
from sweeper.store.tracking import (
    IndexEntry,
    ResumeIndex,
    StoreFailed,
    Tracker,
    check_store,
    resolve_uri,
)
from sweeper.task import GENERIC, Task
from sweeper.ui import browse_hint

T = TypeVar("T")
MAX_LISTED_FAILURES = 20
MAX_SUMMARY_ROWS = 60
EXIT_STORE_FAILED = 3
EXIT_STORE_BUSY = 4


class Failure(NamedTuple):
    """A cell that FAILED: its label, the reason, its key and its MLflow run."""

    label: str
    error: str
    cell_key: str = ""
    run_id: str = ""


@dataclass
class SweepResult:
    experiment: str
    tracking_uri: str
    cells: int
    skipped: int
    finished: int = 0
    failed: list[Failure] = field(default_factory=list)
    wall_s: float = 0.0
    dispatch_s: float = 0.0
    parent_run_id: str = ""
    interrupted: bool = False
    cancelled: int = 0
    reaped: int = 0
    rebuilt_rows: int = 0
    carried_over: int = 0
    resume_command: str = ""
    task: Task = GENERIC
    settings: dict[str, str] = field(default_factory=dict)  # cell key -> its run name sans seed
    experiment_id: str = ""

    store_error: str = ""  # the MLflow store failed mid-sweep: why
    lost: bool = False  # another driver took the experiment over (store_error says so)
    resume_s: float = 0.0  # reading what the experiment holds and what is left to run
    load_table: Any = None  # columns -> the sweep's table, read back from the store

    @property
    def table(self) -> pd.DataFrame | None:
        """One row per cell of the sweep (read from the parent's table when asked)."""
        return None if self.load_table is None else self.load_table()

    @property
    def ok(self) -> bool:
        return not self.failed and not self.interrupted and not self.store_error

    @property
    def processed(self) -> int:
        return self.finished + len(self.failed)

    @property
    def cells_per_s(self) -> float:
        return self.processed / self.dispatch_s if self.dispatch_s > 0 else 0.0

    @property
    def exit_code(self) -> int:
        """0 when every cell finished, 1 if any failed, 3 if the store failed, 130 if
        interrupted (the full list: sweeper/__main__.py)."""
        if self.lost:
            return EXIT_STORE_BUSY
        if self.store_error:
            return EXIT_STORE_FAILED
        return 130 if self.interrupted else (1 if self.failed else 0)


def sweep_key(keys: Sequence[str]) -> str:
    """The sweep's identity: a hash of its cells' keys, so a rerun reuses its parent run."""
    return hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()


def run_sweep(
    cfg: DictConfig, compose: Composer, cli_overrides: Sequence[str] = (), out: TextIO = sys.stdout
) -> SweepResult:
    """Run the sweep ``cfg`` describes (steps 2-7 of docs/architecture.md).

    Raises ``ValueError`` (``SweepError``) for bad input before anything runs,
    :class:`~sweeper.store.lock.StoreBusy` when another driver writes into the store (or, on a
    tracking server, the experiment), :class:`~sweeper.store.tracking.StoreFailed` when the store
    fails before the first cell is dispatched; a store failure later ends the sweep cleanly
    (``SweepResult.store_error``, exit status 3).
    """
    started = time.perf_counter()
    settings.redact_hydra_files()
    check_launcher(cfg.launcher)
    uri = resolve_uri(cfg.tracking.get("uri"))
    settings.check(cfg, uri)
    cells = expand(cfg, compose, cli_overrides)
    if len(cells) > settings.max_cells(cfg):
        raise settings.too_many(f"this sweep has {len(cells):,} cells", settings.max_cells(cfg))
    validate(cells)
    if cfg.get("dry_run"):
        dry_run(cfg, cells, out)
        return SweepResult(str(cfg.experiment.name), "", len(cells), 0)
    check_store(uri)
    command = _command(cli_overrides)
    patient = Patience(patience_of(cfg), out)
    with store_lock(uri, command):
        name = settings.experiment_name(cfg.experiment.get("name"))
        tracker = patient(
            f"opening the MLflow store {uri}",
            lambda: Tracker(uri, name, task_of(cfg), cfg.tracking.get("artifacts_destination")),
        )
        fence, release = patient("taking the experiment's lease", lambda: hold(tracker, command))
        try:
            return _sweep(cfg, tracker, cells, cli_overrides, started, out, fence, patient)
        finally:
            within(CLEANUP_S, release)


CLEANUP_S = 10.0
"""The longest the driver's clean-up after a failure (settling its runs, dropping its lease)
may wait for a store that does not answer: what it leaves, the next start settles."""


def within(seconds: float, action: Callable[[], Any]) -> None:
    """``action()``, given up after ``seconds`` (it goes on in a daemon thread that dies with
    the process): a store that hangs never holds the driver's exit; errors are ignored."""

    def attempt() -> None:
        with suppress(Exception):
            action()

    thread = threading.Thread(target=attempt, name="sweeper-cleanup", daemon=True)
    thread.start()
    thread.join(seconds)


class Patience:
    """Every call of the driver's start into the store waits for a store that is away (a
    server or database restarting: a transient error), for up to ``tracking.patience_s``,
    saying so (:func:`sweeper.store.record.patiently`); then :class:`StoreFailed`, exit 3."""

    def __init__(self, patience_s: float, out: TextIO) -> None:
        self.patience_s, self.out = patience_s, out

    def message(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def __call__(self, what: str, action: Callable[[], T]) -> T:
        return patiently(settings.redact(what), action, self.patience_s, self)


def hold(tracker: Tracker, command: str) -> tuple[Fence | None, Any]:
    """Take the experiment for this driver where the sqlite file lock does not reach: an
    advisory lock on a PostgreSQL store, a lease on a tracking server (or another database);
    then claim its fencing token. Returns the fence (None for sqlite) and its release."""
    if sqlite_path(tracker.uri) is not None:
        return None, lambda: None
    lock, lease = None, None
    if settings.scheme(tracker.uri) == "postgresql":
        lock = AdvisoryLock(tracker.uri, tracker.experiment_id, tracker.driver, command)
        lock.acquire()
    else:
        lease = Lease(tracker.client, tracker.experiment_id, tracker.driver, command)
        lease.acquire()
    fence = Fence(tracker.client, tracker.experiment_id, tracker.driver, lease, lock)
    try:
        fence.claim()
    except BaseException:
        (lock or lease).release()
        raise
    return fence, (lock or lease).release


def _sweep(
    cfg: DictConfig,
    tracker: Tracker,
    cells: Grid,
    cli_overrides: Sequence[str],
    started: float,
    out: TextIO,
    fence: Fence | None = None,
    patient: Patience | None = None,
) -> SweepResult:
    """Resume index, Ray, parent run, then :func:`_drive`; holding the store's lock."""
    name, task = tracker.experiment_name, tracker.task
    patient = patient or Patience(patience_of(cfg), out)
    checked = time.perf_counter()

    def read() -> tuple[ResumeIndex, int, int]:
        parents = tracker.sweep_parents()
        index = tracker.resume_index(parents)
        retagged = tracker.settle_supersession(parents, index)
        return index, retagged, carry_over(tracker, cells, index)

    index, retagged, carried = patient("reading what the experiment holds", read)
    rerun = settings.rerun(cfg)
    known = {k: index.finished[k] for k in cells.keys if k in index.finished}
    todo = cells if rerun else cells.where(lambda key: key not in known)
    resume_s = time.perf_counter() - checked
    result = SweepResult(
        name,
        settings.redact(tracker.uri),
        len(cells),
        len(cells) - len(todo),
        resume_command=_command(cli_overrides),
        carried_over=carried,
        task=task,
        settings={c.key: c.setting for c in cells},
        experiment_id=tracker.experiment_id,
    )
    result.resume_s = resume_s
    print(f"sweep '{name}': results go to {settings.redact(tracker.uri)}", file=out)
    if tracker.store_note:
        print(f"  the store was {tracker.store_note} whole (sweeper/store/lock.py)", file=out)
    if retagged:
        print(f"  {retagged} run(s) of an interrupted rerun re-tagged superseded_by", file=out)
    batching = Batching.of(cfg, tracker)  # before the parent run, as Ray: bad settings
    writer = open_writer(batching, tracker) if todo else None  # leave nothing behind
    if todo and cfg.launcher.get("name", "ray") == "ray":
        try:  # before the parent run: a cluster that cannot be used leaves nothing behind
            init_ray(cfg.launcher)
        except KeyboardInterrupt:
            result.interrupted, result.cancelled = True, len(todo)
            print_summary(result, out)
            return result
    description = str(cfg.experiment.get("description") or "")
    parent = patient(
        "creating the sweep's parent run",
        lambda: tracker.parent_run(
            sweep_key(cells.keys), settings.redact(OmegaConf.to_yaml(cfg)), description
        ),
    )
    result.parent_run_id = parent
    if tracker.library_change:
        print(
            f"  this sweep resumes under other library versions than its earlier runs "
            f"({tracker.library_change}): the cells computed now and before may differ in "
            "their last digits; rerun=true recomputes them all",
            file=out,
        )
    try:
        return _drive(
            cfg, tracker, cells, todo, known, index, result, started, out, batching, writer, fence,
            patient,
        )  # fmt: skip
    except BaseException as err:  # never leave the sweep RUNNING, whatever stopped it
        status = "KILLED" if isinstance(err, KeyboardInterrupt) else "FAILED"

        def settle() -> None:
            tracker.settle_parent(parent, status)
            tracker.settle_own(parent)

        within(CLEANUP_S, settle)
        raise


def _drive(
    cfg: DictConfig,
    tracker: Tracker,
    cells: Grid,
    todo: Grid,
    known: dict[str, IndexEntry],
    index: ResumeIndex,
    result: SweepResult,
    started: float,
    out: TextIO,
    batching: Batching,
    writer: BulkWriter | None,
    fence: Fence | None = None,
    patient: Patience | None = None,
) -> SweepResult:
    """Reap, dispatch ``todo``, record the outcomes in batches as they arrive, end the
    parent run. The driver keeps counts and keys, not rows: the rows go to the parent's
    table part by part (sweeper/store/table.py)."""
    parent, name, rerun = result.parent_run_id, result.experiment, settings.rerun(cfg)
    patient = patient or Patience(patience_of(cfg), out)

    def settle() -> None:
        result.reaped = len(tracker.reap(tracker.leftovers(parent), parent))
        tracker.table(parent).consolidate()  # the parts a killed driver left
        result.rebuilt_rows = _carry_rows(tracker, parent, cells, known)
        if rerun and known:  # cleared when the rerun ends; a start that finds it re-tags
            tracker.set_tags(parent, {"sweeper.rerun_open": "1"})

    patient("settling the runs a killed driver left RUNNING", settle)
    result.load_table = lambda columns=None: _sweep_table(tracker, parent, cells, columns)
    print(
        f"sweep '{name}': {len(cells)} cells, {result.skipped} already finished, "
        f"{len(todo)} to run{' (rerun=true: recomputing)' if rerun and known else ''} "
        f"({cfg.launcher.name} launcher)",
        file=out,
    )
    if result.skipped:
        print(
            f"  resume check {result.resume_s:.2f} s ({index.tables} table(s) read, "
            f"{index.searched_runs} run(s) searched)",
            file=out,
        )
    if result.reaped:
        print(f"  {result.reaped} run(s) left RUNNING by a killed driver set to KILLED", file=out)
    if index.damaged:
        print(
            f"  {index.damaged} sweep table(s) lost rows (a part deleted or damaged): their "
            "runs were searched instead (the runs are the truth, the table their cache)",
            file=out,
        )
    if result.rebuilt_rows:
        print(f"  {result.rebuilt_rows} table row(s) rebuilt from their runs", file=out)
    if result.carried_over:
        print(
            f"  {result.carried_over} finished run(s) stored under an older sweeper's cell keys "
            "carried over (sweeper/store/migrate.py)",
            file=out,
        )

    progress = Progress(len(todo), out)
    recorder = Recorder(tracker, parent, batching, progress, writer, fence)
    running: set[str] = set()

    def count(logged: list[tuple[Cell, Outcome, dict[str, Any]]]) -> None:
        for cell, outcome, row in logged:
            if outcome.status == "FINISHED":
                result.finished += 1
            else:
                failure = Failure(
                    cell.label, outcome.error or "unknown error", cell.key, row["run_id"]
                )
                result.failed.append(failure)
                progress.message(f"FAILED {cell.label}: {_first_line(failure.error)}")

    dispatch_started = time.perf_counter()  # after Ray's start: cells/s measures dispatch
    try:
        with _graceful_stop(progress) as stop, closing(launch(todo, cfg.launcher)) as events:
            recorder.stop = stop
            for event in events:
                cell, outcome = event.cell, event.outcome
                if event.kind == "started" and cell is not None:
                    running.add(cell.key)
                    progress.start()
                elif event.kind == "finished" and cell is not None and outcome is not None:
                    progress.finish(outcome.status == "FINISHED", cell.key in running)
                    running.discard(cell.key)
                    old = known.get(cell.key)
                    recorder.add(cell, outcome, [old.run_id] if old else [])
                if recorder.due():
                    count(recorder.flush())
                progress.draw()
                if stop.requested:
                    raise KeyboardInterrupt  # leaving the loop closes the launcher: it cancels
    except KeyboardInterrupt:
        result.interrupted = True
    except StoreFailed as err:  # stop cleanly: what was recorded is kept
        result.store_error, result.lost = str(err), isinstance(err, LeaseLost)
    finally:
        try:
            if not result.store_error:
                recorder.stop = None  # the cells already computed are kept, even after Ctrl-C
                count(recorder.drain())
        except StoreFailed as err:
            result.store_error = str(err)
        except KeyboardInterrupt:  # a second Ctrl-C while the last batches are written
            result.interrupted = True
        finally:
            count(recorder.close())
    if result.interrupted or result.store_error:
        result.cancelled = len(todo) - result.processed
    result.dispatch_s = time.perf_counter() - dispatch_started
    result.wall_s = time.perf_counter() - started
    if result.lost:  # the sweep is another driver's now: its parent and table too
        within(CLEANUP_S, lambda: tracker.settle_own(parent))
    else:
        _end_parent(tracker, cells, known, result, rerun, recorder.batching.patience_s, progress)
    progress.close()
    print_summary(result, out)
    return result


def _end_parent(
    tracker: Tracker,
    cells: Grid,
    known: dict[str, IndexEntry],
    result: SweepResult,
    rerun: bool,
    patience_s: float,
    progress: Progress,
) -> None:
    """Consolidate the table, log the summary, end the parent run (FAILED if the store
    fails now; the next start settles what is left)."""
    parent = result.parent_run_id
    summary = {
        "cells": len(cells),
        "finished": result.finished + result.skipped,
        "failed": len(result.failed),
        "skipped": result.skipped,
        "wall_s": result.wall_s,
        "cells_per_s": result.cells_per_s,
    }

    def end() -> None:
        tracker.table(parent).consolidate()
        if rerun and known and not (result.interrupted or result.store_error):
            tracker.client.delete_tag(parent, "sweeper.rerun_open")
        tracker.finish_parent(
            parent,
            summary,
            failed=not result.ok,
            status="KILLED" if result.interrupted and not result.store_error else None,
            details=_details(result),
        )

    try:
        patiently("ending the sweep's parent run", end, patience_s, progress)
    except StoreFailed as err:
        result.store_error = result.store_error or str(err)
        within(CLEANUP_S, lambda: tracker.settle_parent(parent, "FAILED"))
    if result.interrupted or result.store_error:
        within(CLEANUP_S, lambda: tracker.settle_own(parent))  # a run cut off mid-write


def validate(cells: Sequence[Cell]) -> None:
    """Call each cell function's ``validate`` hook once per distinct config (seed aside).

    Bad input (an empty interval, a missing dataset file, ...) fails here, before any cell
    runs, with the task's own message.
    """
    seen: set[str] = set()
    for cell in cells:
        try:
            function = cell_function(cell.function)
        except (ImportError, ValueError) as err:
            reason = " ".join(str(err).split())
            raise SweepError(
                f"cell={cell.function}: no cell function there ({reason}). The config key "
                "`cell` is the dotted path of a family's run_cell (e.g. "
                "cell=sweeper.toy.toy_cell); choose a family with task=NAME instead of "
                "setting cell by hand"
            ) from None
        check = getattr(function, "validate", None)
        signature = canonical_json({k: v for k, v in cell.config.items() if k != "seed"})
        if check is None or signature in seen:
            continue
        seen.add(signature)
        try:
            check(cell.config)
        except Exception as err:
            raise SweepError(f"invalid cell {cell.label}: {err}") from err


def _carry_rows(tracker: Tracker, parent: str, cells: Grid, known: dict[str, IndexEntry]) -> int:
    """Give the parent's table a row for each cell finished earlier that it lacks (or holds
    under a legacy key): copied from a sweep's table, else rebuilt from the run. Returns
    how many were rebuilt."""
    by_parent: dict[str, dict[str, str]] = {}  # table's parent -> run id -> cell key
    rebuilt: list[dict[str, Any]] = []
    for i, key in enumerate(cells.keys):
        entry = known.get(key)
        if entry is None:
            continue
        if entry.row is not None and entry.parent:
            held = entry.parent == parent and entry.row.get("cell_key") == key
            if not held:
                by_parent.setdefault(entry.parent, {})[entry.run_id] = key
        else:
            rebuilt.append(tracker.row_from_run(cells[i], entry.run or entry.run_id))
    for other, keys in by_parent.items():
        table = tracker.read_cells_table(other)
        rows = [] if table is None else table[table["run_id"].isin(keys)].to_dict("records")
        rows = [{**_present(r), "cell_key": keys[r["run_id"]]} for r in rows]
        if rows:
            tracker.write_cells_table(parent, rows, move_mark=False)
    if rebuilt:
        tracker.write_cells_table(parent, rebuilt, move_mark=False)
    return len(rebuilt)


def _present(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not _missing(v)}


def _sweep_table(
    tracker: Tracker, parent: str, cells: Grid, columns: Sequence[str] | None = None
) -> pd.DataFrame | None:
    """The sweep's table: one row per cell of ``cells`` (its newest FINISHED run, else its
    newest run), read back from the parent's table."""
    wanted = None if columns is None else list(dict.fromkeys(["cell_key", "status", *columns]))
    table = tracker.table(parent).current(wanted)
    if table is None:
        return None
    keys = set(cells.keys)
    return table[table["cell_key"].isin(keys)].reset_index(drop=True)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


@dataclass
class _Stop:
    requested: bool = False


@contextmanager
def _graceful_stop(progress: Progress) -> Iterator[_Stop]:
    """The first Ctrl-C (or SIGTERM, as ``ray job stop`` sends) asks the loop to stop between
    two events, so no MLflow write is cut in half; a second one aborts at once."""
    stop = _Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def _request(signum, frame):  # noqa: ARG001
        if stop.requested:
            raise KeyboardInterrupt
        stop.requested = True
        progress.message(
            "stopping: cancelling the cells in flight, keeping the finished ones "
            "(press Ctrl-C again to abort at once)"
        )

    previous = {sig: signal.signal(sig, _request) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _command(cli_overrides: Sequence[str]) -> str:
    """The command that runs (resumes) this sweep, a password in a URI redacted (it is
    printed, and recorded in the lock file and the lease's tag)."""
    text = " ".join(["python -m sweeper", *(shlex.quote(o) for o in cli_overrides)])
    return settings.redact(text)


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else text
    return line if len(line) <= 300 else line[:297] + "..."


def _details(result: SweepResult) -> dict[str, Any]:
    return {
        "experiment": result.experiment,
        "cells": result.cells,
        "skipped": result.skipped,
        "finished": result.finished,
        "failed": [f._asdict() for f in result.failed],
        "interrupted": result.interrupted,
        "cancelled": result.cancelled,
        "reaped": result.reaped,
        "store_error": result.store_error,
        "wall_s": result.wall_s,
        "cells_per_s": result.cells_per_s,
    }


def print_summary(result: SweepResult, out: TextIO = sys.stdout) -> None:
    _print_lead(result, out)
    if result.failed:
        print(f"\n{len(result.failed)} cell(s) FAILED:", file=out)
        for failure in result.failed[:MAX_LISTED_FAILURES]:
            print(
                f"  {failure.label} [cell {failure.cell_key[:12]}, run {failure.run_id[:12]}]: "
                f"{_first_line(failure.error)}",
                file=out,
            )
        if len(result.failed) > MAX_LISTED_FAILURES:
            print(
                f"  ... and {len(result.failed) - MAX_LISTED_FAILURES} more "
                "(filter the runs by attributes.status = 'FAILED' in MLflow)",
                file=out,
            )
    print(
        f"\n{result.finished} finished, {len(result.failed)} failed, {result.skipped} skipped"
        f"{f', {result.cancelled} cancelled' if result.interrupted or result.store_error else ''}"
        f" of {result.cells} "
        f"cells in {format_duration(result.wall_s)} ({result.wall_s:.1f}s; "
        f"{result.cells_per_s:.2f} cells/s). Runs are in MLflow experiment "
        f"'{result.experiment}' at {result.tracking_uri}\n"
        f"  browse them: {browse_hint(result.tracking_uri, result.experiment_id)}",
        file=out,
    )
    if result.lost:
        print(f"\nStopped: {result.store_error}", file=out)
    elif result.store_error:
        print(
            f"\nThe MLflow store failed: {result.store_error}\nThe cells logged before it are "
            "kept and the cells in flight were cancelled. Fix the store (free disk space, "
            "restart the tracking server, ...), then resume (only the missing cells run) "
            f"with:\n  {result.resume_command}",
            file=out,
        )
    elif result.interrupted:
        print(
            "\nInterrupted: finished cells are kept. Resume (only the missing cells run) with:\n"
            f"  {result.resume_command}",
            file=out,
        )
    elif result.failed:
        print("Rerunning the same command retries only the failed and missing cells.", file=out)


def _print_lead(result: SweepResult, out: TextIO) -> None:
    """Mean, sd and count of the family's lead metric per setting: every axis of the sweep
    but the seed, so no row pools two settings (e.g. two warm-up lengths)."""
    lead = result.task.lead
    table = None if lead is None or result.load_table is None else result.load_table([lead])
    if lead is None or table is None or lead not in table or "status" not in table:
        return
    finished = table[(table["status"] == "FINISHED") & table["cell_key"].isin(result.settings)]
    if not len(finished):
        return
    setting = finished["cell_key"].map(lambda k: result.settings[k] or "every cell")
    stats = (
        finished.groupby(setting.rename("setting"), sort=False)[lead]
        .agg(["mean", "std", "count"])
        .round(2)
    )
    title = result.task.metric(lead).title
    print(f"\n{title} ({lead}; mean, sd over seeds):", file=out)
    print(stats.head(MAX_SUMMARY_ROWS).to_string(), file=out)
    if len(stats) > MAX_SUMMARY_ROWS:
        print(
            f"... and {len(stats) - MAX_SUMMARY_ROWS} more settings "
            f"(python -m sweeper.report {result.experiment})",
            file=out,
        )
