"""Cells and their keys (docs/architecture.md, "The cell key").

A cell is one call of a task family's cell function on a resolved config. Its key is the
SHA-256 of the canonical JSON of that config, which holds the family's identity
(``task: {name, result_version}``): a family that bumps its result version never reuses a
stored result of older code. Orchestration settings (tracking, launcher, the sweep's own
axes and seed count, the experiment's name, the family's display vocabulary) are not part
of a cell, so changing where or how results are shown never changes a key.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

ORCHESTRATION_KEYS = frozenset(
    {"tracking", "launcher", "sweep", "seeds", "experiment", "rerun", "report", "hydra", "dry_run"}
)
"""Top-level config keys that describe how to run a sweep, not what a cell computes."""

TASK_KEY = "task"
"""The cell config's family identity, ``{name, result_version}``, hashed into the key."""

ABSENT = "none"
"""The tag of a group a cell does not use (e.g. a bottom layer in a tuner-only benchmark)."""

LEGACY_VERSION = 1
"""Keys made before result versions existed hashed the config without its ``task`` entry;
runs stored under them are results of version 1 of their family (see :func:`legacy_key`)."""


def canonical_json(config: Mapping[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)


def cell_key(config: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical cell config."""
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()


def legacy_key(config: Mapping[str, Any]) -> str | None:
    """The key the same cell had before result versions (its config without ``task``).

    Only a version-1 cell has one: a stored run under it is a result of the same code, and
    the driver carries it over to the new key instead of recomputing it (sweeper/migrate.py).
    """
    task = config.get(TASK_KEY)
    if not isinstance(task, Mapping) or task.get("result_version") != LEGACY_VERSION:
        return None
    return cell_key({k: v for k, v in config.items() if k != TASK_KEY})


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}; lists stay values."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def select(config: Mapping[str, Any], key: str) -> Any:
    """The value at dotted ``key`` of a nested config, or None."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def short(value: Any) -> str:
    """Compact text of a setting for run names: 1.0 -> '1', [0.1, 1.0] -> '[0.1,1]'."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float):
        return str(int(value)) if math.isfinite(value) and value.is_integer() else f"{value:g}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(short(v) for v in value) + "]"
    return str(value)


@dataclass(frozen=True)
class Cell:
    """What one Ray task runs: ``function`` (a dotted path) applied to ``config``.

    ``groups`` (the family's ``task.groups``) name and tag the run; ``varying`` lists the
    other settings (dotted keys) that differ between the cells of its sweep, so that the
    run name tells every cell of the sweep apart (``linucb/cdt/simulation/k=1/seed0``).
    """

    config: dict[str, Any]
    groups: tuple[str, ...] = ()
    varying: tuple[str, ...] = ()

    @cached_property
    def key(self) -> str:
        return cell_key(self.config)

    @cached_property
    def legacy_key(self) -> str | None:
        return legacy_key(self.config)

    @property
    def function(self) -> str:
        return self.config["cell"]

    @cached_property
    def tags(self) -> dict[str, str]:
        tags = {"cell_key": self.key, "seed": str(self.config.get("seed"))}
        for group in self.groups:
            spec = self.config.get(group)
            tags[group] = str(spec.get("name", "")) if isinstance(spec, Mapping) else ABSENT
        return tags

    @cached_property
    def setting(self) -> str:
        """The run name without the seed: what the cells of one row of a summary share."""
        parts = [self.tags[g] for g in self.groups if self.tags[g] not in ("", ABSENT)]
        values = [(k.rsplit(".", 1)[-1], select(self.config, k)) for k in self.varying]
        parts += [f"{name}={short(value)}" for name, value in values if value is not None]
        return "/".join(parts)

    @property
    def label(self) -> str:
        return "/".join(p for p in (self.setting, f"seed{self.tags['seed']}") if p)


class Variation:
    """Which of ``candidates`` (dotted keys) take more than one value over the configs
    :meth:`add` was given (the seed aside): what a run name must show to tell cells apart."""

    def __init__(self, candidates: Sequence[str]) -> None:
        self._seen: dict[str, set[str]] = {k: set() for k in dict.fromkeys(candidates)}
        self._seen.pop("seed", None)

    def add(self, config: Mapping[str, Any]) -> None:
        for key, seen in self._seen.items():
            if len(seen) < 2:  # two values already make it vary
                seen.add(canonical_json({"v": select(config, key)}))

    @property
    def varying(self) -> tuple[str, ...]:
        return tuple(k for k, seen in self._seen.items() if len(seen) > 1)
