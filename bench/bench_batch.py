"""Seeds in one array program (issue #40): what a batch of seeds saves, and that it changes
no number.

    .venv/bin/python bench/bench_batch.py                 # every part, the papers' sizes
    .venv/bin/python bench/bench_batch.py --part cells --seeds 20
    .venv/bin/python bench/bench_batch.py --part main     # the whole main grid, twice

Parts (each rewrites its own section of bench/results/batch.md, under the header of the
run that measured it; run them on an idle machine):

- ``cells``: every algorithm with Theory, OP, TL (p = 1) or Syndicated (p = 2) and CDT on
  the simulation and MovieLens at main's settings (T = 14000): the CPU time per cell of the
  ``--seeds`` cells run one at a time (``run_cell``) and as batches of S = 1, 5 and
  ``--seeds`` seeds (``run_cell.batch``), interleaved combination by combination so a change
  of load hits both; the ratio is batched / alone over the same seeds. Beside it the floor:
  the environment alone (observe and reward every round), one seed at a time and batched.
  Every batched cell is compared with the same cell alone: arms (through the curves), every
  curve value, the trace and the summary must be equal, and the published main cells
  (docs/results/main/cells.csv) must have the same final regret and cumulative reward.
- ``equality``: every cell group of ``ablation`` and ``candidates`` on ``--equality-seeds``
  seeds at T = 14000, batched against alone (the test, tests/test_batch.py, does it at a
  small horizon).
- ``main``: ``python -m sweeper +exp=main`` as a command, batched (the default) and with
  ``launcher.batch=1``, each into a new sqlite store, one after the other; every cell of
  both stores against the published cells.csv.
- ``cluster``: a model of the launcher on 256 CPUs (as bench_seeds_cluster.py models seeds
  until decided): main's cells handed out by the launcher's own ``Batcher`` and
  ``batch_size``, a task of one cell lasting its one-at-a-time CPU time (the launcher runs
  it with ``run_cell``) and a batch its cells' batched CPU times at its size (the ``cells``
  part's, saved in bench/results/batch.json); the share of CPU time busy and the wall time,
  against one cell per task and fixed batches of 20.
- ``driver``: a toy sweep of ``--driver-cells`` cells (``python -m sweeper task=toy``),
  batched (``cell=sweeper.toy.batched_toy_cell``) against one cell per task: the driver's
  peak resident memory and its recording rate (cells/s), alternating.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from harness import Bench, measure, write_sections
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "batch.md"
PUBLISHED = ROOT / "docs" / "results" / "main" / "cells.csv"
ALGORITHMS = ("linucb", "lints", "ucb_glm", "glm_tsl", "laplace_ts", "gloc", "sgd_ts")
TWO_HYPERPARAMETERS = ("gloc", "sgd_ts")
DATASETS = ("simulation", "movielens")
SIZES = (1, 5)
PARTS = ("cells", "equality", "main", "cluster", "driver", "notes")
TITLE = [
    "# Seeds in one array program: time per cell, and the same numbers",
    "",
    "Written by `bench/bench_batch.py` (issue #40); each part rewrites only its own section, "
    "under the header of the run that measured it. CPU time is the process's: on a shared "
    "machine it estimates the idle wall time better than the wall clock does.",
    "",
]


# --- cells: time per cell and equality at T = 14000 ---------------------------------------
def compose_cell(overrides: Sequence[str]) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir

    from sweeper.grid import cell_config
    from sweeper.paths import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return cell_config(compose(config_name="config", overrides=list(overrides)))


def main_config(algorithm: str, tuner: str, dataset: str, horizon: int) -> dict[str, Any]:
    """A cell of main (the experiment's space and horizon) for seed 0."""
    return compose_cell(
        [
            f"algorithm={algorithm}",
            f"tuner={tuner}",
            f"dataset={dataset}",
            f"horizon={horizon}",
            "space.interval=[0.1,5.0]",
            "space.candidates=[0.1,1.0,2.0,3.0,4.0,5.0]",
        ]
    )


def sizes_of(seeds: int) -> tuple[int, ...]:
    """The batch sizes measured: 1, 5 and ``seeds`` (those not above ``seeds``)."""
    return tuple(sorted({s for s in (*SIZES, seeds) if s <= seeds}))


def tuners_of(algorithm: str) -> tuple[str, ...]:
    return ("theory", "op", "syndicated" if algorithm in TWO_HYPERPARAMETERS else "tl", "cdt")


def cpu(call: Callable[[], Any]) -> tuple[float, Any]:
    """CPU seconds of one call of ``call`` (the harness's timing), and what it returned."""
    timing = measure(call)
    return timing.cpu, timing.value


def differences(alone: dict[str, Any], batched: dict[str, Any]) -> tuple[int, float]:
    """How many values of two results of one cell differ (the runtime aside), and by how
    much at most."""
    count, largest = 0, 0.0
    pairs = [
        (np.asarray(alone[p][k]), np.asarray(batched[p][k]))
        for p in ("curves", "trace")
        for k in alone[p]
        if k != "names"
    ]
    pairs += [
        (np.asarray(v), np.asarray(batched["summary"][k]))
        for k, v in alone["summary"].items()
        if k != "runtime_s"
    ]
    for a, b in pairs:
        if a.shape != b.shape:
            count += 1
            largest = float("inf")
            continue
        unequal = ~((a == b) | (np.isnan(a) & np.isnan(b)))
        if unequal.any():
            count += int(unequal.sum())
            largest = max(largest, float(np.nanmax(np.abs(a - b)[unequal])))
    return count, largest


def environment_only(config: dict[str, Any], seeds: int, batched: bool) -> float:
    """CPU seconds per cell of the environment alone: observe and pull arm 0 every round."""
    from sweeper_tasks.bandit_tuning.cell import prepare
    from sweeper_tasks.bandit_tuning.environments.batch import BlockBatch

    horizon = int(config["horizon"])
    environments = [prepare({**config, "seed": s})[2] for s in range(seeds)]

    def alone() -> None:
        for environment in environments:
            for t in range(horizon):
                environment.observe(t)
                environment.reward(0)

    def together() -> None:
        batch, arms = BlockBatch(environments), np.zeros(seeds, dtype=int)
        for t in range(horizon):
            batch.observe(t)
            batch.reward(arms)

    with threadpool_limits(limits=1, user_api="blas"):
        seconds, _ = cpu(together if batched else alone)
    return seconds / seeds


def time_cells(seeds: int, horizon: int, log=print) -> list[dict[str, Any]]:
    """The ``cells`` part: one row per (dataset, algorithm, tuner)."""
    from sweeper_tasks.bandit_tuning.cell import run_cell, run_cells

    published = pd.read_csv(PUBLISHED).set_index(["algorithm", "tuner", "dataset", "seed"])
    rows = []
    for dataset in DATASETS:
        for algorithm in ALGORITHMS:
            for tuner in tuners_of(algorithm):
                base = main_config(algorithm, tuner, dataset, horizon)
                configs = [{**base, "seed": s} for s in range(seeds)]
                run_cell({**base, "horizon": 50})  # imports and data loaded before timing
                row: dict[str, Any] = {"dataset": dataset, "algorithm": algorithm, "tuner": tuner}
                alone_cpu, alone = [], []
                for size in sizes_of(seeds):  # alone and batched interleaved
                    batch_cpu, together = cpu(partial(run_cells, configs[:size]))
                    row[f"batch{size}"] = batch_cpu / size
                    while len(alone) < size:
                        seconds, result = cpu(partial(run_cell, configs[len(alone)]))
                        alone_cpu.append(seconds)
                        alone.append(result)
                    row[f"alone{size}"] = float(np.mean(alone_cpu[:size]))
                row["unequal"], row["largest"] = 0, 0.0
                for a, b in zip(alone, together, strict=True):
                    count, largest = differences(a, b)
                    row["unequal"] += count
                    row["largest"] = max(row["largest"], largest)
                row["published_unequal"] = sum(
                    _published_differs(published, algorithm, tuner, dataset, s, result)
                    for s, result in enumerate(together)
                ) if horizon == 14000 else None  # fmt: skip
                rows.append(row)
                log(
                    f"{dataset} {algorithm} {tuner}: alone {row[f'alone{seeds}']:.3f} s, "
                    f"S={seeds} {row[f'batch{seeds}']:.3f} s per cell, unequal {row['unequal']}"
                )
    return rows


def _published_differs(published, algorithm, tuner, dataset, seed, result) -> bool:
    key = (algorithm, tuner, dataset, seed)
    if key not in published.index:
        return True
    row = published.loc[key]
    summary = result["summary"]
    return not (
        float(row["final_regret"]) == summary["final_regret"]
        and float(row["cumulative_reward"]) == summary["cumulative_reward"]
    )


def floors(seeds: int, horizon: int) -> list[dict[str, Any]]:
    """The environment alone, per dataset and reward model, one seed at a time and batched."""
    out = []
    for dataset in DATASETS:
        for algorithm in ("linucb", "ucb_glm"):  # linear and logistic rewards
            config = main_config(algorithm, "theory", dataset, horizon)
            alone = environment_only(config, seeds, batched=False)
            together = environment_only(config, seeds, batched=True)
            model = "linear" if algorithm == "linucb" else "logistic"
            out.append({"dataset": dataset, "model": model, "alone": alone, "batched": together})
    return out


def cells_section(
    rows: list[dict[str, Any]], floor: list[dict[str, Any]], seeds: int, horizon: int
) -> list[str]:
    sizes = sizes_of(seeds)
    lines = [
        f"CPU seconds per cell at T = {horizon}, main's settings; "
        f"'alone' is the mean over the same seeds of `run_cell` (seeds 0..S-1), 'S = n' a batch "
        f"of those n seeds (`run_cell.batch`); ratio = batched / alone. Target: at most "
        f"0.5x at S = 20.",
        "",
        "| dataset | algorithm | tuner | alone | "
        + " | ".join(f"S = {s}" for s in sizes)
        + " | ratio at S = "
        + " | ratio at S = ".join(str(s) for s in sizes)
        + " | cells unequal to alone | published cells unequal |",
        "|---" * (4 + 2 * len(sizes) + 2) + "|",
    ]
    for row in rows:
        ratios = [row[f"batch{s}"] / row[f"alone{s}"] for s in sizes]
        target = " (over 0.5)" if ratios[-1] > 0.5 else ""
        published = "-" if row["published_unequal"] is None else str(row["published_unequal"])
        name = f"| {row['dataset']} | {row['algorithm']} | {row['tuner']} |"
        lines.append(
            f"{name} {row[f'alone{seeds}']:.3f} | "
            + " | ".join(f"{row[f'batch{s}']:.3f}" for s in sizes)
            + " | "
            + " | ".join(f"{r:.2f}x" for r in ratios[:-1])
            + f" | **{ratios[-1]:.2f}x**{target} | {row['unequal']} | {published} |"
        )
    over = [r for r in rows if r[f"batch{seeds}"] / r[f"alone{seeds}"] > 0.5]
    unequal = sum(r["unequal"] for r in rows)
    lines += [
        "",
        f"{len(rows) - len(over)} of {len(rows)} combinations at or under 0.5x at S = {seeds}; "
        f"{unequal} values of {len(rows) * seeds} batched cells differ from the cell alone"
        + (f" (largest difference {max(r['largest'] for r in rows):g})" if unequal else "")
        + ".",
        "",
        f"The floor: the environment alone (observe every round and pull arm 0), CPU seconds "
        f"per cell over {seeds} seeds, one seed at a time and as one batch.",
        "",
        "| dataset | reward model | alone | batched |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {f['dataset']} | {f['model']} | {f['alone']:.3f} | {f['batched']:.3f} |" for f in floor
    ]
    return lines


# --- equality: ablation and candidates at T = 14000 -----------------------------------------
def equality(experiments: Sequence[str], seeds: int, horizon: int, log=print) -> list[str]:
    from hydra import compose, initialize_config_dir

    from sweeper.cells import canonical_json
    from sweeper.grid import expand
    from sweeper.paths import CONF_DIR
    from sweeper_tasks.bandit_tuning.cell import run_cell, run_cells

    lines = [
        f"Every group of cells (configs equal but for the seed) at T = {horizon} on seeds "
        f"0..{seeds - 1}, batched against alone; a value counts as unequal when it is not "
        "the same float.",
        "",
        "| experiment | groups | cells | values unequal | largest difference |",
        "|---|---|---|---|---|",
    ]
    for experiment in experiments:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):

            def composer(overrides):
                return compose(config_name="config", overrides=list(overrides))

            overrides = [f"+exp={experiment}", f"horizon={horizon}", f"seeds={seeds}"]
            grid = expand(composer(overrides), composer, overrides)
            grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for i in range(len(grid)):
                config = grid[i].config
                rest = canonical_json({k: v for k, v in config.items() if k != "seed"})
                grouped[rest].append(config)
        unequal, largest, cells = 0, 0.0, 0
        for configs in grouped.values():
            for alone, batched in zip(map(run_cell, configs), run_cells(configs), strict=True):
                count, most = differences(alone, batched)
                unequal, largest, cells = unequal + count, max(largest, most), cells + 1
        log(f"{experiment}: {cells} cells, {unequal} values unequal")
        lines.append(f"| {experiment} | {len(grouped)} | {cells} | {unequal} | {largest:g} |")
    return lines


