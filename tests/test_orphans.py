"""Issue #27, item 2: a store that failed mid-sweep left the artifact directories of runs it
never committed (136-200 per event). The next start removes those it can prove were never
committed: named by a failed batch's manifest, with no run in the store."""

from __future__ import annotations

import io
from pathlib import Path

from mlflow import MlflowClient

from sweeper.store.bulk import BulkWriter
from sweeper.sweep import run_sweep


def _run_dirs(tracking_uri: str, name: str) -> set[str]:
    root = Path(tracking_uri.removeprefix("sqlite:///")).parent / "mlartifacts" / name
    return {p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()


def test_a_failed_batch_leaves_no_artifact_directory_after_the_next_start(
    composer, tracking_uri, monkeypatch
):
    name = "orphans"
    overrides = ["task=toy", "launcher.name=local", "seeds=6", "horizon=10",
                 "tracking.batch_size=3", f"tracking.uri={tracking_uri}",
                 f"experiment.name={name}"]  # fmt: skip
    original, batches = BulkWriter.write, []

    def second_fails(self, records):
        batches.append(len(records))
        if len(batches) == 2:
            raise OSError(28, "No space left on device")  # not waited for: exit 3
        return original(self, records)

    with monkeypatch.context() as patch:
        patch.setattr(BulkWriter, "write", second_fails)
        first = run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
    assert first.exit_code == 3 and "No space left" in first.store_error
    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(name).experiment_id
    runs = {r.info.run_id for r in client.search_runs([experiment])}
    orphans = _run_dirs(tracking_uri, name) - runs
    assert len(orphans) == 3  # the failed batch's cells: files written, runs never committed

    out = io.StringIO()
    second = run_sweep(composer(overrides), composer, overrides, out=out)
    assert second.exit_code == 0 and second.finished == 3, out.getvalue()
    assert "3 artifact director(ies) of runs a failed batch never committed removed" in (
        out.getvalue()
    )
    runs = {r.info.run_id for r in client.search_runs([experiment])}
    assert _run_dirs(tracking_uri, name) <= runs
