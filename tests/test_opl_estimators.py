"""001's estimators, bounds and ground truth: IPS and DR by hand, V(pi) against Monte Carlo,
the t-test bound's error rate, the LR fast path against scikit-learn."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper_tasks.opl_hpo.bounds import bernstein_bound, hoeffding_bound, t_test_bound
from sweeper_tasks.opl_hpo.bounds_cell import run_cell as run_bounds
from sweeper_tasks.opl_hpo.data.base import Split, softmax
from sweeper_tasks.opl_hpo.data.synthetic import SyntheticLoggedData
from sweeper_tasks.opl_hpo.estimators import DR, IPS
from sweeper_tasks.opl_hpo.policy import (
    LinearRewardModel,
    PolicySpace,
    all_actions,
    fit_logistic,
    lr_design,
    rf_design,
    rf_design_all,
)

# A three-round log with two actions: a = (0, 1, 0), r = (1, 0, 1), pi0(a_i|x_i) below.
LOG = Split(
    x=np.zeros((3, 1)),
    a=np.array([0, 1, 0]),
    r=np.array([1.0, 0.0, 1.0]),
    pscore=np.array([0.5, 0.25, 0.8]),
    pi0=np.array([[0.5, 0.5], [0.75, 0.25], [0.8, 0.2]]),
)
PI = np.array([[0.2, 0.8], [0.6, 0.4], [1.0, 0.0]])
Q = np.array([[0.5, 0.1], [0.3, 0.2], [0.9, 0.4]])


def test_ips_on_a_hand_computed_log():
    ips = IPS()
    ips.split = LOG
    # weights 0.2/0.5, 0.4/0.25, 1/0.8 times rewards 1, 0, 1
    assert np.allclose(ips.per_sample(PI), [0.4, 0.0, 1.25])
    assert ips.per_sample(PI).mean() == pytest.approx(0.55)


def test_dr_on_a_hand_computed_log():
    dr = DR().with_reward_model(LOG, Q)
    # direct terms 0.18, 0.26, 0.9; corrections 0.4 * 0.5, 1.6 * -0.2, 1.25 * 0.1
    assert np.allclose(dr.per_sample(PI), [0.38, -0.06, 1.025])
    assert dr.per_sample(PI).mean() == pytest.approx(1.345 / 3)


def test_bounds_match_their_formulas():
    values = np.array([0.0, 2.0, 1.0, 3.0, 0.5])
    n, mean, var = 5, 1.3, np.var([0.0, 2.0, 1.0, 3.0, 0.5])
    t95 = 2.131846786  # t_{0.95, 4}
    assert t_test_bound(values, 0.05) == pytest.approx(mean - t95 * math.sqrt(var / 4))
    log_term = math.log(2 / 0.05)
    assert hoeffding_bound(values, 0.05, 4.0) == pytest.approx(
        mean - 4.0 * math.sqrt(2 * log_term / n)
    )
    assert bernstein_bound(values, 0.05, 4.0) == pytest.approx(
        mean - math.sqrt(2 * log_term * var / 4) - 7 * 4.0 * log_term / 12
    )


def test_exact_value_equals_a_monte_carlo_estimate():
    data = SyntheticLoggedData(beta0=3.0, n_test=2000).generate(np.random.default_rng(0))
    test = data.test
    pi = softmax(-2.0 * test.mu)  # some policy other than pi0
    exact = test.value(pi)
    rng = np.random.default_rng(1)
    repeats = 200  # 400,000 simulated rounds on the same contexts
    actions = (np.cumsum(pi, axis=1)[None] < rng.random((repeats, len(pi), 1))).sum(axis=2)
    means = test.mu[np.arange(len(pi))[None, :], actions]
    rewards = rng.random(means.shape) < means
    estimate, error = rewards.mean(), rewards.std() / math.sqrt(rewards.size)
    assert abs(estimate - exact) < 4 * error, (estimate, exact, error)
    assert abs(test.value(test.pi0) - exact) > 10 * error  # the check can tell policies apart


@pytest.mark.parametrize("beta0", [0.0, 3.0])
def test_t_test_bound_error_rate_is_near_delta(beta0):
    delta = 0.1
    result = run_bounds(
        {
            "seed": 0,
            "delta": delta,
            "n_repeats": 2000,
            "logged_data": {
                "_target_": "sweeper_tasks.opl_hpo.data.synthetic.SyntheticLoggedData",
                "name": "synthetic",
                "beta0": beta0,
                "n_val": 1000,
                "n_test": 100000,
            },
        }
    )
    summary = result["summary"]
    # 2000 repeats: the rate's standard error is 0.007 at 0.1
    assert 0.05 <= summary["t_test_error"] <= 0.15, summary
    assert summary["hoeffding_error"] == 0.0 and summary["bernstein_error"] == 0.0
    assert summary["hoeffding_value"] < summary["bernstein_value"] < summary["t_test_value"]
    assert abs(summary["ips"] - 1.0) < 0.02  # IPS is unbiased


def test_logistic_fast_path_equals_scikit_learn_predict_proba():
    data = SyntheticLoggedData(beta0=3.0, n_test=50).generate(np.random.default_rng(2))
    train = data.train
    model = fit_logistic(train.x, train.a, train.r, 10, C=3.0, l1_ratio=0.5, random_state=4)
    assert isinstance(model, LinearRewardModel)
    from sklearn.linear_model import LogisticRegression

    slow = LogisticRegression(C=3.0, l1_ratio=0.5, solver="saga", max_iter=1000, random_state=4)
    slow.fit(lr_design(train.x, train.a, 10), (train.r > 0).astype(int))
    xs, actions = all_actions(data.test.x, 10)
    expected = slow.predict_proba(lr_design(xs, actions, 10))[:, 1].reshape(-1, 10)
    assert np.allclose(model.predict(data.test.x), expected, atol=1e-10)
    assert np.array_equal(rf_design_all(data.test.x, 10), rf_design(xs, actions, 10))


def test_policy_space_samples_table_2_and_traces_inactive_settings_as_minus_one():
    import optuna

    space = PolicySpace()
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(40):
        params = space.suggest(study.ask())
        row = dict(zip(space.names, space.encode(params), strict=True))
        assert 0.01 <= row["beta"] <= 100
        if params["model"] == "lr":
            assert row["model"] == 0 and 1e-3 <= row["C"] <= 1e3 and row["max_depth"] == -1
        else:
            assert row["model"] == 1 and 2 <= row["max_depth"] <= 32 and row["C"] == -1
        seen.add(params["model"])
    assert seen == {"lr", "rf"}


def test_repeated_rows_fitted_once_with_weights_give_the_same_model():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(5)
    x = np.eye(4)[rng.integers(0, 4, 600)]  # categorical contexts: many repeated rows
    a = rng.integers(0, 3, 600)
    r = (rng.random(600) < 0.2 + 0.1 * a).astype(float)
    model = fit_logistic(x, a, r, 3, C=2.0, l1_ratio=0.0, solver="lbfgs", tol=1e-10)
    slow = LogisticRegression(C=2.0, solver="lbfgs", max_iter=1000, tol=1e-10)
    slow.fit(lr_design(x, a, 3), r.astype(int))
    xs, actions = all_actions(np.eye(4), 3)
    expected = slow.predict_proba(lr_design(xs, actions, 3))[:, 1].reshape(4, 3)
    assert np.allclose(model.predict(np.eye(4)), expected, atol=1e-6)


def test_distinct_contexts_rebuild_every_row():
    from sweeper_tasks.opl_hpo.cell import distinct

    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [2.0, 2.0]])
    unique, rows = distinct(x)
    assert len(unique) == 3 and np.array_equal(unique[rows], x)
    same, identity = distinct(x[[0, 1, 4]])
    assert np.array_equal(same, x[[0, 1, 4]]) and np.array_equal(identity, [0, 1, 2])
