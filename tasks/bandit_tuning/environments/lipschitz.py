"""Switching Lipschitz bandits on [0, 1] (003 Appendix A.3), a benchmark for the tuners alone.

The arm set is [0, 1]; the mean reward f_t is one member of a family with its peak at a,
    triangle: f(x) = 0.9 - 0.9 |x - a|
    sine:     f(x) = 2/(3 pi) sin(3 pi/2 (x - a + 1/3))
for a in {0.05, 0.25, 0.45, 0.70, 0.95}. The horizon is cut by c(T) = 3 change points into
four stationary pieces, each with its own peak; the reward is f_t(x) + N(0, 0.1) noise.

The layout (change points and the peak of each piece) is drawn once per experiment from
``layout_seed`` and is the same for every cell seed ("the change points are fixed for each
repetition to make the average value meaningful", A.3); the noise comes from the cell's
environment generator, which depends on (dataset, seed) only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

FAMILIES = ("triangle", "sine")
PEAKS = (0.05, 0.25, 0.45, 0.70, 0.95)
CANDIDATES = tuple(round(0.1 * k, 1) for k in range(11))
"""The candidate set of the discrete tuners (OP, TL) on [0, 1]: 0, 0.1, ..., 1."""


def triangle(x: np.ndarray | float, peak: float) -> np.ndarray | float:
    return 0.9 - 0.9 * np.abs(np.asarray(x) - peak)


def sine(x: np.ndarray | float, peak: float) -> np.ndarray | float:
    return 2.0 / (3.0 * math.pi) * np.sin(1.5 * math.pi * (np.asarray(x) - peak + 1.0 / 3.0))


class SwitchingLipschitz:
    """A piecewise-stationary 1-Lipschitz reward function on [0, 1] with Gaussian noise.

    ``change_points`` lists the 0-based rounds at which a new piece starts (so f changes
    between rounds change_point - 1 and change_point). Set them explicitly, or leave them
    null to draw ``n_changes`` distinct rounds uniformly at random from ``layout_seed``.
    ``peaks`` is the candidate set of peak locations; each piece gets one, drawn without
    replacement while there are enough candidates; with ``shuffle_peaks: false`` piece i
    gets ``peaks[i]`` instead (cycling when there are more pieces than peaks).
    ``candidates`` is the finite set the discrete tuners (OP, TL, ...) choose x from; the
    continuum tuners search all of [0, 1].
    """

    def __init__(
        self,
        family: str = "triangle",
        n_changes: int = 3,
        change_points: Sequence[int] | None = None,
        peaks: Sequence[float] = PEAKS,
        noise_sd: float = math.sqrt(0.1),
        layout_seed: int = 0,
        candidates: Sequence[float] = CANDIDATES,
        block_rounds: int = 4096,
        shuffle_peaks: bool = True,
    ) -> None:
        if family not in FAMILIES:
            raise ValueError(f"unknown Lipschitz family '{family}'; choose one of {FAMILIES}")
        if change_points is None and int(n_changes) < 0:
            raise ValueError(f"n_changes must be >= 0, got {n_changes}")
        if len(peaks) == 0 or not all(0.0 <= float(a) <= 1.0 for a in peaks):
            raise ValueError(f"peaks must be a non-empty list of points of [0, 1], got {peaks}")
        if noise_sd < 0:
            raise ValueError(f"noise_sd must be non-negative, got {noise_sd}")
        self.family = family
        self.function = triangle if family == "triangle" else sine
        self.n_changes = int(n_changes) if change_points is None else len(change_points)
        self.fixed_change_points = (
            None if change_points is None else [int(c) for c in change_points]
        )
        self.peak_candidates = tuple(float(a) for a in peaks)
        self.noise_sd = float(noise_sd)
        self.layout_seed = int(layout_seed)
        self.candidates = tuple(float(c) for c in candidates)
        if not self.candidates or not all(0.0 <= c <= 1.0 for c in self.candidates):
            raise ValueError(
                f"candidates must be a non-empty list of points of [0, 1], got {candidates}"
            )
        self.block_rounds = int(block_rounds)
        self.shuffle_peaks = bool(shuffle_peaks)

    def check(self, horizon: int | None = None) -> None:
        """Fail early on a layout that cannot fit the horizon."""
        if horizon is None:
            return
        if self.fixed_change_points is not None:
            points = self.fixed_change_points
            if sorted(set(points)) != points or (
                points and not 0 < points[0] <= points[-1] < horizon
            ):
                raise ValueError(
                    f"change_points {points} must be strictly increasing rounds in 1..{horizon - 1}"
                )
        elif self.n_changes > horizon - 1:
            raise ValueError(
                f"{self.n_changes} change points do not fit in a horizon of {horizon} rounds; "
                "lower dataset.n_changes or raise horizon"
            )

    def layout(self, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        """The change points (0-based rounds) and the peak of each of the pieces."""
        self.check(horizon)
        rng = np.random.default_rng(np.random.SeedSequence([self.layout_seed, 2024]))
        if self.fixed_change_points is not None:
            points = np.asarray(self.fixed_change_points, dtype=int)
        else:
            points = np.sort(rng.choice(np.arange(1, horizon), self.n_changes, replace=False))
        pieces = len(points) + 1
        candidates = np.asarray(self.peak_candidates)
        if self.shuffle_peaks:
            replace = len(candidates) < pieces
            peaks = rng.choice(candidates, pieces, replace=replace)
        else:
            peaks = candidates[np.arange(pieces) % len(candidates)]
        return points.astype(int), peaks.astype(float)

    def reset(self, horizon: int, rng: np.random.Generator) -> None:
        self.horizon = int(horizon)
        self.change_points, self.peaks = self.layout(self.horizon)
        self._rng = rng
        self._block_start = -self.block_rounds
        self._noise = np.zeros(self.block_rounds)

    def params(self) -> dict[str, str]:
        """The layout of the run, recorded with the cell."""
        return {
            "change_points": str([int(c) for c in self.change_points]),
            "peaks": str([float(a) for a in self.peaks]),
        }

    def piece(self, t: int) -> int:
        """Index of the stationary piece that round ``t`` (0-based) belongs to."""
        return int(np.searchsorted(self.change_points, t, side="right"))

    def mean(self, t: int, x: np.ndarray | float) -> np.ndarray | float:
        """f_t(x) for round ``t`` (0-based)."""
        return self.function(x, self.peaks[self.piece(t)])

    def best_mean(self, t: int) -> float:
        """max_x f_t(x) = f_t(a), the peak value."""
        peak = self.peaks[self.piece(t)]
        return float(self.function(peak, peak))

    def reward(self, t: int, x: float) -> float:
        """f_t(x) + noise; rounds must be asked in order (noise is drawn in blocks)."""
        offset = t - self._block_start
        if not 0 <= offset < self.block_rounds:
            self._block_start = t
            self._noise = self._rng.standard_normal(self.block_rounds)
            offset = 0
        return float(self.mean(t, x)) + self.noise_sd * float(self._noise[offset])
