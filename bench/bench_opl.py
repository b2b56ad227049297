"""Timings of the OPL-HPO cells (001): seconds per trial by part, TPE's own growth, and
1000-trial cells per sampler, with an estimate of the full ``opl_hpo`` grid; the LR fit by
saga (001's solver, today's path before result version 3) and by proximal Newton
(``policy_space.solver=cd``) side by side in one run, and cd checked against saga run to
convergence.

Run: .venv/bin/python bench/bench_opl.py [--out bench/results/opl.md] [--cell-trials 1000]
Parts of a trial, timed separately on the synthetic data (beta0 = 3, |D_tr| = |D_val| =
1000, 10,000 test contexts): the model fit (LR and RF of 001 Table 2), the predictions
(mu_hat and softmax at the validation and test contexts) and OPE (IPS and DR terms,
V(pi)), and the sampler (Optuna ask + suggest + tell, on a dummy objective so that the
sampler's cost is seen alone, at growing numbers of trials). The LR fits are also timed
over the (C, l1_ratio) a 1000-trial TPE cell proposed (the region TPE samples), with the
share of saga fits that stop at max_iter. The OBD part needs ``make obd``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import optuna
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from tasks.opl_hpo.cell import run_cell
from tasks.opl_hpo.data.base import softmax
from tasks.opl_hpo.data.synthetic import SyntheticLoggedData
from tasks.opl_hpo.enet_logistic import fit_enet_logistic
from tasks.opl_hpo.estimators import DR, IPS
from tasks.opl_hpo.policy import LinearRewardModel, PolicySpace, lr_design
from tasks.opl_hpo.samplers import TPE, Random

GRID_CELLS = 1000  # conf/exp/opl_hpo.yaml: 5 beta0 x 2 samplers x 2 procedures x 2 estimators x 25


def parts(n_trials: int) -> dict[str, float]:
    """Mean seconds per trial of fit (LR by saga and by cd, RF), predictions (LR, RF) and
    OPE, over random trials; the same trials are fitted by both solvers."""
    data = SyntheticLoggedData(beta0=3.0).generate(np.random.default_rng(0))
    ips, dr = IPS().fit(data), DR().fit(data)
    spaces = {"saga": PolicySpace(solver="saga"), "cd": PolicySpace(solver="cd")}
    study = optuna.create_study(direction="maximize", sampler=Random().create(0))
    times: dict[str, list[float]] = {
        k: [] for k in ("fit_saga", "fit_cd", "fit_rf", "predict_lr", "predict_rf", "ope")
    }
    for index in range(n_trials):
        trial = study.ask()
        params = spaces["cd"].suggest(trial)
        for solver, space in spaces.items():
            if params["model"] == "rf" and solver == "saga":
                continue
            t0 = time.perf_counter()
            model = space.fit(params, data.train.x, data.train.a, data.train.r, 10, index)
            name = f"fit_{solver}" if params["model"] == "lr" else "fit_rf"
            times[name].append(time.perf_counter() - t0)
        t1 = time.perf_counter()
        pi_val = softmax(params["beta"] * model.predict(data.val.x))
        pi_test = softmax(params["beta"] * model.predict(data.test.x))
        t2 = time.perf_counter()
        value = ips.per_sample(pi_val).mean() + dr.per_sample(pi_val).mean()
        data.test.value(pi_test)
        times["ope"].append(time.perf_counter() - t2)
        times[f"predict_{params['model']}"].append(t2 - t1)
        study.tell(trial, float(value))
    out = {name: float(np.mean(values)) for name, values in times.items()}
    out["lr_share"] = len(times["fit_cd"]) / n_trials
    return out


def saga(C: float, l1_ratio: float, tol: float, max_iter: int) -> LogisticRegression:
    return LogisticRegression(C=C, l1_ratio=l1_ratio, solver="saga", tol=tol, max_iter=max_iter)


def tpe_region(trace: np.ndarray, n_fits: int) -> dict[str, float]:
    """LR fits at the (C, l1_ratio) a TPE cell proposed: seconds by solver (today's saga:
    tol 1e-4, max_iter 1000; cd) and the share of saga fits stopped at max_iter."""
    data = SyntheticLoggedData(beta0=3.0).generate(np.random.default_rng(0))
    X, y = lr_design(data.train.x, data.train.a, 10), (data.train.r > 0).astype(np.int64)
    lr = trace[trace[:, 1] == 0][:, 2:4]
    rows = lr[np.linspace(0, len(lr) - 1, min(n_fits, len(lr))).astype(int)]
    seconds = {"saga": [], "cd": []}
    capped = 0
    for C, l1_ratio in rows:
        t0 = time.perf_counter()
        model = saga(C, l1_ratio, 1e-4, 1000).fit(X, y)
        seconds["saga"].append(time.perf_counter() - t0)
        capped += int(model.n_iter_[0] >= 1000)
        t0 = time.perf_counter()
        fit_enet_logistic(X, y, C, l1_ratio)
        seconds["cd"].append(time.perf_counter() - t0)
    return {
        "n": len(rows),
        "C_median": float(np.median(rows[:, 0])),
        "C_q10": float(np.quantile(rows[:, 0], 0.1)),
        "C_q90": float(np.quantile(rows[:, 0], 0.9)),
        "saga": float(np.mean(seconds["saga"])),
        "cd": float(np.mean(seconds["cd"])),
        "capped": capped / len(rows),
    }


def check_against_saga(n_trials: int, max_iter: int) -> dict[str, float]:
    """cd against saga run to convergence (tol 1e-8, at most ``max_iter`` epochs) on random
    LR trials of 001 Table 2: the largest |V(pi_cd) - V(pi_saga)| (true policy values on
    the 10,000 test contexts), and whether cd's objective is at most saga's."""
    data = SyntheticLoggedData(beta0=3.0).generate(np.random.default_rng(1))
    X, y = lr_design(data.train.x, data.train.a, 10), (data.train.r > 0).astype(np.int64)
    rng = np.random.default_rng(2)

    def objective(w, b, C, l1_ratio):
        margin = (2 * y - 1) * (X @ w + b)
        penalty = l1_ratio * np.abs(w).sum() + 0.5 * (1 - l1_ratio) * w @ w
        return C * np.logaddexp(0, -margin).sum() + penalty

    gaps, lower, capped = [], 0, 0
    for _ in range(n_trials):
        C, l1_ratio = (
            float(np.exp(rng.uniform(np.log(1e-3), np.log(1e3)))),
            rng.choice(np.arange(1, 10) / 10),
        )
        beta = float(np.exp(rng.uniform(np.log(0.01), np.log(100))))
        w, b, _ = fit_enet_logistic(X, y, C, l1_ratio)
        reference = saga(C, l1_ratio, 1e-8, max_iter).fit(X, y)
        capped += int(reference.n_iter_[0] >= max_iter)
        values = []
        for coef, intercept in ((w, b), (reference.coef_[0], reference.intercept_[0])):
            model = LinearRewardModel(coef, intercept, 10, 10)
            values.append(data.test.value(softmax(beta * model.predict(data.test.x))))
        gaps.append(abs(values[0] - values[1]))
        ours = objective(w, b, C, l1_ratio)
        theirs = objective(reference.coef_[0], reference.intercept_[0], C, l1_ratio)
        lower += int(ours <= theirs * (1 + 1e-12))
    gaps = np.array(gaps)
    return {
        "n": n_trials,
        "max_gap": float(gaps.max()),
        "over_1e-4": int((gaps > 1e-4).sum()),
        "lower": lower,
        "capped": capped,
        "max_iter": max_iter,
    }


def sampler_growth(factory, n_trials: int, checkpoints: list[int]) -> dict[int, float]:
    """Mean seconds of ask + suggest + tell over the trials up to each checkpoint's window."""
    space = PolicySpace()
    study = optuna.create_study(direction="maximize", sampler=factory.create(0))
    rng = np.random.default_rng(0)
    times = np.empty(n_trials)
    for index in range(n_trials):
        t0 = time.perf_counter()
        trial = study.ask()
        params = space.suggest(trial)
        study.tell(trial, float(np.log(params["beta"]) + rng.normal()))
        times[index] = time.perf_counter() - t0
    out, start = {}, 0
    for end in checkpoints:
        out[end] = float(times[start:end].mean())
        start = end
    return out


