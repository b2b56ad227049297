"""A sweep logging to an MLflow tracking server over HTTP, as on a cluster (slow: it starts
``mlflow server`` on the loopback interface)."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest
from mlflow import MlflowClient

from sweeper.servers import mlflow_server
from sweeper.store.index import read_index
from sweeper.store.tracking import Tracker
from sweeper.sweep import run_sweep


@pytest.fixture
def tracking_server(tmp_path: Path):
    """An ``mlflow server`` on a sqlite file, artifacts served through it (sweeper.servers)."""
    with mlflow_server(f"sqlite:///{tmp_path}/server.db", tmp_path / "artifacts") as uri:
        yield uri


@pytest.mark.slow
def test_a_sweep_logs_to_a_tracking_server_in_parallel_and_resumes(
    composer, tracking_server, ray_local, monkeypatch
):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    overrides = [
        "task=toy",
        "horizon=300",
        "seeds=10",
        "+toy.fail_seeds=[4]",
        "experiment.name=server",
        f"tracking.uri={tracking_server}",
        "tracking.batch_size=3",
    ]
    out = io.StringIO()
    first = run_sweep(composer(overrides), composer, overrides, out=out)
    assert first.finished == 9 and len(first.failed) == 1
    assert "View run" not in out.getvalue()
    tracker = Tracker(tracking_server, "server")
    assert tracker.remote
    runs = [r for r in tracker.runs("") if "cell_key" in r.data.tags]
    assert Counter(r.info.status for r in runs) == {"FINISHED": 9, "FAILED": 1}
    # Artifacts go through the server: the cell's npz and the sweep's table come back.
    client = MlflowClient(tracking_server)
    finished = next(r for r in runs if r.info.status == "FINISHED")
    assert Path(client.download_artifacts(finished.info.run_id, "cell.npz")).stat().st_size
    index = read_index(tracker)
    assert len(index.finished) == 9 and index.tables == 1 and index.searched_runs == 0

    again = run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
    assert again.skipped == 9 and len(again.failed) == 1 and len(again.table) == 10
