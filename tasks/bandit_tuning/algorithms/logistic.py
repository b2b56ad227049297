"""The logistic maximum-likelihood estimate of the GLM bandits, kept current cheaply.

UCB-GLM (Li et al. 2017) and GLM-TSL (Kveton et al. 2020) refit a logistic regression on
the whole history every round; the papers' code does it with scikit-learn, which makes a
cell quadratic in T. ``OnlineLogisticRegression`` keeps the ridge-regularised MLE

    theta_hat = argmin  sum_s [log(1 + exp(x_s' theta)) - y_s x_s' theta] + lambda/2 ||theta||^2

current at a cost per round that does not grow with t:

1. every observation takes one online Newton step theta <- theta - H^-1 x (mu(x' theta) - y),
   with H += mu'(x' theta) x x' kept inverted by Sherman-Morrison, O(d^2);
2. whenever the history has grown by the factor ``1 + correction_growth`` since the last
   correction, quasi-Newton steps theta <- theta - H^-1 grad L(theta) with the exact
   gradient over the whole history (O(n d) each) bring theta back to the MLE to
   ``tolerance``;
3. whenever it has grown by ``1 + hessian_growth``, H is recomputed exactly at theta (O(n d^2)).

The corrections happen at geometrically spaced sizes, so their total cost is
O(T d / correction_growth + T d^2 / hessian_growth): constant per round on average. With
both growths 0 every round is corrected and refreshed, which is the papers' exact refit
(tests/test_algorithms_glm.py checks that mode against scipy.optimize and bounds the error of
the default one).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.special import expit

from sweeper_tasks.bandit_tuning.algorithms.base import (
    DivergenceError,
    check_finite,
    check_finite_seeds,
    seed_dots,
    seed_products,
)
from sweeper_tasks.bandit_tuning.algorithms.ridge import check_regularisation, spd_inverse


def sigmoid(z: float) -> float:
    """The logistic link mu(z) for one number, without numpy's per-call overhead."""
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def logistic_kappa(norm_bound: float) -> float:
    """kappa = mu'(S): the smallest slope of the link on |x' theta| <= S (||x|| <= 1)."""
    m = sigmoid(float(norm_bound))
    return m * (1.0 - m)


def logistic_gradient(
    X: np.ndarray, y: np.ndarray, theta: np.ndarray, regularisation: float
) -> np.ndarray:
    """grad L(theta) = X' (mu(X theta) - y) + lambda theta."""
    return X.T @ (expit(X @ theta) - y) + regularisation * theta


def logistic_hessian(X: np.ndarray, theta: np.ndarray, regularisation: float) -> np.ndarray:
    """Hess L(theta) = X' diag(mu'(X theta)) X + lambda I."""
    m = expit(X @ theta)
    hessian = (X.T * (m * (1.0 - m))) @ X
    hessian.flat[:: X.shape[1] + 1] += regularisation
    return hessian


def logistic_loss(X: np.ndarray, y: np.ndarray, theta: np.ndarray, regularisation: float) -> float:
    z = X @ theta
    return float(np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * regularisation * theta @ theta)


def fit_logistic(
    X: np.ndarray,
    y: np.ndarray,
    regularisation: float,
    theta: np.ndarray | None = None,
    tolerance: float = 1e-10,
    max_iterations: int = 100,
) -> np.ndarray:
    """The (ridge-regularised) logistic MLE by Newton's method with backtracking.

    Raises DivergenceError when it does not converge, e.g. an unregularised fit on data a
    hyperplane separates (the MLE is then at infinity): set a positive regularisation.
    """
    d = X.shape[1]
    theta = np.zeros(d) if theta is None else np.array(theta, dtype=float)
    loss = logistic_loss(X, y, theta, regularisation)
    for _ in range(max_iterations):
        gradient = logistic_gradient(X, y, theta, regularisation)
        hessian = logistic_hessian(X, theta, regularisation)
        try:
            step = np.linalg.solve(hessian, gradient)
        except np.linalg.LinAlgError as err:
            raise DivergenceError(
                f"logistic MLE: the Hessian is singular ({err}); the rewards may be separable "
                "by a hyperplane: use a positive regularisation or more warm-up rounds"
            ) from err
        scale = 1.0
        while True:
            candidate = theta - scale * step
            new_loss = logistic_loss(X, y, candidate, regularisation)
            if new_loss <= loss + 1e-4 * scale * (-(gradient @ step)) or scale < 1e-10:
                break
            scale *= 0.5
        theta, loss = candidate, new_loss
        check_finite("logistic MLE", theta)
        if np.max(np.abs(scale * step)) < tolerance:
            return theta
    raise DivergenceError(
        f"logistic MLE did not converge in {max_iterations} Newton steps (the rewards may be "
        "separable by a hyperplane); use a positive regularisation or more warm-up rounds"
    )


def next_size(n: int, growth: float) -> int:
    """The history size of the next correction: n * (1 + growth), at least n + 1."""
    return max(n + 1, math.ceil(n * (1.0 + growth)))


