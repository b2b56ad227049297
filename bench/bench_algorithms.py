"""Time one cell per bottom-layer algorithm at the papers' scale, and at twice the horizon.

    .venv/bin/python bench/bench_algorithms.py [--repeats 3] [--horizon 14000]

Each cell is sweeper_tasks.bandit_tuning.cell.run_cell with the Theory tuner on the simulated
bandit of 003 Section 5 (T = 14000, K = 120, d = 25; linear rewards for LinUCB and LinTS,
logistic for the others, following the algorithm's model). Every figure is the median of
``--repeats`` runs, as wall time and as the process's CPU time (on a busy machine the CPU
time is the better estimate of an idle wall time); the cells at T and 2T run interleaved, so
that their ratio pairs runs made under the same load. Two reference rows split the budget:
the environment alone (observe and reward every round) and the cell loop with an algorithm
that does nothing. Results go to bench/results/algorithms.md, after the header of
bench/harness.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
from harness import Bench, interleaved, measure, ratio
from hydra import compose, initialize_config_dir
from threadpoolctl import threadpool_limits

from sweeper.grid import cell_config
from sweeper.paths import CONF_DIR
from sweeper_tasks.bandit_tuning.algorithms.base import ScheduledAlgorithm
from sweeper_tasks.bandit_tuning.cell import run_cell
from sweeper_tasks.bandit_tuning.seeding import environment_rng
from sweeper_tasks.bandit_tuning.space import Hyperparameter
from sweeper_tasks.building import build

ROOT = Path(__file__).resolve().parents[1]

ALGORITHMS = ("linucb", "lints", "ucb_glm", "glm_tsl", "laplace_ts", "gloc", "sgd_ts")
TARGET_S = {"linucb": 1.0, "lints": 1.0}  # GLM algorithms: 4 s
RATIO_TARGET = 2.3
# 003 Table 1, Theory column, simulation (seconds per cell of the papers' code).
PAPER_S = {
    "linucb": 2.11,
    "lints": 2.21,
    "ucb_glm": 7.74,
    "glm_tsl": 304.28,
    "laplace_ts": 523.62,
    "gloc": 486.58,
    "sgd_ts": 67.42,
}


class NullAlgorithm(ScheduledAlgorithm):
    """Pulls arm 0 and learns nothing: the cost of the cell loop and the environment."""

    model = "logistic"
    HYPERPARAMETERS = (Hyperparameter("exploration_rate"),)

    def schedule(self, t: np.ndarray) -> Mapping[str, float]:
        return {"exploration_rate": 1.0}

    def reset(self, n_features: int, horizon: int, rng: np.random.Generator) -> None:
        self._start(n_features, horizon, rng)

    def select(self, features, hp, t) -> int:
        return 0

    def update(self, x, reward, hp, t) -> None:
        return None


def cell(algorithm: str, horizon: int) -> dict:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        config = compose(
            config_name="config",
            overrides=[f"algorithm={algorithm}", "tuner=theory", "dataset=simulation", "seed=0"],
        )
    config = cell_config(config)
    config["horizon"] = horizon
    return config


def environment_only(config: dict, model: str) -> Callable[[], None]:
    def run() -> None:
        environment = build(config["dataset"])
        with threadpool_limits(limits=1, user_api="blas"):
            environment.reset(config["horizon"], model, environment_rng("simulation", 0))
            for index in range(config["horizon"]):
                environment.observe(index)
                environment.reward(0)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--horizon", type=int, default=14000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--algorithms", nargs="*", default=list(ALGORITHMS))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "algorithms.md")
    args = parser.parse_args()
    bench = Bench(libraries=("numpy", "scipy", "threadpoolctl"))
    run_cell(cell("linucb", 200))  # imports and first-call costs out of the figures
    rows = [algorithm_row(name, args.horizon, args.repeats) for name in args.algorithms]
    references = reference_rows(args.horizon, args.repeats)
    bench.write(
        args.out, "# Bottom-layer algorithms: seconds per cell", text(args, rows, references)
    )


def algorithm_row(name: str, horizon: int, repeats: int) -> tuple:
    """The algorithm's cells at T and 2T, interleaved; its model and target."""
    configs = {size: cell(name, size) for size in (horizon, 2 * horizon)}
    calls = {size: (lambda c=config: run_cell(c)) for size, config in configs.items()}
    at_t, at_2t = (interleaved(calls, repeats)[size] for size in configs)
    growth = ratio(at_2t, at_t, "cpu")
    print(
        f"{name:11s} T: {at_t.cpu:.2f}s cpu   2T: {at_2t.cpu:.2f}s cpu   ratio {growth:.2f}",
        flush=True,
    )
    model = build(cell(name, 10)["algorithm"]).model
    return name, model, at_t, at_2t, growth, TARGET_S.get(name, 4.0)


def reference_rows(horizon: int, repeats: int) -> list[tuple]:
    """The environment alone, and the cell loop with the null algorithm (at T)."""
    config = cell("linucb", horizon)
    rows = [
        (f"environment alone ({model})", measure(environment_only(config, model), repeats))
        for model in ("linear", "logistic")
    ]
    null = {**config, "algorithm": {"_target_": f"{__name__}.NullAlgorithm", "name": "null"}}
    rows.append(
        ("cell loop + environment, null algorithm", measure(lambda: run_cell(null), repeats))
    )
    for label, timing in rows:
        print(f"{label}: {timing.wall:.2f}s wall {timing.cpu:.2f}s cpu", flush=True)
    return rows


def text(args: argparse.Namespace, rows: list[tuple], references: list[tuple]) -> list[str]:
    lines = [
        f"Each figure is the median of {args.repeats} runs of "
        "`sweeper_tasks.bandit_tuning.cell.run_cell` (Theory tuner, simulation: "
        f"T = {args.horizon}, K = 120, d = 25, seed 0), the cells at T and 2T interleaved; "
        "2T / T is the median of the ratios of the runs made one after the other. CPU is the "
        "process time: on a shared machine it estimates the idle wall time better than the "
        "wall clock does.",
        "",
        "| algorithm | model | T: wall s | T: CPU s | 2T: wall s | 2T: CPU s | 2T / T (CPU) "
        "| target at T | 003's code (Table 1) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, model, at_t, at_2t, growth, target in rows:
        verdict = "met" if at_t.cpu <= target and growth.value <= RATIO_TARGET else "MISSED"
        lines.append(
            f"| {name} | {model} | {at_t.wall:.2f} | {at_t.cpu:.2f} | {at_2t.wall:.2f} "
            f"| {at_2t.cpu:.2f} | {growth:.2f} | {target:.0f} s, ratio <= {RATIO_TARGET}: "
            f"{verdict} | {PAPER_S[name]:.2f} |"
        )
    lines += ["", "| reference (T) | wall s | CPU s |", "|---|---|---|"]
    lines += [f"| {label} | {t.wall:.2f} | {t.cpu:.2f} |" for label, t in references]
    return [
        *lines,
        "",
        "The environment (drawing 120 x 25 uniform features a round, in blocks) and the cell "
        "loop are part of every cell's time; the algorithm's own share is the difference to "
        "the null-algorithm row.",
    ]


if __name__ == "__main__":
    main()
