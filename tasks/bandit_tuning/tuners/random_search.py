"""Random search run online, the second baseline of 004 Section 7.1.3."""

from __future__ import annotations

import numpy as np

from sweeper_tasks.bandit_tuning.tuners.grid_search import ExploreThenCommit


class RandomSearch(ExploreThenCommit):
    """Random search (004 Section 7.1.3): ``n_points`` points drawn uniformly from [0, 1]^p
    with the tuner's generator at ``reset``, played round-robin for the first T/2 rounds,
    then the best mean for the last T/2. Parameters as ``ExploreThenCommit``.
    """

    label = "random_search"

    def points(self, dimension: int, rng: np.random.Generator) -> np.ndarray:
        return rng.random((self.n_points, dimension))
