"""Paired differences behind VERDICT.md, from this directory's cells.csv.

Run: .venv/bin/python docs/results/ncab/verdict_numbers.py
Each pair: per seed, the first tuner's value minus the second's (the environment is the
same for every seed: common random numbers), mean with a t 95% interval, the two-sided
Wilcoxon signed-rank p (exact for 10 seeds; NaN when every difference is 0), wins.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

PAIRS = [
    ("grid_search", "hyperband"),
    ("grid_search", "bayes_opt_se"),
    ("grid_search", "bayes_opt_matern"),
    ("random_search", "hyperband"),
    ("random_search", "bayes_opt_se"),
    ("random_search", "bayes_opt_matern"),
    ("hyperband", "sd2me_hard"),
    ("hyperband", "ad2me_soft"),
    ("bayes_opt_matern", "sd2me_hard"),
    ("bayes_opt_matern", "ad2me_soft"),
    ("bayes_opt_se", "ad2me_soft"),
    ("ad2me_hard", "sd2me_hard"),
    ("ad2me_soft", "sd2me_soft"),
]
DROPS = [("sd2me_soft", "sd2me_hard"), ("ad2me_soft", "ad2me_hard")]


def paired(frame: pd.DataFrame, a: str, b: str, metric: str) -> str:
    wide = frame.pivot(index="seed", columns="tuner.name", values=metric)
    diff = (wide[a] - wide[b]).dropna().to_numpy()
    half = stats.t.ppf(0.975, len(diff) - 1) * diff.std(ddof=1) / np.sqrt(len(diff))
    p = stats.wilcoxon(diff).pvalue if np.any(diff != 0) else float("nan")
    wins = int((diff > 0).sum())
    return (
        f"| {a} - {b} | {diff.mean():.1f} [{diff.mean() - half:.1f}, {diff.mean() + half:.1f}]"
        f" | {p:.3g} | {wins}/{len(diff)} |"
    )


def main() -> None:
    cells = pd.read_csv(Path(__file__).with_name("cells.csv"))
    cells = cells[cells["status"] == "FINISHED"]
    print("Cumulative F-score, paired over seeds")
    print("| pair (first minus second) | mean [95% CI] | Wilcoxon p | first higher |")
    print("|---|---|---|---|")
    for a, b in PAIRS:
        print(paired(cells, a, b, "cumulative_reward"))
    print("\nRuntime per cell (s), paired over seeds (loaded machine; see the bench)")
    print("| pair (first minus second) | mean [95% CI] | Wilcoxon p | first higher |")
    print("|---|---|---|---|")
    for a, b in DROPS:
        print(paired(cells, a, b, "runtime_s"))


if __name__ == "__main__":
    main()