# --- main: the whole grid as a command ------------------------------------------------------
def sweep_command(work: Path, name: str, extra: Sequence[str]) -> tuple[float, str, str]:
    """``python -m sweeper +exp=main`` into a new store; its wall time, store URI, output."""
    uri = f"sqlite:///{work}/{name}.db"
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    command = [sys.executable, "-m", "sweeper", "+exp=main", f"tracking.uri={uri}", *extra]
    timing = measure(
        lambda: subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    )
    done, wall = timing.value, timing.wall
    if done.returncode != 0:
        raise RuntimeError(f"the sweep {name} failed: {done.stdout[-2000:]} {done.stderr[-2000:]}")
    return wall, uri, done.stdout


METRICS = ("final_regret", "cumulative_reward")


def main_cells(uri: str) -> pd.DataFrame:
    """main's cells in the store at ``uri``, by cell key."""
    from sweeper.report.load import load_experiment

    return load_experiment("main", uri).cells.set_index("cell_key")


def unequal(reference: pd.DataFrame, cells: pd.DataFrame) -> tuple[int, float]:
    """(cells of ``reference`` whose final regret or cumulative reward is not the same float
    in ``cells``, or missing there; the largest relative difference)."""
    joined = reference.merge(
        cells, left_index=True, right_index=True, how="left", suffixes=("", "_new")
    )
    differ = pd.Series(False, index=joined.index)
    largest = 0.0
    for metric in METRICS:
        gap = (joined[metric] - joined[f"{metric}_new"]).abs()
        differ |= gap.fillna(np.inf) != 0
        largest = max(largest, float((gap / joined[metric].abs()).max()))
    return int(differ.sum()), largest


