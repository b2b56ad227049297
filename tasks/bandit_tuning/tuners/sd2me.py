"""SD²ME: Static Discretization with Dynamic Mean Estimator (004 Algorithm 1)."""

from __future__ import annotations

import math

import numpy as np

from sweeper_tasks.bandit_tuning.tuners.dynamic_mean import DynamicMean, PerHyperparameterD2ME


def sd2me_settings(horizon: int, changes: float, drop: str) -> dict[str, float]:
    """004 Theorem 4.1: lambda = floor(6^(1/4) (T/Gamma)^(3/4)), gamma = 1 - 6^(-1/4)
    (Gamma/T)^(3/4), rho = (6/lambda)^(1/3) (hard-drop) or (6 (1 - gamma))^(1/3) (soft)."""
    window = max(1, math.floor(6**0.25 * (horizon / changes) ** 0.75))
    discount = 1.0 - 6**-0.25 * (changes / horizon) ** 0.75
    rho = (6.0 / window) ** (1 / 3) if drop == "hard" else (6.0 * (1.0 - discount)) ** (1 / 3)
    return {"window": window, "discount": discount, "resolution": rho}


class StaticDiscretization:
    """One SD²ME learner on [0, 1]: arms A = {rho k : k = 1..floor(1/rho)} (Eq. 1), pull
    argmax_a mu_hat(a) + xi(a) (Eq. 2) with xi(a) = sqrt(log W / n(a)) (Eq. 7)."""

    def __init__(self, horizon: int, changes: float, drop: str, rng: np.random.Generator):
        settings = sd2me_settings(horizon, changes, drop)
        self.resolution = settings["resolution"]
        n_arms = max(1, math.floor(1.0 / self.resolution))  # at least one arm if rho > 1
        self.arms = min(self.resolution, 1.0) * np.arange(1, n_arms + 1)
        self.estimator = DynamicMean(drop, settings["window"], settings["discount"])
        for _ in self.arms:
            self.estimator.add_arm()
        self.rng = rng
        self.last = -1

    def widths(self) -> np.ndarray:
        """xi(a) of Eq. 7; +inf for an arm with no weight (initialisation, line 2)."""
        n = self.estimator.counts[: len(self.arms)]
        log_w = max(math.log(self.estimator.total), 0.0) if self.estimator.total > 0 else 0.0
        with np.errstate(divide="ignore"):
            return np.where(n > 0, np.sqrt(log_w / np.where(n > 0, n, 1.0)), np.inf)

    def select(self) -> float:
        self.last = int(np.argmax(self.estimator.means() + self.widths()))
        return float(self.arms[self.last])

    def update(self, reward: float) -> None:
        self.estimator.record(self.last, reward)


class SD2ME(PerHyperparameterD2ME):
    """SD²ME (004 Algorithm 1), hard-drop or soft-drop, parameters from 004 Theorem 4.1.

    Gamma, the number of changes, is unknown: ``expected_changes`` is its estimate (004
    Section 7.1.3 uses Gamma = 10). Each tuned hyperparameter gets its own SD²ME on its
    interval rescaled to [0, 1] and all are updated with the same reward (as Syndicated
    does with EXP3; 004 leaves joint tuning of several hyperparameters to future work).
    """

    def __init__(self, drop: str = "hard", expected_changes: float = 10.0) -> None:
        super().__init__(drop, expected_changes)

    def learner(self, rng: np.random.Generator) -> StaticDiscretization:
        return StaticDiscretization(self.horizon, self.expected_changes, self.drop, rng)

    def params(self) -> dict[str, float | str]:
        settings = sd2me_settings(self.horizon, self.expected_changes, self.drop)
        return {
            "sd2me.drop": self.drop,
            "sd2me.Gamma": self.expected_changes,
            "sd2me.lambda" if self.drop == "hard" else "sd2me.gamma": (
                settings["window"] if self.drop == "hard" else settings["discount"]
            ),
            "sd2me.rho": settings["resolution"],
            "sd2me.n_arms": len(self.learners[0].arms),
        }
