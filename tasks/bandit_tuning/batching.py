"""How a component runs in the batched cell: its own batched implementation, or one object
per seed (docs/extending.md, "Running seeds as one array program").

A class declares a batched implementation by naming it in its own ``batch`` attribute
(``LinUCB.batch = BatchLinUCB``). The declaration is read from the class itself, never
inherited: a subclass that changes what the class computes would otherwise run its
parent's batched code, so a subclass that declares nothing runs one seed at a time.

- An environment without one makes the cell run one seed at a time (:func:`environment_path`).
- An algorithm or a tuner without one runs as S objects, one per seed, inside the batched
  loop (:class:`PerSeedAlgorithm`, :class:`PerSeedTuner`): the loop asks each seed's object
  and stacks the answers on the seed axis, so the numbers are those of the object alone.

In the batched loop hyperparameter values are (S,) arrays, arms (S,) integer arrays,
features (S, K, d) and rewards (S,).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

BATCHED = "batched"
PER_SEED = "per seed"
ONE_AT_A_TIME = "one seed at a time"

Values = dict[str, np.ndarray]
"""Hyperparameter name -> (S,) values, one per seed."""


def declared_batch(component: Any) -> Any:
    """The batched implementation ``type(component)`` declares itself, or None."""
    return type(component).__dict__.get("batch")


def environment_path(environment: Any) -> str:
    return BATCHED if declared_batch(environment) is not None else ONE_AT_A_TIME


def component_path(component: Any) -> str:
    return BATCHED if declared_batch(component) is not None else PER_SEED


def stack(values: Sequence[Mapping[str, float]]) -> Values:
    """S mappings name -> value as one mapping name -> (S,) array."""
    return {name: np.array([v[name] for v in values]) for name in values[0]}


def seed_values(values: Mapping[str, np.ndarray], s: int) -> dict[str, float]:
    """Seed ``s``'s values as the one-seed cell hands them over (Python floats)."""
    return {name: float(v[s]) for name, v in values.items()}


class PerSeedAlgorithm:
    """S algorithm objects that declare no batched implementation, asked one by one."""

    def __init__(self, algorithms: Sequence[Any]) -> None:
        self.algorithms = list(algorithms)

    def theoretical(self, t: int) -> Values:
        return stack([a.theoretical(t) for a in self.algorithms])

    def select(self, features: np.ndarray, hp: Values, t: int) -> np.ndarray:
        return np.array(
            [a.select(features[s], seed_values(hp, s), t) for s, a in enumerate(self.algorithms)]
        )

    def update(self, x: np.ndarray, rewards: np.ndarray, hp: Values, t: int) -> None:
        for s, (a, reward) in enumerate(zip(self.algorithms, rewards.tolist(), strict=True)):
            a.update(x[s], reward, seed_values(hp, s), t)


class PerSeedTuner:
    """S tuner objects that declare no batched implementation, asked one by one."""

    def __init__(self, tuners: Sequence[Any], theory: Callable[[int], Values]) -> None:  # noqa: ARG002
        self.tuners = list(tuners)

    def propose(self, t: int) -> Values:
        return stack([tuner.propose(t) for tuner in self.tuners])

    def observe(self, rewards: np.ndarray) -> None:
        for tuner, reward in zip(self.tuners, rewards.tolist(), strict=True):
            tuner.observe(reward)

    def state(self) -> Values:
        states = [tuner.state() for tuner in self.tuners]
        return stack(states) if states[0] else {}


def batched_algorithm(algorithms: Sequence[Any]) -> Any:
    """The batched form of S reset algorithm objects of one class (per seed if undeclared)."""
    batch = declared_batch(algorithms[0])
    return PerSeedAlgorithm(algorithms) if batch is None else batch(algorithms)


def batched_tuner(tuners: Sequence[Any], theory: Callable[[int], Values]) -> Any:
    """The batched form of S reset tuner objects of one class (per seed if undeclared);
    ``theory`` gives the algorithm's theoretical values of all seeds at a round."""
    batch = declared_batch(tuners[0])
    return PerSeedTuner(tuners, theory) if batch is None else batch(tuners, theory)


class StateTraces:
    """Per-round tuner state of S seeds (e.g. CDT's active arms): (S, T) arrays, NaN-filled,
    as :class:`sweeper_tasks.bandit_tuning.results.StateTrace` keeps one seed's."""

    def __init__(self, seeds: int, horizon: int) -> None:
        self.shape = (seeds, horizon)
        self.arrays: dict[str, np.ndarray] = {}

    def record(self, index: int, state: Mapping[str, np.ndarray]) -> None:
        for key, values in state.items():
            if key not in self.arrays:
                self.arrays[key] = np.full(self.shape, np.nan)
            self.arrays[key][:, index] = values

    def of(self, s: int) -> dict[str, np.ndarray]:
        return {key: values[s] for key, values in self.arrays.items()}
