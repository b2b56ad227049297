"""The online baselines of 004 Section 7.1.3: grid search, random search, BO, Hyperband."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor

from sweeper.grid import cell_config
from sweeper_tasks.bandit_tuning.cell import run_cell, validate
from sweeper_tasks.bandit_tuning.space import Hyperparameter
from sweeper_tasks.bandit_tuning.tuners.bayes_opt import BayesOpt
from sweeper_tasks.bandit_tuning.tuners.grid_search import GridSearch
from sweeper_tasks.bandit_tuning.tuners.hyperband import (
    Hyperband,
    default_max_resource,
    hyperband_brackets,
)
from sweeper_tasks.bandit_tuning.tuners.random_search import RandomSearch
from sweeper_tasks.bandit_tuning.tuners.sd2me import SD2ME

UNIT = [Hyperparameter("x", default=0.5, interval=(0.0, 1.0), candidates=(0.0, 1.0))]


def play(tuner, horizon, reward, seed=0, space=UNIT):
    """Run ``tuner`` alone for ``horizon`` rounds; ``reward(t, x)``; returns x per round."""
    tuner.reset(space, horizon, np.random.default_rng(seed), lambda t: {"x": 0.5})
    chosen = np.empty(horizon)
    for t in range(1, horizon + 1):
        chosen[t - 1] = tuner.propose(t)[space[0].name]
        tuner.observe(reward(t, chosen[t - 1]))
    return chosen


def test_grid_search_plays_ten_points_round_robin_then_the_best_mean():
    # hand-made rewards: point k (x = k/9) earns k on odd rounds and 0 on even ones, except
    # point 3, which earns 20 once (round 4)
    def reward(t, x):
        k = round(9 * x)
        return 20.0 if (k == 3 and t == 4) else (k if t % 2 else 0.0)

    x = play(GridSearch(), 40, reward)
    assert np.allclose(x[:20], np.tile(np.linspace(0, 1, 10), 2))
    # point k plays rounds k+1 and k+11 (the same parity): mean k for even k (odd rounds),
    # 0 for odd k, and (20 + 0)/2 = 10 for point 3, above the best even point's 8
    assert np.all(x[20:] == pytest.approx(3 / 9))


def test_grid_search_maps_the_points_into_the_hyperparameter_interval():
    space = [Hyperparameter("exploration_rate", interval=(0.1, 5.0))]
    tuner = GridSearch(n_points=10)
    tuner.reset(space, 20, np.random.default_rng(0), lambda t: {})
    values = [tuner.propose(t)["exploration_rate"] for t in range(1, 11)]
    assert np.allclose(values, np.linspace(0.1, 5.0, 10))


def test_random_search_points_come_from_the_seed():
    x = play(RandomSearch(), 60, lambda t, x: -abs(x - 0.3), seed=7)
    again = play(RandomSearch(), 60, lambda t, x: -abs(x - 0.3), seed=7)
    other = play(RandomSearch(), 60, lambda t, x: -abs(x - 0.3), seed=8)
    points = np.random.default_rng(7).random((10, 1))[:, 0]
    assert np.allclose(x[:30], np.tile(points, 3))
    assert np.array_equal(x, again) and not np.allclose(x[:10], other[:10])
    assert np.all(x[30:] == points[np.argmin(np.abs(points - 0.3))])


def test_hyperband_brackets_and_budgets_by_hand():
    # T = 1000: R = 1000 / (2 (ln 1000 + 1)^2) = 7.996, s_max = floor(log_3 7.996) = 1, B = 2R.
    # s = 1: n = ceil(2 * 3 / 2) = 3 with r = R/3 = 2.67 -> 2 rounds; keep 1 with 7 rounds.
    # s = 0: n = ceil(2 * 1 / 1) = 2 with r = R -> 7 rounds.
    assert default_max_resource(1000) == pytest.approx(1000 / (2 * (math.log(1000) + 1) ** 2))
    assert hyperband_brackets(default_max_resource(1000), 3) == [[(3, 2), (1, 7)], [(2, 7)]]
    # T = 10000: R = 47.96, s_max = 3, n = ceil(4 * 3^s / (s + 1)) = 27, 12, 6, 4
    assert hyperband_brackets(default_max_resource(10000), 3) == [
        [(27, 1), (9, 5), (3, 15), (1, 47)],
        [(12, 5), (4, 15), (1, 47)],
        [(6, 15), (2, 47)],
        [(4, 47)],
    ]


def test_hyperband_runs_successive_halving_online_then_its_best_full_evaluation():
    horizon, seed = 1000, 3
    x = play(Hyperband(), horizon, lambda t, x: -abs(x - 0.3), seed=seed)
    draws = np.random.default_rng(seed)
    first = draws.random((3, 1))[:, 0]
    # pass 1, bracket s = 1: three configurations two rounds each, the best for 7 rounds
    assert np.allclose(x[:6], np.repeat(first, 2))
    assert np.allclose(x[6:13], first[np.argmin(np.abs(first - 0.3))])
    # bracket s = 0: two fresh configurations, 7 rounds each; then Hyperband starts over
    assert np.allclose(x[13:27], np.repeat(draws.random((2, 1))[:, 0], 7))
    assert np.allclose(x[27:33], np.repeat(draws.random((3, 1))[:, 0], 2))
    # 27 rounds a pass: rounds 1..500 hold 18 passes and 14 rounds; the 7-round evaluations
    # finished by then are rounds 7..27 of each pass and 493..499
    position = np.arange(500) % 27
    full = np.concatenate([x[:486][position[:486] >= 6], x[492:499]])
    assert np.all(x[500:] == full[np.argmin(np.abs(full - 0.3))])


def test_bayes_opt_trains_on_the_first_tenth_then_plays_its_best_point():
    for kernel in ("se", "matern"):
        tuner = BayesOpt(kernel=kernel, n_candidates=101)
        x = play(tuner, 300, lambda t, x: 1.0 - abs(x - 0.3), seed=1)
        assert len(np.unique(x[:30])) > 3 and np.all(x[30:] == x[30])
        assert tuner.counts.sum() == 30 and abs(x[30] - 0.3) <= 0.1


def test_bayes_opt_aggregated_posterior_equals_the_gp_on_every_observation():
    tuner = BayesOpt(kernel="matern", n_candidates=21)
    tuner.reset(UNIT, 1000, np.random.default_rng(0), lambda t: {})
    tuner.next_optimisation = 10**9  # hold the kernel: compare the posteriors alone
    rng = np.random.default_rng(5)
    xs, ys = [], []
    for t in range(1, 41):
        tuner.propose(t)
        y = 1.0 - abs(tuner.candidates[tuner.last, 0] - 0.6) + 0.2 * rng.standard_normal()
        xs.append(tuner.candidates[tuner.last])
        ys.append(y)
        tuner.observe(y)
    xs, ys = np.array(xs), np.array(ys)
    played = np.unique(xs[:, 0])
    assert len(played) < len(xs)  # some candidates repeat: the aggregation is exercised
    offset = np.mean([ys[xs[:, 0] == p].mean() for p in played])
    raw = GaussianProcessRegressor(tuner.kernel, alpha=tuner.noise_variance(), optimizer=None)
    raw.fit(xs, ys - offset)
    mean, sd = raw.predict(tuner.candidates, return_std=True)
    assert np.allclose(tuner.mean, mean + offset, atol=1e-8)
    assert np.allclose(tuner.sd, sd, atol=1e-8)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Hyperband(eta=1.0), "eta must be > 1"),
        (lambda: Hyperband(max_resource=0.5), "max_resource"),
        (lambda: BayesOpt(kernel="rq"), "unknown kernel"),
        (lambda: BayesOpt(train_fraction=0.0), "train_fraction"),
        (lambda: GridSearch(explore_fraction=1.5), "explore_fraction"),
        (lambda: RandomSearch(n_points=0), "n_points"),
        (lambda: SD2ME(expected_changes=0.5), "at least 1"),
    ],
)
def test_bad_settings_fail_in_the_constructor(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize("tuner", ["grid_search", "random_search", "bayes_opt", "hyperband"])
def test_each_baseline_tunes_a_bandit_algorithm_inside_its_interval(composer, tuner):
    overrides = [f"tuner={tuner}", "algorithm=linucb", "dataset=simulation", "horizon=200"]
    config = cell_config(composer(overrides + ["space.interval=[0.1,5.0]"]))
    validate(config)
    result = run_cell(config)
    values = result["trace"]["values"][:, 0]
    assert np.all((values >= 0.1) & (values <= 5.0)) and len(np.unique(values)) > 1
    assert np.all(values[100:] == values[-1])  # every baseline has committed by T/2
