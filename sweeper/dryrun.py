"""``sweeper +exp=NAME --dry-run``: what a sweep would do, without doing any of it.

It expands the grid as a sweep does and validates every config whose cells read no data
file (a config that reads one is only built: its family's ``validate`` would read, or
download, the data). It reads the store without writing to it (no Ray, no parent run, no
lock; a store that does not exist yet is not created), touches no network but the store's
and no data, and prints:

* the grid's size by axis, and how many of its cells the store holds FINISHED (as resume
  counts them: the store's one reader, sweeper/store/reader.py);
* the data files the cells read (each cell function's ``data`` hook), each present or
  missing, and what happens when it is missing (downloaded before the first cell, or what
  to do);
* an estimate of the time left, spread over the CPUs of the launcher, priced by the
  store's durations when it holds finished runs of the experiment (each cell to run costs
  the median duration of the FINISHED runs of its kind, the same group options, e.g.
  linucb/cdt/simulation, else of all of them); else by the bench's measured cost of the
  experiment's cells (:data:`COSTS`, written by ``bench/bench_orchestration.py``), plus the
  driver's own time per cell. The line says which.
"""

from __future__ import annotations

import json
import os
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from omegaconf import DictConfig

from sweeper.cells import ORCHESTRATION_KEYS
from sweeper.grid import Grid
from sweeper.progress import format_duration
from sweeper.store.lock import sqlite_path
from sweeper.store.reader import LEAN, Experiment, NotFound, read, resolve_uri

COSTS = Path(__file__).with_name("cell_costs.json")
"""The bench's measured cost of each experiment's cells at full size on its machine: the
mean seconds of a sampled cell and the driver's time per cell (bench/bench_orchestration.py
writes it; it ships inside the package)."""


def dry_run(
    cfg: DictConfig, cells: Grid, data: Sequence[Any], overrides: Sequence[str], out: TextIO
) -> None:
    """Print the plan of the sweep ``cfg`` whose cells are ``cells`` and whose cells read
    the data files ``data`` (module docstring); ``overrides`` are the command line's."""
    name = str(cfg.experiment.name)
    uri = resolve_uri(cfg.tracking.get("uri"))
    print(
        f"dry run of sweep '{name}' (nothing runs, nothing is written, no data is read)", file=out
    )
    print(f"  {len(cells)} cells: {_by_axis(cells)}", file=out)
    finished = _finished_runs(uri, name, cells)
    done = [cell for cell in cells if cell.key in finished]
    todo = [cell for cell in cells if cell.key not in finished]
    print(f"  {len(done)} already FINISHED in {uri}; {len(todo)} to run", file=out)
    for line in _data_lines(data):
        print(f"  {line}", file=out)
    cpus = _cpus(cfg)
    estimate = _from_store(todo, done, finished, cpus)
    if estimate is None:
        estimate = _from_bench(len(todo), _experiment(overrides, name), overrides, cells, cpus)
    print(f"  {estimate}", file=out)


def _by_axis(cells: Grid) -> str:
    """``algorithm 2 x tuner 3 x seed 3`` (distinct values per axis, in the grid)."""
    counts: dict[str, set[str]] = defaultdict(set)
    for cell in cells:  # a cell's tags: seed, groups and each axis the sweep varies
        for key, value in cell.tags.items():
            if key != "cell_key":
                counts[key].add(value)
    return " x ".join(f"{k} {len(v)}" for k, v in counts.items() if len(v) > 1) or "one setting"


def _finished_runs(uri: str, experiment: str, cells: Grid) -> dict[str, Any]:
    """cell key -> its result when FINISHED, as resume sees it (the store's one reader,
    sweeper/store/reader.py; a cell stored under its legacy key counts, as resume carries
    it over); {} when the store or the experiment does not exist (nothing is created)."""
    path = sqlite_path(uri)
    if path is not None and not Path(path).exists():
        return {}  # opening it would create it
    try:  # a file that is no database, a directory, a server that is not MLflow: refused
        found = read(Experiment(uri, experiment), [*LEAN, "wall_s"]).finished()
    except NotFound:
        return {}
    done = {key: found[key] for key in cells.keys if key in found}
    for i, key in enumerate(cells.keys):
        if key not in done and found:
            legacy = cells[i].legacy_key
            if legacy is not None and legacy in found:
                done[key] = found[legacy]
    return done


def _duration(candidate: Any) -> float | None:
    """A finished cell's seconds: its table row's ``wall_s``, else its run's span."""
    row = candidate.row or {}
    if row.get("wall_s") is not None:
        return float(row["wall_s"])
    run = candidate.run
    if run is not None and run.info.end_time and run.info.start_time:
        return (run.info.end_time - run.info.start_time) / 1000
    return None


