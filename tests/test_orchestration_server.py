"""A sweep logging to an MLflow tracking server over HTTP, as on a cluster (slow: it starts
``mlflow server`` on the loopback interface)."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from mlflow import MlflowClient

from sweeper.sweep import run_sweep
from sweeper.tracking import Tracker


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def tracking_server(tmp_path: Path):
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            f"sqlite:///{tmp_path}/server.db",
            "--artifacts-destination",
            str(tmp_path / "artifacts"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"{uri}/health", timeout=2)
                break
            except OSError:
                assert server.poll() is None, "mlflow server exited"
                assert time.time() < deadline, "mlflow server did not start in 120 s"
                time.sleep(0.5)
        yield uri
    finally:  # the server and its web workers: the process group it leads
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


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
        "tracking.flush_every=3",
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
    index = tracker.resume_index()
    assert len(index.finished) == 9 and index.tables == 1 and index.searched_runs == 0

    again = run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
    assert again.skipped == 9 and len(again.failed) == 1 and len(again.table) == 10
