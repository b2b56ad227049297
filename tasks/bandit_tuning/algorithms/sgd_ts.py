"""SGD-TS (Ding, Hsieh and Sharpnack 2021): online SGD plus Thompson sampling, by epochs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from sweeper_tasks.bandit_tuning.algorithms.base import (
    BatchScheduled,
    ScheduledAlgorithm,
    check_finite,
    check_finite_seeds,
    random_arm,
    seed_dots,
    seed_products,
)
from sweeper_tasks.bandit_tuning.algorithms.logistic import fit_logistic, sigmoid, sigmoid_seeds
from sweeper_tasks.bandit_tuning.space import Hyperparameter


def epoch_length(horizon: int, n_features: int, epoch_multiplier: float) -> int:
    """tau = C * floor(max(log T, d)) (002 Appendix A.4: C = 10; 003's code: C = 6)."""
    return max(1, int(epoch_multiplier * math.floor(max(math.log(horizon), n_features))))


def sgd_ts_exploration_rate(
    t: np.ndarray, tau: int, d: int, horizon: int, noise_sd: float, step_size: float
) -> np.ndarray:
    """alpha(t) = sqrt(g1^2 + g2^2) at the epoch j = max(1, floor((t - 1) / tau)).

    g1 = sigma sqrt(d/2 log(1 + 2 j tau / d) + 2 log T) (the UCB-GLM width) and
    g2 = (tau / eta0) sqrt(1 + log j) (Ding et al. 2021's SGD term), as the code of 002 and
    003 evaluates them; the draw's covariance is 2 (g1^2 + g2^2) / j I = 2 alpha^2 / j I.
    """
    j = np.maximum(1.0, np.floor((np.asarray(t, dtype=float) - 1.0) / tau))
    g1_squared = noise_sd**2 * (d / 2.0 * np.log(1.0 + 2.0 * j * tau / d) + 2.0 * np.log(horizon))
    g2_squared = (tau / step_size) ** 2 * (1.0 + np.log(j))
    return np.sqrt(g1_squared + g2_squared)


class SGDTS(ScheduledAlgorithm):
    """SGD-TS for the logistic bandit (Ding et al. 2021, Algorithm 1; 002 Appendix A.4).

    1. The first tau rounds are random pulls (tau = ``epoch_length``); their MLE
       theta_hat (unregularised unless ``mle_regularisation`` > 0) starts theta_tilde.
    2. Time is cut into epochs of tau rounds. At the start of epoch j >= 2 one SGD step
       with the summed gradient of the last epoch's observations at theta_tilde:
       theta_tilde -= (eta0 / j) sum_s x_s (mu(x_s' theta_tilde) - y_s), projected onto the
       ball of radius ``projection_radius`` around theta_hat; theta_bar is the running
       average of the theta_tilde iterates.
    3. Once per epoch draw theta_ts ~ N(theta_bar, 2 alpha^2 / j I) and pull
       argmax_a x_a' theta_ts for the whole epoch.

    As in the authors' code (and 003's), alpha merges the two exploration parameters
    g1, g2 of the paper: alpha^2 = g1^2 + g2^2. Hyperparameters (003 Section 5, p = 2):
    ``exploration_rate`` alpha (theory: ``sgd_ts_exploration_rate``) and ``step_size``
    eta0 (no usable theoretical value, 002 Appendix A.4 calls it intractable; 003 sets 1).
    The step size is read when an epoch closes (in ``update``), the exploration rate when
    the epoch's draw is made (the first ``select`` after it): values proposed in the other
    rounds of an epoch have no effect, as in the algorithm. Everything is O(K d) a round.
    """

    model = "logistic"
    HYPERPARAMETERS = (
        Hyperparameter("exploration_rate", default=1.0),
        Hyperparameter("step_size", default=1.0),
    )

    def __init__(
        self,
        noise_sd: float = 0.5,
        epoch_multiplier: float = 10.0,
        projection_radius: float = 2.0,
        mle_regularisation: float = 0.0,
        tuned: list[str] | None = None,
        hyperparameters: Mapping[str, Mapping] | None = None,
    ) -> None:
        super().__init__(
            tuned=["exploration_rate", "step_size"] if tuned is None else tuned,
            hyperparameters=hyperparameters,
        )
        if noise_sd < 0 or not epoch_multiplier > 0 or not projection_radius > 0:
            raise ValueError(
                "need noise_sd >= 0, epoch_multiplier > 0 and projection_radius > 0, got "
                f"{noise_sd}, {epoch_multiplier}, {projection_radius}"
            )
        if mle_regularisation < 0:
            raise ValueError(f"mle_regularisation must be >= 0, got {mle_regularisation}")
        self.noise_sd = float(noise_sd)
        self.epoch_multiplier = float(epoch_multiplier)
        self.projection_radius = float(projection_radius)
        self.mle_regularisation = float(mle_regularisation)

    def schedule(self, t: np.ndarray) -> dict[str, np.ndarray | float]:
        step = self.constant("step_size")
        alpha = sgd_ts_exploration_rate(
            t, self.tau, self.n_features, self.horizon, self.noise_sd, step
        )
        return {"exploration_rate": alpha, "step_size": step}

    def reset(self, n_features: int, horizon: int, rng: np.random.Generator) -> None:
        self.tau = epoch_length(horizon, n_features, self.epoch_multiplier)
        self._start(n_features, horizon, rng)
        self.n = 0
        self.epoch = 0
        self.warmup_X = np.empty((self.tau, n_features))
        self.warmup_y = np.empty(self.tau)
        self.theta_hat = np.zeros(n_features)
        self.theta_tilde = np.zeros(n_features)
        self.theta_bar = np.zeros(n_features)
        self.theta_ts = np.zeros(n_features)
        self.gradient = np.zeros(n_features)
        self._draw_due = False

    def select(self, features: np.ndarray, hp: Mapping[str, float], t: int) -> int:
        if self.n < self.tau:
            return random_arm(self.rng, features)
        if self._draw_due:
            scale = hp["exploration_rate"] * math.sqrt(2.0 / self.epoch)
            self.theta_ts = self.theta_bar + scale * self.rng.standard_normal(self.n_features)
            self._draw_due = False
        return int((features @ self.theta_ts).argmax())

    def update(self, x: np.ndarray, reward: float, hp: Mapping[str, float], t: int) -> None:
        tau = self.tau
        if self.n < tau:
            self.warmup_X[self.n] = x
            self.warmup_y[self.n] = reward
            self.n += 1
            if self.n == tau:
                self.theta_hat = fit_logistic(self.warmup_X, self.warmup_y, self.mle_regularisation)
                self.theta_tilde = self.theta_hat.copy()
                self.theta_bar = self.theta_hat.copy()
                self.epoch = 1
                self._draw_due = True
            return
        self.gradient += (sigmoid(float(x @ self.theta_tilde)) - reward) * x
        self.n += 1
        if self.n % tau == 0:
            self._close_epoch(hp["step_size"], t)

    def _close_epoch(self, step_size: float, t: int) -> None:
        j = self.n // self.tau
        self.epoch = j
        self.theta_tilde -= (step_size / j) * self.gradient
        offset = self.theta_tilde - self.theta_hat
        distance = math.sqrt(float(offset @ offset))
        if distance > self.projection_radius:
            self.theta_tilde = self.theta_hat + (self.projection_radius / distance) * offset
        self.theta_bar += (self.theta_tilde - self.theta_bar) / j
        self.gradient[:] = 0.0
        check_finite("SGD-TS iterate theta_tilde", self.theta_tilde, t)
        self._draw_due = True


class BatchSGDTS(BatchScheduled):
    """SGD-TS for S seeds: the iterates as (S, d), the warm-up MLE and each epoch's draw
    seed by seed (once per epoch), every round's gradient step of all seeds together.
    Every seed updates every round, so all share the count n and the epoch."""

    def __init__(self, algorithms: Sequence[SGDTS]) -> None:
        super().__init__(algorithms)
        first = algorithms[0]
        self.tau = first.tau
        self.projection_radius = first.projection_radius
        self.mle_regularisation = first.mle_regularisation
        self.n, self.epoch, self._draw_due = first.n, first.epoch, first._draw_due
        for name in ("warmup_X", "warmup_y", "theta_hat", "theta_tilde", "theta_bar"):
            setattr(self, name, np.stack([getattr(a, name) for a in algorithms]))
        self.theta_ts = np.stack([a.theta_ts for a in algorithms])
        self.gradient = np.stack([a.gradient for a in algorithms])

    def select(self, features: np.ndarray, hp: Mapping[str, np.ndarray], t: int) -> np.ndarray:
        if self.n < self.tau:
            return self.random_arms(features.shape[1])
        if self._draw_due:
            scale = hp["exploration_rate"] * math.sqrt(2.0 / self.epoch)
            for s, rng in enumerate(self.rngs):
                self.theta_ts[s] = self.theta_bar[s] + scale[s] * rng.standard_normal(
                    self.n_features
                )
            self._draw_due = False
        return seed_products(features, self.theta_ts).argmax(axis=1)

    def update(
        self, x: np.ndarray, rewards: np.ndarray, hp: Mapping[str, np.ndarray], t: int
    ) -> None:
        tau = self.tau
        if self.n < tau:
            self.warmup_X[:, self.n] = x
            self.warmup_y[:, self.n] = rewards
            self.n += 1
            if self.n == tau:
                for s in range(self.n_seeds):
                    self.theta_hat[s] = fit_logistic(
                        self.warmup_X[s], self.warmup_y[s], self.mle_regularisation
                    )
                self.theta_tilde = self.theta_hat.copy()
                self.theta_bar = self.theta_hat.copy()
                self.epoch = 1
                self._draw_due = True
            return
        self.gradient += (sigmoid_seeds(seed_dots(x, self.theta_tilde)) - rewards)[:, None] * x
        self.n += 1
        if self.n % tau == 0:
            self._close_epoch(hp["step_size"], t)

    def _close_epoch(self, step_size: np.ndarray, t: int) -> None:
        """``SGDTS._close_epoch`` of every seed."""
        j = self.n // self.tau
        self.epoch = j
        self.theta_tilde -= (step_size / j)[:, None] * self.gradient
        offset = self.theta_tilde - self.theta_hat
        distance = np.sqrt(seed_dots(offset, offset))
        for s in np.flatnonzero(distance > self.projection_radius).tolist():
            self.theta_tilde[s] = (
                self.theta_hat[s] + (self.projection_radius / distance[s]) * offset[s]
            )
        self.theta_bar += (self.theta_tilde - self.theta_bar) / j
        self.gradient[:] = 0.0
        check_finite_seeds("SGD-TS iterate theta_tilde", self.theta_tilde, t)
        self._draw_due = True


SGDTS.batch = BatchSGDTS
