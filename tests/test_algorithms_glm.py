"""GLM bandits: fast paths against slow, obvious implementations of the papers' algorithms.

The logistic MLE is checked against scipy.optimize; UCB-GLM and GLM-TSL in the exact mode
(growths 0) pick the same arms as a refit-every-round implementation, and the default mode's
approximation is bounded; Laplace-TS, GLOC and SGD-TS against direct transcriptions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from sweeper_tasks.bandit_tuning.algorithms.base import DivergenceError
from sweeper_tasks.bandit_tuning.algorithms.glm_tsl import GLMTSL, glm_tsl_exploration_rate
from sweeper_tasks.bandit_tuning.algorithms.gloc import GLOC, project_to_ball
from sweeper_tasks.bandit_tuning.algorithms.laplace_ts import LaplaceTS
from sweeper_tasks.bandit_tuning.algorithms.logistic import (
    OnlineLogisticRegression,
    fit_logistic,
    logistic_hessian,
    logistic_kappa,
)
from sweeper_tasks.bandit_tuning.algorithms.sgd_ts import SGDTS, epoch_length
from sweeper_tasks.bandit_tuning.algorithms.ucb_glm import UCBGLM, glm_exploration_rate
from tests.test_algorithms import Problem, changing_hps, play


@pytest.fixture(autouse=True)
def single_blas_thread():
    """As in the cell: d x d algebra is slower with OpenBLAS threads on a busy machine."""
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def scipy_fit(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """The ridge logistic MLE by a general-purpose optimiser (the obvious slow way)."""

    def objective(theta):
        z = X @ theta
        value = np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * lam * theta @ theta
        gradient = X.T @ (1.0 / (1.0 + np.exp(-z)) - y) + lam * theta
        return value, gradient

    result = minimize(
        objective,
        np.zeros(X.shape[1]),
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000},
    )
    return result.x


def logistic_data(n: int, d: int = 8, seed: int = 0, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    bound = 1.0 / math.sqrt(d)
    theta = scale * rng.uniform(-bound, bound, d)
    X = rng.uniform(-bound, bound, (n, d))
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-X @ theta))).astype(float)
    return X, y


# --- the logistic estimate ----------------------------------------------------------------
def test_newton_fit_matches_scipy():
    X, y = logistic_data(400, seed=1)
    for lam in (1.0, 0.01):
        np.testing.assert_allclose(fit_logistic(X, y, lam), scipy_fit(X, y, lam), atol=1e-5)


def test_unregularised_fit_on_separable_data_is_reported_not_returned():
    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.5, 0.2]])
    y = np.array([1.0, 0.0, 1.0])
    with pytest.raises(DivergenceError, match="separable"):
        fit_logistic(X, y, 0.0)


def test_online_estimate_in_exact_mode_is_the_mle_every_round():
    X, y = logistic_data(150, seed=2)
    estimate = OnlineLogisticRegression(8, 1.0, capacity=16, correction_growth=0, hessian_growth=0)
    for n in range(150):
        estimate.add(X[n], y[n])
        if n % 10 == 9:
            np.testing.assert_allclose(
                estimate.theta, scipy_fit(X[: n + 1], y[: n + 1], 1.0), atol=1e-6
            )
            np.testing.assert_allclose(
                estimate.hessian_inv,
                np.linalg.inv(logistic_hessian(X[: n + 1], estimate.theta, 1.0)),
                rtol=1e-8,
            )


def test_online_estimate_in_default_mode_stays_within_1e3_of_the_mle():
    """The documented approximation: online Newton steps between geometric corrections."""
    d, n_total = 25, 2000
    X, y = logistic_data(n_total, d=d, seed=3)
    estimate = OnlineLogisticRegression(d, 1.0, capacity=n_total)
    worst, worst_hessian, exact = 0.0, 0.0, np.zeros(d)
    for n in range(n_total):
        estimate.add(X[n], y[n])
        if n % 13 == 0 or n < 40:
            exact = fit_logistic(X[: n + 1], y[: n + 1], 1.0, exact)
            worst = max(worst, float(np.max(np.abs(estimate.theta - exact))))
            true_hessian = logistic_hessian(X[: n + 1], exact, 1.0)
            worst_hessian = max(
                worst_hessian,
                float(
                    np.linalg.norm(estimate.hessian - true_hessian, 2)
                    / np.linalg.norm(true_hessian, 2)
                ),
            )
    assert worst < 1e-3
    assert worst_hessian < 0.02
    # right after a correction it is the MLE
    estimate.correct()
    np.testing.assert_allclose(estimate.theta, fit_logistic(X, y, 1.0), atol=1e-7)


def test_changing_lambda_moves_the_estimate_to_the_new_mle():
    X, y = logistic_data(300, seed=4)
    estimate = OnlineLogisticRegression(8, 1.0, capacity=300)
    for n in range(300):
        estimate.add(X[n], y[n])
    estimate.set_regularisation(0.1)
    assert np.max(np.abs(estimate.theta - scipy_fit(X, y, 0.1))) < 5e-3
    estimate.correct()
    np.testing.assert_allclose(estimate.theta, scipy_fit(X, y, 0.1), atol=1e-6)
    with pytest.raises(ValueError, match="must be positive"):
        estimate.set_regularisation(0.0)


# --- slow UCB-GLM and GLM-TSL: refit with scipy every round --------------------------------
class SlowGLM:
    """Li et al. 2017 / Kveton et al. 2020 as written: refit the MLE from scratch each round."""

    def __init__(self, thompson: bool, warmup: int, lam: float = 1.0):
        self.thompson, self.warmup, self.lam = thompson, warmup, lam

    def reset(self, d, horizon, rng):
        self.d, self.rng, self.X, self.y = d, rng, [], []

    def select(self, features, hp, t):
        if len(self.X) < self.warmup:
            return int(self.rng.integers(len(features)))
        lam = self.lam if self.thompson else hp["regularisation"]
        X, y = np.array(self.X), np.array(self.y)
        theta = scipy_fit(X, y, lam)
        if self.thompson:
            m = 1.0 / (1.0 + np.exp(-X @ theta))
            hessian = lam * np.eye(self.d) + sum(
                mi * (1 - mi) * np.outer(x, x) for mi, x in zip(m, X, strict=True)
            )
            factor = np.linalg.cholesky(np.linalg.inv(hessian))
            sample = theta + hp["exploration_rate"] * factor @ self.rng.standard_normal(self.d)
            return int(np.argmax([x @ sample for x in features]))
        v_inv = np.linalg.inv(lam * np.eye(self.d) + X.T @ X)
        scores = [x @ theta + hp["exploration_rate"] * math.sqrt(x @ v_inv @ x) for x in features]
        return int(np.argmax(scores))

    def update(self, x, reward, hp, t):
        self.X.append(x)
        self.y.append(reward)


def test_ucb_glm_exact_mode_chooses_the_arms_of_a_refit_every_round():
    problem = Problem("logistic", T=200, K=20, d=5, seed=6, scale=3.0)
    hps = changing_hps(200)  # exploration rate and lambda change every round
    fast, _ = play(UCBGLM(warmup_rounds=10, correction_growth=0, hessian_growth=0), problem, hps)
    slow, _ = play(SlowGLM(thompson=False, warmup=10), problem, hps)
    assert fast == slow


def test_glm_tsl_exact_mode_chooses_the_arms_of_a_refit_every_round():
    problem = Problem("logistic", T=200, K=20, d=5, seed=7, scale=3.0)
    hps = changing_hps(200)
    fast, _ = play(GLMTSL(warmup_rounds=10, correction_growth=0, hessian_growth=0), problem, hps)
    slow, _ = play(SlowGLM(thompson=True, warmup=10), problem, hps)
    assert fast == slow


@pytest.mark.parametrize("algorithm", [UCBGLM, GLMTSL])
def test_default_mode_decides_like_the_exact_mode(algorithm):
    """With the same history, the approximate estimate picks the exact estimate's arm."""
    problem = Problem("logistic", T=600, K=120, d=25, seed=8)
    hp = {"exploration_rate": 1.0, "regularisation": 1.0}
    approximate = algorithm(warmup_rounds=25)
    exact = algorithm(warmup_rounds=25, correction_growth=0, hessian_growth=0)
    approximate.reset(25, 600, np.random.default_rng(3))
    exact.reset(25, 600, np.random.default_rng(3))
    agree = 0
    for t in range(600):
        features = problem.features[t]
        arm = exact.select(features, hp, t + 1)
        agree += approximate.select(features, hp, t + 1) == arm
        for bandit in (approximate, exact):
            bandit.update(features[arm], problem.reward(t, arm), hp, t + 1)
    assert agree >= 0.98 * 600


