"""Simulated datasets (003 Section 5, Appendix A.1/A.2; 002 Section 6) and the dataset configs."""

from __future__ import annotations

import numpy as np
import pytest

from sweeper.grid import cell_config, group_options
from sweeper_tasks.bandit_tuning.cell import run_cell
from sweeper_tasks.bandit_tuning.environments.base import sigmoid
from sweeper_tasks.bandit_tuning.environments.simulation import (
    Simulation,
    uniform_block,
    uniform_in_ball,
)
from sweeper_tasks.bandit_tuning.seeding import environment_rng
from sweeper_tasks.building import build


def _rounds(env, rounds: int, model: str, seed: int = 0, name: str = "simulation"):
    """Features, means and (for every arm) rewards of the first ``rounds`` rounds."""
    env.reset(rounds, model, environment_rng(name, seed))
    out = []
    for t in range(rounds):
        features, means = env.observe(t)
        rewards = np.array([env.reward(a) for a in range(len(means))])
        out.append((features.copy(), means.copy(), rewards))
    return out


@pytest.mark.parametrize("model", ["linear", "logistic"])
def test_simulation_of_003_shapes_ranges_and_means(model):
    env = Simulation()
    rounds = _rounds(env, 300, model)
    bound = 1 / np.sqrt(25)
    assert np.all(np.abs(env.theta) <= bound)
    for features, means, _ in rounds:
        assert features.shape == (120, 25) and means.shape == (120,)
        assert np.all(np.abs(features) <= bound)
        assert np.all(np.linalg.norm(features, axis=1) <= 1.0)
        # The slow, obvious expected reward from the features the round showed.
        expected = features @ env.theta
        np.testing.assert_allclose(means, expected if model == "linear" else sigmoid(expected))
        if model == "logistic":
            assert np.all((means > 0) & (means < 1))
    # Features are fresh every round (not a fixed pool).
    assert not np.allclose(rounds[0][0], rounds[1][0])


def test_reward_noise_is_one_draw_per_round_whatever_the_arm():
    for _, means, rewards in _rounds(Simulation(), 50, "linear"):
        noise = rewards - means
        np.testing.assert_allclose(noise, noise[0], atol=1e-12)
    noise = [r[2][0] - r[1][0] for r in _rounds(Simulation(), 2000, "linear")]
    assert np.std(noise) == pytest.approx(0.5, rel=0.05)
    for _, means, rewards in _rounds(Simulation(), 200, "logistic"):
        assert set(np.unique(rewards)) <= {0.0, 1.0}
        # One uniform u per round: reward = [u < mean], so rewards are monotone in the mean.
        order = np.argsort(means)
        assert np.all(np.diff(rewards[order]) >= 0)


def test_bernoulli_rewards_have_the_expected_rate():
    rounds = _rounds(Simulation(n_arms=2), 5000, "logistic")
    means = np.array([m[0] for _, m, _ in rounds])
    clicks = np.array([r[0] for _, _, r in rounds])
    assert clicks.mean() == pytest.approx(means.mean(), abs=0.02)


def test_same_dataset_and_seed_give_identical_rounds_other_seeds_do_not():
    first = _rounds(Simulation(), 20, "linear", seed=3)
    second = _rounds(Simulation(), 20, "linear", seed=3)
    other_seed = _rounds(Simulation(), 20, "linear", seed=4)
    other_name = _rounds(Simulation(), 20, "linear", seed=3, name="simulation_grid")
    for a, b in zip(first, second, strict=True):
        for x, y in zip(a, b, strict=True):
            assert np.array_equal(x, y)
    assert not np.array_equal(first[0][0], other_seed[0][0])
    assert not np.array_equal(first[0][0], other_name[0][0])


def test_rounds_are_generated_in_blocks_not_all_at_once():
    env = Simulation(block_rounds=32)
    env.reset(14_000, "linear", np.random.default_rng(0))
    for t in range(70):
        env.observe(t)
    assert env._features.shape == (32, 120, 25)
    with pytest.raises(ValueError, match="in order"):
        env.observe(200)


@pytest.mark.parametrize("bound", [1 / np.sqrt(25), 1 / np.sqrt(10), 0.3, 1.0, 7.25])
def test_uniform_block_is_numpys_uniform_to_the_last_bit(bound):
    """The simulation's fast feature draw gives the bits of rng.uniform(-bound, bound), into
    a new array or a seed's slice of a batch's array, and leaves the generator where
    rng.uniform leaves it (later draws unchanged)."""
    fast, reference = np.random.default_rng(7), np.random.default_rng(7)
    for shape in [(256, 120, 25), (3, 5)]:
        batch = np.zeros((3, *shape))
        for out in (np.empty(shape), batch[1]):
            drawn = uniform_block(fast, bound, out)
            assert drawn is out
            expected = reference.uniform(-bound, bound, shape)
            np.testing.assert_array_equal(drawn.view(np.int64), expected.view(np.int64))
        assert not batch[0].any() and not batch[2].any()  # the other seeds' slices
    assert fast.random() == reference.random()


