"""Ridge-regression state shared by the linear bandits (LinUCB, LinTS).

V = lambda I + sum x x', b = sum x y. The inverse V^-1 is kept by Sherman-Morrison
updates in O(d^2) a round; when a tuner changes lambda, V^-1 is recomputed once from the
Gram matrix G = sum x x' in O(d^3), so the cost per round never grows with t.
"""

from __future__ import annotations

import numpy as np

from tasks.bandit_tuning.algorithms.base import check_finite


class RidgeState:
    def __init__(self, n_features: int, regularisation: float) -> None:
        self.gram = np.zeros((n_features, n_features))
        self.b = np.zeros(n_features)
        self.regularisation = float(regularisation)
        self.v_inv = np.eye(n_features) / self.regularisation
        self._theta: np.ndarray | None = None

    def set_regularisation(self, regularisation: float) -> None:
        """Switch lambda; recompute V^-1 = (G + lambda I)^-1 only when it changed."""
        if regularisation != self.regularisation:
            self.regularisation = float(regularisation)
            d = self.gram.shape[0]
            self.v_inv = np.linalg.inv(self.gram + self.regularisation * np.eye(d))
            self._theta = None

    @property
    def theta(self) -> np.ndarray:
        """The ridge estimate theta_hat = V^-1 b."""
        if self._theta is None:
            self._theta = self.v_inv @ self.b
            check_finite("ridge estimate theta_hat", self._theta)
        return self._theta

    def add(self, x: np.ndarray, y: float) -> None:
        """Sherman-Morrison: (V + x x')^-1 = V^-1 - V^-1 x x' V^-1 / (1 + x' V^-1 x)."""
        self.gram += np.outer(x, x)
        self.b += y * x
        vx = self.v_inv @ x
        self.v_inv -= np.outer(vx, vx) / (1.0 + x @ vx)
        self._theta = None

    def widths(self, features: np.ndarray) -> np.ndarray:
        """sqrt(x' V^-1 x) for every row of ``features``, vectorised over arms."""
        quadratic = ((features @ self.v_inv) * features).sum(axis=1)
        return np.sqrt(np.maximum(quadratic, 0.0))
