"""The driver: plan, open the store, dispatch, record, close (docs/architecture.md).

``run_sweep`` expands the config into cells, opens the experiment for this driver alone
(:class:`sweeper.store.SweepStore`), skips the cells that have a result, dispatches the
rest (:mod:`sweeper.launch`), hands each outcome to the store's recorder as it arrives and
closes the sweep. The driver keeps the cells' keys and counts, never their rows: its memory
does not grow with their results. The first Ctrl-C (or SIGTERM, as ``ray job stop`` and
Slurm send) cancels only what is in flight; the finished cells are kept and the same
command resumes. A store that fails mid-sweep ends it cleanly (exit status 3), one that
another driver took over stops it (exit status 4): docs/architecture.md, "Faults".
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TextIO

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from sweeper import baseline, settings, signals
from sweeper.adaptive import AdaptiveSeeds
from sweeper.cells import Cell, canonical_json
from sweeper.command import resume_lines, sweep_command
from sweeper.dryrun import dry_run
from sweeper.errors import StoreFailed, SweepError
from sweeper.execute import Outcome, cell_function
from sweeper.grid import Composer, Grid, expand, task_of
from sweeper.launch import check_launcher, init_ray, launch
from sweeper.nfs import warn_network_sqlite
from sweeper.outcome import Declared
from sweeper.progress import Progress, format_duration
from sweeper.seeds import budget_of
from sweeper.store import (
    Done,
    LeaseLost,
    Recorder,
    SweepStore,
    check_store,
    patience_of,
    refuse_foreign_schema,
    resolve_uri,
)
from sweeper.task import GENERIC, Task
from sweeper.ui import browse_hint, comparison
from sweeper.uri import redact

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
    resume_command: str = ""  # as printed: the line to paste and its notes (sweeper/command.py)
    task: Task = GENERIC
    settings: dict[str, str] = field(default_factory=dict)  # cell key -> its run name sans seed
    experiment_id: str = ""
    view: str = ""  # the share key of the sweep's comparison in MLflow's UI (sweeper/ui.py)

    store_error: str = ""  # the MLflow store failed mid-sweep: why
    lost: bool = False  # another driver took the experiment over (store_error says so)
    resume_s: float = 0.0  # reading what the experiment holds and what is left to run
    load_table: Any = None  # columns -> the sweep's table, read back from the store
    decisions: list[dict[str, Any]] = field(default_factory=list)  # seeds until decided
    ahead: tuple[int, int] = (0, 0)  # cells run ahead of the rule, and how many it asked for

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
    cfg: DictConfig, compose: Composer, cli_overrides: Sequence[str], out: TextIO = sys.stdout
) -> SweepResult:
    """Run the sweep ``cfg`` describes (steps 2-7 of docs/architecture.md): plan, open the
    store, dispatch, record, close. ``cfg`` is ``compose(cli_overrides)`` (with, for ``-m``,
    its grid replaced): the grid's cells are composed from the same overrides, so they are
    given, never defaulted (``sweeper.run`` is the public way in).

    Raises ``ValueError`` (``SweepError``) for bad input before anything runs,
    :class:`~sweeper.errors.StoreBusy` when another driver writes into the store (or, on a
    tracking server, the experiment), :class:`~sweeper.errors.StoreFailed` when the store
    fails before the first cell is dispatched; a store failure later ends the sweep cleanly
    (``SweepResult.store_error``, exit status 3).
    """
    started = time.perf_counter()
    signals.begin_sweep()  # a stop a library swallowed before it: honoured
    settings.redact_hydra_files()
    check_launcher(cfg.launcher)
    uri = resolve_uri(cfg.tracking.get("uri"))
    settings.check(cfg, uri)
    warn_network_sqlite(uri, cfg.tracking.get("database"))  # sqlite on NFS: one paragraph
    cells = expand(cfg, compose, cli_overrides)
    if len(cells) > settings.max_cells(cfg):
        raise settings.too_many(f"this sweep has {len(cells):,} cells", settings.max_cells(cfg))
    paired = _paired_against(cfg, cells, compose, cli_overrides)
    dry = bool(cfg.get("dry_run"))
    data = validate(cells, read_data=not dry)
    if dry:
        dry_run(cfg, cells, data, cli_overrides, out)
        return SweepResult(str(cfg.experiment.name), "", len(cells), 0)
    check_store(uri)
    refuse_foreign_schema(uri, cfg.tracking)  # direct writes into another MLflow's schema
    command = sweep_command(cli_overrides).shell()  # the lock's holder, for other drivers
    name = settings.experiment_name(cfg.experiment.get("name"))
    with SweepStore.open(
        uri, name, task_of(cfg), cfg.tracking.get("artifacts_destination"), command,
        patience_of(cfg), Say(out),
    ) as store:  # fmt: skip
        return _sweep(cfg, store, name, cells, cli_overrides, started, out, paired)


class Say:
    """Says a line of the driver's start (the progress line does it once cells run)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def message(self, text: str) -> None:
        print(text, file=self.out, flush=True)


