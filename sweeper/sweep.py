"""The driver: expand, skip what is done, dispatch, record (docs/architecture.md).

``run_sweep`` never loses finished work: each cell is logged to MLflow the moment it
finishes, the parent's ``cells.parquet`` is rewritten every ``tracking.flush_every``
cells or ``tracking.flush_every_s`` seconds (and at the end), and Ctrl-C (or SIGTERM, as
``ray job stop`` sends) cancels only what is in flight. Starting the same command again
resumes: cells with a FINISHED run are skipped, RUNNING leftovers of a killed driver are
set KILLED, and table rows the last flush missed are rebuilt from their runs.

Exactly once under faults (issue #17): the driver holds the store's lock (a local sqlite
file) or the experiment's lease (a tracking server) for its whole life
(:mod:`sweeper.lock`), so no other driver computes the same cells; a store that fails
mid-sweep ends it cleanly (``SweepResult.store_error``, exit status 3); a run whose logging
was cut off is settled KILLED and kept out of the table's ``table_until`` mark.
"""

from __future__ import annotations

import hashlib
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TextIO

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from sweeper.cells import Cell, canonical_json
from sweeper.errors import SweepError
from sweeper.execute import Outcome
from sweeper.grid import Composer, expand, task_of
from sweeper.launch import check_launcher, init_ray, launch
from sweeper.lock import Lease, store_lock
from sweeper.migrate import carry_over
from sweeper.progress import Progress, format_duration
from sweeper.task import GENERIC, Task
from sweeper.tracking import (
    IndexEntry,
    ResumeIndex,
    StoreFailed,
    Tracker,
    check_store,
    now_ms,
    resolve_uri,
    store_calls,
)
from tasks.building import locate

TABLE_FLUSH_EVERY = 50
TABLE_FLUSH_EVERY_S = 30.0
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
    table: pd.DataFrame | None = None
    parent_run_id: str = ""
    interrupted: bool = False
    cancelled: int = 0
    reaped: int = 0
    rebuilt_rows: int = 0
    carried_over: int = 0
    resume_command: str = ""
    task: Task = GENERIC
    settings: dict[str, str] = field(default_factory=dict)  # cell key -> its run name sans seed

    store_error: str = ""  # the MLflow store failed mid-sweep: why

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
        if self.store_error:
            return EXIT_STORE_FAILED
        return 130 if self.interrupted else (1 if self.failed else 0)


def sweep_key(cells: Sequence[Cell]) -> str:
    """The sweep's identity: a hash of its cells' keys, so a rerun reuses its parent run."""
    return hashlib.sha256("\n".join(sorted(c.key for c in cells)).encode()).hexdigest()


def run_sweep(
    cfg: DictConfig, compose: Composer, cli_overrides: Sequence[str] = (), out: TextIO = sys.stdout
) -> SweepResult:
    """Run the sweep ``cfg`` describes (steps 2-7 of docs/architecture.md).

    Raises ``ValueError`` (``SweepError``) for bad input before anything runs,
    :class:`~sweeper.lock.StoreBusy` when another driver writes into the store (or, on a
    tracking server, the experiment), :class:`~sweeper.tracking.StoreFailed` when the store
    fails before the first cell is dispatched; a store failure later ends the sweep cleanly
    (``SweepResult.store_error``, exit status 3).
    """
    started = time.perf_counter()
    check_launcher(cfg.launcher)
    cells = expand(cfg, compose, cli_overrides)
    validate(cells)
    uri = resolve_uri(cfg.tracking.get("uri"))
    check_store(uri)
    command = _command(cli_overrides)
    with store_lock(uri, command):
        with store_calls(f"opening the MLflow store {uri}"):
            tracker = Tracker(uri, str(cfg.experiment.name), task_of(cfg))
        lease = Lease(tracker.client, tracker.experiment_id, tracker.driver, command)
        if tracker.remote:
            with store_calls("taking the experiment's lease"):
                lease.acquire()
        try:
            return _sweep(cfg, tracker, cells, cli_overrides, started, out)
        finally:
            lease.release()


