"""Timings of the OPL-HPO cells (001): seconds per trial by part, TPE's own growth, and
1000-trial cells per sampler, with an estimate of the full ``opl_hpo`` grid; the LR fit by
saga (001's solver, today's path before result version 3) and by proximal Newton
(``policy_space.solver=cd``) side by side in one run, and cd checked against saga run to
convergence.

Run: .venv/bin/python bench/bench_opl.py [--out bench/results/opl.md] [--cell-trials 1000]
[--repeats 3]. The whole cells run interleaved, ``--repeats`` times, and each is the median
of its runs (bench/harness.py); a part's figure is its mean over trials of different
hyperparameters (what a cell's time adds up).

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
import statistics

import numpy as np
import optuna
from harness import Bench, Timing, interleaved, measure, ratio
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from sweeper_tasks.opl_hpo.cell import run_cell
from sweeper_tasks.opl_hpo.data.base import softmax
from sweeper_tasks.opl_hpo.data.synthetic import SyntheticLoggedData
from sweeper_tasks.opl_hpo.enet_logistic import fit_enet_logistic
from sweeper_tasks.opl_hpo.estimators import DR, IPS
from sweeper_tasks.opl_hpo.policy import LinearRewardModel, PolicySpace, lr_design
from sweeper_tasks.opl_hpo.samplers import TPE, Random

FOREST_DATA = {
    "_target_": "sweeper_tasks.opl_hpo.data.synthetic.SyntheticLoggedData",
    "name": "synthetic",
    "beta0": -3.0,
}
"""The logged data of a grid cell whose TPE settles on the random forest (see forest_section)."""
GRID_CELLS = 1000  # conf/exp/opl_hpo.yaml: 5 beta0 x 2 samplers x 2 procedures x 2 estimators x 25


PARTS = ("fit_saga", "fit_cd", "fit_rf", "predict_lr", "predict_rf", "ope")


def parts(n_trials: int) -> dict[str, float]:
    """Mean seconds per trial of fit (LR by saga and by cd, RF), predictions (LR, RF) and
    OPE, over random trials; the same trials are fitted by both solvers."""
    data = SyntheticLoggedData(beta0=3.0).generate(np.random.default_rng(0))
    estimators = IPS().fit(data), DR().fit(data)
    spaces = {"saga": PolicySpace(solver="saga"), "cd": PolicySpace(solver="cd")}
    study = optuna.create_study(direction="maximize", sampler=Random().create(0))
    times = {name: Timing() for name in PARTS}
    for index in range(n_trials):
        trial = study.ask()
        params = spaces["cd"].suggest(trial)
        study.tell(trial, timed_trial(times, spaces, params, data, estimators, index))
    out = {name: statistics.fmean(t.walls) for name, t in times.items()}
    out["lr_share"] = len(times["fit_cd"].walls) / n_trials
    return out


def timed_trial(times: dict[str, Timing], spaces, params, data, estimators, index: int) -> float:
    """One trial of :func:`parts`, each part's time added to ``times``; its value."""
    train, (ips, dr) = data.train, estimators
    for solver, space in spaces.items():
        if params["model"] == "rf" and solver == "saga":
            continue
        fit = times[f"fit_{solver}" if params["model"] == "lr" else "fit_rf"]
        fit.add(lambda space=space: space.fit(params, train.x, train.a, train.r, 10, index))
    model = fit.value  # cd's, for an LR
    predict = times[f"predict_{params['model']}"]
    predict.add(
        lambda: [softmax(params["beta"] * model.predict(c.x)) for c in (data.val, data.test)]
    )
    pi_val, pi_test = predict.value

    def ope() -> float:
        value = ips.per_sample(pi_val).mean() + dr.per_sample(pi_val).mean()
        data.test.value(pi_test)
        return float(value)

    times["ope"].add(ope)
    return times["ope"].value


def saga(C: float, l1_ratio: float, tol: float, max_iter: int) -> LogisticRegression:
    return LogisticRegression(C=C, l1_ratio=l1_ratio, solver="saga", tol=tol, max_iter=max_iter)


