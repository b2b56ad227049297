"""A task family's vocabulary: the ``task:`` block of its config (docs/architecture.md).

The orchestrator knows cells, axes, curves and summary metrics, never the words of one
family. Each family says them in ``conf/task/<family>.yaml``::

    task:
      name: bandit_tuning          # the family; with result_version, part of every cell key
      result_version: 1            # bump when a code change changes any cell's numbers
      groups: [algorithm, tuner, dataset]   # config groups that name and tag every run
      compare: tuner               # the axis drawn as lines and paired against the baseline
      lead: final_regret           # the summary metric the sweep's end and the report lead with
      metrics:                     # summary metrics: title, which way is better (or neither),
        final_regret: {title: Final cumulative regret, better: lower, table: regret}
                                   # and the name of its report table (default: its own)
      curves:                      # curves a cell returns, downsampled into the run and table
        regret: {title: cumulative regret, x: round t, better: lower}
      trace: hyperparameter        # what the cell's per-step trace holds (its figures' label)
      markers: change_point        # config/param keys holding this word mark steps on curves

Only ``name`` and ``result_version`` are part of a cell (its key and params); the rest
describes how to show the results and never changes a key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from sweeper.configs import ConfigSearch

BETTER = ("lower", "higher")
TASK_KEYS = {
    "check",
    "name",
    "result_version",
    "groups",
    "compare",
    "reference",
    "lead",
    "metrics",
    "curves",
    "trace",
    "markers",
}


class TaskError(ValueError):
    """A ``task:`` block that cannot describe a family."""


@dataclass(frozen=True)
class Metric:
    """A summary metric: its title and which way is better (None: neither)."""

    name: str
    title: str
    better: str | None = None
    table: str = ""

    @property
    def table_name(self) -> str:
        """The file name of its table in a report."""
        return self.table or self.name


@dataclass(frozen=True)
class Curve:
    """A per-step curve a cell returns: title (y-axis), x-axis label, which way is better."""

    name: str
    title: str
    x: str = "step"
    better: str | None = None


@dataclass(frozen=True)
class Task:
    """A family's vocabulary, parsed from its ``task:`` block (see the module docstring)."""

    name: str
    result_version: int = 1
    groups: tuple[str, ...] = ()
    compare: str | None = None
    reference: str | None = None  # read from sweeps recorded before ``baseline`` existed
    lead: str | None = None
    metrics: dict[str, Metric] = field(default_factory=dict)
    curves: dict[str, Curve] = field(default_factory=dict)
    trace: str = "setting"
    markers: str | None = None
    check: Mapping[str, Any] = field(default_factory=dict)  # sweeper.check's settings

    @property
    def identity(self) -> dict[str, Any]:
        """What a cell config holds of its family (hashed into the cell key)."""
        return {"name": self.name, "result_version": self.result_version}

    def metric(self, name: str) -> Metric:
        """The declared metric, or one titled by its own name with no better direction."""
        return self.metrics.get(name) or Metric(name, name)

    def better(self, name: str) -> str | None:
        """'min', 'max' or None for a summary metric (the report's bold-face direction)."""
        better = self.metric(name).better
        return {"lower": "min", "higher": "max"}.get(better or "")


GENERIC = Task(name="unnamed")
"""The vocabulary of a config without a task block: no groups, no curves, no lead."""


def _better(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if str(value) not in BETTER:
        raise TaskError(f"{where}.better is 'lower', 'higher' or absent, got {value!r}")
    return str(value)


def _entries(block: Any, where: str) -> dict[str, dict[str, Any]]:
    if block is None:
        return {}
    if not isinstance(block, Mapping):
        raise TaskError(f"{where} maps names to {{title, ...}}, got {block!r}")
    return {str(k): dict(v or {}) for k, v in block.items()}


def parse_task(block: Mapping[str, Any] | None) -> Task:
    """Validate a ``task:`` block; a missing block gives :data:`GENERIC`."""
    if block is None:
        return GENERIC
    if not isinstance(block, Mapping):
        raise TaskError(f"the task block maps vocabulary keys to values, got {block!r}")
    block = dict(block)
    unknown = set(block) - TASK_KEYS
    if unknown:
        raise TaskError(
            f"task block: unknown key(s) {sorted(unknown)}; valid keys are {sorted(TASK_KEYS)} "
            "(docs/architecture.md, 'The task block')"
        )
    if not block.get("name"):
        raise TaskError(
            "task.name is missing: name the family (task.name: NAME, as in conf/task/NAME.yaml)"
        )
    version = block.get("result_version", 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise TaskError(f"task.result_version is a whole number >= 1, got {version!r}")
    groups = block.get("groups") or []
    if isinstance(groups, str) or not all(isinstance(g, str) for g in groups):
        raise TaskError(f"task.groups is a list of config group names, got {groups!r}")
    metrics = {
        name: Metric(
            name,
            str(spec.get("title") or name),
            _better(spec.get("better"), f"task.metrics.{name}"),
            str(spec.get("table") or ""),
        )
        for name, spec in _entries(block.get("metrics"), "task.metrics").items()
    }
    curves = {
        name: Curve(
            name,
            str(spec.get("title") or name),
            str(spec.get("x") or "step"),
            _better(spec.get("better"), f"task.curves.{name}"),
        )
        for name, spec in _entries(block.get("curves"), "task.curves").items()
    }
    shared = sorted(set(metrics) & set(curves))
    if shared:
        raise TaskError(
            f"task.metrics and task.curves both name {shared}: a run stores a summary metric "
            "and a curve under the same MLflow metric key, so the two would overwrite each "
            "other; give the curve its own name (for example best_<name>)"
        )
    return Task(
        name=str(block["name"]),
        result_version=version,
        groups=tuple(groups),
        compare=_optional(block.get("compare")),
        reference=_optional(block.get("reference")),
        lead=_optional(block.get("lead")),
        metrics=metrics,
        curves=curves,
        trace=str(block.get("trace") or "setting"),
        markers=_optional(block.get("markers")),
        check=dict(block.get("check") or {}),
    )


def _optional(value: Any) -> str | None:
    return None if value is None else str(value)


def task_of_config(config: Mapping[str, Any], configs: ConfigSearch) -> Task:
    """The vocabulary recorded with a sweep's config, else the family file that fits it.

    Sweeps recorded before the task block existed carry no ``task``: the family is then
    the one of the ``task/*.yaml`` files on the config search path whose cell function is
    the config's, else the one with the most of its groups in the config.
    """
    block = config.get("task")
    if isinstance(block, Mapping) and "groups" in block:
        return parse_task(block)
    families = _family_files(configs)
    cell = config.get("cell")
    for family in families:
        if cell is not None and family.get("cell") == cell:
            return parse_task(family.get("task"))
    overlap = [
        (sum(g in config for g in (family.get("task") or {}).get("groups") or []), i)
        for i, family in enumerate(families)
    ]
    best = max(overlap, default=(0, 0))
    if best[0] > 0:
        return parse_task(families[best[1]].get("task"))
    return parse_task(block) if isinstance(block, Mapping) else GENERIC


def _family_files(configs: ConfigSearch) -> list[dict[str, Any]]:
    families = []
    for path in (configs.find("task", name) for name in configs.options("task")):
        loaded = yaml.safe_load(path.read_text()) or {}
        if isinstance(loaded, Mapping) and isinstance(loaded.get("task"), Mapping):
            families.append(dict(loaded))
    return families
