"""One fixed value per hyperparameter; a sweep over values is 003 Appendix A.1's grid search."""

from __future__ import annotations

from collections.abc import Mapping

from tasks.bandit_tuning.tuners.base import Tuner


class Fixed(Tuner):
    """Hold every tuned hyperparameter at ``values[name]`` (or ``value`` for all of them)."""

    def __init__(self, value: float | None = 1.0, values: Mapping[str, float] | None = None):
        self.value = value
        self.values = dict(values or {})

    def reset(self, space, horizon, rng, theory) -> None:
        super().reset(space, horizon, rng, theory)
        missing = [h.name for h in self.space if h.name not in self.values and self.value is None]
        if missing:
            raise ValueError(f"fixed tuner has no value for {missing}; set tuner.value or values")
        self._proposal = {h.name: float(self.values.get(h.name, self.value)) for h in self.space}

    def propose(self, t: int) -> dict[str, float]:
        return self._proposal
