"""OPE estimators of 001 Section 2.1 and Appendix B, as per-sample terms.

Each estimator is a mean of per-sample terms v_i over D_val, so its variance, the t-test
lower bound (001 Eq. 11) and the paired t-test of AIR (Eq. 13) all come from the same
(n,) array. Both estimators are linear in the evaluated policy's probabilities.

- IPS: v_i = pi(a_i | x_i) / pi0(a_i | x_i) r_i.
- DR:  v_i = sum_a pi(a | x_i) q(x_i, a) + pi(a_i | x_i) / pi0(a_i | x_i) (r_i - q(x_i, a_i)),
  with q a reward model fitted on D_tr (a logistic model on the same inputs as the LR
  policies, ``tasks.opl_hpo.policy.lr_design``).
"""

from __future__ import annotations

import numpy as np

from tasks.opl_hpo.data.base import LoggedBandit, Split
from tasks.opl_hpo.policy import fit_logistic


def importance_weights(pi: np.ndarray, split: Split) -> np.ndarray:
    """(n,) pi(a_i | x_i) / pi0(a_i | x_i) of the policy with (n, K) probabilities ``pi``."""
    return pi[np.arange(split.n), split.a] / split.pscore


class IPS:
    """Inverse propensity scoring (Precup et al. 2000), 001 Section 2.1."""

    def fit(self, data: LoggedBandit) -> IPS:
        self.split = data.val
        return self

    def per_sample(self, pi: np.ndarray) -> np.ndarray:
        """(n_val,) terms of V_IPS(pi; D_val) for the (n_val, K) probabilities ``pi``."""
        return importance_weights(pi, self.split) * self.split.r


class DR:
    """Doubly robust (Dudik et al. 2014), 001 Appendix B, with a logistic reward model.

    Parameters
    ----------
    C : inverse L2 regularisation of the reward model q (fitted on D_tr with lbfgs).
    """

    def __init__(self, C: float = 1.0) -> None:
        if not C > 0:
            raise ValueError(f"estimator.C={C!r} must be positive (inverse regularisation).")
        self.C = float(C)

    def fit(self, data: LoggedBandit) -> DR:
        train, self.split = data.train, data.val
        model = fit_logistic(train.x, train.a, train.r, data.n_actions, self.C, 0.0, solver="lbfgs")
        return self.with_reward_model(self.split, model.predict(self.split.x))

    def with_reward_model(self, split: Split, q: np.ndarray) -> DR:
        """Use the (n, K) reward predictions ``q`` at the contexts of ``split``."""
        self.split, self.q = split, q
        self.residual = split.r - q[np.arange(split.n), split.a]
        return self

    def per_sample(self, pi: np.ndarray) -> np.ndarray:
        """(n_val,) terms of V_DR(pi; D_val) for the (n_val, K) probabilities ``pi``."""
        direct = np.einsum("ij,ij->i", pi, self.q)
        return direct + importance_weights(pi, self.split) * self.residual