class OnlineLogisticRegression:
    """theta_hat, an approximate Hessian H and H^-1 of the ridge logistic MLE (module doc).

    ``capacity`` preallocates the history (n x d, memory linear in T, never T x K x d);
    it grows by doubling if more observations arrive.
    """

    def __init__(
        self,
        n_features: int,
        regularisation: float,
        capacity: int = 1024,
        correction_growth: float = 0.01,
        hessian_growth: float = 0.1,
        tolerance: float = 1e-8,
        max_corrections: int = 50,
    ) -> None:
        if correction_growth < 0 or hessian_growth < 0:
            raise ValueError(
                "correction_growth and hessian_growth must be >= 0 (0: correct every round), "
                f"got {correction_growth} and {hessian_growth}"
            )
        d = int(n_features)
        self.n_features = d
        self.regularisation = check_regularisation(regularisation)
        self.correction_growth = float(correction_growth)
        self.hessian_growth = float(hessian_growth)
        self.tolerance = float(tolerance)
        self.max_corrections = int(max_corrections)
        self.X = np.empty((max(int(capacity), 1), d))
        self.y = np.empty(max(int(capacity), 1))
        self.n = 0
        self.theta = np.zeros(d)
        self.hessian = self.regularisation * np.eye(d)
        self.hessian_inv = np.eye(d) / self.regularisation
        self._next_correction = 1
        self._next_refresh = 1
        self._diagonal = np.arange(d) * (d + 1)

    # -- observations -------------------------------------------------------------------
    def add(self, x: np.ndarray, y: float) -> None:
        """Record (x, y), take the online Newton step and any correction that is due."""
        if self.n == len(self.X):
            self.X = np.concatenate([self.X, np.empty_like(self.X)])
            self.y = np.concatenate([self.y, np.empty_like(self.y)])
        self.X[self.n] = x
        self.y[self.n] = y
        self.n += 1
        mean = sigmoid(float(x @ self.theta))
        weight = mean * (1.0 - mean)
        hx = self.hessian_inv @ x
        denominator = 1.0 + weight * (x @ hx)
        # Newton step with the Hessian that includes the new observation.
        self.theta -= hx * ((mean - y) / denominator)
        self.hessian_inv -= np.multiply.outer(hx, hx * (weight / denominator))
        self.hessian += np.multiply.outer(x * weight, x)
        refresh = self.n >= self._next_refresh
        if refresh or self.n >= self._next_correction:
            self.correct()
            self._next_correction = next_size(self.n, self.correction_growth)
        if refresh:  # at the corrected estimate, so H is the Hessian at the MLE
            self.refresh_hessian()
            self._next_refresh = next_size(self.n, self.hessian_growth)
        if not math.isfinite(float(self.theta[0])):
            check_finite("logistic estimate theta_hat", self.theta)

    def set_regularisation(self, regularisation: float) -> None:
        """Switch lambda: H += (new - old) I, and one Newton step to the new optimum.

        The step is exact for the quadratic change of the loss up to the curvature change
        of the likelihood over the step; the next correction removes what is left (in the
        exact mode it happens at once).
        """
        if regularisation == self.regularisation:
            return
        lam = check_regularisation(regularisation)
        change = lam - self.regularisation
        self.regularisation = lam
        self.hessian.flat[self._diagonal] += change
        self.hessian_inv = spd_inverse(self.hessian, "logistic Hessian")
        self.theta -= self.hessian_inv @ (change * self.theta)
        check_finite("logistic estimate theta_hat", self.theta)
        if self.correction_growth == 0 and self.n:  # exact mode: the MLE of the new lambda
            self.correct()

    # -- exact passes over the history --------------------------------------------------
    def gradient(self) -> np.ndarray:
        X, y = self.X[: self.n], self.y[: self.n]
        return logistic_gradient(X, y, self.theta, self.regularisation)

    def exact_hessian(self) -> np.ndarray:
        return logistic_hessian(self.X[: self.n], self.theta, self.regularisation)

    def refresh_hessian(self) -> None:
        """H <- the exact Hessian at theta over the whole history (O(n d^2))."""
        self.hessian = self.exact_hessian()
        self.hessian_inv = spd_inverse(self.hessian, "logistic Hessian")

    def correct(self) -> None:
        """Damped quasi-Newton steps with the exact gradient until the step is below tolerance.

        theta <- theta - s H^-1 grad L(theta), with s halved until the loss decreases
        (Armijo) when the step is not already negligible. If H is too far from the
        Hessian for the steps to settle within three tries, H is recomputed at every
        further step (damped Newton, which converges on this strongly convex loss).
        """
        X, y, lam = self.X[: self.n], self.y[: self.n], self.regularisation
        theta = self.theta
        z = X @ theta
        loss = _loss(z, y, theta, lam)
        for iteration in range(self.max_corrections):
            gradient = X.T @ (expit(z) - y) + lam * theta
            step = self.hessian_inv @ gradient
            decrease = float(gradient @ step)
            scale = 1.0
            while True:
                candidate = theta - scale * step
                z_candidate = X @ candidate
                loss_candidate = _loss(z_candidate, y, candidate, lam)
                if (
                    decrease <= 1e-12 * (1.0 + abs(loss))
                    or loss_candidate <= loss - 1e-4 * scale * decrease
                    or scale < 1e-8
                ):
                    break
                scale *= 0.5
            theta, z, loss = candidate, z_candidate, loss_candidate
            check_finite("logistic estimate theta_hat", theta)
            if scale * float(np.max(np.abs(step))) < self.tolerance:
                self.theta = theta
                return
            if iteration >= 2:  # slow to settle: exact Newton from here on
                self.theta = theta
                self.refresh_hessian()
        raise DivergenceError(
            f"logistic estimate did not converge in {self.max_corrections} Newton steps "
            f"after {self.n} observations (the rewards may be separable by a hyperplane); "
            "use a larger regularisation or more warm-up rounds"
        )


