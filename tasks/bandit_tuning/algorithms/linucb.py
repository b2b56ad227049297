"""LinUCB (Li et al. 2010) with the OFUL confidence width of Abbasi-Yadkori et al. 2011."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sweeper_tasks.bandit_tuning.algorithms.base import BatchScheduled, ScheduledAlgorithm
from sweeper_tasks.bandit_tuning.algorithms.ridge import BatchRidge, RidgeState
from sweeper_tasks.bandit_tuning.space import Hyperparameter

LAMBDA_CANDIDATES = (0.01, 0.1, 1.0)
"""002 Section 6: the tuning set of the regularisation parameter lambda."""


def oful_exploration_rate(
    t: np.ndarray,
    d: int,
    regularisation: float,
    noise_sd: float,
    confidence: float,
    norm_bound: float,
) -> np.ndarray:
    """alpha(t) = sigma sqrt(d log((1 + t / lambda) / delta)) + sqrt(lambda) S.

    002 Equation 3 and 003 Section 3 (Abbasi-Yadkori et al. 2011 Theorem 2, with
    log det V_t <= d log(lambda + t) for ||x|| <= 1).
    """
    return (
        noise_sd * np.sqrt(d * np.log((1.0 + t / regularisation) / confidence))
        + np.sqrt(regularisation) * norm_bound
    )


class LinUCB(ScheduledAlgorithm):
    """Pull argmax_a x_a' theta_hat + exploration_rate * ||x_a||_{V^-1} (003 Eq. LinUCB).

    theta_hat = V^-1 sum x y with V = lambda I + sum x x' (ridge regression).
    Hyperparameters: ``exploration_rate`` alpha (theory: 002 Eq. 3, growing like
    sqrt(log t)) and ``regularisation`` lambda (theory: none; 003 Section 3 and 002
    Section 6 set lambda = 1, the ``default``). Both may change every round; a change of
    lambda costs one O(d^3) Cholesky, other rounds O(K d^2).
    """

    model = "linear"
    HYPERPARAMETERS = (
        Hyperparameter("exploration_rate", default=1.0),
        Hyperparameter("regularisation", default=1.0, candidates=LAMBDA_CANDIDATES),
    )

    def __init__(
        self,
        noise_sd: float = 0.5,
        confidence: float = 0.1,
        norm_bound: float | None = 1.0,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if noise_sd < 0 or not 0 < confidence < 1 or (norm_bound is not None and norm_bound < 0):
            raise ValueError(
                "need noise_sd >= 0 (sigma), 0 < confidence < 1 (delta) and norm_bound >= 0 "
                f"(S; null for the instance's ||theta*||), got {noise_sd}, {confidence}, "
                f"{norm_bound}"
            )
        self.noise_sd = float(noise_sd)
        self.confidence = float(confidence)
        self.norm_bound = None if norm_bound is None else float(norm_bound)
        self.needs_parameter_norm = self.norm_bound is None
        self._parameter_norm: float | None = None

    def set_parameter_norm(self, norm: float) -> None:
        """S = ``norm``, the instance's ||theta*|| (003 Section 3), when ``norm_bound`` is null."""
        if not self.needs_parameter_norm:
            raise TypeError("set_parameter_norm applies to norm_bound: null only")
        if not norm >= 0:
            raise ValueError(f"||theta*|| must be a non-negative number, got {norm}")
        self._parameter_norm = float(norm)

    @property
    def s(self) -> float:
        """S in the theoretical rate: ``norm_bound``, or the instance's ||theta*|| when null."""
        if self.norm_bound is not None:
            return self.norm_bound
        if self._parameter_norm is None:
            raise RuntimeError(
                f"{type(self).__name__} has norm_bound: null (S = ||theta*||) but no instance "
                "norm was set; the cell calls set_parameter_norm(environment.parameter_norm()) "
                "before reset"
            )
        return self._parameter_norm

    def schedule(self, t: np.ndarray) -> dict[str, np.ndarray | float]:
        lam = self.constant("regularisation")
        alpha = oful_exploration_rate(
            t, self.n_features, lam, self.noise_sd, self.confidence, self.s
        )
        return {"exploration_rate": alpha, "regularisation": lam}

    def reset(self, n_features: int, horizon: int, rng: np.random.Generator) -> None:
        self._start(n_features, horizon, rng)
        self.ridge = RidgeState(n_features, self.constant("regularisation"))

    def select(self, features: np.ndarray, hp: Mapping[str, float], t: int) -> int:
        self.ridge.set_regularisation(hp["regularisation"])
        return int(self.ridge.scores(features, hp["exploration_rate"]).argmax())

    def arms_for_rates(
        self, features: np.ndarray, hp: Mapping[str, float], rates: np.ndarray
    ) -> np.ndarray:
        """The arm ``select`` would pull under each exploration rate of ``rates`` (R,), from
        the same state (003 Appendix A.2's rates compared on one history); vectorised over
        arms and rates, (R,) arm indices."""
        self.ridge.set_regularisation(hp["regularisation"])
        means = features @ self.ridge.theta
        scores = means[:, None] + self.ridge.widths(features)[:, None] * np.asarray(rates)[None, :]
        return scores.argmax(axis=0)

    def update(self, x: np.ndarray, reward: float, hp: Mapping[str, float], t: int) -> None:
        self.ridge.set_regularisation(hp["regularisation"])
        self.ridge.add(x, reward)


class BatchLinUCB(BatchScheduled):
    """LinUCB for S seeds: the ridge state as (S, d, d + 1), the scores of every arm of
    every seed in one batched product (``BatchRidge``)."""

    def __init__(self, algorithms: Sequence[LinUCB]) -> None:
        super().__init__(algorithms)
        self.ridge = BatchRidge([a.ridge for a in algorithms])

    def select(self, features: np.ndarray, hp: Mapping[str, np.ndarray], t: int) -> np.ndarray:
        self.ridge.set_regularisation(hp["regularisation"])
        return self.ridge.scores(features, hp["exploration_rate"]).argmax(axis=1)

    def update(
        self, x: np.ndarray, rewards: np.ndarray, hp: Mapping[str, np.ndarray], t: int
    ) -> None:
        self.ridge.set_regularisation(hp["regularisation"])
        self.ridge.add(x, rewards)


LinUCB.batch = BatchLinUCB
