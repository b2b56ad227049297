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

from omegaconf import DictConfig

from sweeper.errors import SweepError, at_least


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
    :class:`SweepError` naming the setting for a bad one (its types are the dataclass's,
    checked by OmegaConf: :func:`sweeper.schema.seed_budget`; its ranges here)."""
    from sweeper.schema import seed_budget

    budget = seed_budget(cfg.get("seeds"))
    if not isinstance(budget, SeedBudget):
        return None
    at_least(budget.min, "seeds.min", 2)
    at_least(budget.max, "seeds.max", 2)
    at_least(budget.step, "seeds.step", 1)
    _fraction(budget.alpha, "seeds.alpha")
    _fraction(budget.precision, "seeds.precision")
    if budget.min > budget.max:
        raise SweepError(f"seeds.min={budget.min} is above seeds.max={budget.max}")
    return budget


def seed_count(cfg: DictConfig) -> int | None:
    """How many seeds (0..N-1) the grid holds: ``seeds``, or a budget's ``max``."""
    budget = budget_of(cfg)
    if budget is not None:
        return budget.max
    seeds = cfg.get("seeds")
    return None if seeds is None else int(at_least(seeds, "seeds", 1, "seeds=N runs seeds 0..N-1"))


def _fraction(value: float, key: str) -> float:
    if not 0 < value < 1:
        raise SweepError(f"{key}={value!r}: a number between 0 and 1, e.g. {key}=0.05")
    return value
