"""High-probability lower bounds of V(pi) from per-sample OPE terms (001 Eq. 11, App. E).

Each returns V_hat - f(delta, D) with V_hat the mean of the (n,) terms ``values`` and
V_n their empirical variance (1/n normalisation, as 001 writes V_n / (n - 1)):

- t-test (Eq. 11): f = t_{1-delta, n-1} sqrt(V_n / (n - 1));
- Hoeffding: f = w_max sqrt(2 log(2/delta) / n);
- Bernstein: f = sqrt(2 log(2/delta) V_n / (n - 1)) + 7 w_max log(2/delta) / (3 (n - 1)),

w_max = sup pi(a|x) / pi0(a|x), the largest importance weight.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def check_delta(delta: float, setting: str = "delta") -> float:
    """delta as a float, refused outside (0, 1)."""
    if not isinstance(delta, (int, float)) or not 0.0 < delta < 1.0:
        raise ValueError(
            f"{setting}={delta!r} is outside (0, 1): delta is the allowed error probability "
            "of the lower bound P(V(pi) >= V_-(pi)) >= 1 - delta (001 Eq. 11); 001's default "
            f"is 0.1. Set {setting} to a number strictly between 0 and 1."
        )
    return float(delta)


def t_quantile(delta: float, n: int) -> float:
    """t_{1-delta, n-1}, the 100(1 - delta) percentile of Student's t with n - 1 dof."""
    return float(stats.t.ppf(1.0 - delta, n - 1))


def t_test_bound(values: np.ndarray, delta: float) -> float:
    """001 Eq. 11: mean - t_{1-delta, n-1} sqrt(V_n / (n - 1))."""
    n = len(values)
    return float(values.mean() - t_quantile(delta, n) * math.sqrt(values.var() / (n - 1)))


def hoeffding_bound(values: np.ndarray, delta: float, w_max: float) -> float:
    """001 Appendix E: mean - w_max sqrt(2 log(2/delta) / n)."""
    return float(values.mean() - w_max * math.sqrt(2.0 * math.log(2.0 / delta) / len(values)))


def bernstein_bound(values: np.ndarray, delta: float, w_max: float) -> float:
    """001 Appendix E: mean - sqrt(2 log(2/delta) V_n/(n-1)) - 7 w_max log(2/delta)/(3(n-1))."""
    n, log_term = len(values), math.log(2.0 / delta)
    width = math.sqrt(2.0 * log_term * values.var() / (n - 1))
    return float(values.mean() - width - 7.0 * w_max * log_term / (3.0 * (n - 1)))
