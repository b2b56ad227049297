"""Common random numbers (docs/architecture.md, "Seeding").

The environment's stream depends on (dataset, seed) only, so every algorithm and tuner
run with the same seed faces the same contexts and noise: comparisons are paired. The
agent's stream depends on (seed, algorithm, tuner).
"""

from __future__ import annotations

import numpy as np

from sweeper_tasks.seeding import stable_hash


def environment_rng(dataset: str, seed: int) -> np.random.Generator:
    """The environment's generator: contexts, parameters and reward noise."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), stable_hash(dataset), 0]))


def agent_rngs(seed: int, algorithm: str, tuner: str, n: int = 3) -> list[np.random.Generator]:
    """Independent generators for the agent's parts (bottom layer, top layer, warm-up)."""
    root = np.random.SeedSequence([int(seed), stable_hash(algorithm), stable_hash(tuner), 1])
    return [np.random.default_rng(child) for child in root.spawn(n)]
