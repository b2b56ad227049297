"""The HPO procedures of 001: Baseline (Algorithm 1) and CIR-HPO (Algorithm 2).

A procedure sees, at each trial t, the per-sample OPE terms of the trained policy
pi_hat_t on D_val and decides the mixing weight alpha_t (001 Eq. 12), the score told to
the sampler (stored in S_t, line 8/9) and whether pi_t replaces the incumbent pi*. Both
start from pi* = pi0 (Algorithm 1, line 1; Algorithm 2 leaves pi*'s start implicit, and
starting from pi0 makes the ablation without CSO and AIR coincide with Algorithm 1).
Because every estimator is linear in the policy, the terms of the mixed policy
pi_t = (1 - alpha_t) pi_hat_t + alpha_t pi0 are the same mixture of the two policies' terms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from sweeper_tasks.opl_hpo.bounds import check_delta, t_test_bound


@dataclass(frozen=True)
class Decision:
    """One trial's outcome: alpha_t, the mixed policy's per-sample terms, its score (what
    the sampler is told) and whether it became the incumbent."""

    alpha: float
    values: np.ndarray
    score: float
    accepted: bool


class Baseline:
    """001 Algorithm 1: the estimator's value as the surrogate, strict improvement."""

    def start(self, n_trials: int, logging_values: np.ndarray) -> float:
        """Reset for T trials; returns the incumbent pi0's score."""
        self.best = float(logging_values.mean())
        return self.best

    def decide(self, t: int, values: np.ndarray) -> Decision:
        score = float(values.mean())
        accepted = score > self.best  # line 5
        if accepted:
            self.best = score
        return Decision(alpha=0.0, values=values, score=score, accepted=accepted)


def optimality_score(logging_values: np.ndarray, values: np.ndarray, delta: float) -> int:
    """s_t of 001 Eq. 13: +1 if pi0 is significantly better than pi_t, -1 if worse, else 0.

    The paired t statistic T = |mean(d)| / sqrt(V_n(d) / (n - 1)) of d_i = v_i(pi0) - v_i(pi_t)
    is compared with t_{1-delta/2, n-1}. Identical terms (V_n = 0) give 0 when mean(d) = 0
    and the sign of mean(d) otherwise (an infinite T).
    """
    difference = logging_values - values
    n, mean = len(difference), float(difference.mean())
    spread = math.sqrt(difference.var() / (n - 1))
    if spread == 0.0:
        return 0 if mean == 0.0 else (1 if mean > 0 else -1)
    if abs(mean) / spread < stats.t.ppf(1.0 - delta / 2.0, n - 1):
        return 0
    return 1 if mean >= 0 else -1


def adaptive_alpha(score_sum: float, t: int, n_trials: int, alpha_init: float, gamma: float):
    """001 Eq. 14: alpha_init + (1 - alpha_init) (t/T)^gamma (sum_{t'<=t} s_t') / t,
    clipped to [0, 1] (Eq. 12 needs a mixing weight; with all s = -1 Eq. 14 gives
    2 alpha_init - 1, which is negative for alpha_init < 1/2)."""
    alpha = alpha_init + (1.0 - alpha_init) * (t / n_trials) ** gamma * score_sum / t
    return min(1.0, max(0.0, alpha))


class CIRHPO:
    """001 Algorithm 2: conservative surrogate objective (CSO, Eq. 11) and adaptive
    imitation regularisation (AIR, Eq. 12-14).

    Parameters
    ----------
    delta : confidence level of Eq. 11 and of the test of Eq. 13 (0.1 in 001).
    gamma : scheduling exponent of Eq. 14 (> 0; 0.01 in 001).
    alpha_init : alpha's starting value in Eq. 14 (001 does not print it; 0.5 makes all
        s_t = -1 end at alpha_T = 0, as 001 Section 4.2 says).
    cso : use the t-test lower bound as the surrogate (False: the estimator's value).
    air : mix with pi0 by the adaptive alpha_t (False: alpha_t = 0).

    alpha_t is computed from s_1..s_t with s_t testing the trained pi_hat_t against pi0
    (Eq. 13 writes pi_t, but pi_t depends on alpha_t, so the test must use pi_hat_t).
    001 writes Eq. 11 and 13 with IPS; with DR as the surrogate (001 Table 1, Fig. 9) both
    use the cell's estimator's per-sample terms here.
    """

    def __init__(
        self,
        delta: float = 0.1,
        gamma: float = 0.01,
        alpha_init: float = 0.5,
        cso: bool = True,
        air: bool = True,
    ) -> None:
        self.delta = check_delta(delta, "procedure.delta")
        if not isinstance(gamma, (int, float)) or not gamma > 0 or not math.isfinite(gamma):
            raise ValueError(
                f"procedure.gamma={gamma!r} must be a positive number: it schedules the "
                "adaptive imitation regularisation alpha_t (001 Eq. 14, default 0.01)."
            )
        if not isinstance(alpha_init, (int, float)) or not 0.0 <= alpha_init <= 1.0:
            raise ValueError(f"procedure.alpha_init={alpha_init!r} must be in [0, 1] (001 Eq. 14).")
        self.gamma, self.alpha_init = float(gamma), float(alpha_init)
        self.cso, self.air = bool(cso), bool(air)

    def _score(self, values: np.ndarray) -> float:
        return t_test_bound(values, self.delta) if self.cso else float(values.mean())

    def start(self, n_trials: int, logging_values: np.ndarray) -> float:
        self.n_trials, self.logging_values, self.score_sum = n_trials, logging_values, 0.0
        self.best = self._score(logging_values)
        return self.best

    def decide(self, t: int, values: np.ndarray) -> Decision:
        alpha = 0.0
        if self.air:
            self.score_sum += optimality_score(self.logging_values, values, self.delta)
            alpha = adaptive_alpha(self.score_sum, t, self.n_trials, self.alpha_init, self.gamma)
            values = (1.0 - alpha) * values + alpha * self.logging_values  # Eq. 12
        score = self._score(values)
        accepted = score >= self.best  # line 6
        if accepted:
            self.best = score
        return Decision(alpha=alpha, values=values, score=score, accepted=accepted)
