"""OP: OPLINUCB of Bouneffouf and Claeys (2020), as modified in 002 Section 6 and 003 Section 5."""

from __future__ import annotations

import numpy as np

from sweeper_tasks.bandit_tuning.tuners.base import BatchTuner, Tuner, single_target


class OP(Tuner):
    """Beta-Bernoulli Thompson sampling over the candidate set of one hyperparameter.

    Each candidate j keeps Beta(S_j, F_j), starting at Beta(1, 1). Each round a draw
    theta_j ~ Beta(S_j, F_j) is taken for every candidate and the largest is played; the
    reward, clipped to [0, 1], is turned into a Bernoulli success r ~ Bernoulli(clip(Y)),
    and S_j += r, F_j += 1 - r. OP tunes one hyperparameter (the exploration rate by
    default) and holds the others at their theoretical values (003 Section 5, item 2).
    ``candidates`` replaces the space's candidate set of the tuned hyperparameter (e.g. the
    released run script's {0.5, 1, 3, 5, 7}); null keeps it.
    """

    def __init__(
        self, hyperparameter: str | None = None, candidates: list[float] | None = None
    ) -> None:
        if candidates is not None and len(candidates) == 0:
            raise ValueError(
                "tuner.candidates is empty: give OP at least one value, or null to use the "
                "space's candidate set (space.candidates)"
            )
        self.hyperparameter = hyperparameter
        self.candidate_override = None if candidates is None else [float(v) for v in candidates]

    def reset(self, space, horizon, rng, theory) -> None:
        super().reset(space, horizon, rng, theory)
        self.target = single_target(self.space, self.hyperparameter)
        own = self.space[self.target].candidates
        self.candidates = tuple(own if self.candidate_override is None else self.candidate_override)
        self.successes = np.ones(len(self.candidates))
        self.failures = np.ones(len(self.candidates))
        self.last = -1

    def proposes(self, hyperparameter):
        """Its candidates for the one hyperparameter it tunes; the others keep their
        theoretical values (nothing declared)."""
        if hyperparameter.name != self.space[self.target].name:
            return None
        return ("set", tuple(self.candidates))

    def propose(self, t: int) -> dict[str, float]:
        draws = self.rng.beta(self.successes, self.failures)
        self.last = int(np.argmax(draws))
        theory = self.theory(t)
        values = {h.name: float(theory[h.name]) for h in self.space}
        values[self.space[self.target].name] = float(self.candidates[self.last])
        return values

    def observe(self, reward: float) -> None:
        success = float(self.rng.random() < min(1.0, max(0.0, float(reward))))
        self.successes[self.last] += success
        self.failures[self.last] += 1.0 - success

    def params(self) -> dict[str, float | str]:
        params: dict[str, float | str] = {"op.tuned": self.space[self.target].name}
        if self.candidate_override is not None:
            params["op.candidates"] = str(list(self.candidates))
        return params


class BatchOP(BatchTuner):
    """OP for S seeds: the Beta counts as (S, n); each seed's Beta draws and its coin for
    the Bernoulli success come from its own generator, as alone."""

    def __init__(self, tuners, theory) -> None:
        super().__init__(tuners, theory)
        first = self.tuners[0]
        self.target = self.space[first.target].name
        self.candidates = np.array(first.candidates, dtype=float)
        self.successes = np.stack([tuner.successes for tuner in self.tuners])
        self.failures = np.stack([tuner.failures for tuner in self.tuners])
        self.seeds = np.arange(self.n_seeds)

    def propose(self, t: int) -> dict[str, np.ndarray]:
        draws = np.stack(
            [
                rng.beta(a, b)
                for rng, a, b in zip(self.rngs, self.successes, self.failures, strict=True)
            ]
        )
        self.last = draws.argmax(axis=1)
        values = self.theoretical(t)
        values[self.target] = self.candidates[self.last]
        return values

    def observe(self, rewards: np.ndarray) -> None:
        coins = np.array([rng.random() for rng in self.rngs])
        success = (coins < np.minimum(1.0, np.maximum(0.0, rewards))).astype(float)
        self.successes[self.seeds, self.last] += success
        self.failures[self.seeds, self.last] += 1.0 - success


OP.batch = BatchOP
