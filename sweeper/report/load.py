"""Read an experiment back from MLflow (the layout of sweeper/store/tracking.py).

Each sweep's parent run (tag ``role=sweep``) contributes its ``config.yaml`` and its
consolidated ``cells.parquet`` (one download per sweep); one search per sweep lists only
the runs it logged after its table's last flush (tag ``table_until``), as the sweeper's
resume index does (beyond MAX_INDEX_PARENTS sweeps: one search of all cell runs). Unlike
the resume index, the report searches the sweeps that ended FINISHED too, and with a
margin of CLOCK_MARGIN_MS: it reads whatever state a store is in (a table edited or
restored by hand), and a cell missing from a report is worse than a few seconds' search. A cell
is represented by its newest FINISHED run, else its newest FAILED run; a chosen run that
no table holds (a sweep killed before it wrote its table) is rebuilt from the run itself:
its metrics, the step history of each curve its family declares and its params. Cell
artifacts (``cell.npz``) are never downloaded here. The family's vocabulary (groups,
curves, metrics: sweeper/task.py) is the one recorded in the newest sweep's config.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import yaml
from mlflow import MlflowClient

from sweeper.cellnpz import unpack
from sweeper.configs import ConfigSearch
from sweeper.errors import SweepError
from sweeper.provenance import LIBRARIES_TAG, mixed_libraries
from sweeper.store.index import MAX_INDEX_PARENTS
from sweeper.store.result import CLOCK_MARGIN_MS, result_of
from sweeper.store.table import CELLS_TABLE, CellTable, holds, run_artifacts
from sweeper.store.tracking import (
    CELL_ARTIFACT,
    MAX_PARAM_LENGTH,
    TABLE_RUNS,
    check_store,
    number_or_none,
    search_all,
)
from sweeper.task import Task, task_of_config

MARKS = "marks"
"""The cells' column of marked steps: the values of params or config keys that contain the
family's ``task.markers`` word (e.g. a switching environment's change points)."""
WITHOUT = "the report goes on without it"
LIBRARY_NOTE = "the cells were computed under "


class ReportError(ValueError):
    """Bad input to the report: an unknown experiment, a missing store, a bad report spec."""


@dataclass
class Loaded:
    """An experiment's cells, one row each, and the configs of its sweeps."""

    name: str
    uri: str
    cells: pd.DataFrame
    config: dict[str, Any]
    grid: dict[str, list[Any]]
    sweeps: int
    task: Task
    description: str = ""
    unfinished: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    experiment_id: str = ""
    decisions: list[dict[str, Any]] = field(default_factory=list)  # seeds until decided


def client_for(uri: str) -> MlflowClient:
    """An MLflow client, refusing to create an empty sqlite store where none exists."""
    if uri.startswith("sqlite:///"):
        path = Path(uri.removeprefix("sqlite:///"))
        if not path.exists():
            raise ReportError(
                f"no MLflow store at {path.resolve()} (tracking URI {uri}); run the sweep "
                "first (python -m sweeper +exp=NAME) or point --tracking-uri or "
                "$MLFLOW_TRACKING_URI at the store that holds it"
            )
    try:
        check_store(uri)
    except SweepError as err:
        raise ReportError(str(err).replace("tracking.uri", "--tracking-uri")) from None
    return MlflowClient(tracking_uri=uri)


@dataclass
class _Candidate:
    """One run of a cell, as a sweep table row and/or as the run itself."""

    run_id: str
    status: str
    start_time: int
    order: int
    row: dict[str, Any] | None = None
    run: Any = None


