"""OPE estimators of 001 Section 2.1 and Appendix B, as per-sample terms.

Each estimator is a mean of per-sample terms v_i over D_val, so its variance, the t-test
lower bound (001 Eq. 11) and the paired t-test of AIR (Eq. 13) all come from the same
(n,) array. Both estimators are linear in the evaluated policy's probabilities.

- IPS: v_i = pi(a_i | x_i) / pi0(a_i | x_i) r_i.
- DR:  v_i = sum_a pi(a | x_i) q(x_i, a) + pi(a_i | x_i) / pi0(a_i | x_i) (r_i - q(x_i, a_i)),
  with q a reward model (a logistic model on the same inputs as the LR policies,
  ``sweeper_tasks.opl_hpo.policy.lr_design``). 001 does not say where q is fitted; ``DR``'s
  ``reward_model`` states it: on D_tr, cross-fitted on D_val, or on a separate log.
"""

from __future__ import annotations

import numpy as np

from sweeper_tasks.opl_hpo.data.base import LoggedBandit, Split
from sweeper_tasks.opl_hpo.policy import fit_logistic


def importance_weights(pi: np.ndarray, split: Split) -> np.ndarray:
    """(n,) pi(a_i | x_i) / pi0(a_i | x_i) of the policy with (n, K) probabilities ``pi``."""
    return pi[np.arange(split.n), split.a] / split.pscore


class IPS:
    """Inverse propensity scoring (Precup et al. 2000), 001 Section 2.1."""

    def check(self, logged_data) -> None:
        """IPS needs nothing beyond D_val."""

    def fit(self, data: LoggedBandit) -> IPS:
        self.split = data.val
        return self

    def per_sample(self, pi: np.ndarray) -> np.ndarray:
        """(n_val,) terms of V_IPS(pi; D_val) for the (n_val, K) probabilities ``pi``."""
        return importance_weights(pi, self.split) * self.split.r


PLACEMENTS = ("train", "cross_fit", "separate")


class DR:
    """Doubly robust (Dudik et al. 2014), 001 Appendix B, with a logistic reward model.

    Where q is fitted decides whether its errors are shared with the candidate policies
    (which are fitted on D_tr): ``reward_model`` is

    - ``'train'``: q fitted on D_tr, the candidates' own training data;
    - ``'cross_fit'``: D_val cut into ``n_folds`` interleaved folds (row i in fold
      i mod n_folds); q at the rows of a fold is fitted on the other folds, so no row's
      reward enters its own q (obp's examples cross-fit this way);
    - ``'separate'``: q fitted on a separate log of the same logging policy
      (``LoggedBandit.reward_log``; synthetic data draw it with ``n_reward`` rows).

    Parameters
    ----------
    C : inverse L2 regularisation of the reward model q (fitted with lbfgs).
    reward_model : 'train', 'cross_fit' or 'separate' (above).
    n_folds : folds of the cross-fitting (at least 2).
    """

    def __init__(self, C: float = 1.0, reward_model: str = "train", n_folds: int = 2) -> None:
        if not C > 0:
            raise ValueError(f"estimator.C={C!r} must be positive (inverse regularisation).")
        if reward_model not in PLACEMENTS:
            raise ValueError(
                f"estimator.reward_model={reward_model!r} is not one of "
                f"{', '.join(PLACEMENTS)}: where DR's reward model q is fitted (D_tr, "
                "cross-fitted on D_val, or a separate log)."
            )
        if int(n_folds) != n_folds or n_folds < 2:
            raise ValueError(f"estimator.n_folds={n_folds!r} must be an integer of at least 2.")
        self.C, self.reward_model, self.n_folds = float(C), reward_model, int(n_folds)

    def check(self, logged_data) -> None:
        """Refuse a separate-log placement on logged data that draw no separate log."""
        if self.reward_model == "separate" and getattr(logged_data, "n_reward", 0) < 2:
            raise ValueError(
                "estimator.reward_model='separate' needs a separate log for DR's reward model, "
                f"which logged_data {type(logged_data).__name__} does not draw; use synthetic "
                "data with logged_data.n_reward > 1, or reward_model=train or cross_fit."
            )

    def _fit_q(self, split: Split, n_actions: int):
        return fit_logistic(split.x, split.a, split.r, n_actions, self.C, 0.0, solver="lbfgs")

    def fit(self, data: LoggedBandit) -> DR:
        val, k = data.val, data.n_actions
        if self.reward_model == "cross_fit":
            return self.with_reward_model(val, self.cross_fitted(val, k))
        source = data.train
        if self.reward_model == "separate":
            if data.reward_log is None:
                raise ValueError(
                    "estimator.reward_model='separate' but the logged data hold no separate "
                    "log (LoggedBandit.reward_log); set logged_data.n_reward > 1."
                )
            source = data.reward_log
        return self.with_reward_model(val, self._fit_q(source, k).predict(val.x))

    def cross_fitted(self, split: Split, n_actions: int) -> np.ndarray:
        """(n, K) q at the rows of ``split``, each fold's from the model of the others."""
        fold = np.arange(split.n) % self.n_folds
        q = np.empty((split.n, n_actions))
        for f in range(self.n_folds):
            rest = fold != f
            model = self._fit_q(
                Split(split.x[rest], split.a[rest], split.r[rest], split.pscore[rest],
                      split.pi0[rest]),
                n_actions,
            )  # fmt: skip
            q[~rest] = model.predict(split.x[~rest])
        return q

    def with_reward_model(self, split: Split, q: np.ndarray) -> DR:
        """Use the (n, K) reward predictions ``q`` at the contexts of ``split``."""
        self.split, self.q = split, q
        self.residual = split.r - q[np.arange(split.n), split.a]
        return self

    def per_sample(self, pi: np.ndarray) -> np.ndarray:
        """(n_val,) terms of V_DR(pi; D_val) for the (n_val, K) probabilities ``pi``."""
        direct = np.einsum("ij,ij->i", pi, self.q)
        return direct + importance_weights(pi, self.split) * self.residual
