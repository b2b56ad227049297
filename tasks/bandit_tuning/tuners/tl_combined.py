"""TL-Combined (002 Section 6, item 4): TL over the product of the candidate sets."""

from __future__ import annotations

import itertools

from sweeper_tasks.bandit_tuning.tuners.base import Tuner
from sweeper_tasks.bandit_tuning.tuners.exp3 import Exp3


class TLCombined(Tuner):
    """One EXP3 (002 Algorithm 1) whose candidates are all combinations of the tuned
    hyperparameters' candidate sets, J_1 x ... x J_L: prod_l n_l arms, which is why its
    regret grows exponentially with L (002 Section 5) and Syndicated exists.
    """

    def reset(self, space, horizon, rng, theory) -> None:
        super().reset(space, horizon, rng, theory)
        self.combinations = list(itertools.product(*(h.candidates for h in self.space)))
        self.exp3 = Exp3(len(self.combinations), self.horizon, rng)

    def proposes(self, hyperparameter):
        return ("set", tuple(hyperparameter.candidates))

    def propose(self, t: int) -> dict[str, float]:
        chosen = self.combinations[self.exp3.pull()]
        return {h.name: float(v) for h, v in zip(self.space, chosen, strict=True)}

    def observe(self, reward: float) -> None:
        self.exp3.update(reward)

    def params(self) -> dict[str, float | str]:
        return {"tl_combined.n_combinations": len(self.combinations), "tl.beta": self.exp3.beta}
