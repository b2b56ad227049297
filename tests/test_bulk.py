"""Runs written in batches straight into MLflow's database (sweeper/store/bulk.py) read back
exactly as the same runs written one call at a time through MLflow's API."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pytest
from mlflow import MlflowClient

from sweeper.servers import postgres
from sweeper.store.bulk import BulkWriter, RunRecord, database_of
from sweeper.store.cellruns import log_record
from sweeper.store.tracking import Tracker


def _record(name: str, start: int) -> RunRecord:
    return RunRecord(
        run_id="0" * 32,
        name=name,
        status="FINISHED",
        start_time=start,
        end_time=start + 1500,
        tags={"cell_key": f"key-{name}", "seed": "3", "note": "tab\tand\nnewline \\ done"},
        params={"horizon": "2000", "algorithm.name": "linucb", "empty": ""},
        metrics=[("final_regret", 12.5, 0), ("regret", 1.0, 1), ("regret", 4.0, 10),
                 ("regret", 2.5, 5), ("nan_metric", math.nan, 0), ("big", math.inf, 0)],
        artifacts={"cell.npz": b"npz bytes"},
    )  # fmt: skip


def _view(client: MlflowClient, run_id: str) -> dict:
    run = client.get_run(run_id)
    history = sorted((m.step, m.value) for m in client.get_metric_history(run_id, "regret"))
    return {
        "name": run.info.run_name,
        "status": run.info.status,
        "times": (run.info.start_time, run.info.end_time),
        "tags": {k: v for k, v in run.data.tags.items() if k != "mlflow.user"},
        "params": run.data.params,
        "metrics": {k: (v if not math.isnan(v) else "nan") for k, v in run.data.metrics.items()},
        "history": history,
        "artifacts": [a.path for a in client.list_artifacts(run_id)],
        "artifact_uri": run.info.artifact_uri.rsplit("/", 2)[-1],
    }


def _compare(uri: str, database: str) -> None:
    tracker = Tracker(uri, "bulk")
    api, bulk = _record("api", 1_700_000_000_000), _record("bulk", 1_700_000_000_000)
    log_record(tracker, api)
    writer = BulkWriter(database, tracker.experiment_id, tracker.artifact_location)
    bulk.run_id = "ab" * 16
    uri_of = writer.artifact_uri(bulk.run_id)
    tracker.write_artifact(bulk.run_id, "cell.npz", b"npz bytes", uri_of)
    writer.write([bulk])
    writer.write([bulk])  # a retry of a batch that did commit adds nothing
    bulk.written = False
    writer.write([bulk])  # nor does one that does not know it committed
    writer.close()
    a, b = _view(tracker.client, api.run_id), _view(tracker.client, bulk.run_id)
    assert a["name"] == "api" and b["name"] == "bulk"
    for view in (a, b):
        view.pop("name")
        view["tags"] = {k: v for k, v in view["tags"].items() if k not in ("mlflow.runName",)}
        view["tags"]["cell_key"] = view["tags"]["cell_key"].split("-")[0]
    assert a == b
    assert a["history"] == [(1, 1.0), (5, 2.5), (10, 4.0)] and a["metrics"]["regret"] == 4.0
    found = tracker.client.search_runs([tracker.experiment_id], "metrics.final_regret > 12")
    assert {r.info.run_name for r in found} == {"api", "bulk"}


def test_a_batch_written_into_sqlite_reads_back_as_mlflows_api_writes_it(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    _compare(uri, database_of(uri, None))


@pytest.mark.slow
def test_a_batch_copied_into_postgresql_reads_back_as_mlflows_api_writes_it():
    with tempfile.TemporaryDirectory(prefix="sweeper-pg-") as tmp, postgres(Path(tmp)) as db:
        _compare(db, db)


def test_which_database_the_driver_writes_into():
    assert database_of("sqlite:///m.db", None) == "sqlite:///m.db"
    assert database_of("http://head:5000", None) is None  # MLflow's API
    assert database_of("http://head:5000", "postgresql://db/mlflow") == "postgresql://db/mlflow"


def test_a_database_that_cannot_be_used_is_one_paragraph(tracking_uri):
    """(Opened before the parent run: sweeper/sweep.py's _sweep.) Only a tracking server
    takes a tracking.database of its own, so the writer is opened here directly."""
    from sweeper.errors import SweepError
    from sweeper.store.record import Batching, open_writer

    batching = Batching(database="postgresql+psycopg://nobody@127.0.0.1:1/x")
    with pytest.raises(
        SweepError,
        match="tracking.database.*Connection refused.*start the database.*mlflow db upgrade",
    ):
        open_writer(batching, Tracker(tracking_uri, "nodb"))
