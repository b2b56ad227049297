"""The report's paired statistics (issue #38, item 3): Holm's adjustment, the Wilcoxon
floor, and, in a slow test, their error rates under the null."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

from sweeper.report.stats import holm, wilcoxon_floor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))


def _holm_by_definition(p: list[float]) -> list[float]:
    """Holm's adjusted p-value of each hypothesis, from the step-down procedure itself: the
    smallest alpha at which it is rejected."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def test_holm_matches_its_definition_and_ignores_nan():
    rng = np.random.default_rng(3)
    for m in (1, 2, 5, 42):
        p = rng.uniform(0, 0.2, m)
        np.testing.assert_allclose(holm(p), _holm_by_definition(list(p)), rtol=0, atol=1e-15)
    assert np.allclose(holm([0.01, np.nan, 0.04]), [0.02, np.nan, 0.04], equal_nan=True)


def test_the_wilcoxon_floor_is_the_test_s_own_smallest_p():
    from scipy import stats

    for n in (3, 5, 6, 8):
        smallest = min(
            stats.wilcoxon(np.array(signs) * np.arange(1, n + 1)).pvalue
            for signs in itertools.product((-1, 1), repeat=n)
        )
        assert np.isclose(smallest, wilcoxon_floor(n)), n
    assert wilcoxon_floor(5) == 0.0625


@pytest.mark.slow
def test_under_the_null_holm_and_the_sequence_keep_their_level():
    """1000 null tables of main's 42 comparisons: with raw p-values most show a false
    positive; with Holm's, at most alpha (3 standard errors of slack). After seeds until
    decided, the confidence sequence errs at most alpha; the fixed-n t interval more."""
    from bench_paired_stats import adaptive_rates, family_rates

    rng = np.random.default_rng(11)
    raw, adjusted = family_rates(1000, 14, 3, 20, False, rng)
    slack = 3 * np.sqrt(0.05 * 0.95 / 1000)
    assert raw > 0.5 and adjusted <= 0.05 + slack, (raw, adjusted)
    cs, t, _ = adaptive_rates(4000, rng)
    assert cs <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 4000) and t > cs, (cs, t)
