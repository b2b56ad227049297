"""Read an experiment back from MLflow for the report and ``sweeper.load``, through the
store's one reader (:mod:`sweeper.store.reader`: which run is each cell's result, the same
answer resume and the dry run get).

Each sweep's parent run contributes its ``config.yaml``, its table's rows (one download per
sweep) and its seeds-until-decided ``decisions.json``; a chosen run that no table holds (a
sweep killed before it wrote its table) is rebuilt from the run itself: its metrics, the step
history of each curve its family declares and its params. Cell artifacts (``cell.npz``) are
never downloaded here. The family's vocabulary (groups, curves, metrics: sweeper/task.py) is
the one recorded in the newest sweep's config.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sweeper.configs import ConfigSearch
from sweeper.errors import SweepError
from sweeper.provenance import LIBRARIES_TAG, mixed_libraries
from sweeper.store.reader import Experiment, read
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


def open_experiment(name: str, uri: str) -> Experiment:
    """Experiment ``name`` of the store at ``uri``, for reading; a :class:`ReportError` naming
    what is there when there is no such store or experiment."""
    try:
        return Experiment(uri, name)
    except SweepError as err:
        raise ReportError(str(err).replace("tracking.uri", "--tracking-uri")) from None


def load_experiment(name: str, uri: str, configs: ConfigSearch | None = None) -> Loaded:
    """Experiment ``name`` of the store at ``uri``: one row per cell (its result's row)."""
    experiment = open_experiment(name, uri)
    parents = experiment.sweep_parents()
    sweep_configs, decisions = [], []
    for parent in parents:
        config = experiment.sweep_config(parent, WITHOUT)
        if config is not None:
            sweep_configs.append(config)
        decisions = experiment.decisions(parent, WITHOUT) or decisions  # the newest sweep's
    reading = read(experiment, columns=None, parents=parents)
    notes = [f"sweep run {run_id} {why}; its cells come from runs"
             for run_id, why in reading.untrusted]  # fmt: skip
    newest = sweep_configs[-1] if sweep_configs else {}
    task = task_of_config(newest, configs or ConfigSearch.with_dirs())
    top_keys = _config_keys(sweep_configs)
    chosen = list(reading.results().values())
    rows, rebuilt = [], 0
    for candidate in chosen:
        if candidate.row is None:
            row = experiment.row_from_run(candidate.run, task.groups, task.curves, top_keys)
            rebuilt += 1
        else:
            row = dict(candidate.row)
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
            f"{rebuilt} cell(s) missing from the sweeps' tables were read from their "
            "runs' metrics (no hyperparameter trace for those)"
        )
    superseded = reading.superseded()
    if superseded:
        notes.append(
            f"{superseded} older run(s) of cells that were run again are ignored "
            "(the newest FINISHED run of each cell counts)"
        )
    notes += library_notes(r.get("libraries") for r in rows)
    _attach_marks(experiment, rows, chosen, task.markers)
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
        unfinished=[_unfinished(c) for c in reading.unfinished()],
        notes=notes,
        experiment_id=experiment.experiment_id,
        decisions=decisions,
    )


def _unfinished(candidate: Any) -> dict[str, Any]:
    run = candidate.run
    return {
        "cell_key": candidate.key,
        "run_id": candidate.run_id,
        "status": candidate.status,
        "label": run.info.run_name if run is not None else candidate.key[:12],
    }


def _attach_marks(experiment: Experiment, rows: list[dict], chosen: list, word: str | None) -> None:
    """:data:`MARKS` per row, for cells whose config has a key containing ``word``.

    A cell records such steps (e.g. a switching environment's change points) as a result
    param, the same for every seed of one config, so one run per distinct config (seed
    aside) is asked.
    """
    from sweeper.tree import canonical_json, flatten

    asked: dict[str, list[float]] = {}
    for row, candidate in zip(rows, chosen, strict=True):
        config = row.get("config") if isinstance(row.get("config"), Mapping) else {}
        if not word or not any(word in k.lower() for k in flatten(config)):
            row[MARKS] = []
            continue
        signature = canonical_json({k: v for k, v in config.items() if k != "seed"})
        if signature not in asked and row.get("status") == "FINISHED":
            run = candidate.run
            run = run if run is not None else experiment.client.get_run(candidate.run_id)
            asked[signature] = _marks(run.data.params, config, word)
        row[MARKS] = asked.get(signature, [])


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


def _marks(params: Mapping[str, str], config: Mapping[str, Any], word: str) -> list[float]:
    """Steps to mark on a cell's curves, if the cell recorded them.

    Looked up in the run's params (a cell's result params) and then in its config: any key
    containing ``word`` whose value is a list of steps (or a comma-separated string).
    """
    from sweeper.tree import flatten

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
