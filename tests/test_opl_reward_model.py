"""Where DR's reward model q is fitted (``DR.reward_model``): each placement's q depends on
the rewards of its own data and on no others'."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from sweeper_tasks.opl_hpo.cell import validate
from sweeper_tasks.opl_hpo.data.synthetic import SyntheticLoggedData
from sweeper_tasks.opl_hpo.estimators import DR
from tests.test_opl_procedures import BASELINE, synthetic_config

N = 400


@pytest.fixture(scope="module")
def data():
    generator = SyntheticLoggedData(beta0=3.0, n_train=N, n_val=N, n_test=10, n_reward=N)
    return generator.generate(np.random.default_rng(1))


def flip(split, rows=slice(None)):
    """The split with the rewards of ``rows`` flipped (0 <-> 1)."""
    r = split.r.copy()
    r[rows] = 1.0 - r[rows]
    return replace(split, r=r)


def q_of(placement, data):
    return DR(reward_model=placement).fit(data).q


def changed(before, after):
    return not np.allclose(before, after, rtol=0, atol=1e-9)


def test_q_on_train_depends_on_d_tr_only(data):
    q = q_of("train", data)
    assert changed(q, q_of("train", replace(data, train=flip(data.train))))
    assert not changed(q, q_of("train", replace(data, val=flip(data.val))))
    assert not changed(q, q_of("train", replace(data, reward_log=flip(data.reward_log))))


def test_cross_fitted_q_never_sees_its_own_rows_rewards(data):
    q = q_of("cross_fit", data)
    fold0 = np.arange(N) % 2 == 0
    own = q_of("cross_fit", replace(data, val=flip(data.val, fold0)))
    # q at fold 0 comes from fold 1's rows: flipping fold 0's rewards leaves it unchanged ...
    assert not changed(q[fold0], own[fold0])
    # ... and moves q at fold 1, which fold 0's rows fitted
    assert changed(q[~fold0], own[~fold0])
    assert not changed(q, q_of("cross_fit", replace(data, train=flip(data.train))))


def test_q_on_a_separate_log_depends_on_that_log_only(data):
    q = q_of("separate", data)
    assert changed(q, q_of("separate", replace(data, reward_log=flip(data.reward_log))))
    assert not changed(q, q_of("separate", replace(data, train=flip(data.train))))
    assert not changed(q, q_of("separate", replace(data, val=flip(data.val))))


def test_the_separate_log_leaves_the_other_splits_unchanged():
    rng = np.random.default_rng
    without = SyntheticLoggedData(n_reward=0).generate(rng(2))
    with_log = SyntheticLoggedData(n_reward=500).generate(rng(2))
    assert without.reward_log is None and with_log.reward_log.n == 500
    for name in ("x", "a", "r"):
        assert np.array_equal(getattr(without.val, name), getattr(with_log.val, name))
        assert np.array_equal(getattr(without.train, name), getattr(with_log.train, name))
    assert np.array_equal(without.test.x, with_log.test.x)


def test_a_separate_log_that_is_not_drawn_is_refused_before_the_sweep():
    config = dict(synthetic_config(BASELINE))
    config["estimator"] = {
        "_target_": "sweeper_tasks.opl_hpo.estimators.DR",
        "name": "dr_separate",
        "reward_model": "separate",
    }
    config["logged_data"] = {**config["logged_data"], "n_reward": 0}
    with pytest.raises(ValueError, match="separate log"):
        validate(config)


def test_unknown_placement_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="train, cross_fit, separate"):
        DR(reward_model="val")
