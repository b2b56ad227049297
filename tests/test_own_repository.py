"""sweeper run from inside a researcher's own repository (issue #37, item 2).

The research code installs as ``sweeper_tasks`` (setup.py): a ``tasks.py`` (invoke's
convention) or a ``tasks/`` package of the user's in the working directory is never imported
by a sweep, and a cell's key is the same as when the code was installed as ``tasks``, so
stores and published folders made before the rename keep their keys.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from mlflow import MlflowClient

from sweeper.cells import cell_key
from sweeper.grid import expand

TRAP = "raise SystemExit('the user\\'s {name} was imported by the sweep')\n"
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.e2e
def test_a_sweep_runs_beside_a_tasks_py_and_a_tasks_package(tmp_path: Path):
    repo = tmp_path / "my_research"
    (repo / "tasks").mkdir(parents=True)
    (repo / "tasks.py").write_text(TRAP.format(name="tasks.py"))
    (repo / "tasks" / "__init__.py").write_text(TRAP.format(name="tasks/ package"))
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    store = f"sqlite:///{tmp_path}/mlflow.db"
    args = ["algorithm=linucb", "tuner=theory", "seed=1", "horizon=300", f"tracking.uri={store}"]
    done = subprocess.run(
        [sys.executable, "-m", "sweeper", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "was imported" not in done.stdout + done.stderr
    runs = MlflowClient(store).search_runs(
        [e.experiment_id for e in MlflowClient(store).search_experiments()],
        filter_string="tags.cell_key != ''",
    )
    finished = [r for r in runs if r.info.status == "FINISHED" and "algorithm" in r.data.tags]
    assert [(r.data.tags["algorithm"], r.data.tags["tuner"]) for r in finished] == [
        ("linucb", "theory")
    ]
    assert finished[0].data.metrics["final_regret"] > 0


def test_a_key_does_not_depend_on_the_research_code_s_import_name():
    config = {
        "cell": "sweeper_tasks.bandit_tuning.cell.run_cell",
        "algorithm": {"_target_": "sweeper_tasks.bandit_tuning.algorithms.linucb.LinUCB"},
        "seed": 3,
    }
    before = {
        "cell": "tasks.bandit_tuning.cell.run_cell",
        "algorithm": {"_target_": "tasks.bandit_tuning.algorithms.linucb.LinUCB"},
        "seed": 3,
    }
    assert cell_key(config) == cell_key(before)
    other = {**before, "cell": "mine.tasks.bandit_tuning.cell.run_cell"}
    assert cell_key(other) != cell_key(before)  # only a path that begins with the name


def test_the_published_main_cells_keep_their_keys(composer):
    """docs/results/main was recorded when the code installed as ``tasks``: today's grid of
    the same experiment has exactly its keys."""
    published = pd.read_csv(ROOT / "docs" / "results" / "main" / "cells.csv")
    recorded = (ROOT / "docs" / "results" / "main" / "sweep" / "experiment.json").read_text()
    assert '"tasks.bandit_tuning.cell.run_cell"' in recorded  # recorded under the old name
    seeds = sorted(published["seed"].unique())
    cfg = composer(["+exp=main", f"seeds={len(seeds)}"])
    grid = expand(cfg, composer, ["+exp=main", f"seeds={len(seeds)}"])
    assert grid[0].function.startswith("sweeper_tasks.")
    assert set(grid.keys) == set(published["cell_key"])
