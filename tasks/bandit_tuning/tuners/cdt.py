"""CDT: Continuous Dynamic Tuning (000/003 Algorithm 2) over Zooming TS with Restarts (Alg. 1)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sweeper_tasks.bandit_tuning.tuners.base import BatchTuner
from sweeper_tasks.bandit_tuning.tuners.zooming import ZoomingTuner
from sweeper_tasks.bandit_tuning.tuners.zooming_core import BatchZooming


def default_warmup_rounds(horizon: int, p: int, multiplier: float = 1.0) -> int:
    """T1 = T^(2/(p+3)) (003 Section 5, from Theorem 4.2): 118 for T=14000, p=1; 45 for p=2."""
    return int(math.floor(multiplier * horizon ** (2.0 / (p + 3))))


def check_warmup(warmup_rounds: int | None, multiplier: float) -> None:
    """Refuse a negative T1 or a negative multiplier of its formula."""
    if warmup_rounds is not None and int(warmup_rounds) < 0:
        raise ValueError(f"warmup_rounds (T1) must be >= 0 or null, got {warmup_rounds}")
    if multiplier < 0:
        raise ValueError(f"warmup_multiplier must be >= 0, got {multiplier}")


def resolve_warmup(warmup_rounds: int | None, multiplier: float, horizon: int, p: int) -> int:
    """T1: the absolute setting, else the formula; at most T - 1 so one tuned round remains."""
    T1 = (
        default_warmup_rounds(horizon, p, multiplier)
        if warmup_rounds is None
        else int(warmup_rounds)
    )
    return min(T1, max(horizon - 1, 0))


def default_restart_every(
    horizon: int, p: int, multiplier: float = 3.0, expected_changes: int | None = None
) -> int:
    """T2 = k T^((p+2)/(p+3)) with k = 3 (003 Section 5; Table 6 varies k in {1, 2, 3}).

    With an estimate c of the number of change points, the epoch of Theorem 4.1,
    k ceil((T/c)^((p+2)/(p+3))), as 003 Appendix A.3 sets H = 10 ceil((T/c(T))^(3/4)).
    """
    exponent = (p + 2.0) / (p + 3.0)
    if expected_changes is None:
        return max(1, int(math.floor(multiplier * horizon**exponent)))
    if int(expected_changes) < 1:
        raise ValueError(f"expected_changes must be a positive count, got {expected_changes}")
    return max(1, int(multiplier * math.ceil((horizon / int(expected_changes)) ** exponent)))


class CDT(ZoomingTuner):
    """Continuous Dynamic Tuning (003 Algorithm 2) over the box prod_i [a_i, b_i].

    Rounds 1..T1: the cell pulls uniformly random arms (line 2). From T1 + 1 on, each round
    is one iteration of Zooming TS with Restarts (Algorithm 1) run with horizon T - T1 on
    the rescaled box [0, 1]^p, restarted every T2 rounds (rounds T1 + 1, T1 + T2 + 1, ...).

    ``warmup_rounds`` / ``restart_every`` set T1 / T2 absolutely; left null they follow the
    paper's formulas T1 = k1 T^(2/(p+3)) and T2 = k2 T^((p+2)/(p+3)) with the multipliers
    ``warmup_multiplier`` (1) and ``restart_multiplier`` (3). The other keywords are the
    options of Zooming TS (``ZoomingTuner``: tau0, the constants of r and s0, removal, ...).
    ``restarts: false`` never restarts (H = T), as the released run script's default H = 0.
    """

    rule = "ts"

    def __init__(
        self,
        warmup_rounds: int | None = None,
        warmup_multiplier: float = 1.0,
        restart_every: int | None = None,
        restart_multiplier: float = 3.0,
        expected_changes: int | None = None,
        restarts: bool = True,
        **zooming: Any,
    ) -> None:
        super().__init__(warmup_rounds=0, **zooming)  # T1 is resolved here, per horizon
        check_warmup(warmup_rounds, warmup_multiplier)
        if restart_every is not None and int(restart_every) < 1:
            raise ValueError(f"restart_every (T2) must be >= 1 or null, got {restart_every}")
        if restart_multiplier <= 0:
            raise ValueError(f"restart_multiplier must be > 0, got {restart_multiplier}")
        self.warmup_setting = warmup_rounds
        self.warmup_multiplier = float(warmup_multiplier)
        self.restart_setting = restart_every
        self.restart_multiplier = float(restart_multiplier)
        self.expected_changes = expected_changes
        self.restarts_enabled = bool(restarts)

    def reset(self, space, horizon, rng, theory) -> None:
        p = len(space)
        T = int(horizon)
        self._warmup = resolve_warmup(self.warmup_setting, self.warmup_multiplier, T, p)
        super().reset(space, horizon, rng, theory)
        if not self.restarts_enabled:
            self.T2 = T  # H = T: one epoch, never restarted
        elif self.restart_setting is None:
            self.T2 = default_restart_every(T, p, self.restart_multiplier, self.expected_changes)
        else:
            self.T2 = int(self.restart_setting)
        self.rounds = 0  # rounds of Algorithm 1 played so far (t - T1 - 1 at round t)

    def propose(self, t: int) -> dict[str, float]:
        if self.rounds > 0 and self.rounds % self.T2 == 0:
            self.core.restart()
            self.restarts += 1
        self.rounds += 1
        return self._propose_unit()

    def params(self) -> dict[str, float | str]:
        return {**super().params(), "T2": self.T2}


class BatchCDT(BatchTuner):
    """CDT for S seeds: their Zooming TS cores as one ``BatchZooming``, restarted together
    (every seed restarts at the same rounds, every T2)."""

    def __init__(self, tuners, theory) -> None:
        super().__init__(tuners, theory)
        first = self.tuners[0]
        self.T2, self.rounds, self.interval = first.T2, first.rounds, first.interval
        self.core = BatchZooming([tuner.core for tuner in self.tuners])
        self.restarts = np.array([float(tuner.restarts) for tuner in self.tuners])

    def propose(self, t: int) -> dict[str, np.ndarray]:
        if self.rounds > 0 and self.rounds % self.T2 == 0:
            self.core.restart()
            self.restarts += 1
        self.rounds += 1
        self.core.remove_dominated()
        points = self.core.select()
        if self.interval is not None:
            a, b = self.interval
            return {h.name: a + (b - a) * points[:, i] for i, h in enumerate(self.space)}
        return {h.name: h.from_unit(points[:, i]) for i, h in enumerate(self.space)}

    def observe(self, rewards: np.ndarray) -> None:
        self.core.update(rewards)

    def state(self) -> dict[str, np.ndarray]:
        return {"active_arms": self.core.active().astype(float), "restarts": self.restarts}


CDT.batch = BatchCDT