def _data_lines(data: Sequence[Any]) -> list[str]:
    """One line per data file: present where, or missing and what then happens."""
    if not data:
        return ["data: no data file to read (the cells generate their data)"]
    lines = []
    for file in data:
        if file.present:
            lines.append(f"data: {file.name}: present at {file.path}")
        else:
            lines.append(f"data: {file.name}: MISSING at {file.path}; {file.missing}")
    return lines


def _from_store(
    todo: Sequence[Any], done: Sequence[Any], finished: dict[str, Any], cpus: int | None
) -> str | None:
    """The time left priced by the store's durations; None when it holds none."""
    if not todo:
        return "nothing left to run"
    durations: dict[tuple[str, ...], list[float]] = defaultdict(list)
    kinds_of = {cell.key: _kind(cell.tags, cell.groups) for cell in done}
    for key, candidate in finished.items():
        seconds = _duration(candidate)
        if seconds is not None and key in kinds_of:
            durations[kinds_of[key]].append(seconds)
    every = [d for ds in durations.values() for d in ds]
    if not every:
        return None
    medians = {kind: statistics.median(ds) for kind, ds in durations.items()}
    overall = statistics.median(every)
    kinds = Counter(_kind(cell.tags, cell.groups) for cell in todo)
    seconds = sum(n * medians.get(kind, overall) for kind, n in kinds.items())
    matched = sum(n for kind, n in kinds.items() if kind in medians)
    basis = (
        f"priced by the store's durations: {matched} of {len(todo)} cells by finished runs "
        "of their kind, the rest by the median of all"
    )
    return _time_left(seconds, 0.0, cpus, basis)


def _from_bench(
    n: int, experiment: str, overrides: Sequence[str], cells: Grid, cpus: int | None
) -> str:
    """The time left priced by the bench's measured cells of ``experiment`` (:data:`COSTS`)."""
    costs = json.loads(COSTS.read_text()) if COSTS.is_file() else {}
    measured = costs.get("experiments", {}).get(experiment)
    if measured is None:
        return (
            "time left: unknown (the store holds no finished run of this experiment, and the "
            f"bench timed no cell of experiment '{experiment}')"
        )
    basis = (
        f"priced by the bench's measured cells of {experiment}: {measured['mean_s']:.2f} s a "
        f"cell at full size on {costs['cpus']} CPUs, {costs['measured']}, "
        f"{costs['by']}; the store holds no finished run of this experiment"
    )
    changed = _cell_overrides(overrides, cells.groups)
    if changed:
        basis += f"; {' '.join(changed)} change the cells it timed"
    return _time_left(n * float(measured["mean_s"]), n * float(costs["overhead_s"]), cpus, basis)


def _time_left(cell_s: float, driver_s: float, cpus: int | None, basis: str) -> str:
    """``cell_s`` of cells' time spread over ``cpus`` (None: a cluster's), plus the
    driver's ``driver_s``."""
    if cpus is None:
        cell_time = format_duration(cell_s + driver_s)
        return f"time left: {cell_time} of cell time ({basis}), over a cluster's CPUs"
    on = f"{cpus} CPUs" if cpus > 1 else "1 CPU"
    return f"time left: about {format_duration(cell_s / cpus + driver_s)} on {on} ({basis})"


def _experiment(overrides: Sequence[str], name: str) -> str:
    """The experiment file the command line chose (``+exp=NAME``), else the sweep's name."""
    chosen = [o.split("=", 1)[1] for o in overrides if o.lstrip("+").startswith("exp=")]
    return chosen[-1] if chosen else name


def _cell_overrides(overrides: Sequence[str], groups: Sequence[str]) -> list[str]:
    """The overrides that change what a cell computes (``horizon=2000``), not how the sweep
    runs nor which options of a group it keeps (``algorithm=linucb``)."""
    how = {*ORCHESTRATION_KEYS, "exp"}
    keys = [(o, o.split("=", 1)[0].lstrip("+~")) for o in overrides]
    return [o for o, key in keys if key.split(".")[0] not in how and key not in groups]


def _kind(tags: dict[str, str], groups: Sequence[str]) -> tuple[str, ...]:
    return tuple(tags.get(g, "") for g in groups)


def _cpus(cfg: DictConfig) -> int | None:
    """The CPUs cells run on: an embedded Ray's (or one, in-process); None on a cluster."""
    launcher = cfg.launcher
    if launcher.get("name", "ray") == "local":
        return 1
    if launcher.get("address") or os.environ.get("RAY_ADDRESS"):
        return None
    cpus = int(launcher.get("num_cpus") or os.cpu_count() or 1)
    return max(1, cpus // int(launcher.get("cpus_per_cell") or 1))
