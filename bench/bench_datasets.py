"""Timings of the datasets: per-round cost, LinUCB cells at T=14000, factorisation, R6A parsing.

Run: .venv/bin/python bench/bench_datasets.py [--out bench/results/datasets.md]
Needs the MovieLens ratings (``make movielens``). The R6A parse is timed on a synthetic log
in R6A's format with 20-article pools (the real log is licensed; 45.8 million lines).
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from tasks.bandit_tuning.cell import run_cell
from tasks.bandit_tuning.environments import movielens_data as md
from tasks.bandit_tuning.environments import yahoo_data as yd
from tasks.bandit_tuning.environments.movielens import MovieLens
from tasks.bandit_tuning.environments.simulation import Simulation
from tasks.bandit_tuning.seeding import environment_rng

R6A_LINES = 45_811_883


def per_round(env, rounds: int, model: str) -> float:
    env.reset(rounds, model, environment_rng("bench", 0))
    started = time.perf_counter()
    for t in range(rounds):
        env.observe(t)
        env.reward(0)
    return (time.perf_counter() - started) / rounds


def cell_seconds(dataset: dict, horizon: int) -> float:
    config = {
        "algorithm": {"_target_": "tasks.bandit_tuning.algorithms.linucb.LinUCB", "name": "linucb"},
        "tuner": {"_target_": "tasks.bandit_tuning.tuners.theory.Theory", "name": "theory"},
        "dataset": dataset,
        "seed": 0,
        "horizon": horizon,
    }
    return float(run_cell(config)["summary"]["runtime_s"])


def synthetic_r6a(path: Path, lines: int) -> None:
    rng = np.random.default_rng(0)
    features = {a: rng.dirichlet(np.ones(5)) for a in range(109400, 109700)}

    def block(article: int) -> str:
        values = features[article]
        return f"|{article} " + " ".join(
            [f"{k}:{values[k - 2]:.6f}" for k in range(2, 7)] + ["1:1.000000"]
        )

    pool = list(range(109400, 109420))
    timestamp = 1241160900
    with open(path, "w") as out:
        for i in range(lines):
            if i % 2000 == 0:  # the pool changes now and then
                pool = sorted(rng.choice(list(features), 20, replace=False))
            if i % 16_000 == 0:
                timestamp += 300
            user = rng.dirichlet(np.ones(5))
            user_text = " ".join(f"{k}:{user[k - 2]:.6f}" for k in range(2, 7))
            blocks = " ".join(block(a) for a in pool)
            shown = pool[int(rng.integers(20))]
            click = int(rng.random() < 0.04)
            out.write(f"{timestamp} {shown} {click} |user {user_text} 1:1.000000 {blocks}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/results/datasets.md")
    args = parser.parse_args()
    rows = []
    for name, env in (
        ("simulation (K=120, d=25)", Simulation()),
        ("movielens (K=300)", MovieLens()),
    ):
        for model in ("linear", "logistic"):
            rows.append(
                (
                    f"{name}, {model}: observe+reward per round",
                    per_round(env, 14_000, model) * 1e6,
                    "us",
                )
            )
    rows.append(
        (
            "LinUCB x Theory cell, simulation, T=14000",
            cell_seconds(
                {
                    "_target_": "tasks.bandit_tuning.environments.simulation.Simulation",
                    "name": "simulation",
                },
                14_000,
            ),
            "s",
        )
    )
    rows.append(
        (
            "LinUCB x Theory cell, movielens, T=14000",
            cell_seconds(
                {
                    "_target_": "tasks.bandit_tuning.environments.movielens.MovieLens",
                    "name": "movielens",
                },
                14_000,
            ),
            "s",
        )
    )
    ratings = md.read_ratings(md.find_ratings_file(None))
    started = time.perf_counter()
    md.factorise(ratings)
    rows.append(
        ("MovieLens ALS factorisation (d=20, 20 sweeps)", time.perf_counter() - started, "s")
    )
    md._MEMO.clear()  # as in a fresh worker process
    started = time.perf_counter()
    md.movielens_factors()
    rows.append(
        (
            "MovieLens features from the disk cache (first call in a process)",
            (time.perf_counter() - started) * 1e3,
            "ms",
        )
    )
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "ydata-fp-td-clicks-v1_0.20090501"
        lines = 200_000
        synthetic_r6a(path, lines)
        started = time.perf_counter()
        yd.parse_r6a([path])
        seconds = time.perf_counter() - started
    rows.append(("R6A parse, synthetic 20-article lines, per line", seconds / lines * 1e6, "us"))
    rows.append(
        (
            "R6A parse, extrapolated to 45.8M lines (uncompressed)",
            seconds / lines * R6A_LINES / 60,
            "min",
        )
    )
    text = [
        "# Dataset timings",
        "",
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}. Measured on a shared, loaded machine: "
        "re-measure on an idle one.",
        "",
        "| what | value | unit |",
        "|---|---:|---|",
        *[f"| {what} | {value:.3g} | {unit} |" for what, value, unit in rows],
        "",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
