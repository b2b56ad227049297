"""The tuners against their algorithm boxes, line by line (issue #16, item 1).

000/003 Algorithm 1 lines 3-9 (epoch start, removal before one activation per round),
003 Algorithm 3 line 9 (EXP3 gets the top epoch's summed reward) and 004 Algorithm 2 line 6
(AD²ME's covering holds for any widths). Each test hand-works the paper's step.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper_tasks.bandit_tuning.space import Hyperparameter
from sweeper_tasks.bandit_tuning.tuners.ad2me import AdaptiveDiscretization
from sweeper_tasks.bandit_tuning.tuners.zooming_core import CLIP, ZoomingCore
from sweeper_tasks.bandit_tuning.tuners.zooming_ts_double_restart import ZoomingTSDoubleRestart

ALPHA = Hyperparameter("exploration_rate", interval=(0.0, 1.0))


def theory(t: int) -> dict[str, float]:
    return {"exploration_rate": 1.0}


# --- Algorithm 1 line 3: an epoch starts with n_1(v) = 1 and f_hat = 0 ------------------------
def test_epoch_start_is_one_pseudo_observation_of_reward_zero_hand_worked():
    """T = 1000, tau0 = 0.05: r(1) = sqrt(13/2 * 0.0025 * ln 1000) = 0.3350 < 1/2, so line 3's
    cover J is the two centres 1/4 and 3/4 (cubes of side 1/2 <= 2 r(1)), each with n = 1,
    f_hat = 0. Round 1 has no removal and nothing to activate: it pulls argmax of
    0 + s0 max(1/sqrt(2 pi), Z_v), drawn from the core's generator; no arm is force-pulled.
    The update with y = 0.8 gives n = 2, f_hat = (0 * 1 + 0.8) / 2 = 0.4 (line 12)."""
    tau0, T = 0.05, 1000
    r1 = math.sqrt(13 / 2 * tau0**2 * math.log(T))
    assert r1 == pytest.approx(0.33504, abs=1e-5)
    core = ZoomingCore(1, T, np.random.default_rng(3), tau0=tau0)
    assert core.active_centers[:, 0].tolist() == [0.25, 0.75]
    assert core.counts[:2].tolist() == [1.0, 1.0] and core.means[:2].tolist() == [0.0, 0.0]
    np.testing.assert_allclose(core.radii(), [r1, r1])
    z = np.maximum(CLIP, np.random.default_rng(3).standard_normal(2))  # the same draws
    expected = int(np.argmax(core.ts_scale * z))
    assert not core.remove_dominated()
    point = core.select()
    assert point[0] == [0.25, 0.75][expected] and core.m == 2
    core.update(0.8)
    assert core.counts[expected] == 2 and core.means[expected] == pytest.approx(0.4)
    assert core.radii()[expected] == pytest.approx(r1 / math.sqrt(2))


def test_released_option_starts_unpulled_and_pulls_the_start_point_first():
    core = ZoomingCore(1, 1000, np.random.default_rng(0), tau0=0.05, pseudo_observation=False)
    assert core.counts[:2].tolist() == [0.0, 0.0]
    assert core.select()[0] == 0.25  # force-pulled before any draw
    core.update(0.8)
    assert core.means[0] == 0.8 and core.counts[0] == 1


# --- Algorithm 1 lines 4-9: removal first, then at most one activation, pulled at once ------
def test_removal_comes_before_the_one_activation_of_the_round():
    """Arms 0.2 (n=400, f=0.9) and 0.6 (n=400, f=0): 0.6 is dominated. Both radii are small,
    so [0, 1] has gaps. One round: line 5 removes 0.6 and B(0.6, r); line 8 activates ONE
    point of A_0 outside every active ball (so not inside the removed ball) and pulls it."""
    core = ZoomingCore(1, 1000, np.random.default_rng(0), tau0=0.1)
    core.m = 0
    for x, f in ((0.2, 0.9), (0.6, 0.0)):
        core.set_statistics(core._activate(np.array([x])), 400, f)
    r = core.radii()[1]
    assert core.remove_dominated()
    assert core.active_centers[:, 0].tolist() == [0.2]
    point = core.select()
    assert core.m == 2 and core.last == 1 and core.counts[1] == 0
    assert abs(point[0] - 0.6) > r  # not in the removed ball
    assert abs(point[0] - 0.2) > core.radii()[0]  # not in the remaining active ball
    core.update(0.5)
    for _ in range(30):  # every later round: at most one activation, always the pulled arm
        core.remove_dominated()
        m = core.m
        point = core.select()
        assert core.m - m in (0, 1)
        if core.m == m + 1:
            assert core.last == m and core.in_remaining(point[None])[0]
        core.update(0.5)


# --- Algorithm 3 line 9: EXP3 receives the epoch's summed reward --------------------------------
def test_double_restart_feeds_exp3_the_summed_reward_over_h0():
    tuner = ZoomingTSDoubleRestart(warmup_rounds=0)
    tuner.reset([ALPHA], 1000, np.random.default_rng(0), theory)
    H0 = tuner.H0
    assert H0 == math.ceil(1000 ** (3 / 5))  # p_u = p = 1: T^((p+2)/(p+4))
    rewards = np.random.default_rng(1).uniform(0, 1, H0)
    for y in rewards:
        tuner.propose(0)
        tuner.observe(float(y))
    pulled = tuner.exp3.last
    p = tuner.exp3.probabilities[pulled]
    n = tuner.exp3.n_arms
    before = tuner.exp3.log_weights.copy()
    tuner.propose(0)  # the next top epoch: line 9 updates EXP3 first
    moved = tuner.exp3.log_weights - before
    # w_j <- w_j exp(alpha/|J| * r_j), r_j = (sum_k Y_k / Q) / p_j with Q = H0
    assert moved[pulled] == pytest.approx(tuner.exp3.beta / n * rewards.sum() / H0 / p)
    assert np.count_nonzero(moved) == 1
    # For a full top epoch sum / H0 is the epoch's mean; they differ only for the last,
    # shorter top epoch, whose update Algorithm 3 never uses (the loop ends with it).


# --- 004 Algorithm 2 line 6: covering with unequal widths --------------------------------------
def test_ad2me_covering_holds_for_unequal_widths():
    """Arms 0.1 (xi = 0.003) and 0.5 (xi = +inf: fresh). 0.0485 lies in 0.5's interval,
    so [0, 1] is covered; sorting arms by position reported 0.0485 as uncovered."""
    learner = AdaptiveDiscretization(1000, 10.0, "hard", 0.1, np.random.default_rng(0))
    for x in (0.1, 0.5):
        learner.activate(x)
    learner.fresh[0] = False
    learner.estimator.counts[0] = 1e12  # a huge weight: a tiny interval around 0.1
    xi = learner.widths(5)
    assert xi[0] < 0.003 and math.isinf(xi[1])
    assert learner.uncovered_point(5) is None
    # with 0.5 narrow too, the true gaps are found, left of 0.1 first
    learner.fresh[1] = False
    learner.estimator.counts[1] = 1e12
    point = learner.uncovered_point(5)
    assert point is not None and point < 0.1 - learner.widths(5)[0]


@pytest.mark.parametrize("seed", range(5))
def test_ad2me_covering_agrees_with_a_fine_grid(seed):
    rng = np.random.default_rng(seed)
    learner = AdaptiveDiscretization(1000, 10.0, "hard", 0.1, rng)
    for x in rng.random(6):
        learner.activate(float(x))
    learner.fresh[:6] = rng.random(6) < 0.2
    learner.estimator.counts[:6] = 10.0 ** rng.uniform(0, 4, 6)
    xi = learner.widths(50)
    pos = learner.positions[:6]
    fine = np.linspace(0, 1, 20001)
    covered = (np.abs(fine[:, None] - pos[None]) <= xi[None]).any(axis=1)
    point = learner.uncovered_point(50)
    if covered.all():
        assert point is None
    else:
        assert point is not None and not (np.abs(point - pos) <= xi).any()
