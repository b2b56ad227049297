"""Ridge-regression state shared by LinUCB, LinTS, UCB-GLM and GLOC.

V = lambda I + sum x x', theta_hat = V^-1 sum x y (003 Section 3). V^-1 is kept by
Sherman-Morrison updates and theta_hat by the matching recursive least-squares step, O(d^2)
a round. When a tuner changes lambda, V = (V^-1)^-1 and b = V theta_hat are recovered and
V^-1 recomputed by Cholesky, O(d^3) once, so the cost per round never grows with t.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.linalg import lapack

from sweeper_tasks.bandit_tuning.algorithms.base import (
    DivergenceError,
    check_finite,
    check_finite_seeds,
    seed_dots,
)


def spd_inverse(matrix: np.ndarray, name: str = "matrix") -> np.ndarray:
    """The inverse of a symmetric positive-definite matrix by Cholesky (LAPACK potrf/potri)."""
    factor, info = lapack.dpotrf(matrix, lower=1, clean=0)
    if info != 0:
        raise DivergenceError(
            f"{name} is not positive definite (Cholesky failed at column {info}); "
            "its regularisation must be positive"
        )
    inverse, info = lapack.dpotri(factor, lower=1)
    if info != 0:
        raise DivergenceError(f"{name} could not be inverted (LAPACK potri info {info})")
    lower = np.tril(inverse)
    return lower + np.tril(lower, -1).T


def cholesky_lower(matrix: np.ndarray, name: str = "matrix") -> np.ndarray:
    """The lower Cholesky factor L (matrix = L L'), for drawing N(0, matrix) as L z."""
    factor, info = lapack.dpotrf(matrix, lower=1, clean=1)
    if info != 0:
        raise DivergenceError(
            f"{name} is not positive definite (Cholesky failed at column {info}); "
            "a sampling covariance lost positive definiteness"
        )
    return factor


def sample_around(
    centres: np.ndarray,
    covariances: np.ndarray,
    scales: np.ndarray,
    rngs: list[np.random.Generator],
    name: str,
) -> np.ndarray:
    """theta_s + scale_s L_s z_s for each seed s, with covariance_s = L_s L_s' and z_s
    standard normal from the seed's generator: (S, d), as one seed's draw (a Cholesky per
    seed, the sampling step of LinTS and GLM-TSL)."""
    theta = np.empty_like(centres)
    d = centres.shape[1]
    for s, rng in enumerate(rngs):
        factor = cholesky_lower(covariances[s], name)
        theta[s] = centres[s] + scales[s] * (factor @ rng.standard_normal(d))
    return theta


def check_regularisation(value: float) -> float:
    value = float(value)
    if not value > 0:
        raise ValueError(
            f"regularisation (lambda) must be positive so that V = lambda I + sum x x' is "
            f"invertible, got {value}; pick a positive interval or candidate set"
        )
    return value


class RidgeState:
    """V^-1 and theta_hat = V^-1 b of a ridge regression, updated in O(d^2) a round.

    Both live in one d x (d + 1) array ``augmented = [V^-1 | theta_hat]``, so scoring
    all arms is one matrix product (``features @ augmented`` gives F V^-1 and F theta_hat)
    and an update is one rank-one correction of it.
    """

    def __init__(self, n_features: int, regularisation: float) -> None:
        lam = check_regularisation(regularisation)
        d = int(n_features)
        self.n_features = d
        self.regularisation = lam
        self.augmented = np.zeros((d, d + 1))
        self.augmented[:, :d] = np.eye(d) / lam

    @property
    def v_inv(self) -> np.ndarray:
        """V^-1 (a view)."""
        return self.augmented[:, : self.n_features]

    @property
    def theta(self) -> np.ndarray:
        """theta_hat = V^-1 sum x y (a view)."""
        return self.augmented[:, self.n_features]

    def set_regularisation(self, regularisation: float) -> None:
        """Switch lambda: V -> V + (new - old) I with the same data, O(d^3)."""
        if regularisation == self.regularisation:
            return
        lam = check_regularisation(regularisation)
        v = spd_inverse(self.v_inv, "V^-1")
        b = v @ self.theta
        v.flat[:: self.n_features + 1] += lam - self.regularisation
        self.regularisation = lam
        v_inv = spd_inverse(v, "V = lambda I + sum x x'")
        self.augmented[:, : self.n_features] = v_inv
        self.augmented[:, self.n_features] = v_inv @ b
        check_finite("ridge estimate theta_hat", self.augmented)

    def add(self, x: np.ndarray, y: float) -> None:
        """Sherman-Morrison and recursive least squares in one rank-one update.

        With g = V^-1 x / (1 + x' V^-1 x): V^-1 <- V^-1 - g x' V^-1 and
        theta_hat <- theta_hat + g (y - x' theta_hat).
        """
        d = self.n_features
        row = x @ self.augmented  # [x' V^-1, x' theta_hat]
        prediction = row[d]
        if not math.isfinite(prediction):
            check_finite("ridge estimate theta_hat", self.theta)
        row[d] = prediction - y
        vx = row[:d]
        gain = vx / (1.0 + vx @ x)
        self.augmented -= np.multiply.outer(gain, row)

    def scores(self, features: np.ndarray, exploration_rate: float) -> np.ndarray:
        """x' theta_hat + exploration_rate ||x||_{V^-1} for every row, vectorised over arms."""
        d = self.n_features
        product = features @ self.augmented
        quadratic = np.einsum("ij,ij->i", product[:, :d], features)
        np.maximum(quadratic, 0.0, out=quadratic)
        np.sqrt(quadratic, out=quadratic)
        quadratic *= exploration_rate
        quadratic += product[:, d]
        return quadratic

    def widths(self, features: np.ndarray) -> np.ndarray:
        """||x||_{V^-1} = sqrt(x' V^-1 x) for every row of ``features``."""
        quadratic = np.einsum("ij,ij->i", features @ self.v_inv, features)
        return np.sqrt(np.maximum(quadratic, 0.0, out=quadratic), out=quadratic)


class BatchRidge:
    """S seeds' :class:`RidgeState`, ``augmented`` stacked as (S, d, d + 1).

    ``add`` and ``scores`` run all seeds at once with the operations of one seed (the
    products seed by seed in one batched call); a seed whose lambda changes is switched by
    its own ``RidgeState``, which works on its view of the stack.
    """

    def __init__(self, states: Sequence[RidgeState]) -> None:
        self.states = list(states)
        self.n_features = d = self.states[0].n_features
        self.augmented = np.stack([state.augmented for state in self.states])
        for s, state in enumerate(self.states):
            state.augmented = self.augmented[s]
        self.regularisation = np.array([state.regularisation for state in self.states])
        self._d = d

    @property
    def v_inv(self) -> np.ndarray:
        return self.augmented[:, :, : self._d]

    @property
    def theta(self) -> np.ndarray:
        return self.augmented[:, :, self._d]

    def set_regularisation(self, regularisation: np.ndarray) -> None:
        """Each seed whose lambda changes switches it (``RidgeState.set_regularisation``)."""
        for s in np.flatnonzero(regularisation != self.regularisation).tolist():
            self.states[s].set_regularisation(float(regularisation[s]))
            self.regularisation[s] = self.states[s].regularisation

    def add(self, x: np.ndarray, y: np.ndarray) -> None:
        """``RidgeState.add`` of every seed: x (S, d), y (S,)."""
        d = self._d
        row = (x[:, None, :] @ self.augmented)[:, 0]  # [x' V^-1, x' theta_hat] per seed
        prediction = row[:, d]
        if not np.isfinite(prediction).all():
            check_finite_seeds("ridge estimate theta_hat", self.theta)
        row[:, d] = prediction - y
        vx = row[:, :d]
        gain = vx / (1.0 + seed_dots(vx, x))[:, None]
        self.augmented -= gain[:, :, None] * row[:, None, :]

    def scores(self, features: np.ndarray, exploration_rate: np.ndarray) -> np.ndarray:
        """``RidgeState.scores`` of every seed: features (S, K, d), rates (S,) -> (S, K)."""
        d = self._d
        product = features @ self.augmented
        quadratic = np.einsum("sij,sij->si", product[:, :, :d], features)
        np.maximum(quadratic, 0.0, out=quadratic)
        np.sqrt(quadratic, out=quadratic)
        quadratic *= exploration_rate[:, None]
        quadratic += product[:, :, d]
        return quadratic

    def widths(self, features: np.ndarray) -> np.ndarray:
        """||x||_{V^-1} of every arm of every seed: features (S, K, d) -> (S, K)."""
        quadratic = np.einsum("sij,sij->si", features @ self.v_inv, features)
        return np.sqrt(np.maximum(quadratic, 0.0, out=quadratic), out=quadratic)