def main_part(log=print) -> list[str]:
    rows, stores = [], {}
    published = pd.read_csv(PUBLISHED).set_index("cell_key")
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in (("batched", []), ("one-per-task", ["launcher.batch=1"])):
            wall, uri, out = sweep_command(Path(tmp), name, extra)
            stores[name] = cells = main_cells(uri)
            against = {
                dataset: unequal(published[published["dataset"] == dataset], cells)
                for dataset in DATASETS
            }
            rate = re.search(r"\(([\d.]+)s; ([\d.]+) cells/s\)", out)
            log(f"{name}: {wall:.0f} s, {len(cells)} cells, against cells.csv {against}")
            rows.append((name, wall, len(cells), against, rate.group(1) if rate else "?"))
        between, _ = unequal(stores["one-per-task"], stores["batched"])
    lines = [
        "`python -m sweeper +exp=main` (1120 cells, T = 14000, embedded Ray on every CPU), "
        "each into a new sqlite store, one after the other; every cell's final regret and "
        "cumulative reward against the published docs/results/main/cells.csv (a cell counts "
        "as unequal when either is not the same float; the largest difference is relative). "
        "Target: at most 4 minutes batched.",
        "",
        "| launcher | wall time of the command | the sweep's own time (s) | cells | "
        + " | ".join(f"{d} cells unequal to the published (largest)" for d in DATASETS)
        + " |",
        "|---|---|---|---|" + "---|" * len(DATASETS),
    ]
    for name, wall, cells, against, own in rows:
        label = "batched (default)" if name == "batched" else "`launcher.batch=1`"
        shown = " | ".join(f"{n} ({gap:.1e})" for n, gap in against.values())
        lines.append(
            f"| {label} | {wall / 60:.1f} min ({wall:.0f} s) | {own} | {cells} | {shown} |"
        )
    lines += [
        "",
        f"Batched / one cell per task: {rows[0][1] / rows[1][1]:.2f}x of the wall time. "
        f"Cells of the two runs unequal to each other: {between} of {rows[1][2]}.",
    ]
    return lines


