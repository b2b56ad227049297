"""One fixed value per hyperparameter; a sweep over values is 003 Appendix A.1's grid search."""

from __future__ import annotations

import math
from collections.abc import Mapping

from sweeper_tasks.bandit_tuning.tuners.base import Tuner


class Fixed(Tuner):
    """Hold every tuned hyperparameter at ``values[name]``, or at ``value`` for the rest.

    A sweep of ``tuner.value`` over a grid, one cell per value, is the grid search of 003
    Appendix A.1 (Table 3): the best value in hindsight, a skyline no online tuner can see.
    """

    def __init__(self, value: float | None = 1.0, values: Mapping[str, float] | None = None):
        self.value = None if value is None else float(value)
        self.values = {str(k): float(v) for k, v in dict(values or {}).items()}
        for name, v in [("value", self.value), *self.values.items()]:
            if v is not None and not math.isfinite(v):
                raise ValueError(f"fixed tuner: {name} must be a finite number, got {v}")

    def reset(self, space, horizon, rng, theory) -> None:
        super().reset(space, horizon, rng, theory)
        names = [h.name for h in self.space]
        unknown = sorted(set(self.values) - set(names))
        if unknown:
            raise ValueError(
                f"fixed tuner: values given for {unknown}, which are not tuned; "
                f"the tuned hyperparameters are {names}"
            )
        missing = [n for n in names if n not in self.values and self.value is None]
        if missing:
            raise ValueError(f"fixed tuner has no value for {missing}; set tuner.value or values")
        self._proposal = {n: self.values.get(n, self.value) for n in names}

    def propose(self, t: int) -> dict[str, float]:
        return dict(self._proposal)

    def proposes(self, hyperparameter):
        return ("set", (self._proposal[hyperparameter.name],))

    def params(self) -> dict[str, float | str]:
        return {f"fixed.{name}": value for name, value in self._proposal.items()}
