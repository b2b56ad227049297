"""A cell's run: built from its outcome, written through MLflow's API, rebuilt into a row
(docs/architecture.md, "The MLflow layout").

One child run per cell tagged ``cell_key``, its groups' option names, ``seed``, ``node`` and
the code that made it, with the flattened cell config as params, the summary and each
declared curve (by ``step``, at :data:`~sweeper.store.tracking.METRIC_POINTS` points) as
metrics, and the full curves and trace as ``cell.npz``; a FAILED cell is a FAILED run with
``traceback.txt`` and an ``error`` tag. The store knows a cell and its outcome only by the
attributes it reads (:class:`CellLike`, :class:`OutcomeLike`), not by the driver's classes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import numpy as np
from mlflow.entities import Metric, Param

from sweeper.cellnpz import pack, unpack
from sweeper.process import now_ms
from sweeper.provenance import LIBRARIES_TAG, code_tags
from sweeper.store.bulk import RunRecord
from sweeper.store.table import ArtifactIO
from sweeper.store.tracking import (
    CELL_ARTIFACT,
    CURVE_POINTS,
    MAX_PARAM_LENGTH,
    RUN_COLOR,
    Tracker,
)
from sweeper.tree import flatten


class CellLike(Protocol):
    """What the store reads of a cell (:class:`sweeper.cells.Cell` is one)."""

    key: str
    label: str
    config: dict[str, Any]
    tags: dict[str, str]
    groups: tuple[str, ...]


class OutcomeLike(Protocol):
    """What the store reads of a cell's outcome (:class:`sweeper.execute.Outcome` is one)."""

    status: str
    result: dict[str, Any] | None
    error: str | None
    traceback: str | None
    wall_s: float
    node_id: str | None
    artifact: bytes | None
    libraries: str

    @property
    def where(self) -> str: ...


