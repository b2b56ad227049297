"""``sweeper +exp=NAME --dry-run``: what a sweep would do, without doing any of it.

It expands and validates the grid as a sweep does, then reads the store without writing
to it (no Ray, no parent run, no lock; a store that does not exist yet is not created) and
prints the grid's size by axis, how many of its cells the store holds FINISHED (as resume
counts them: the store's one reader, sweeper/store/reader.py), and an
estimate of the time left: each cell to run costs the median duration of the FINISHED runs
of its kind (the same group options, e.g. linucb/cdt/simulation) in the experiment, else of
all of them, spread over the CPUs of the launcher.
"""

from __future__ import annotations

import os
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from omegaconf import DictConfig

from sweeper.grid import Grid
from sweeper.progress import format_duration
from sweeper.store.lock import sqlite_path
from sweeper.store.reader import LEAN, Experiment, NotFound, read, resolve_uri


def dry_run(cfg: DictConfig, cells: Grid, out: TextIO) -> None:
    """Print the plan of the sweep ``cfg`` whose cells are ``cells`` (module docstring)."""
    name = str(cfg.experiment.name)
    uri = resolve_uri(cfg.tracking.get("uri"))
    print(f"dry run of sweep '{name}' (nothing runs, nothing is written)", file=out)
    print(f"  {len(cells)} cells: {_by_axis(cells)}", file=out)
    finished = _finished_runs(uri, name, cells)
    done = [cell for cell in cells if cell.key in finished]
    todo = [cell for cell in cells if cell.key not in finished]
    print(f"  {len(done)} already FINISHED in {uri}; {len(todo)} to run", file=out)
    print(f"  {_estimate(todo, done, finished, _cpus(cfg))}", file=out)


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
    if path is not None and not Path(path).is_file():
        return {}  # opening it would create it
    try:
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


def _estimate(
    todo: Sequence[Any], done: Sequence[Any], finished: dict[str, Any], cpus: int | None
) -> str:
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
        return "time left: unknown (the store holds no finished run of this experiment yet)"
    medians = {kind: statistics.median(ds) for kind, ds in durations.items()}
    overall = statistics.median(every)
    kinds = Counter(_kind(cell.tags, cell.groups) for cell in todo)
    seconds = sum(n * medians.get(kind, overall) for kind, n in kinds.items())
    matched = sum(n for kind, n in kinds.items() if kind in medians)
    basis = f"{matched} of {len(todo)} cells priced by finished runs of their kind"
    if cpus is None:
        cell_time = format_duration(seconds)
        return f"time left: {cell_time} of cell time ({basis}), over a cluster's CPUs"
    on = f"{cpus} CPUs" if cpus > 1 else "1 CPU"
    return f"time left: about {format_duration(seconds / cpus)} on {on} ({basis})"


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
