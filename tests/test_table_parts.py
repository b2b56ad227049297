"""A lost or damaged part of a sweep's table never makes its cells run again (issue #27,
item 1): the runs are the truth and the table their cache, rebuilt from them."""

from __future__ import annotations

import io
from collections import Counter

import pytest
from mlflow import MlflowClient

from sweeper.report.load import load_experiment
from sweeper.store.table import CellTable
from sweeper.sweep import run_sweep

CELLS = 6


def _sweep(composer, tracking_uri: str):
    overrides = ["task=toy", "launcher.name=local", f"seeds={CELLS}", "horizon=5",
                 "tracking.batch_size=2", "tracking.batch_s=60", f"tracking.uri={tracking_uri}",
                 "experiment.name=parts"]  # fmt: skip
    out = io.StringIO()
    return run_sweep(composer(overrides), composer, overrides, out=out), out.getvalue()


def _finished_per_cell(tracking_uri: str) -> Counter:
    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("parts")
    runs = client.search_runs([experiment.experiment_id], "attributes.status = 'FINISHED'")
    return Counter(r.data.tags["cell_key"] for r in runs if "cell_key" in r.data.tags)


@pytest.mark.parametrize("damage", ["delete", "truncate"])
def test_a_lost_part_is_rebuilt_from_the_runs_not_recomputed(
    composer, tracking_uri, monkeypatch, damage
):
    # A driver killed after its last part, before the parts were consolidated, leaves
    # them as they are (the first sweep runs without consolidating, as such a driver).
    with monkeypatch.context() as patch:
        patch.setattr(CellTable, "consolidate", lambda self: None)
        first, _ = _sweep(composer, tracking_uri)
    assert first.finished == CELLS
    parts = sorted((first_table_dir(tracking_uri, first.parent_run_id)).glob("part-*.parquet"))
    assert len(parts) == CELLS // 2
    if damage == "delete":
        parts[1].unlink()
    else:
        parts[1].write_bytes(parts[1].read_bytes()[:40])
    report = load_experiment("parts", tracking_uri)  # the report finds every cell too
    assert len(report.cells) == CELLS and set(report.cells["status"]) == {"FINISHED"}
    again, out = _sweep(composer, tracking_uri)
    assert (again.skipped, again.finished) == (CELLS, 0), out
    assert "1 sweep table(s) lost rows" in out and "2 table row(s) rebuilt" in out
    assert set(_finished_per_cell(tracking_uri).values()) == {1}
    assert len(again.table) == CELLS  # the table is whole again


def first_table_dir(tracking_uri: str, parent: str):
    from sweeper.store.table import local_artifact_dir

    run = MlflowClient(tracking_uri).get_run(parent)
    return local_artifact_dir(run.info.artifact_uri) / "cells"