def _sweep(
    cfg: DictConfig,
    store: SweepStore,
    name: str,
    cells: Grid,
    cli_overrides: Sequence[str],
    started: float,
    out: TextIO,
    paired: PairedAxis,
) -> SweepResult:
    """What is done, Ray, the parent run, then :func:`_drive`; holding the store."""
    done = store.done(cells)
    rerun = settings.rerun(cfg)
    todo = cells if rerun else cells.where(lambda key: key not in done.finished)
    result = SweepResult(
        name,
        store.uri,
        len(cells),
        len(cells) - len(todo),
        resume_command=resume_lines(cli_overrides),
        carried_over=done.carried,
        task=task_of(cfg),
        settings={c.key: c.setting for c in cells},
        experiment_id=store.experiment_id,
    )
    result.resume_s = done.seconds
    print(f"sweep '{name}': results go to {store.uri}", file=out)
    if store.note:
        print(f"  the store was {store.note} whole (sweeper/store/lock.py)", file=out)
    if done.retagged:
        print(f"  {done.retagged} run(s) of an interrupted rerun re-tagged superseded_by", file=out)
    if done.retracted:
        print(
            f"  {done.retracted} run(s) a driver on another host left uncommitted (it lost "
            "the experiment) retracted: deleted, their cells run again",
            file=out,
        )
    store.prepare(cfg, writes=bool(todo))  # before the parent run, as Ray: bad settings
    if todo and cfg.launcher.get("name", "ray") == "ray":
        try:  # before the parent run: a cluster that cannot be used leaves nothing behind
            init_ray(cfg.launcher)
            if signals.STOP.requested:  # a signal during Ray's start, kept until it ended
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            result.interrupted, result.cancelled = True, len(todo)
            print_summary(result, out)
            return result
    description = str(cfg.experiment.get("description") or "")
    config_yaml = redact(OmegaConf.to_yaml(cfg))
    key = sweep_key(cells.keys)
    result.reaped, result.rebuilt_rows = store.begin(key, config_yaml, description, cells, rerun)
    result.parent_run_id = store.parent_run_id
    if store.library_change:
        print(
            f"  this sweep resumes under other library versions than its earlier runs "
            f"({store.library_change}): the cells computed now and before may differ in "
            "their last digits; rerun=true recomputes them all",
            file=out,
        )
    try:
        shown = comparison(cells, task_of(cfg), f"sweep-{key[:12]}")  # in MLflow's UI
        if shown is not None:
            store.show(shown.axis, shown.colours, shown.tag)
            result.view = shown.key
        return _drive(cfg, store, cells, todo, done, result, started, out, paired)
    except BaseException as err:  # never leave the sweep RUNNING, whatever stopped it
        store.abandon("KILLED" if isinstance(err, KeyboardInterrupt) else "FAILED")
        raise


def _drive(
    cfg: DictConfig,
    store: SweepStore,
    cells: Grid,
    todo: Grid,
    done: Done,
    result: SweepResult,
    started: float,
    out: TextIO,
    paired: PairedAxis,
) -> SweepResult:
    """Dispatch ``todo``, record the outcomes in batches as they arrive, close the store's
    sweep. The driver keeps counts and keys, not rows: the rows go to the sweep's table."""
    rerun = settings.rerun(cfg)
    result.load_table = lambda columns=None: store.table(cells.keys, columns)
    _say_start(cfg, result, todo, done, rerun and bool(done.finished), out)
    if paired.note:
        print(f"  {paired.note}", file=out)
    source = _source(cfg, store, cells, todo, rerun, paired)
    adaptive = isinstance(source, AdaptiveSeeds)
    progress = Progress(source.cells_left() if adaptive else len(todo), out)
    recorder = store.recorder(progress)

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
    with signals.graceful(progress.message) as stop:  # a first Ctrl-C or SIGTERM: stop here
        _record(cfg, store, source, recorder, progress, result, count, stop)
        if stop.requested:  # it came once the cells were dispatched (the last batches)
            result.interrupted = True
        if result.interrupted or result.store_error:
            result.cancelled = len(todo) - result.processed
        if isinstance(source, AdaptiveSeeds):
            result.decisions = source.table()
            result.ahead = source.ahead_used()
            result.cancelled = min(result.cancelled, source.cells_left())
            if not (result.store_error or result.lost):
                try:
                    store.attach("decisions.json", json.dumps(result.decisions, indent=2).encode())
                except StoreFailed as err:
                    result.store_error = str(err)
        result.dispatch_s = time.perf_counter() - dispatch_started
        result.wall_s = time.perf_counter() - started
        if result.lost:  # the sweep is another driver's now: its parent and table too
            store.abandon()
        else:
            _close(store, cells, result, progress)
        result.interrupted = result.interrupted or stop.requested  # a parent that had ended
    progress.close()
    print_summary(result, out)
    return result


