"""Issue #26, item 2: MLflow keeps 500 characters of a param, so a row the report rebuilt
from a run's params (its table lost the row) had a cut config. The whole config travels in
the cell's ``cell.npz``."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

from mlflow import MlflowClient

from sweeper.cellnpz import pack, unpack
from sweeper.report.load import load_experiment
from sweeper.sweep import run_sweep

NOTE = "".join(f"n{i:03d}" for i in range(250))  # 1,000 characters


def test_pack_carries_the_whole_config():
    config = {"seed": 3, "toy": {"note": NOTE}}
    data = unpack(pack({"curves": {"value": [1.0, 2.0]}}, config))
    assert data["config"] == config and list(data["curves"]["value"]) == [1.0, 2.0]
    assert pack({"summary": {"x": 1.0}}, config) is None  # nothing to plot: no file


def test_a_row_rebuilt_from_its_run_has_the_whole_config(composer, tracking_uri):
    overrides = ["task=toy", "launcher.name=local", "seeds=2", "horizon=10",
                 f"+toy.note={NOTE}", f"tracking.uri={tracking_uri}",
                 "experiment.name=long"]  # fmt: skip
    result = run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
    assert result.exit_code == 0
    client = MlflowClient(tracking_uri)
    parent = client.get_run(result.parent_run_id)
    param = client.search_runs([result.experiment_id], "tags.seed = '0'")[0].data.params
    assert len(param["toy.note"]) == 500 and param["toy.note"].endswith("...")
    # The sweep's table lost (as a table part deleted, its tags reset): rows from runs.
    local = parent.info.artifact_uri.removeprefix("file://")
    shutil.rmtree(f"{local}/cells", ignore_errors=True)
    (Path(local) / "cells.parquet").unlink()
    client.set_tag(parent.info.run_id, "table_until", "0")
    cells = load_experiment("long", tracking_uri).cells
    assert len(cells) == 2 and set(cells["source"]) == {"run"}
    assert all(config["toy"]["note"] == NOTE for config in cells["config"])
