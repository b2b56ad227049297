"""The top-layer interface."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from tasks.bandit_tuning.space import Hyperparameter

Theory = Callable[[int], dict[str, float]]


class Tuner:
    """Proposes the tuned hyperparameters each round and observes the reward they earned.

    ``reset`` receives the space (the tuned hyperparameters, with interval and candidate
    set), the horizon, the tuner's own generator and the bottom layer's theoretical
    setting as a function of the round. ``warmup_rounds`` is the number of rounds at the
    start in which the cell pulls uniformly random arms instead of asking the tuner
    (CDT's T1, 003 Algorithm 2 line 1); ``state`` reports sizes worth tracing.
    """

    def reset(
        self,
        space: Sequence[Hyperparameter],
        horizon: int,
        rng: np.random.Generator,
        theory: Theory,
    ) -> None:
        self.space = list(space)
        self.horizon = horizon
        self.rng = rng
        self.theory = theory

    def warmup_rounds(self) -> int:
        return 0

    def propose(self, t: int) -> dict[str, float]:
        """Hyperparameter values for round ``t`` (1-based), one per tuned hyperparameter."""
        raise NotImplementedError

    def observe(self, reward: float) -> None:
        """The reward the bottom layer earned with the last proposal."""

    def params(self) -> dict[str, float | str]:
        """Settings the tuner derived at ``reset`` worth recording (e.g. CDT's T1 and T2)."""
        return {}

    def state(self) -> dict[str, float]:
        """Sizes of the tuner's own state worth tracing (e.g. CDT's active arms)."""
        return {}