def _record(
    cfg: DictConfig,
    store: SweepStore,
    source: Grid | AdaptiveSeeds,
    recorder: Recorder,
    progress: Progress,
    result: SweepResult,
    count: Callable[[list[tuple[Cell, Outcome, dict[str, Any]]]], None],
    stop: signals.Stop,
) -> None:
    """Dispatch the cells of ``source`` and record their outcomes as they arrive, then the
    last batches (kept after a first Ctrl-C); what stopped it goes into ``result``."""
    adaptive = isinstance(source, AdaptiveSeeds)
    running: set[str] = set()
    try:
        with closing(launch(source, cfg.launcher, Declared.of(task_of(cfg)))) as events:
            recorder.stop = stop
            for event in events:
                cell, outcome = event.cell, event.outcome
                if event.kind == "started" and cell is not None:
                    running.add(cell.key)
                    progress.start()
                elif event.kind == "finished" and cell is not None and outcome is not None:
                    progress.finish(outcome.status == "FINISHED", cell.key in running)
                    running.discard(cell.key)
                    recorder.add(cell, outcome)
                    if adaptive:  # the seeds it asks for now: the bar's total grows with them
                        source.observe(cell, _lead_of(outcome, result.task.lead))
                        progress.total = progress.done + source.cells_left()
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


class PairedAxis(NamedTuple):
    """The compared axis of a sweep, the grid's baseline value (None: none set, or the
    command line kept no cell of it) and what to say about it."""

    axis: str | None
    baseline: Any
    note: str = ""


def _paired_against(
    cfg: DictConfig, cells: Grid, compose: Composer, cli_overrides: Sequence[str]
) -> PairedAxis:
    """The sweep's baseline (sweeper/baseline.py), checked before anything runs. Bad input
    (exit status 2): a baseline the command line names that is not in the grid, an
    experiment's baseline that its own grid lacks, a seed budget without one in the grid. An
    experiment's baseline that the command line narrowed away (``+exp=main tuner=op``, or
    ``-m +exp=main tuner=op,tl``) is only said: such a sweep has no paired comparison."""
    task = task_of(cfg)
    config = {k: OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k])
              else cfg[k] for k in ("baseline", "report") if k in cfg}  # fmt: skip
    axis = baseline.compared_axis(config, task.compare)
    wanted = baseline.baseline_of(config, legacy_task={})
    budget = budget_of(cfg)
    if budget is not None and not task.lead:
        raise SweepError(
            f"seeds={{until: decided, ...}} compares the family's lead metric, and task "
            f"{task.name} declares none: set task.lead, or use a number of seeds (seeds=20)"
        )
    if axis is None:
        if wanted is not None or budget is not None:
            raise SweepError(
                f"{'baseline=' + str(wanted) if wanted is not None else 'a seed budget'} needs "
                f"an axis to compare along, and task {task.name} has none: set task.compare "
                "(the family's file) or report.paired.axis (the experiment's)"
            )
        return PairedAxis(None, None)
    values = cells.values_at(axis)
    if wanted is None:
        if budget is not None:
            raise baseline.required(axis, values, "seeds={until: decided, ...}")
        return PairedAxis(axis, None)
    axes = (config.get("report") or {}).get("axes") or {}  # keys hold dots: space.candidates
    labels = (axes.get(axis) or {}).get("labels") if isinstance(axes, dict) else None
    narrowed = budget is None and not any(_override_key(o) == baseline.KEY for o in cli_overrides)
    if narrowed and not any(baseline.matches(wanted, v, labels) for v in values):
        declared = _declared_values(compose, cli_overrides, axis)
        if any(baseline.matches(wanted, v, labels) for v in declared):
            note = (
                f"the experiment's baseline {wanted} is not among the {axis} options this "
                "command line keeps: no paired comparison"
            )
            return PairedAxis(axis, None, note)
    return PairedAxis(axis, baseline.check_in_grid(wanted, axis, values, labels))