# --- cluster: the launcher's batch size on 256 CPUs ------------------------------------------
def per_cell_cost(row: dict[str, Any], size: int, seeds: int) -> float:
    """CPU seconds per cell in a task of ``size`` cells. One cell runs alone (the launcher
    sends it to ``run_cell``, not to the batched form): the mean alone time. A batch: the
    measured points S = 1, 5, ``seeds`` of the batched form joined by the model a + b / S
    between neighbours (a per-cell floor plus a per-batch share), constant beyond ``seeds``."""
    if size == 1:
        return row[f"alone{seeds}"]
    points = [(s, row[f"batch{s}"]) for s in sizes_of(seeds)]
    size = min(size, seeds)
    for (s0, c0), (s1, c1) in zip(points, points[1:], strict=False):
        if s0 <= size <= s1:
            b = (c0 - c1) / (1 / s0 - 1 / s1)
            return c1 + b * (1 / size - 1 / s1)
    return points[-1][1]


def simulate(cells, cost: Callable[[Any, int], float], cpus: int, setting: int | None):
    """Hand out ``cells`` as the Ray launcher does (sweeper/launch.py's Batcher, batch_size
    and in_flight_cap, at most that many tasks queued), Ray starting tasks first in, first
    out as CPUs free; each batch lasts the sum of its cells' costs. Returns (wall, busy
    share, tasks, sizes)."""
    from sweeper.launch import Batcher, Fixed, batch_size, in_flight_cap

    batcher = Batcher(Fixed(cells))
    cap = in_flight_cap({"max_in_flight": None}, cpus)
    queued: list[float] = []  # durations of tasks submitted, not started
    running: list[float] = []  # end times
    now, busy, tasks, sizes = 0.0, 0.0, 0, []
    while True:
        while len(queued) + len(running) < cap:
            batch = batcher.take(batch_size(setting, batcher.pending(), cpus))
            if not batch:
                break
            duration = sum(cost(cell, len(batch)) for cell in batch)
            queued.append(duration)
            busy, tasks = busy + duration, tasks + 1
            sizes.append(len(batch))
        while queued and len(running) < cpus:
            heapq.heappush(running, now + queued.pop(0))
        if not running:
            break
        now = heapq.heappop(running)
    return now, busy / (now * cpus), tasks, sizes


