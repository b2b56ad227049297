"""The numbers the papers publish, transcribed cell by cell so reports can show them beside ours.

Each ``Published`` entry names its table, the metric, the cell it describes (in the report's
axis names: ``algorithm``, ``tuner``, ``dataset`` take config option names; other keys such
as ``candidates``, ``T1``, ``k`` or ``K`` are axis names an experiment's ``report:`` section
gives its axes, see ``AXIS_NAMES``) and the value. ``conditions`` are the settings of the
paper's runs (config keys, e.g. ``horizon``): a report still shows the number when its runs
differ, but flags it. Sources:

- 003: Kang, Hsieh, Lee, *Online Continuous Hyperparameter Optimization for Generalized
  Linear Contextual Bandits*, TMLR 2024 (arXiv 2302.09440v3), Tables 1-6.
- 002: Ding, Liu, Hsieh, Sharpnack, *Syndicated Bandits*, NeurIPS 2022, Table 1.

003 writes "TL/Syndicated" for one column: TL for the one-hyperparameter algorithms and
Syndicated for GLOC and SGD-TS (its Section 5, items (3) and (4)); the entries below say
``tl`` or ``syndicated`` accordingly. 003's Figure 2 publishes curves only, no numbers; its
endpoints for TL, OP and CDT appear as the C1 columns of Table 4 and the default (T1 =
T^(2/(p+3))) column of Table 5.
"""

from __future__ import annotations

from typing import Any

from sweeper_tasks.published import Published

DISPLAY_NAMES: dict[str, str] = {
    # algorithms (003 Section 5)
    "linucb": "LinUCB",
    "lints": "LinTS",
    "ucb_glm": "UCB-GLM",
    "glm_tsl": "GLM-TSL",
    "laplace_ts": "Laplace-TS",
    "gloc": "GLOC",
    "sgd_ts": "SGD-TS",
    # tuners
    "theory": "Theory",
    "fixed": "Fixed",
    "op": "OP",
    "tl": "TL",
    "tl_combined": "TL-Combined",
    "syndicated": "Syndicated",
    "cdt": "CDT",
    "zooming_ts_double_restart": "Zooming TS-DR",
    "zooming": "Zooming",
    "oracle": "Oracle",
    "sd2me": "SD²ME",
    "ad2me": "AD²ME",
    # datasets
    "simulation": "Simulation",
    "movielens": "Movielens",
    "yahoo": "Yahoo",
    "lipschitz": "Lipschitz",
    "simulation_grid": "Simulation (003 A.1)",
    "simulation_lipschitz_check": "Simulation (003 A.2)",
    "simulation_syndicated": "Simulation (002)",
    "movielens_syndicated": "Movielens (002)",
}
"""The papers' spelling of config option names, for table headers and legends."""

AXIS_NAMES: dict[str, str] = {
    "dataset.n_arms": "K",
    "space.candidates": "candidates",
}
"""Default report names of config keys that the papers' tables use as columns."""

SECTION5 = {"horizon": 14000}
"""003 Section 5: T = 14,000 on the simulation (d = 25, K = 120) and Movielens (K = 300)."""

SIMULATION5 = {**SECTION5, "dataset.n_features": 25, "dataset.n_arms": 120}


TABLES: dict[str, str] = {
    "003 Table 1": "003 (Kang et al., TMLR 2024) Table 1: running time (s) per cell, "
    "settings of Figure 2 (T = 14,000, 20 repetitions)",
    "003 Table 2": "003 Table 2: cumulative reward on the Yahoo R6A dataset (T = 2,881)",
    "003 Table 3": "003 Table 3 (Appendix A.1): the exploration rate in {0.1, 0.5, ..., 10} "
    "with the lowest mean cumulative regret over 5 repetitions (d = 10, T = 8,000)",
    "003 Table 4": "003 Table 4 (Appendix A.4.1): cumulative regret of TL/Syndicated and OP "
    "with candidate sets C1 = {0.1, 1, 2, 3, 4, 5} and C2 = {0.1, 0.25, 0.5, 0.75, 1, "
    "1.5, ..., 5} (T = 14,000)",
    "003 Table 5": "003 Table 5 (Appendix A.4.2): cumulative regret of CDT with warm-up "
    "T1 = 0 and T1 = T^(2/(p+3)) (T = 14,000)",
    "003 Table 6": "003 Table 6 (Appendix A.4.2): cumulative regret of CDT with restarts "
    "every T2 = k T^((p+2)/(p+3)), k = 1, 2, 3 (T = 14,000)",
    "002 Table 1": "002 (Ding et al., NeurIPS 2022) Table 1: best grid-search exploration "
    "rate, its cumulative regret (std) and Theory's, over 5 repetitions (d = 5, K = 100, "
    "T = 10,000; features fixed over time or changing every round)",
}
"""Each table's caption, as a report cites it."""

