"""The tuners' mechanics pinned to the papers: EXP3, Syndicated, OP, T1/T2, restarts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper_tasks.bandit_tuning.space import Hyperparameter
from sweeper_tasks.bandit_tuning.tuners.cdt import CDT, default_restart_every, default_warmup_rounds
from sweeper_tasks.bandit_tuning.tuners.exp3 import Exp3, exp3_rate
from sweeper_tasks.bandit_tuning.tuners.fixed import Fixed
from sweeper_tasks.bandit_tuning.tuners.op import OP
from sweeper_tasks.bandit_tuning.tuners.oracle import Oracle
from sweeper_tasks.bandit_tuning.tuners.syndicated import Syndicated
from sweeper_tasks.bandit_tuning.tuners.theory import Theory
from sweeper_tasks.bandit_tuning.tuners.tl import TL
from sweeper_tasks.bandit_tuning.tuners.tl_combined import TLCombined
from sweeper_tasks.bandit_tuning.tuners.zooming import Zooming
from sweeper_tasks.bandit_tuning.tuners.zooming_ts_double_restart import ZoomingTSDoubleRestart


class ScriptedRng:
    """A generator whose ``choice`` plays a fixed script (the pulls of a hand computation)."""

    def __init__(self, script: list[int]) -> None:
        self.script = list(script)
        self.seen_p: list[np.ndarray] = []

    def choice(self, n: int, p: np.ndarray) -> int:
        self.seen_p.append(np.array(p))
        return self.script.pop(0)


def theory(t: int) -> dict[str, float]:
    return {"exploration_rate": 10.0 + t, "step_size": 1.0, "regularisation": 1.0}


ALPHA = Hyperparameter("exploration_rate", candidates=(0.1, 1.0, 2.0))
STEP = Hyperparameter("step_size", candidates=(0.5, 1.5))


# --- EXP3 (002 Algorithm 1) -----------------------------------------------------------------
def hand_exp3(n: int, horizon: int, pulls: list[int], rewards: list[float]):
    """002 Algorithm 1 lines 2-10 written out with plain floats."""
    beta = min(1.0, math.sqrt(n * math.log(n) / ((math.e - 1) * horizon)))
    w = [1.0] * n
    probabilities = []
    for i, y in zip(pulls, rewards, strict=True):
        total = sum(w)
        p = [beta / n + (1 - beta) * wj / total for wj in w]
        probabilities.append(p)
        w[i] = w[i] * math.exp(beta / n * y / p[i])
    return beta, probabilities, [wj / sum(w) for wj in w]


def test_exp3_rate_is_002_line_3():
    assert exp3_rate(3, 100) == pytest.approx(math.sqrt(3 * math.log(3) / ((math.e - 1) * 100)))
    assert exp3_rate(3, 100) == pytest.approx(0.138496, abs=1e-6)
    assert exp3_rate(6, 1) == 1.0  # capped at 1
    assert exp3_rate(1, 100) == 1.0


def test_exp3_probabilities_and_weights_match_a_hand_computation():
    pulls, rewards = [0, 2, 0, 1], [1.0, 0.5, 0.0, 0.8]
    beta, probabilities, weights = hand_exp3(3, 100, pulls, rewards)
    # The first two rounds by hand: uniform, then w = (e^beta, 1, 1) after Y=1 on arm 0.
    assert probabilities[0] == pytest.approx([1 / 3] * 3)
    e = math.exp(beta)
    assert probabilities[1][0] == pytest.approx(beta / 3 + (1 - beta) * e / (e + 2))
    rng = ScriptedRng(pulls)
    exp3 = Exp3(3, 100, rng)
    for y in rewards:
        exp3.pull()
        exp3.update(y)
    for seen, expected in zip(rng.seen_p, probabilities, strict=True):
        np.testing.assert_allclose(seen, expected, rtol=1e-12)
    np.testing.assert_allclose(exp3.weights, weights, rtol=1e-12)
    assert exp3.beta == pytest.approx(beta)


def test_exp3_long_runs_do_not_overflow():
    exp3 = Exp3(2, 10, np.random.default_rng(0))
    for _ in range(20000):
        exp3.pull()
        exp3.update(1.0)
    assert np.all(np.isfinite(exp3.probabilities))
    assert exp3.probabilities.sum() == pytest.approx(1.0)


def test_tl_tunes_one_hyperparameter_and_holds_the_others_at_theory():
    tuner = TL()
    tuner.reset([STEP, ALPHA], 100, np.random.default_rng(0), theory)
    values = tuner.propose(5)
    assert values["step_size"] == 1.0  # theoretical
    assert values["exploration_rate"] in ALPHA.candidates
    assert tuner.params()["tl.tuned"] == "exploration_rate"
    with pytest.raises(ValueError, match="cannot tune 'lambda'"):
        TL(hyperparameter="lambda").reset([ALPHA], 100, np.random.default_rng(0), theory)


def test_syndicated_runs_independent_exp3_per_hyperparameter_on_one_reward():
    horizon = 50
    script = {0: [0, 2, 1, 2], 1: [1, 1, 0, 1]}  # pulls of EXP3(1) and EXP3(2)
    rewards = [0.3, 1.0, 0.0, 0.6]
    tuner = Syndicated()
    tuner.reset([ALPHA, STEP], horizon, np.random.default_rng(0), theory)
    rngs = [ScriptedRng(script[0]), ScriptedRng(script[1])]
    for exp3, rng in zip(tuner.instances, rngs, strict=True):
        exp3.rng = rng
    for t, y in enumerate(rewards, start=1):
        values = tuner.propose(t)
        assert values["exploration_rate"] == ALPHA.candidates[script[0][t - 1]]
        assert values["step_size"] == STEP.candidates[script[1][t - 1]]
        tuner.observe(y)
    for level, h in enumerate((ALPHA, STEP)):
        beta, probabilities, weights = hand_exp3(len(h.candidates), horizon, script[level], rewards)
        assert tuner.instances[level].beta == pytest.approx(beta)
        for seen, expected in zip(rngs[level].seen_p, probabilities, strict=True):
            np.testing.assert_allclose(seen, expected, rtol=1e-12)
        np.testing.assert_allclose(tuner.instances[level].weights, weights, rtol=1e-12)
    assert tuner.instances[0].beta != tuner.instances[1].beta  # beta_l depends on n_l


def test_tl_combined_is_exp3_over_the_product_of_candidate_sets():
    tuner = TLCombined()
    tuner.reset([ALPHA, STEP], 100, np.random.default_rng(1), theory)
    assert len(tuner.combinations) == 6
    assert tuner.exp3.beta == pytest.approx(exp3_rate(6, 100))
    seen = set()
    for t in range(1, 400):
        values = tuner.propose(t)
        seen.add((values["exploration_rate"], values["step_size"]))
        tuner.observe(0.5)
    assert seen == {(a, s) for a in ALPHA.candidates for s in STEP.candidates}


# --- OP -------------------------------------------------------------------------------------
def test_op_turns_the_clipped_reward_into_a_bernoulli_draw():
    tuner = OP()
    tuner.reset([ALPHA], 100, np.random.default_rng(3), theory)
    for _ in range(40):
        tuner.propose(1)
        tuner.observe(7.0)  # clipped to 1: always a success
    for _ in range(30):
        tuner.propose(1)
        tuner.observe(-2.0)  # clipped to 0: always a failure
    assert tuner.successes.sum() - 3 == 40
    assert tuner.failures.sum() - 3 == 30


def test_op_concentrates_on_the_best_candidate():
    tuner = OP()
    tuner.reset([ALPHA], 2000, np.random.default_rng(4), theory)
    means = {0.1: 0.2, 1.0: 0.8, 2.0: 0.4}
    rng = np.random.default_rng(5)
    picks = []
    for t in range(1, 2001):
        value = tuner.propose(t)["exploration_rate"]
        picks.append(value)
        tuner.observe(float(rng.random() < means[value]))
    assert np.mean(np.array(picks[-500:]) == 1.0) > 0.9


def test_theory_and_fixed():
    tuner = Theory()
    tuner.reset([ALPHA], 10, np.random.default_rng(0), theory)
    assert tuner.propose(3) == {"exploration_rate": 13.0}
    fixed = Fixed(value=None, values={"exploration_rate": 2.5})
    fixed.reset([ALPHA], 10, np.random.default_rng(0), theory)
    assert fixed.propose(1) == {"exploration_rate": 2.5}
    with pytest.raises(ValueError, match="no value for"):
        Fixed(value=None).reset([ALPHA], 10, np.random.default_rng(0), theory)
    with pytest.raises(ValueError, match="not tuned"):
        Fixed(values={"lambda": 1.0}).reset([ALPHA], 10, np.random.default_rng(0), theory)


# --- CDT: T1, T2 and restarts (003 Section 5, Algorithm 2) -------------------------------------
def test_t1_t2_defaults_follow_003_section_5():
    assert default_warmup_rounds(14000, 1) == 118
    assert default_warmup_rounds(14000, 2) == 45
    assert default_restart_every(14000, 1) == int(3 * 14000**0.75)
    assert default_restart_every(14000, 2, multiplier=2.0) == int(2 * 14000**0.8)
    # 003 A.3: H = 10 ceil((T / c(T))^(3/4)) with T = 90000, c(T) = 3.
    assert default_restart_every(90000, 1, 10.0, expected_changes=3) == 10 * math.ceil(30000**0.75)
    for p, t1 in [(1, 118), (2, 45)]:
        tuner = CDT()
        tuner.reset([ALPHA, STEP][:p], 14000, np.random.default_rng(0), theory)
        assert tuner.warmup_rounds() == t1
        assert tuner.params()["T1"] == t1
        assert tuner.params()["T2"] == default_restart_every(14000, p)
    tuner = CDT(warmup_rounds=0, restart_every=77)
    tuner.reset([ALPHA], 14000, np.random.default_rng(0), theory)
    assert (tuner.warmup_rounds(), tuner.T2) == (0, 77)
    tuner = CDT(warmup_multiplier=0.0, restart_multiplier=1.0)
    tuner.reset([ALPHA], 14000, np.random.default_rng(0), theory)
    assert (tuner.warmup_rounds(), tuner.T2) == (0, int(14000**0.75))


def test_cdt_horizon_of_algorithm_1_is_t_minus_t1():
    tuner = CDT(warmup_rounds=100, tau0=0.5)
    tuner.reset([ALPHA], 1100, np.random.default_rng(0), theory)
    expected = math.sqrt(13 * 0.25 * math.log(1000) / 2)
    assert tuner.core.radius_scale == pytest.approx(expected)
    assert tuner.core.ts_scale == pytest.approx(math.sqrt(52 * math.pi * 0.25 * math.log(1000)))


def play(tuner, horizon: int, reward, rng_seed: int = 0):
    """Drive a tuner as the cell does: no proposals during the warm-up."""
    rng = np.random.default_rng(rng_seed)
    states = {}
    for t in range(tuner.warmup_rounds() + 1, horizon + 1):
        values = tuner.propose(t)
        tuner.observe(reward(values, rng))
        states[t] = tuner.state()
    return states


def test_cdt_restarts_every_t2_rounds_after_t1():
    tuner = CDT(warmup_rounds=10, restart_every=100, tau0=0.1)
    tuner.reset([ALPHA], 1000, np.random.default_rng(0), theory)

    def reward(values, rng):
        return 1.0 - abs(values["exploration_rate"] - 1.0) / 5 + 0.1 * rng.standard_normal()

    states = play(tuner, 1000, reward)
    restarts = np.array([states[t]["restarts"] for t in sorted(states)])
    rounds = np.array(sorted(states))
    starts = rounds[np.flatnonzero(np.diff(restarts)) + 1]
    np.testing.assert_array_equal(starts, np.arange(111, 1001, 100))  # T1 + k T2 + 1
    assert restarts[-1] == 9
    # Right after a restart the active set is the initial covering again.
    initial = 1  # r(1) > 1/2 covers [0, 1] with one arm
    assert states[111]["active_arms"] <= initial + 1
    assert max(s["active_arms"] for s in states.values()) > initial + 1


def test_cdt_proposals_lie_in_the_box_for_two_hyperparameters():
    a = Hyperparameter("exploration_rate", interval=(0.1, 5.0))
    b = Hyperparameter("step_size", interval=(0.01, 2.0))
    tuner = CDT(tau0=0.05)
    tuner.reset([a, b], 3000, np.random.default_rng(2), theory)
    seen = []
    for t in range(tuner.warmup_rounds() + 1, 3001):
        values = tuner.propose(t)
        seen.append((values["exploration_rate"], values["step_size"]))
        tuner.observe(-abs(values["exploration_rate"] - 1) - abs(values["step_size"] - 0.5))
    seen = np.array(seen)
    assert np.all((seen[:, 0] >= 0.1) & (seen[:, 0] <= 5.0))
    assert np.all((seen[:, 1] >= 0.01) & (seen[:, 1] <= 2.0))
    assert len(np.unique(seen, axis=0)) > 4  # it zoomed into more than the initial covering
    # The last rounds concentrate near the optimum (1, 0.5).
    assert np.median(np.abs(seen[-500:, 0] - 1.0)) < 1.0


def test_bad_settings_fail_early():
    with pytest.raises(ValueError, match="restart_every"):
        CDT(restart_every=0)
    with pytest.raises(ValueError, match="tau0"):
        CDT(tau0=0.0)
    with pytest.raises(ValueError, match="expected_changes"):
        default_restart_every(100, 1, expected_changes=0)
    with pytest.raises(ValueError, match="no hyperparameter"):
        TL().reset([], 10, np.random.default_rng(0), theory)


# --- Zooming TS with double restarts (003 Algorithm 3) ----------------------------------------
def test_double_restart_epochs_follow_algorithm_3():
    tuner = ZoomingTSDoubleRestart(warmup_rounds=0)
    tuner.reset([ALPHA], 1000, np.random.default_rng(0), theory)
    assert tuner.H0 == math.ceil(1000 ** (3 / 5)) == 64
    assert tuner.epoch_lengths == [64, 32, 16, 8, 4, 2, 1]  # N = ceil(log2 64) + 1 = 7
    n = len(tuner.epoch_lengths)
    assert tuner.exp3.beta == pytest.approx(
        min(1.0, math.sqrt(n * math.log(n) / ((math.e - 1) * math.ceil(1000 / 64))))
    )
    lengths, restarts = [], []
    for t in range(1, 1001):
        tuner.propose(t)
        tuner.observe(0.5)
        lengths.append(tuner.H)
        restarts.append(tuner.restarts)
    lengths = np.array(lengths)
    # The bottom epoch length is redrawn only at top-epoch boundaries (every H0 rounds).
    changes = np.flatnonzero(np.diff(lengths)) + 1
    assert np.all(changes % 64 == 0)
    # Algorithm 1 restarts at every top epoch after the first and every H rounds inside one.
    expected = sum(1 for r in range(1, 1000) if r % 64 == 0 or (r % 64) % lengths[r] == 0)
    assert restarts[-1] == expected
    assert np.diff(restarts).max() == 1


@pytest.mark.parametrize("tuner_class", [CDT, ZoomingTSDoubleRestart, Oracle, Zooming])
def test_every_zooming_tuner_passes_the_released_options_to_its_core(tuner_class):
    options = {"ts_log_horizon": False, "random_start": True}
    if tuner_class is not Zooming:
        options["ts_draw"] = False
    tuner = tuner_class(warmup_rounds=0, **options)
    tuner.reset([ALPHA], 1000, np.random.default_rng(0), theory)
    core = tuner.core
    assert core.random_start and core.ts_draw is options.get("ts_draw", True)
    assert core.ts_scale == pytest.approx(math.sqrt(tuner.ts_constant * tuner.tau0**2))
    assert core.active_centers[0][0] != 0.5  # a random first point, not the centre


# --- Oracle and Zooming -------------------------------------------------------------------------
def test_only_the_oracle_restarts_on_notify_change():
    oracle, zooming = Oracle(), Zooming()
    for tuner in (oracle, zooming):
        tuner.reset([ALPHA], 500, np.random.default_rng(0), theory)
        for t in range(1, 200):
            tuner.propose(t)
            tuner.observe(0.5)
        tuner.notify_change()
    # a restarted epoch holds only line 3's pseudo-observations: n = 1, f_hat = 0 per arm
    core = oracle.core
    assert oracle.restarts == 1 and core.counts[: core.m].tolist() == [1.0] * core.m
    assert core.means[: core.m].tolist() == [0.0] * core.m
    assert zooming.restarts == 0 and zooming.core.counts[: zooming.core.m].sum() == 199
