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
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sweeper.tree import canonical_json, select

ORCHESTRATION_KEYS = frozenset(
    {
        "tracking",
        "launcher",
        "sweep",
        "seeds",
        "experiment",
        "rerun",
        "report",
        "hydra",
        "dry_run",
        "baseline",
    }
)
"""Top-level config keys that describe how to run a sweep, not what a cell computes."""

TASK_KEY = "task"
"""The cell config's family identity, ``{name, result_version}``, hashed into the key."""

ABSENT = "none"
"""The tag of a group a cell does not use (e.g. a bottom layer in a tuner-only benchmark)."""

LEGACY_VERSION = 1
"""Keys made before result versions existed hashed the config without its ``task`` entry;
runs stored under them are results of version 1 of their family (see :func:`legacy_key`)."""


FIRST_NAMES = {"sweeper_tasks.": "tasks."}
"""Import names renamed since keys were first made, each hashed under its first name: the
research code installs as ``sweeper_tasks`` (it was ``tasks``, which a user's ``tasks.py``
shadowed), and a key must not change with where its code is installed, so every stored run
and published cell keeps its key. A dotted path (``cell``, ``_target_``) that begins with a
renamed name is hashed as if it began with the first one."""


def cell_key(config: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical cell config, import paths under their first names."""
    text = canonical_json(config)
    for name, first in FIRST_NAMES.items():
        text = text.replace(f'"{name}', f'"{first}')
    return hashlib.sha256(text.encode()).hexdigest()


def legacy_key(config: Mapping[str, Any]) -> str | None:
    """The key the same cell had before result versions (its config without ``task``).

    Only a version-1 cell has one: a stored run under it is a result of the same code, and
    the driver carries it over to the new key instead of recomputing it (sweeper/store/migrate.py).
    """
    task = config.get(TASK_KEY)
    if not isinstance(task, Mapping) or task.get("result_version") != LEGACY_VERSION:
        return None
    return cell_key({k: v for k, v in config.items() if k != TASK_KEY})


def option_name(spec: Any) -> str:
    """A group's option as its runs are tagged: its ``name``, or :data:`ABSENT`."""
    return str(spec.get("name", "")) if isinstance(spec, Mapping) else ABSENT


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
    other settings (dotted keys, :class:`AxisKey` when the experiment names them) that
    differ between the cells of its sweep. Each is a short tag of the run (``T1``, ``k``:
    MLflow's Group by offers tags) and leads its name, so that the runs table shows what
    the sweep compares before it cuts the name (``T1=0/k=1/linucb/cdt/simulation/seed0``).
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
            tags[group] = option_name(self.config.get(group))
        for name, text in self._varied:
            if name not in tags:
                tags[name] = text
        return tags

    @cached_property
    def _varied(self) -> list[tuple[str, str]]:
        """(short name, value text) of each varying setting the cell has."""
        axes = [k if isinstance(k, AxisKey) else AxisKey(k) for k in self.varying]
        values = [(a, select(self.config, a)) for a in axes]
        return [(a.tag, a.text(value)) for a, value in values if value is not None]

    @cached_property
    def setting(self) -> str:
        """The run name without the seed: what the cells of one row of a summary share."""
        parts = [f"{name}={text}" for name, text in self._varied]
        groups = (self.tags[g] for g in self.groups)
        parts += [g for g in groups if g not in ("", ABSENT)]
        return "/".join(parts)

    @property
    def label(self) -> str:
        return "/".join(p for p in (self.setting, f"seed{self.tags['seed']}") if p)


LONG_VALUE = 24
"""A value whose text is longer (e.g. a list of 50 candidates) is tagged by its length."""


class AxisKey(str):
    """A dotted config key a sweep varies (it is that string), with the short name its
    runs are tagged by and its value labels: the experiment's ``report.axes`` entry
    (``tuner.warmup_multiplier: {name: T1, labels: {"0": 0.0, ...}}``), else the key's
    last part and the values' own text."""

    tag: str
    labels: dict[str, Any]

    def __new__(cls, key: str, name: str | None = None, labels: Mapping[str, Any] | None = None):
        self = super().__new__(cls, key)
        self.tag = str(name or key.rsplit(".", 1)[-1])
        self.labels = dict(labels or {})
        return self

    def text(self, value: Any) -> str:
        """The value's label, else its compact text; a long list by its length."""
        wanted = canonical_json({"v": value})
        for label, labelled in self.labels.items():
            if canonical_json({"v": labelled}) == wanted:
                return str(label)
        text = short(value)
        if len(text) > LONG_VALUE and isinstance(value, list | tuple):
            return f"{len(value)} values"
        return text


class Variation:
    """Which of ``candidates`` (dotted keys) take more than one value over the configs
    :meth:`add` was given (the seed aside): what a run name must show to tell cells apart.
    ``names`` is the experiment's ``report.axes`` section, whose ``name`` and ``labels``
    the varying keys take (:class:`AxisKey`)."""

    def __init__(self, candidates: Sequence[str], names: Mapping[str, Any] | None = None) -> None:
        self._seen: dict[str, set[str]] = {k: set() for k in dict.fromkeys(candidates)}
        self._seen.pop("seed", None)
        self._names = {str(k): v for k, v in (names or {}).items() if isinstance(v, Mapping)}

    def add(self, config: Mapping[str, Any]) -> None:
        for key, seen in self._seen.items():
            if len(seen) < 2:  # two values already make it vary
                seen.add(canonical_json({"v": select(config, key)}))

    @property
    def varying(self) -> tuple[AxisKey, ...]:
        named = [(k, self._names.get(k, {})) for k, seen in self._seen.items() if len(seen) > 1]
        return tuple(AxisKey(k, n.get("name"), n.get("labels")) for k, n in named)
