"""The top-layer interface."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from sweeper_tasks.bandit_tuning.space import Hyperparameter

Theory = Callable[[int], dict[str, float]]
Declared = tuple[str, tuple[float, ...]] | None
"""Where a tuner's proposals for one hyperparameter lie: ``("interval", (low, high))``, a
finite ``("set", values)``, or None (not a set of its own, e.g. a theoretical schedule)."""

EXPLORATION_RATE = "exploration_rate"


class Tuner:
    """Proposes the tuned hyperparameters each round and observes the reward they earned.

    ``reset`` receives the space (the tuned hyperparameters, with interval and candidate
    set), the horizon, the tuner's own generator and the bottom layer's theoretical
    setting as a function of the round. ``warmup_rounds`` is the number of rounds at the
    start in which the cell pulls uniformly random arms instead of asking the tuner
    (CDT's T1, 003 Algorithm 2 line 1); ``state`` reports sizes worth tracing.

    ``notify_change`` is the one explicit channel for privileged information: a cell that
    knows the environment's true change points (the switching Lipschitz benchmark of 003
    Appendix A.3) calls it before the first round of every new stationary piece. Every
    tuner ignores it except the Oracle skyline, which restarts there.
    """

    def reset(
        self,
        space: Sequence[Hyperparameter],
        horizon: int,
        rng: np.random.Generator,
        theory: Theory,
    ) -> None:
        self.space = list(space)
        if not self.space:
            raise ValueError(f"{type(self).__name__} got no hyperparameter to tune")
        self.horizon = int(horizon)
        if self.horizon <= 0:
            raise ValueError(f"horizon must be a positive number of rounds, got {horizon}")
        self.rng = rng
        self.theory = theory

    def warmup_rounds(self) -> int:
        return 0

    def propose(self, t: int) -> dict[str, float]:
        """Hyperparameter values for round ``t`` (1-based), one per tuned hyperparameter."""
        raise NotImplementedError

    def observe(self, reward: float) -> None:
        """The reward the bottom layer earned with the last proposal."""

    def proposes(self, hyperparameter: Hyperparameter) -> Declared:
        """Where this tuner's proposals for ``hyperparameter`` lie, once ``reset`` (see
        :data:`Declared`); the conformance check (``python -m sweeper.check``) holds every
        proposal to it. The default, None, declares nothing."""
        return None

    def notify_change(self) -> None:
        """The environment changed before the coming round (only oracles use this)."""

    def params(self) -> dict[str, float | str]:
        """Settings the tuner derived at ``reset`` worth recording (e.g. CDT's T1 and T2)."""
        return {}

    def state(self) -> dict[str, float]:
        """Sizes of the tuner's own state worth tracing (e.g. CDT's active arms)."""
        return {}


def single_target(space: Sequence[Hyperparameter], name: str | None) -> int:
    """Index of the one hyperparameter a single-hyperparameter tuner (OP, TL) tunes.

    ``name`` picks it explicitly; by default the exploration rate when it is tuned, else
    the first tuned hyperparameter. The others stay at their theoretical values, as 003
    Section 5 does for GLOC and SGD-TS.
    """
    names = [h.name for h in space]
    if name is not None:
        if name not in names:
            raise ValueError(
                f"cannot tune '{name}': the tuned hyperparameters are {names}; "
                "set tuner.hyperparameter to one of them or to null"
            )
        return names.index(name)
    return names.index(EXPLORATION_RATE) if EXPLORATION_RATE in names else 0


class BatchTuner:
    """What the batched tuners share: the seeds' tuners (for their settings), their
    generators, and the algorithm's theoretical values of all seeds at a round."""

    def __init__(self, tuners: Sequence[Tuner], theory: Callable[[int], dict[str, np.ndarray]]):
        self.tuners = list(tuners)
        self.space = self.tuners[0].space
        self.rngs = [tuner.rng for tuner in self.tuners]
        self.theory = theory
        self.n_seeds = len(self.tuners)

    def theoretical(self, t: int) -> dict[str, np.ndarray]:
        """Every tuned hyperparameter at its theoretical values, (S,) each."""
        theory = self.theory(t)
        return {h.name: theory[h.name] for h in self.space}

    def observe(self, rewards: np.ndarray) -> None:
        """The (S,) rewards the bottom layer earned with the last proposals."""

    def state(self) -> dict[str, np.ndarray]:
        return {}
