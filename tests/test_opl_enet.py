"""The LR policies' proximal Newton solver (tasks/opl_hpo/enet_logistic.py): it returns the
minimiser of scikit-learn's elastic-net logistic objective."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from sweeper_tasks.opl_hpo.data.synthetic import SyntheticLoggedData
from sweeper_tasks.opl_hpo.enet_logistic import fit_enet_logistic
from sweeper_tasks.opl_hpo.policy import lr_design


@pytest.fixture(scope="module")
def design():
    train = SyntheticLoggedData(beta0=3.0, n_test=10).generate(np.random.default_rng(0)).train
    return lr_design(train.x, train.a, 10), (train.r > 0).astype(np.int64)


@pytest.mark.parametrize(
    "C, l1_ratio", [(1e-3, 0.5), (0.3, 0.1), (5.0, 0.5), (45.0, 0.7), (1e3, 0.1), (1e3, 0.9)]
)
def test_solution_meets_the_optimality_conditions(design, C, l1_ratio):
    """Subgradient conditions of C sum logloss + l1 |w|_1 + (1 - l1)/2 |w|^2 at the answer,
    across 001 Table 2's range of C (scaled by C to compare with the loss gradient)."""
    X, y = design
    w, b, steps = fit_enet_logistic(X, y, C, l1_ratio)
    assert steps < 200
    residual = expit(X @ w + b) - y
    gradient = C * (X.T @ residual)
    scale = C * np.abs(X).sum(axis=0).max() * 1e-7 + 1e-9
    assert abs(C * residual.sum()) < scale  # the unpenalised intercept
    active = w != 0
    stationarity = gradient[active] + (1 - l1_ratio) * w[active] + l1_ratio * np.sign(w[active])
    assert np.abs(stationarity).max(initial=0.0) < scale
    assert np.all(np.abs(gradient[~active]) <= l1_ratio + scale)


def test_equals_saga_run_to_convergence_on_a_small_problem():
    rng = np.random.default_rng(3)
    x, a = rng.standard_normal((150, 3)), rng.integers(0, 3, 150)
    y = (rng.random(150) < expit(x[:, 0] - 0.5 * a)).astype(np.int64)
    X = lr_design(x, a, 3)
    w, b, _ = fit_enet_logistic(X, y, 2.0, 0.5)
    saga = LogisticRegression(C=2.0, l1_ratio=0.5, solver="saga", tol=1e-12, max_iter=100_000)
    saga.fit(X, y)
    np.testing.assert_allclose(w, saga.coef_[0], atol=1e-6)
    assert b == pytest.approx(saga.intercept_[0], abs=1e-6)


def test_sample_weights_equal_repeated_rows(design):
    X, y = design
    X, y = X[:300], y[:300]
    counts = np.arange(300) % 3 + 1
    repeated = np.repeat(np.arange(300), counts)
    w, b, _ = fit_enet_logistic(X, y, 4.0, 0.3, sample_weight=counts.astype(float))
    w2, b2, _ = fit_enet_logistic(X[repeated], y[repeated], 4.0, 0.3)
    np.testing.assert_allclose(w, w2, atol=1e-7)
    assert b == pytest.approx(b2, abs=1e-7)
