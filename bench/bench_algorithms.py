"""Time one cell per bottom-layer algorithm at the papers' scale, and at twice the horizon.

    .venv/bin/python bench/bench_algorithms.py [--repeats 3] [--horizon 14000]

Each cell is tasks.bandit_tuning.cell.run_cell with the Theory tuner on the simulated
bandit of 003 Section 5 (T = 14000, K = 120, d = 25; linear rewards for LinUCB and LinTS,
logistic for the others, following the algorithm's model). Every figure is the minimum
over ``--repeats`` runs, as wall time and as the process's CPU time (on a busy machine the
CPU time is the better estimate of an idle wall time). Two reference rows split the
budget: the environment alone (observe and reward every round) and the cell loop with an
algorithm that does nothing. Results go to bench/results/algorithms.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_dir
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sweeper.grid import cell_config  # noqa: E402
from sweeper.paths import CONF_DIR  # noqa: E402
from tasks.bandit_tuning.algorithms.base import ScheduledAlgorithm  # noqa: E402
from tasks.bandit_tuning.cell import run_cell  # noqa: E402
from tasks.bandit_tuning.seeding import environment_rng  # noqa: E402
from tasks.bandit_tuning.space import Hyperparameter  # noqa: E402
from tasks.building import build  # noqa: E402

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


def measure(run: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Minimum wall and CPU seconds of ``run`` over ``repeats`` calls."""
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def environment_only(config: dict, model: str) -> Callable[[], None]:
    def run() -> None:
        environment = build(config["dataset"])
        with threadpool_limits(limits=1, user_api="blas"):
            environment.reset(config["horizon"], model, environment_rng("simulation", 0))
            for index in range(config["horizon"]):
                environment.observe(index)
                environment.reward(0)

    return run


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True)
        return out.stdout.decode().strip() or "unknown"
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--horizon", type=int, default=14000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--algorithms", nargs="*", default=list(ALGORITHMS))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "algorithms.md")
    args = parser.parse_args()
    horizon = args.horizon
    load_before = os.getloadavg()

    run_cell(cell("linucb", 200))  # imports and first-call costs out of the figures
    rows = []
    for name in args.algorithms:
        timings = {}
        for size in (horizon, 2 * horizon):
            config = cell(name, size)
            timings[size] = measure(lambda config=config: run_cell(config), args.repeats)
        (wall_t, cpu_t), (wall_2t, cpu_2t) = timings[horizon], timings[2 * horizon]
        model = build(cell(name, 10)["algorithm"]).model
        target = TARGET_S.get(name, 4.0)
        rows.append((name, model, wall_t, cpu_t, wall_2t, cpu_2t, target))
        print(
            f"{name:11s} T: {wall_t:.2f}s wall {cpu_t:.2f}s cpu   2T: {wall_2t:.2f}s wall "
            f"{cpu_2t:.2f}s cpu   ratio {cpu_2t / cpu_t:.2f}",
            flush=True,
        )

    references = []
    for model in ("linear", "logistic"):
        config = cell("linucb", horizon)
        references.append(
            (
                f"environment alone ({model})",
                *measure(environment_only(config, model), args.repeats),
            )
        )
    null = cell("linucb", horizon)
    null["algorithm"] = {"_target_": f"{__name__}.NullAlgorithm", "name": "null"}
    references.append(
        ("cell loop + environment, null algorithm", *measure(lambda: run_cell(null), args.repeats))
    )
    for label, wall, cpu in references:
        print(f"{label}: {wall:.2f}s wall {cpu:.2f}s cpu", flush=True)

    load_after = os.getloadavg()
    lines = [
        "# Bottom-layer algorithms: seconds per cell",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC at commit {git_commit()} by "
        "`bench/bench_algorithms.py` on "
        f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), Python "
        f"{platform.python_version()}, numpy {np.__version__}; load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after. Each figure is the minimum "
        f"of {args.repeats} runs of `tasks.bandit_tuning.cell.run_cell` (Theory tuner, "
        f"simulation: T = {horizon}, K = 120, d = 25, seed 0). CPU is the process time: on "
        "a shared machine it estimates the idle wall time better than the wall clock does.",
        "",
        "| algorithm | model | T: wall s | T: CPU s | 2T: wall s | 2T: CPU s | 2T / T (CPU) "
        "| target at T | 003's code (Table 1) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, model, wall_t, cpu_t, wall_2t, cpu_2t, target in rows:
        ratio = cpu_2t / cpu_t
        verdict = "met" if cpu_t <= target and ratio <= RATIO_TARGET else "MISSED"
        lines.append(
            f"| {name} | {model} | {wall_t:.2f} | {cpu_t:.2f} | {wall_2t:.2f} | {cpu_2t:.2f} "
            f"| {ratio:.2f} | {target:.0f} s, ratio <= {RATIO_TARGET}: {verdict} "
            f"| {PAPER_S[name]:.2f} |"
        )
    lines += ["", "| reference (T) | wall s | CPU s |", "|---|---|---|"]
    lines += [f"| {label} | {wall:.2f} | {cpu:.2f} |" for label, wall, cpu in references]
    lines += [
        "",
        "The environment (drawing 120 x 25 uniform features a round, in blocks) and the cell "
        "loop are part of every cell's time; the algorithm's own share is the difference to "
        "the null-algorithm row. Re-measure on an idle machine before quoting absolute "
        "figures; the ratios are the robust part.",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
