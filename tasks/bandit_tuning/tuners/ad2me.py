"""AD²ME: Adaptive Discretization with Dynamic Mean Estimator (004 Algorithm 2)."""

from __future__ import annotations

import math

import numpy as np

from sweeper_tasks.bandit_tuning.tuners.dynamic_mean import DynamicMean, PerHyperparameterD2ME


def ad2me_settings(horizon: int, changes: float) -> dict[str, float]:
    """004 Theorem 4.2 (Eq. 12): lambda = floor(2 (T/(3 Gamma))^(3/4)) (hard-drop) and
    gamma = 1 - (3 Gamma / T)^(3/4) (soft-drop)."""
    return {
        "window": max(1, math.floor(2.0 * (horizon / (3.0 * changes)) ** 0.75)),
        "discount": 1.0 - min(1.0, 3.0 * changes / horizon) ** 0.75,
    }


class AdaptiveDiscretization:
    """One AD²ME learner on [0, 1].

    Each round t: if the covering intervals [a - xi_t(a), a + xi_t(a)] of the active arms do
    not cover [0, 1], activate a point of the uncovered part with mu_hat = 0 and xi = +inf
    (lines 3-8); pull argmax mu_hat(a) + 2 xi_t(a) (Eq. 11), with
    xi_t(a) = sqrt(log(2 t^1.5 / delta^0.5) / n_t(a)) (Eq. 9) and n_t the dynamic weight.

    The covering check (line 6, Eq. 10) sweeps the covering intervals sorted by their LEFT
    ends, which is right for any widths (sorting the arms by position is not: a wide
    interval centred far right can cover a point left of a narrow one). O(|A_t| log |A_t|),
    the order of the argmax of Eq. 11 up to the log; it looks at every arm, not only the
    pulled arm's neighbours, because a gap that a wide interval used to cover need not be
    next to the arm that shrank.
    """

    def __init__(
        self,
        horizon: int,
        changes: float,
        drop: str,
        failure_probability: float,
        rng: np.random.Generator,
    ) -> None:
        settings = ad2me_settings(horizon, changes)
        self.estimator = DynamicMean(drop, settings["window"], settings["discount"])
        self.delta = float(failure_probability)
        self.positions = np.zeros(8)
        self.fresh = np.zeros(8, dtype=bool)  # activated and not pulled since: xi = +inf
        self.rng = rng
        self.t = 0
        self.last = -1

    @property
    def n_arms(self) -> int:
        return self.estimator.n_arms

    def widths(self, t: int) -> np.ndarray:
        """xi_t(a) of Eq. 9; +inf with no weight, or since activation (line 7)."""
        k = self.n_arms
        n = self.estimator.counts[:k]
        xi = np.full(k, np.inf)
        weighted = (n > 0) & ~self.fresh[:k]
        xi[weighted] = np.sqrt(math.log(2.0 * t**1.5 / self.delta**0.5) / n[weighted])
        return xi

    def uncovered_point(self, t: int) -> float | None:
        """A point of [0, 1] outside every covering interval, or None (Eq. 10 holds)."""
        return _gap(self.positions[: self.n_arms].tolist(), self.widths(t).tolist())

    def activate(self, point: float) -> None:
        arm = self.estimator.add_arm()
        if arm == len(self.positions):
            self.positions = np.concatenate([self.positions, np.zeros(len(self.positions))])
            self.fresh = np.concatenate([self.fresh, np.zeros(len(self.fresh), dtype=bool)])
        self.positions[arm] = point
        self.fresh[arm] = True

    def select(self) -> float:
        """Lines 3-9: activate a point if [0, 1] is not covered, then argmax of Eq. 11; an arm
        with infinite width (fresh, or no weight left) scores +inf, the first such arm wins.

        Plain Python over the handful of active arms (the same numbers as ``widths``): a
        round costs a few microseconds, less than the numpy calls it replaces.
        """
        self.t += 1
        k = self.n_arms
        log_term = math.log(2.0 * self.t**1.5 / self.delta**0.5)
        counts = self.estimator.counts[:k].tolist()
        sums = self.estimator.sums[:k].tolist()
        fresh = self.fresh[:k].tolist()
        positions = self.positions[:k].tolist()
        xi = [
            math.sqrt(log_term / n) if n > 0 and not new else math.inf
            for n, new in zip(counts, fresh, strict=True)
        ]
        point = _gap(positions, xi)
        if point is not None:
            self.activate(point)
            positions.append(point)
            counts.append(0.0)
            sums.append(0.0)
            xi.append(math.inf)
        best, self.last = -math.inf, 0
        for arm, width in enumerate(xi):
            score = sums[arm] / counts[arm] + 2.0 * width if width < math.inf else math.inf
            if score > best:
                best, self.last = score, arm
                if score == math.inf:
                    break
        return float(positions[self.last])

    def update(self, reward: float) -> None:
        self.fresh[self.last] = False
        self.estimator.record(self.last, reward)


def _gap(positions: list[float], widths: list[float]) -> float | None:
    """The midpoint of the leftmost part of [0, 1] outside every [a - xi, a + xi], or None.

    A sweep over the intervals sorted by their left ends (right for any widths); 0.5 when
    there is no arm yet.
    """
    if not positions:
        return 0.5
    intervals = sorted(
        ((a - w, a + w) for a, w in zip(positions, widths, strict=True)), key=lambda i: i[0]
    )
    reach = 0.0  # [0, reach] is covered by the intervals swept so far
    for left, right in intervals:
        if left > reach:
            return (reach + min(left, 1.0)) / 2.0
        reach = max(reach, right)
        if reach >= 1.0:
            return None
    return (reach + 1.0) / 2.0


class AD2ME(PerHyperparameterD2ME):
    """AD²ME (004 Algorithm 2), hard-drop or soft-drop, parameters from 004 Theorem 4.2.

    ``expected_changes`` estimates Gamma (004 Section 7.1.3: 10); ``failure_probability``
    is delta of Eq. 9 (not given in 004's experiments; 0.1 here). Each tuned hyperparameter
    gets its own AD²ME on its interval rescaled to [0, 1], all updated with the same reward
    (as Syndicated does with EXP3; 004 leaves joint tuning to future work).
    """

    def __init__(
        self, drop: str = "hard", expected_changes: float = 10.0, failure_probability: float = 0.1
    ) -> None:
        super().__init__(drop, expected_changes)
        if not 0.0 < failure_probability < 1.0:
            raise ValueError(
                f"failure_probability (delta) must be in (0, 1), got {failure_probability}"
            )
        self.failure_probability = float(failure_probability)

    def learner(self, rng: np.random.Generator) -> AdaptiveDiscretization:
        return AdaptiveDiscretization(
            self.horizon, self.expected_changes, self.drop, self.failure_probability, rng
        )

    def params(self) -> dict[str, float | str]:
        settings = ad2me_settings(self.horizon, self.expected_changes)
        key, value = (
            ("ad2me.lambda", settings["window"])
            if self.drop == "hard"
            else ("ad2me.gamma", settings["discount"])
        )
        return {
            "ad2me.drop": self.drop,
            "ad2me.Gamma": self.expected_changes,
            key: value,
            "ad2me.delta": self.failure_probability,
        }

    def state(self) -> dict[str, float]:
        if len(self.learners) == 1:
            return {"active_arms": self.learners[0].n_arms}
        return {
            f"active_arms.{h.name}": learner.n_arms
            for h, learner in zip(self.space, self.learners, strict=True)
        }
