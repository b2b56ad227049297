"""The environment interface the cell runs against."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

REWARD_MODELS = ("linear", "logistic")


def sigmoid(z: np.ndarray | float) -> np.ndarray | float:
    """The logistic link mu(z) = 1 / (1 + exp(-z))."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z)))


class Environment(ABC):
    """A contextual bandit environment with known expected rewards, so regret is exact.

    ``reset`` draws everything random from the environment's own generator (which depends
    on dataset and seed only); ``observe(t)`` gives round t's arm features (K x d) and
    expected rewards (K,); ``reward(arm)`` samples the reward of pulling ``arm`` in the
    round last observed. Subclasses generate rounds in blocks so memory does not grow
    with T x K x d.
    """

    n_features: int
    n_arms: int

    def __init__(self, reward_model: str | None = None) -> None:
        if reward_model is not None and reward_model not in REWARD_MODELS:
            raise ValueError(
                f"reward_model '{reward_model}' is unknown; choose one of {REWARD_MODELS} "
                "or leave it empty to follow the algorithm's model"
            )
        self.reward_model = reward_model

    @abstractmethod
    def reset(self, horizon: int, reward_model: str, rng: np.random.Generator) -> None:
        """Prepare a run of ``horizon`` rounds under ``reward_model`` ('linear'/'logistic')."""

    @abstractmethod
    def observe(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Features (K x d) and expected rewards (K,) of round ``t`` (0-based)."""

    @abstractmethod
    def reward(self, arm: int) -> float:
        """A reward draw for ``arm`` in the round last observed."""
