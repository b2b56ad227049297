"""The theoretical setting: every tuned hyperparameter follows the algorithm's schedule."""

from __future__ import annotations

import numpy as np

from sweeper_tasks.bandit_tuning.tuners.base import BatchTuner, Tuner


class Theory(Tuner):
    """Use the theoretical value alpha*(t) of every hyperparameter (003 Section 5, item 1).

    The value is the one the algorithm's own paper proves (e.g. LinUCB's
    sigma sqrt(d log((1 + t/lambda)/delta)) + sqrt(lambda) S); it may lie outside the
    interval the tuners search, which is the point of the comparison.
    """

    def propose(self, t: int) -> dict[str, float]:
        values = self.theory(t)
        return {h.name: float(values[h.name]) for h in self.space}


class BatchTheory(BatchTuner):
    """Theory for S seeds: each seed's theoretical values, as the algorithm gives them."""

    def propose(self, t: int) -> dict[str, np.ndarray]:
        return self.theoretical(t)


Theory.batch = BatchTheory