def tpe_region(trace: np.ndarray, n_fits: int) -> dict[str, float]:
    """LR fits at the (C, l1_ratio) a TPE cell proposed: seconds by solver (today's saga:
    tol 1e-4, max_iter 1000; cd) and the share of saga fits stopped at max_iter."""
    data = SyntheticLoggedData(beta0=3.0).generate(np.random.default_rng(0))
    X, y = lr_design(data.train.x, data.train.a, 10), (data.train.r > 0).astype(np.int64)
    lr = trace[trace[:, 1] == 0][:, 2:4]
    rows = lr[np.linspace(0, len(lr) - 1, min(n_fits, len(lr))).astype(int)]
    seconds = {"saga": Timing(), "cd": Timing()}
    capped = 0
    for C, l1_ratio in rows:
        seconds["saga"].add(lambda C=C, l1=l1_ratio: saga(C, l1, 1e-4, 1000).fit(X, y))
        capped += int(seconds["saga"].value.n_iter_[0] >= 1000)
        seconds["cd"].add(lambda C=C, l1=l1_ratio: fit_enet_logistic(X, y, C, l1))
    return {
        "n": len(rows),
        "C_median": float(np.median(rows[:, 0])),
        "C_q10": float(np.quantile(rows[:, 0], 0.1)),
        "C_q90": float(np.quantile(rows[:, 0], 0.9)),
        "saga": statistics.fmean(seconds["saga"].walls),
        "cd": statistics.fmean(seconds["cd"].walls),
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

    def step() -> None:
        trial = study.ask()
        params = space.suggest(trial)
        study.tell(trial, float(np.log(params["beta"]) + rng.normal()))

    times = measure(step, n_trials).walls
    out, start = {}, 0
    for end in checkpoints:
        out[end] = statistics.fmean(times[start:end])
        start = end
    return out


def cell(
    sampler: str,
    n_trials: int,
    logged_data: dict | None = None,
    solver: str = "cd",
    estimator: str = "DR",
    seed: int = 0,
):
    """A CIR-HPO cell to run (DR, synthetic beta0 = 3, seed 0 unless given): its result
    (:func:`lr_share`, its trace)."""
    config = {
        "seed": seed,
        "n_trials": n_trials,
        "logged_data": logged_data
        or {
            "_target_": "sweeper_tasks.opl_hpo.data.synthetic.SyntheticLoggedData",
            "name": "synthetic",
            "beta0": 3.0,
        },
        "sampler": {
            "_target_": f"sweeper_tasks.opl_hpo.samplers.{'TPE' if sampler == 'tpe' else 'Random'}",
            "name": sampler,
        },
        "procedure": {"_target_": "sweeper_tasks.opl_hpo.procedures.CIRHPO", "name": "cir_hpo"},
        "estimator": {
            "_target_": f"sweeper_tasks.opl_hpo.estimators.{estimator}",
            "name": estimator.lower(),
        },
        "policy_space": {"_target_": "sweeper_tasks.opl_hpo.policy.PolicySpace", "solver": solver},
    }
    return lambda: run_cell(config)


def lr_share(result: dict) -> float:
    """The share of a cell's trials that fitted an LR."""
    return float(np.mean(result["trace"]["values"][:, 1] == 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/results/opl.md")
    parser.add_argument("--part-trials", type=int, default=200)
    parser.add_argument("--sampler-trials", type=int, default=1000)
    parser.add_argument("--cell-trials", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each whole cell")
    parser.add_argument("--region-fits", type=int, default=100)
    parser.add_argument("--check-trials", type=int, default=200)
    parser.add_argument("--check-max-iter", type=int, default=20000)
    parser.add_argument("--obd-trials", type=int, default=20)
    args = parser.parse_args()
    bench = Bench(libraries=("numpy", "scikit-learn", "optuna", "numba"))
    tiny = lr_design(np.zeros((4, 10)), np.arange(4), 10)
    jit = measure(lambda: fit_enet_logistic(tiny, np.array([0, 1, 0, 1]), 1.0, 0.5))
    with threadpool_limits(limits=1, user_api="blas"):
        part = parts(args.part_trials)
    checkpoints = [c for c in (100, 250, 500, 1000, 2000) if c <= args.sampler_trials]
    growth = {name: sampler_growth(f, args.sampler_trials, checkpoints)
              for name, f in (("tpe", TPE()), ("random", Random()))}  # fmt: skip
    kinds = (("tpe", "saga"), ("tpe", "cd"), ("random", "cd"))
    calls = {(sampler, solver): cell(sampler, args.cell_trials, solver=solver)
             for sampler, solver in kinds}  # fmt: skip
    cells = interleaved(calls, args.repeats)
    forest = measure(cell("tpe", args.cell_trials, FOREST_DATA, estimator="IPS", seed=2), 1)
    with threadpool_limits(limits=1, user_api="blas"):
        region = tpe_region(cells[("tpe", "saga")].value["trace"]["values"], args.region_fits)
        check = check_against_saga(args.check_trials, args.check_max_iter)
    obd = {"_target_": "sweeper_tasks.opl_hpo.data.obd.OBDLoggedData", "name": "obd"}
    try:
        obd_trial = measure(cell("tpe", args.obd_trials, obd)).wall / args.obd_trials
    except FileNotFoundError:
        obd_trial = None
    lines = [
        "One BLAS thread for the parts and the fits. cd's first call in a process compiles it "
        f"or loads numba's cache: {jit.wall:.1f} s here, once per process, not counted in the "
        "parts below (a cell pays it once per worker).",
        "",
        *cells_section(cells, args),
        *forest_section(forest, args.cell_trials),
        *parts_section(part, args.part_trials),
        *fits_section(region, check, args.cell_trials),
        *sampler_section(growth, checkpoints, args.sampler_trials),
        *obd_section(obd_trial, args.obd_trials),
        *grid_section(cells, args.cell_trials),
    ]
    bench.write(args.out, "# OPL-HPO cells (001): timings", lines)
    print("\n".join(lines))


def cells_section(cells: dict[tuple[str, str], Timing], args) -> list[str]:
    n = args.cell_trials
    return [
        f"## Whole cells (CIR-HPO, DR, synthetic beta0 = 3, {n} trials), in this one run",
        "",
        f"Each cell ran {args.repeats} times, the three interleaved; its figure is the median "
        "wall time, the ratio the median of the runs' ratios.",
        "",
        "| sampler | LR solver | s per cell | s per trial | share of LR trials |",
        "|---|---|---|---|---|",
        *[
            f"| {sampler} | {solver} | {t.wall:.1f} | {t.wall / n:.4f} | {lr_share(t.value):.0%} |"
            for (sampler, solver), t in cells.items()
        ],
        "",
        f"TPE cell, saga / cd: {ratio(cells[('tpe', 'saga')], cells[('tpe', 'cd')]):.1f} times "
        "the time (target: at most 0.05 s per trial with cd). The two TPE cells differ in "
        "what TPE proposes after the first differing fit, so their LR shares may differ.",
        "",
    ]


def forest_section(forest: Timing, n: int) -> list[str]:
    return [
        "Where TPE settles on the random forest, a trial costs more: the TPE cell of the "
        f"`opl_hpo` grid at beta0 = -3, CIR-HPO, IPS, seed 2 ({n} trials, run once) took "
        f"{forest.wall:.1f} s ({forest.wall / n:.4f} s per trial, {forest.cpu / n:.4f} s of CPU), "
        f"with {lr_share(forest.value):.0%} LR trials: an RF trial fits 10 trees and predicts "
        "on D_val and the 10,000 test contexts (the parts below), and TPE's own cost grows "
        "with the conditional space it models.",
        "",
    ]


def parts_section(part: dict[str, float], n_trials: int) -> list[str]:
    return [
        f"## Seconds per trial by part ({n_trials} random trials, synthetic beta0 = 3)",
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
    ]


def fits_section(region: dict[str, float], check: dict[str, float], n: int) -> list[str]:
    return [
        f"## LR fits where TPE samples ({region['n']} of the (C, l1_ratio) the {n}-trial "
        "TPE cell proposed)",
        "",
        f"C: median {region['C_median']:.3g}, 10%-90% {region['C_q10']:.3g}-"
        f"{region['C_q90']:.3g}. saga (tol 1e-4, max_iter 1000): {region['saga']:.4f} s per "
        f"fit, {region['capped']:.0%} stopped at max_iter without converging; cd: "
        f"{region['cd']:.4f} s per fit ({region['saga'] / region['cd']:.0f} times faster, "
        "the same fits one after the other).",
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
    ]


def sampler_section(growth: dict[str, dict[int, float]], checkpoints: list[int], n: int):
    lines = [
        f"## Sampler cost per trial (ask + suggest + tell, dummy objective, {n} trials)",
        "",
        "| window | TPE s/trial | random s/trial |",
        "|---|---|---|",
    ]
    start = 0
    for end in checkpoints:
        lines.append(f"| {start + 1}-{end} | {growth['tpe'][end]:.4f} | "
                     f"{growth['random'][end]:.5f} |")  # fmt: skip
        start = end
    tpe = growth["tpe"]
    return [
        *lines,
        "",
        "TPE builds its Parzen estimators from all past trials at every ask, so its own cost "
        "per trial grows with the number of trials so far (here from "
        f"{tpe[checkpoints[0]]:.4f} s over the first {checkpoints[0]} trials to "
        f"{tpe[checkpoints[-1]]:.4f} s in the last window); random search stays "
        f"flat. With cd, TPE's own cost is a large part of a TPE trial (windows' mean "
        f"{statistics.fmean(tpe[c] for c in checkpoints):.4f} s).",
        "",
    ]


def obd_section(per_trial: float | None, trials: int) -> list[str]:
    if per_trial is None:
        return ["OBD: not measured (no Open Bandit Dataset sample here: `make obd`).", ""]
    return [
        f"OBD (Men sample, 5,000 + 5,000 bts rows, 10,000 random rows, K = 34; TPE, cd, "
        f"{trials} trials, one run): {per_trial:.3f} s per trial, about "
        f"{per_trial * 1000 / 60:.0f} min per 1000-trial cell.",
        "",
    ]


def grid_section(cells: dict[tuple[str, str], Timing], n: int) -> list[str]:
    mean_cell = statistics.fmean([cells[("tpe", "cd")].wall, cells[("random", "cd")].wall])
    cpu_hours = GRID_CELLS * mean_cell * (1000 / n) / 3600
    cpus = os.cpu_count() or 1
    return [
        "## The full `opl_hpo` grid (1000 cells of 1000 trials), with cd",
        "",
        f"Mean of the TPE and random cells here: {mean_cell * 1000 / n:.0f} s at 1000 trials, "
        f"so {cpu_hours:.1f} CPU-hours: about {cpu_hours / cpus:.1f} h on this machine's "
        f"{cpus} CPUs (if it were idle) and {cpu_hours / 64 * 60:.0f} min on a 64-core "
        "cluster (one cell per core; cells are independent).",
    ]


if __name__ == "__main__":
    main()