def _sweep(
    cfg: DictConfig,
    tracker: Tracker,
    cells: Sequence[Cell],
    cli_overrides: Sequence[str],
    started: float,
    out: TextIO,
) -> SweepResult:
    """Resume index, Ray, parent run, then :func:`_drive`; holding the store's lock."""
    name, task = tracker.experiment_name, tracker.task
    with store_calls("reading what the experiment holds"):
        parents = tracker.sweep_parents()
        index = tracker.resume_index(parents)
        retagged = tracker.settle_supersession(parents, index)
        carried = carry_over(tracker, cells, index)
    rerun = bool(cfg.get("rerun"))
    known = {c.key: index.finished[c.key] for c in cells if c.key in index.finished}
    todo = cells if rerun else [c for c in cells if c.key not in known]
    result = SweepResult(
        name,
        tracker.uri,
        len(cells),
        len(cells) - len(todo),
        resume_command=_command(cli_overrides),
        carried_over=carried,
        task=task,
        settings={c.key: c.setting for c in cells},
    )
    print(f"sweep '{name}': results go to {tracker.uri}", file=out)
    if tracker.store_note:
        print(f"  the store was {tracker.store_note} whole (sweeper/lock.py)", file=out)
    if retagged:
        print(f"  {retagged} run(s) of an interrupted rerun re-tagged superseded_by", file=out)
    if todo and cfg.launcher.get("name", "ray") == "ray":
        try:  # before the parent run: a cluster that cannot be used leaves nothing behind
            init_ray(cfg.launcher)
        except KeyboardInterrupt:
            result.interrupted, result.cancelled = True, len(todo)
            print_summary(result, out)
            return result
    with store_calls("creating the sweep's parent run"):
        parent = tracker.parent_run(
            sweep_key(cells), OmegaConf.to_yaml(cfg), str(cfg.experiment.get("description") or "")
        )
    result.parent_run_id = parent
    try:
        return _drive(cfg, tracker, cells, todo, index, result, started, out)
    except BaseException as err:  # never leave the sweep RUNNING, whatever stopped it
        tracker.settle_parent(parent, "KILLED" if isinstance(err, KeyboardInterrupt) else "FAILED")
        tracker.settle_own(parent)
        raise


