"""Linear Thompson sampling (Agrawal and Goyal 2013)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from sweeper_tasks.bandit_tuning.algorithms.base import seed_products
from sweeper_tasks.bandit_tuning.algorithms.linucb import BatchLinUCB, LinUCB
from sweeper_tasks.bandit_tuning.algorithms.ridge import cholesky_lower, sample_around


class LinTS(LinUCB):
    """Sample theta_tilde ~ N(theta_hat, exploration_rate^2 V^-1), pull argmax_a x_a' theta_tilde.

    002 Section 3 (LinTS) and Agrawal and Goyal 2013. The theoretical exploration rate is
    LinUCB's alpha(t) (002 Eq. 3; 003 Appendix G uses the same width for LinTS);
    lambda as in LinUCB. The draw is theta_hat + alpha L z with V^-1 = L L' (one O(d^3)
    Cholesky of a d x d matrix per round) and z standard normal from the algorithm's
    own generator.
    """

    def select(self, features: np.ndarray, hp: Mapping[str, float], t: int) -> int:
        ridge = self.ridge
        ridge.set_regularisation(hp["regularisation"])
        factor = cholesky_lower(ridge.v_inv, "V^-1")
        theta = ridge.theta + hp["exploration_rate"] * (
            factor @ self.rng.standard_normal(self.n_features)
        )
        return int(np.argmax(features @ theta))

    def arms_for_rates(
        self, features: np.ndarray, hp: Mapping[str, float], rates: np.ndarray
    ) -> np.ndarray:
        """The arm ``select`` would pull under each rate of ``rates`` (R,) with ONE draw z
        shared by all rates (common random numbers; the draw advances the generator as one
        ``select`` does); (R,) arm indices."""
        ridge = self.ridge
        ridge.set_regularisation(hp["regularisation"])
        factor = cholesky_lower(ridge.v_inv, "V^-1")
        direction = features @ (factor @ self.rng.standard_normal(self.n_features))
        scores = (features @ ridge.theta)[:, None] + direction[:, None] * np.asarray(rates)[None, :]
        return scores.argmax(axis=0)


class BatchLinTS(BatchLinUCB):
    """LinTS for S seeds: each seed's draw from its own generator, the arms' scores of all
    seeds in one batched product."""

    def select(self, features: np.ndarray, hp: Mapping[str, np.ndarray], t: int) -> np.ndarray:
        ridge = self.ridge
        ridge.set_regularisation(hp["regularisation"])
        theta = sample_around(ridge.theta, ridge.v_inv, hp["exploration_rate"], self.rngs, "V^-1")
        return seed_products(features, theta).argmax(axis=1)


LinTS.batch = BatchLinTS