def test_glm_theoretical_rates_match_the_papers_at_their_scale():
    kappa = logistic_kappa(1.0)
    assert kappa == pytest.approx(0.19661, abs=1e-5)  # 003's code: 0.196
    expected = 0.5 / kappa * math.sqrt(25 / 2 * math.log(1 + 2 * 14000 / 25) + math.log(10))
    assert glm_exploration_rate(14000, 25, 0.5, kappa, 0.1) == pytest.approx(expected)
    # GLM-TSL: 003's code evaluates 0.5/0.1*sqrt(d log(T/d) + 2 log T)*sqrt(0.25) = 33.3
    assert glm_tsl_exploration_rate(14000, 25, 0.5, kappa) == pytest.approx(33.3, rel=0.03)
    algorithm = GLMTSL()
    algorithm.reset(25, 14000, np.random.default_rng(0))
    assert (
        algorithm.theoretical(7)["exploration_rate"]
        == algorithm.theoretical(14000)["exploration_rate"]
    )


def test_glm_warmup_pulls_random_arms_first():
    problem = Problem("logistic", T=60, K=20, d=5, seed=1)
    hp = {"exploration_rate": 0.0, "regularisation": 1.0}
    algorithm = UCBGLM(warmup_rounds=30)
    arms, _ = play(algorithm, problem, hp, seed=4)
    rng = np.random.default_rng(4)
    assert arms[:30] == [int(rng.integers(20)) for _ in range(30)]
    assert UCBGLM().warmup_rounds is None and algorithm.warmup == 30
    with pytest.raises(ValueError, match="warmup_rounds"):
        UCBGLM(warmup_rounds=-1)


