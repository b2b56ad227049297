"""Grid search run online, the first baseline of 004 Section 7.1.3."""

from __future__ import annotations

import numpy as np

from sweeper_tasks.bandit_tuning.tuners.base import Tuner


class ExploreThenCommit(Tuner):
    """Explore a finite set of points round-robin, then commit to the best mean (004 Sec. 7.1.3).

    The points live in the unit cube [0, 1]^p of the tuned hyperparameters (each interval
    rescaled to [0, 1], as the continuum tuners do). During the first
    ``floor(explore_fraction T)`` rounds, round t (1-based) plays point (t - 1) mod n; the
    remaining rounds play the point with the largest mean reward (the first on ties).
    Subclasses choose the points in ``points``.

    Parameters
    ----------
    n_points : int
        How many points (per hyperparameter for the grid), at least 1; 004 uses 10.
    explore_fraction : float
        Share of the horizon spent exploring, in (0, 1]; 004 uses 1/2.
    """

    label = "explore_then_commit"

    def __init__(self, n_points: int = 10, explore_fraction: float = 0.5) -> None:
        if int(n_points) < 1:
            raise ValueError(f"{self.label}: n_points must be at least 1, got {n_points}")
        self.n_points = int(n_points)
        if not 0.0 < float(explore_fraction) <= 1.0:
            raise ValueError(
                f"{self.label}: explore_fraction must be in (0, 1] (004 explores for T/2 "
                f"rounds: 0.5), got {explore_fraction}"
            )
        self.explore_fraction = float(explore_fraction)

    def points(self, dimension: int, rng: np.random.Generator) -> np.ndarray:
        """The explored points, shape (n, dimension), in [0, 1]^dimension."""
        raise NotImplementedError

    def proposes(self, hyperparameter):
        return ("interval", tuple(hyperparameter.interval))

    def reset(self, space, horizon, rng, theory) -> None:
        super().reset(space, horizon, rng, theory)
        self.grid = np.asarray(self.points(len(self.space), rng), dtype=float)
        self.explore_rounds = int(np.floor(self.explore_fraction * self.horizon))
        self.sums = np.zeros(len(self.grid))
        self.counts = np.zeros(len(self.grid))
        self.last = -1
        self.committed = -1

    def best(self) -> int:
        """Index of the point with the largest mean reward so far (unplayed points: -inf)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            means = np.where(self.counts > 0, self.sums / self.counts, -np.inf)
        return int(np.argmax(means))

    def propose(self, t: int) -> dict[str, float]:
        if t <= self.explore_rounds:
            self.last = (t - 1) % len(self.grid)
        else:
            if self.committed < 0:
                self.committed = self.best()
            self.last = self.committed
        point = self.grid[self.last]
        return {h.name: float(h.from_unit(u)) for h, u in zip(self.space, point, strict=True)}

    def observe(self, reward: float) -> None:
        if self.committed < 0:
            self.sums[self.last] += float(reward)
            self.counts[self.last] += 1.0

    def params(self) -> dict[str, float | str]:
        return {
            f"{self.label}.n_points": len(self.grid),
            f"{self.label}.explore_rounds": self.explore_rounds,
        }

    def state(self) -> dict[str, float]:
        return {"committed": float(self.committed >= 0)}


class GridSearch(ExploreThenCommit):
    """Grid search (004 Section 7.1.3): ``n_points`` evenly spaced points of [0, 1]
    (0, 1/(n-1), ..., 1; their product over the tuned hyperparameters when p > 1), played
    round-robin for the first T/2 rounds, then the best mean for the last T/2. Parameters
    as ``ExploreThenCommit`` (``n_points`` per hyperparameter).
    """

    label = "grid_search"

    def points(self, dimension: int, rng: np.random.Generator) -> np.ndarray:
        axis = np.linspace(0.0, 1.0, self.n_points) if self.n_points > 1 else np.array([0.5])
        mesh = np.meshgrid(*([axis] * dimension), indexing="ij")
        return np.stack([m.ravel() for m in mesh], axis=1)
