"""Simulated linear and logistic bandits (003 Section 5).

Each round K new arms have features drawn uniformly in [-1/sqrt(d), 1/sqrt(d)]^d (so
||x|| <= 1), theta* is drawn once the same way. Linear: y = x'theta* + N(0, noise_sd^2)
(003 writes N(0, 0.25), so noise_sd = 0.5); logistic: y ~ Bernoulli(sigmoid(x'theta*)).
"""

from __future__ import annotations

import numpy as np

from tasks.bandit_tuning.environments.base import Environment, sigmoid


class Simulation(Environment):
    """Uniform features and parameter, new features every round (003 Section 5)."""

    def __init__(
        self,
        n_features: int = 25,
        n_arms: int = 120,
        noise_sd: float = 0.5,
        reward_model: str | None = None,
        block_rounds: int = 256,
    ) -> None:
        super().__init__(reward_model)
        if n_features < 1 or n_arms < 2:
            raise ValueError(
                f"simulation needs n_features >= 1 and n_arms >= 2, got {n_features} and {n_arms}"
            )
        if noise_sd < 0:
            raise ValueError(f"noise_sd must be non-negative, got {noise_sd}")
        self.n_features = int(n_features)
        self.n_arms = int(n_arms)
        self.noise_sd = float(noise_sd)
        self.block_rounds = int(block_rounds)

    def reset(self, horizon: int, reward_model: str, rng: np.random.Generator) -> None:
        self._model = self.reward_model or reward_model
        self._rng = rng
        bound = 1.0 / np.sqrt(self.n_features)
        self.theta = rng.uniform(-bound, bound, self.n_features)
        self._block_start = -self.block_rounds
        self._t = -1

    def _draw_block(self, start: int) -> None:
        """Features, expected rewards and noise for rounds [start, start + block_rounds)."""
        b, k, d = self.block_rounds, self.n_arms, self.n_features
        bound = 1.0 / np.sqrt(d)
        self._features = self._rng.uniform(-bound, bound, (b, k, d))
        linear = self._features @ self.theta
        self._means = linear if self._model == "linear" else sigmoid(linear)
        # One standard normal and one uniform per round: the same noise whatever arm is pulled.
        self._gauss = self._rng.standard_normal(b)
        self._uniform = self._rng.random(b)
        self._block_start = start

    def observe(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        offset = t - self._block_start
        if not 0 <= offset < self.block_rounds:
            if t != self._block_start + self.block_rounds:
                raise ValueError(f"rounds must be observed in order; got {t} after {self._t}")
            self._draw_block(t)
            offset = 0
        self._t, self._offset = t, offset
        return self._features[offset], self._means[offset]

    def reward(self, arm: int) -> float:
        mean = self._means[self._offset, arm]
        if self._model == "linear":
            return float(mean + self.noise_sd * self._gauss[self._offset])
        return float(self._uniform[self._offset] < mean)