def load_experiment(name: str, uri: str, configs: ConfigSearch | None = None) -> Loaded:
    client = client_for(uri)
    experiment = client.get_experiment_by_name(name)
    if experiment is None or experiment.lifecycle_stage == "deleted":
        names = sorted(e.name for e in client.search_experiments())
        raise ReportError(
            f"no experiment '{name}' in the MLflow store {uri}; experiments there: "
            f"{', '.join(names) or 'none'}. Run it first: python -m sweeper +exp={name}"
        )
    experiment_id = experiment.experiment_id
    parents = sorted(
        search_all(client, experiment_id, "tags.role = 'sweep'"), key=lambda r: r.info.start_time
    )
    notes: list[str] = []
    sweep_configs: list[dict[str, Any]] = []  # each sweep's config.yaml, oldest first
    decisions: list[dict[str, Any]] = []
    candidates: dict[str, _Candidate] = {}
    order = 0

    def add(run_id: str, status: str, start: Any, row=None, run=None) -> None:
        nonlocal order
        order += 1
        found = candidates.get(run_id)
        if found is None:
            start = int(number_or_none(start) or 0)
            candidates[run_id] = _Candidate(run_id, status, start, order, row, run)
            return
        if row is not None:
            found.row = row
        if run is not None:  # the run's own status and start time are authoritative
            found.run, found.status, found.start_time = run, status, int(start)

    lean = len(parents) <= MAX_INDEX_PARENTS
    artifacts = run_artifacts(client)
    for parent in parents:
        run_id = parent.info.run_id
        config = artifacts.load(run_id, "config.yaml", _yaml_mapping, WITHOUT)
        if config is not None:
            sweep_configs.append(config)
        found = artifacts.load(run_id, "decisions.json", json.loads, WITHOUT)
        decisions = found if isinstance(found, list) else decisions  # the newest sweep's
        table = CellTable(artifacts, run_id).read()  # unreadable files: skipped, said
        until = 0
        if table is None:
            notes.append(f"sweep run {run_id} has no {CELLS_TABLE}; its cells come from runs")
        elif not _whole(table, parent):
            notes.append(f"sweep run {run_id}'s table lost rows; its cells come from runs")
        else:
            flushed = number_or_none(parent.data.tags.get("table_until")) or 0
            until = int(flushed) - CLOCK_MARGIN_MS
        if table is not None:
            for row in table.to_dict("records"):
                if row.get("run_id") and row.get("cell_key"):
                    add(str(row["run_id"]), str(row.get("status")), row.get("start_time"), row)
        if lean:  # only the runs logged after the table's last flush
            delta = search_all(
                client,
                experiment_id,
                f"tags.`mlflow.parentRunId` = '{run_id}' and attributes.end_time >= "
                f"{max(until, 0)}",
            )
            for run in delta:
                if run.data.tags.get("cell_key"):
                    add(run.info.run_id, run.info.status, run.info.start_time, run=run)
    if not lean:
        for run in search_all(client, experiment_id, "tags.cell_key != ''"):
            add(run.info.run_id, run.info.status, run.info.start_time, run=run)

    chosen, unfinished, superseded = _choose(candidates.values())
    top_keys = _config_keys(sweep_configs)
    newest = sweep_configs[-1] if sweep_configs else {}
    task = task_of_config(newest, configs or ConfigSearch.with_dirs())
    rows, rebuilt = [], 0
    for candidate in chosen:
        if candidate.row is None:
            row = _row_from_run(client, candidate.run, top_keys, task)
            rebuilt += 1
        else:
            row = {k: v for k, v in candidate.row.items() if not _is_missing(v)}
            if isinstance(row.get("config"), str):
                row["config"] = json.loads(row["config"])
        row["status"] = candidate.status
        row["start_time"] = candidate.start_time
        if not row.get("libraries") and candidate.run is not None:
            row["libraries"] = candidate.run.data.tags.get(LIBRARIES_TAG)
        if candidate.status == "FAILED" and not row.get("error"):
            tags = candidate.run.data.tags if candidate.run is not None else {}
            row["error"] = tags.get("error", "unknown error (no error tag)")
        rows.append(row)
    if rebuilt:
        notes.append(
            f"{rebuilt} cell(s) missing from the sweeps' {CELLS_TABLE} were read from their "
            "runs' metrics (no hyperparameter trace for those)"
        )
    if superseded:
        notes.append(
            f"{superseded} older run(s) of cells that were run again are ignored "
            "(the newest FINISHED run of each cell counts)"
        )
    notes += library_notes(r.get("libraries") for r in rows)
    _attach_marks(client, rows, chosen, task.markers)

    cells = pd.DataFrame(rows)
    if len(cells):
        cells["seed"] = pd.to_numeric(cells["seed"], errors="coerce").astype("Int64")
    return Loaded(
        name=name,
        uri=uri,
        cells=cells,
        config=newest,
        grid=_grid_axes(sweep_configs),
        sweeps=len(parents),
        task=task,
        description=str((newest.get("experiment") or {}).get("description") or ""),
        unfinished=unfinished,
        notes=notes,
        experiment_id=experiment_id,
        decisions=decisions,
    )


