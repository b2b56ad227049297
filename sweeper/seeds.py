"""The seed budget: ``seeds: N`` (seeds 0..N-1 for every setting) or seeds until decided
(docs/seeds.md)::

    seeds: {until: decided, min: 10, max: 40, step: 5, alpha: 0.05, precision: 0.02}

Each group (every grid setting but the compare axis and the seed) starts with ``min`` seeds
and gets ``step`` more while one of its paired comparisons against the reference is
undecided (:mod:`sweeper.adaptive`), up to ``max``. ``precision`` is relative to the
reference's mean of the lead metric. The grid is the ``max`` seeds' cells: a cell's key is
the same as in a fixed sweep, so the two share every cell run. ``speculate`` (default true)
lets CPUs that would otherwise idle run the next step of comparisons still open, ahead of
the rule (:meth:`sweeper.adaptive.AdaptiveSeeds.speculate`); the decisions do not change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from sweeper.errors import SweepError, whole_number

KEYS = ("until", "min", "max", "step", "alpha", "precision", "speculate")


@dataclass(frozen=True)
class SeedBudget:
    """Seeds until decided: see the module docstring."""

    min: int = 10
    max: int = 40
    step: int = 5
    alpha: float = 0.05
    precision: float = 0.02
    speculate: bool = True


def budget_of(cfg: DictConfig) -> SeedBudget | None:
    """The budget ``seeds`` sets, or None for a seed count (or no ``seeds``); a one-paragraph
    :class:`SweepError` naming the setting for a bad one."""
    seeds = cfg.get("seeds")
    if not OmegaConf.is_dict(seeds) and not isinstance(seeds, dict):
        return None
    given = dict(OmegaConf.to_container(seeds) if OmegaConf.is_dict(seeds) else seeds)
    unknown = sorted(set(given) - set(KEYS))
    if unknown or given.get("until") != "decided":
        raise SweepError(
            f"seeds={given}: a seed budget is seeds={{until: decided, min: 10, max: 40, "
            "step: 5, alpha: 0.05, precision: 0.02, speculate: true}} (every key but until "
            f"optional){f'; unknown key(s) {unknown}' if unknown else ''}; or give a number "
            "of seeds (seeds=20)"
        )
    budget = SeedBudget(
        min=whole_number(given.get("min", 10), "seeds.min", 2, "seeds.min is at least 2"),
        max=whole_number(given.get("max", 40), "seeds.max", 2, "seeds.max is at least 2"),
        step=whole_number(given.get("step", 5), "seeds.step", 1, "seeds.step is at least 1"),
        alpha=_fraction(given.get("alpha", 0.05), "seeds.alpha"),
        precision=_fraction(given.get("precision", 0.02), "seeds.precision"),
        speculate=_boolean(given.get("speculate", True), "seeds.speculate"),
    )
    if budget.min > budget.max:
        raise SweepError(f"seeds.min={budget.min} is above seeds.max={budget.max}")
    return budget


def seed_count(cfg: DictConfig) -> int | None:
    """How many seeds (0..N-1) the grid holds: ``seeds``, or a budget's ``max``."""
    budget = budget_of(cfg)
    if budget is not None:
        return budget.max
    seeds = cfg.get("seeds")
    return None if seeds is None else whole_number(seeds, "seeds", 1, "seeds=N runs seeds 0..N-1")


def _boolean(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    raise SweepError(f"{key}={value!r}: true or false, e.g. {key}=false")


def _fraction(value: Any, key: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if not 0 < number < 1:
        raise SweepError(f"{key}={value!r}: a number between 0 and 1, e.g. {key}=0.05")
    return number
