"""Random search run online, the second baseline of 004 Section 7.1.3."""

from __future__ import annotations

import numpy as np

from tasks.bandit_tuning.tuners.grid_search import ExploreThenCommit


class RandomSearch(ExploreThenCommit):
    """Random search (004 Section 7.1.3): ``n_points`` points drawn uniformly from [0, 1]^p
    with the tuner's generator at ``reset``, played round-robin for the first T/2 rounds,
    then the best mean for the last T/2.

    Parameters
    ----------
    n_points : int
        Points drawn (004: 10), at least 1.
    explore_fraction : float
        Share of the horizon spent exploring (004: 0.5).
    """

    label = "random_search"

    def __init__(self, n_points: int = 10, explore_fraction: float = 0.5) -> None:
        super().__init__(explore_fraction)
        if int(n_points) < 1:
            raise ValueError(f"random_search: n_points must be at least 1, got {n_points}")
        self.n_points = int(n_points)

    def points(self, dimension: int, rng: np.random.Generator) -> np.ndarray:
        return rng.random((self.n_points, dimension))
