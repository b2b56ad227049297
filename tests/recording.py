"""Test doubles at the edge: an environment that remembers what it showed."""

from __future__ import annotations

import numpy as np

from sweeper_tasks.bandit_tuning.environments.simulation import Simulation

SEEN: dict[str, list[np.ndarray]] = {}


class RecordingSimulation(Simulation):
    """The simulation, plus a record (under ``record_as``) of every round's features and reward."""

    def __init__(self, record_as: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.label = record_as

    def reset(self, horizon, reward_model, rng) -> None:
        super().reset(horizon, reward_model, rng)
        SEEN[self.label] = []

    def observe(self, t):
        features, means = super().observe(t)
        SEEN[self.label].append(features.copy())
        return features, means

    def reward(self, arm):
        value = super().reward(arm)
        # The noise of the round, whatever arm was pulled: reward minus the arm's mean.
        SEEN[self.label].append(np.array([value - self._means[self._offset, arm]]))
        return value