# --- Laplace-TS ------------------------------------------------------------------------
class SlowLaplaceTS:
    """Chapelle and Li Algorithm 3 with plain vector gradient descent in the prior metric."""

    def __init__(self, tolerance=1e-4, halve_every=100, max_iterations=1000):
        self.tolerance, self.halve_every, self.max_iterations = (
            tolerance,
            halve_every,
            max_iterations,
        )

    def reset(self, d, horizon, rng):
        self.rng, self.m, self.q = rng, np.zeros(d), np.ones(d)

    def select(self, features, hp, t):
        w = self.m + self.rng.standard_normal(len(self.m)) / np.sqrt(self.q)
        return int(np.argmax([x @ w for x in features]))

    def update(self, x, reward, hp, t):
        label, w, eta = 2 * reward - 1, self.m.copy(), hp["step_size"]
        for iteration in range(self.max_iterations):
            gradient = self.q * (w - self.m) - label * x * np.exp(
                -np.logaddexp(0.0, label * (x @ w))
            )
            if np.linalg.norm(gradient) <= self.tolerance:
                break
            if iteration and iteration % self.halve_every == 0:
                eta /= 2
            w = w - eta * gradient / self.q
        self.m = w
        p = 1 / (1 + np.exp(-(x @ w)))
        self.q = self.q + p * (1 - p) * x**2


@pytest.mark.parametrize("step_size", [0.1, 1.0, 4.0])
def test_laplace_ts_scalar_descent_matches_vector_descent(step_size):
    problem = Problem("logistic", T=120, K=20, d=6, seed=3, scale=2.0)
    hp = {"step_size": step_size}
    fast_algorithm, slow_algorithm = LaplaceTS(halve_every=20), SlowLaplaceTS(halve_every=20)
    fast, _ = play(fast_algorithm, problem, hp)
    slow, _ = play(slow_algorithm, problem, hp)
    assert fast == slow
    np.testing.assert_allclose(fast_algorithm.mean, slow_algorithm.m, atol=1e-8)
    np.testing.assert_allclose(fast_algorithm.precision, slow_algorithm.q, rtol=1e-10)


def test_laplace_ts_update_is_the_map_of_the_laplace_objective():
    algorithm = LaplaceTS(tolerance=1e-10)
    algorithm.reset(4, 10, np.random.default_rng(0))
    algorithm.mean[:] = [0.3, -0.2, 0.1, 0.0]
    algorithm.precision[:] = [2.0, 5.0, 1.0, 3.0]
    m, q, x = algorithm.mean.copy(), algorithm.precision.copy(), np.array([0.5, 0.4, -0.3, 0.2])

    def objective(w):
        return 0.5 * np.sum(q * (w - m) ** 2) + np.logaddexp(0.0, -(x @ w))

    algorithm.update(x, 1.0, {"step_size": 1.0}, 1)
    expected = minimize(objective, m, method="BFGS", options={"gtol": 1e-12}).x
    np.testing.assert_allclose(algorithm.mean, expected, atol=1e-7)


def test_laplace_ts_divergence_is_raised():
    algorithm = LaplaceTS(halve_every=1000)
    algorithm.reset(3, 10, np.random.default_rng(0))
    with pytest.raises(DivergenceError, match="step size"):
        algorithm.update(np.array([0.5, 0.5, 0.5]), 1.0, {"step_size": 1e6}, 1)


