"""One rule for which run is a cell's result (issue #26, item 2): the resume index, the
sweep's table and the report agree on every cell, after faults too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweeper.report.load import load_experiment
from sweeper.servers import finished_runs
from sweeper.store.index import read_index
from sweeper.store.result import result_of, results
from sweeper.store.tracking import Tracker

ROOT = Path(__file__).resolve().parent.parent


def test_the_vectorised_rule_picks_what_the_rule_picks():
    rng = np.random.default_rng(0)
    n = 400
    table = pd.DataFrame(
        {
            "cell_key": rng.choice(list("abcdefghij"), n),
            "status": rng.choice(["FINISHED", "FAILED", "KILLED"], n, p=[0.3, 0.3, 0.4]),
            "start_time": rng.integers(0, 20, n),  # many ties: the later row wins them
            "run_id": [f"r{i}" for i in range(n)],
        }
    )
    fast = results(table).set_index("cell_key")["run_id"].to_dict()
    slow = {}
    for key, rows in table.groupby("cell_key", sort=False):
        best = result_of(rows.to_dict("records"), lambda r: (r["status"], r["start_time"]))
        if best is not None:
            slow[key] = best["run_id"]
    assert fast == slow and len(slow) >= 9


def test_a_failed_rerun_never_hides_a_result_and_ties_go_to_the_later_run():
    runs = [("FINISHED", 5, "old"), ("FAILED", 9, "new"), ("KILLED", 12, "cut")]
    assert result_of(runs, lambda r: r[:2])[2] == "old"
    assert result_of([("FINISHED", 5, "a"), ("FINISHED", 5, "b")], lambda r: r[:2])[2] == "b"
    assert result_of([("KILLED", 5, "a")], lambda r: r[:2]) is None


def _views(uri: str, name: str) -> tuple[dict, dict, dict]:
    """cell key -> its run: as the resume index, the report and the newest sweep's table
    see it."""
    tracker = Tracker(uri, name)
    index = {k: e.run_id for k, e in read_index(tracker).finished.items()}
    cells = load_experiment(name, uri).cells
    finished = cells[cells["status"] == "FINISHED"]
    report = dict(zip(finished["cell_key"], finished["run_id"], strict=True))
    parent = max(tracker.sweep_parents(), key=lambda p: p.info.start_time)
    table = tracker.table(parent.info.run_id).current()
    table = table[table["status"] == "FINISHED"]
    return index, report, dict(zip(table["cell_key"], table["run_id"], strict=True))


@pytest.mark.e2e
def test_after_a_rerun_killed_midway_the_index_the_report_and_the_table_agree(
    tmp_path, ray_address
):
    name, db = "agree", tmp_path / "mlflow.db"
    args = [sys.executable, "-m", "sweeper", "task=toy", "horizon=20", "seeds=8",
            "+toy.sleep_s=0.3", "tracking.batch_size=2", f"tracking.uri=sqlite:///{db}",
            f"experiment.name={name}", f"launcher.address={ray_address}"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    subprocess.run(args, cwd=tmp_path, env=env, check=True, capture_output=True, timeout=300)
    rerun = subprocess.Popen([*args, "rerun=true"], cwd=tmp_path, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while finished_runs(f"sqlite:///{db}") < 12 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(rerun.pid, signal.SIGKILL)  # a rerun killed while its batches are written
    rerun.wait()
    index, report, _ = _views(f"sqlite:///{db}", name)
    assert len(index) == 8 and index == report
    subprocess.run(args, cwd=tmp_path, env=env, check=True, capture_output=True, timeout=300)
    index, report, table = _views(f"sqlite:///{db}", name)
    assert len(index) == 8 and index == report == table
