"""Theory's S (issue #16, item 3): LinUCB's and LinTS's theoretical rate uses ||theta*||.

003 Section 3: alpha_1(t) = sigma sqrt(r log((1 + t/lambda)/delta)) + ||theta*|| sqrt(lambda);
002 Eq. 3 writes S for ||theta*||. ``norm_bound: null`` (the algorithms' configs) takes the
norm of the instance the cell drew; a number (1.0, the released run.py's ``thetan``) keeps it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper.grid import cell_config
from sweeper_tasks.bandit_tuning.algorithms.linucb import LinUCB
from sweeper_tasks.bandit_tuning.cell import run_cell, validate
from sweeper_tasks.bandit_tuning.seeding import environment_rng
from sweeper_tasks.building import build
from tests import data_fixtures

movielens_file = data_fixtures.movielens_file
factor_cache = data_fixtures.factor_cache


def _config(composer, *overrides: str) -> dict:
    return cell_config(composer(["horizon=200", "tuner=theory", *overrides]))


def _theta_norm_of_simulation(seed: int, d: int = 25) -> float:
    """003 Section 5's theta*, drawn here without the Simulation class: the first draw of the
    data set's stream, uniform in [-1/sqrt(d), 1/sqrt(d)]^d."""
    bound = 1.0 / math.sqrt(d)
    return float(np.linalg.norm(environment_rng("simulation", seed).uniform(-bound, bound, d)))


def _oful(t: np.ndarray, s: float, d: int = 25, sigma: float = 0.5, delta: float = 0.1):
    return sigma * np.sqrt(d * np.log((1.0 + t / 1.0) / delta)) + math.sqrt(1.0) * s


@pytest.mark.parametrize("algorithm", ["linucb", "lints"])
def test_theory_cell_uses_the_instance_norm_of_theta_star(composer, algorithm):
    seed = 3
    config = _config(composer, f"algorithm={algorithm}", f"seed={seed}")
    assert config["algorithm"]["norm_bound"] is None  # the configs' default: 003's S
    used = run_cell(config)["trace"]["values"][:, 0]
    s = _theta_norm_of_simulation(seed)
    assert 0.3 < s < 0.9 and abs(s - 1.0) > 0.1  # a norm that tells S = 1 apart
    np.testing.assert_allclose(used, _oful(np.arange(1, 201.0), s), rtol=1e-12)


def test_each_seed_gets_its_own_norm_and_a_number_keeps_s(composer):
    rates = {}
    for seed in (0, 1):
        config = _config(composer, "algorithm=linucb", f"seed={seed}")
        rates[seed] = run_cell(config)["trace"]["values"][0, 0]
    assert rates[0] - rates[1] == pytest.approx(
        _theta_norm_of_simulation(0) - _theta_norm_of_simulation(1), abs=1e-12
    )
    released = _config(composer, "algorithm=linucb", "seed=0", "algorithm.norm_bound=1.0")
    np.testing.assert_allclose(
        run_cell(released)["trace"]["values"][:, 0], _oful(np.arange(1, 201.0), 1.0), rtol=1e-12
    )


def test_movielens_hands_its_own_theta_norm(composer, movielens_file, factor_cache):
    """MovieLens' theta* is the mean of random users: its norm is what the rate adds."""
    config = _config(
        composer,
        "algorithm=linucb",
        "dataset=movielens",
        "seed=2",
        f"dataset.path={movielens_file}",
        f"dataset.cache_dir={factor_cache}",
    )
    environment = build(config["dataset"])
    environment.reset(10, "linear", environment_rng("movielens", 2))
    s = float(np.linalg.norm(environment.theta))
    used = run_cell(config)["trace"]["values"][:, 0]
    np.testing.assert_allclose(used, _oful(np.arange(1, 201.0), s, d=20), rtol=1e-12)


def test_null_norm_bound_needs_a_data_set_with_theta_star(composer, tmp_path):
    """A click log has no theta*: validate names the setting to fix, and a number runs."""
    start, pool = 1241136000, {101: (1.0, 0.2, 0.1, 0.3, 0.1, 0.3), 102: (1.0, 0.5, 0, 0, 0, 0.5)}
    lines = [data_fixtures.r6a_line(start + 300 * s, 101 + s % 2, s % 2, pool) for s in range(4)]
    data_fixtures.write_r6a(tmp_path / "R6" / "ydata-fp-td-clicks-v1_0.20090501.gz", lines)
    where = [f"dataset.path={tmp_path / 'R6'}", f"dataset.cache_dir={tmp_path}", "horizon=3"]
    with pytest.raises(ValueError, match="algorithm.norm_bound=1.0"):
        validate(_config(composer, "algorithm=linucb", "dataset=yahoo", *where))
    validate(
        _config(composer, "algorithm=linucb", "dataset=yahoo", *where, "algorithm.norm_bound=1")
    )


def test_unset_instance_norm_is_an_error_not_a_silent_default():
    algorithm = LinUCB(norm_bound=None)
    with pytest.raises(RuntimeError, match="set_parameter_norm"):
        algorithm.reset(5, 10, np.random.default_rng(0))
    with pytest.raises(TypeError):
        LinUCB(norm_bound=1.0).set_parameter_norm(0.5)