def _loss(z: np.ndarray, y: np.ndarray, theta: np.ndarray, regularisation: float) -> float:
    return float(np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * regularisation * (theta @ theta))


def sigmoid_seeds(z: np.ndarray) -> np.ndarray:
    """``sigmoid`` of each seed's number (S,), with the same arithmetic as one seed's."""
    return np.array([sigmoid(v) for v in z.tolist()])


class BatchLogistic:
    """S seeds' :class:`OnlineLogisticRegression`, stacked on a leading seed axis.

    Every seed adds one observation a round, so all share the history size n and the sizes
    at which corrections fall. The online Newton step runs for all seeds at once; the exact
    passes over the history (``correct``, ``refresh_hessian``) and a change of lambda run
    seed by seed in each seed's own object, which works on its views of the stacks.
    """

    ARRAYS = ("X", "y", "theta", "hessian", "hessian_inv")

    def __init__(self, models: Sequence[OnlineLogisticRegression]) -> None:
        self.models = list(models)
        first = self.models[0]
        self.n = first.n
        self._next_correction = first._next_correction
        self._next_refresh = first._next_refresh
        self.correction_growth = first.correction_growth
        self.hessian_growth = first.hessian_growth
        for name in self.ARRAYS:
            setattr(self, name, np.stack([getattr(m, name) for m in self.models]))
        for s in range(len(self.models)):
            self._bind(s)
        self.regularisation = np.array([m.regularisation for m in self.models])

    def _bind(self, s: int) -> None:
        """Seed ``s``'s object works on its views of the stacks."""
        model = self.models[s]
        model.n = self.n
        for name in self.ARRAYS:
            setattr(model, name, getattr(self, name)[s])

    def _collect(self, s: int) -> None:
        """Take back the arrays seed ``s``'s object replaced (it assigns new ones)."""
        model = self.models[s]
        for name in ("theta", "hessian", "hessian_inv"):
            getattr(self, name)[s] = getattr(model, name)
        self._bind(s)

    def _each(self, method: str, seeds: Sequence[int] | None = None) -> None:
        for s in range(len(self.models)) if seeds is None else seeds:
            self._bind(s)
            getattr(self.models[s], method)()
            self._collect(s)

    def add(self, x: np.ndarray, y: np.ndarray) -> None:
        """``OnlineLogisticRegression.add`` of every seed: x (S, d), y (S,)."""
        if self.n == self.X.shape[1]:
            self.X = np.concatenate([self.X, np.empty_like(self.X)], axis=1)
            self.y = np.concatenate([self.y, np.empty_like(self.y)], axis=1)
        self.X[:, self.n] = x
        self.y[:, self.n] = y
        self.n += 1
        mean = sigmoid_seeds(seed_dots(x, self.theta))
        weight = mean * (1.0 - mean)
        hx = seed_products(self.hessian_inv, x)
        denominator = 1.0 + weight * seed_dots(x, hx)
        self.theta -= hx * ((mean - y) / denominator)[:, None]
        self.hessian_inv -= hx[:, :, None] * (hx * (weight / denominator)[:, None])[:, None, :]
        self.hessian += (x * weight[:, None])[:, :, None] * x[:, None, :]
        refresh = self.n >= self._next_refresh
        if refresh or self.n >= self._next_correction:
            self._each("correct")
            self._next_correction = next_size(self.n, self.correction_growth)
        if refresh:
            self._each("refresh_hessian")
            self._next_refresh = next_size(self.n, self.hessian_growth)
        if not np.isfinite(self.theta[:, 0]).all():
            check_finite_seeds("logistic estimate theta_hat", self.theta)

    def set_regularisation(self, regularisation: np.ndarray) -> None:
        """Each seed whose lambda changes switches it (``set_regularisation``)."""
        for s in np.flatnonzero(regularisation != self.regularisation).tolist():
            self._bind(s)
            self.models[s].set_regularisation(float(regularisation[s]))
            self._collect(s)
            self.regularisation[s] = self.models[s].regularisation
