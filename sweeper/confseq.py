"""Anytime-valid confidence sequences for the mean of paired differences (seeds until
decided: docs/seeds.md).

The construction is the Gaussian-mixture asymptotic confidence sequence of Waudby-Smith,
Arbour, Sinha, Kennedy and Ramdas, "Time-uniform central limit theory and asymptotic
confidence sequences" (Annals of Statistics 52(6), 2024), Theorem 2.2: after ``n`` paired
differences with mean ``m_n`` and standard deviation ``s_n``,

    C_n = m_n +- s_n * sqrt( 2 (n rho^2 + 1) / (n^2 rho^2) * log( sqrt(n rho^2 + 1) / alpha ) )

covers the mean difference at every ``n`` at once with probability at least ``1 - alpha`` (as
the number of seeds grows; it needs only a finite variance, as regrets and policy values
have), so looking after every seed costs no error rate. It is Robbins' normal-mixture
boundary (a two-sided Gaussian mixture over the tilt, Ville's inequality) with the sample
deviation in place of the known one; ``rho`` sets the seed count ``n*`` where it is
narrowest (the paper's choice, :func:`rho_for`).

The closed form is written here rather than taken from a library: ``confseq`` (the
maintained implementation) ships only a C++ source distribution that needs CMake and Boost
to build, which a two-command install cannot assume. tests/test_confseq.py checks the
boundary against the mixture martingale it solves, integrated numerically.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BETTER, WORSE, EQUIVALENT, UNDECIDED = "better", "worse", "equivalent", "undecided"
"""A comparison's state against the reference (:func:`decide`)."""


def rho_for(n_star: float, alpha: float) -> float:
    """The mixture's ``rho`` that makes the boundary narrowest at ``n_star`` seeds
    (Waudby-Smith et al. 2024, the remark after Theorem 2.2)."""
    log_term = -2.0 * np.log(alpha)
    return float(np.sqrt((log_term + np.log(log_term + 1.0)) / n_star))


def radius(n: np.ndarray | int, sd: np.ndarray | float, alpha: float, rho: float) -> np.ndarray:
    """The half-width of the confidence sequence after ``n`` differences of sample standard
    deviation ``sd`` (arrays broadcast; ``n >= 2``)."""
    n = np.asarray(n, dtype=float)
    v = n * rho**2 + 1.0
    return np.asarray(sd) * np.sqrt(2.0 * v / (n**2 * rho**2) * np.log(np.sqrt(v) / alpha))


@dataclass(frozen=True)
class Interval:
    """The confidence sequence's interval after ``n`` seeds: ``mean`` +- ``radius``."""

    n: int
    mean: float
    radius: float

    @property
    def low(self) -> float:
        return self.mean - self.radius

    @property
    def high(self) -> float:
        return self.mean + self.radius


def interval(differences: np.ndarray, alpha: float, n_star: float) -> Interval:
    """The interval after all of ``differences`` (shape (n,), n >= 2, in seed order)."""
    d = np.asarray(differences, dtype=float)
    if d.size < 2:
        return Interval(int(d.size), float(d.mean()) if d.size else 0.0, float("inf"))
    r = radius(d.size, d.std(ddof=1), alpha, rho_for(n_star, alpha))
    return Interval(int(d.size), float(d.mean()), float(r))


def path(differences: np.ndarray, alpha: float, n_star: float) -> list[Interval]:
    """The interval after each prefix of ``differences`` (n = 2, 3, ...): the sequence as
    it was seen seed by seed (for the report's figure)."""
    d = np.asarray(differences, dtype=float)
    return [interval(d[:n], alpha, n_star) for n in range(2, d.size + 1)]


def decide(iv: Interval, precision: float, lower_is_better: bool) -> str:
    """The comparison's state: decided :data:`BETTER` or :data:`WORSE` than the reference
    when the interval excludes 0, :data:`EQUIVALENT` when its half-width is under
    ``precision`` (an absolute difference), else :data:`UNDECIDED`. ``differences`` are
    (option - reference); ``lower_is_better`` says which sign is better."""
    if iv.low > 0 or iv.high < 0:
        below = iv.high < 0
        return BETTER if below == lower_is_better else WORSE
    if iv.radius < precision:
        return EQUIVALENT
    return UNDECIDED