def _whole(table: pd.DataFrame, parent: Any) -> bool:
    """Whether the sweep's table still holds every run written into it (a lost part: no)."""
    ids = pa.table({"run_id": table["run_id"].astype(str)}) if "run_id" in table else pa.table({})
    return holds([ids], parent.data.tags.get(TABLE_RUNS))


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _choose(candidates) -> tuple[list[_Candidate], list[dict[str, Any]], int]:
    """Per cell key: its result (:func:`sweeper.store.result.result_of`: the newest FINISHED run,
    else the newest FAILED one).

    Cells with neither (runs left RUNNING or KILLED by a killed driver) come back apart.
    """
    by_key: dict[str, list[_Candidate]] = {}
    for candidate in candidates:
        key = candidate.row.get("cell_key") if candidate.row else None
        key = key or (candidate.run.data.tags.get("cell_key") if candidate.run else None)
        if key:
            by_key.setdefault(str(key), []).append(candidate)
    chosen, unfinished, superseded = [], [], 0
    for key, runs in by_key.items():
        runs.sort(key=lambda c: c.order)
        best = result_of(runs, lambda c: (c.status, c.start_time))
        if best is not None:
            chosen.append(best)
            superseded += len(runs) - 1
            continue
        newest = max(runs, key=lambda c: (c.start_time, c.order))
        unfinished.append(
            {
                "cell_key": key,
                "run_id": newest.run_id,
                "status": newest.status,
                "label": newest.run.info.run_name if newest.run is not None else key[:12],
            }
        )
    return chosen, unfinished, superseded


def _attach_marks(client: MlflowClient, rows: list[dict], chosen: list, word: str | None) -> None:
    """:data:`MARKS` per row, for cells whose config has a key containing ``word``.

    A cell records such steps (e.g. a switching environment's change points) as a result
    param, the same for every seed of one config, so one run per distinct config (seed
    aside) is asked.
    """
    from sweeper.cells import canonical_json, flatten

    asked: dict[str, list[float]] = {}
    for row, candidate in zip(rows, chosen, strict=True):
        config = row.get("config") if isinstance(row.get("config"), Mapping) else {}
        if not word or not any(word in k.lower() for k in flatten(config)):
            row[MARKS] = []
            continue
        signature = canonical_json({k: v for k, v in config.items() if k != "seed"})
        if signature not in asked and row.get("status") == "FINISHED":
            run = candidate.run if candidate.run is not None else client.get_run(candidate.run_id)
            asked[signature] = _marks(run.data.params, config, word)
        row[MARKS] = asked.get(signature, [])


def _yaml_mapping(data: bytes) -> dict | None:
    loaded = yaml.safe_load(data)
    return loaded if isinstance(loaded, dict) else None


def _config_keys(configs: list[dict[str, Any]]) -> set[str]:
    from sweeper.cells import ORCHESTRATION_KEYS

    keys: set[str] = set()
    for config in configs:
        keys |= {k for k in config if k not in ORCHESTRATION_KEYS}
    return keys