def cluster(rows: list[dict[str, Any]], seeds: int, cpus: int) -> list[str]:
    from hydra import compose, initialize_config_dir

    from sweeper.grid import expand
    from sweeper.paths import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):

        def composer(overrides):
            return compose(config_name="config", overrides=list(overrides))

        grid = expand(composer(["+exp=main"]), composer, ["+exp=main"])
        cells = [grid[i] for i in range(len(grid))]
    measured = {(r["dataset"], r["algorithm"], r["tuner"]): r for r in rows}

    def cost(cell, size: int) -> float:
        row = measured[tuple(cell.config[g]["name"] for g in ("dataset", "algorithm", "tuner"))]
        return per_cell_cost(row, size, seeds)

    lines = [
        f"main's {len(cells)} cells on a modelled cluster of {cpus} CPUs (the launcher's own "
        "Batcher, batch_size and in_flight_cap hand them out; Ray starts tasks first in, first "
        "out; a task of one cell lasts its time alone, a batch its cells' CPU times at its "
        "size, from the `cells` part: the points S = 1, 5, 20 of the batched form joined by "
        "a + b/S). Busy: the share of the CPUs' time in cells.",
        "",
        "| launcher.batch | tasks | batch sizes | wall time (s) | CPU time (s) | busy |",
        "|---|---|---|---|---|---|",
    ]
    for setting in (None, 1, 20):
        wall, share, tasks, sizes = simulate(cells, cost, cpus, setting)
        counts = ", ".join(f"{n} x {s}" for s, n in sorted(_counts(sizes).items(), reverse=True))
        label = "null (automatic)" if setting is None else str(setting)
        lines.append(
            f"| {label} | {tasks} | {counts} | {wall:.1f} | {share * wall * cpus:.0f} | "
            f"{share:.0%} |"
        )
    return lines