ALGORITHMS = ("linucb", "lints", "ucb_glm", "glm_tsl", "laplace_ts", "gloc", "sgd_ts")
TWO_HYPERPARAMETERS = frozenset({"gloc", "sgd_ts"})
DATASETS = ("simulation", "movielens")


def _tl(algorithm: str) -> str:
    """003's "TL/Syndicated" column: Syndicated for the two-hyperparameter algorithms."""
    return "syndicated" if algorithm in TWO_HYPERPARAMETERS else "tl"


def _conditions(dataset: str) -> dict[str, Any]:
    return SIMULATION5 if dataset == "simulation" else SECTION5


# 003 Table 1, rows "Algorithm Setting Theory TL OP CDT" (seconds).
_TABLE1 = {
    ("linucb", "simulation"): (2.11, 4.01, 3.70, 6.89),
    ("linucb", "movielens"): (2.17, 3.87, 2.95, 7.31),
    ("lints", "simulation"): (2.21, 4.10, 3.95, 7.63),
    ("lints", "movielens"): (2.04, 4.09, 3.45, 7.71),
    ("ucb_glm", "simulation"): (7.74, 9.84, 9.71, 12.67),
    ("ucb_glm", "movielens"): (7.89, 9.64, 9.35, 13.05),
    ("glm_tsl", "simulation"): (304.28, 306.98, 306.02, 309.54),
    ("glm_tsl", "movielens"): (294.17, 295.87, 294.83, 298.81),
    ("laplace_ts", "simulation"): (523.62, 526.31, 526.24, 531.15),
    ("laplace_ts", "movielens"): (500.19, 503.45, 503.91, 509.65),
    ("gloc", "simulation"): (486.58, 489.31, 490.24, 593.15),
    ("gloc", "movielens"): (474.87, 476.52, 477.16, 481.03),
    ("sgd_ts", "simulation"): (67.42, 70.62, 69.42, 73.68),
    ("sgd_ts", "movielens"): (62.09, 66.48, 64.68, 67.31),
}

# 003 Table 2, rows "Method UCB-GLM GLM-TSL Laplace-TS GLOC SGD-TS" (cumulative reward).
_TABLE2 = {
    "theory": {"ucb_glm": 221.51, "glm_tsl": 214.67, "gloc": 217.38, "sgd_ts": 206.73},
    "cdt": {"ucb_glm": 221.69, "glm_tsl": 218.27, "laplace_ts": 217.05, "gloc": 217.95,
            "sgd_ts": 218.35},
    "op": {"ucb_glm": 217.25, "glm_tsl": 217.08, "laplace_ts": 213.95, "gloc": 216.28,
           "sgd_ts": 215.58},
    "tl": {"ucb_glm": 218.95, "glm_tsl": 219.36, "laplace_ts": 214.42, "gloc": 218.19,
           "sgd_ts": 215.02},
}  # fmt: skip
_TABLE2_THEORY_NOTE = (
    "the Theory row has four numbers for five columns; we read the empty cell as Laplace-TS "
    "(whose only hyperparameter, a step size, has no theoretical value) - an inference"
)

# 003 Table 3: the best exploration rate per algorithm and K.
_TABLE3 = {
    60: {"linucb": 2.5, "lints": 1.0, "ucb_glm": 1.5, "gloc": 4.5, "glm_tsl": 1.5},
    120: {"linucb": 3.0, "lints": 1.5, "ucb_glm": 2.5, "gloc": 5.0, "glm_tsl": 2.0},
}

# 003 Table 4, rows "Algorithm Setting | C1: TL/Syndicated OP | C2: TL/Syndicated OP".
_TABLE4 = {
    ("linucb", "simulation"): (343.14, 383.62, 356.23, 389.91),
    ("linucb", "movielens"): (346.16, 390.10, 359.10, 408.67),
    ("lints", "simulation"): (828.41, 869.30, 874.34, 925.29),
    ("lints", "movielens"): (519.09, 666.35, 516.62, 667.77),
    ("ucb_glm", "simulation"): (271.45, 350.85, 298.68, 367.97),
    ("ucb_glm", "movielens"): (381.00, 397.58, 406.29, 412.62),
    ("glm_tsl", "simulation"): (433.27, 445.43, 448.21, 458.71),
    ("glm_tsl", "movielens"): (446.74, 678.91, 458.23, 718.46),
    ("laplace_ts", "simulation"): (510.03, 568.81, 530.29, 567.10),
    ("laplace_ts", "movielens"): (949.51, 1063.92, 958.10, 1009.23),
    ("gloc", "simulation"): (406.28, 417.30, 414.82, 427.05),
    ("gloc", "movielens"): (571.36, 513.90, 568.91, 520.72),
    ("sgd_ts", "simulation"): (448.29, 551.63, 458.09, 557.04),
    ("sgd_ts", "movielens"): (1016.72, 1084.13, 1038.94, 1073.91),
}

