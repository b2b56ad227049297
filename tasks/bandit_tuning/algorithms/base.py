"""The bottom-layer interface: a contextual bandit whose hyperparameters a tuner sets."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from sweeper_tasks.bandit_tuning.space import Hyperparameter


class DivergenceError(FloatingPointError):
    """An estimate became NaN or infinite; the cell is recorded as FAILED with this message."""


def check_finite(name: str, value: np.ndarray | float, t: int | None = None) -> None:
    """Raise DivergenceError when ``value`` holds NaN or inf (never turn it into a number).

    One reduction instead of an elementwise test: a NaN or inf anywhere makes the sum
    non-finite (so does a sum overflowing past 1e308, which is divergence too).
    """
    if not math.isfinite(float(np.sum(value))):
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
        if len(set(tuned)) != len(tuned):
            raise ValueError(f"{type(self).__name__}: tuned lists a hyperparameter twice: {tuned}")
        self.tuned = tuned

    @property
    def space(self) -> list[Hyperparameter]:
        """The hyperparameters the tuner controls, in order."""
        return [self.all_hyperparameters[name] for name in self.tuned]

    #: The batched implementation this class declares (docs/extending.md): a class built from
    #: S reset objects of this class that runs their seeds as one array program. Read from
    #: the class itself (sweeper_tasks.bandit_tuning.batching), never inherited.
    batch: ClassVar[type | None] = None

    #: Whether the theoretical setting needs the instance's ||theta*|| (003 Section 3's S
    #: written as ||theta*||): the cell then calls ``set_parameter_norm`` before ``reset``.
    needs_parameter_norm: bool = False

    def set_parameter_norm(self, norm: float) -> None:
        """Take S = ``norm`` = ||theta*|| of the instance for the theoretical setting."""
        raise TypeError(f"{type(self).__name__}'s theoretical setting does not use ||theta*||")

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


class ScheduledAlgorithm(BanditAlgorithm):
    """A bandit whose theoretical setting is a vectorised schedule over the rounds.

    Subclasses implement ``schedule(t)`` (an array of rounds -> an array or scalar per
    hyperparameter) and call ``_start`` from ``reset``; ``theoretical(t)`` then reads a
    table computed once for t = 1..T (one float per hyperparameter and round, so memory
    grows with T only). The cell asks for the theoretical setting every round and the
    tuners ask again, so this keeps a formula with logarithms out of the per-round cost.
    """

    n_features: int
    horizon: int
    _theory_names: list[str]
    _theory_table: np.ndarray | None = None

    @abstractmethod
    def schedule(self, t: np.ndarray) -> Mapping[str, np.ndarray | float]:
        """The theoretical value of every hyperparameter at the rounds ``t`` (1-based)."""

    def _start(self, n_features: int, horizon: int, rng: np.random.Generator) -> None:
        if n_features < 1:
            raise ValueError(f"n_features must be at least 1, got {n_features}")
        if horizon < 1:
            raise ValueError(f"horizon must be a positive number of rounds, got {horizon}")
        self.n_features = int(n_features)
        self.horizon = int(horizon)
        self.rng = rng
        self._theory_table = None
        rounds = np.arange(1, self.horizon + 1, dtype=float)
        values = self.schedule(rounds)
        self._theory_names = [h.name for h in self.HYPERPARAMETERS]
        table = np.column_stack(
            [
                np.broadcast_to(np.asarray(values[name], dtype=float), rounds.shape)
                for name in self._theory_names
            ]
        )
        check_finite("theoretical hyperparameter schedule", table)
        self._theory_table = table

    def theoretical(self, t: int) -> dict[str, float]:
        table = self._theory_table
        if table is not None and 1 <= t <= len(table):
            return dict(zip(self._theory_names, table[t - 1].tolist(), strict=True))
        if not hasattr(self, "horizon"):
            raise RuntimeError(
                f"{type(self).__name__}.theoretical needs the run's dimension and horizon; "
                "call reset(n_features, horizon, rng) first"
            )
        values = self.schedule(np.asarray([float(t)]))
        return {h.name: float(np.ravel(values[h.name])[0]) for h in self.HYPERPARAMETERS}

    def constant(self, name: str) -> float:
        """The configured ``default`` of a hyperparameter whose theory is a constant."""
        return self.all_hyperparameters[name].default


class BatchScheduled:
    """S reset objects of one :class:`ScheduledAlgorithm` class run as one array program.

    Subclasses implement ``select(features, hp, t)`` on features (S, K, d) and
    hyperparameters name -> (S,) and return (S,) arms, and ``update(x, rewards, hp, t)`` on
    the pulled arms' features (S, d) and rewards (S,); every operation gives each seed the
    numbers its object gives alone (tests/test_batch.py). The seeds' theoretical tables
    are stacked, (S, T, hyperparameters); ``rngs`` are the seeds' own generators.
    """

    def __init__(self, algorithms: Sequence[ScheduledAlgorithm]) -> None:
        self.algorithms = list(algorithms)
        first = self.algorithms[0]
        self.n_seeds = len(self.algorithms)
        self.n_features = first.n_features
        self.horizon = first.horizon
        self.rngs = [a.rng for a in self.algorithms]
        self._theory_names = first._theory_names
        self._theory = np.stack([a._theory_table for a in self.algorithms])

    def theoretical(self, t: int) -> dict[str, np.ndarray]:
        """The theoretical value of every hyperparameter at round ``t``, (S,) each."""
        columns = self._theory[:, t - 1].T.copy()  # a copy: the table stays as computed
        return dict(zip(self._theory_names, columns, strict=True))

    def random_arms(self, n_arms: int) -> np.ndarray:
        """A uniformly random arm per seed from the seed's generator (``random_arm``)."""
        return np.array([int(rng.integers(n_arms)) for rng in self.rngs])


def seed_dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a[s] @ b[s] for (S, d) arrays: (S,), the same dot product as one seed's ``a @ b``."""
    return (a[:, None, :] @ b[:, :, None])[:, 0, 0]


def seed_products(matrices: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """matrices[s] @ vectors[s] for (S, m, d) and (S, d): (S, m), as one seed's product."""
    return (matrices @ vectors[:, :, None])[:, :, 0]


def check_finite_seeds(name: str, values: np.ndarray, t: int | None = None) -> None:
    """``check_finite`` of each seed's (S, ...) values: the first seed that diverged raises."""
    if math.isfinite(float(np.sum(values))):
        return
    for s in range(len(values)):
        check_finite(name, values[s], t)


def random_arm(rng: np.random.Generator, features: np.ndarray) -> int:
    """A uniformly random arm (the warm-up pulls of 003 Algorithm 2 and Li et al. 2017)."""
    return int(rng.integers(features.shape[0]))
