"""GLOC (Jun et al. 2017): online-to-confidence-set conversion with online Newton steps."""

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
from sweeper_tasks.bandit_tuning.algorithms.logistic import logistic_kappa, sigmoid, sigmoid_seeds
from sweeper_tasks.bandit_tuning.algorithms.ridge import (
    BatchRidge,
    RidgeState,
    check_regularisation,
)
from sweeper_tasks.bandit_tuning.algorithms.ucb_glm import GLMParameters
from sweeper_tasks.bandit_tuning.space import Hyperparameter


def project_to_ball(
    point: np.ndarray, metric: np.ndarray, radius: float, tolerance: float = 1e-12
) -> np.ndarray:
    """argmin_{||theta|| <= radius} ||theta - point||_A^2, the projection GLM-ONS needs.

    Inside the ball the point is its own projection. Outside, theta = (A + nu I)^-1 A point
    for the nu > 0 with ||theta|| = radius. With A = U diag(a) U' and theta_i the
    coordinates of theta in that basis, Newton's method on 1/radius - 1/||theta(nu)||
    (Nocedal and Wright, Algorithm 4.3) steps nu += (||theta||^2 / sum theta_i^2 /
    (a_i + nu)) (||theta|| - radius) / radius and converges monotonically from nu = 0.
    """
    norm = math.sqrt(float(point @ point))
    if norm <= radius:
        return point
    eigenvalues, vectors = np.linalg.eigh(metric)
    coefficients = eigenvalues * (vectors.T @ point)
    nu = 0.0
    for _ in range(100):
        denominators = eigenvalues + nu
        coordinates = coefficients / denominators
        squared = float(coordinates @ coordinates)
        norm = math.sqrt(squared)
        curvature = float((coordinates * coordinates) @ (1.0 / denominators))
        step = squared / curvature * (norm - radius) / radius
        nu = max(nu + step, 0.0)
        if abs(step) <= tolerance * max(1.0, nu):
            break
    projected = vectors @ (coefficients / (eigenvalues + nu))
    if not math.isfinite(float(projected.sum())):
        raise DivergenceError("GLOC projection onto the norm ball diverged")
    return projected


def ons_regret_bound(
    t: np.ndarray, d: int, kappa: float, norm_bound: float, epsilon: float
) -> np.ndarray:
    """B_t = 2 kappa S^2 epsilon + d / (2 kappa) log(1 + t / (d epsilon)).

    The regret bound of GLM-ONS (Jun et al. 2017, Theorem 3) with the gradient bound
    |mu(x' theta) - y| ||x|| <= 1 of rewards in [0, 1] and the elliptical potential
    sum ||x_s||^2_{A_s^-1} <= d log(1 + t / (d epsilon)).
    """
    return 2.0 * kappa * norm_bound**2 * epsilon + d / (2.0 * kappa) * np.log(
        1.0 + t / (d * epsilon)
    )


def gloc_exploration_rate(
    t: np.ndarray,
    d: int,
    kappa: float,
    noise_sd: float,
    norm_bound: float,
    confidence: float,
    regularisation: float,
    epsilon: float,
) -> np.ndarray:
    """sqrt(beta_t) of Jun et al. 2017 Theorem 1 with the GLM-ONS bound B_t.

    beta_t = 1 + 4 B_t / kappa + 8 R^2 / kappa^2 log((2/delta) sqrt(1 + 2 B_t / kappa
    + 4 R^4 / (kappa^4 delta^2))) + lambda S^2 (the theorem's data-dependent term
    -(||z||^2 - theta_hat' X' z) <= 0 is dropped, which only widens the set).
    """
    b = ons_regret_bound(t, d, kappa, norm_bound, epsilon)
    r2 = noise_sd**2
    log_term = np.log(
        (2.0 / confidence)
        * np.sqrt(1.0 + 2.0 * b / kappa + 4.0 * r2**2 / (kappa**4 * confidence**2))
    )
    beta = 1.0 + 4.0 * b / kappa + 8.0 * r2 / kappa**2 * log_term + regularisation * norm_bound**2
    return np.sqrt(beta)


