"""Zooming TS with double restarts (003 Appendix F, Algorithm 3): EXP3 picks the epoch length."""

from __future__ import annotations

import math
from typing import Any

from sweeper_tasks.bandit_tuning.tuners.cdt import check_warmup, resolve_warmup
from sweeper_tasks.bandit_tuning.tuners.exp3 import Exp3
from sweeper_tasks.bandit_tuning.tuners.zooming import ZoomingTuner


class ZoomingTSDoubleRestart(ZoomingTuner):
    """Bandit-over-bandit choice of the restart length of Zooming TS (003 Algorithm 3).

    The horizon L = T - T1 is cut into top epochs of H0 = ceil(L^((p_u+2)/(p_u+4))) rounds
    (p_u = ``zooming_dimension``, by default p). At the start of top epoch i, EXP3 over
    J = {ceil(H0 / 2^(j-1)) : j = 1..N}, N = ceil(log2 H0) + 1, with
    alpha = min(1, sqrt(|J| log|J| / ((e-1) ceil(L/H0)))), draws a bottom epoch length
    H_j; Zooming TS with Restarts (Algorithm 1) then runs for the top epoch, restarted at
    its start and every H_j rounds; at the end EXP3 is updated with the epoch's reward.

    Line 9 feeds EXP3 the top epoch's summed reward sum_k Y_k. EXP3's update is written for
    rewards in [0, 1]; the proof of Theorem F.1 uses Auer et al.'s Corollary 3.2 with rewards
    in [0, Q], Q = H0, the largest sum an epoch can reach, i.e. EXP3 run on sum / Q. So the
    reward given to EXP3 is the epoch's sum divided by the constant H0 (not by the epoch's
    own length). For every full top epoch this equals the epoch's mean reward, which the code
    fed before; the two differ only on the last, shorter top epoch, whose update is never
    used, so the numbers do not change. The warm-up T1 (CDT's, default
    T^(2/(p+3))) applies when it tunes a bandit; set ``warmup_rounds: 0`` to run Algorithm 3
    alone. The other keywords are the options of Zooming TS (``ZoomingTuner``).
    """

    rule = "ts"

    def __init__(
        self,
        warmup_rounds: int | None = None,
        warmup_multiplier: float = 1.0,
        zooming_dimension: float | None = None,
        **zooming: Any,
    ) -> None:
        super().__init__(warmup_rounds=0, **zooming)  # T1 is resolved here, per horizon
        check_warmup(warmup_rounds, warmup_multiplier)
        if zooming_dimension is not None and zooming_dimension < 0:
            raise ValueError(f"zooming_dimension must be >= 0 or null, got {zooming_dimension}")
        self.warmup_setting = warmup_rounds
        self.warmup_multiplier = float(warmup_multiplier)
        self.zooming_dimension = zooming_dimension

    def reset(self, space, horizon, rng, theory) -> None:
        p = len(space)
        T = int(horizon)
        self._warmup = resolve_warmup(self.warmup_setting, self.warmup_multiplier, T, p)
        super().reset(space, horizon, rng, theory)
        p_u = p if self.zooming_dimension is None else float(self.zooming_dimension)
        length = self.horizon - self.T1
        self.H0 = max(1, math.ceil(length ** ((p_u + 2.0) / (p_u + 4.0))))
        n_lengths = math.ceil(math.log2(self.H0)) + 1
        self.epoch_lengths = [math.ceil(self.H0 / 2 ** (j - 1)) for j in range(1, n_lengths + 1)]
        self.exp3 = Exp3(len(self.epoch_lengths), math.ceil(length / self.H0), rng)
        self.rounds = 0
        self.bottom_rounds = 0
        self.epoch_reward = 0.0
        self.epoch_played = 0
        self.H = self.H0

    def propose(self, t: int) -> dict[str, float]:
        if self.rounds % self.H0 == 0:  # a new top epoch (line 5)
            if self.rounds > 0:
                self.exp3.update(self.epoch_reward / self.H0)  # line 9: sum / Q, Q = H0
            self.H = self.epoch_lengths[self.exp3.pull()]
            self.epoch_reward, self.epoch_played = 0.0, 0
            self.bottom_rounds = 0
            if self.rounds > 0:
                self.core.restart()
                self.restarts += 1
        elif self.bottom_rounds % self.H == 0:  # a bottom restart of Algorithm 1
            self.core.restart()
            self.restarts += 1
        self.rounds += 1
        self.bottom_rounds += 1
        return self._propose_unit()

    def observe(self, reward: float) -> None:
        super().observe(reward)
        self.epoch_reward += float(reward)
        self.epoch_played += 1

    def params(self) -> dict[str, float | str]:
        return {
            **super().params(),
            "H0": self.H0,
            "epoch_lengths": str(self.epoch_lengths),
            "exp3.alpha": self.exp3.beta,
        }

    def state(self) -> dict[str, float]:
        return {**super().state(), "epoch_length": self.H}
