"""Hyperband run online, the fourth baseline of 004 Section 7.1.3 (Li et al. 2018, Algorithm 1)."""

from __future__ import annotations

import math
from collections.abc import Generator

import numpy as np

from sweeper_tasks.bandit_tuning.tuners.base import Tuner


def default_max_resource(horizon: int) -> float:
    """R = T / (2 (ln T + 1)^2): the most rounds one configuration gets (004 Section 7.1.3)."""
    return horizon / (2.0 * (math.log(horizon) + 1.0) ** 2)


def hyperband_brackets(max_resource: float, eta: float) -> list[list[tuple[int, int]]]:
    """The rungs (n_i configurations, r_i rounds each) of every bracket s = s_max, ..., 0.

    Li et al. (2018) Algorithm 1: s_max = floor(log_eta R), B = (s_max + 1) R; bracket s
    starts n = ceil((B / R) eta^s / (s + 1)) configurations with resource r = R eta^-s and
    successive halving keeps n_i = floor(n eta^-i) of them with r_i = r eta^i at rung i.
    A resource is a number of rounds here, so r_i is rounded down (at least one round).
    """
    if not eta > 1:
        raise ValueError(f"hyperband: eta must be > 1, got {eta}")
    resource = max(float(max_resource), 1.0)
    s_max = max(0, math.floor(math.log(resource) / math.log(eta) + 1e-9))
    brackets = []
    for s in range(s_max, -1, -1):
        n = math.ceil((s_max + 1) * eta**s / (s + 1) - 1e-9)
        r = resource * eta ** (-s)
        rungs = []
        for i in range(s + 1):
            n_i = math.floor(n * eta ** (-i) + 1e-9)
            if n_i < 1:
                break
            rungs.append((n_i, max(1, math.floor(r * eta**i + 1e-9))))
        brackets.append(rungs)
    return brackets


class Hyperband(Tuner):
    """Hyperband on the first T/2 rounds, then its output for the rest (004 Section 7.1.3).

    An evaluation of a configuration (a point of [0, 1]^p, drawn uniformly with the tuner's
    generator, each coordinate mapped to its hyperparameter's interval) with resource r
    plays it for r consecutive rounds; its loss is minus its mean reward. Successive halving
    keeps the best 1/eta of each rung (004: discard 2/3, eta = 3). The brackets of
    ``hyperband_brackets`` run in order, and Hyperband starts over with fresh configurations
    whenever all brackets are done, until the exploration rounds are spent (one pass uses
    about (s_max + 1)^2 R rounds, less than T/2 with 004's R).

    The output, played for the remaining rounds, is the configuration with the best mean
    among the evaluations with the largest resource done (the last rung, R rounds, once a
    bracket completes). Li et al. return the smallest intermediate loss seen at any resource;
    on noisy rewards that is a lucky one-round draw, so we read "its output" as the best
    full-resource evaluation.

    Parameters
    ----------
    eta : float
        Reduction factor, > 1 (004: 3).
    max_resource : float or None
        R in rounds; None: T / (2 (ln T + 1)^2) (004).
    explore_fraction : float
        Share of the horizon Hyperband may use, in (0, 1] (004: 0.5).
    """

    def __init__(
        self, eta: float = 3.0, max_resource: float | None = None, explore_fraction: float = 0.5
    ) -> None:
        if not float(eta) > 1.0:
            raise ValueError(
                f"hyperband: eta must be > 1 (the factor by which successive halving cuts the "
                f"configurations and grows their resource; 004 uses 3), got {eta}"
            )
        if max_resource is not None and not float(max_resource) >= 1.0:
            raise ValueError(
                f"hyperband: max_resource must be at least one round (or null for "
                f"T / (2 (ln T + 1)^2)), got {max_resource}"
            )
        if not 0.0 < float(explore_fraction) <= 1.0:
            raise ValueError(
                f"hyperband: explore_fraction must be in (0, 1] (004: 0.5), got {explore_fraction}"
            )
        self.eta = float(eta)
        self.max_resource = None if max_resource is None else float(max_resource)
        self.explore_fraction = float(explore_fraction)

    def proposes(self, hyperparameter):
        return ("interval", tuple(hyperparameter.interval))

    def reset(self, space, horizon, rng, theory) -> None:
        super().reset(space, horizon, rng, theory)
        self.resource = (
            default_max_resource(self.horizon) if self.max_resource is None else self.max_resource
        )
        self.brackets = hyperband_brackets(self.resource, self.eta)
        self.explore_rounds = int(np.floor(self.explore_fraction * self.horizon))
        self.evaluations: list[tuple[int, float, np.ndarray]] = []  # (rounds, mean, point)
        self._plan = self._hyperband()
        self._started = False
        self._reward = 0.0
        self.output: np.ndarray | None = None

    def _hyperband(self) -> Generator[np.ndarray, float, None]:
        """Yield the point of each round; receive its reward."""
        while True:
            for rungs in self.brackets:
                configs = self.rng.random((rungs[0][0], len(self.space)))
                for i, (_n_i, rounds) in enumerate(rungs):
                    means = np.empty(len(configs))
                    for j, point in enumerate(configs):
                        total = 0.0
                        for _ in range(rounds):
                            total += yield point
                        means[j] = total / rounds
                        self.evaluations.append((rounds, means[j], point))
                    if i + 1 < len(rungs):
                        keep = rungs[i + 1][0]
                        configs = configs[np.argsort(-means, kind="stable")[:keep]]

    def _commit(self) -> np.ndarray:
        if not self.evaluations:
            return self.rng.random(len(self.space))
        largest = max(rounds for rounds, _, _ in self.evaluations)
        done = [(mean, point) for rounds, mean, point in self.evaluations if rounds == largest]
        return max(done, key=lambda pair: pair[0])[1]

    def propose(self, t: int) -> dict[str, float]:
        if t <= self.explore_rounds:
            point = self._plan.send(self._reward) if self._started else next(self._plan)
            self._started = True
        else:
            if self.output is None:
                self.output = self._commit()
            point = self.output
        return {h.name: float(h.from_unit(u)) for h, u in zip(self.space, point, strict=True)}

    def observe(self, reward: float) -> None:
        self._reward = float(reward)

    def params(self) -> dict[str, float | str]:
        return {
            "hyperband.eta": self.eta,
            "hyperband.R": self.resource,
            "hyperband.s_max": len(self.brackets) - 1,
            "hyperband.rounds_per_pass": sum(n * r for b in self.brackets for n, r in b),
            "hyperband.explore_rounds": self.explore_rounds,
        }

    def state(self) -> dict[str, float]:
        return {"committed": float(self.output is not None)}
