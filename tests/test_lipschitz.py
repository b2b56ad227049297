"""The switching Lipschitz benchmark of 003 Appendix A.3: environment, cell, oracle hook."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper.grid import cell_config
from sweeper_tasks.bandit_tuning.environments.lipschitz import SwitchingLipschitz, sine, triangle
from sweeper_tasks.bandit_tuning.lipschitz_cell import run_cell

LIPSCHITZ = ["cell=sweeper_tasks.bandit_tuning.lipschitz_cell.run_cell", "dataset=lipschitz"]


def config(composer, *overrides: str) -> dict:
    return cell_config(composer([*LIPSCHITZ, "horizon=3000", *overrides]))


def test_families_peak_at_a_and_are_1_lipschitz():
    x = np.linspace(0, 1, 100001)
    for a in (0.05, 0.25, 0.45, 0.70, 0.95):
        for f, top in ((triangle, 0.9), (sine, 2 / (3 * math.pi))):
            values = f(x, a)
            assert x[np.argmax(values)] == pytest.approx(a, abs=1e-4)
            assert values.max() == pytest.approx(top, abs=1e-8)
            assert np.abs(np.diff(values)).max() <= (x[1] - x[0]) * (1 + 1e-9)


def test_layout_is_fixed_by_layout_seed_and_noise_by_the_cell_seed():
    env = SwitchingLipschitz(layout_seed=4)
    points, peaks = env.layout(90000)
    assert len(points) == 3 and np.all(np.diff(points) > 0) and 0 < points[0] < 90000
    assert len(set(peaks)) == 4 and set(peaks) <= {0.05, 0.25, 0.45, 0.70, 0.95}
    again, _ = SwitchingLipschitz(layout_seed=4).layout(90000)
    other, _ = SwitchingLipschitz(layout_seed=5).layout(90000)
    np.testing.assert_array_equal(points, again)
    assert not np.array_equal(points, other)
    draws = []
    for seed in (0, 1):
        env.reset(90000, np.random.default_rng(seed))
        np.testing.assert_array_equal(env.change_points, points)  # whatever the cell seed
        draws.append([env.reward(t, 0.5) - env.mean(t, 0.5) for t in range(1000)])
    assert not np.allclose(draws[0], draws[1])
    assert np.std(draws[0]) == pytest.approx(math.sqrt(0.1), rel=0.1)


def test_explicit_change_points_and_pieces():
    env = SwitchingLipschitz(change_points=[100, 250], peaks=[0.05, 0.95])
    env.reset(400, np.random.default_rng(0))
    assert [env.piece(t) for t in (0, 99, 100, 249, 250, 399)] == [0, 0, 1, 1, 2, 2]
    assert env.best_mean(0) == pytest.approx(0.9)
    with pytest.raises(ValueError, match="strictly increasing"):
        SwitchingLipschitz(change_points=[300, 200]).check(400)
    with pytest.raises(ValueError, match="do not fit"):
        SwitchingLipschitz(n_changes=5).check(4)
    with pytest.raises(ValueError, match="unknown Lipschitz family"):
        SwitchingLipschitz(family="square")


def test_cell_result_has_the_bandit_cell_shape(composer):
    result = run_cell(config(composer, "tuner=cdt", "tuner.warmup_rounds=0", "seed=2"))
    regret = result["curves"]["regret"]
    assert regret.shape == (3000,) and np.all(np.diff(regret) >= -1e-12)
    assert result["summary"]["final_regret"] == pytest.approx(regret[-1])
    assert result["summary"]["runtime_s"] > 0
    assert result["trace"]["names"] == ["x"]
    x = result["trace"]["values"][:, 0]
    assert np.all((x >= 0) & (x <= 1))
    assert "active_arms" in result["trace"] and "restarts" in result["trace"]
    assert result["params"]["change_points"].startswith("[")
    again = run_cell(config(composer, "tuner=cdt", "tuner.warmup_rounds=0", "seed=2"))
    np.testing.assert_array_equal(regret, again["curves"]["regret"])


def test_tuners_with_the_same_seed_face_the_same_noise(composer):
    """Common random numbers: Fixed at x and the reward curve differ only by f(x)."""
    a = run_cell(config(composer, "tuner=fixed", "tuner.value=0.3", "seed=5"))
    b = run_cell(config(composer, "tuner=fixed", "tuner.value=0.6", "seed=5"))
    noise_a = np.diff(a["curves"]["reward"], prepend=0) + np.diff(a["curves"]["regret"], prepend=0)
    noise_b = np.diff(b["curves"]["reward"], prepend=0) + np.diff(b["curves"]["regret"], prepend=0)
    np.testing.assert_allclose(noise_a, noise_b, atol=1e-12)  # reward + regret = best + noise


def test_only_the_oracle_learns_the_change_points(composer):
    overrides = ["dataset.change_points=[700,1500,2200]", "seed=0"]
    oracle = run_cell(config(composer, "tuner=oracle", *overrides))
    restarts = oracle["trace"]["restarts"]
    np.testing.assert_array_equal(np.flatnonzero(np.diff(restarts)) + 1, [700, 1500, 2200])
    zooming = run_cell(config(composer, "tuner=zooming", *overrides))
    assert np.nanmax(zooming["trace"]["restarts"]) == 0


def test_bad_lipschitz_configs_fail_before_running(composer):
    with pytest.raises(ValueError, match="outside the arm set"):
        run_cell(config(composer, "tuner=fixed", "tuner.value=2.0"))
    with pytest.raises(ValueError, match="must lie inside"):
        run_cell.validate(config(composer, "tuner=cdt", "space.interval=[0.1,5]"))
    with pytest.raises(ValueError, match="do not fit"):
        run_cell.validate(config(composer, "tuner=cdt", "dataset.n_changes=5000"))
    bandit = cell_config(composer(["tuner=cdt", "horizon=10"]))
    bandit["cell"] = "sweeper_tasks.bandit_tuning.lipschitz_cell.run_cell"
    with pytest.raises(ValueError, match="needs dataset=lipschitz"):
        run_cell.validate(bandit)


def test_peaks_in_the_given_order_when_not_shuffled():
    env = SwitchingLipschitz(
        change_points=[10, 20, 30], peaks=[0.95, 0.7, 0.05], shuffle_peaks=False
    )
    env.reset(40, np.random.default_rng(0))
    assert env.peaks.tolist() == [0.95, 0.7, 0.05, 0.95]  # cycles past the last peak
    assert env.best_mean(35) == pytest.approx(0.9) and env.mean(35, 0.95) == pytest.approx(0.9)
