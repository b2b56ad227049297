"""One OPL-HPO cell: (logged data, sampler, procedure, estimator, seed), 001 Sections 3-5.

T trials of 001 Algorithm 1 (Baseline) or 2 (CIR-HPO): an Optuna sampler proposes theta_t
from the policy space (001 Table 2), mu_hat is fitted on D_tr, pi_hat_t = softmax(beta
mu_hat) (Eq. 6) is evaluated on D_val by the estimator, the procedure mixes it with pi0
(AIR), scores it (CSO) and keeps or drops it; the sampler is told the score. The ground
truth V(pi_t) is computed on the test set and never seen by the procedure.

Returned (all finite; values "normalised" are divided by V(pi0), as 001's figures):

- summary: generalisation (V(pi*) / V(pi0) of the selected policy, the lead metric),
  validation (its estimated value / V(pi0)), surrogate (its score / V(pi0)), overestimation
  (validation - generalisation), unsafe (1 if V(pi*) < V(pi0)), value (V(pi*) itself, 001
  Table 1's unit), v_pi0, pi0_optimality (V(pi0) / V(pi*), synthetic data only),
  alpha_final, best_trial (0: pi0 was kept), runtime_s, n_trials;
- params: v_pi0, v_optimal (synthetic), n_actions, the split sizes;
- curves (per trial t = 1..T): best_validation, best_generalisation and best_surrogate
  (validation, generalisation and surrogate of the best-so-far policy), alpha (alpha_t),
  bias (the trial's own overestimation (V_hat(pi_t) - V(pi_t)) / V(pi0), 001 Fig. 2),
  trial_generalisation (V(pi_t) / V(pi0));
- trace: names = ``sweeper_tasks.opl_hpo.policy.NAMES``; values (T, 7): beta, model (0 = LR,
  1 = RF), C, l1_ratio, max_depth, min_samples_split, max_samples, -1 where the trial's
  model lacks the setting.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import optuna
from threadpoolctl import threadpool_limits

from sweeper_tasks.building import build
from sweeper_tasks.opl_hpo.data.base import softmax
from sweeper_tasks.opl_hpo.policy import PolicySpace
from sweeper_tasks.opl_hpo.seeding import data_rng, model_rng, sampler_seed
from sweeper_tasks.storage import DataFile, DatasetMissingError, data_files

GROUPS: dict[str, dict[str, str]] = {
    "logged_data": {
        "synthetic": "sweeper_tasks.opl_hpo.data.synthetic.SyntheticLoggedData",
        "obd": "sweeper_tasks.opl_hpo.data.obd.OBDLoggedData",
    },
    "sampler": {
        "tpe": "sweeper_tasks.opl_hpo.samplers.TPE",
        "random": "sweeper_tasks.opl_hpo.samplers.Random",
    },
    "procedure": {
        "baseline": "sweeper_tasks.opl_hpo.procedures.Baseline",
        "cir_hpo": "sweeper_tasks.opl_hpo.procedures.CIRHPO",
    },
    "estimator": {
        "ips": "sweeper_tasks.opl_hpo.estimators.IPS",
        "dr": "sweeper_tasks.opl_hpo.estimators.DR",
    },
}
"""Each config group's classes (the ablations are CIRHPO with cso or air switched off)."""


def spec_name(spec: Mapping[str, Any]) -> str:
    """The config's ``name`` (what tags the run), else its ``_target_``."""
    return str(spec.get("name") or spec["_target_"])


def build_part(config: Mapping[str, Any], group: str) -> Any:
    """Build ``config[group]``, refusing a missing or unknown class with the valid ones."""
    spec = config.get(group)
    known = GROUPS[group]
    if not isinstance(spec, Mapping) or spec.get("_target_") not in known.values():
        target = spec.get("_target_") if isinstance(spec, Mapping) else spec
        raise ValueError(
            f"{group} {target!r} is not a known {group}: valid {group}s are "
            f"{', '.join(f'{name} ({path})' for name, path in known.items())}; choose one "
            f"with {group}=NAME (conf/{group}/NAME.yaml)."
        )
    return build(spec)


def n_trials_of(config: Mapping[str, Any]) -> int:
    n_trials = config.get("n_trials")
    if not isinstance(n_trials, int) or n_trials <= 0:
        raise ValueError(
            f"n_trials={n_trials!r} must be a positive integer: T, the HPO budget of 001 "
            "Algorithms 1 and 2 (1000 in 001)."
        )
    return n_trials


def build_parts(config: Mapping[str, Any]):
    """Logged data, sampler factory, procedure, estimator and policy space of a cell."""
    parts = [build_part(config, group) for group in ("logged_data", "sampler")]
    parts += [build_part(config, group) for group in ("procedure", "estimator")]
    space_spec = config.get("policy_space") or {}
    space = build(space_spec) if "_target_" in space_spec else PolicySpace()
    return (*parts, space)


