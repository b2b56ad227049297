"""A block environment run for several seeds at once (the batched cell, docs/extending.md).

Each seed keeps its own environment object, reset with its own generator exactly as a cell
of one seed resets it, and draws its own blocks with its own ``_draw_block``: every seed
sees the draws it sees alone (common random numbers unchanged). Each seed draws into its
slice of one (S, B, K, d) array, so that a round of all seeds is one (S, K, d) view for the
batched algorithm: no copy of S separate arrays.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sweeper_tasks.bandit_tuning.environments.base import BlockEnvironment, advance


class BlockBatch:
    """S reset :class:`BlockEnvironment` objects of one dataset, observed in lockstep.

    The seeds' blocks are slices of one array of features (S, B, K, d) and one of expected
    rewards (S, B, K), each drawn by its seed's environment into its slice (memory S x B x
    K x d, never T); ``observe(t)`` gives round t of every seed as views of them, (S, K, d)
    and (S, K), valid until the next block is drawn. ``reward`` takes the (S,) pulled arms
    and gives the (S,) rewards, each mean + noise_sd * gauss or [uniform < mean] with the
    seed's own noise of the round, as ``BlockEnvironment.reward``.
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
        shape = (self.n_seeds, self.block_rounds, self.n_arms)
        self._block_features = np.empty((*shape, self.n_features))
        self._block_means = np.empty(shape)

    def _draw_block(self, start: int) -> None:
        """Each seed draws its block as alone, into its slice; its noise is kept as (S, B)."""
        for s, environment in enumerate(self.environments):
            environment._draw_block(start, (self._block_features[s], self._block_means[s]))
        self._gauss = np.stack([e._gauss for e in self.environments])
        self._uniform = np.stack([e._uniform for e in self.environments])

    def observe(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Features (S, K, d) and expected rewards (S, K) of round ``t`` (0-based)."""
        offset = advance(self, t)
        self._means = self._block_means[:, offset]
        return self._block_features[:, offset], self._means

    def reward(self, arms: np.ndarray) -> np.ndarray:
        """The (S,) rewards of pulling ``arms`` (S,) in the round last observed."""
        offset = self._offset
        means = self._means[self._seeds, arms]
        if self._model == "linear":
            return means + self.noise_sd * self._gauss[:, offset]
        return (self._uniform[:, offset] < means).astype(float)
