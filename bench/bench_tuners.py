"""Tuners at paper scale: LinUCB on the simulated bandit, and the switching Lipschitz benchmark.

Part 1 (003 Section 5, Figure 2 / Tables 4-6): LinUCB on the simulation (T=14000, K=120,
d=25), each tuner over the same seeds (paired: the environment depends on the seed only),
tuned interval [0.1, 5] and candidate set C1 = {0.1, 1, 2, 3, 4, 5}.
Part 2 (003 Appendix A.3, Figure 4): Zooming TS-R (CDT's top layer), Zooming, Oracle, SD²ME and
AD²ME on the triangle and sine families, a shorter horizon by default.
Part 3 (the same figure in the released script's setting, experiment ``lipschitz_released``):
Zooming TS-R, Zooming and the Oracle at several horizons (layout and epoch scaled to T), with
the default start of each epoch (the centre of [0, 1]) and with a random start.

Cells run through the project's real configs (Hydra composition of conf/) and cell functions,
in a process pool. Numbers go to bench/results/tuners.md next to the papers'; each part written
starts with the header of the run that measured it (bench/harness.py: its commit, machine
and load).

    .venv/bin/python bench/bench_tuners.py                       # both parts, defaults
    .venv/bin/python bench/bench_tuners.py --part linucb --seeds 10
    .venv/bin/python bench/bench_tuners.py --part lipschitz --lipschitz-horizon 90000
    .venv/bin/python bench/bench_tuners.py --part released --released-horizons 12000 90000
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
from pathlib import Path
from typing import Any

import harness
import numpy as np
from harness import Bench, interleaved, ratio
from hydra import compose, initialize_config_dir

from sweeper.grid import cell_config, expand
from sweeper.paths import CONF_DIR
from sweeper_tasks.bandit_tuning.lipschitz_cell import at_horizon
from sweeper_tasks.building import locate

OUT = Path(__file__).resolve().parent / "results" / "tuners.md"
PRACTICAL_TS = math.pi / 2  # the TS scale constant of the authors' released ZoomingTS_exp code

# 003 Table 4 (C1 column, LinUCB, simulations) and Tables 5/6 (CDT, LinUCB, simulation).
PAPER_LINUCB = {
    "theory": None,
    "op": 383.62,
    "tl": 343.14,
    "cdt": 303.14,  # Table 5, T1 = T^(2/(p+3)); Table 6 k=3 with T1=0: 298.28
}

LINUCB_ROWS: list[tuple[str, list[str]]] = [
    ("theory", ["tuner=theory"]),
    ("op", ["tuner=op"]),
    ("tl", ["tuner=tl"]),
    ("cdt", ["tuner=cdt"]),
    ("cdt_released", ["tuner=cdt_released"]),
    ("cdt_released on [0, 5]", ["tuner=cdt_released", "tuner.interval=[0.0,5.0]"]),
    (
        "cdt (ts_constant=pi/2, tau0=0.1)",
        ["tuner=cdt", f"tuner.ts_constant={PRACTICAL_TS}", "tuner.tau0=0.1"],
    ),
    ("zooming_ts_double_restart", ["tuner=zooming_ts_double_restart"]),
    ("ad2me", ["tuner=ad2me"]),
    ("sd2me", ["tuner=sd2me"]),
    *[(f"fixed {v}", ["tuner=fixed", f"tuner.value={v}"]) for v in (0.1, 0.5, 1.0, 2.0, 3.0, 5.0)],
]


RELEASED_ROWS: list[tuple[str, list[str]]] = [
    ("cdt", ["tuner=cdt"]),
    ("cdt_released", ["tuner=cdt_released"]),
    ("op (C1)", ["tuner=op"]),
    ("op_released ({0.5, 1, 3, 5, 7})", ["tuner=op_released"]),
    ("theory (delta 0.1, S = ||theta*||)", ["tuner=theory"]),
    ("theory (delta 0.1, S = 1)", ["tuner=theory", "algorithm.norm_bound=1.0"]),
    (
        "theory (delta 0.05, S = 1, released)",
        ["tuner=theory", "algorithm.confidence=0.05", "algorithm.norm_bound=1.0"],
    ),
    ("fixed 0.5", ["tuner=fixed", "tuner.value=0.5"]),
    ("fixed 1", ["tuner=fixed", "tuner.value=1.0"]),
]
"""Issue #16 item 2: the paper's CDT, the released code's (HEAD d67bc02) and their baselines."""

