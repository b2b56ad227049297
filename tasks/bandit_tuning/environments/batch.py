"""A block environment run for several seeds at once (the batched cell, docs/extending.md).

Each seed keeps its own environment object, reset with its own generator exactly as a cell
of one seed resets it, and draws its own blocks with its own ``_draw_block``: every seed
sees the draws it sees alone (common random numbers unchanged). This class only stacks the
seeds' blocks on a leading seed axis, so that a round is one (S, K, d) view for the
batched algorithm instead of S separate arrays.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sweeper_tasks.bandit_tuning.environments.base import BlockEnvironment, advance


class BlockBatch:
    """S reset :class:`BlockEnvironment` objects of one dataset, observed in lockstep.

    Each seed's blocks stay its own arrays (memory S x B x K x d, never T); ``observe(t)``
    copies round t of every seed into one (S, K, d) array of features and one (S, K) of
    expected rewards, reused each round (valid until the next ``observe``), and ``reward``
    takes the (S,) pulled arms and gives the (S,) rewards, each mean + noise_sd * gauss or
    [uniform < mean] with the seed's own noise of the round, as ``BlockEnvironment.reward``.
    Copying a round (S x K x d numbers that the algorithm reads next) costs less than
    stacking whole blocks, which are read once a round long after they were drawn.
    """

    def __init__(self, environments: Sequence[BlockEnvironment]) -> None:
        self.environments = list(environments)
        first = self.environments[0]
        self.n_seeds = len(self.environments)
        self.n_features = first.n_features
        self.n_arms = first.n_arms
        self.block_rounds = first.block_rounds
        self.noise_sd = first.noise_sd
        self._model = first._model
        self._seeds = np.arange(self.n_seeds)
        self._block_start = -self.block_rounds
        self._t = -1
        self._features = np.empty((self.n_seeds, self.n_arms, self.n_features))
        self._means = np.empty((self.n_seeds, self.n_arms))

    def _draw_block(self, start: int) -> None:
        """Each seed draws its block as alone; its noise is kept as (S, B)."""
        for environment in self.environments:
            environment._draw_block(start)
        self._gauss = np.stack([e._gauss for e in self.environments])
        self._uniform = np.stack([e._uniform for e in self.environments])

    def observe(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Features (S, K, d) and expected rewards (S, K) of round ``t`` (0-based)."""
        offset = advance(self, t)
        environments = self.environments
        np.stack([e._features[offset] for e in environments], out=self._features)
        np.stack([e._means[offset] for e in environments], out=self._means)
        return self._features, self._means

    def reward(self, arms: np.ndarray) -> np.ndarray:
        """The (S,) rewards of pulling ``arms`` (S,) in the round last observed."""
        offset = self._offset
        means = self._means[self._seeds, arms]
        if self._model == "linear":
            return means + self.noise_sd * self._gauss[:, offset]
        return (self._uniform[:, offset] < means).astype(float)