# 003 Table 5, rows "Algorithm Setting | T1 = 0 | T1 = T^(2/(p+3))" (CDT).
_TABLE5 = {
    ("linucb", "simulation"): (298.28, 303.14),
    ("linucb", "movielens"): (313.29, 307.19),
    ("lints", "simulation"): (677.03, 669.45),
    ("lints", "movielens"): (343.18, 340.85),
    ("ucb_glm", "simulation"): (299.74, 300.54),
    ("ucb_glm", "movielens"): (314.41, 311.72),
    ("glm_tsl", "simulation"): (339.49, 333.07),
    ("glm_tsl", "movielens"): (428.82, 432.47),
    ("laplace_ts", "simulation"): (520.29, 520.35),
    ("laplace_ts", "movielens"): (903.16, 900.10),
    ("gloc", "simulation"): (414.70, 418.05),
    ("gloc", "movielens"): (455.39, 461.78),
    ("sgd_ts", "simulation"): (430.05, 425.98),
    ("sgd_ts", "movielens"): (843.91, 838.06),
}
T1_DEFAULT = "T^(2/(p+3))"
"""The label of 003's default warm-up length (118 rounds for p = 1, 45 for p = 2 at T = 14,000)."""

# 003 Table 6, rows "Algorithm Setting | k = 1 | k = 2 | k = 3" (CDT).
_TABLE6 = {
    ("linucb", "simulation"): (328.28, 300.62, 298.28),
    ("linucb", "movielens"): (310.06, 303.10, 313.29),
    ("lints", "simulation"): (717.77, 670.90, 677.03),
    ("lints", "movielens"): (360.12, 352.19, 343.18),
    ("ucb_glm", "simulation"): (314.01, 316.95, 299.74),
    ("ucb_glm", "movielens"): (347.92, 325.58, 314.41),
    ("glm_tsl", "simulation"): (320.21, 331.43, 339.49),
    ("glm_tsl", "movielens"): (439.98, 428.91, 428.82),
    ("laplace_ts", "simulation"): (565.15, 540.61, 520.29),
    ("laplace_ts", "movielens"): (948.10, 891.91, 903.16),
    ("gloc", "simulation"): (417.05, 414.70, 415.05),
    ("gloc", "movielens"): (441.85, 455.39, 462.24),
    ("sgd_ts", "simulation"): (450.14, 430.05, 414.57),
    ("sgd_ts", "movielens"): (852.98, 843.91, 830.35),
}
_TABLE6_NOTE = (
    "Table 6 repeats Table 5's T1 = 0 numbers in its k = 3 column (k = 2 for GLOC and "
    "SGD-TS), so it appears to have been run without warm-up"
)

# 002 Table 1, rows "Algorithm Feature-type Best-alpha Cum.reg.(std) Theoretical-cum.reg.(std)".
_TABLE1_002 = {
    ("linucb", "fixed"): (4.0, 357.21, 188.72, 364.99, 151.54),
    ("linucb", "changing"): (1.5, 312.69, 42.53, 582.59, 523.60),
    ("lints", "fixed"): (1.5, 336.44, 137.01, 576.83, 110.48),
    ("lints", "changing"): (3.5, 352.79, 109.84, 488.99, 141.34),
}


