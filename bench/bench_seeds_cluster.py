"""Seeds until decided on a cluster: the wall time of `main` at 2 to 128 CPUs, simulated
from its published cells (docs/seeds.md).

A cell is a pure function of its config, and `main`'s published 20-seed sweep ran every
cell a seed budget can ask for (docs/results/main/cells.csv, with each cell's own wall
time). This drives the driver's rule (sweeper/adaptive.py, unchanged) and a fixed grid
through a model of the launcher (sweeper/launch.py): at most 64 cells handed to Ray at
once, Ray starting them first in, first out as CPUs free, and, when the rule has nothing
to hand out and CPUs would idle, the cells it runs ahead (``seeds.speculate``). Time
advances cell by cell with the published durations, so the numbers are what those cells
would cost on an idle cluster of that many CPUs, not a measurement of a live sweep.

    python bench/bench_seeds_cluster.py   # writes bench/results/seeds_cluster.md
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
from pathlib import Path

import pandas as pd
from bench_seeds_main import BUDGET, CELLS, TASK, _cells
from harness import Bench

from sweeper.adaptive import AdaptiveSeeds
from sweeper.launch import Fixed
from sweeper.seeds import SeedBudget

OUT = Path(__file__).resolve().parent / "results" / "seeds_cluster.md"
CPUS = (2, 8, 32, 128)
MAX_IN_FLIGHT = 64  # launcher.max_in_flight's default


@dataclasses.dataclass
class Run:
    """One simulated sweep: its wall time, the cells it ran and their CPU time."""

    wall_s: float
    cells: int
    cpu_s: float

    def busy(self, cpus: int) -> float:
        """The share of the CPUs' time spent in cells."""
        return self.cpu_s / (self.wall_s * cpus)


def simulate(source, table: pd.DataFrame, cpus: int, observe: bool) -> Run:
    """Drive ``source`` (a :class:`Fixed` grid or :class:`AdaptiveSeeds`) as the Ray
    launcher does, with each cell lasting its published wall time."""
    value = dict(zip(table["cell_key"], table["final_regret"], strict=True))
    duration = dict(zip(table["cell_key"], table["wall_s"], strict=True))
    queued, running, now, order = [], [], 0.0, 0  # running: heap of (end, order, cell)
    ran, cpu_s = 0, 0.0
    while True:
        free = MAX_IN_FLIGHT - len(queued) - len(running)
        cells = source.take(free)
        if len(cells) < free:
            cells += source.speculate(cpus - len(queued) - len(running) - len(cells))
        queued += cells
        while queued and len(running) < cpus:
            cell = queued.pop(0)
            heapq.heappush(running, (now + duration[cell.key], order, cell))
            order += 1
        if not running:
            return Run(now, ran, cpu_s)
        now, _, cell = heapq.heappop(running)
        ran, cpu_s = ran + 1, cpu_s + duration[cell.key]
        if observe:
            source.observe(cell, value[cell.key])


def runs(table: pd.DataFrame, cpus: int) -> dict[str, Run]:
    """The fixed 20-seed grid, the budget without and with running ahead, at ``cpus``."""
    cells = _cells(table)
    plain = dataclasses.replace(BUDGET, speculate=False)
    ahead = dataclasses.replace(BUDGET, speculate=True)
    return {
        "fixed, 20 seeds": simulate(Fixed(cells), table, cpus, observe=False),
        "budget": simulate(AdaptiveSeeds(cells, plain, TASK, {}), table, cpus, True),
        "budget, running ahead": simulate(AdaptiveSeeds(cells, ahead, TASK, {}), table, cpus, True),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    bench = Bench(libraries=("numpy", "pandas"))
    table = pd.read_csv(CELLS)
    table = table[table["status"] == "FINISHED"]
    budget: SeedBudget = BUDGET
    rows = []
    for cpus in CPUS:
        measured = runs(table, cpus)
        fixed = measured["fixed, 20 seeds"]
        for name, run in measured.items():
            rows.append(
                f"| {cpus} | {name} | {run.cells} | {run.cpu_s / 60:.0f} | "
                f"{run.wall_s / 60:.1f} | {run.wall_s / fixed.wall_s:.2f} | {run.busy(cpus):.0%} |"
            )
    lines = [
        f"Budget: min {budget.min}, max {budget.max}, "
        f"step {budget.step}, alpha {budget.alpha}, precision {budget.precision}; "
        f"{len(table)} cells at 20 seeds, each lasting its published wall time "
        "(docs/results/main/cells.csv, measured on a 2-core machine); at most "
        f"{MAX_IN_FLIGHT} cells handed to Ray at once. A model of the launcher, not a live "
        "sweep: see the module docstring.",
        "",
        "| CPUs | sweep | cells run | CPU min | wall min | wall / fixed | CPUs busy |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ]
    title = "# Seeds until decided on a cluster: `main` simulated from its published cells"
    bench.write(args.out, title, lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
