"""TL: the two-layer auto tuning of 002 Algorithm 1, EXP3 over a candidate set."""

from __future__ import annotations

from tasks.bandit_tuning.tuners.base import Tuner
from tasks.bandit_tuning.tuners.exp3 import Exp3


class TL(Tuner):
    """EXP3 over the candidate set of the first tuned hyperparameter (002 Algorithm 1).

    For an algorithm with p > 1 tuned hyperparameters TL tunes the first (the exploration
    rate) and holds the others at their theoretical values, as 002 Section 6 does.
    """

    def reset(self, space, horizon, rng, theory) -> None:
        super().reset(space, horizon, rng, theory)
        self.candidates = self.space[0].candidates
        self.exp3 = Exp3(len(self.candidates), horizon, rng)

    def propose(self, t: int) -> dict[str, float]:
        values = {h.name: self.theory(t)[h.name] for h in self.space[1:]}
        values[self.space[0].name] = self.candidates[self.exp3.pull()]
        return values

    def observe(self, reward: float) -> None:
        self.exp3.update(reward)