def _drive(
    cfg: DictConfig,
    tracker: Tracker,
    cells: Sequence[Cell],
    todo: Sequence[Cell],
    index: ResumeIndex,
    result: SweepResult,
    started: float,
    out: TextIO,
) -> SweepResult:
    """Reap, dispatch ``todo``, log each outcome as it arrives, end the parent run."""
    parent, name, rerun = result.parent_run_id, result.experiment, bool(cfg.get("rerun"))
    known = {c.key: index.finished[c.key] for c in cells if c.key in index.finished}
    log_threads = _log_threads(cfg, tracker)
    with store_calls("settling the runs a killed driver left RUNNING"):
        result.reaped = len(tracker.reap(tracker.leftovers(parent), parent))
        rows, result.rebuilt_rows = _previous_rows(tracker, cells, known)
        if rerun and known:  # cleared when the rerun ends; a start that finds it re-tags
            tracker.set_tags(parent, {"sweeper.rerun_open": "1"})
    print(
        f"sweep '{name}': {len(cells)} cells, {result.skipped} already finished, "
        f"{len(todo)} to run{' (rerun=true: recomputing)' if rerun and known else ''} "
        f"({cfg.launcher.name} launcher)",
        file=out,
    )
    if result.reaped:
        print(f"  {result.reaped} run(s) left RUNNING by a killed driver set to KILLED", file=out)
    if result.rebuilt_rows:
        print(f"  {result.rebuilt_rows} table row(s) rebuilt from their runs", file=out)
    if result.carried_over:
        print(
            f"  {result.carried_over} finished run(s) stored under an older sweeper's cell keys "
            "carried over (sweeper/migrate.py)",
            file=out,
        )
    if rows:
        with store_calls("writing the sweep's table"):
            tracker.write_cells_table(parent, pd.DataFrame(rows.values()))

    flush_every = int(cfg.tracking.get("flush_every") or TABLE_FLUSH_EVERY)
    flush_every_s = float(cfg.tracking.get("flush_every_s") or TABLE_FLUSH_EVERY_S)
    progress = Progress(len(todo), out)
    logger = _CellLogger(tracker, parent, log_threads)
    running: set[str] = set()
    unflushed, last_flush = 0, time.perf_counter()

    def record(logged: list[tuple[Cell, Outcome, dict[str, Any]]]) -> None:
        nonlocal unflushed
        for cell, outcome, row in logged:
            # A failed recomputation never hides a cell's finished result.
            if outcome.status == "FINISHED" or rows.get(cell.key, {}).get("status") != "FINISHED":
                rows[cell.key] = row
            unflushed += 1
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
            for event in events:
                cell, outcome = event.cell, event.outcome
                if event.kind == "started" and cell is not None:
                    running.add(cell.key)
                    progress.start()
                elif event.kind == "finished" and cell is not None and outcome is not None:
                    progress.finish(outcome.status == "FINISHED", cell.key in running)
                    running.discard(cell.key)
                    old = known.get(cell.key)
                    record(logger.submit(cell, outcome, [old.run_id] if old else []))
                record(logger.collect())
                if unflushed and (
                    unflushed >= flush_every or time.perf_counter() - last_flush >= flush_every_s
                ):
                    table = pd.DataFrame(rows.values())
                    with store_calls("writing the sweep's table"):
                        tracker.write_cells_table(parent, table, until=logger.until())
                    unflushed, last_flush = 0, time.perf_counter()
                progress.draw()
                if stop.requested:
                    raise KeyboardInterrupt  # leaving the loop closes the launcher: it cancels
    except KeyboardInterrupt:
        result.interrupted = True
    except StoreFailed as err:  # stop cleanly: what was logged is kept
        result.store_error = str(err)
    finally:
        try:
            record(logger.collect(everything=True))  # the cells already computed are kept
        except StoreFailed as err:
            result.store_error = result.store_error or str(err)
        logger.close()
    if result.interrupted or result.store_error:
        result.cancelled = len(todo) - result.processed
    result.dispatch_s = time.perf_counter() - dispatch_started
    progress.close()

    result.table = pd.DataFrame(rows.values())
    result.wall_s = time.perf_counter() - started
    try:
        with store_calls("ending the sweep's parent run"):
            if rows:
                tracker.write_cells_table(parent, result.table, until=logger.until())
            if rerun and known and not (result.interrupted or result.store_error):
                tracker.client.delete_tag(parent, "sweeper.rerun_open")
            tracker.finish_parent(
                parent,
                {
                    "cells": len(cells),
                    "finished": result.finished + result.skipped,
                    "failed": len(result.failed),
                    "skipped": result.skipped,
                    "wall_s": result.wall_s,
                    "cells_per_s": result.cells_per_s,
                },
                failed=not result.ok,
                status="KILLED" if result.interrupted and not result.store_error else None,
                details=_details(result),
            )
    except StoreFailed as err:
        result.store_error = result.store_error or str(err)
        tracker.settle_parent(parent, "FAILED")
    if result.interrupted or result.store_error:
        tracker.settle_own(parent)  # a run cut off while it was being logged
    print_summary(result, out)
    return result


