"""003 Appendix A.2's rate check (tasks/bandit_tuning/lipschitz_check.py)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from sweeper.grid import cell_config
from sweeper_tasks.bandit_tuning import lipschitz_check
from sweeper_tasks.bandit_tuning.algorithms.lints import LinTS
from sweeper_tasks.bandit_tuning.algorithms.linucb import LinUCB
from sweeper_tasks.bandit_tuning.cell import run_cell


def _trained(cls, seed: int = 0):
    rng = np.random.default_rng(seed)
    algorithm = cls(norm_bound=1.0)
    algorithm.reset(6, 100, np.random.default_rng(seed + 1))
    hp = algorithm.theoretical(1)
    for _ in range(8):
        x = rng.uniform(-0.4, 0.4, 6)
        algorithm.update(x, float(x.sum() + rng.normal(0, 0.5)), hp, 1)
    return algorithm, hp, rng.uniform(-0.4, 0.4, (60, 6))


@pytest.mark.parametrize("cls", [LinUCB, LinTS])
def test_arms_for_rates_equal_select_one_rate_at_a_time(cls):
    """The vectorised fast path against ``select`` per rate from the same state (LinTS: the
    generator rewound to the same draw each time)."""
    algorithm, hp, features = _trained(cls)
    rates = np.round(0.3 + 0.15 * np.arange(59), 10)
    start = copy.deepcopy(algorithm.rng.bit_generator.state)
    fast = algorithm.arms_for_rates(features, hp, rates)
    slow = []
    for rate in rates:
        algorithm.rng.bit_generator.state = copy.deepcopy(start)
        slow.append(algorithm.select(features, {**hp, "exploration_rate": rate}, 1))
    assert fast.tolist() == slow
    assert len(set(slow)) > 1  # the rates do pull different arms here


def test_centred_group_means_hand_worked():
    # 5 rounds x 2 rates, groups of 2 (the fifth round is dropped)
    rewards = np.array([[1.0, 0.0], [3.0, 2.0], [0.0, 0.0], [2.0, 4.0], [9.0, 9.0]])
    groups = lipschitz_check.centred_group_means(rewards, 2)
    # group means [2, 1] and [1, 2]; centred: [0.5, -0.5] and [-0.5, 0.5]
    np.testing.assert_allclose(groups, [[0.5, -0.5], [-0.5, 0.5]])
    with pytest.raises(ValueError, match="group_rounds"):
        lipschitz_check.centred_group_means(rewards[:3], 2)


def test_check_rates_is_a003s_grid():
    rates = lipschitz_check.check_rates({"first": 0.3, "last": 9.0, "step": 0.15})
    assert len(rates) == 59 and rates[0] == 0.3 and rates[-1] == 9.0 and rates[1] == 0.45


def _config(composer, *overrides: str) -> dict:
    return cell_config(
        composer(["+exp=lipschitz_check", "horizon=400", "seed=1", "tuner=cdt", *overrides])
    )


@pytest.mark.parametrize("algorithm", ["linucb", "lints"])
def test_the_check_leaves_the_cdt_run_unchanged(composer, algorithm):
    """The probe pulls the arm ``select`` would: the regret equals the plain cell's."""
    config = _config(composer, f"algorithm={algorithm}", "check.rate=4.5")
    checked = lipschitz_check.run_cell(config)
    plain = run_cell(config)
    np.testing.assert_array_equal(checked["curves"]["regret"], plain["curves"]["regret"])
    summary = checked["summary"]
    assert summary["groups"] == (400 - 200) // 20
    assert 0 <= summary["lipschitz_slope"] <= summary["max_slope"]


@pytest.mark.e2e
def test_every_rate_sees_the_same_run_and_centring_sums_to_zero(composer):
    values = [
        lipschitz_check.run_cell(_config(composer, "algorithm=linucb", f"check.rate={rate}"))
        for rate in lipschitz_check.check_rates({"first": 0.3, "last": 9.0, "step": 0.15})
    ]
    assert len({v["summary"]["final_regret"] for v in values}) == 1
    assert len({v["summary"]["max_slope"] for v in values}) == 1
    assert abs(sum(v["summary"]["group_reward"] for v in values)) < 1e-12


def test_a_rate_off_the_grid_is_refused(composer):
    with pytest.raises(ValueError, match="check.rate"):
        lipschitz_check.validate(_config(composer, "algorithm=linucb", "check.rate=0.31"))
