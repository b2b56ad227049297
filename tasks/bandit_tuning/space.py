"""Tunable hyperparameters and the spaces tuners search (003 Section 5)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_INTERVAL = (0.1, 5.0)
"""The interval CDT searches for every hyperparameter (003 Section 5)."""

DEFAULT_CANDIDATES = (0.1, 1.0, 2.0, 3.0, 4.0, 5.0)
"""The candidate set C1 of the discrete tuners (003 Section 5)."""


@dataclass(frozen=True)
class Hyperparameter:
    """One tunable hyperparameter: its name, value when untuned, interval and candidates."""

    name: str
    default: float = 1.0
    interval: tuple[float, float] = DEFAULT_INTERVAL
    candidates: tuple[float, ...] = field(default=DEFAULT_CANDIDATES)

    def __post_init__(self) -> None:
        if len(self.interval) != 2:
            raise ValueError(
                f"hyperparameter '{self.name}': an interval is two numbers [low, high], the "
                f"range a continuous tuner searches (e.g. space.interval=[0.1,5]); got "
                f"{list(self.interval)}"
            )
        low, high = self.interval
        if not low < high:
            raise ValueError(
                f"hyperparameter '{self.name}': interval [{low}, {high}] is empty or inverted; "
                "give [low, high] with low < high"
            )
        if len(self.candidates) == 0:
            raise ValueError(
                f"hyperparameter '{self.name}': the candidate set is empty; give at least one value"
            )

    def to_unit(self, value: float) -> float:
        """Rescale ``value`` from the interval to [0, 1] (000 Section 4 assumes A = [0, 1]^p)."""
        low, high = self.interval
        return (value - low) / (high - low)

    def from_unit(self, unit: float) -> float:
        """Map a point of [0, 1] back into the interval."""
        low, high = self.interval
        return low + unit * (high - low)

    def with_overrides(self, overrides: Mapping[str, Any] | None) -> Hyperparameter:
        """A copy with ``default``, ``interval`` or ``candidates`` replaced from config."""
        if not overrides:
            return self
        unknown = set(overrides) - {"default", "interval", "candidates"}
        if unknown:
            raise ValueError(
                f"hyperparameter '{self.name}': unknown setting(s) {sorted(unknown)}; "
                "valid settings are default, interval, candidates"
            )
        return Hyperparameter(
            name=self.name,
            default=float(overrides.get("default", self.default)),
            interval=tuple(float(v) for v in overrides.get("interval", self.interval)),
            candidates=tuple(float(v) for v in overrides.get("candidates", self.candidates)),
        )


def names(space: Sequence[Hyperparameter]) -> list[str]:
    return [h.name for h in space]
