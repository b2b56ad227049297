"""The dynamic mean estimator of 004 Eq. 3-5, updated online as 004 Remark 4.1 describes."""

from __future__ import annotations

import numpy as np

from sweeper_tasks.bandit_tuning.tuners.base import Tuner

DROPS = ("hard", "soft")


class DynamicMean:
    """Weighted counts n(a), weighted reward sums R(a) and the total weight W of 004 Remark 4.1.

    hard-drop (Eq. 4, window ``window`` = lambda): only the last lambda rounds count. A ring
    buffer of the last lambda (arm, reward) pairs gives n_{t+1}(a) = n_t(a) - 1[I_{t-lambda} = a]
    + 1[I_t = a], the same for R, and W_{t+1} = min(W_t + 1, lambda): O(1) per round.
    soft-drop (Eq. 5, discount ``discount`` = gamma): n_{t+1} = gamma n_t + 1[I_t = a],
    R_{t+1} = gamma R_t + 1[I_t = a] r_t, W_{t+1} = gamma W_t + 1: O(1) per arm.
    The mean of an arm is R(a)/n(a), with 0/0 = +inf (004 footnote 2).
    """

    def __init__(self, drop: str, window: int | None = None, discount: float | None = None) -> None:
        if drop not in DROPS:
            raise ValueError(f"unknown drop '{drop}'; choose one of {DROPS}")
        if drop == "hard" and (window is None or int(window) < 1):
            raise ValueError(f"hard-drop needs a window (drop threshold) >= 1, got {window}")
        if drop == "soft" and (discount is None or not 0.0 < float(discount) <= 1.0):
            raise ValueError(f"soft-drop needs a discount in (0, 1], got {discount}")
        self.drop = drop
        self.window = int(window) if drop == "hard" else 0
        self.discount = float(discount) if drop == "soft" else 1.0
        self.counts = np.zeros(8)
        self.sums = np.zeros(8)
        self.n_arms = 0
        self.total = 0.0
        if drop == "hard":
            self._arms = np.full(self.window, -1, dtype=np.int64)
            self._rewards = np.zeros(self.window)
            self._head = 0

    def add_arm(self) -> int:
        if self.n_arms == len(self.counts):
            self.counts = np.concatenate([self.counts, np.zeros(len(self.counts))])
            self.sums = np.concatenate([self.sums, np.zeros(len(self.sums))])
        self.n_arms += 1
        return self.n_arms - 1

    def record(self, arm: int, reward: float) -> None:
        """Round t's pull I_t = ``arm`` with reward r_t."""
        if self.drop == "hard":
            old = int(self._arms[self._head])
            if old >= 0:
                self.counts[old] -= 1.0
                self.sums[old] -= self._rewards[self._head]
                if self.counts[old] == 0.0:
                    self.sums[old] = 0.0  # no rounding residue once the arm left the window
            self._arms[self._head] = arm
            self._rewards[self._head] = reward
            self._head = (self._head + 1) % self.window
            self.total = min(self.total + 1.0, float(self.window))
        else:
            k = self.n_arms
            self.counts[:k] *= self.discount
            self.sums[:k] *= self.discount
            self.total = self.discount * self.total + 1.0
        self.counts[arm] += 1.0
        self.sums[arm] += float(reward)

    def means(self) -> np.ndarray:
        n = self.counts[: self.n_arms]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(n > 0, self.sums[: self.n_arms] / np.where(n > 0, n, 1.0), np.inf)


class PerHyperparameterD2ME(Tuner):
    """Shared frame of SD²ME and AD²ME (004): one learner per tuned hyperparameter.

    Each learner works on its hyperparameter's interval rescaled to [0, 1] and all are
    updated with the same reward, as Syndicated does with EXP3 (004 leaves joint tuning of
    several hyperparameters to future work). Subclasses build one learner in ``learner``.
    """

    def __init__(self, drop: str, expected_changes: float) -> None:
        if drop not in DROPS:
            raise ValueError(f"unknown drop '{drop}'; choose one of {DROPS}")
        if not float(expected_changes) >= 1.0:
            raise ValueError(
                f"expected_changes (Gamma-hat, the estimated number of stationary pieces in "
                f"004 Theorems 4.1 and 4.2) must be at least 1 (one piece: no change), got "
                f"{expected_changes}; set tuner.expected_changes to 1 or more (004 uses 10)"
            )
        self.drop = drop
        self.expected_changes = float(expected_changes)

    def learner(self, rng: np.random.Generator):
        raise NotImplementedError

    def proposes(self, hyperparameter):
        return ("interval", tuple(hyperparameter.interval))

    def reset(self, space, horizon, rng, theory) -> None:
        super().reset(space, horizon, rng, theory)
        self.learners = [self.learner(rng) for _ in self.space]

    def propose(self, t: int) -> dict[str, float]:
        return {
            h.name: float(h.from_unit(learner.select()))
            for h, learner in zip(self.space, self.learners, strict=True)
        }

    def observe(self, reward: float) -> None:
        for learner in self.learners:
            learner.update(reward)
