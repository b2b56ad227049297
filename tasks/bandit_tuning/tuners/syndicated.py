"""Syndicated Bandits (002 Algorithm 2): one EXP3 per hyperparameter, one shared reward."""

from __future__ import annotations

import numpy as np

from sweeper_tasks.bandit_tuning.tuners.base import BatchTuner, Tuner
from sweeper_tasks.bandit_tuning.tuners.exp3 import BatchExp3, Exp3


class Syndicated(Tuner):
    """L independent EXP3 instances, EXP3(l) over J_l with its own beta_l (lines 2-3).

    Every round each EXP3(l) draws its index i_t(l) (line 6), the bottom layer runs with
    all L values (line 7), and the same reward Y_t updates all L instances (lines 10-11).
    Regret grows with sum_l sqrt(n_l) rather than sqrt(prod_l n_l) (002 Theorem 2).
    """

    def reset(self, space, horizon, rng, theory) -> None:
        super().reset(space, horizon, rng, theory)
        self.instances = [Exp3(len(h.candidates), self.horizon, rng) for h in self.space]

    def proposes(self, hyperparameter):
        return ("set", tuple(hyperparameter.candidates))

    def propose(self, t: int) -> dict[str, float]:
        return {
            h.name: float(h.candidates[exp3.pull()])
            for h, exp3 in zip(self.space, self.instances, strict=True)
        }

    def observe(self, reward: float) -> None:
        for exp3 in self.instances:
            exp3.update(reward)

    def params(self) -> dict[str, float | str]:
        return {
            f"syndicated.beta.{h.name}": exp3.beta
            for h, exp3 in zip(self.space, self.instances, strict=True)
        }


class BatchSyndicated(BatchTuner):
    """Syndicated Bandits for S seeds: one ``BatchExp3`` per hyperparameter, drawn in the
    order of the space as each seed's tuner draws them from its generator."""

    def __init__(self, tuners, theory) -> None:
        super().__init__(tuners, theory)
        self.instances = [
            BatchExp3([tuner.instances[i] for tuner in self.tuners]) for i in range(len(self.space))
        ]
        self.candidates = [np.array(h.candidates, dtype=float) for h in self.space]

    def propose(self, t: int) -> dict[str, np.ndarray]:
        return {
            h.name: candidates[exp3.pull()]
            for h, candidates, exp3 in zip(self.space, self.candidates, self.instances, strict=True)
        }

    def observe(self, rewards: np.ndarray) -> None:
        for exp3 in self.instances:
            exp3.update(rewards)


Syndicated.batch = BatchSyndicated
