"""Orchestration overhead: what the driver costs per cell, and every experiment's expected time.

    .venv/bin/python bench/bench_orchestration.py [--cells 1000] [--repeats 3] [--sample 8]

The driver (sweeper/sweep.py) dispatches the cells on Ray and hands each outcome to the
store's recorder (sweeper/store/record.py), which writes them in batches in a writer thread
while the driver goes on dispatching. Measured on toy cells (``sweeper.toy.toy_cell``:
microseconds of work, a ``--horizon``-round curve kept as 500 points, a ``cell.npz``), each
``--repeats`` times into new sqlite stores or experiments (medians; bench/harness.py):

1. the sweep as ``python -m sweeper`` runs it (``run_sweep`` in this process, embedded Ray):
   the driver's own time per cell (from the first dispatch to the last record);
2. the same cells through the Ray launcher alone (no store), alternating with 1;
3. the resume check of the same command started again (every cell skipped), and the two
   ways to find the finished cells: the resume index (the sweep's table plus the runs after
   its mark) against a search of every cell run;
4. recording alone: ``--record-cells`` outcomes handed to the store's recorder as the driver
   hands them (``SweepStore``: add, flush when due, drain, close), straight into the database
   (the default) and through MLflow's API (``tracking.direct_writes=false``), alternating;
5. the same through MLflow's API into an ``mlflow server`` on the loopback (a driver that
   cannot reach the server's database), with 1 and 4 writers (``tracking.log_threads``).

Then, for every experiment of conf/exp/, ``--sample`` of its full-size cells (the same
choice every run) run one by one in this process; the expected wall time of the whole
experiment on this machine is cells x mean cell time / Ray's CPUs + cells x the driver's
time per cell of 1 (as if it never overlapped the cells). Written to ``--out``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import ray
from harness import Bench, Timing, interleaved, measure, ratio
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from sweeper.dryrun import COSTS
from sweeper.execute import Outcome, execute
from sweeper.grid import Grid, expand, group_options, task_of
from sweeper.launch import init_ray, launch
from sweeper.paths import CONF_DIR
from sweeper.progress import Progress
from sweeper.servers import ServerError, mlflow_server
from sweeper.store import SweepStore
from sweeper.store.index import read_index
from sweeper.store.tracking import Tracker
from sweeper.sweep import Say, SweepResult, run_sweep, sweep_key, validate

EVERY_CELL_RUN = "tags.cell_key != ''"


def _compose(overrides: list[str]) -> DictConfig:
    return compose(config_name="config", overrides=list(overrides))


class ToySweep:
    """The toy sweep of the module docstring, run as the command line runs it."""

    def __init__(self, work: Path, cells: int, horizon: int) -> None:
        self.work, self.uris = work, []
        self.base = ["task=toy", f"horizon={horizon}", f"seeds={cells}", "experiment.name=bench"]

    def overrides(self, uri: str) -> list[str]:
        return [*self.base, f"tracking.uri={uri}"]

    def run(self, uri: str) -> SweepResult:
        """The sweep into the store at ``uri``; it must end with every cell finished."""
        overrides = self.overrides(uri)
        result = run_sweep(_compose(overrides), _compose, overrides, out=io.StringIO())
        if not result.ok:
            raise RuntimeError(f"the toy sweep failed: {result.failed[:3]} {result.store_error}")
        return result

    def new(self) -> SweepResult:
        """The sweep into a new sqlite store."""
        self.uris.append(f"sqlite:///{self.work}/sweep{len(self.uris)}.db")
        return self.run(self.uris[-1])


def dispatch(sweep: ToySweep, cells: Grid, cfg: DictConfig, repeats: int) -> dict[str, Timing]:
    """The whole sweep (into new stores) and Ray alone, alternating; ``driver``: the
    sweeps' own time from the first dispatch to the last record."""

    def ray_only() -> int:
        return sum(event.kind == "finished" for event in launch(cells, cfg.launcher))

    ray_only()  # the worker pool started
    timings = interleaved({"sweep": sweep.new, "ray": ray_only}, repeats)
    timings["driver"] = Timing(walls=[result.dispatch_s for result in timings["sweep"].values])
    return timings