def test_ball_features_are_uniform_in_the_unit_ball():
    points = uniform_in_ball(np.random.default_rng(0), (40_000,), 10)
    norms = np.linalg.norm(points, axis=1)
    assert norms.max() <= 1.0
    # Uniform in the ball: ||x||^d is uniform on [0, 1]; directions are symmetric.
    assert np.mean(norms**10) == pytest.approx(0.5, abs=0.01)
    assert np.mean(norms**10 < 0.25) == pytest.approx(0.25, abs=0.01)
    np.testing.assert_allclose(points.mean(axis=0), 0.0, atol=0.01)


def test_appendix_a1_ball_variant():
    env = Simulation(n_features=10, n_arms=60, features="ball")
    rounds = _rounds(env, 20, "logistic")
    assert np.linalg.norm(env.theta) <= 1.0
    for features, means, _ in rounds:
        assert features.shape == (60, 10)
        assert np.all(np.linalg.norm(features, axis=1) <= 1.0)
        np.testing.assert_allclose(means, sigmoid(features @ env.theta))


def test_syndicated_variant_maps_linear_means_into_unit_interval_and_widens_logistic_features():
    env = Simulation(
        n_features=10,
        n_arms=100,
        noise_sd=0.1,
        logistic_feature_bound=1.0,
        linear_offset=0.5,
        linear_scale=0.5,
    )
    for features, means, _ in _rounds(env, 50, "linear"):
        assert np.all(np.abs(features) <= 1 / np.sqrt(10))
        np.testing.assert_allclose(means, 0.5 + 0.5 * features @ env.theta)
        assert np.all((means >= 0) & (means <= 1))
    logistic = _rounds(env, 50, "logistic")
    features = np.concatenate([f for f, _, _ in logistic])
    assert np.abs(features).max() > 0.9 and np.abs(features).max() <= 1.0
    assert np.all(np.abs(env.theta) <= 1 / np.sqrt(10))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"features": "sphere"}, "features 'sphere' is unknown"),
        ({"feature_bound": -1.0}, "feature_bound must be positive"),
        ({"features": "ball", "feature_bound": 1.0}, "applies to features: cube only"),
        ({"n_arms": 1}, "n_arms >= 2"),
        ({"noise_sd": -0.1}, "noise_sd must be non-negative"),
        ({"reward_model": "probit"}, "reward_model 'probit' is unknown"),
    ],
)
def test_bad_simulation_settings_are_refused_with_a_reason(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Simulation(**kwargs)


def test_every_dataset_config_composes_and_builds(composer):
    names = group_options("dataset")
    assert {"simulation", "movielens", "yahoo"} <= set(names)
    # lipschitz, movielens_retrieval: the tuner-only cell's environments (no features)
    for name in (n for n in names if n not in ("lipschitz", "movielens_retrieval")):
        spec = composer([f"dataset={name}"]).dataset
        assert spec.name == name, f"conf/dataset/{name}.yaml should set name: {name}"
        environment = build(spec)
        assert environment.n_features >= 1


@pytest.mark.parametrize(
    ("dataset", "d", "k", "noise"),
    [
        ("simulation", 25, 120, 0.5),  # N(0, 0.25): the papers' N(m, v) is a variance
        ("simulation_grid", 10, 120, 0.5**0.5),  # N(x'theta*, 0.5)
        ("simulation_lipschitz_check", 6, 60, 0.5**0.5),
        ("simulation_syndicated", 10, 100, 0.1**0.5),  # 002: N(mu, 0.1)
    ],
)
def test_simulation_configs_hold_the_papers_settings(composer, dataset, d, k, noise):
    env = build(composer([f"dataset={dataset}"]).dataset)
    assert (env.n_features, env.n_arms, env.noise_sd) == (d, k, noise)


@pytest.mark.parametrize("dataset", ["simulation", "simulation_grid", "simulation_syndicated"])
def test_cells_run_on_every_simulation_variant(composer, dataset):
    config = cell_config(composer([f"dataset={dataset}", "horizon=200", "seed=2"]))
    regret = run_cell(config)["curves"]["regret"]
    assert regret.shape == (200,) and np.all(np.isfinite(regret))
    assert regret[0] >= 0 and np.all(np.diff(regret) >= -1e-12)


@pytest.mark.parametrize("model", ["linear", "logistic"])
def test_optimal_arm_and_regret_come_from_the_expected_rewards(model):
    """Pulling argmax of the means has zero regret and collects the best means on average."""
    env = Simulation(n_arms=10)
    rounds = _rounds(env, 4000, model, seed=5)
    best = np.array([m.max() for _, m, _ in rounds])
    optimal_rewards = np.array([r[np.argmax(m)] for _, m, r in rounds])
    first_arm_regret = np.sum([m.max() - m[0] for _, m, _ in rounds])
    assert first_arm_regret > 0
    # Realised rewards of the optimal policy average the best expected rewards.
    assert optimal_rewards.mean() == pytest.approx(best.mean(), abs=0.03)
    # No arm beats the argmax on expected reward (the regret of any pull is >= 0).
    assert all(np.all(m.max() - m >= 0) for _, m, _ in rounds)
