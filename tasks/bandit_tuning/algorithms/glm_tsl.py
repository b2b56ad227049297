"""GLM-TSL (Kveton et al. 2020, Algorithm 1): Thompson sampling from a Laplace approximation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from sweeper_tasks.bandit_tuning.algorithms.base import (
    BatchScheduled,
    ScheduledAlgorithm,
    random_arm,
    seed_products,
)
from sweeper_tasks.bandit_tuning.algorithms.logistic import BatchLogistic, OnlineLogisticRegression
from sweeper_tasks.bandit_tuning.algorithms.ridge import (
    check_regularisation,
    cholesky_lower,
    sample_around,
)
from sweeper_tasks.bandit_tuning.algorithms.ucb_glm import GLMParameters, resolve_warmup
from sweeper_tasks.bandit_tuning.space import Hyperparameter


def glm_tsl_exploration_rate(horizon: int, d: int, noise_sd: float, kappa: float) -> float:
    """a = (sigma / kappa) sqrt(d log(1 + T/d) + 2 log T).

    The perturbation scale of Kveton et al. 2020's analysis (a confidence width of order
    (sigma/kappa) sqrt(d log T) with delta = 1/T), in the form 003's code evaluates:
    0.5/0.1 * sqrt(d log(T/d) + 2 log T) * sqrt(0.25), i.e. 33.3 at T = 14000, d = 25;
    with sigma = 1/2 and kappa = mu'(1) this gives 33.9. log(1 + T/d) instead of
    log(T/d) keeps it defined for T < d.
    """
    return (noise_sd / kappa) * float(
        np.sqrt(d * np.log(1.0 + horizon / d) + 2.0 * np.log(horizon))
    )


class GLMTSL(ScheduledAlgorithm, GLMParameters):
    """Sample theta_tilde ~ N(theta_bar, a^2 H^-1), pull argmax_a x_a' theta_tilde.

    theta_bar is the logistic MLE of all observations and H = lambda I + sum_s
    mu'(x_s' theta_bar) x_s x_s' its Hessian (Kveton et al. 2020 Algorithm 1, lines 3-5;
    003's code uses lambda = 1 in H and an unregularised MLE; here the MLE carries the
    same ridge lambda, which keeps it defined before the warm-up ends and differs from
    theirs by O(lambda / n)). The first ``warmup_rounds`` observations are random pulls
    (003's code: 150; null = d).

    Both come from ``OnlineLogisticRegression``: H is the Hessian accumulated at the
    estimates current when each observation arrived, recomputed exactly at theta_bar
    whenever the history has grown by ``hessian_growth`` (tests/test_algorithms_glm.py
    bounds the difference). The draw is theta_bar + a L z with H^-1 = L L'.

    Hyperparameter: ``exploration_rate`` a (theory: ``glm_tsl_exploration_rate``).
    """

    model = "logistic"
    HYPERPARAMETERS = (Hyperparameter("exploration_rate", default=1.0),)

    def __init__(
        self,
        noise_sd: float = 0.5,
        confidence: float = 0.1,
        norm_bound: float = 1.0,
        kappa: float | None = None,
        regularisation: float = 1.0,
        warmup_rounds: int | None = None,
        correction_growth: float = 0.01,
        hessian_growth: float = 0.1,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self._glm_constants(noise_sd, confidence, norm_bound, kappa)
        self.regularisation = check_regularisation(regularisation)
        resolve_warmup(warmup_rounds, 1)
        self.warmup_rounds = warmup_rounds
        self.correction_growth = float(correction_growth)
        self.hessian_growth = float(hessian_growth)

    def schedule(self, t: np.ndarray) -> dict[str, np.ndarray | float]:
        return {
            "exploration_rate": glm_tsl_exploration_rate(
                self.horizon, self.n_features, self.noise_sd, self.kappa
            )
        }

    def reset(self, n_features: int, horizon: int, rng: np.random.Generator) -> None:
        self._start(n_features, horizon, rng)
        self.warmup = resolve_warmup(self.warmup_rounds, n_features)
        self.mle = OnlineLogisticRegression(
            n_features,
            self.regularisation,
            capacity=horizon,
            correction_growth=self.correction_growth,
            hessian_growth=self.hessian_growth,
        )

    def select(self, features: np.ndarray, hp: Mapping[str, float], t: int) -> int:
        mle = self.mle
        if mle.n < self.warmup:
            return random_arm(self.rng, features)
        factor = cholesky_lower(mle.hessian_inv, "H^-1")
        theta = mle.theta + hp["exploration_rate"] * (
            factor @ self.rng.standard_normal(self.n_features)
        )
        return int((features @ theta).argmax())

    def update(self, x: np.ndarray, reward: float, hp: Mapping[str, float], t: int) -> None:
        self.mle.add(x, reward)


class BatchGLMTSL(BatchScheduled):
    """GLM-TSL for S seeds: the logistic MLE and H^-1 stacked (``BatchLogistic``), each
    seed's draw from its own generator, the arms' scores of all seeds in one product."""

    def __init__(self, algorithms: Sequence[GLMTSL]) -> None:
        super().__init__(algorithms)
        self.warmup = algorithms[0].warmup
        self.mle = BatchLogistic([a.mle for a in algorithms])

    def select(self, features: np.ndarray, hp: Mapping[str, np.ndarray], t: int) -> np.ndarray:
        mle = self.mle
        if mle.n < self.warmup:
            return self.random_arms(features.shape[1])
        theta = sample_around(mle.theta, mle.hessian_inv, hp["exploration_rate"], self.rngs, "H^-1")
        return seed_products(features, theta).argmax(axis=1)

    def update(
        self, x: np.ndarray, rewards: np.ndarray, hp: Mapping[str, np.ndarray], t: int
    ) -> None:
        self.mle.add(x, rewards)


GLMTSL.batch = BatchGLMTSL
