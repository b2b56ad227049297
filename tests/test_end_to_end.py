"""A small real sweep: Hydra composition, Ray tasks, a temporary MLflow store."""

from __future__ import annotations

import io
import subprocess
import sys

import numpy as np
from mlflow import MlflowClient

from sweeper.sweep import run_sweep


def _sweep(composer, tracking_uri, *extra):
    overrides = ["+exp=smoke", "seeds=2", "horizon=150", f"tracking.uri={tracking_uri}", *extra]
    return run_sweep(composer(overrides), composer, overrides, out=io.StringIO())


def test_smoke_sweep_on_ray_records_every_cell(composer, tracking_uri, ray_local):
    result = _sweep(composer, tracking_uri)
    assert result.ok and result.finished == 12 and result.skipped == 0

    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("smoke")
    runs = client.search_runs([experiment.experiment_id])
    cells = [r for r in runs if "cell_key" in r.data.tags]
    parents = [r for r in runs if r.data.tags.get("role") == "sweep"]
    assert len(cells) == 12 and len(parents) == 1
    assert {r.info.status for r in cells} == {"FINISHED"}
    for run in cells:
        tags = run.data.tags
        assert {"cell_key", "algorithm", "tuner", "dataset", "seed"} <= set(tags)
        assert tags["mlflow.parentRunId"] == parents[0].info.run_id
        assert run.data.params["horizon"] == "150"
        assert run.data.metrics["final_regret"] > 0
        assert run.data.metrics["runtime_s"] > 0
    # The downsampled curve ends at the final regret; the artifact holds the full curve.
    run = cells[0]
    history = client.get_metric_history(run.info.run_id, "regret")
    assert len(history) == 100 and max(m.step for m in history) == 150  # tracking.METRIC_POINTS
    last = max(history, key=lambda m: m.step)
    assert np.isclose(last.value, run.data.metrics["final_regret"])
    path = client.download_artifacts(run.info.run_id, "cell.npz")
    with np.load(path) as npz:
        assert npz["curve_regret"].shape == (150,)
        assert np.isclose(npz["curve_regret"][-1], run.data.metrics["final_regret"])
    assert len(result.table) == 12 and set(result.table["status"]) == {"FINISHED"}


def test_rerunning_a_sweep_skips_finished_cells(composer, tracking_uri, ray_local):
    first = _sweep(composer, tracking_uri, "algorithm=linucb")
    second = _sweep(composer, tracking_uri, "algorithm=linucb")
    assert first.finished == 6 and second.finished == 0 and second.skipped == 6
    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("smoke")
    cells = [r for r in client.search_runs([experiment.experiment_id]) if "cell_key" in r.data.tags]
    assert len(cells) == 6
    assert len(second.table) == 6, "the resumed sweep's table still holds every cell"


def test_unknown_algorithm_fails_before_any_cell_runs(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sweeper",
            "+exp=smoke",
            "algorithm=nope",
            f"tracking.uri=sqlite:///{tmp_path}/mlflow.db",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2  # bad input (tests/test_command_line.py: the other names)
    assert "unknown algorithm 'nope'. Valid algorithm names are:" in done.stderr
    assert "linucb" in done.stderr and "lints" in done.stderr
    assert not (tmp_path / "mlflow.db").exists()
