"""TL: the two-layer auto tuning of 002 Algorithm 1, EXP3 over a candidate set."""

from __future__ import annotations

import numpy as np

from sweeper_tasks.bandit_tuning.tuners.base import BatchTuner, Tuner, single_target
from sweeper_tasks.bandit_tuning.tuners.exp3 import BatchExp3, Exp3


class TL(Tuner):
    """EXP3 over the candidate set of one hyperparameter (002 Algorithm 1).

    TL tunes one hyperparameter (``hyperparameter``; by default the exploration rate, or
    the only tuned one, e.g. Laplace-TS's step size) and holds the others at their
    theoretical values, as 002 Section 6 and 003 Section 5 do.
    """

    def __init__(self, hyperparameter: str | None = None) -> None:
        self.hyperparameter = hyperparameter

    def reset(self, space, horizon, rng, theory) -> None:
        super().reset(space, horizon, rng, theory)
        self.target = single_target(self.space, self.hyperparameter)
        self.candidates = tuple(self.space[self.target].candidates)
        self.exp3 = Exp3(len(self.candidates), self.horizon, rng)

    def proposes(self, hyperparameter):
        """Its candidates for the one hyperparameter it tunes; the others keep their
        theoretical values (nothing declared)."""
        if hyperparameter.name != self.space[self.target].name:
            return None
        return ("set", tuple(self.candidates))

    def propose(self, t: int) -> dict[str, float]:
        theory = self.theory(t)
        values = {h.name: float(theory[h.name]) for h in self.space}
        values[self.space[self.target].name] = float(self.candidates[self.exp3.pull()])
        return values

    def observe(self, reward: float) -> None:
        self.exp3.update(reward)

    def params(self) -> dict[str, float | str]:
        return {"tl.tuned": self.space[self.target].name, "tl.beta": self.exp3.beta}


class BatchTL(BatchTuner):
    """TL for S seeds: one ``BatchExp3`` over the candidate set."""

    def __init__(self, tuners, theory) -> None:
        super().__init__(tuners, theory)
        first = self.tuners[0]
        self.target = self.space[first.target].name
        self.candidates = np.array(first.candidates, dtype=float)
        self.exp3 = BatchExp3([tuner.exp3 for tuner in self.tuners])

    def propose(self, t: int) -> dict[str, np.ndarray]:
        values = self.theoretical(t)
        values[self.target] = self.candidates[self.exp3.pull()]
        return values

    def observe(self, rewards: np.ndarray) -> None:
        self.exp3.update(rewards)


TL.batch = BatchTL
