"""A sweep into an MLflow tracking server backed by PostgreSQL, the way teams run MLflow
(sweeper/servers.py starts PostgreSQL 15 and the server on 127.0.0.1). Slow: PostgreSQL's
initdb and the server's start take about half a minute here."""

from __future__ import annotations

import io
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from mlflow import MlflowClient

from sweeper.servers import mlflow_server, postgres
from sweeper.sweep import run_sweep

pytestmark = pytest.mark.slow


def test_a_sweep_into_a_postgresql_backed_server_records_each_cell_once_and_resumes(
    composer, tmp_path, ray_local
):
    with (
        tempfile.TemporaryDirectory(prefix="sweeper-pg-") as pg,  # reachable by postgres
        postgres(Path(pg)) as backend,
        mlflow_server(backend, tmp_path / "art") as uri,
    ):
        overrides = ["task=toy", "horizon=200", "seeds=12", f"tracking.uri={uri}",
                     "experiment.name=pg"]  # fmt: skip
        first = run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
        again = run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
        client = MlflowClient(uri)
        runs = client.search_runs([client.get_experiment_by_name("pg").experiment_id])
    cells = [r for r in runs if "cell_key" in r.data.tags]
    assert first.finished == 12 and again.skipped == 12 and again.finished == 0
    assert Counter(r.info.status for r in cells) == {"FINISHED": 12}
    assert len({r.data.tags["cell_key"] for r in cells}) == 12
    assert {len(r.data.metrics) > 2 for r in cells} == {True}  # summary and curve logged
