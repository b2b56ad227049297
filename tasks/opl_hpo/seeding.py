"""Common random numbers for the OPL cells (DESIGN.md, Randomness).

The logged data depend on (data set, seed) only, so every procedure, sampler and estimator
run with the same seed sees the same logs: comparisons are paired. The models' random
states (random forests) depend on the seed and the trial number only, and the Optuna
sampler's seed on (seed, sampler).
"""

from __future__ import annotations

import numpy as np

from sweeper_tasks.seeding import stable_hash


def data_rng(dataset: str, seed: int) -> np.random.Generator:
    """The generator of the logged data (contexts, actions, rewards, splits)."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), stable_hash(dataset), 0]))


def model_rng(seed: int) -> np.random.Generator:
    """The generator of the models' random states (one draw per trial)."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), stable_hash("models"), 1]))


def sampler_seed(seed: int, sampler: str) -> int:
    """A 32-bit seed for the Optuna sampler, from (seed, sampler)."""
    sequence = np.random.SeedSequence([int(seed), stable_hash(sampler), 2])
    return int(sequence.generate_state(1)[0])
