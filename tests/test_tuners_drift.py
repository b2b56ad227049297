"""SD²ME and AD²ME (004 Algorithms 1 and 2): dynamic mean, parameter formulas, covering."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper_tasks.bandit_tuning.space import Hyperparameter
from sweeper_tasks.bandit_tuning.tuners.ad2me import AD2ME, AdaptiveDiscretization, ad2me_settings
from sweeper_tasks.bandit_tuning.tuners.dynamic_mean import DynamicMean
from sweeper_tasks.bandit_tuning.tuners.sd2me import SD2ME, sd2me_settings


def theory(t: int) -> dict[str, float]:
    return {"x": 0.5, "y": 0.5}


def naive_estimates(pulls, rewards, n_arms, weight):
    """Eq. 3 straight from the definition: weights w_t(s) over the whole history."""
    t = len(pulls) + 1
    w = np.array([weight(t, s) for s in range(1, t)])
    pulls, rewards = np.asarray(pulls), np.asarray(rewards)
    counts = np.array([w[pulls == a].sum() for a in range(n_arms)])
    sums = np.array([(w * rewards)[pulls == a].sum() for a in range(n_arms)])
    return counts, sums, w.sum()


@pytest.mark.parametrize("drop", ["hard", "soft"])
def test_online_dynamic_mean_matches_the_definition(drop):
    """Remark 4.1's O(1) updates against Eq. 3-5 recomputed over the whole history."""
    window, discount = 7, 0.9
    weight = (
        (lambda t, s: 1.0 if s >= t - window else 0.0)
        if drop == "hard"
        else (lambda t, s: discount ** (t - s - 1))
    )
    rng = np.random.default_rng(0)
    estimator = DynamicMean(drop, window=window, discount=discount)
    for _ in range(4):
        estimator.add_arm()
    pulls, rewards = [], []
    for _ in range(60):
        arm, reward = int(rng.integers(4)), float(rng.random())
        estimator.record(arm, reward)
        pulls.append(arm)
        rewards.append(reward)
        counts, sums, total = naive_estimates(pulls, rewards, 4, weight)
        np.testing.assert_allclose(estimator.counts[:4], counts, atol=1e-9)
        np.testing.assert_allclose(estimator.sums[:4], sums, atol=1e-9)
        assert estimator.total == pytest.approx(total)
        with np.errstate(invalid="ignore", divide="ignore"):
            expected = np.where(counts > 0, sums / np.maximum(counts, 1e-300), np.inf)
        np.testing.assert_allclose(estimator.means(), expected, atol=1e-9)


def test_hard_drop_keeps_exactly_the_last_lambda_rounds():
    estimator = DynamicMean("hard", window=5)
    for _ in range(3):
        estimator.add_arm()
    for arm in [0, 0, 1, 2, 2, 2, 1, 1]:
        estimator.record(arm, 1.0)
    # The window holds the last 5 pulls: 2, 2, 2, 1, 1 -> arm 0 dropped out entirely.
    np.testing.assert_array_equal(estimator.counts[:3], [0, 2, 3])
    assert estimator.total == 5
    assert estimator.means()[0] == np.inf  # 0/0 = +inf (004 footnote 2)


def test_sd2me_parameters_follow_theorem_4_1():
    # T / Gamma = 16: (T/Gamma)^(3/4) = 8.
    settings = sd2me_settings(1600, 100, "hard")
    assert settings["window"] == math.floor(6**0.25 * 8) == 12
    assert settings["discount"] == pytest.approx(1 - 6**-0.25 / 8)
    assert settings["resolution"] == pytest.approx((6 / 12) ** (1 / 3))
    soft = sd2me_settings(1600, 100, "soft")
    assert soft["resolution"] == pytest.approx((6 * 6**-0.25 / 8) ** (1 / 3))
    tuner = SD2ME(drop="hard", expected_changes=10)
    tuner.reset([Hyperparameter("x", interval=(0.0, 1.0))], 14000, np.random.default_rng(0), theory)
    rho = tuner.learners[0].resolution
    np.testing.assert_allclose(tuner.learners[0].arms, rho * np.arange(1, math.floor(1 / rho) + 1))


