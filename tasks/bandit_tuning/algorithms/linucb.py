"""LinUCB (Li et al. 2010) with the OFUL confidence width of Abbasi-Yadkori et al. 2011."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tasks.bandit_tuning.algorithms.base import BanditAlgorithm
from tasks.bandit_tuning.algorithms.ridge import RidgeState
from tasks.bandit_tuning.space import Hyperparameter


class LinUCB(BanditAlgorithm):
    """Pull argmax_a x_a' theta_hat + exploration_rate * ||x_a||_{V^-1}.

    Theoretical exploration rate (003 Section 3, Abbasi-Yadkori et al. 2011 Theorem 2):
    alpha_t = sigma * sqrt(d * log((1 + t / lambda) / delta)) + sqrt(lambda) * S.
    """

    model = "linear"
    HYPERPARAMETERS = (
        Hyperparameter("exploration_rate", default=1.0),
        Hyperparameter("regularisation", default=1.0, candidates=(0.01, 0.1, 1.0)),
    )

    def __init__(
        self,
        noise_sd: float = 0.5,
        confidence: float = 0.1,
        norm_bound: float = 1.0,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.noise_sd = noise_sd
        self.confidence = confidence
        self.norm_bound = norm_bound

    def theoretical(self, t: int) -> dict[str, float]:
        lam = self.all_hyperparameters["regularisation"].default
        alpha = (
            self.noise_sd * np.sqrt(self.n_features * np.log((1.0 + t / lam) / self.confidence))
            + np.sqrt(lam) * self.norm_bound
        )
        return {"exploration_rate": float(alpha), "regularisation": lam}

    def reset(self, n_features: int, horizon: int, rng: np.random.Generator) -> None:
        self.n_features = n_features
        self.rng = rng
        self.ridge = RidgeState(n_features, self.all_hyperparameters["regularisation"].default)

    def select(self, features: np.ndarray, hp: Mapping[str, float], t: int) -> int:
        self.ridge.set_regularisation(hp["regularisation"])
        scores = features @ self.ridge.theta + hp["exploration_rate"] * self.ridge.widths(features)
        return int(np.argmax(scores))

    def update(self, x: np.ndarray, reward: float, hp: Mapping[str, float], t: int) -> None:
        self.ridge.set_regularisation(hp["regularisation"])
        self.ridge.add(x, reward)
