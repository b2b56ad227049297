"""Cells and their keys.

A cell is one call of a task's cell function on a resolved config. Its key is the
SHA-256 of the canonical JSON of that config; orchestration settings (tracking,
launcher, the sweep's own axes and seed count, the experiment's name) are not part of
a cell, so changing where results go never changes a key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

ORCHESTRATION_KEYS = frozenset(
    {"tracking", "launcher", "sweep", "seeds", "experiment", "rerun", "report", "hydra"}
)
"""Top-level config keys that describe how to run a sweep, not what a cell computes."""

TAG_GROUPS = ("algorithm", "tuner", "dataset")
"""Config groups whose ``name`` tags every run."""

ABSENT = "none"
"""The tag of a group a cell does not use (e.g. ``algorithm`` in the Lipschitz benchmark)."""


def canonical_json(config: Mapping[str, Any]) -> str:
    return json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)


def cell_key(config: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical cell config."""
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()


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


@dataclass(frozen=True)
class Cell:
    """What one Ray task runs: ``function`` (a dotted path) applied to ``config``."""

    config: dict[str, Any]

    @cached_property
    def key(self) -> str:
        return cell_key(self.config)

    @property
    def function(self) -> str:
        return self.config["cell"]

    @cached_property
    def tags(self) -> dict[str, str]:
        tags = {"cell_key": self.key, "seed": str(self.config.get("seed"))}
        for group in TAG_GROUPS:
            spec = self.config.get(group)
            tags[group] = str(spec.get("name", "")) if isinstance(spec, Mapping) else ABSENT
        return dict(tags)

    @property
    def label(self) -> str:
        t = self.tags
        parts = [t[g] for g in TAG_GROUPS if t.get(g) and t[g] != ABSENT]
        return "/".join(parts + [f"seed{t['seed']}"])
