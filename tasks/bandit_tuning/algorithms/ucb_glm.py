"""UCB-GLM (Li, Lu and Zhou 2017, Algorithm 1) with a logistic link."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sweeper_tasks.bandit_tuning.algorithms.base import (
    BatchScheduled,
    ScheduledAlgorithm,
    random_arm,
    seed_products,
)
from sweeper_tasks.bandit_tuning.algorithms.linucb import LAMBDA_CANDIDATES
from sweeper_tasks.bandit_tuning.algorithms.logistic import (
    BatchLogistic,
    OnlineLogisticRegression,
    logistic_kappa,
)
from sweeper_tasks.bandit_tuning.algorithms.ridge import BatchRidge, RidgeState
from sweeper_tasks.bandit_tuning.space import Hyperparameter


def glm_exploration_rate(
    horizon: int, d: int, noise_sd: float, kappa: float, confidence: float
) -> float:
    """alpha = (sigma / kappa) sqrt(d/2 log(1 + 2T/d) + log(1/delta)) (Li et al. 2017 Thm 2)."""
    return (noise_sd / kappa) * float(
        np.sqrt(d / 2.0 * np.log(1.0 + 2.0 * horizon / d) + np.log(1.0 / confidence))
    )


class GLMParameters:
    """Constants shared by the logistic bandits' theoretical settings.

    sigma (``noise_sd``): sub-Gaussian parameter of the reward noise, 1/2 for Bernoulli
    rewards. S (``norm_bound``): ||theta*|| <= S with ||x|| <= 1. kappa: the smallest slope
    of the link on the domain; null means mu'(S) (0.197 for S = 1, the value 003's code
    uses for UCB-GLM). delta (``confidence``): the failure probability.
    """

    def _glm_constants(
        self, noise_sd: float, confidence: float, norm_bound: float, kappa: float | None
    ) -> None:
        if noise_sd < 0 or not 0 < confidence < 1 or norm_bound <= 0:
            raise ValueError(
                "need noise_sd >= 0 (sigma), 0 < confidence < 1 (delta) and norm_bound > 0 "
                f"(S), got {noise_sd}, {confidence}, {norm_bound}"
            )
        self.noise_sd = float(noise_sd)
        self.confidence = float(confidence)
        self.norm_bound = float(norm_bound)
        self.kappa = logistic_kappa(norm_bound) if kappa is None else float(kappa)
        if not self.kappa > 0:
            raise ValueError(f"kappa must be positive (or null for mu'(S)), got {kappa}")


def resolve_warmup(warmup_rounds: int | None, n_features: int) -> int:
    """``warmup_rounds`` from config; null means d, the fewest pulls that can span R^d."""
    rounds = n_features if warmup_rounds is None else int(warmup_rounds)
    if rounds < 0:
        raise ValueError(f"warmup_rounds must be >= 0 (or null for d), got {warmup_rounds}")
    return rounds


class UCBGLM(ScheduledAlgorithm, GLMParameters):
    """Pull argmax_a x_a' theta_hat + exploration_rate ||x_a||_{V^-1} (Li et al. 2017 Alg. 1).

    theta_hat is the ridge-regularised logistic MLE over all observations and
    V = lambda I + sum x x' (003's code regularises both with the same lambda, C = 1 in
    scikit-learn). The first ``warmup_rounds`` observations come from uniformly random
    pulls (Li et al.'s random initialisation tau; the paper's Proposition 1 has unknown
    constants, so it is a config value, null = d; 003's code uses 30). Rounds in the
    tuner's own warm-up count, since they are random pulls too.

    The MLE is kept by ``OnlineLogisticRegression`` (online Newton steps plus exact
    corrections at geometrically spaced history sizes) instead of a refit every round.

    Hyperparameters: ``exploration_rate`` (theory: (sigma/kappa) sqrt(d/2 log(1 + 2T/d) +
    log(1/delta)), Li et al. 2017 Theorem 2 / 003 Section 5) and ``regularisation`` lambda
    (theory: none, 1 as in 002 and 003).
    """

    model = "logistic"
    HYPERPARAMETERS = (
        Hyperparameter("exploration_rate", default=1.0),
        Hyperparameter("regularisation", default=1.0, candidates=LAMBDA_CANDIDATES),
    )

    def __init__(
        self,
        noise_sd: float = 0.5,
        confidence: float = 0.1,
        norm_bound: float = 1.0,
        kappa: float | None = None,
        warmup_rounds: int | None = None,
        correction_growth: float = 0.01,
        hessian_growth: float = 0.1,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self._glm_constants(noise_sd, confidence, norm_bound, kappa)
        resolve_warmup(warmup_rounds, 1)
        self.warmup_rounds = warmup_rounds
        self.correction_growth = float(correction_growth)
        self.hessian_growth = float(hessian_growth)

    def schedule(self, t: np.ndarray) -> dict[str, np.ndarray | float]:
        alpha = glm_exploration_rate(
            self.horizon, self.n_features, self.noise_sd, self.kappa, self.confidence
        )
        return {"exploration_rate": alpha, "regularisation": self.constant("regularisation")}

    def reset(self, n_features: int, horizon: int, rng: np.random.Generator) -> None:
        self._start(n_features, horizon, rng)
        self.warmup = resolve_warmup(self.warmup_rounds, n_features)
        lam = self.constant("regularisation")
        self.ridge = RidgeState(n_features, lam)
        self.mle = OnlineLogisticRegression(
            n_features,
            lam,
            capacity=horizon,
            correction_growth=self.correction_growth,
            hessian_growth=self.hessian_growth,
        )

    def _set_regularisation(self, lam: float) -> None:
        self.ridge.set_regularisation(lam)
        self.mle.set_regularisation(lam)

    def select(self, features: np.ndarray, hp: Mapping[str, float], t: int) -> int:
        if self.mle.n < self.warmup:
            return random_arm(self.rng, features)
        self._set_regularisation(hp["regularisation"])
        widths = self.ridge.widths(features)
        widths *= hp["exploration_rate"]
        widths += features @ self.mle.theta
        return int(widths.argmax())

    def update(self, x: np.ndarray, reward: float, hp: Mapping[str, float], t: int) -> None:
        self._set_regularisation(hp["regularisation"])
        self.ridge.add(x, 0.0)  # only V^-1 is used; theta_hat is the logistic MLE
        self.mle.add(x, reward)


class BatchUCBGLM(BatchScheduled):
    """UCB-GLM for S seeds: V^-1 as (S, d, d + 1) (``BatchRidge``) and the logistic MLE
    as (S, d) (``BatchLogistic``), the widths of every arm of every seed in one product."""

    def __init__(self, algorithms: Sequence[UCBGLM]) -> None:
        super().__init__(algorithms)
        self.warmup = algorithms[0].warmup
        self.ridge = BatchRidge([a.ridge for a in algorithms])
        self.mle = BatchLogistic([a.mle for a in algorithms])

    def _set_regularisation(self, lam: np.ndarray) -> None:
        self.ridge.set_regularisation(lam)
        self.mle.set_regularisation(lam)

    def select(self, features: np.ndarray, hp: Mapping[str, np.ndarray], t: int) -> np.ndarray:
        if self.mle.n < self.warmup:
            return self.random_arms(features.shape[1])
        self._set_regularisation(hp["regularisation"])
        widths = self.ridge.widths(features)
        widths *= hp["exploration_rate"][:, None]
        widths += seed_products(features, self.mle.theta)
        return widths.argmax(axis=1)

    def update(
        self, x: np.ndarray, rewards: np.ndarray, hp: Mapping[str, np.ndarray], t: int
    ) -> None:
        self._set_regularisation(hp["regularisation"])
        self.ridge.add(x, np.zeros(len(x)))
        self.mle.add(x, rewards)


UCBGLM.batch = BatchUCBGLM