class _CellLogger:
    """Logs finished cells to MLflow: inline for a local store; for a tracking server, where
    each cell is a few HTTP round trips, in ``threads`` parallel writers (at most
    ``4 * threads`` cells waiting), so the driver keeps up with a large cluster."""

    def __init__(self, tracker: Tracker, parent: str, threads: int) -> None:
        self.tracker, self.parent = tracker, parent
        self.pool = ThreadPoolExecutor(threads, "sweeper-log") if threads > 1 else None
        self.limit = 4 * threads
        self.pending: dict[Future, int] = {}  # a cell being logged -> when it was handed over
        self.cut: int | None = None  # when the first cell whose logging was cut off began

    def _log(self, cell: Cell, outcome: Outcome, supersedes: list[str]):
        handed = now_ms()
        try:
            with store_calls(f"logging cell {cell.label}"):
                return cell, outcome, self.tracker.log_cell(cell, outcome, self.parent, supersedes)
        except BaseException:  # its run may exist (even FINISHED) without a table row
            self.cut = handed if self.cut is None else min(self.cut, handed)
            raise

    def submit(self, cell: Cell, outcome: Outcome, supersedes: list[str]) -> list:
        """Log (or start logging) one cell; return the cells whose logging has completed."""
        if self.pool is None:
            return [self._log(cell, outcome, supersedes)]
        self.pending[self.pool.submit(self._log, cell, outcome, supersedes)] = now_ms()
        return self.collect(wait=len(self.pending) >= self.limit)

    def collect(self, wait: bool = False, everything: bool = False) -> list:
        """The cells logged since the last call (in hand-over order); an MLflow error raises."""
        if not self.pending:
            return []
        if everything:
            futures.wait(self.pending)
        elif wait:
            futures.wait(self.pending, return_when=futures.FIRST_COMPLETED)
        done = sorted((f for f in self.pending if f.done()), key=self.pending.__getitem__)
        for future in done:
            del self.pending[future]
        return [future.result() for future in done]

    def until(self) -> int:
        """The table's ``table_until``: now, or the hand-over time of the oldest cell still
        being logged or whose logging was cut off (a second Ctrl-C, a store error): its run
        may exist without being in the table, so the next start searches for it."""
        cut = [] if self.cut is None else [self.cut]
        return min([now_ms(), *self.pending.values(), *cut])

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True)


def _log_threads(cfg: DictConfig, tracker: Tracker) -> int:
    """``tracking.log_threads``; null: 4 for a tracking server, 1 (inline) for a local store."""
    value = cfg.tracking.get("log_threads")
    if value is None:
        return 4 if tracker.remote else 1
    if int(value) < 1:
        raise ValueError(f"tracking.log_threads must be a positive count or null, got {value}")
    return int(value)


def validate(cells: Sequence[Cell]) -> None:
    """Call each cell function's ``validate`` hook once per distinct config (seed aside).

    Bad input (an empty interval, a missing dataset file, ...) fails here, before any cell
    runs, with the task's own message.
    """
    seen: set[str] = set()
    for cell in cells:
        function = locate(cell.function)
        check = getattr(function, "validate", None)
        signature = canonical_json({k: v for k, v in cell.config.items() if k != "seed"})
        if check is None or signature in seen:
            continue
        seen.add(signature)
        try:
            check(cell.config)
        except Exception as err:
            raise SweepError(f"invalid cell {cell.label}: {err}") from err


def _previous_rows(
    tracker: Tracker, cells: Sequence[Cell], known: dict[str, IndexEntry]
) -> tuple[dict[str, dict[str, Any]], int]:
    """Rows of cells finished earlier: from a sweep table, else rebuilt from the run."""
    rows: dict[str, dict[str, Any]] = {}
    rebuilt = 0
    for cell in cells:
        entry = known.get(cell.key)
        if entry is None:
            continue
        if entry.row is not None:
            rows[cell.key] = {k: v for k, v in entry.row.items() if not _missing(v)}
        else:
            rows[cell.key] = tracker.row_from_run(cell, entry.run or entry.run_id)
            rebuilt += 1
    return rows, rebuilt


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
    return " ".join(["python -m sweeper", *(shlex.quote(o) for o in cli_overrides)])


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else text
    return line if len(line) <= 300 else line[:297] + "..."


def _browse(uri: str) -> str:
    if uri.split(":", 1)[0] in ("http", "https"):
        return f"open {uri} in a browser"
    return f"mlflow ui --backend-store-uri {uri}"


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
        f"  browse them: {_browse(result.tracking_uri)}",
        file=out,
    )
    if result.store_error:
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
    lead, table = result.task.lead, result.table
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