# --- GLOC -------------------------------------------------------------------------------
def test_projection_onto_the_ball_in_a_matrix_norm_matches_scipy():
    rng = np.random.default_rng(0)
    for _ in range(5):
        root = rng.standard_normal((5, 5))
        metric = root @ root.T + 0.5 * np.eye(5)
        point = rng.standard_normal(5) * 3
        projected = project_to_ball(point, metric, 1.0)
        result = minimize(
            lambda th, p=point, a=metric: (th - p) @ a @ (th - p),
            np.zeros(5),
            constraints=[{"type": "ineq", "fun": lambda th: 1.0 - th @ th}],
            method="SLSQP",
            options={"ftol": 1e-14, "maxiter": 500},
        )
        assert np.linalg.norm(projected) == pytest.approx(1.0, abs=1e-9)
        np.testing.assert_allclose(projected, result.x, atol=1e-5)
    inside = np.array([0.1, 0.2, 0.0, 0.0, 0.0])
    assert project_to_ball(inside, np.eye(5), 1.0) is inside


class SlowGLOC:
    """Jun et al. 2017 Algorithms 1-2 with matrices inverted from scratch every round."""

    def reset(self, d, horizon, rng):
        self.d, self.X, self.z = d, [], []
        self.theta = np.zeros(d)

    def select(self, features, hp, t):
        X = np.array(self.X).reshape(-1, self.d)
        v_inv = np.linalg.inv(np.eye(self.d) + X.T @ X)
        theta_hat = v_inv @ (X.T @ np.array(self.z).reshape(-1))
        scores = [
            x @ theta_hat + hp["exploration_rate"] * math.sqrt(x @ v_inv @ x) for x in features
        ]
        return int(np.argmax(scores))

    def update(self, x, reward, hp, t):
        z = x @ self.theta
        self.X.append(x)
        self.z.append(z)
        X = np.array(self.X)
        a = np.eye(self.d) + X.T @ X
        gradient = 1 / (1 + np.exp(-z)) - reward
        candidate = self.theta - gradient / hp["step_parameter"] * np.linalg.solve(a, x)
        if candidate @ candidate > 1.0:
            candidate = minimize(
                lambda th: (th - candidate) @ a @ (th - candidate),
                candidate / np.linalg.norm(candidate),
                constraints=[{"type": "ineq", "fun": lambda th: 1.0 - th @ th}],
                method="SLSQP",
                options={"ftol": 1e-15, "maxiter": 500},
            ).x
        self.theta = candidate


def test_gloc_chooses_the_arms_of_the_direct_transcription():
    problem = Problem("logistic", T=150, K=20, d=4, seed=5, scale=3.0)
    rng = np.random.default_rng(1)
    hps = [
        {
            "exploration_rate": float(rng.uniform(0.1, 5)),
            "step_parameter": float(rng.uniform(0.1, 5)),
        }
        for _ in range(150)
    ]
    fast_algorithm = GLOC()
    fast, _ = play(fast_algorithm, problem, hps)
    slow_algorithm = SlowGLOC()
    slow, _ = play(slow_algorithm, problem, hps)
    assert fast == slow
    assert fast_algorithm.projections > 0  # the projection was exercised
    np.testing.assert_allclose(fast_algorithm.ons_theta, slow_algorithm.theta, atol=1e-5)


def test_gloc_theory_follows_jun_et_al_and_refuses_bad_steps():
    algorithm = GLOC()
    algorithm.reset(25, 14000, np.random.default_rng(0))
    theory = algorithm.theoretical(14000)
    assert theory["step_parameter"] == pytest.approx(logistic_kappa(1.0))
    assert 50 < theory["exploration_rate"] < 200  # far outside CDT's [0.1, 5] box
    assert algorithm.theoretical(100)["exploration_rate"] < theory["exploration_rate"]
    assert (
        GLOC(hyperparameters={"step_parameter": {"default": 0.1}}).constant("step_parameter") == 0.1
    )
    algorithm.reset(3, 10, np.random.default_rng(0))
    with pytest.raises(ValueError, match="step_parameter must be positive"):
        algorithm.update(np.ones(3) / 2, 1.0, {"exploration_rate": 1.0, "step_parameter": 0.0}, 1)
    with pytest.raises(DivergenceError):
        algorithm.update(
            np.ones(3) / 2, 1.0, {"exploration_rate": 1.0, "step_parameter": 1e-320}, 1
        )


