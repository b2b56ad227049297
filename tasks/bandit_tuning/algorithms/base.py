"""The bottom-layer interface: a contextual bandit whose hyperparameters a tuner sets."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from tasks.bandit_tuning.space import Hyperparameter


class DivergenceError(FloatingPointError):
    """An estimate became NaN or infinite; the cell is recorded as FAILED with this message."""


def check_finite(name: str, value: np.ndarray, t: int | None = None) -> None:
    """Raise DivergenceError when ``value`` holds NaN or inf (never turn it into a number)."""
    if not np.all(np.isfinite(value)):
        when = f" at round {t}" if t is not None else ""
        raise DivergenceError(
            f"{name} diverged{when} (NaN or inf); try smaller step sizes or a larger "
            "regularisation, or a narrower hyperparameter interval"
        )


class BanditAlgorithm(ABC):
    """A contextual bandit with tunable hyperparameters, in scikit-learn style.

    The constructor holds configuration; ``reset`` starts a run; each round ``select``
    picks an arm from the K x d feature matrix under the hyperparameter values ``hp`` (a
    mapping name -> value, which may change every round), and ``update`` learns from the
    pulled arm's features and reward.

    Subclasses declare ``model`` ('linear' or 'logistic', the reward model the environment
    serves them) and ``HYPERPARAMETERS`` (every hyperparameter with its defaults) and
    implement ``theoretical`` (003 Section 3: the setting the algorithm's paper proves).
    ``tuned`` names the hyperparameters a tuner controls; the others stay at their
    theoretical values.
    """

    model: ClassVar[str]
    HYPERPARAMETERS: ClassVar[tuple[Hyperparameter, ...]]

    def __init__(
        self,
        tuned: Sequence[str] | None = None,
        hyperparameters: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        declared = {h.name: h for h in self.HYPERPARAMETERS}
        overrides = dict(hyperparameters or {})
        unknown = set(overrides) - set(declared)
        if unknown:
            raise ValueError(
                f"{type(self).__name__} has no hyperparameter(s) {sorted(unknown)}; "
                f"its hyperparameters are {sorted(declared)}"
            )
        self.all_hyperparameters = {
            name: h.with_overrides(overrides.get(name)) for name, h in declared.items()
        }
        tuned = list(tuned) if tuned is not None else [self.HYPERPARAMETERS[0].name]
        missing = [name for name in tuned if name not in declared]
        if missing:
            raise ValueError(
                f"{type(self).__name__} cannot tune {missing}; its hyperparameters are "
                f"{sorted(declared)}"
            )
        self.tuned = tuned

    @property
    def space(self) -> list[Hyperparameter]:
        """The hyperparameters the tuner controls, in order."""
        return [self.all_hyperparameters[name] for name in self.tuned]

    @abstractmethod
    def theoretical(self, t: int) -> dict[str, float]:
        """The theoretical value of every hyperparameter at round ``t`` (1-based)."""

    @abstractmethod
    def reset(self, n_features: int, horizon: int, rng: np.random.Generator) -> None:
        """Start a run of ``horizon`` rounds on ``n_features``-dimensional arms."""

    @abstractmethod
    def select(self, features: np.ndarray, hp: Mapping[str, float], t: int) -> int:
        """The arm to pull in round ``t`` (1-based) under hyperparameters ``hp``."""

    @abstractmethod
    def update(self, x: np.ndarray, reward: float, hp: Mapping[str, float], t: int) -> None:
        """Learn from the pulled arm's features ``x`` and its ``reward``."""
