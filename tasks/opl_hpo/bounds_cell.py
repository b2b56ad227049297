"""001 Appendix E (Figures 10 and 11): lower bounds of V(pi_e) and their error rates.

One cell = (beta0, |D_val|, delta, seed): the evaluation policy pi_e = softmax(beta mu_hat)
(Eq. 6, beta = 10) with mu_hat a logistic regression fitted on a D_tr of the synthetic
data (001 Section 3.1); then ``n_repeats`` independent validation logs of size |D_val| are
drawn from the same logging policy, and on each the IPS estimate and its Hoeffding,
Bernstein and t-test lower bounds (``sweeper_tasks.opl_hpo.bounds``) are computed. A bound fails
when it is at least V(pi_e) (001's definition); the error rate is the share of repeats
where it fails. V(pi_e) is computed exactly from mu over the test contexts; w_max, the sup
of pi_e/pi0, is taken over those contexts and all actions.

Returned: summary ``{bound}_value`` (mean lower bound / V(pi_e)) and ``{bound}_error``
(error rate) for bound in hoeffding, bernstein, t_test, plus ``ips`` (mean IPS / V(pi_e)),
``v_pi_e``, ``w_max``, runtime_s; curves ``{bound}`` (each repeat's bound / V(pi_e)) and
``ips``, of length n_repeats; trace: names ['ips'], each repeat's raw IPS estimate.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from sweeper_tasks.opl_hpo.bounds import bernstein_bound, check_delta, hoeffding_bound, t_test_bound
from sweeper_tasks.opl_hpo.cell import build_part, spec_name
from sweeper_tasks.opl_hpo.data.base import softmax
from sweeper_tasks.opl_hpo.data.synthetic import SyntheticLoggedData
from sweeper_tasks.opl_hpo.policy import fit_logistic
from sweeper_tasks.opl_hpo.seeding import data_rng

BOUNDS = ("hoeffding", "bernstein", "t_test")


def settings(config: Mapping[str, Any]) -> tuple[SyntheticLoggedData, float, float, int]:
    logged_data = build_part(config, "logged_data")
    if not isinstance(logged_data, SyntheticLoggedData):
        raise ValueError("the bounds cell needs logged_data=synthetic (001 Appendix E).")
    delta = check_delta(config.get("delta", 0.05), "delta")
    beta = float(config.get("beta", 10.0))
    n_repeats = config.get("n_repeats", 100)
    if not isinstance(n_repeats, int) or n_repeats <= 0:
        raise ValueError(f"n_repeats={n_repeats!r} must be a positive integer.")
    return logged_data, delta, beta, n_repeats


def validate(config: Mapping[str, Any]) -> None:
    settings(config)


def run_cell(config: Mapping[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    logged_data, delta, beta, n_repeats = settings(config)
    rng = data_rng(spec_name(config["logged_data"]), int(config["seed"]))
    with threadpool_limits(limits=1, user_api="blas"):
        environment = logged_data.environment(rng)
        train, _ = environment.log(logged_data.n_train, rng)
        model = fit_logistic(
            train.x, train.a, train.r, environment.n_actions, 1.0, 0.0, solver="lbfgs"
        )
        x_test = environment.contexts(logged_data.n_test, rng)
        mu_test = environment.mu(x_test)
        pi_test = softmax(beta * model.predict(x_test))
        v_pi_e = float(np.einsum("ij,ij->", pi_test, mu_test) / len(x_test))
        w_max = float((pi_test / softmax(environment.beta0 * mu_test)).max())
        estimates = np.empty(n_repeats)
        lower = {name: np.empty(n_repeats) for name in BOUNDS}
        for index in range(n_repeats):
            val, _ = environment.log(logged_data.n_val, rng)
            pi_val = softmax(beta * model.predict(val.x))
            values = pi_val[np.arange(val.n), val.a] / val.pscore * val.r
            estimates[index] = values.mean()
            lower["hoeffding"][index] = hoeffding_bound(values, delta, w_max)
            lower["bernstein"][index] = bernstein_bound(values, delta, w_max)
            lower["t_test"][index] = t_test_bound(values, delta)
    summary: dict[str, float] = {"ips": float(estimates.mean() / v_pi_e)}
    for name in BOUNDS:
        summary[f"{name}_value"] = float(lower[name].mean() / v_pi_e)
        summary[f"{name}_error"] = float(np.mean(lower[name] >= v_pi_e))
    summary.update(v_pi_e=v_pi_e, w_max=w_max, runtime_s=time.perf_counter() - started)
    return {
        "summary": summary,
        "params": {"n_val": logged_data.n_val, "delta": delta, "beta": beta},
        "curves": {**{n: lower[n] / v_pi_e for n in BOUNDS}, "ips": estimates / v_pi_e},
        "trace": {"names": ["ips"], "values": estimates[:, None]},
    }


run_cell.validate = validate
