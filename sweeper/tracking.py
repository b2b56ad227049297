"""MLflow layout (DESIGN.md, Contracts: Tracking). Only the driver writes here.

One MLflow experiment per exp; one parent run per sweep (tag ``sweep_key``) holding the
experiment config and, as ``cells.parquet``, one consolidated row per cell (columns
cell_key, run_id, status, algorithm, tuner, dataset, seed, error, config (JSON), the
summary metrics, curve_step and curve_regret (the downsampled regret curve) and
hp_<name> (each tuned hyperparameter downsampled at the same steps)) so reports never
download a thousand artifacts; one
child run per cell tagged ``cell_key``, ``algorithm``, ``tuner``, ``dataset``, ``seed``,
with the flattened cell config as params, the summary and the downsampled regret curve
(``regret`` by ``step``) as metrics, and the full curves and hyperparameter trace as
``cell.npz``. A FAILED cell is a FAILED run with ``traceback.txt`` and an ``error`` tag.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag, ViewType

from sweeper.cells import Cell, flatten
from sweeper.execute import Outcome

CURVE_POINTS = 500
CELLS_TABLE = "cells.parquet"
CELL_ARTIFACT = "cell.npz"
MAX_PARAM_LENGTH = 500
PAGE = 10_000


def downsample(curve: np.ndarray, points: int = CURVE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``points`` (round, value) pairs, evenly spaced, always with the last round."""
    n = len(curve)
    index = np.unique(np.linspace(0, n - 1, min(points, n)).round().astype(int))
    return index + 1, np.asarray(curve)[index]


