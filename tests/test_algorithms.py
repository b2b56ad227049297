"""Bottom-layer algorithms: declarations, theory, determinism, linear fast paths vs slow ones.

The GLM algorithms' fast paths are checked in test_algorithms_glm.py, the sublinear regret
of the theoretical settings in test_algorithms_regret.py (slow).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper.grid import cell_config
from sweeper_tasks.bandit_tuning.algorithms.base import DivergenceError, check_finite
from sweeper_tasks.bandit_tuning.algorithms.lints import LinTS
from sweeper_tasks.bandit_tuning.algorithms.linucb import LinUCB
from sweeper_tasks.bandit_tuning.algorithms.ridge import RidgeState
from sweeper_tasks.bandit_tuning.cell import build_parts, run_cell
from sweeper_tasks.bandit_tuning.space import DEFAULT_CANDIDATES, DEFAULT_INTERVAL
from sweeper_tasks.building import build

ALGORITHMS = ("linucb", "lints", "ucb_glm", "glm_tsl", "laplace_ts", "gloc", "sgd_ts")
# 003 Section 5: p = 1 except GLOC and SGD-TS (exploration rate and a step parameter).
TUNED = {
    "linucb": ["exploration_rate"],
    "lints": ["exploration_rate"],
    "ucb_glm": ["exploration_rate"],
    "glm_tsl": ["exploration_rate"],
    "laplace_ts": ["step_size"],
    "gloc": ["exploration_rate", "step_parameter"],
    "sgd_ts": ["exploration_rate", "step_size"],
}
MODELS = {"linucb": "linear", "lints": "linear"}


# --- a small pre-drawn problem and a driver shared with the other algorithm tests --------
class Problem:
    """T rounds of K arms drawn up front, with one noise draw per round (as the cell's)."""

    def __init__(
        self, model: str, T: int = 200, K: int = 20, d: int = 5, seed: int = 0, scale: float = 1.0
    ) -> None:
        rng = np.random.default_rng(seed)
        bound = 1.0 / math.sqrt(d)
        self.model, self.T, self.K, self.d = model, T, K, d
        self.theta = scale * rng.uniform(-bound, bound, d)
        self.features = rng.uniform(-bound, bound, (T, K, d))
        z = self.features @ self.theta
        self.means = z if model == "linear" else 1.0 / (1.0 + np.exp(-z))
        self.noise = 0.5 * rng.standard_normal(T) if model == "linear" else rng.random(T)

    def reward(self, t: int, arm: int) -> float:
        mean = self.means[t, arm]
        if self.model == "linear":
            return float(mean + self.noise[t])
        return float(self.noise[t] < mean)


def play(algorithm, problem: Problem, hps, seed: int = 1) -> tuple[list[int], float]:
    """Run ``algorithm`` (anything with reset/select/update) on ``problem``; arms and regret."""
    algorithm.reset(problem.d, problem.T, np.random.default_rng(seed))
    arms, regret = [], 0.0
    for index in range(problem.T):
        hp = hps[index] if isinstance(hps, list) else hps
        features = problem.features[index]
        arm = algorithm.select(features, hp, index + 1)
        algorithm.update(features[arm], problem.reward(index, arm), hp, index + 1)
        arms.append(arm)
        regret += problem.means[index].max() - problem.means[index, arm]
    return arms, regret


def changing_hps(T: int, seed: int = 5, **fixed: float) -> list[dict[str, float]]:
    """A tuner's worth of hyperparameters that change every round."""
    rng = np.random.default_rng(seed)
    return [
        {
            "exploration_rate": float(rng.uniform(*DEFAULT_INTERVAL)),
            "regularisation": float(rng.choice([0.01, 0.1, 1.0])),
            **fixed,
        }
        for _ in range(T)
    ]


# --- declarations and configs ------------------------------------------------------------
@pytest.mark.parametrize("name", ALGORITHMS)
def test_config_builds_the_algorithm_with_papers_defaults(composer, name):
    config = cell_config(composer([f"algorithm={name}", "horizon=100"]))
    algorithm, _tuner, _environment = build_parts(config)
    assert algorithm.tuned == TUNED[name]
    assert algorithm.model == MODELS.get(name, "logistic")
    for h in algorithm.space:
        assert h.interval == DEFAULT_INTERVAL
        assert h.candidates == DEFAULT_CANDIDATES
    if "regularisation" in algorithm.all_hyperparameters:
        assert algorithm.all_hyperparameters["regularisation"].candidates == (0.01, 0.1, 1.0)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_config_overrides_interval_and_candidates(composer, name):
    first = TUNED[name][0]
    config = cell_config(
        composer(
            [
                f"algorithm={name}",
                f"+algorithm.hyperparameters.{first}.interval=[0.5,2]",
                f"+algorithm.hyperparameters.{first}.candidates=[0.5,1]",
            ]
        )
    )
    algorithm = build(config["algorithm"])
    assert algorithm.all_hyperparameters[first].interval == (0.5, 2.0)
    assert algorithm.all_hyperparameters[first].candidates == (0.5, 1.0)


def test_unknown_or_duplicate_tuned_hyperparameters_are_refused():
    with pytest.raises(ValueError, match="cannot tune"):
        LinUCB(tuned=["step_size"])
    with pytest.raises(ValueError, match="twice"):
        LinUCB(tuned=["exploration_rate", "exploration_rate"])


# --- theoretical settings ---------------------------------------------------------------
def test_linucb_theory_is_002_equation_3():
    algorithm = LinUCB(noise_sd=0.5, confidence=0.1, norm_bound=1.0)
    algorithm.reset(25, 14000, np.random.default_rng(0))
    for t in (1, 100, 14000):
        expected = 0.5 * math.sqrt(25 * math.log((1 + t / 1.0) / 0.1)) + math.sqrt(1.0) * 1.0
        assert algorithm.theoretical(t)["exploration_rate"] == pytest.approx(expected, rel=1e-12)
        assert algorithm.theoretical(t)["regularisation"] == 1.0
    # grows with t (sqrt(log t)) and is conservative: far above the [0.1, 5] box at T
    assert (
        algorithm.theoretical(14000)["exploration_rate"]
        > algorithm.theoretical(1)["exploration_rate"]
    )
    # the table and the formula agree past the horizon too
    assert algorithm.theoretical(20000)["exploration_rate"] == pytest.approx(
        0.5 * math.sqrt(25 * math.log((1 + 20000) / 0.1)) + 1.0
    )


def test_theory_needs_reset_and_a_theoretical_lambda_from_config():
    algorithm = LinUCB(hyperparameters={"regularisation": {"default": 0.1}})
    with pytest.raises(RuntimeError, match="call reset"):
        algorithm.theoretical(1)
    algorithm.reset(4, 10, np.random.default_rng(0))
    assert algorithm.theoretical(3)["regularisation"] == 0.1
    assert algorithm.ridge.regularisation == 0.1


@pytest.mark.parametrize("name", ALGORITHMS)
def test_theoretical_returns_a_fresh_dict_of_every_hyperparameter(composer, name):
    config = cell_config(composer([f"algorithm={name}"]))
    algorithm = build(config["algorithm"])
    if algorithm.needs_parameter_norm:  # no environment here: S as the cell would hand it
        algorithm.set_parameter_norm(0.6)
    algorithm.reset(25, 14000, np.random.default_rng(0))
    first = algorithm.theoretical(500)
    assert set(first) == set(algorithm.all_hyperparameters)
    assert all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in first.values())
    first["exploration_rate" if "exploration_rate" in first else "step_size"] = -1.0
    assert algorithm.theoretical(500) != first  # the cell mutates its copy


