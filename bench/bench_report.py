"""Time ``python -m sweeper.report`` on experiments the size of the papers' sweeps.

    .venv/bin/python bench/bench_report.py [--cells 280 1120 4480] [--repeats 3] [--out ...]

Each experiment is written straight into a temporary sqlite store as the sweeper leaves
it: one parent run (``role=sweep``) with ``config.yaml`` (the family's task block and the
grid) and a ``cells.parquet`` of N rows shaped like 003's main experiment (7 algorithms x
4 tuners x 2 datasets x N/56 seeds, a 500-point regret curve and hyperparameter trace per
cell). The report reads that one table
(its lean search finds no runs logged after it), so the figures show what the report
itself costs: reading, tables, paired statistics, figures, HTML. Reported: the median of
``--repeats`` runs of the wall time and the process CPU time of the load alone and of the
whole report (bench/harness.py). Results go to bench/results/report.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from harness import Bench, measure
from mlflow import MlflowClient

from sweeper.paths import CONF_DIR
from sweeper.report import build_report
from sweeper.report.load import load_experiment

ROOT = Path(__file__).resolve().parents[1]

ALGORITHMS = ("linucb", "lints", "ucb_glm", "glm_tsl", "laplace_ts", "gloc", "sgd_ts")
TUNERS = ("theory", "op", "tl", "cdt")
DATASETS = ("simulation", "movielens")
HORIZON = 14000
POINTS = 500


def write_experiment(uri: str, name: str, cells: int) -> None:
    """A parent run holding a cells table of ``cells`` rows (7 x 4 x 2 x seeds)."""
    seeds = max(1, cells // (len(ALGORITHMS) * len(TUNERS) * len(DATASETS)))
    rng = np.random.default_rng(0)
    steps = np.unique(np.linspace(0, HORIZON - 1, POINTS).round().astype(int)) + 1
    rows = []
    for algorithm in ALGORITHMS:
        for tuner in TUNERS:
            for dataset in DATASETS:
                for seed in range(seeds):
                    slope = rng.uniform(0.02, 0.06)
                    curve = slope * steps ** rng.uniform(0.7, 0.9)
                    config = {
                        "algorithm": {"name": algorithm},
                        "tuner": {"name": tuner},
                        "dataset": {"name": dataset},
                        "horizon": HORIZON,
                        "seed": seed,
                    }
                    rows.append(
                        {
                            "cell_key": f"{algorithm}-{tuner}-{dataset}-{seed}",
                            "run_id": f"{len(rows):032x}",
                            "status": "FINISHED",
                            "algorithm": algorithm,
                            "tuner": tuner,
                            "dataset": dataset,
                            "seed": seed,
                            "error": None,
                            "config": json.dumps(config, sort_keys=True),
                            "final_regret": float(curve[-1]),
                            "cumulative_reward": float(rng.uniform(100, 200)),
                            "runtime_s": float(rng.uniform(2, 10)),
                            "curve_step": steps.tolist(),
                            "curve_regret": curve.tolist(),
                            "hp_exploration_rate": rng.uniform(0.1, 5, len(steps)).tolist(),
                            "start_time": 0,
                        }
                    )
    client = MlflowClient(uri)
    experiment = client.create_experiment(name)
    run = client.create_run(experiment, tags={"role": "sweep", "sweep_key": name})
    grid = {"algorithm": list(ALGORITHMS), "tuner": list(TUNERS), "dataset": list(DATASETS)}
    family = yaml.safe_load((CONF_DIR / "task" / "bandit_tuning.yaml").read_text())
    config = {"cell": family["cell"], "task": family["task"], "sweep": {"grid": grid}}
    client.log_text(run.info.run_id, json.dumps(config), "config.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cells.parquet"
        pd.DataFrame(rows).to_parquet(path, index=False)
        client.log_artifact(run.info.run_id, str(path))
    client.set_tag(run.info.run_id, "table_until", str(int(time.time() * 1000) + 60_000))
    client.set_terminated(run.info.run_id, "FINISHED")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, nargs="+", default=[280, 1120, 4480])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "report.md")
    args = parser.parse_args()
    bench = Bench(libraries=("pandas", "pyarrow", "matplotlib", "mlflow"))
    lines = [
        f"Each figure is the median of {args.repeats} runs in this one process, wall and "
        "CPU time (the process's).",
        "",
        "| cells | load: wall s | load: CPU s | whole report: wall s | whole report: CPU s "
        "| report CPU ms per cell |",
        "|---|---|---|---|---|---|",
    ]
    os.environ.pop("MLFLOW_TRACKING_URI", None)  # the temporary store below, not yours
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{tmp}/mlflow.db"
        for n in args.cells:
            name = f"bench{n}"
            write_experiment(uri, name, n)
            load = measure(lambda name=name: load_experiment(name, uri), args.repeats)
            out = Path(tmp) / "out" / name
            report = measure(lambda n=name, o=out: build_report(n, o, uri), args.repeats)
            cells = len(load.value.cells)
            lines.append(
                f"| {cells} | {load.wall:.2f} | {load.cpu:.2f} | {report.wall:.2f} | "
                f"{report.cpu:.2f} | {1000 * report.cpu / cells:.2f} |"
            )
            print(lines[-1], file=sys.stderr)
    bench.write(args.out, "# Report timings", lines)


if __name__ == "__main__":
    main()