def resume(sweep: ToySweep, repeats: int) -> dict[str, Timing]:
    """The first sweep's command again (every cell skipped); then its finished cells found
    by the resume index and by a search of every cell run, alternating."""
    again = measure(lambda: sweep.run(sweep.uris[0]), repeats)
    tracker = Tracker(sweep.uris[0], "bench")
    ways = {"index": lambda: read_index(tracker), "every run": lambda: tracker.runs(EVERY_CELL_RUN)}
    return {"command": again, **interleaved(ways, repeats)}


def recording(variants: dict[str, list[str]], cells: Grid, repeats: int) -> dict[str, Timing]:
    """The outcomes of ``cells`` recorded under each variant's overrides, each repeat into a
    new experiment, the variants alternating; timed from the first cell handed to the
    recorder to the store's sweep closed (its table consolidated, its parent run ended)."""
    outcomes = [execute(cell.function, cell.config) for cell in cells]
    timings = {name: Timing() for name in variants}
    for repeat in range(repeats):
        for name, overrides in variants.items():
            cfg = _compose([*overrides, f"experiment.name=record-{name}-{repeat}"])
            with begun(cfg, cells) as store:
                timings[name].add(lambda store=store: record(store, cells, outcomes))
    return timings


@contextmanager
def begun(cfg: DictConfig, cells: Grid) -> Iterator[SweepStore]:
    """The store of ``cfg`` open and its sweep begun, as the driver has it before Ray."""
    say = Say(io.StringIO())
    task = task_of(cfg)
    with SweepStore.open(
        cfg.tracking.uri, cfg.experiment.name, task, None, "bench", 300, say
    ) as store:
        store.done(cells)
        store.prepare(cfg, writes=True)
        config = OmegaConf.to_yaml(cfg)
        store.begin(sweep_key(cells.keys), config, "", cells, rerun=False)
        yield store


def record(store: SweepStore, cells: Grid, outcomes: list[Outcome]) -> None:
    """Record every outcome as the driver does (sweeper/sweep.py, ``_drive``), then close."""
    progress = Progress(len(cells), io.StringIO())
    recorder = store.recorder(progress)
    for cell, outcome in zip(cells, outcomes, strict=True):
        recorder.add(cell, outcome)
        if recorder.due():
            recorder.flush()
    recorder.drain()
    recorder.close()
    summary = {"cells": len(cells)}
    store.close(summary, {}, failed=False, status=None, rerun_ended=True, say=progress)


def server_recording(
    work: Path, base: list[str], cells: Grid, repeats: int
) -> dict[str, Timing] | None:
    """:func:`recording` into an ``mlflow server`` (sqlite behind it) with 1 and 4 writers;
    None when the server does not start."""
    try:
        with mlflow_server(f"sqlite:///{work}/server.db", work / "server-artifacts") as uri:
            variants = {
                f"{n} writer{'s' if n > 1 else ''}": [
                    *base, f"tracking.uri={uri}", f"tracking.log_threads={n}",
                ]
                for n in (1, 4)
            }  # fmt: skip
            return recording(variants, cells, repeats)
    except ServerError as err:
        print(f"no server figures: {err}", flush=True)
        return None


class Estimate(NamedTuple):
    """An experiment's expected wall time here, from a sample of its cells (or why not)."""

    name: str
    cells: int = 0
    sample: Timing | None = None
    wall_s: float = 0.0
    share: float = 0.0  # of the orchestration overhead in the wall time
    reason: str = ""


