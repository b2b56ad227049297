"""Laplace-TS (Chapelle and Li 2011, Algorithm 3): online Bayesian logistic regression."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from sweeper_tasks.bandit_tuning.algorithms.base import (
    BatchScheduled,
    DivergenceError,
    ScheduledAlgorithm,
    seed_dots,
    seed_products,
)
from sweeper_tasks.bandit_tuning.algorithms.logistic import sigmoid, sigmoid_seeds
from sweeper_tasks.bandit_tuning.space import Hyperparameter


def inner_gradient_descent(
    prior_mean_x: float,
    spread: float,
    label: float,
    step_size: float,
    tolerance_scale: float,
    halve_every: int,
    max_iterations: int,
) -> tuple[float, int]:
    """Gradient descent for one Laplace-TS update, reduced to one coordinate.

    The update minimises f(w) = 1/2 sum_i q_i (w_i - m_i)^2 + log(1 + exp(-y x'w)) with
    y in {-1, +1}. Gradient descent in the metric of the prior precision Q = diag(q),
    w <- w - eta Q^-1 grad f(w), started at w = m, stays on the line w = m + c Q^-1 x, so
    with z0 = x'm and s = x'Q^-1 x the iterates are the scalars

        c <- c - eta (c - y sigmoid(-y (z0 + c s))),

    and ||grad f|| = |c - y sigmoid(-y (z0 + c s))| ||x||. The step size is halved every
    ``halve_every`` iterations and the loop stops when ||grad f|| <= tolerance
    (``tolerance_scale`` is tolerance / ||x||) or after ``max_iterations`` (003's code:
    tolerance 1e-4, halving every 100, at most 1000). Returns (c, iterations).
    """
    c = 0.0
    eta = step_size
    for iteration in range(max_iterations):
        residual = c - label * sigmoid(-label * (prior_mean_x + c * spread))
        if abs(residual) <= tolerance_scale:
            return c, iteration
        if iteration and iteration % halve_every == 0:
            eta *= 0.5
        c -= eta * residual
        if not math.isfinite(c):
            break
    if not math.isfinite(c):
        raise DivergenceError(
            f"Laplace-TS inner gradient descent diverged with step size {step_size}; "
            "use a smaller step size or halve it more often (halve_every)"
        )
    return c, max_iterations


class LaplaceTS(ScheduledAlgorithm):
    """Diagonal Laplace posterior N(m, diag(1/q)), updated after every observation.

    Chapelle and Li 2011, Algorithm 3 with batches of one observation (as 003's code):
    draw w ~ N(m, diag(1/q)) and pull argmax_a x_a' w; after observing y, set m to the
    minimiser w of 1/2 sum q_i (w_i - m_i)^2 + log(1 + exp(-y x'w)) (y in {-1, 1}) and
    q_i += p(1 - p) x_i^2 with p = sigmoid(x'w). The prior is N(0, I / prior_precision).

    The minimiser is found by gradient descent whose step size is the tunable
    hyperparameter (003 Section 5: "Laplace-TS only depends on one stepsize hyperparameter
    for a gradient descent optimizer"). No theoretical value exists; 003 sets it to 1
    (the ``default``). Differences from 003's code, both deliberate: descent starts at m
    (theirs at m + U(-1, 1)^d) and is preconditioned by the prior precision, so step
    size 1 is a Newton step on the prior term and stays stable as q grows (plain descent
    with a fixed step diverges once q_i exceeds 2 / step); with this the problem is one
    scalar recursion (``inner_gradient_descent``), a few microseconds per update. Step
    sizes above 2 oscillate until the halving brings them below 2.
    """

    model = "logistic"
    HYPERPARAMETERS = (Hyperparameter("step_size", default=1.0),)

    def __init__(
        self,
        prior_precision: float = 1.0,
        tolerance: float = 1e-4,
        halve_every: int = 100,
        max_iterations: int = 1000,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if not prior_precision > 0 or not tolerance > 0 or halve_every < 1 or max_iterations < 1:
            raise ValueError(
                "need prior_precision > 0, tolerance > 0, halve_every >= 1 and "
                f"max_iterations >= 1, got {prior_precision}, {tolerance}, {halve_every}, "
                f"{max_iterations}"
            )
        self.prior_precision = float(prior_precision)
        self.tolerance = float(tolerance)
        self.halve_every = int(halve_every)
        self.max_iterations = int(max_iterations)

    def schedule(self, t: np.ndarray) -> dict[str, np.ndarray | float]:
        return {"step_size": self.constant("step_size")}

    def reset(self, n_features: int, horizon: int, rng: np.random.Generator) -> None:
        self._start(n_features, horizon, rng)
        self.mean = np.zeros(n_features)
        self.precision = np.full(n_features, self.prior_precision)
        self.iterations = 0  # inner iterations of the last update (for tests and traces)

    def select(self, features: np.ndarray, hp: Mapping[str, float], t: int) -> int:
        noise = self.rng.standard_normal(self.n_features)
        noise /= np.sqrt(self.precision)
        noise += self.mean
        return int((features @ noise).argmax())

    def update(self, x: np.ndarray, reward: float, hp: Mapping[str, float], t: int) -> None:
        label = 2.0 * reward - 1.0
        direction = x / self.precision
        norm = math.sqrt(float(x @ x))
        if norm == 0.0:
            return
        c, self.iterations = inner_gradient_descent(
            float(x @ self.mean),
            float(x @ direction),
            label,
            float(hp["step_size"]),
            self.tolerance / norm,
            self.halve_every,
            self.max_iterations,
        )
        self.mean += c * direction
        p = sigmoid(float(x @ self.mean))
        self.precision += (p * (1.0 - p)) * (x * x)


class BatchLaplaceTS(BatchScheduled):
    """Laplace-TS for S seeds: the diagonal posteriors as (S, d), each seed's draw from its
    own generator; each seed's inner descent is its own scalar recursion (a few
    iterations of plain floats, cheaper than an array step)."""

    def __init__(self, algorithms: Sequence[LaplaceTS]) -> None:
        super().__init__(algorithms)
        first = algorithms[0]
        self.tolerance = first.tolerance
        self.halve_every = first.halve_every
        self.max_iterations = first.max_iterations
        self.mean = np.stack([a.mean for a in algorithms])
        self.precision = np.stack([a.precision for a in algorithms])

    def select(self, features: np.ndarray, hp: Mapping[str, np.ndarray], t: int) -> np.ndarray:
        noise = np.stack([rng.standard_normal(self.n_features) for rng in self.rngs])
        noise /= np.sqrt(self.precision)
        noise += self.mean
        return seed_products(features, noise).argmax(axis=1)

    def update(
        self, x: np.ndarray, rewards: np.ndarray, hp: Mapping[str, np.ndarray], t: int
    ) -> None:
        label = 2.0 * rewards - 1.0
        direction = x / self.precision
        norm = np.sqrt(seed_dots(x, x))
        moved = np.flatnonzero(norm != 0.0)  # a zero x teaches nothing (LaplaceTS.update)
        if moved.size < len(norm):
            x, label, direction, norm = x[moved], label[moved], direction[moved], norm[moved]
        mean = self.mean[moved]
        c = np.array(
            [
                inner_gradient_descent(*floats, self.halve_every, self.max_iterations)[0]
                for floats in zip(
                    seed_dots(x, mean).tolist(),
                    seed_dots(x, direction).tolist(),
                    label.tolist(),
                    hp["step_size"][moved].tolist(),
                    (self.tolerance / norm).tolist(),
                    strict=True,
                )
            ]
        )
        mean += c[:, None] * direction
        p = sigmoid_seeds(seed_dots(x, mean))
        self.mean[moved] = mean
        self.precision[moved] += (p * (1.0 - p))[:, None] * (x * x)


LaplaceTS.batch = BatchLaplaceTS