def _counts(sizes: Sequence[int]) -> dict[int, int]:
    counts: dict[int, int] = defaultdict(int)
    for size in sizes:
        counts[size] += 1
    return dict(counts)


# --- driver: memory and recording rate -------------------------------------------------------
PEAK = (
    "import atexit, resource, runpy, sys\n"
    "atexit.register(lambda: print('peak_kib', resource.getrusage(resource.RUSAGE_SELF)"
    ".ru_maxrss, flush=True))\n"
    "sys.argv = ['sweeper', *sys.argv[1:]]\n"
    "runpy.run_module('sweeper', run_name='__main__')\n"
)


def driver(cells: int, repeats: int, log=print) -> list[str]:
    results: dict[str, list[tuple[float, float]]] = {"batched": [], "one per task": []}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(repeats):
            for name, cell in (
                ("batched", "sweeper.toy.batched_toy_cell"),
                ("one per task", "sweeper.toy.toy_cell"),
            ):
                uri = f"sqlite:///{tmp}/{name.replace(' ', '')}{repeat}.db"
                args = ["task=toy", "horizon=100", f"seeds={cells}", f"cell={cell}"]
                done = subprocess.run(
                    [sys.executable, "-c", PEAK, *args, f"tracking.uri={uri}"],
                    cwd=tmp,
                    capture_output=True,
                    text=True,
                )
                peak = re.search(r"peak_kib (\d+)", done.stdout)
                rate = re.search(r"; ([\d.]+) cells/s\)", done.stdout)
                if done.returncode != 0 or not peak or not rate:
                    raise RuntimeError(f"the toy sweep failed: {done.stdout[-1500:]}")
                results[name].append((int(peak.group(1)) / 1024, float(rate.group(1))))
                log(f"{name}: {results[name][-1]}")
    lines = [
        f"A toy sweep of {cells} cells (`task=toy`, one group of {cells} seeds) as `python -m "
        f"sweeper`, batched (`cell=sweeper.toy.batched_toy_cell`) and one cell per task, "
        f"alternating, {repeats} runs each (medians): the driver's peak resident memory and "
        "its recording rate (the closing summary's cells/s, from the first dispatch to the "
        "last record).",
        "",
        "| launcher | driver peak memory (MiB) | cells/s |",
        "|---|---|---|",
    ]
    for name, values in results.items():
        memory = float(np.median([m for m, _ in values]))
        rate = float(np.median([r for _, r in values]))
        lines.append(f"| {name} | {memory:.0f} | {rate:.0f} |")
    return lines


# --- the run -----------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("all", *PARTS[:-1]), default="all")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--horizon", type=int, default=14000)
    parser.add_argument("--equality-seeds", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=256)
    parser.add_argument("--driver-cells", type=int, default=2000)
    parser.add_argument("--driver-repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    bench = Bench(libraries=("numpy", "scipy", "ray", "mlflow"), busy=1)
    sections: dict[str, list[str]] = {}
    saved_file = args.out.with_suffix(".json")  # the cells part's rows, for `cluster`
    saved = json.loads(saved_file.read_text()) if saved_file.exists() else {}
    if args.part in ("all", "cells"):
        rows = time_cells(args.seeds, args.horizon)
        floor = floors(args.seeds, args.horizon)
        saved = {"seeds": args.seeds, "horizon": args.horizon, "rows": rows, "floors": floor}
        saved_file.write_text(json.dumps(saved, indent=1) + "\n")
        sections["cells"] = cells_section(rows, floor, args.seeds, args.horizon)
    if args.part in ("all", "equality"):
        sections["equality"] = equality(
            ("ablation", "candidates"), args.equality_seeds, args.horizon
        )
    if args.part in ("all", "main"):
        bench.busy = os.cpu_count() or 1
        sections["main"] = main_part()
    if args.part in ("all", "cluster"):
        if "rows" not in saved:
            parser.error(
                f"--part cluster models the cells part's rows: run --part cells first "
                f"(it writes {saved_file})"
            )
        sections["cluster"] = cluster(saved["rows"], saved["seeds"], args.cpus)
    if args.part in ("all", "driver"):
        sections["driver"] = driver(args.driver_cells, args.driver_repeats)
    write_sections(args.out, TITLE, PARTS, sections, bench.header())


if __name__ == "__main__":
    main()