def estimates(names: list[str], sample: int, overhead_s: float, cpus: float) -> list[Estimate]:
    """Every experiment's :class:`Estimate`: ``sample`` of its cells run here."""
    rows = []
    for name in names:
        overrides = [f"+exp={name}"]
        try:
            cells = expand(_compose(overrides), _compose, overrides)
            chosen = sorted(cells, key=lambda c: c.key)[:sample]
            validate(chosen)
        except Exception as err:  # a tuner, an algorithm or a data set that is missing
            rows.append(Estimate(name, reason=str(err).splitlines()[0][:160]))
            continue
        timing = Timing()
        for cell in chosen:
            timing.add(lambda cell=cell: execute(cell.function, cell.config))
            if timing.value.status != "FINISHED":
                raise RuntimeError(f"{name}: {cell.label} failed: {timing.value.error}")
        overhead = len(cells) * overhead_s
        wall = len(cells) * statistics.fmean(timing.walls) / cpus + overhead
        rows.append(Estimate(name, len(cells), timing, wall, overhead / wall))
        print(name, len(cells), f"{statistics.fmean(timing.walls):.2f} s", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--horizon", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--record-cells", type=int, default=200, help="cells recorded alone")
    parser.add_argument("--sample", type=int, default=8, help="cells timed per experiment")
    parser.add_argument("--experiments", nargs="*", default=None, help="default: all")
    parser.add_argument("--out", default="bench/results/orchestration.md")
    args = parser.parse_args()
    bench = Bench(libraries=("ray", "mlflow", "sqlalchemy"), busy=os.cpu_count() or 1)
    with (
        tempfile.TemporaryDirectory(prefix="bench-orchestration-") as tmp,
        initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"),
    ):
        work = Path(tmp)
        sweep = ToySweep(work, args.cells, args.horizon)
        cfg = _compose(sweep.base)
        cells = expand(cfg, _compose, sweep.base)
        init_ray(cfg.launcher)
        cpus = ray.cluster_resources()["CPU"]
        timings = {**dispatch(sweep, cells, cfg, args.repeats), **resume(sweep, args.repeats)}
        few = ToySweep(work, args.record_cells, args.horizon)
        few_cells = expand(_compose(few.base), _compose, few.base)
        local = few.overrides(f"sqlite:///{work}/record.db")
        variants = {"direct": local, "api": [*local, "tracking.direct_writes=false"]}
        stored = recording(variants, few_cells, args.repeats)
        served = server_recording(work, few.base, few_cells, args.repeats)
        overhead_s = timings["driver"].wall / len(cells)
        names = args.experiments or group_options("exp")
        rows = estimates(names, args.sample, overhead_s, cpus)
    lines = [
        *design(cfg, len(cells), cpus, timings),
        *recording_text(stored, served, len(few_cells)),
        *estimates_text(rows, args.sample, overhead_s, cpus),
    ]
    bench.write(args.out, "# Orchestration overhead", lines)
    if not args.experiments:  # every experiment measured: the dry run's prices
        write_costs(rows, overhead_s, cpus, f"{bench.started:%Y-%m-%d %H:%M} UTC at {bench.commit}")
    print("\n".join(lines))


def write_costs(rows: list[Estimate], overhead_s: float, cpus: float, measured: str) -> None:
    """The measured cost of each experiment's cells, shipped with the package: a dry run
    prices a sweep by it when the store holds no finished run (sweeper/dryrun.py)."""
    experiments = {
        row.name: {
            "cells": row.cells,
            "mean_s": round(statistics.fmean(row.sample.walls), 4),
            "sampled": len(row.sample.walls),
        }
        for row in rows
        if row.sample is not None
    }
    costs = {
        "by": "bench/bench_orchestration.py",
        "measured": measured,
        "cpus": int(cpus),
        "overhead_s": round(overhead_s, 5),
        "experiments": experiments,
    }
    COSTS.write_text(json.dumps(costs, indent=1, sort_keys=True) + "\n")


