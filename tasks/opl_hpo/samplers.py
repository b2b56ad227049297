"""Optuna samplers of the upper-level search (001 Section 3.1: TPE and random search).

Each config builds a factory; ``create(seed)`` returns the seeded Optuna sampler, driven
through Optuna's ask/tell interface by the cell.
"""

from __future__ import annotations

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)


class TPE:
    """optuna.samplers.TPESampler (Bergstra et al. 2011), Optuna's defaults unless set.

    Parameters
    ----------
    n_startup_trials : random trials before TPE's model is used (Optuna's default 10).
    multivariate : model the hyperparameters jointly (Optuna's default False).
    """

    def __init__(self, n_startup_trials: int = 10, multivariate: bool = False) -> None:
        if int(n_startup_trials) != n_startup_trials or n_startup_trials < 0:
            raise ValueError(
                f"sampler.n_startup_trials={n_startup_trials!r} must be a non-negative integer."
            )
        self.n_startup_trials, self.multivariate = int(n_startup_trials), bool(multivariate)

    def create(self, seed: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.TPESampler(
            n_startup_trials=self.n_startup_trials, multivariate=self.multivariate, seed=seed
        )


class Random:
    """optuna.samplers.RandomSampler (random search, Bergstra and Bengio 2012)."""

    def create(self, seed: int) -> optuna.samplers.BaseSampler:
        return optuna.samplers.RandomSampler(seed=seed)
