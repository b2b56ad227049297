"""The retrieval-threshold environment of 004 Section 7.1.2 on MovieLens 100K."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sweeper.grid import cell_config
from sweeper_tasks.bandit_tuning.environments.movielens_data import movielens_factors, read_ratings
from sweeper_tasks.bandit_tuning.environments.movielens_retrieval import (
    MovieLensRetrieval,
    f_score,
    most_frequent,
)
from sweeper_tasks.bandit_tuning.lipschitz_cell import run_cell, validate
from tests import data_fixtures

movielens_file = data_fixtures.movielens_file
factor_cache = data_fixtures.factor_cache


@pytest.fixture(scope="module")
def environment(movielens_file, factor_cache) -> MovieLensRetrieval:
    env = MovieLensRetrieval(path=str(movielens_file), cache_dir=str(factor_cache))
    env.reset(943, np.random.default_rng(0))
    return env


def test_f_score_of_one_user_by_hand():
    # A = {0.9 (liked), 0.5, 0.2 (liked), -0.1}; |A+| = 2.
    sims = np.array([0.9, 0.5, 0.2, -0.1])
    liked = np.array([True, False, True, False])
    # beta = 0.4 keeps {0.9, 0.5}: one liked; F = 2 * 1 / (2 + 2) = 0.5
    # beta = 0.0 keeps {0.9, 0.5, 0.2}: two liked; F = 2 * 2 / (2 + 3) = 0.8
    # beta = 0.95 keeps nothing: F = 0 / (2 + 0) = 0
    # beta = 0.9 keeps {0.9} (the threshold is inclusive): F = 2 / 3
    assert np.allclose(f_score(sims, liked, [0.4, 0.0, 0.95, 0.9]), [0.5, 0.8, 0.0, 2 / 3])
    # no liked movie and nothing kept: 0/0 counts as 0
    assert f_score(np.array([0.1]), np.array([False]), 0.5) == 0.0


def test_most_frequent_value_per_group_breaks_ties_to_the_smallest():
    values = np.array([5, 5, 3, 7, 7, 3, 2])
    groups = np.array([0, 0, 0, 1, 1, 1, 2])
    # group 0: 5 twice; group 1: 7 twice beats 3 once; group 2: 2
    assert most_frequent(values, groups, 3).tolist() == [5, 7, 2]
    assert most_frequent(np.array([4, 1]), np.array([0, 0]), 1).tolist() == [1]


def test_users_arrive_in_order_of_their_most_frequent_hour(environment, movielens_file):
    ratings = read_ratings(movielens_file)
    frame = pd.DataFrame({"user": ratings.users, "hour": (ratings.timestamps // 3600) % 24})
    counts = frame.groupby(["user", "hour"]).size().reset_index(name="n")
    counts = counts.sort_values(["user", "n", "hour"], ascending=[True, False, True])
    hour = counts.groupby("user")["hour"].first()
    expected = hour.reset_index().sort_values(["hour", "user"], kind="stable")["user"]
    assert environment.stream.tolist() == expected.tolist()
    hours = hour.to_numpy()[environment.stream]
    assert hours[0] == 0 and hours[-1] == 23 and np.all(np.diff(hours) >= 0)


def test_day_order_is_chronological(movielens_file, factor_cache):
    env = MovieLensRetrieval(path=str(movielens_file), cache_dir=str(factor_cache), order="day")
    env.reset(943, np.random.default_rng(0))
    days = env.data().key[env.stream]
    assert np.all(np.diff(days) >= 0) and days[-1] - days[0] > 150  # about seven months


def test_fast_f_matches_the_direct_formula_on_real_users(environment, movielens_file, factor_cache):
    ratings = read_ratings(movielens_file)
    factors = movielens_factors(str(movielens_file), str(factor_cache))
    betas = np.linspace(-0.05, 1.05, 221)
    for user in [0, 41, 404, 942]:
        rows = ratings.users == user
        u = factors.users[user]
        v = factors.movies[ratings.movies[rows]]
        sims = v @ u / (np.linalg.norm(v, axis=1) * np.linalg.norm(u))
        slow = f_score(sims, ratings.ratings[rows] >= 4, betas)
        assert np.allclose(environment.f(user, betas), slow)
        # F only changes at the user's similarities: the exact maximum over [0, 1] is at
        # one of them (or 0) and at least the maximum over any grid
        edges = np.concatenate([[0.0], np.clip(sims, 0.0, 1.0)])
        best = environment.best_per_user()[user]
        assert best == pytest.approx(f_score(sims, ratings.ratings[rows] >= 4, edges).max())
        assert best >= slow[(betas >= 0) & (betas <= 1)].max()


def test_rewards_are_f_of_the_round_user_and_the_skyline_bounds(environment):
    t = 500
    user = environment.user(t)
    assert environment.reward(t, 0.6) == pytest.approx(float(environment.f(user, 0.6)))
    assert environment.best_mean(t) >= environment.reward(t, 0.6)
    beta, total = environment.best_fixed()
    per_round = environment.params()["retrieval.per_round_best_cumulative_F"]
    assert 0.0 <= beta <= 1.0 and total <= per_round
    assert total >= environment.curve(np.arange(943), np.array([0.0, 0.5, 1.0])).max()


def test_a_horizon_longer_than_the_stream_is_refused_unless_passes_repeat_it(
    movielens_file, factor_cache
):
    env = MovieLensRetrieval(path=str(movielens_file), cache_dir=str(factor_cache))
    with pytest.raises(ValueError, match="longer than the user stream.*passes to at least 2"):
        env.check(944)
    twice = MovieLensRetrieval(path=str(movielens_file), cache_dir=str(factor_cache), passes=2)
    twice.reset(1886, np.random.default_rng(0))
    assert np.array_equal(twice.stream[:943], twice.stream[943:])


def _config(composer, movielens_file, factor_cache, *extra):
    overrides = [
        "cell=sweeper_tasks.bandit_tuning.lipschitz_cell.run_cell",
        "dataset=movielens_retrieval",
        f"dataset.path={movielens_file}",
        f"dataset.cache_dir={factor_cache}",
        *extra,
    ]
    return cell_config(composer(overrides))


def test_the_tuner_only_cell_runs_grid_search_on_the_thresholds(
    composer, movielens_file, factor_cache
):
    config = _config(composer, movielens_file, factor_cache, "tuner=grid_search", "horizon=400")
    validate(config)
    result = run_cell(config)
    x = result["trace"]["values"][:, 0]
    assert np.allclose(x[:10], np.linspace(0, 1, 10)) and np.all(x[200:] == x[200])
    regret = result["curves"]["regret"]
    assert regret.shape == (400,) and np.all(np.diff(regret) >= -1e-12)
    assert result["params"]["retrieval.stream_users"] == 943


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["tuner=grid_search", "horizon=1000"], "longer than the user stream"),
        (["tuner=grid_search", "horizon=100", "space.interval=[0.0,2.0]"], "inside it"),
        (["tuner=sd2me", "horizon=100", "tuner.expected_changes=0.5"], "Gamma-hat"),
        (["tuner=hyperband", "horizon=100", "tuner.eta=1"], "eta must be > 1"),
    ],
)
def test_bad_settings_fail_in_validate_before_any_cell(
    composer, movielens_file, factor_cache, extra, message
):
    with pytest.raises(ValueError, match=message):
        validate(_config(composer, movielens_file, factor_cache, *extra))