OVERHEAD_ROWS: list[tuple[str, list[str]]] = [
    ("op", ["tuner=op"]),
    ("cdt", ["tuner=cdt"]),
    ("cdt_released", ["tuner=cdt_released"]),
    ("zooming", ["tuner=zooming"]),
    ("zooming_ts_double_restart", ["tuner=zooming_ts_double_restart"]),
    ("oracle", ["tuner=oracle"]),
    ("sd2me", ["tuner=sd2me"]),
    ("ad2me", ["tuner=ad2me"]),
]
"""Issue #16 item 4: every continuum tuner's cell time against OP's on the same cell."""


def linucb_common(horizon: int) -> list[str]:
    """LinUCB on the simulation, CDT's box [0.1, 5] and the candidate set C1 (003 Sec. 5)."""
    return [
        "algorithm=linucb",
        "dataset=simulation",
        f"horizon={horizon}",
        "space.interval=[0.1,5]",
        "space.candidates=[0.1,1,2,3,4,5]",
    ]


def sensitivity_rows() -> list[tuple[str, list[str]]]:
    """CDT's Zooming TS scale: tau0 and the constant of s0, against OP on the same seeds."""
    rows = [("op", ["tuner=op"])]
    for ts_name, ts_constant in (("52 pi", 52 * math.pi), ("pi/2", PRACTICAL_TS)):
        for tau0 in (0.05, 0.1, 0.25, 0.5):
            rows.append(
                (
                    f"cdt tau0={tau0} s0 const={ts_name}",
                    ["tuner=cdt", f"tuner.tau0={tau0}", f"tuner.ts_constant={ts_constant}"],
                )
            )
    return rows


def lipschitz_rows(horizon: int, tau0: float, ts_constant: float) -> list[tuple[str, list[str]]]:
    scale = [f"tuner.tau0={tau0}", f"tuner.ts_constant={ts_constant}"]
    return [
        (
            "Zooming TS-R (cdt)",
            [
                "tuner=cdt",
                "tuner.warmup_rounds=0",
                "tuner.expected_changes=3",
                "tuner.restart_multiplier=10",
                *scale,
            ],
        ),
        ("Zooming", ["tuner=zooming", f"tuner.tau0={tau0}"]),
        ("Oracle", ["tuner=oracle", *scale]),
        ("SD²ME", ["tuner=sd2me"]),
        ("AD²ME", ["tuner=ad2me"]),
    ]


PAPER_EPOCH = 22800  # 003 A.3's H = 10 ceil((T/c(T))^(3/4)) at T = 90000, c(T) = 3


def released_configs(
    horizon: int, seeds: int, random_start: bool, epoch: int | None = None
) -> list[dict[str, Any]]:
    """The ``lipschitz_released`` cells with change points and epoch scaled to ``horizon``;
    ``epoch`` replaces the released H = 24000 (at T = 90000) before scaling."""
    overrides = ["+exp=lipschitz_released", f"seeds={seeds}"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):

        def composer(extra: list[str]):
            return compose(config_name="config", overrides=extra)

        cells = expand(composer(overrides), composer, overrides)
    configs = []
    for cell in cells:
        tuner = {**cell.config["tuner"], "random_start": random_start}
        if epoch and tuner.get("restart_every"):
            tuner["restart_every"] = epoch
        configs.append(at_horizon({**cell.config, "tuner": tuner}, horizon))
    return configs


