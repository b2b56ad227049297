"""Seeds until decided on `main`'s published cells, replayed (docs/seeds.md).

A cell is a pure function of its config, so the cells a seed budget would run on ``main``
are cells the published 20-seed sweep already ran (docs/results/main/cells.csv, the same
keys). This replays the driver's rule (sweeper/adaptive.py, unchanged) over them: groups
take their seeds in steps as the real sweep would, each cell's value read from the saved
table instead of computed. It reports the cells it would run, their CPU time beside the
fixed sweep's (the sum of the cells' own runtimes: the wall time of a sweep on a busy
cluster), and every comparison's decision beside the published paired test (a paired t
interval at 20 seeds, docs/results/main/tables/paired.csv). It does not measure a live
sweep's wall time: run ``python -m sweeper +exp=main 'seeds={until: decided, min: 10,
max: 20}'`` for that.

    python bench/bench_seeds_main.py [--out bench/results/seeds_main.md]

No timing of its own: the CPU times are the published cells' (their ``wall_s``); the header
(bench/harness.py) says at which commit the rule was replayed.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
from harness import Bench

from sweeper.adaptive import AdaptiveSeeds
from sweeper.seeds import SeedBudget
from sweeper.task import Task

ROOT = Path(__file__).resolve().parent.parent
CELLS = ROOT / "docs" / "results" / "main" / "cells.csv"
OUT = ROOT / "bench" / "results" / "seeds_main.md"
GROUPS = ("algorithm", "dataset")
BUDGET = SeedBudget(min=10, max=20, step=5, alpha=0.05, precision=0.02)
TASK = Task("bandit_tuning", compare="tuner", reference="cdt", lead="final_regret",
            metrics={})  # fmt: skip


def _cells(table: pd.DataFrame) -> list[SimpleNamespace]:
    """Stand-ins for the sweep's cells: the attributes the adaptive rule reads."""
    out = []
    for row in table.itertuples():
        tags = {g: getattr(row, g) for g in (*GROUPS, "tuner")}
        config = {**tags, "seed": int(row.seed)}
        setting = f"{row.algorithm}/{row.tuner}/{row.dataset}"
        out.append(SimpleNamespace(key=row.cell_key, tags=tags, config=config, setting=setting))
    return out


def replay(table: pd.DataFrame, budget: SeedBudget = BUDGET) -> tuple[AdaptiveSeeds, set[str]]:
    """Run the rule as the driver does, with values read instead of computed: take what the
    rule hands out, give each its value, until it hands out nothing more."""
    cells = _cells(table)
    value = dict(zip(table["cell_key"], table["final_regret"], strict=True))
    rule = AdaptiveSeeds(cells, budget, TASK, finished={})
    ran: set[str] = set()
    while batch := rule.take(64):
        for cell in batch:
            ran.add(cell.key)
            rule.observe(cell, value[cell.key])
    return rule, ran


def _published(path: Path) -> dict[tuple[str, str, str], str]:
    """(algorithm, dataset, tuner) -> the 20-seed paired t interval's verdict."""
    paired = pd.read_csv(path)
    verdict = {}
    for r in paired.itertuples():
        state = "better" if r.ci95_high < 0 else "worse" if r.ci95_low > 0 else "open"
        verdict[(r.Algorithm, r.Dataset, r.Tuner)] = state
    return verdict


def _cells_at(table: pd.DataFrame, first: int) -> int:
    """How many cells the rule runs with its first look at ``first`` seeds."""
    budget = SeedBudget(first, BUDGET.max, BUDGET.step, BUDGET.alpha, BUDGET.precision)
    return len(replay(table, budget)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    bench = Bench(libraries=("numpy", "pandas"))
    table = pd.read_csv(CELLS)
    table = table[table["status"] == "FINISHED"]
    rule, ran = replay(table)
    decided = pd.DataFrame(rule.table())
    names = {"linucb": "LinUCB", "lints": "LinTS", "ucb_glm": "UCB-GLM", "glm_tsl": "GLM-TSL",
             "laplace_ts": "Laplace-TS", "gloc": "GLOC", "sgd_ts": "SGD-TS",
             "simulation": "Simulation", "movielens": "Movielens", "theory": "Theory",
             "op": "OP", "tl": "TL/Syndicated", "syndicated": "TL/Syndicated"}  # fmt: skip
    published = _published(CELLS.parent / "tables" / "paired.csv")
    rows, agree, opposite, missed = [], 0, 0, 0
    for d in decided.itertuples():
        algorithm, dataset = d.group.split("/")
        key = (names[algorithm], names[dataset], names[d.option])
        fixed = published.get(key, "?")
        if fixed in ("better", "worse"):
            agree += d.state == fixed
            opposite += d.state in ("better", "worse") and d.state != fixed
            missed += d.state not in ("better", "worse")
        rows.append(f"| {d.group} | {d.option} | {d.seeds} | {d.mean_difference:.1f} | "
                    f"[{d.low:.1f}, {d.high:.1f}] | {d.state} | {fixed} |")  # fmt: skip
    ran_cells = table[table["cell_key"].isin(ran)]
    cpu, cpu_fixed = ran_cells["wall_s"].sum(), table["wall_s"].sum()
    significant = sum(v in ("better", "worse") for v in published.values())
    lines = [
        f"Budget: min {BUDGET.min}, max {BUDGET.max}, step {BUDGET.step}, alpha "
        f"{BUDGET.alpha} per comparison, precision {BUDGET.precision}.",
        "",
        f"- Cells: {len(ran)} of {len(table)} ({len(ran) / len(table):.0%}); their CPU time "
        f"{cpu / 60:.0f} min of the fixed sweep's {cpu_fixed / 60:.0f} min "
        f"({cpu / cpu_fixed:.0%}).",
        f"- Of the {significant} comparisons the published 20-seed paired t interval finds "
        f"significant at 5%: {agree} decided the same way, {opposite} the opposite way, "
        f"{missed} left undecided or equivalent at {BUDGET.max} seeds.",
        f"- States: {decided['state'].value_counts().to_dict()}.",
        f"- With the issue's min of 5 (under skewed noise the error rate is then above alpha: "
        f"bench/results/seeds.md): {_cells_at(table, 5)} of {len(table)} cells.",
        "",
        "| group | tuner | seeds | mean difference to CDT | interval | state "
        "| 20-seed t interval |",
        "|---|---|---|---|---|---|---|",
        *rows,
    ]
    bench.write(
        args.out, "# Seeds until decided on `main`, replayed from its published cells", lines
    )
    print("\n".join(lines[:8]))


if __name__ == "__main__":
    main()
