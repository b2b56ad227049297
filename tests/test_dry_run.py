"""``--dry-run``: the grid by axis, what the store holds FINISHED and the time left; no Ray,
no parent run, nothing written (a store that does not exist is not created)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

from mlflow import MlflowClient

from sweeper.sweep import run_sweep

SMALL = ["+exp=smoke", "horizon=120"]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    return subprocess.run(
        [sys.executable, "-m", "sweeper", *args], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip


def test_a_dry_run_of_a_new_store_creates_nothing(tmp_path):
    store = tmp_path / "mlflow.db"
    done = _cli(*SMALL, f"tracking.uri=sqlite:///{store}", "--dry-run", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "18 cells: seed 3 x algorithm 2 x tuner 3" in done.stdout, done.stdout
    assert "0 already FINISHED" in done.stdout and "18 to run" in done.stdout
    assert "time left: unknown" in done.stdout
    assert not store.exists() and sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_dry_run_counts_what_is_done_and_prices_the_rest(composer, tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    overrides = [*SMALL, "algorithm=linucb", "launcher.name=local", f"tracking.uri={uri}"]
    assert run_sweep(composer(overrides), composer, overrides, out=io.StringIO()).finished == 9
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("smoke").experiment_id
    before = len(client.search_runs([experiment]))

    done = _cli(*SMALL, f"tracking.uri={uri}", "launcher.num_cpus=3", "--dry-run", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "9 already FINISHED" in done.stdout and "9 to run" in done.stdout, done.stdout
    # LinTS has no finished run of its own: its cells are priced by the median of all.
    estimate = re.search(r"time left: about (\S+) on 3 CPUs \((\d+) of 9 cells", done.stdout)
    assert estimate and estimate[2] == "0", done.stdout
    assert len(client.search_runs([experiment])) == before, "a dry run wrote runs"

    with_linucb = _cli(*SMALL, "algorithm=linucb", "seeds=4", f"tracking.uri={uri}", "--dry-run",
                       cwd=tmp_path)  # fmt: skip
    assert "9 already FINISHED" in with_linucb.stdout and "3 to run" in with_linucb.stdout
    assert "(3 of 3 cells priced by finished runs of their kind)" in with_linucb.stdout
