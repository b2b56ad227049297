"""EXP3 over a finite candidate set (Auer et al. 2002), as 002 Algorithms 1 and 2 use it."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def exp3_rate(n_arms: int, rounds: int) -> float:
    """beta = min(1, sqrt(n log n / ((e - 1) T))) (002 Alg. 1 line 3; 003 Alg. 3 line 4)."""
    if n_arms < 1:
        raise ValueError("EXP3 needs at least one candidate")
    if rounds < 1:
        raise ValueError(f"EXP3 needs a positive number of rounds, got {rounds}")
    if n_arms == 1:
        return 1.0
    return min(1.0, math.sqrt(n_arms * math.log(n_arms) / ((math.e - 1.0) * rounds)))


class Exp3:
    """EXP3 with exploration beta (002 Algorithm 1, lines 2-10).

    p_j = beta / n + (1 - beta) w_j / sum_i w_i; after pulling i with reward Y the
    estimate y_hat_i = Y / p_i updates w_i <- w_i exp(beta / n * y_hat_i), the other
    weights unchanged. Weights are kept as logarithms so long runs cannot overflow them;
    ``weights`` gives them back normalised to sum to one.
    """

    def __init__(
        self,
        n_arms: int,
        rounds: int,
        rng: np.random.Generator,
        beta: float | None = None,
    ) -> None:
        self.n_arms = int(n_arms)
        self.beta = exp3_rate(self.n_arms, rounds) if beta is None else float(beta)
        if not 0.0 < self.beta <= 1.0:
            raise ValueError(f"EXP3 exploration beta must be in (0, 1], got {self.beta}")
        self.rng = rng
        self.log_weights = np.zeros(self.n_arms)
        self.last = -1
        self._p = self.probabilities

    @property
    def weights(self) -> np.ndarray:
        """w_j / sum_i w_i."""
        w = np.exp(self.log_weights - self.log_weights.max())
        return w / w.sum()

    @property
    def probabilities(self) -> np.ndarray:
        """p_j(t) of 002 Algorithm 1 line 5."""
        return self.beta / self.n_arms + (1.0 - self.beta) * self.weights

    def pull(self) -> int:
        """Draw i_t with probability p_j(t) (line 6)."""
        self._p = self.probabilities
        self.last = int(self.rng.choice(self.n_arms, p=self._p))
        return self.last

    def update(self, reward: float) -> None:
        """Line 10: only the pulled candidate's weight moves, by beta/n * Y / p_i."""
        if self.last < 0:
            raise RuntimeError("EXP3.update called before pull")
        i = self.last
        self.log_weights[i] += self.beta / self.n_arms * float(reward) / self._p[i]


class BatchExp3:
    """S seeds' :class:`Exp3` over one candidate set: weights (S, n), each seed's draw from
    its own generator.

    ``Generator.choice(n, p=p)`` draws one uniform u and returns the number of entries of
    the normalised cumulative sum of p that are <= u (a search of the sorted cdf); this
    does the same for every seed, with each seed's own u and the same arithmetic.
    """

    def __init__(self, instances: Sequence[Exp3]) -> None:
        self.instances = list(instances)
        self.n_arms = self.instances[0].n_arms
        self.beta = np.array([e.beta for e in self.instances])[:, None]
        self.rngs = [e.rng for e in self.instances]
        self.log_weights = np.stack([e.log_weights for e in self.instances])
        self.seeds = np.arange(len(self.instances))
        self.last = np.full(len(self.instances), -1)

    def pull(self) -> np.ndarray:
        """Each seed's draw i_t (line 6), (S,)."""
        w = np.exp(self.log_weights - self.log_weights.max(axis=1, keepdims=True))
        w = w / w.sum(axis=1, keepdims=True)
        p = self.beta / self.n_arms + (1.0 - self.beta) * w
        if not (p >= 0).all():  # NaN or negative: Generator.choice refuses it
            raise ValueError(f"EXP3 probabilities are not valid probabilities: {p}")
        cdf = p.cumsum(axis=1)
        cdf /= cdf[:, -1:]
        uniform = np.array([rng.random() for rng in self.rngs])
        self._p = p
        self.last = (cdf <= uniform[:, None]).sum(axis=1)
        return self.last

    def update(self, rewards: np.ndarray) -> None:
        """Line 10 for every seed: rewards (S,)."""
        i = self.last
        self.log_weights[self.seeds, i] += (
            self.beta[:, 0] / self.n_arms * rewards / self._p[self.seeds, i]
        )
