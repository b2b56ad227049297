"""The theoretical setting: every tuned hyperparameter follows the algorithm's schedule."""

from __future__ import annotations

from tasks.bandit_tuning.tuners.base import Tuner


class Theory(Tuner):
    """Use the theoretical value alpha*(t) of every hyperparameter (003 Section 5)."""

    def propose(self, t: int) -> dict[str, float]:
        values = self.theory(t)
        return {h.name: values[h.name] for h in self.space}
