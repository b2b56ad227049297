"""The confidence sequence of seeds-until-decided (sweeper/confseq.py): its boundary is the
level where the Gaussian-mixture martingale it comes from reaches 1/alpha, and the states."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from sweeper.confseq import (
    BETTER,
    EQUIVALENT,
    UNDECIDED,
    WORSE,
    Interval,
    decide,
    interval,
    path,
    radius,
    rho_for,
)


def _mixture(standardised_sum: float, n: int, rho: float) -> float:
    """Robbins' two-sided normal mixture: the integral over the tilt lambda ~ N(0, rho^2) of
    exp(lambda S - lambda^2 n / 2), computed numerically."""

    def integrand(lam: float) -> float:
        return np.exp(lam * standardised_sum - lam**2 * n / 2) * stats.norm.pdf(lam, 0, rho)

    value, _ = integrate.quad(integrand, -np.inf, np.inf)
    return value


@pytest.mark.parametrize(("n", "alpha", "n_star"), [(2, 0.05, 10), (7, 0.05, 10), (40, 0.01, 20)])
def test_the_boundary_is_where_the_mixture_martingale_reaches_one_over_alpha(n, alpha, n_star):
    rho, sd = rho_for(n_star, alpha), 2.5
    r = float(radius(n, sd, alpha, rho))
    at_boundary = _mixture(n * r / sd, n, rho)
    assert at_boundary == pytest.approx(1 / alpha, rel=1e-6)
    assert _mixture(0.9 * n * r / sd, n, rho) < 1 / alpha  # inside: not yet rejected


def test_rho_makes_the_boundary_narrowest_at_n_star():
    alpha, n_star = 0.05, 12
    rhos = np.linspace(0.05, 2.0, 400)
    widths = [float(radius(n_star, 1.0, alpha, r)) for r in rhos]
    best = rhos[int(np.argmin(widths))]
    assert best == pytest.approx(rho_for(n_star, alpha), rel=0.05)


def test_it_is_wider_than_the_fixed_n_interval_and_shrinks_with_seeds():
    d = np.random.default_rng(0).normal(0.3, 1.0, 200)
    at_20 = interval(d[:20], 0.05, 10)
    t_half = stats.t.ppf(0.975, 19) * d[:20].std(ddof=1) / np.sqrt(20)
    assert at_20.radius > t_half  # the price of looking after every seed
    widths = radius(np.array([5, 20, 200]), 1.0, 0.05, rho_for(10, 0.05))
    assert widths[0] > widths[1] > widths[2]
    assert [p.n for p in path(d[:6], 0.05, 10)] == [2, 3, 4, 5, 6]


def test_states():
    assert decide(Interval(9, -2.0, 1.0), 0.1, lower_is_better=True) == BETTER
    assert decide(Interval(9, -2.0, 1.0), 0.1, lower_is_better=False) == WORSE
    assert decide(Interval(9, 0.01, 0.05), 0.1, lower_is_better=True) == EQUIVALENT
    assert decide(Interval(9, 0.2, 0.5), 0.1, lower_is_better=True) == UNDECIDED
    assert interval(np.array([1.0]), 0.05, 10).radius == np.inf
