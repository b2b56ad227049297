"""001's procedures: alpha_t (Eq. 14), s_t (Eq. 13), and Algorithm 2 without its two
corrections reproducing Algorithm 1 trial for trial."""

from __future__ import annotations

import numpy as np
import pytest

from sweeper_tasks.opl_hpo.cell import run_cell
from sweeper_tasks.opl_hpo.procedures import CIRHPO, adaptive_alpha, optimality_score


def alpha_sequence(scores, alpha_init, gamma=0.01):
    total, out = 0.0, []
    for t, s in enumerate(scores, start=1):
        total += s
        out.append(adaptive_alpha(total, t, len(scores), alpha_init, gamma))
    return out


@pytest.mark.parametrize("alpha_init", [0.0, 0.3, 0.5, 0.9])
def test_alpha_all_pi0_better_ends_at_one(alpha_init):
    assert alpha_sequence([1] * 50, alpha_init)[-1] == pytest.approx(1.0)


@pytest.mark.parametrize("alpha_init, expected", [(0.5, 0.0), (0.8, 0.6), (0.3, 0.0), (1.0, 1.0)])
def test_alpha_all_pi0_worse_ends_at_two_alpha_init_minus_one_clipped(alpha_init, expected):
    assert alpha_sequence([-1] * 50, alpha_init)[-1] == pytest.approx(expected)


def test_alpha_follows_eq_14_on_a_mixed_sequence():
    scores, T, gamma = [1, 0, -1, 1, 1], 5, 0.5
    alphas = alpha_sequence(scores, 0.2, gamma)
    # t = 3: sum 0 -> alpha_init; t = 5: 0.2 + 0.8 * 1 * 2/5
    assert alphas[2] == pytest.approx(0.2)
    assert alphas[4] == pytest.approx(0.2 + 0.8 * 2 / 5)
    assert alphas[0] == pytest.approx(0.2 + 0.8 * (1 / T) ** gamma)


def test_optimality_score_detects_significant_differences():
    rng = np.random.default_rng(0)
    base = rng.random(1000)
    assert optimality_score(base + 0.5, base, 0.1) == 1  # pi0 clearly better
    assert optimality_score(base, base + 0.5, 0.1) == -1  # pi0 clearly worse
    assert optimality_score(base, base, 0.1) == 0  # identical
    noise = rng.normal(0, 1, 1000)
    assert optimality_score(base + noise, base, 0.1) == 0  # not significant (|t| ~ 0.5)


def test_cir_hpo_rejects_bad_meta_hyperparameters():
    with pytest.raises(ValueError, match="procedure.delta=1.5 is outside"):
        CIRHPO(delta=1.5)
    with pytest.raises(ValueError, match="procedure.gamma"):
        CIRHPO(gamma=0.0)


def synthetic_config(procedure, sampler="tpe", n_trials=25, beta0=20.0, seed=3):
    return {
        "seed": seed,
        "n_trials": n_trials,
        "task": {"name": "opl_hpo", "result_version": 1},
        "logged_data": {
            "_target_": "sweeper_tasks.opl_hpo.data.synthetic.SyntheticLoggedData",
            "name": "synthetic",
            "beta0": beta0,
            "n_test": 2000,
        },
        "sampler": {
            "_target_": f"sweeper_tasks.opl_hpo.samplers.{'TPE' if sampler == 'tpe' else 'Random'}",
            "name": sampler,
            **({"n_startup_trials": 5} if sampler == "tpe" else {}),
        },
        "procedure": procedure,
        "estimator": {"_target_": "sweeper_tasks.opl_hpo.estimators.IPS", "name": "ips"},
    }


BASELINE = {"_target_": "sweeper_tasks.opl_hpo.procedures.Baseline", "name": "baseline"}


def cir(**flags):
    return {"_target_": "sweeper_tasks.opl_hpo.procedures.CIRHPO", "name": "cir_hpo", **flags}


def test_cir_hpo_without_air_and_cso_equals_baseline_trial_for_trial():
    plain = run_cell(synthetic_config(cir(cso=False, air=False), beta0=0.0))
    baseline = run_cell(synthetic_config(BASELINE, beta0=0.0))
    assert np.array_equal(plain["trace"]["values"], baseline["trace"]["values"])
    for name in ("best_validation", "best_generalisation", "best_surrogate", "bias", "alpha"):
        assert np.array_equal(plain["curves"][name], baseline["curves"][name]), name
    assert baseline["summary"]["best_trial"] > 0  # the run did update its incumbent
    full = run_cell(synthetic_config(cir(), beta0=0.0))
    best = "best_surrogate"
    assert not np.array_equal(full["curves"][best], baseline["curves"][best])
