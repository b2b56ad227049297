"""Linear Thompson sampling (Agrawal and Goyal 2013)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tasks.bandit_tuning.algorithms.linucb import LinUCB


class LinTS(LinUCB):
    """Sample theta_tilde ~ N(theta_hat, exploration_rate^2 V^-1), pull argmax_a x_a' theta_tilde.

    The theoretical exploration rate is LinUCB's alpha_t (003 Section 3, Table in DESIGN.md).
    """

    def select(self, features: np.ndarray, hp: Mapping[str, float], t: int) -> int:
        self.ridge.set_regularisation(hp["regularisation"])
        chol = np.linalg.cholesky(self.ridge.v_inv)
        theta = self.ridge.theta + hp["exploration_rate"] * (
            chol @ self.rng.standard_normal(self.n_features)
        )
        return int(np.argmax(features @ theta))
