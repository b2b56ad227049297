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
from typing import Any

ORCHESTRATION_KEYS = frozenset(
    {"tracking", "launcher", "sweep", "seeds", "experiment", "rerun", "report", "hydra"}
)
"""Top-level config keys that describe how to run a sweep, not what a cell computes."""

TAG_GROUPS = ("algorithm", "tuner", "dataset")
"""Config groups whose ``name`` tags every run."""


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

    @property
    def key(self) -> str:
        return cell_key(self.config)

    @property
    def function(self) -> str:
        return self.config["cell"]

    @property
    def tags(self) -> dict[str, str]:
        tags = {"cell_key": self.key, "seed": str(self.config.get("seed"))}
        for group in TAG_GROUPS:
            spec = self.config.get(group)
            if isinstance(spec, Mapping):
                tags[group] = str(spec.get("name", ""))
        return tags

    @property
    def label(self) -> str:
        t = self.tags
        parts = [t.get(g, "") for g in TAG_GROUPS if t.get(g)]
        return "/".join(parts + [f"seed{t['seed']}"])
