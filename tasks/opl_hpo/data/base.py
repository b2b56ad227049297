"""The logged bandit data a cell works on: training, validation and test parts.

Every policy is represented by its action probabilities at given contexts, an array of
shape (n, K). Estimators and the ground truth are linear in those probabilities, which
the procedures use to mix a policy with the logging policy cheaply (001 Eq. 12).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax of an (n, K) array, computed stably."""
    shifted = logits - logits.max(axis=1, keepdims=True)
    weights = np.exp(shifted)
    return weights / weights.sum(axis=1, keepdims=True)


@dataclass(frozen=True)
class Split:
    """Logged bandit data D = {(x_i, a_i, r_i)} drawn from the logging policy pi0.

    Parameters
    ----------
    x : (n, d) contexts.
    a : (n,) logged actions, integers in [0, K).
    r : (n,) rewards.
    pscore : (n,) pi0(a_i | x_i), the logging propensity of each logged action.
    pi0 : (n, K) pi0(. | x_i), the logging policy at each context.
    """

    x: np.ndarray
    a: np.ndarray
    r: np.ndarray
    pscore: np.ndarray
    pi0: np.ndarray

    @property
    def n(self) -> int:
        return len(self.a)


@dataclass(frozen=True)
class TestSet:
    """What the generalisation value V(pi) (001 Eq. 1) is computed on.

    Either ``mu`` (synthetic data: the true expected reward at every (context, action),
    so V(pi) = mean_i sum_a pi(a|x_i) mu(x_i, a) exactly given the contexts) or logged
    ``a``, ``r``, ``pscore`` of a test log (OBD's uniform-random log: V(pi) is its IPS
    estimate, unbiased since the log's propensities are known).

    Parameters
    ----------
    x : (n, d) contexts.
    pi0 : (n, K) the logging policy of the training log at these contexts (for Eq. 12).
    mu : (n, K) true expected rewards, or None.
    a, r, pscore : (n,) the test log, or None.
    """

    x: np.ndarray
    pi0: np.ndarray
    mu: np.ndarray | None = None
    a: np.ndarray | None = None
    r: np.ndarray | None = None
    pscore: np.ndarray | None = None

    def value(self, pi: np.ndarray) -> float:
        """V(pi) of the policy whose (n, K) action probabilities at ``x`` are ``pi``."""
        if self.mu is not None:
            return float(np.einsum("ij,ij->", pi, self.mu) / len(pi))
        rows = np.arange(len(self.a))
        return float(np.mean(pi[rows, self.a] * self.r / self.pscore))


@dataclass(frozen=True)
class LoggedBandit:
    """The training log (policies are fitted on it), the validation log (HPO's surrogate is
    computed on it) and the test set (the generalisation value), with K actions.

    ``v_optimal`` is V(pi*) of the best policy when it is known (synthetic data), else None;
    ``reward_log`` a separate log of the same logging policy for DR's reward model
    (``sweeper_tasks.opl_hpo.estimators.DR``, ``reward_model='separate'``), else None.
    """

    n_actions: int
    train: Split
    val: Split
    test: TestSet
    v_optimal: float | None = None
    reward_log: Split | None = None