def resolve_uri(uri: str | None) -> str:
    """$MLFLOW_TRACKING_URI wins; else the configured URI (default: a local sqlite store)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or uri or "sqlite:///mlflow.db"


class Tracker:
    """The driver's MLflow writer and the resume index."""

    def __init__(self, uri: str | None, experiment: str) -> None:
        self.uri = resolve_uri(uri)
        self.client = MlflowClient(tracking_uri=self.uri)
        self.experiment_name = experiment
        found = self.client.get_experiment_by_name(experiment)
        if found is None:
            self.experiment_id = self.client.create_experiment(
                experiment, artifact_location=self._artifact_location(experiment)
            )
        else:
            if found.lifecycle_stage == "deleted":
                self.client.restore_experiment(found.experiment_id)
            self.experiment_id = found.experiment_id

    def _artifact_location(self, experiment: str) -> str | None:
        """Beside a local sqlite store, artifacts go to ``mlartifacts/`` next to the file."""
        if self.uri.startswith("sqlite:///"):
            db = Path(self.uri.removeprefix("sqlite:///")).resolve()
            return (db.parent / "mlartifacts" / experiment).as_uri()
        return None

    # --- resume index -------------------------------------------------------------
    def runs(self, filter_string: str = "") -> list[Any]:
        runs, token = [], None
        while True:
            page = self.client.search_runs(
                [self.experiment_id],
                filter_string=filter_string,
                run_view_type=ViewType.ACTIVE_ONLY,
                max_results=PAGE,
                page_token=token,
            )
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    def finished_cells(self) -> dict[str, Any]:
        """cell_key -> the newest FINISHED run of that cell."""
        finished: dict[str, Any] = {}
        for run in self.runs("attributes.status = 'FINISHED'"):
            key = run.data.tags.get("cell_key")
            if key and (key not in finished or run.info.start_time > finished[key].info.start_time):
                finished[key] = run
        return finished

    # --- parent run -----------------------------------------------------------------
    def parent_run(self, sweep_key: str, config_yaml: str, description: str = "") -> str:
        """The sweep's parent run, reused when the same sweep is started again."""
        found = self.runs(f"tags.sweep_key = '{sweep_key}'")
        if found:
            run_id = found[0].info.run_id
            self.client.update_run(run_id, status="RUNNING")
            return run_id
        run = self.client.create_run(
            self.experiment_id,
            run_name=f"sweep-{sweep_key[:8]}",
            tags={"sweep_key": sweep_key, "role": "sweep", "mlflow.note.content": description},
        )
        self.client.log_text(run.info.run_id, config_yaml, "config.yaml")
        return run.info.run_id

    def finish_parent(self, run_id: str, summary: Mapping[str, float], failed: bool) -> None:
        now = int(time.time() * 1000)
        metrics = [Metric(k, float(v), now, 0) for k, v in summary.items()]
        self.client.log_batch(run_id, metrics=metrics)
        self.client.set_terminated(run_id, "FAILED" if failed else "FINISHED")

    def write_cells_table(self, run_id: str, table: pd.DataFrame) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / CELLS_TABLE
            table.to_parquet(path, index=False)
            self.client.log_artifact(run_id, str(path))

    def read_cells_table(self, run_id: str) -> pd.DataFrame | None:
        try:
            with tempfile.TemporaryDirectory() as tmp:
                path = self.client.download_artifacts(run_id, CELLS_TABLE, tmp)
                return pd.read_parquet(path)
        except Exception:
            return None

    # --- cell runs ------------------------------------------------------------------
    def log_cell(self, cell: Cell, outcome: Outcome, parent_id: str | None) -> dict[str, Any]:
        """Record one cell as a run; return its row for the consolidated table."""
        tags = dict(cell.tags)
        tags["node"] = outcome.node_ip or outcome.node
        if parent_id:
            tags["mlflow.parentRunId"] = parent_id
        if outcome.error:
            tags["error"] = outcome.error[:5000]
        run = self.client.create_run(self.experiment_id, run_name=cell.label, tags=tags)
        run_id = run.info.run_id
        now = int(time.time() * 1000)

        params = {k: _param_value(v) for k, v in flatten(cell.config).items()}
        result = outcome.result or {}
        params.update({k: _param_value(v) for k, v in result.get("params", {}).items()})
        param_list = [Param(k, v) for k, v in params.items()]
        metrics = [Metric("wall_s", outcome.wall_s, now, 0)]
        row: dict[str, Any] = {
            "cell_key": cell.key,
            "run_id": run_id,
            "status": outcome.status,
            **{k: cell.tags.get(k) for k in ("algorithm", "tuner", "dataset")},
            "seed": cell.config.get("seed"),
            "error": outcome.error,
            "config": json.dumps(cell.config, sort_keys=True, default=str),
        }
        if outcome.status == "FINISHED":
            summary = result.get("summary", {})
            metrics += [Metric(k, float(v), now, 0) for k, v in summary.items()]
            steps, values = downsample(result["curves"]["regret"])
            metrics += [
                Metric("regret", float(v), now, int(s)) for s, v in zip(steps, values, strict=True)
            ]
            row.update({k: float(v) for k, v in summary.items()})
            row["curve_step"] = steps.tolist()
            row["curve_regret"] = values.tolist()
            trace = result.get("trace", {})
            for i, name in enumerate(trace.get("names", [])):
                row[f"hp_{name}"] = downsample(np.asarray(trace["values"])[:, i])[1].tolist()
        param_chunks = [param_list[i : i + 100] for i in range(0, len(param_list), 100)]
        metric_chunks = [metrics[i : i + 900] for i in range(0, len(metrics), 900)]
        for i in range(max(len(param_chunks), len(metric_chunks))):
            self.client.log_batch(
                run_id,
                params=param_chunks[i] if i < len(param_chunks) else [],
                metrics=metric_chunks[i] if i < len(metric_chunks) else [],
            )
        if outcome.status == "FINISHED":
            self._log_npz(run_id, result)
        elif outcome.traceback:
            self.client.log_text(run_id, outcome.traceback, "traceback.txt")
        self.client.set_terminated(run_id, outcome.status)
        return row

    def _log_npz(self, run_id: str, result: Mapping[str, Any]) -> None:
        arrays: dict[str, np.ndarray] = {}
        for key, value in result.get("curves", {}).items():
            arrays[f"curve_{key}"] = np.asarray(value)
        for key, value in result.get("trace", {}).items():
            arrays[f"trace_{key}"] = np.asarray(value)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / CELL_ARTIFACT
            path.write_bytes(buffer.getvalue())
            self.client.log_artifact(run_id, str(path))

    def row_from_run(self, cell: Cell, run: Any) -> dict[str, Any]:
        """Rebuild a finished cell's table row from its run (when the table missed it)."""
        history = sorted(
            self.client.get_metric_history(run.info.run_id, "regret"), key=lambda m: m.step
        )
        summary = {k: v for k, v in run.data.metrics.items() if k != "regret"}
        return {
            "cell_key": cell.key,
            "run_id": run.info.run_id,
            "status": "FINISHED",
            **{k: cell.tags.get(k) for k in ("algorithm", "tuner", "dataset")},
            "seed": cell.config.get("seed"),
            "error": None,
            "config": json.dumps(cell.config, sort_keys=True, default=str),
            **summary,
            "curve_step": [m.step for m in history],
            "curve_regret": [m.value for m in history],
        }

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])


def _param_value(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, list | dict) else str(value)
    return text if len(text) <= MAX_PARAM_LENGTH else text[: MAX_PARAM_LENGTH - 3] + "..."
