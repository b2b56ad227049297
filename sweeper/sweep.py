"""The driver: expand, skip what is done, dispatch, record (DESIGN.md, Data flow)."""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from sweeper.cells import Cell, canonical_json
from sweeper.grid import Composer, expand
from sweeper.launch import launch
from sweeper.tracking import Tracker
from tasks.building import locate

TABLE_FLUSH_EVERY = 50


@dataclass
class SweepResult:
    experiment: str
    tracking_uri: str
    cells: int
    skipped: int
    finished: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    wall_s: float = 0.0
    table: pd.DataFrame | None = None

    @property
    def ok(self) -> bool:
        return not self.failed


def sweep_key(cells: Sequence[Cell]) -> str:
    """The sweep's identity: a hash of its cells' keys, so a rerun reuses its parent run."""
    return hashlib.sha256("\n".join(sorted(c.key for c in cells)).encode()).hexdigest()


def run_sweep(
    cfg: DictConfig, compose: Composer, cli_overrides: Sequence[str] = (), out=sys.stdout
) -> SweepResult:
    started = time.perf_counter()
    cells = expand(cfg, compose, cli_overrides)
    validate(cells)
    name = str(cfg.experiment.name)
    tracker = Tracker(cfg.tracking.get("uri"), name)
    parent = tracker.parent_run(
        sweep_key(cells), OmegaConf.to_yaml(cfg), str(cfg.experiment.get("description") or "")
    )
    done = {} if cfg.get("rerun") else tracker.finished_cells()
    todo = [c for c in cells if c.key not in done]
    result = SweepResult(name, tracker.uri, len(cells), len(cells) - len(todo))
    print(
        f"sweep '{name}': {len(cells)} cells, {result.skipped} already finished, "
        f"{len(todo)} to run ({cfg.launcher.name} launcher)",
        file=out,
    )

    rows = _previous_rows(tracker, parent, cells, done)
    last_flush = len(rows)
    for cell, outcome in launch(todo, cfg.launcher):
        rows[cell.key] = tracker.log_cell(cell, outcome, parent)
        if outcome.status == "FINISHED":
            result.finished += 1
        else:
            result.failed.append((cell.label, outcome.error or "unknown error"))
        _progress(result, len(todo), started, out)
        if len(rows) - last_flush >= TABLE_FLUSH_EVERY:
            tracker.write_cells_table(parent, pd.DataFrame(rows.values()))
            last_flush = len(rows)
    if todo:
        print(file=out)

    result.table = pd.DataFrame(rows.values())
    tracker.write_cells_table(parent, result.table)
    result.wall_s = time.perf_counter() - started
    tracker.finish_parent(
        parent,
        {
            "cells": len(cells),
            "finished": result.finished + result.skipped,
            "failed": len(result.failed),
            "wall_s": result.wall_s,
        },
        failed=not result.ok,
    )
    _print_summary(result, out)
    return result


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
            raise ValueError(f"invalid cell {cell.label}: {err}") from err


def _previous_rows(
    tracker: Tracker, parent: str, cells: Sequence[Cell], done: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """Rows of cells finished earlier, from the parent's table or else from their runs."""
    wanted = {c.key: c for c in cells if c.key in done}
    rows: dict[str, dict[str, Any]] = {}
    table = tracker.read_cells_table(parent)
    if table is not None:
        for row in table.to_dict("records"):
            if row["cell_key"] in wanted and row.get("status") == "FINISHED":
                rows[row["cell_key"]] = row
    for key, cell in wanted.items():
        if key not in rows:
            rows[key] = tracker.row_from_run(cell, done[key])
    return rows


def _progress(result: SweepResult, total: int, started: float, out) -> None:
    done = result.finished + len(result.failed)
    elapsed = time.perf_counter() - started
    eta = elapsed / done * (total - done) if done else float("nan")
    print(
        f"\r  {done}/{total} done, {len(result.failed)} failed, {total - done} remaining, "
        f"{elapsed:.0f}s elapsed, ETA {eta:.0f}s   ",
        end="",
        file=out,
        flush=True,
    )


def _print_summary(result: SweepResult, out) -> None:
    table = result.table
    if table is not None and "final_regret" in table:
        finished = table[table["status"] == "FINISHED"]
        if len(finished):
            stats = (
                finished.groupby(["algorithm", "tuner"])["final_regret"]
                .agg(["mean", "std", "count"])
                .round(2)
            )
            print("\nfinal cumulative regret (mean, std over seeds):", file=out)
            print(stats.to_string(), file=out)
    for label, error in result.failed:
        print(f"FAILED {label}: {error}", file=out)
    print(
        f"\n{result.finished} finished, {len(result.failed)} failed, {result.skipped} skipped "
        f"in {result.wall_s:.1f}s. Runs are in MLflow experiment '{result.experiment}' at "
        f"{result.tracking_uri}\n"
        f"  browse them: mlflow ui --backend-store-uri {result.tracking_uri}",
        file=out,
    )