def test_ad2me_parameters_follow_theorem_4_2():
    # T / (3 Gamma) = 16.
    settings = ad2me_settings(4800, 100)
    assert settings["window"] == 16
    assert settings["discount"] == pytest.approx(1 - (1 / 16) ** 0.75) == 0.875


def test_sd2me_tracks_a_switch():
    space = [Hyperparameter("x", interval=(0.0, 1.0))]
    tuner = SD2ME(drop="hard", expected_changes=2)
    tuner.reset(space, 6000, np.random.default_rng(0), theory)
    rng = np.random.default_rng(1)
    picks = []
    for t in range(1, 6001):
        x = tuner.propose(t)["x"]
        peak = 0.2 if t <= 3000 else 0.8
        tuner.observe(0.9 - abs(x - peak) + 0.1 * rng.standard_normal())
        picks.append(x)
    picks = np.array(picks)
    assert abs(np.median(picks[2000:3000]) - 0.2) < 0.2
    assert abs(np.median(picks[5000:]) - 0.8) < 0.2


@pytest.mark.parametrize("drop", ["hard", "soft"])
def test_ad2me_keeps_0_1_covered_every_round(drop):
    """Eq. 10 after the activation step of every round, on a grid and exactly."""
    learner = AdaptiveDiscretization(10**6, 1, drop, 0.1, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    fine = np.linspace(0, 1, 2001)
    grew = 0
    for t in range(1, 3001):
        x = learner.select()
        xi = learner.widths(learner.t)
        pos = learner.positions[: learner.n_arms]
        inside = np.abs(fine[:, None] - pos[None, :]) <= xi[None, :]
        assert inside.any(axis=1).all(), f"[0, 1] not covered at round {t}"
        assert learner.uncovered_point(learner.t) is None
        learner.update(0.8 - abs(x - 0.3) + 0.1 * rng.standard_normal())
        grew = max(grew, learner.n_arms)
    assert grew > 3


def test_ad2me_new_arm_is_pulled_first_and_lands_in_the_gap():
    learner = AdaptiveDiscretization(10**6, 1, "hard", 0.1, np.random.default_rng(0))
    assert learner.select() == 0.5  # round 1: [0, 1] is uncovered, activate and pull
    learner.update(0.4)
    for _ in range(2000):
        before = learner.n_arms
        x = learner.select()
        if learner.n_arms > before:
            t = learner.t
            xi = learner.widths(t)[:before]
            pos = learner.positions[:before]
            assert not np.any(np.abs(x - pos) <= xi)  # the new arm was uncovered
            assert x == learner.positions[before]  # and it is pulled at once (xi = +inf)
        learner.update(0.4)
    assert learner.n_arms > 1


def test_ad2me_one_instance_per_hyperparameter():
    space = [Hyperparameter("x", interval=(0.0, 1.0)), Hyperparameter("y", interval=(1.0, 3.0))]
    tuner = AD2ME(drop="soft")
    tuner.reset(space, 2000, np.random.default_rng(0), theory)
    assert len(tuner.learners) == 2
    for t in range(1, 500):
        values = tuner.propose(t)
        assert 1.0 <= values["y"] <= 3.0
        tuner.observe(1 - abs(values["x"] - 0.5) - abs(values["y"] - 2))
    state = tuner.state()
    assert set(state) == {"active_arms.x", "active_arms.y"}
    assert tuner.learners[0].t == tuner.learners[1].t == 499


def test_bad_drop_settings_fail_early():
    with pytest.raises(ValueError, match="unknown drop"):
        AD2ME(drop="medium")
    with pytest.raises(ValueError, match="Gamma"):
        SD2ME(expected_changes=0)
    with pytest.raises(ValueError, match="delta"):
        AD2ME(failure_probability=1.5)
    with pytest.raises(ValueError, match="window"):
        DynamicMean("hard", window=0)