def measure_released(
    horizon: int, seeds: int, random_start: bool, pool, epoch: int | None = None
) -> list[str]:
    configs = released_configs(horizon, seeds, random_start, epoch)
    jobs = [(c, pool.apply_async(run, (c,))) for c in configs]
    lines: list[str] = []
    for family in ("triangle", "sine"):
        results = {}
        for label, name in (
            ("Zooming TS-R (cdt)", "cdt"),
            ("Zooming", "zooming"),
            ("Oracle", "oracle"),
        ):
            values = [
                job.get()
                for c, job in jobs
                if c["dataset"]["family"] == family and c["tuner"]["name"] == name
            ]
            results[label] = summarise(values)
            print(f"{family} T={horizon} {label:24s} {results[label]['mean']:9.1f}", flush=True)
        start = "random start" if random_start else "centre start"
        H = f"H = {epoch} (A.3's formula)" if epoch else "H = 24000 (released)"
        lines += [
            f"### {family}, T={horizon}, {seeds} seeds, {start}, {H} scaled",
            "",
            *table(results, "Zooming TS-R (cdt)"),
            "",
        ]
    return lines


def summarise(values: list[tuple[float, float]]) -> dict[str, Any]:
    """Mean, std and runtime of (final regret, runtime) pairs, one per seed."""
    regret = np.array([v[0] for v in values])
    return {
        "regret": regret,
        "mean": float(regret.mean()),
        "std": float(regret.std(ddof=1)) if len(regret) > 1 else 0.0,
        "runtime": float(np.mean([v[1] for v in values])),
    }


def compose_cell(overrides: list[str]) -> dict[str, Any]:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return cell_config(compose(config_name="config", overrides=overrides))


def run(config: dict[str, Any]) -> tuple[float, float]:
    result = locate(config["cell"])(config)
    return result["summary"]["final_regret"], result["summary"]["runtime_s"]


def measure(rows, common: list[str], seeds: int, pool) -> dict[str, dict[str, Any]]:
    jobs = {}
    for label, overrides in rows:
        for seed in range(seeds):
            config = compose_cell([*common, *overrides, f"seed={seed}"])
            jobs[(label, seed)] = pool.apply_async(run, (config,))
    out = {}
    for label, _ in rows:
        values = [jobs[(label, s)].get() for s in range(seeds)]
        out[label] = summarise(values)
        print(f"{label:40s} {out[label]['mean']:9.1f} ± {out[label]['std']:7.1f}", flush=True)
    return out


def paired_lines(results, reference: str) -> list[str]:
    ref = results[reference]["regret"]
    lines = ["| tuner | mean of (tuner - " + reference + ") | s.e. |", "|---|---|---|"]
    for label, r in results.items():
        if label == reference:
            continue
        diff = r["regret"] - ref
        se = diff.std(ddof=1) / math.sqrt(len(diff)) if len(diff) > 1 else 0.0
        lines.append(f"| {label} | {diff.mean():+.1f} | {se:.1f} |")
    return lines


def measure_overhead(horizon: int, repeats: int) -> list[str]:
    """Cell time of each continuum tuner over OP's, in this one process, rows interleaved:
    each repeat runs every row once on seed 0 in a rotated order (bench/harness.py), so a
    change of the machine's load hits all rows alike; the ratio is the median over repeats
    of (tuner's cell time / OP's cell time in the same repeat).
    """
    configs = {
        label: compose_cell([*linucb_common(horizon), *overrides, "seed=0"])
        for label, overrides in OVERHEAD_ROWS
    }
    calls = {label: (lambda c=config: locate(c["cell"])(c)) for label, config in configs.items()}
    times = interleaved(calls, repeats)
    lines = [
        f"## Per-cell cost of the continuum tuners against OP (LinUCB, simulation, T={horizon})",
        "",
        f"Issue #16 item 4. One process, {repeats} repeats, rows interleaved (rotated order), "
        "seed 0; ratio = median over repeats of the tuner's cell time over OP's in the same "
        "repeat. Target: every ratio <= 1.20.",
        "",
        "| tuner | median cell time s | ratio to OP |",
        "|---|---|---|",
    ]
    for label, timing in times.items():
        to_op = ratio(timing, times["op"])
        lines.append(f"| {label} | {timing.wall:.2f} | {to_op:.2f} |")
        print(f"{label:30s} {timing.wall:.2f}s ratio {to_op:.2f}", flush=True)
    return [*lines, ""]