def validate(config: Mapping[str, Any]) -> None:
    """Fail early on a config that cannot run: bad settings, empty space, missing OBD files."""
    n_trials_of(config)
    logged_data, _, _, estimator, _ = build_parts(config)
    estimator.check(logged_data)
    try:
        logged_data.check()
    except DatasetMissingError as err:  # a FileNotFoundError: the driver expects ValueError
        raise ValueError(str(err)) from err


def data(config: Mapping[str, Any]) -> list[DataFile]:
    """The files the logged data reads (OBD's), found without reading them (a dry run)."""
    return data_files(build_part(config, "logged_data"))


def distinct(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of x and the index of each row among them (x itself if all are)."""
    unique, inverse = np.unique(x, axis=0, return_inverse=True)
    if len(unique) == len(x):
        return x, np.arange(len(x))
    return unique, inverse.reshape(-1)


def run_cell(config: Mapping[str, Any]) -> dict[str, Any]:
    """Run T trials of the configured procedure; see the module docstring for the result."""
    started = time.perf_counter()
    n_trials = n_trials_of(config)
    seed = int(config["seed"])
    logged_data, sampler, procedure, estimator, space = build_parts(config)
    with threadpool_limits(limits=1, user_api="blas"):
        data = logged_data.generate(data_rng(spec_name(config["logged_data"]), seed))
        estimator.fit(data)
        study = optuna.create_study(
            direction="maximize",
            sampler=sampler.create(sampler_seed(seed, spec_name(config["sampler"]))),
        )
        states = model_rng(seed).integers(0, 2**31 - 1, size=n_trials)
        train, val, test = data.train, data.val, data.test

        # mu_hat is predicted once per distinct context (OBD's contexts are categorical)
        val_x, val_rows = distinct(val.x)
        test_x, test_rows = distinct(test.x)
        logging_values = estimator.per_sample(val.pi0)
        v_pi0 = test.value(test.pi0)
        best_score = procedure.start(n_trials, logging_values)
        best_validation, best_true, best_trial = float(logging_values.mean()), v_pi0, 0
        curves = {
            name: np.empty(n_trials)
            for name in (
                "best_validation",
                "best_generalisation",
                "best_surrogate",
                "alpha",
                "bias",
                "trial_generalisation",
            )
        }
        trace = np.empty((n_trials, len(space.names)))
        for index in range(n_trials):
            trial = study.ask()
            params = space.suggest(trial)
            model = space.fit(params, train.x, train.a, train.r, data.n_actions, states[index])
            pi_val = softmax(params["beta"] * model.predict(val_x))[val_rows]
            pi_test = softmax(params["beta"] * model.predict(test_x))[test_rows]
            decision = procedure.decide(index + 1, estimator.per_sample(pi_val))
            study.tell(trial, decision.score)
            true_value = (1.0 - decision.alpha) * test.value(pi_test) + decision.alpha * v_pi0
            validation = float(decision.values.mean())
            if decision.accepted:
                best_score, best_validation, best_true = decision.score, validation, true_value
                best_trial = index + 1
            curves["best_validation"][index] = best_validation / v_pi0
            curves["best_generalisation"][index] = best_true / v_pi0
            curves["best_surrogate"][index] = best_score / v_pi0
            curves["alpha"][index] = decision.alpha
            curves["bias"][index] = (validation - true_value) / v_pi0
            curves["trial_generalisation"][index] = true_value / v_pi0
            trace[index] = space.encode(params)

    summary = {
        "generalisation": best_true / v_pi0,
        "validation": best_validation / v_pi0,
        "surrogate": best_score / v_pi0,
        "overestimation": (best_validation - best_true) / v_pi0,
        "unsafe": float(best_true < v_pi0),
        "value": best_true,
        "v_pi0": v_pi0,
        "alpha_final": float(curves["alpha"][-1]),
        "best_trial": float(best_trial),
        "n_trials": float(n_trials),
    }
    params_out: dict[str, Any] = {
        "v_pi0": v_pi0,
        "n_actions": data.n_actions,
        "n_train": train.n,
        "n_val": val.n,
        "n_test": len(test.x),
    }
    if data.v_optimal is not None:
        summary["pi0_optimality"] = v_pi0 / data.v_optimal
        params_out["v_optimal"] = data.v_optimal
    summary["runtime_s"] = time.perf_counter() - started
    return {
        "summary": summary,
        "params": params_out,
        "curves": curves,
        "trace": {"names": list(space.names), "values": trace},
    }


run_cell.validate = validate  # the driver calls it once per distinct config before dispatch
run_cell.data = data  # a dry run says what data the sweep needs, and whether it is there
