"""Faults at scale (issue #15): the tracking server, or the PostgreSQL database behind it,
restarted in the middle of a 2,000-cell sweep. The sweep waits for the store (saying so),
goes on when it is back, and ends with exactly one FINISHED run per cell. Slow: PostgreSQL
and the server start in about half a minute here, the sweep takes about another."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest
from mlflow import MlflowClient

from sweeper.servers import (
    finished_runs,
    free_port,
    mlflow_restart,
    pg_restart,
    pg_start,
    pg_stop,
    start_mlflow_server,
    stop,
)

pytestmark = pytest.mark.slow
CELLS = 2000
ROOT = Path(__file__).resolve().parent.parent


def _sweep_with_a_restart(tmp: Path, restart, *extra: str):
    """Start the toy sweep; once 300 cells are in, ``restart()``; return its output, the
    tracking URI and the database."""
    database = pg_start(tmp / "pg", free_port())
    port = free_port()
    server, uri = start_mlflow_server(database, tmp / "artifacts", port=port)
    servers = {"server": server}
    command = [sys.executable, "-m", "sweeper", "task=toy", "horizon=2000", f"seeds={CELLS}",
               f"tracking.uri={uri}", f"tracking.database={database}",
               f"tracking.artifacts_destination={tmp / 'artifacts'}", "tracking.patience_s=120",
               "experiment.name=restart", f"hydra.run.dir={tmp}/hydra", *extra]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    sweep = subprocess.Popen(command, cwd=tmp, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while finished_runs(database) < 300 and sweep.poll() is None:
            assert time.monotonic() < deadline, "the sweep recorded no cells"
            time.sleep(0.2)
        restart_at = finished_runs(database)
        restart(servers, database, port, tmp)
        output, _ = sweep.communicate(timeout=600)
        assert sweep.returncode == 0, output[-3000:]
        client = MlflowClient(uri)
        experiment = client.get_experiment_by_name("restart")
        runs = client.search_runs([experiment.experiment_id], max_results=5000)
    finally:
        if sweep.poll() is None:
            sweep.kill()
        stop(servers["server"])
        pg_stop(tmp / "pg")
    assert 300 <= restart_at < CELLS, "the restart did not land in the middle of the sweep"
    return output, runs


def _restart_server(servers, database, port, tmp) -> None:
    servers["server"] = mlflow_restart(servers["server"], database, tmp / "artifacts", port)


def _restart_postgres(servers, database, port, tmp) -> None:
    pg_restart(tmp / "pg", database)


def _assert_each_cell_once(runs) -> None:
    cells = [r for r in runs if "cell_key" in r.data.tags]
    finished = Counter(r.data.tags["cell_key"] for r in cells if r.info.status == "FINISHED")
    assert len(finished) == CELLS and set(finished.values()) == {1}
    assert not [r for r in runs if r.info.status == "RUNNING" and "cell_key" in r.data.tags]
    (parent,) = [r for r in runs if r.data.tags.get("role") == "sweep"]
    assert parent.info.status == "FINISHED"


@pytest.mark.parametrize(
    "restart", [_restart_server, _restart_postgres], ids=["server", "postgresql"]
)
def test_a_store_restarted_mid_sweep_is_waited_for_and_each_cell_is_recorded_once(restart):
    with tempfile.TemporaryDirectory(prefix="sweeper-pg-") as tmp:
        Path(tmp).chmod(0o755)  # PostgreSQL's user must reach its directory inside
        output, runs = _sweep_with_a_restart(Path(tmp), restart)
    assert "the MLflow store does not answer" in output and "retrying in" in output
    _assert_each_cell_once(runs)