def table(results, reference: str, paper: dict[str, float | None] | None = None) -> list[str]:
    ref = results[reference]["regret"] if reference in results else None
    head = "| tuner | mean final regret | std | wins vs " + reference + " | runtime s/cell |"
    lines = [head + (" paper |" if paper else ""), "|" + "---|" * (6 if paper else 5)]
    for label, r in results.items():
        wins = (
            ""
            if ref is None or label == reference
            else f"{int((r['regret'] < ref).sum())}/{len(ref)}"
        )
        row = f"| {label} | {r['mean']:.1f} | {r['std']:.1f} | {wins} | {r['runtime']:.1f} |"
        if paper:
            value = paper.get(label)
            row += f" {value:.2f} |" if value else " - |"
        lines.append(row)
    return lines


HEADER = [
    "# Tuners: measured numbers next to the papers'",
    "",
    "Written by `bench/bench_tuners.py` (cells run through conf/ and the cell functions; paired "
    "seeds; each part rewrites only its own section, and starts with the header of the run "
    "that measured it). The regret numbers are exact for their seeds; the runtimes depend on "
    "the machine's load when each part ran (its header says it).",
    "",
]
PARTS = (
    "linucb",
    "paired100",
    "overhead",
    "sensitivity",
    "lipschitz",
    "released",
    "notes",
)  # notes: written by hand, kept