class GLOC(ScheduledAlgorithm, GLMParameters):
    """Pull argmax_a x_a' theta_hat + exploration_rate ||x_a||_{V^-1} (Jun et al. 2017 Alg. 1).

    An online learner, GLM-ONS (Jun et al. 2017 Algorithm 2), predicts theta_t; GLOC
    records z_t = x_t' theta_t and regresses z on x by ridge: theta_hat = V^-1 sum x z,
    V = lambda I + sum x x'. GLM-ONS: A_t = epsilon I + sum x x',
    theta' = theta_t - (mu(x_t' theta_t) - y_t) / step_parameter A_t^-1 x_t, and theta_{t+1}
    is theta' projected onto ||theta|| <= S in the A_t norm (exactly, by
    ``project_to_ball``; 003's code runs 1000 projected gradient steps instead).
    Every step is O(d^2) except the projection (O(d^3), when theta' leaves the ball).

    Hyperparameters (003 Section 5, p = 2): ``exploration_rate`` sqrt(beta_t) (theory:
    ``gloc_exploration_rate``) and ``step_parameter``, the kappa that divides the online
    Newton step (theory: kappa = mu'(S), 0.197 for S = 1; 003's code fixes 0.1 for OP).
    ``regularisation`` lambda and ``ons_regularisation`` epsilon are 1 as in 003's code.
    """

    model = "logistic"
    HYPERPARAMETERS = (
        Hyperparameter("exploration_rate", default=1.0),
        Hyperparameter("step_parameter", default=logistic_kappa(1.0)),
    )

    def __init__(
        self,
        noise_sd: float = 0.5,
        confidence: float = 0.1,
        norm_bound: float = 1.0,
        kappa: float | None = None,
        regularisation: float = 1.0,
        ons_regularisation: float = 1.0,
        tuned: list[str] | None = None,
        hyperparameters: Mapping[str, Mapping] | None = None,
    ) -> None:
        hyperparameters = dict(hyperparameters or {})
        super().__init__(
            tuned=["exploration_rate", "step_parameter"] if tuned is None else tuned,
            hyperparameters=hyperparameters,
        )
        self._glm_constants(noise_sd, confidence, norm_bound, kappa)
        if "default" not in (hyperparameters.get("step_parameter") or {}):
            # the theoretical step parameter is this run's kappa (mu'(S) unless configured)
            self.all_hyperparameters["step_parameter"] = self.all_hyperparameters[
                "step_parameter"
            ].with_overrides({"default": self.kappa})
        self.regularisation = check_regularisation(regularisation)
        self.ons_regularisation = check_regularisation(ons_regularisation)

    def schedule(self, t: np.ndarray) -> dict[str, np.ndarray | float]:
        alpha = gloc_exploration_rate(
            t,
            self.n_features,
            self.kappa,
            self.noise_sd,
            self.norm_bound,
            self.confidence,
            self.regularisation,
            self.ons_regularisation,
        )
        return {"exploration_rate": alpha, "step_parameter": self.constant("step_parameter")}

    def reset(self, n_features: int, horizon: int, rng: np.random.Generator) -> None:
        self._start(n_features, horizon, rng)
        self.ridge = RidgeState(n_features, self.regularisation)
        self.ons_matrix = self.ons_regularisation * np.eye(n_features)
        self.ons_inverse = np.eye(n_features) / self.ons_regularisation
        self.ons_theta = np.zeros(n_features)
        self.projections = 0

    def select(self, features: np.ndarray, hp: Mapping[str, float], t: int) -> int:
        return int(self.ridge.scores(features, hp["exploration_rate"]).argmax())

    def update(self, x: np.ndarray, reward: float, hp: Mapping[str, float], t: int) -> None:
        step_parameter = hp["step_parameter"]
        if not step_parameter > 0:
            raise bad_step_parameter(step_parameter)
        z = float(x @ self.ons_theta)
        self.ridge.add(x, z)
        gradient = sigmoid(z) - reward
        ax = self.ons_inverse @ x
        gain = ax / (1.0 + ax @ x)
        self.ons_inverse -= np.multiply.outer(gain, ax)
        self.ons_matrix += np.multiply.outer(x, x)
        # A_t^-1 x = gain (Sherman-Morrison), so theta' = theta - gradient / kappa * gain.
        candidate = self.ons_theta - (gradient / step_parameter) * gain
        squared_norm = float(candidate @ candidate)
        if not math.isfinite(squared_norm):
            raise diverged(t, step_parameter)
        if squared_norm > self.norm_bound**2:
            candidate = project_to_ball(candidate, self.ons_matrix, self.norm_bound)
            self.projections += 1
        self.ons_theta = candidate


def bad_step_parameter(step_parameter: float) -> ValueError:
    return ValueError(f"GLOC step_parameter must be positive, got {step_parameter}")


def diverged(t: int, step_parameter: float) -> DivergenceError:
    return DivergenceError(
        f"GLOC's online Newton iterate diverged at round {t} (step_parameter "
        f"{step_parameter}); use a larger step_parameter"
    )


class BatchGLOC(BatchScheduled):
    """GLOC for S seeds: the ridge state (``BatchRidge``), the online Newton matrices as
    (S, d, d) and the iterates as (S, d); a projection onto the ball runs for the seeds
    whose iterate left it, each as alone."""

    def __init__(self, algorithms: Sequence[GLOC]) -> None:
        super().__init__(algorithms)
        self.norm_bound = algorithms[0].norm_bound
        self.ridge = BatchRidge([a.ridge for a in algorithms])
        self.ons_matrix = np.stack([a.ons_matrix for a in algorithms])
        self.ons_inverse = np.stack([a.ons_inverse for a in algorithms])
        self.ons_theta = np.stack([a.ons_theta for a in algorithms])
        self.projections = np.zeros(self.n_seeds, dtype=int)

    def select(self, features: np.ndarray, hp: Mapping[str, np.ndarray], t: int) -> np.ndarray:
        return self.ridge.scores(features, hp["exploration_rate"]).argmax(axis=1)

    def update(
        self, x: np.ndarray, rewards: np.ndarray, hp: Mapping[str, np.ndarray], t: int
    ) -> None:
        step_parameter = hp["step_parameter"]
        if not (step_parameter > 0).all():
            raise bad_step_parameter(float(step_parameter[~(step_parameter > 0)][0]))
        z = seed_dots(x, self.ons_theta)
        self.ridge.add(x, z)
        gradient = sigmoid_seeds(z) - rewards
        ax = seed_products(self.ons_inverse, x)
        gain = ax / (1.0 + seed_dots(ax, x))[:, None]
        self.ons_inverse -= gain[:, :, None] * ax[:, None, :]
        self.ons_matrix += x[:, :, None] * x[:, None, :]
        candidate = self.ons_theta - (gradient / step_parameter)[:, None] * gain
        squared_norm = seed_dots(candidate, candidate)
        finite = np.isfinite(squared_norm)
        if not finite.all():
            raise diverged(t, float(step_parameter[~finite][0]))
        for s in np.flatnonzero(squared_norm > self.norm_bound**2).tolist():
            candidate[s] = project_to_ball(candidate[s], self.ons_matrix[s], self.norm_bound)
            self.projections[s] += 1
        self.ons_theta = candidate


GLOC.batch = BatchGLOC
