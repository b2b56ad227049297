"""EXP3 over a finite candidate set, as 002 Algorithm 1 uses it (Auer et al. 2002)."""

from __future__ import annotations

import math

import numpy as np


class Exp3:
    """EXP3 with beta = min(1, sqrt(n log n / ((e - 1) T))) (002 Algorithm 1, line 3).

    p_j = beta / n + (1 - beta) w_j / sum_i w_i; after pulling i with reward Y the
    estimate Y / p_i updates w_i <- w_i * exp(beta / n * Y / p_i). Weights are kept as
    logarithms so 14000 rounds cannot overflow them.
    """

    def __init__(self, n_arms: int, horizon: int, rng: np.random.Generator) -> None:
        if n_arms < 1:
            raise ValueError("EXP3 needs at least one candidate")
        self.n_arms = n_arms
        self.rng = rng
        self.beta = (
            1.0
            if n_arms == 1
            else min(1.0, math.sqrt(n_arms * math.log(n_arms) / ((math.e - 1) * horizon)))
        )
        self.log_weights = np.zeros(n_arms)
        self.last = -1

    @property
    def probabilities(self) -> np.ndarray:
        w = np.exp(self.log_weights - self.log_weights.max())
        return self.beta / self.n_arms + (1.0 - self.beta) * w / w.sum()

    def pull(self) -> int:
        self._p = self.probabilities
        self.last = int(self.rng.choice(self.n_arms, p=self._p))
        return self.last

    def update(self, reward: float) -> None:
        i = self.last
        self.log_weights[i] += self.beta / self.n_arms * reward / self._p[i]