def write_sections(out: Path, sections: dict[str, list[str]], header: list[str]) -> None:
    """Replace the sections measured in this run (each after ``header``, this run's), keep
    the others already in ``out``."""
    harness.write_sections(out, HEADER, PARTS, sections, header)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--part",
        choices=["all", "linucb", "paired100", "overhead", "sensitivity", "lipschitz", "released"],
        default="all",
    )
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--horizon", type=int, default=14000)
    parser.add_argument("--lipschitz-seeds", type=int, default=5)
    parser.add_argument("--lipschitz-horizon", type=int, default=90000)
    parser.add_argument("--layout-seed", type=int, default=0)
    parser.add_argument("--released-seeds", type=int, default=10)
    parser.add_argument("--released-horizons", type=int, nargs="+", default=[12000, 30000, 90000])
    parser.add_argument("--paired-seeds", type=int, default=100)
    parser.add_argument("--overhead-repeats", type=int, default=5)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    bench = Bench(libraries=("numpy", "scipy"), busy=args.processes)
    sections: dict[str, list[str]] = {}
    with mp.get_context("spawn").Pool(args.processes) as pool:
        if args.part in ("all", "linucb"):
            results = measure(LINUCB_ROWS, linucb_common(args.horizon), args.seeds, pool)
            sections["linucb"] = [
                f"## LinUCB on the simulated linear bandit (T={args.horizon}, K=120, d=25, "
                f"{args.seeds} seeds)",
                "",
                "Paper column: 003 Table 4 (C1: TL 343.14, OP 383.62) and Table 5 (CDT 303.14); "
                "20 repetitions there. Interval [0.1, 5], candidates C1.",
                "",
                *table(results, "cdt", PAPER_LINUCB),
                "",
            ]
        if args.part in ("all", "paired100"):
            results = measure(RELEASED_ROWS, linucb_common(args.horizon), args.paired_seeds, pool)
            sections["paired100"] = [
                f"## The paper's CDT, the released code's and their baselines: LinUCB, simulation, "
                f"T={args.horizon}, {args.paired_seeds} paired seeds",
                "",
                "Issue #16 item 2. `cdt`: 000/003 Algorithms 1-2 as written (box [0.1, 5]); "
                "`cdt_released`: the authors' code at HEAD d67bc02 (box [0, 4], no restart, "
                "first point in [0.3, 0.7], released gap rule, 30 warm-up rounds); OP over C1 and "
                "over the released script's {0.5, 1, 3, 5, 7}; Theory with delta 0.1 (ours) and "
                "0.05 (released run.py); S = ||theta*|| (003 Section 3, the configs' default) or 1 "
                "(the released script's thetan = 1).",
                "",
                *table(results, "cdt"),
                "",
                "Mean paired difference to `cdt` (negative: lower regret than cdt), with its "
                "standard error:",
                "",
                *paired_lines(results, "cdt"),
                "",
            ]
        if args.part in ("all", "overhead"):
            sections["overhead"] = measure_overhead(args.horizon, args.overhead_repeats)
        if args.part in ("all", "sensitivity"):
            results = measure(sensitivity_rows(), linucb_common(args.horizon), args.seeds, pool)
            sections["sensitivity"] = [
                f"## CDT's scale (tau0, constant of s0) on LinUCB, T={args.horizon}, "
                f"{args.seeds} seeds",
                "",
                "r = sqrt(13/2 tau0^2 ln T / n) and s0 = sqrt(c tau0^2 ln T): c = 52 pi in 000 "
                "Eq. 5, pi/2 in the authors' released A.3 (Lipschitz) experiments.",
                "",
                *table(results, "op"),
                "",
            ]
        if args.part in ("all", "lipschitz"):
            sd = math.sqrt(0.1)
            lipschitz: list[str] = []
            for family in ("triangle", "sine"):
                common = [
                    "cell=sweeper_tasks.bandit_tuning.lipschitz_cell.run_cell",
                    "dataset=lipschitz",
                    f"dataset.family={family}",
                    f"dataset.layout_seed={args.layout_seed}",
                    f"horizon={args.lipschitz_horizon}",
                ]
                for tag, ts_constant in (
                    ("paper s0 (52 pi)", 52 * math.pi),
                    ("practical s0 (pi/2)", PRACTICAL_TS),
                ):
                    rows = lipschitz_rows(args.lipschitz_horizon, sd, ts_constant)
                    results = measure(rows, common, args.lipschitz_seeds, pool)
                    lipschitz += [
                        f"## Switching Lipschitz, {family}, T={args.lipschitz_horizon}, "
                        f"{args.lipschitz_seeds} seeds, tau0 = sqrt(0.1), {tag}",
                        "",
                        *table(results, "Zooming TS-R (cdt)"),
                        "",
                    ]
            sections["lipschitz"] = lipschitz
        if args.part in ("all", "released"):
            released = [
                "## Switching Lipschitz in the released script's setting (`lipschitz_released`)",
                "",
                "Change points 22861, 47734, 74817 and epoch H = 24000 at T = 90000, scaled "
                "with T; peaks 0.95, 0.7, 0.05, 0.45 in that order; r = sqrt(13/2 sigma^1.5 "
                "ln T / n), s0 = sqrt(pi sigma^2 ln T), sigma = sqrt(0.1). Centre start: each "
                "epoch starts from the centre of [0, 1] (the default); random start: from a "
                "uniformly random point, as the released script does. The last table of each "
                "horizon replaces the released epoch with A.3's H = 10 ceil((T/3)^(3/4)) = "
                "22800 (scaled the same way), which restarts shortly before each change.",
                "",
            ]
            for horizon in args.released_horizons:
                for random_start, epoch in ((False, None), (True, None), (False, PAPER_EPOCH)):
                    released += measure_released(
                        horizon, args.released_seeds, random_start, pool, epoch
                    )
            sections["released"] = released
    write_sections(args.out, sections, bench.header())
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