def downsample(curve: np.ndarray, points: int = CURVE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``points`` (round, value) pairs, evenly spaced, always with the last round."""
    n = len(curve)
    index = np.unique(np.linspace(0, n - 1, min(points, n)).round().astype(int))
    return index + 1, np.asarray(curve)[index]


def record_of(
    tracker: Tracker,
    cell: CellLike,
    outcome: OutcomeLike,
    parent_id: str | None,
    supersedes: Iterable[str] = (),
    received_ms: int | None = None,
) -> tuple[RunRecord, dict[str, Any]]:
    """A cell's run (not yet written) and its row of the sweep's table.

    The run ends when the driver received the outcome (``received_ms``) and starts the
    cell's ``wall_s`` before, so MLflow's Duration is the cell's runtime. The resume
    index relies on the end: a run is written after its ``received_ms``, and the
    table's ``table_until`` mark is only moved past runs that are in the table. Curves
    are logged as step metrics at ``metric_points`` points (MLflow's charts); the table
    keeps :data:`CURVE_POINTS`.
    """
    received = now_ms() if received_ms is None else int(received_ms)
    start = received - int(round(outcome.wall_s * 1000))
    tags = dict(cell.tags)
    tags["node"] = outcome.where
    if outcome.node_id:
        tags["ray_node_id"] = outcome.node_id
    tags["sweeper.driver"] = tracker.driver
    tags.update(code_tags())
    if outcome.libraries:
        tags[LIBRARIES_TAG] = outcome.libraries
    if parent_id:
        tags["mlflow.parentRunId"] = parent_id
    if outcome.error:
        tags["error"] = outcome.error[:5000]
    axis, colours = tracker.colour_by
    if tags.get(axis) in colours:  # the run's colour in MLflow's UI (sweeper/ui.py)
        tags[RUN_COLOR] = colours[tags[axis]]
    result = outcome.result or {}
    params = {k: _param_value(v) for k, v in flatten(cell.config).items()}
    params.update({k: _param_value(v) for k, v in result.get("params", {}).items()})
    record = RunRecord(
        run_id=uuid.uuid4().hex,
        name=cell.label,
        status=outcome.status,
        start_time=start,
        end_time=received,
        tags=tags,
        params=params,
        metrics=[("wall_s", float(outcome.wall_s), 0)],
        supersedes=list(supersedes) if outcome.status == "FINISHED" else [],
    )
    row: dict[str, Any] = {
        "cell_key": cell.key,
        "run_id": record.run_id,
        "status": outcome.status,
        **{g: cell.tags.get(g) for g in cell.groups},
        "seed": cell.config.get("seed"),
        "error": outcome.error,
        "config": json.dumps(cell.config, sort_keys=True, default=str),
        "node": outcome.where,
        "wall_s": outcome.wall_s,
        "start_time": start,
        "libraries": outcome.libraries or None,
    }
    if outcome.status == "FINISHED":
        summary = {k: float(v) for k, v in result.get("summary", {}).items()}
        record.metrics += [(k, v, 0) for k, v in summary.items()]
        row.update(summary)
        curves = result.get("curves") or {}
        for name in tracker.task.curves:
            if name in curves:
                steps, values = downsample(np.asarray(curves[name]), tracker.metric_points)
                points = zip(values.tolist(), steps.tolist(), strict=True)
                record.metrics += [(name, v, step) for v, step in points]
        row.update(_curve_columns(result, tracker.task.curves))
        packed = outcome.artifact if outcome.artifact is not None else pack(result, cell.config)
        if packed is not None:
            record.artifacts[CELL_ARTIFACT] = packed
    elif outcome.traceback:
        record.artifacts["traceback.txt"] = outcome.traceback.encode()
    return record, row


def log_record(tracker: Tracker, record: RunRecord, commit: bool = True) -> None:
    """Write one run through MLflow's API (a store the driver cannot write in batches):
    create it with its tags, one ``log_batch`` per chunk of params and metrics, its
    artifacts; then (``commit``) its final status and the tags of the runs it supersedes
    (:func:`commit_record`). Until then the run is RUNNING: no reader takes it for the
    cell's result (:mod:`sweeper.store.result`)."""
    run = tracker.client.create_run(
        tracker.experiment_id, start_time=record.start_time, run_name=record.name,
        tags=record.tags,
    )  # fmt: skip
    record.run_id = record.created = run.info.run_id
    params = [Param(k, v) for k, v in record.params.items()]
    end = record.end_time
    metrics = [Metric(k, v, end, int(step)) for k, v, step in record.metrics]
    param_chunks = [params[i : i + 100] for i in range(0, len(params), 100)]
    metric_chunks = [metrics[i : i + 900] for i in range(0, len(metrics), 900)]
    for i in range(max(len(param_chunks), len(metric_chunks))):
        tracker.client.log_batch(
            record.run_id,
            params=param_chunks[i] if i < len(param_chunks) else [],
            metrics=metric_chunks[i] if i < len(metric_chunks) else [],
        )
    for name, data in record.artifacts.items():
        tracker.write_artifact(record.run_id, name, data, run.info.artifact_uri)
    if commit:
        commit_record(tracker, record)
        supersede(tracker, record)


def commit_record(tracker: Tracker, record: RunRecord) -> None:
    """Commit a run written through MLflow's API: its final status (FINISHED or FAILED).
    MLflow refuses to change a deleted run, so a run another driver retracted stays
    retracted (:func:`sweeper.store.settle.retract`)."""
    tracker.client.set_terminated(record.run_id, record.status, end_time=record.end_time)


def supersede(tracker: Tracker, record: RunRecord) -> None:
    """Tag the runs a committed run supersedes (a rerun) ``superseded_by`` it."""
    for old in record.supersedes:
        tracker.client.set_tag(old, "superseded_by", record.run_id)


def discard_attempts(tracker: Tracker, record_id: str) -> int:
    """Remove the runs an earlier attempt made of the record ``record_id`` (tag
    ``sweeper.record_id``): set KILLED, then deleted. Returns how many."""
    found = tracker.runs(f"tags.`sweeper.record_id` = '{record_id}'")
    for run in found:
        if run.info.status == "RUNNING":
            tracker.client.set_terminated(run.info.run_id, "KILLED")
        tracker.client.delete_run(run.info.run_id)
    return len(found)


def log_cell(
    tracker: Tracker,
    cell: CellLike,
    outcome: OutcomeLike,
    parent_id: str | None,
    supersedes: Iterable[str] = (),
) -> dict[str, Any]:
    """Record one cell through MLflow's API; return its table row."""
    record, row = record_of(tracker, cell, outcome, parent_id, supersedes)
    log_record(tracker, record)
    row["run_id"] = record.run_id
    return row


def row_from_run(tracker: Tracker, cell: CellLike, run: Any) -> dict[str, Any]:
    """Rebuild a finished cell's table row from its run (when no table had it): the
    summary from its metrics, the curve and hyperparameters from its ``cell.npz``
    (else the curves from their step metrics)."""
    if isinstance(run, str):
        run = tracker.client.get_run(run)
    curves = [c for c in tracker.task.curves if c in run.data.metrics]
    skip = {*curves, "wall_s"}
    summary = {k: v for k, v in run.data.metrics.items() if k not in skip}
    row = {
        "cell_key": cell.key,
        "run_id": run.info.run_id,
        "status": "FINISHED",
        **{g: cell.tags.get(g) for g in cell.groups},
        "seed": cell.config.get("seed"),
        "error": None,
        "config": json.dumps(cell.config, sort_keys=True, default=str),
        "node": run.data.tags.get("node"),
        "wall_s": run.data.metrics.get("wall_s"),
        "start_time": int(run.info.start_time),
        **summary,
    }
    result = _read_npz(tracker, run.info.run_id, run.info.artifact_uri)
    if result is not None:
        row.update(_curve_columns(result, tracker.task.curves))
    else:
        for name in curves:
            history = sorted(
                tracker.client.get_metric_history(run.info.run_id, name), key=lambda m: m.step
            )
            row["curve_step"] = [m.step for m in history]
            row[f"curve_{name}"] = [m.value for m in history]
    return row


def _read_npz(tracker: Tracker, run_id: str, artifact_uri: str) -> dict[str, Any] | None:
    """A cell's curves and trace back from its ``cell.npz``, or None (a FAILED cell has
    none; a damaged one is said): then its logged metrics are used."""
    artifacts = ArtifactIO(tracker.client, lambda _: tracker.artifact_dir(run_id, artifact_uri))
    instead = "its curves are rebuilt from its logged metrics"
    return artifacts.load(run_id, CELL_ARTIFACT, unpack, instead)


def _curve_columns(result: Mapping[str, Any], declared: Iterable[str]) -> dict[str, Any]:
    """The table's curve_step, curve_<name> (each ``declared`` curve the result has) and
    hp_<name> columns of a cell's result, as arrays of at most :data:`CURVE_POINTS`; the
    declared curves share one length."""
    columns: dict[str, Any] = {}
    curves = result.get("curves") or {}
    for name in declared:
        if name in curves:
            steps, values = downsample(np.asarray(curves[name]))
            columns["curve_step"] = steps
            columns[f"curve_{name}"] = values
    trace = result.get("trace") or {}
    names = [str(n) for n in trace.get("names", [])]
    if names:
        values = np.asarray(trace["values"], dtype=float)
        values = values[:, None] if values.ndim == 1 else values
        for i, name in enumerate(names):
            columns[f"hp_{name}"] = downsample(values[:, i])[1]
    return columns


def _param_value(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, list | dict) else str(value)
    return text if len(text) <= MAX_PARAM_LENGTH else text[: MAX_PARAM_LENGTH - 3] + "..."
