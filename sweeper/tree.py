"""Nested config mappings, read as dotted keys: the small helpers the driver, the store and
the report share (no module of the driver, the store or the report is imported here)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def canonical_json(config: Mapping[str, Any]) -> str:
    """The config as JSON with sorted keys and no spaces: equal configs, equal text."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)


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


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """{'a.b': 1} -> {'a': {'b': 1}} (the inverse of :func:`flatten`)."""
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


def select(config: Mapping[str, Any], key: str) -> Any:
    """The value at dotted ``key`` of a nested config, or None."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node