def design(cfg: DictConfig, n: int, cpus: float, timings: dict[str, Timing]) -> list[str]:
    """The driver's design as configured, and the sweep's figures (steps 1-3)."""
    tracking, index, every = cfg.tracking, timings["index"], timings["every run"]
    driver, ray_alone, command = timings["driver"], timings["ray"], timings["command"]
    per_cell = driver.wall / n
    return [
        f"The driver dispatches the cells on Ray ({cpus:g} CPUs here) and hands each outcome "
        f"to the store's recorder, which writes them in batches of up to "
        f"{tracking.batch_size} cells (or what has arrived after {tracking.batch_s} s: "
        "`tracking.batch_size`, `tracking.batch_s`) in a writer thread while the driver goes "
        "on: the batch's runs in one transaction straight into the store's database, then "
        "its rows as a part of the sweep's table (sweeper/store/record.py).",
        "",
        f"Sweep: {n} toy cells (`sweeper.toy.toy_cell`, microseconds of work, a "
        f"{cfg.horizon}-round curve kept as 500 points, one `cell.npz`), embedded Ray, a new "
        f"sqlite store each time; every figure is the median of {len(driver.walls)} "
        f"run{'s' if len(driver.walls) != 1 else ''}.",
        "",
        f"**Orchestration overhead per cell: {per_cell * 1e3:.1f} ms** (the driver's time "
        f"from the first dispatch to the last record over {n} cells: "
        f"{n / driver.wall:.0f} cells/s). The experiments' expected times below add it to "
        "every cell as if it never overlapped the cells' work.",
        "",
        "| what | result |",
        "|---|---|",
        f"| the sweep (`run_sweep`): Ray, the batched records, the table | **{n / driver.wall:.0f} "
        f"cells/s** ({per_cell * 1e3:.1f} ms per cell; the whole call, the new store's "
        f"creation included: {timings['sweep'].wall:.1f} s) |",
        f"| Ray launcher alone (no store) | {n / ray_alone.wall:.0f} cells/s "
        f"({ray_alone.wall / n * 1e3:.1f} ms per cell) |",
        f"| the sweep over Ray alone, per cell | {ratio(driver, ray_alone)} |",
        f"| resume: the same command again, {n} cells skipped (the whole call) | "
        f"{command.wall:.2f} s, of which the resume check "
        f"{statistics.median(r.resume_s for r in command.values):.2f} s |",
        f"| finding the finished cells: the resume index (tables, runs after their mark) | "
        f"{index.wall:.3f} s ({index.value.tables} table(s), {index.value.searched_runs} "
        "runs searched) |",
        f"| finding them by a search of every cell run | {every.wall:.3f} s "
        f"({len(every.value)} runs); over the index: {ratio(every, index)} |",
        "",
    ]


def recording_text(
    stored: dict[str, Timing], served: dict[str, Timing] | None, n: int
) -> list[str]:
    """Steps 4 and 5: recording alone, per cell."""

    def row(label: str, timing: Timing) -> str:
        return (
            f"| {label} | {timing.wall / n * 1e3:.1f} ms ({n / timing.wall:.0f} cells/s) | "
            f"{timing.cpu / n * 1e3:.1f} ms |"
        )

    lines = [
        f"## Recording alone ({n} cells' outcomes, the store's recorder)",
        "",
        "| how | wall per cell | this process's CPU per cell |",
        "|---|---|---|",
        row("straight into the sqlite database (the default)", stored["direct"]),
        row("through MLflow's API into sqlite (`tracking.direct_writes=false`)", stored["api"]),
    ]
    if served is not None:
        lines += [row(f"through MLflow's API into an `mlflow server`, {k}", t)
                  for k, t in served.items()]  # fmt: skip
    lines += [
        "",
        f"Through MLflow's API over straight into the database: "
        f"{ratio(stored['api'], stored['direct'])}.",
    ]
    if served is not None:
        lines.append(
            f"Into the server, 1 writer over 4: {ratio(served['1 writer'], served['4 writers'])}; "
            "each of MLflow's calls is a round trip, so parallel writers pay off."
        )
    return [*lines, ""]


def estimates_text(rows: list[Estimate], sample: int, overhead_s: float, cpus: float) -> list[str]:
    lines = [
        "## Experiments at full size on this machine",
        "",
        f"Each experiment's mean cell time is measured on {sample} of its cells (the same "
        "choice every run), one at a time in this process; the expected wall time is cells x "
        f"mean cell time / {cpus:g} CPUs + cells x {overhead_s * 1e3:.1f} ms (the "
        "orchestration overhead per cell, above).",
        "",
        "| experiment | cells | sampled cells: mean s (min-max) | expected wall time "
        "| orchestration's share |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        if row.sample is None:
            lines.append(f"| {row.name} | ? | not measurable here: {row.reason} | ? | ? |")
            continue
        walls = row.sample.walls
        lines.append(
            f"| {row.name} | {row.cells} | {statistics.fmean(walls):.2f} ({min(walls):.2f}-"
            f"{max(walls):.2f}) | {_duration(row.wall_s)} | {row.share:.1%} |"
        )
    return lines


def _duration(seconds: float) -> str:
    minutes = seconds / 60
    return f"{minutes / 60:.1f} h" if minutes >= 90 else f"{minutes:.0f} min"


if __name__ == "__main__":
    main()
