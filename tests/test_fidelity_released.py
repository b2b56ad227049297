"""`cdt_released` against an independent slow port of the authors' released code.

The port re-states, in a plain loop, what ``linucb_auto`` (CDT_exp/algo/LinUCB.py) and
``auto_tuning`` / ``check_1d`` (CDT_exp/algo/zooming_ts_tuning.py) do at the repository's
HEAD d67bc02, written from reading them (no code copied): exp_time random pulls; one
centre drawn uniformly in [0.3, 0.7] with time = 1, rad = sqrt(c ln T), sd = sqrt(2c),
c = 13/2; the exploration rate is 4 x; each later round, if the intervals
[cen - rad, cen + rad] leave a gap in [0, 1] (left edge first, then right edge, then the first
inner gap, sorted by left end), a new centre at the gap's midpoint is added with time = 1,
mu = 0 and pulled; otherwise the centre maximising mu + sd is pulled, its time grows by
one and rad, sd shrink by sqrt((n - 1)/n); mu is the running mean of the observed rewards.
H = T (run.py's default): no restart. LinUCB keeps V^-1 by Sherman-Morrison.

The port runs on our instance (the cell's environment and its random streams: warm-up arms
from the cell's warm-up generator, the first centre from the tuner's generator), so arms and
regret must agree exactly. Two released details are not in `cdt_released` and are kept out
of the matched port: the unused normal draw of ``auto_tuning`` (it only advances the global
stream) and a stale theta_hat in the first tuned round (``linucb_auto`` never recomputes
theta_hat during its warm-up loop); the second is measured in distribution below.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper.grid import cell_config
from sweeper_tasks.bandit_tuning.cell import build_parts, run_cell
from sweeper_tasks.bandit_tuning.results import spec_name
from sweeper_tasks.bandit_tuning.seeding import agent_rngs, environment_rng


def released_gap(cen: list[float], rad: list[float]) -> float | None:
    """check_1d, re-stated: None when [0, 1] is covered, else the new centre."""
    intervals = sorted(([c - r, c + r] for c, r in zip(cen, rad, strict=True)), key=lambda i: i[0])
    if intervals[0][0] > 0:
        return intervals[0][0] / 2
    top = max(i[1] for i in intervals)
    if top < 1:
        return (top + 1) / 2
    end = intervals[0][1]
    for start, stop in intervals[1:]:
        if start > end:
            return (end + start) / 2
        end = max(end, stop)
    return None


def slow_released_linucb(
    config: dict, stale_theta: bool = False, fixed_rate: float | None = None
) -> tuple[np.ndarray, list]:
    """The port: cumulative regret and the explore rates used after the warm-up.

    ``fixed_rate``: plain LinUCB with that exploration rate from round 1 (no tuner), the
    released ``linucb_theoretical_explore`` with ``explore`` set, as its grid search runs it.
    """
    horizon, seed = int(config["horizon"]), int(config["seed"])
    _, _, environment = build_parts(config)
    _, tuner_rng, warmup_rng = agent_rngs(
        seed, spec_name(config["algorithm"]), spec_name(config["tuner"])
    )
    environment.reset(horizon, "linear", environment_rng(spec_name(config["dataset"]), seed))
    d = environment.n_features
    exp_time, c, T = (30 if fixed_rate is None else 0), 13 / 2, horizon
    b_inv = np.identity(d)
    xr = np.zeros(d)
    theta = np.zeros(d)
    regret = np.zeros(T)
    rates = []
    cen: list[float] = []
    time: list[int] = []
    rad: list[float] = []
    sd: list[float] = []
    mu: list[float] = []
    for t in range(T):
        features, means = environment.observe(t)
        if t < exp_time:
            pull = int(warmup_rng.integers(len(features)))
        elif fixed_rate is not None:
            rates.append(fixed_rate)
            scores = [
                float(x @ theta) + fixed_rate * math.sqrt(float(x @ b_inv @ x)) for x in features
            ]
            pull = int(np.argmax(scores))
        else:
            if t == exp_time:
                cen = [0.4 * float(tuner_rng.uniform()) + 0.3]
                time, rad, sd, mu = [1], [math.sqrt(c * math.log(T))], [math.sqrt(2 * c)], [0.0]
                ind = 0
                if stale_theta:
                    theta = np.zeros(d)
            else:
                gap = released_gap(cen, rad)
                if gap is None:
                    ind = max(range(len(mu)), key=lambda i: mu[i] + sd[i])
                    time[ind] += 1
                    rad[ind] *= math.sqrt((time[ind] - 1) / time[ind])
                    sd[ind] *= math.sqrt((time[ind] - 1) / time[ind])
                else:
                    cen.append(gap)
                    time.append(1)
                    rad.append(math.sqrt(c * math.log(T)))
                    sd.append(math.sqrt(2 * c))
                    mu.append(0.0)
                    ind = len(cen) - 1
            explore = 4 * cen[ind]
            rates.append(explore)
            scores = [
                float(x @ theta) + explore * math.sqrt(float(x @ b_inv @ x)) for x in features
            ]
            pull = int(np.argmax(scores))
        reward = environment.reward(pull)
        x = features[pull]
        tmp = b_inv @ x
        b_inv -= np.outer(tmp, tmp) / (1 + x @ tmp)
        xr += x * reward
        theta = b_inv @ xr
        if t >= exp_time and fixed_rate is None:
            if t == exp_time:
                mu = [reward]
            else:
                mu[ind] = (mu[ind] * (time[ind] - 1) + reward) / time[ind]
        regret[t] = means.max() - means[pull]
    return np.cumsum(regret), rates


def released_config(composer, seed: int, horizon: int) -> dict:
    return cell_config(
        composer(
            [
                "tuner=cdt_released",
                "algorithm=linucb",
                "dataset=simulation",
                f"horizon={horizon}",
                f"seed={seed}",
            ]
        )
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_cdt_released_matches_the_slow_port_exactly(composer, seed):
    config = released_config(composer, seed, 1500)
    ours = run_cell(config)
    regret, rates = slow_released_linucb(config)
    np.testing.assert_allclose(ours["trace"]["values"][30:, 0], rates, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours["curves"]["regret"], regret, rtol=1e-9, atol=1e-9)
    assert len(set(rates)) >= 3, "the horizon is long enough for activations to happen"
    assert np.nanmax(ours["trace"]["active_arms"]) == len(set(rates))  # no restart, no removal


@pytest.mark.parametrize(("dataset", "rate"), [("simulation", 1.0), ("simulation_grid", 0.3)])
def test_a_cells_regret_is_the_independent_loops_regret(composer, dataset, rate):
    """The cell's cumulative regret (best expected reward minus the pulled arm's, summed)
    equals that of a plain LinUCB loop written here, pull by pull, on the same instance."""
    config = cell_config(
        composer(
            [
                "tuner=fixed",
                f"tuner.value={rate}",
                "algorithm=linucb",
                f"dataset={dataset}",
                "horizon=400",
                "seed=4",
            ]
        )
    )
    ours = run_cell(config)["curves"]["regret"]
    regret, _ = slow_released_linucb(config, fixed_rate=rate)
    np.testing.assert_allclose(ours, regret, rtol=1e-9, atol=1e-9)
    assert regret[-1] > 1.0  # a non-trivial run: LinUCB is still learning at T = 400


@pytest.mark.slow
def test_the_stale_first_theta_of_the_released_code_does_not_move_the_regret(composer):
    """In distribution over 30 seeds: the released warm-up quirk against our cell."""
    diffs = []
    for seed in range(30):
        config = released_config(composer, seed, 600)
        ours = run_cell(config)["curves"]["regret"][-1]
        diffs.append(slow_released_linucb(config, stale_theta=True)[0][-1] - ours)
    diffs = np.asarray(diffs)
    assert abs(diffs.mean()) < 3 * diffs.std(ddof=1) / math.sqrt(len(diffs)) + 1e-9