def _declared_values(compose: Composer, cli_overrides: Sequence[str], axis: str) -> list[Any]:
    """The values of ``axis`` in the experiment as its file declares it (its ``sweep.grid``
    and its default), before the command line narrowed it; [] for ad hoc cells."""
    chosen = [o for o in cli_overrides if _override_key(o) == "exp"]
    if not chosen:
        return []
    declared = compose(chosen)
    grid = OmegaConf.select(declared, "sweep.grid")
    blocks = OmegaConf.to_container(grid, resolve=True) if grid is not None else []
    blocks = blocks if isinstance(blocks, list) else [blocks]
    values = [v for b in blocks if isinstance(b, dict) for v in _as_list(b.get(axis))]
    default = OmegaConf.select(declared, axis)
    return [*values, default.get("name") if OmegaConf.is_dict(default) else default]


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [] if value is None else [value]


def _override_key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _source(
    cfg: DictConfig,
    store: SweepStore,
    cells: Grid,
    todo: Grid,
    rerun: bool,
    paired: PairedAxis,
) -> Grid | AdaptiveSeeds:
    """The cells to run: ``todo``, or, for a seed budget (sweeper/seeds.py), the cells that
    seeds until decided asks for as outcomes arrive (sweeper/adaptive.py), knowing the lead
    values of the cells finished before."""
    budget = budget_of(cfg)
    if budget is None:
        return todo
    task = task_of(cfg)
    lead = task.lead
    finished: dict[str, float] = {}
    table = None if rerun or lead is None else store.table(cells.keys, [lead])
    if table is not None and lead in table:
        rows = table[table["status"] == "FINISHED"]
        finished = dict(zip(rows["cell_key"], rows[lead].astype(float), strict=True))
    assert paired.axis is not None  # _paired_against requires a baseline for a budget
    return AdaptiveSeeds(cells, budget, task, finished, paired.axis, paired.baseline)


def _lead_of(outcome: Outcome, lead: str | None) -> float | None:
    if outcome.status != "FINISHED" or lead is None:
        return None
    value = ((outcome.result or {}).get("summary") or {}).get(lead)
    return None if value is None else float(value)


def _say_start(
    cfg: DictConfig, result: SweepResult, todo: Grid, done: Done, recomputing: bool, out: TextIO
) -> None:
    """The sweep's first lines: what is left to run, and what resuming found and settled."""
    print(
        f"sweep '{result.experiment}': {result.cells} cells, {result.skipped} already "
        f"finished, {len(todo)} to run{' (rerun=true: recomputing)' if recomputing else ''} "
        f"({cfg.launcher.name} launcher)",
        file=out,
    )
    lines = [
        (result.skipped, f"resume check {result.resume_s:.2f} s ({done.tables} table(s) read, "
                         f"{done.searched_runs} run(s) searched)"),
        (result.reaped, f"{result.reaped} run(s) left RUNNING by a killed driver set to KILLED"),
        (done.damaged, f"{done.damaged} sweep table(s) lost rows (a part deleted or damaged): "
                       "their runs were searched instead (the runs are the truth, the table "
                       "their cache)"),
        (result.rebuilt_rows, f"{result.rebuilt_rows} table row(s) rebuilt from their runs"),
        (result.carried_over, f"{result.carried_over} finished run(s) stored under an older "
                              "sweeper's cell keys carried over (sweeper/store/migrate.py)"),
    ]  # fmt: skip
    for shown, line in lines:
        if shown:
            print(f"  {line}", file=out)


def _close(store: SweepStore, cells: Grid, result: SweepResult, progress: Progress) -> None:
    """Close the store's sweep: its table consolidated, the summary logged, the parent run
    ended (FAILED if the store fails now; the next start settles what is left)."""
    summary = {
        "cells": len(cells),
        "finished": result.finished + result.skipped,
        "failed": len(result.failed),
        "skipped": result.skipped,
        "wall_s": result.wall_s,
        "cells_per_s": result.cells_per_s,
    }
    stopped = result.interrupted or bool(result.store_error)
    error = store.close(
        summary,
        _details(result),
        failed=not result.ok,
        status="KILLED" if result.interrupted and not result.store_error else None,
        rerun_ended=not stopped,
        say=progress,
        away=bool(result.store_error),
    )
    result.store_error = result.store_error or error
    if result.interrupted or result.store_error:
        store.abandon()  # a run cut off mid-write