# --- determinism and the cell -------------------------------------------------------------
@pytest.mark.parametrize("name", ALGORITHMS)
def test_each_algorithm_is_deterministic_for_a_seed(composer, name):
    config = cell_config(composer([f"algorithm={name}", "tuner=tl", "horizon=400", "seed=3"]))
    first, second = run_cell(config), run_cell(config)
    assert np.array_equal(first["curves"]["regret"], second["curves"]["regret"])
    assert np.array_equal(first["trace"]["values"], second["trace"]["values"], equal_nan=True)
    other = run_cell(
        cell_config(composer([f"algorithm={name}", "tuner=tl", "horizon=400", "seed=4"]))
    )
    assert not np.array_equal(first["curves"]["regret"], other["curves"]["regret"])


@pytest.mark.parametrize("name", ALGORITHMS)
def test_state_does_not_grow_with_t_times_k_times_d(composer, name):
    """Arrays held after a run are O(T d) at most, never the T x K x d contexts."""
    T, d = 600, 25
    config = cell_config(composer([f"algorithm={name}", f"horizon={T}"]))
    algorithm, _tuner, environment = build_parts(config)
    if algorithm.needs_parameter_norm:  # no environment reset here: S as the cell hands it
        algorithm.set_parameter_norm(0.6)
    algorithm.reset(d, T, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    for t in range(1, T + 1):
        features = rng.uniform(-0.2, 0.2, (environment.n_arms, d))
        hp = algorithm.theoretical(t)
        arm = algorithm.select(features, hp, t)
        algorithm.update(features[arm], float(rng.random() < 0.5), hp, t)

    def nbytes(value, seen) -> int:
        if id(value) in seen:
            return 0
        seen.add(id(value))
        if isinstance(value, np.ndarray):
            return value.nbytes
        if hasattr(value, "__dict__"):
            return sum(nbytes(v, seen) for v in vars(value).values())
        return 0

    held = nbytes(algorithm, set())
    assert held <= 8 * (2 * T * d + 3 * T + 64 * d * d)
    assert held < 8 * T * environment.n_arms * d / 10


# --- ridge regression: Sherman-Morrison vs numpy ----------------------------------------
def test_ridge_state_matches_direct_inverse_with_lambda_changing():
    rng = np.random.default_rng(0)
    d = 6
    ridge = RidgeState(d, 1.0)
    X, y = [], []
    for step in range(300):
        x = rng.uniform(-1, 1, d) / math.sqrt(d)
        target = float(x @ np.arange(d) + rng.standard_normal())
        ridge.add(x, target)
        X.append(x)
        y.append(target)
        if step % 37 == 0:
            ridge.set_regularisation(float(rng.choice([0.01, 0.1, 1.0, 3.0])))
        if step % 25 == 0 or step == 299:
            A, b = np.array(X), np.array(y)
            v = ridge.regularisation * np.eye(d) + A.T @ A
            np.testing.assert_allclose(ridge.v_inv, np.linalg.inv(v), rtol=1e-8, atol=1e-10)
            np.testing.assert_allclose(
                ridge.theta, np.linalg.solve(v, A.T @ b), rtol=1e-8, atol=1e-9
            )
            features = rng.uniform(-1, 1, (10, d))
            slow = [math.sqrt(f @ np.linalg.inv(v) @ f) for f in features]
            np.testing.assert_allclose(ridge.widths(features), slow, rtol=1e-8)


def test_ridge_refuses_non_positive_lambda_and_reports_divergence():
    with pytest.raises(ValueError, match="must be positive"):
        RidgeState(3, 0.0)
    ridge = RidgeState(3, 1.0)
    with pytest.raises(ValueError, match="must be positive"):
        ridge.set_regularisation(-1.0)
    ridge.add(np.ones(3), float("nan"))
    with pytest.raises(DivergenceError, match="diverged"):
        ridge.add(np.ones(3), 1.0)
    with pytest.raises(DivergenceError, match="at round 7"):
        check_finite("x", np.array([1.0, np.inf]), 7)


# --- slow, obvious LinUCB / LinTS ---------------------------------------------------------
class SlowLinUCB:
    """Refit the ridge regression from the whole history and loop over arms every round."""

    thompson = False

    def reset(self, d, horizon, rng):
        self.d, self.rng, self.X, self.y = d, rng, [], []

    def _fit(self, lam):
        A = np.array(self.X).reshape(-1, self.d)
        v = lam * np.eye(self.d) + A.T @ A
        v_inv = np.linalg.inv(v)
        return v_inv, v_inv @ (A.T @ np.array(self.y).reshape(-1))

    def select(self, features, hp, t):
        v_inv, theta = self._fit(hp["regularisation"])
        if self.thompson:
            z = self.rng.standard_normal(self.d)
            sample = theta + hp["exploration_rate"] * np.linalg.cholesky(v_inv) @ z
            return int(np.argmax([x @ sample for x in features]))
        scores = [x @ theta + hp["exploration_rate"] * math.sqrt(x @ v_inv @ x) for x in features]
        return int(np.argmax(scores))

    def update(self, x, reward, hp, t):
        self.X.append(x)
        self.y.append(reward)


class SlowLinTS(SlowLinUCB):
    thompson = True


@pytest.mark.parametrize(("fast", "slow"), [(LinUCB, SlowLinUCB), (LinTS, SlowLinTS)])
def test_linear_fast_path_chooses_the_same_arms_as_the_slow_one(fast, slow):
    problem = Problem("linear", T=200, K=30, d=5, seed=2)
    hps = changing_hps(200)
    fast_arms, _ = play(fast(), problem, hps, seed=9)
    slow_arms, _ = play(slow(), problem, hps, seed=9)
    assert fast_arms == slow_arms
    assert len(set(fast_arms)) > 5  # it explored


def test_lints_reduces_to_greedy_at_zero_exploration_and_explores_above():
    problem = Problem("linear", T=200, K=30, d=5, seed=2)
    greedy, _ = play(LinUCB(), problem, {"exploration_rate": 0.0, "regularisation": 1.0})
    sampled, _ = play(LinTS(), problem, {"exploration_rate": 0.0, "regularisation": 1.0})
    wide, _ = play(LinTS(), problem, {"exploration_rate": 5.0, "regularisation": 1.0})
    assert sampled == greedy
    assert sum(a != b for a, b in zip(wide, greedy, strict=True)) > 100