# --- SGD-TS -------------------------------------------------------------------------------
class SlowSGDTS:
    """The authors' round loop (002/003 code): warm-up, then an SGD step per epoch."""

    def __init__(self, tau: int):
        self.tau = tau

    def reset(self, d, horizon, rng):
        self.d, self.rng, self.t = d, rng, 0
        self.X, self.y = [], []

    def select(self, features, hp, t):
        tau, index = self.tau, self.t
        if index < tau:
            return int(self.rng.integers(len(features)))
        if index == tau:
            self.theta_hat = scipy_fit(np.array(self.X), np.array(self.y), 0.0)
            self.theta_tilde = self.theta_hat.copy()
            self.theta_bar = np.zeros(self.d)
            self.grad = np.zeros(self.d)
        if index % tau == 0:
            j = index // tau
            self.theta_tilde = self.theta_tilde - hp["step_size"] / j * self.grad
            distance = np.linalg.norm(self.theta_tilde - self.theta_hat)
            if distance > 2:
                self.theta_tilde = (
                    self.theta_hat + 2 * (self.theta_tilde - self.theta_hat) / distance
                )
            self.grad = np.zeros(self.d)
            self.theta_bar = (self.theta_bar * (j - 1) + self.theta_tilde) / j
            z = self.rng.standard_normal(self.d)
            self.theta_ts = self.theta_bar + math.sqrt(2 * hp["exploration_rate"] ** 2 / j) * z
        return int(np.argmax([x @ self.theta_ts for x in features]))

    def update(self, x, reward, hp, t):
        if self.t < self.tau:
            self.X.append(x)
            self.y.append(reward)
        else:
            self.grad = self.grad + x * (1 / (1 + np.exp(-(x @ self.theta_tilde))) - reward)
        self.t += 1


def test_sgd_ts_chooses_the_arms_of_the_authors_loop():
    # T = 310: the last epoch boundary (round 300) is inside the run for both loops
    problem = Problem("logistic", T=310, K=20, d=4, seed=9, scale=2.0)
    hp = {"exploration_rate": 0.3, "step_size": 1.0}
    fast_algorithm = SGDTS(epoch_multiplier=5)
    tau = epoch_length(310, 4, 5)
    assert tau == 5 * 5  # C floor(max(log T, d)) = 5 * 5
    fast, _ = play(fast_algorithm, problem, hp)
    slow_algorithm = SlowSGDTS(tau)
    slow, _ = play(slow_algorithm, problem, hp)
    assert fast == slow
    assert fast_algorithm.epoch == 12
    np.testing.assert_allclose(fast_algorithm.theta_bar, slow_algorithm.theta_bar, atol=1e-6)


def test_sgd_ts_theory_uses_the_epoch_and_the_step_size():
    algorithm = SGDTS()
    algorithm.reset(25, 14000, np.random.default_rng(0))
    assert algorithm.tau == 250  # 002 Appendix A.4: 10 floor(max(log T, d))
    early, late = algorithm.theoretical(251), algorithm.theoretical(14000)
    tau, j = 250, 55
    g1 = 0.5 * math.sqrt(25 / 2 * math.log(1 + 2 * j * tau / 25) + 2 * math.log(14000))
    g2 = tau / 1.0 * math.sqrt(1 + math.log(j))
    assert late["exploration_rate"] == pytest.approx(math.hypot(g1, g2))
    assert early["exploration_rate"] < late["exploration_rate"]
    assert late["step_size"] == 1.0


def test_default_mode_decides_like_the_exact_mode_with_lambda_changing_every_round():
    """002's Syndicated tunes lambda of UCB-GLM: a new lambda may come every round."""
    problem = Problem("logistic", T=600, K=120, d=25, seed=8)
    hps = changing_hps(600, seed=2)
    approximate = UCBGLM(warmup_rounds=25)
    exact = UCBGLM(warmup_rounds=25, correction_growth=0, hessian_growth=0)
    approximate.reset(25, 600, np.random.default_rng(3))
    exact.reset(25, 600, np.random.default_rng(3))
    agree = 0
    for t in range(600):
        features = problem.features[t]
        arm = exact.select(features, hps[t], t + 1)
        agree += approximate.select(features, hps[t], t + 1) == arm
        for bandit in (approximate, exact):
            bandit.update(features[arm], problem.reward(t, arm), hps[t], t + 1)
    assert agree >= 0.95 * 600


def test_gloc_step_parameter_theory_follows_the_configured_kappa():
    assert GLOC(kappa=0.1).constant("step_parameter") == 0.1
    assert GLOC(norm_bound=2.0).constant("step_parameter") == pytest.approx(logistic_kappa(2.0))