def validate(cells: Sequence[Cell], read_data: bool = True) -> list[Any]:
    """Call each cell function's ``validate`` hook once per distinct config (seed aside);
    return the data files the cells read (each function's ``data`` hook), each once.

    Bad input (an empty interval, a missing dataset file, ...) fails here, before any cell
    runs, with the task's own message. With ``read_data=False`` (a dry run) a config whose
    ``data`` hook names files is not validated, since its ``validate`` reads (or
    downloads) them; the ``data`` hook builds its parts without reading anything.
    """
    seen: set[str] = set()
    files: dict[tuple[str, str], Any] = {}
    for cell in cells:
        signature = canonical_json({k: v for k, v in cell.config.items() if k != "seed"})
        if signature in seen:
            continue
        seen.add(signature)
        function = _function_of(cell)
        needs = _hook(getattr(function, "data", None), cell)
        files.update({(f.name, f.path): f for f in needs or []})
        if read_data or not needs:
            _hook(getattr(function, "validate", None), cell)
    return list(files.values())


def _function_of(cell: Cell) -> Any:
    try:
        return cell_function(cell.function)
    except (ImportError, ValueError) as err:
        reason = " ".join(str(err).split())
        raise SweepError(
            f"cell={cell.function}: no cell function there ({reason}). The config key "
            "`cell` is the dotted path of a family's run_cell (e.g. "
            "cell=sweeper.toy.toy_cell); choose a family with task=NAME instead of "
            "setting cell by hand"
        ) from None


def _hook(hook: Any, cell: Cell) -> Any:
    """A cell function's hook called on the cell's config (None without one); bad input
    it refuses is a :class:`SweepError` naming the cell."""
    if hook is None:
        return None
    try:
        return hook(cell.config)
    except (ValueError, TypeError, KeyError, OSError, ImportError) as err:
        # what a hook says of bad input (a value, a type, a missing file or _target_);
        # any other exception is a bug in it, and shows its traceback
        raise SweepError(f"invalid cell {cell.label}: {err}") from err


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
    _print_decisions(result, out)
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
        f"  browse them: {browse_hint(result.tracking_uri, result.experiment_id, result.view)}",
        file=out,
    )
    if result.lost:
        print(f"\nStopped: {result.store_error}", file=out)
    elif result.store_error:
        print(
            f"\nThe MLflow store failed: {result.store_error}\nThe cells logged before it are "
            "kept and the cells in flight were cancelled. Fix the store (free disk space, "
            "restart the tracking server, ...), then resume (only the missing cells run) "
            f"with:\n{result.resume_command}",
            file=out,
        )
    elif result.interrupted:
        print_interrupted(result.resume_command, out)
    elif result.failed:
        print("Rerunning the same command retries only the failed and missing cells.", file=out)


def print_interrupted(command: str, out: TextIO = sys.stdout) -> None:
    """How to resume an interrupted sweep."""
    print(
        "\nInterrupted: finished cells are kept, nothing is left RUNNING. Resume (only the "
        f"missing cells run) with:\n{command}",
        file=out,
        flush=True,
    )


def _print_decisions(result: SweepResult, out: TextIO) -> None:
    """Seeds until decided: each comparison's state, interval and seeds."""
    if not result.decisions:
        return
    states = pd.Series([d["state"] for d in result.decisions]).value_counts()
    print(
        "\nSeeds until decided (each option against the reference, paired by seed): "
        + ", ".join(f"{n} {state}" for state, n in states.items()),
        file=out,
    )
    rows = pd.DataFrame(result.decisions)
    rows["interval"] = [
        f"[{lo:.3g}, {hi:.3g}]" for lo, hi in zip(rows["low"], rows["high"], strict=True)
    ]
    view = rows[["group", "option", "seeds", "mean_difference", "interval", "state"]]
    print(view.head(MAX_SUMMARY_ROWS).round(3).to_string(index=False), file=out)
    ahead, used = result.ahead
    if ahead:
        print(
            f"{ahead} cells ran ahead of the rule on CPUs that would have idled; it then asked "
            f"for {used} of them (seeds.speculate=false turns this off)",
            file=out,
        )


def _print_lead(result: SweepResult, out: TextIO) -> None:
    """Mean, sd and count of the family's lead metric per setting: every axis of the sweep
    but the seed, so no row pools two settings (e.g. two warm-up lengths)."""
    lead = result.task.lead
    if lead is None or result.load_table is None or result.store_error:
        return  # a store that failed is not read again
    try:
        table = result.load_table([lead])
    except StoreFailed:  # the summary goes on without its table
        return
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