def cell(sampler: str, n_trials: int, logged_data: dict | None = None, solver: str = "cd"):
    """Seconds of one CIR-HPO/DR cell, the share of its trials that fitted an LR, and its
    trace."""
    config = {
        "seed": 0,
        "n_trials": n_trials,
        "logged_data": logged_data
        or {
            "_target_": "tasks.opl_hpo.data.synthetic.SyntheticLoggedData",
            "name": "synthetic",
            "beta0": 3.0,
        },
        "sampler": {
            "_target_": f"tasks.opl_hpo.samplers.{'TPE' if sampler == 'tpe' else 'Random'}",
            "name": sampler,
        },
        "procedure": {"_target_": "tasks.opl_hpo.procedures.CIRHPO", "name": "cir_hpo"},
        "estimator": {"_target_": "tasks.opl_hpo.estimators.DR", "name": "dr"},
        "policy_space": {"_target_": "tasks.opl_hpo.policy.PolicySpace", "solver": solver},
    }
    result = run_cell(config)
    trace = result["trace"]["values"]
    return float(result["summary"]["runtime_s"]), float(np.mean(trace[:, 1] == 0)), trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/results/opl.md")
    parser.add_argument("--part-trials", type=int, default=200)
    parser.add_argument("--sampler-trials", type=int, default=1000)
    parser.add_argument("--cell-trials", type=int, default=1000)
    parser.add_argument("--region-fits", type=int, default=100)
    parser.add_argument("--check-trials", type=int, default=200)
    parser.add_argument("--check-max-iter", type=int, default=20000)
    parser.add_argument("--obd-trials", type=int, default=20)
    args = parser.parse_args()
    load_before = os.getloadavg()
    started = time.perf_counter()
    tiny = lr_design(np.zeros((4, 10)), np.arange(4), 10)
    fit_enet_logistic(tiny, np.array([0, 1, 0, 1]), 1.0, 0.5)  # numba's compile or cache load
    jit_seconds = time.perf_counter() - started
    with threadpool_limits(limits=1, user_api="blas"):
        part = parts(args.part_trials)
    checkpoints = [c for c in (100, 250, 500, 1000, 2000) if c <= args.sampler_trials]
    growth = {name: sampler_growth(f, args.sampler_trials, checkpoints)
              for name, f in (("tpe", TPE()), ("random", Random()))}  # fmt: skip
    cells = {
        (sampler, solver): cell(sampler, args.cell_trials, solver=solver)
        for sampler, solver in (("tpe", "saga"), ("tpe", "cd"), ("random", "cd"))
    }
    with threadpool_limits(limits=1, user_api="blas"):
        region = tpe_region(cells[("tpe", "saga")][2], args.region_fits)
        check = check_against_saga(args.check_trials, args.check_max_iter)
    obd_seconds = None
    try:
        obd = {"_target_": "tasks.opl_hpo.data.obd.OBDLoggedData", "name": "obd"}
        obd_seconds = cell("tpe", args.obd_trials, obd)[0] / args.obd_trials
    except FileNotFoundError:
        pass
    load_after = os.getloadavg()
    n = args.cell_trials
    mean_cell = float(np.mean([cells[("tpe", "cd")][0], cells[("random", "cd")][0]]))
    grid_cpu_h = GRID_CELLS * mean_cell / 3600
    scale = 1000 / n
    lines = [
        "# OPL-HPO cells (001): timings",
        "",
        f"Measured by `bench/bench_opl.py` on {platform.node()} ({os.cpu_count()} cores, "
        f"{platform.processor() or platform.machine()}), Python {platform.python_version()}, "
        f"one BLAS thread; load average {load_before[0]:.2f} before and {load_after[0]:.2f} "
        f"after (the machine is shared: other engineers' jobs run at the same time); total "
        f"{time.perf_counter() - started:.0f} s. cd's first call in a process compiles it "
        f"or loads numba's cache: {jit_seconds:.1f} s here, once per process, not counted "
        "in the parts below (a cell pays it once per worker).",
        "",
        f"## Whole cells (CIR-HPO, DR, synthetic beta0 = 3, {n} trials), in this one run",
        "",
        "| sampler | LR solver | s per cell | s per trial | share of LR trials |",
        "|---|---|---|---|---|",
        *[
            f"| {sampler} | {solver} | {s:.1f} | {s / n:.4f} | {share:.0%} |"
            for (sampler, solver), (s, share, _) in cells.items()
        ],
        "",
        f"TPE cell, saga / cd: {cells[('tpe', 'saga')][0] / cells[('tpe', 'cd')][0]:.1f} times "
        "the time (target: at most 0.05 s per trial with cd). The two TPE cells differ in "
        "what TPE proposes after the first differing fit, so their LR shares may differ.",
        "",
        f"## Seconds per trial by part ({args.part_trials} random trials, synthetic beta0 = 3)",
        "",
        "| part | s/trial |",
        "|---|---|",
        f"| fit, LR by saga (tol 1e-4, max_iter 1000; {part['lr_share']:.0%} of trials) "
        f"| {part['fit_saga']:.4f} |",
        f"| fit, LR by cd (proximal Newton to convergence; the same trials) "
        f"| {part['fit_cd']:.4f} |",
        f"| fit, RF (10 trees) | {part['fit_rf']:.4f} |",
        f"| predict, LR: mu_hat and softmax on D_val and 10,000 test contexts "
        f"| {part['predict_lr']:.4f} |",
        f"| predict, RF: the same | {part['predict_rf']:.4f} |",
        f"| OPE: IPS + DR terms on D_val, V(pi) on the test contexts | {part['ope']:.4f} |",
        "",
        f"## LR fits where TPE samples ({region['n']} of the (C, l1_ratio) the {n}-trial "
        "TPE cell proposed)",
        "",
        f"C: median {region['C_median']:.3g}, 10%-90% {region['C_q10']:.3g}-"
        f"{region['C_q90']:.3g}. saga (tol 1e-4, max_iter 1000): {region['saga']:.4f} s per "
        f"fit, {region['capped']:.0%} stopped at max_iter without converging; cd: "
        f"{region['cd']:.4f} s per fit ({region['saga'] / region['cd']:.0f} times faster).",
        "",
        f"## cd against saga run to convergence ({check['n']} random LR trials of 001 Table 2)",
        "",
        f"saga with tol 1e-8 and at most {check['max_iter']} epochs as the reference; policy "
        "values V(softmax(beta mu_hat)) on 10,000 test contexts, beta drawn from Table 2 too. "
        f"Largest |V(cd) - V(saga)|: {check['max_gap']:.2e}; trials above 1e-4: "
        f"{check['over_1e-4']}; trials where cd's objective is at most saga's: "
        f"{check['lower']} of {check['n']}; saga stopped at its epoch cap in "
        f"{check['capped']} (there cd's lower objective says saga had not converged).",
        "",
        f"## Sampler cost per trial (ask + suggest + tell, dummy objective, "
        f"{args.sampler_trials} trials)",
        "",
    ]
    lines += ["| window | TPE s/trial | random s/trial |", "|---|---|---|"]
    start = 0
    for end in checkpoints:
        lines.append(f"| {start + 1}-{end} | {growth['tpe'][end]:.4f} | "
                     f"{growth['random'][end]:.5f} |")  # fmt: skip
        start = end
    tpe_mean = float(np.mean([growth["tpe"][c] for c in checkpoints]))
    lines += [
        "",
        "TPE builds its Parzen estimators from all past trials at every ask, so its own cost "
        "per trial grows with the number of trials so far (here from "
        f"{growth['tpe'][checkpoints[0]]:.4f} s over the first {checkpoints[0]} trials to "
        f"{growth['tpe'][checkpoints[-1]]:.4f} s in the last window); random search stays "
        f"flat. With cd, TPE's own cost is a large part of a TPE trial (windows' mean "
        f"{tpe_mean:.4f} s).",
    ]
    if obd_seconds is not None:
        lines += [
            "",
            f"OBD (Men sample, 5,000 + 5,000 bts rows, 10,000 random rows, K = 34; TPE, cd, "
            f"{args.obd_trials} trials): {obd_seconds:.3f} s per trial, about "
            f"{obd_seconds * 1000 / 60:.0f} min per 1000-trial cell.",
        ]
    lines += [
        "",
        "## The full `opl_hpo` grid (1000 cells of 1000 trials), with cd",
        "",
        f"Mean of the TPE and random cells here: {mean_cell * scale:.0f} s at 1000 trials, so "
        f"{grid_cpu_h * scale:.1f} CPU-hours: about {grid_cpu_h * scale / 2:.1f} h on this "
        f"machine's 2 cores (if it were idle) and {grid_cpu_h * scale / 64 * 60:.0f} min on a "
        "64-core cluster (one cell per core; cells are independent).",
    ]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