def _build() -> list[Published]:
    out: list[Published] = []
    for (algorithm, dataset), values in _TABLE1.items():
        tuners = ("theory", _tl(algorithm), "op", "cdt")
        note = (
            "003's TL column; Syndicated for GLOC and SGD-TS"
            if algorithm in TWO_HYPERPARAMETERS
            else ""
        )
        for tuner, value in zip(tuners, values, strict=True):
            out.append(
                Published(
                    "003 Table 1",
                    "runtime_s",
                    {"algorithm": algorithm, "dataset": dataset, "tuner": tuner},
                    value,
                    conditions=_conditions(dataset),
                    note=note if tuner == "syndicated" else "",
                )
            )
    for tuner, row in _TABLE2.items():
        for algorithm, value in row.items():
            out.append(
                Published(
                    "003 Table 2",
                    "cumulative_reward",
                    {
                        "algorithm": algorithm,
                        "dataset": "yahoo",
                        "tuner": _tl(algorithm) if tuner == "tl" else tuner,
                    },
                    value,
                    conditions={"horizon": 2881},
                    note=_TABLE2_THEORY_NOTE if tuner == "theory" else "",
                )
            )
    for k, row in _TABLE3.items():
        for algorithm, value in row.items():
            out.append(
                Published(
                    "003 Table 3",
                    "optimum",
                    {"algorithm": algorithm, "dataset": "simulation_grid", "K": k},
                    value,
                    conditions={"horizon": 8000, "dataset.n_features": 10, "dataset.n_arms": k},
                )
            )
    for (algorithm, dataset), values in _TABLE4.items():
        cells = [("C1", _tl(algorithm)), ("C1", "op"), ("C2", _tl(algorithm)), ("C2", "op")]
        for (candidates, tuner), value in zip(cells, values, strict=True):
            out.append(
                Published(
                    "003 Table 4",
                    "final_regret",
                    {
                        "algorithm": algorithm,
                        "dataset": dataset,
                        "tuner": tuner,
                        "candidates": candidates,
                    },
                    value,
                    conditions=_conditions(dataset),
                )
            )
    for (algorithm, dataset), values in _TABLE5.items():
        for t1, value in zip(("0", T1_DEFAULT), values, strict=True):
            out.append(
                Published(
                    "003 Table 5",
                    "final_regret",
                    {"algorithm": algorithm, "dataset": dataset, "tuner": "cdt", "T1": t1},
                    value,
                    conditions=_conditions(dataset),
                )
            )
    for (algorithm, dataset), values in _TABLE6.items():
        for k, value in zip((1, 2, 3), values, strict=True):
            out.append(
                Published(
                    "003 Table 6",
                    "final_regret",
                    {"algorithm": algorithm, "dataset": dataset, "tuner": "cdt", "k": k},
                    value,
                    conditions=_conditions(dataset),
                    note=_TABLE6_NOTE,
                )
            )
    conditions_002 = {"horizon": 10000, "dataset.n_features": 5, "dataset.n_arms": 100}
    for (algorithm, features), (best, regret, sd, theory, theory_sd) in _TABLE1_002.items():
        cell = {"algorithm": algorithm, "dataset": "simulation", "features": features}
        out += [
            Published("002 Table 1", "optimum", cell, best, conditions=conditions_002),
            Published(
                "002 Table 1",
                "at_optimum",
                cell,
                regret,
                sd=sd,
                conditions=conditions_002,
            ),
            Published(
                "002 Table 1",
                "final_regret",
                {**cell, "tuner": "theory"},
                theory,
                sd=theory_sd,
                conditions=conditions_002,
            ),
        ]
    return out


PUBLISHED: list[Published] = _build()
"""Every transcribed number, in table order."""


# --------------------------------------------------------------------------- 004 (appended)

DISPLAY_NAMES.update(
    {
        "grid_search": "Grid Search",
        "random_search": "Random Search",
        "bayes_opt": "Bayesian",
        "hyperband": "Hyperband",
        "movielens_retrieval": "Movielens retrieval",
        # the variants of 004 Table 1's rows (conf/exp/ncab.yaml sets tuner.name)
        "sd2me_hard": "SD²ME-hard",
        "sd2me_soft": "SD²ME-soft",
        "ad2me_hard": "AD²ME-hard",
        "ad2me_soft": "AD²ME-soft",
        "bayes_opt_se": "Bayesian-SE",
        "bayes_opt_matern": "Bayesian-Matérn",
    }
)
TABLES["004 Table 1"] = (
    "004 (Lu et al., WSDM 2022) Table 1: cumulative F-score (mean ± sd over 10 runs) and "
    "computation time (s) per run, T = 10,000, on Ali-Display-Ad with DSSM embeddings "
    "(other data than MovieLens: compare orderings, not values)"
)

# 004 Table 1, rows "Algorithm, Cumulative F-score (sd), Computation Time", by the tuner
# name conf/exp/ncab.yaml gives each row.
_TABLE1_004 = {
    "grid_search": (3396, 0.0, 517),
    "random_search": (3467, 64.9, 528),
    "hyperband": (3550, 49.2, 546),
    "bayes_opt_matern": (3564, 14.5, 43426),
    "bayes_opt_se": (3533, 20.7, 37283),
    "sd2me_hard": (3673, 5.9, 612),
    "sd2me_soft": (3671, 4.3, 568),
    "ad2me_hard": (3714, 15.2, 745),
    "ad2me_soft": (3720, 19.8, 671),
}
_CONDITIONS_004 = {"horizon": 10000, "dataset.name": "ali_display_ad"}


def _build_004() -> list[Published]:
    out = []
    for tuner, (score, sd, seconds) in _TABLE1_004.items():
        cell = {"tuner": tuner}
        out += [
            Published(
                "004 Table 1", "cumulative_reward", cell, score, sd=sd, conditions=_CONDITIONS_004
            ),
            Published("004 Table 1", "runtime_s", cell, seconds, conditions=_CONDITIONS_004),
        ]
    return out


PUBLISHED += _build_004()