def _grid_axes(configs: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Every sweep.grid key (over all sweeps and blocks) with its values in grid order."""
    axes: dict[str, list[Any]] = {}
    for config in configs:
        grid = (config.get("sweep") or {}).get("grid")
        blocks = grid if isinstance(grid, list) else [grid] if isinstance(grid, dict) else []
        for block in blocks:
            if not isinstance(block, Mapping):
                continue
            for key, values in block.items():
                values = values if isinstance(values, list) else [values]
                known = axes.setdefault(str(key).lstrip("+"), [])  # +KEY: an added key
                for value in values:
                    if value not in known:
                        known.append(value)
    return axes


def _parse_param(text: str) -> Any:
    if text == "None":
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """{'a.b': 1} -> {'a': {'b': 1}} (the inverse of sweeper.cells.flatten)."""
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        node = nested
        *parents, last = key.split(".")
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                break
            node = child
        else:
            node[last] = value
    return nested


def _row_from_run(client: MlflowClient, run: Any, top_keys: set[str], task: Task) -> dict[str, Any]:
    """A cell's row rebuilt from its run: tags, metrics, curve histories, params."""
    tags = run.data.tags
    params = {k: _parse_param(v) for k, v in run.data.params.items()}
    if top_keys:
        params = {k: v for k, v in params.items() if k.split(".")[0] in top_keys}
    config = unflatten(params)
    if any(_cut(v) for v in run.data.params.values()):  # MLflow keeps 500 characters
        config = _whole_config(client, run) or config
    row: dict[str, Any] = {
        "cell_key": tags["cell_key"],
        "run_id": run.info.run_id,
        **{g: tags.get(g) for g in task.groups},
        "seed": tags.get("seed"),
        "error": tags.get("error"),
        "config": config,
        "source": "run",
    }
    if run.info.status == "FINISHED":
        row.update({k: v for k, v in run.data.metrics.items() if k not in task.curves})
        for name in (c for c in task.curves if c in run.data.metrics):
            history = sorted(client.get_metric_history(run.info.run_id, name), key=lambda m: m.step)
            row["curve_step"] = np.array([m.step for m in history])
            row[f"curve_{name}"] = np.array([m.value for m in history])
    return row


def _cut(text: str) -> bool:
    """Whether a param's value was cut to MLflow's length (sweeper/store/cellruns.py)."""
    return len(text) >= MAX_PARAM_LENGTH and text.endswith("...")


def _whole_config(client: MlflowClient, run: Any) -> dict[str, Any] | None:
    """The cell's whole config from its ``cell.npz`` (sweeper/cellnpz.py), or None (a
    FAILED cell has none: its params, cut to MLflow's length, are what there is)."""
    instead = "its config is read from its run's params, cut to MLflow's length"
    result = run_artifacts(client).load(run.info.run_id, CELL_ARTIFACT, unpack, instead)
    return None if result is None else result["config"]


def _marks(params: Mapping[str, str], config: Mapping[str, Any], word: str) -> list[float]:
    """Steps to mark on a cell's curves, if the cell recorded them.

    Looked up in the run's params (a cell's result params) and then in its config: any key
    containing ``word`` whose value is a list of steps (or a comma-separated string).
    """
    from sweeper.cells import flatten

    candidates = [v for k, v in params.items() if word in k.lower()]
    candidates += [v for k, v in flatten(config).items() if word in k.lower()]
    for value in candidates:
        points = _as_rounds(value)
        if points:
            return points
    return []


def _as_rounds(value: Any) -> list[float]:
    if isinstance(value, str):
        parsed = _parse_param(value)
        if isinstance(parsed, str):
            parsed = [p for p in parsed.strip("[]() ").replace(";", ",").split(",") if p.strip()]
        value = parsed
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = [value]
    try:
        points = [float(v) for v in value]
    except (TypeError, ValueError):
        return []
    return [p for p in points if np.isfinite(p)]


def library_notes(libraries: Iterable[str | None]) -> list[str]:
    """A note when the cells' ``sweeper.libraries`` tags name one library at two versions."""
    mixed = mixed_libraries(libraries)
    if not mixed:
        return []
    return [
        f"{LIBRARY_NOTE}several library versions ({mixed}): numbers may differ in their last "
        "digits between them; rerun=true recomputes every cell under one"
    ]
