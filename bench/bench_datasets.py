"""Timings of the datasets: per-round cost, LinUCB cells at T=14000, factorisation, R6A parsing.

Run: .venv/bin/python bench/bench_datasets.py [--repeats 3] [--out bench/results/datasets.md]
Needs the MovieLens ratings (``make movielens``). The R6A parse is timed on a synthetic log
in R6A's format with 20-article pools (the real log is licensed; 45.8 million lines). Every
figure is the median of ``--repeats`` runs (bench/harness.py), wall and CPU time.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from harness import Bench, Timing, measure

from sweeper_tasks.bandit_tuning.cell import run_cell
from sweeper_tasks.bandit_tuning.environments import movielens_data as md
from sweeper_tasks.bandit_tuning.environments import yahoo_data as yd
from sweeper_tasks.bandit_tuning.environments.movielens import MovieLens
from sweeper_tasks.bandit_tuning.environments.simulation import Simulation
from sweeper_tasks.bandit_tuning.seeding import environment_rng

R6A_LINES = 45_811_883
ROUNDS = 14_000  # T of 003's experiments


def per_round(env, rounds: int, model: str, repeats: int) -> Timing:
    """Seconds of ``rounds`` rounds of observe and reward (the reset before each run aside)."""

    def loop() -> None:
        for t in range(rounds):
            env.observe(t)
            env.reward(0)

    timing = Timing()
    for _ in range(repeats):
        env.reset(rounds, model, environment_rng("bench", 0))
        timing.add(loop)
    return timing


BANDIT = "sweeper_tasks.bandit_tuning"


def linucb_cell(dataset: str, horizon: int) -> Callable[[], object]:
    """A LinUCB x Theory cell on ``dataset`` (simulation or movielens), seed 0."""
    module = {"simulation": "simulation.Simulation", "movielens": "movielens.MovieLens"}[dataset]
    config = {
        "algorithm": {"_target_": f"{BANDIT}.algorithms.linucb.LinUCB", "name": "linucb"},
        "tuner": {"_target_": f"{BANDIT}.tuners.theory.Theory", "name": "theory"},
        "dataset": {"_target_": f"{BANDIT}.environments.{module}", "name": dataset},
        "seed": 0,
        "horizon": horizon,
    }
    return lambda: run_cell(config)


def cached_features(repeats: int) -> Timing:
    """The MovieLens features from the disk cache, the first call in a process each time."""
    timing = Timing()
    for _ in range(repeats):
        md._MEMO.clear()  # as in a fresh worker process
        timing.add(md.movielens_factors)
    return timing


def r6a_parse(lines: int, repeats: int) -> Timing:
    """Parsing a synthetic R6A log of ``lines`` lines."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "ydata-fp-td-clicks-v1_0.20090501"
        synthetic_r6a(path, lines)
        return measure(lambda: yd.parse_r6a([path]), repeats)


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
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lines", type=int, default=200_000, help="of the synthetic R6A log")
    parser.add_argument("--out", default="bench/results/datasets.md")
    args = parser.parse_args()
    bench, repeats = Bench(libraries=("numpy", "scipy")), args.repeats
    rows = []  # (what, timing, scale, unit)
    for name, env in (
        ("simulation (K=120, d=25)", Simulation()),
        ("movielens (K=300)", MovieLens()),
    ):
        for model in ("linear", "logistic"):
            timing = per_round(env, ROUNDS, model, repeats)
            rows.append((f"{name}, {model}: observe+reward per round", timing, 1e6 / ROUNDS, "us"))
    for dataset in ("simulation", "movielens"):
        timing = measure(linucb_cell(dataset, ROUNDS), repeats)
        rows.append((f"LinUCB x Theory cell, {dataset}, T={ROUNDS}", timing, 1, "s"))
    ratings = md.read_ratings(md.find_ratings_file(None))
    timing = measure(lambda: md.factorise(ratings), repeats)
    rows.append(("MovieLens ALS factorisation (d=20, 20 sweeps)", timing, 1, "s"))
    timing = cached_features(repeats)
    rows.append(
        ("MovieLens features from the disk cache (first call in a process)", timing, 1e3, "ms")
    )
    parse = r6a_parse(args.lines, repeats)
    rows.append(("R6A parse, synthetic 20-article lines, per line", parse, 1e6 / args.lines, "us"))
    rows.append(
        (
            "R6A parse, extrapolated to 45.8M lines (uncompressed)",
            parse,
            R6A_LINES / args.lines / 60,
            "min",
        )
    )
    text = [
        f"Each value is the median of {repeats} runs in this one process, wall and CPU time "
        f"(per-round and per-line figures: a run's time over its {ROUNDS} rounds or "
        f"{args.lines} lines).",
        "",
        "| what | wall | CPU | unit |",
        "|---|---:|---:|---|",
        *[f"| {what} | {t.wall * k:.3g} | {t.cpu * k:.3g} | {unit} |" for what, t, k, unit in rows],
    ]
    bench.write(args.out, "# Dataset timings", text)
    print("\n".join(text))


if __name__ == "__main__":
    main()
