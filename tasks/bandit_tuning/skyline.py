"""The skyline: the best fixed hyperparameter value in hindsight, and each tuner's gap to it.

For every (algorithm, dataset) the ``skyline`` experiment runs Fixed over a grid of values on
seeds that ``main`` also ran; the best value is the one with the lowest mean final regret over
those seeds (a choice made with the answers in hand, so it is optimistic for the skyline: the
minimum of ten noisy means). Each tuner of ``main`` is then compared on the same seeds: its
mean, the gap mean(tuner) - mean(best fixed), and the paired standard error of that gap.
The papers never print this number; it says how much a tuner leaves on the table.

Run after both reports exist::

    python -m sweeper_tasks.bandit_tuning.skyline docs/results/main/cells.csv \\
        docs/results/skyline/cells.csv --out docs/results/skyline
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

KEYS = ["algorithm", "dataset"]
VALUE = "α"
"""The column of the fixed value in the skyline report's cells.csv (its axis name)."""


def _finished(cells: pd.DataFrame) -> pd.DataFrame:
    return cells[cells["status"] == "FINISHED"]


def skyline_gaps(
    tuned: pd.DataFrame, fixed: pd.DataFrame, metric: str = "final_regret"
) -> pd.DataFrame:
    """One row per (algorithm, dataset, tuner): the best fixed value, the tuner's mean and
    its gap to the best fixed value on the seeds both ran.

    ``tuned``: cells with columns algorithm, dataset, tuner, seed, status and ``metric``
    (``main``'s cells.csv); ``fixed``: the same plus the value column ``α`` (the skyline's).
    """
    tuned, fixed = _finished(tuned), _finished(fixed)
    rows = []
    for (algorithm, dataset), grid in fixed.groupby(KEYS, sort=False):
        own = tuned[(tuned["algorithm"] == algorithm) & (tuned["dataset"] == dataset)]
        seeds = sorted(set(grid["seed"]) & set(own["seed"]))
        if not seeds:
            continue
        grid = grid[grid["seed"].isin(seeds)]
        per_value = grid.pivot_table(index="seed", columns=VALUE, values=metric)
        per_value = per_value.dropna(axis=1)  # values that lack a seed are not comparable
        if per_value.empty:
            continue
        means = per_value.mean(axis=0)
        best = means.idxmin()
        skyline = per_value[best]
        for tuner, frame in own[own["seed"].isin(seeds)].groupby("tuner", sort=False):
            series = frame.set_index("seed")[metric].reindex(skyline.index)
            paired = (series - skyline).dropna()
            n = len(paired)
            rows.append(
                {
                    "algorithm": algorithm,
                    "dataset": dataset,
                    "best fixed value": best,
                    "best fixed mean": float(skyline.mean()),
                    "tuner": tuner,
                    "tuner mean": float(series.mean()),
                    "gap": float(paired.mean()) if n else np.nan,
                    "gap s.e.": float(paired.std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan,
                    "relative gap": float(paired.mean() / skyline.mean()) if n else np.nan,
                    "seeds": n,
                }
            )
    return pd.DataFrame(rows)


def to_markdown(gaps: pd.DataFrame) -> str:
    """The gaps as a Markdown table, one row per (algorithm, dataset), tuners as columns."""
    tuners = list(dict.fromkeys(gaps["tuner"]))
    header = ["algorithm", "dataset", "best fixed value", "best fixed mean", *tuners]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (algorithm, dataset), frame in gaps.groupby(KEYS, sort=False):
        first = frame.iloc[0]
        cells = [algorithm, dataset, f"{first['best fixed value']:g}"]
        cells.append(f"{first['best fixed mean']:.1f}")
        by_tuner = frame.set_index("tuner")
        for tuner in tuners:
            if tuner not in by_tuner.index:
                cells.append("")
                continue
            row = by_tuner.loc[tuner]
            cells.append(
                f"{row['tuner mean']:.1f} ({row['gap']:+.1f} ± {row['gap s.e.']:.1f}, "
                f"{100 * row['relative gap']:+.0f}%)"
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tuned", help="main's cells.csv (the tuners)")
    parser.add_argument("fixed", help="the skyline's cells.csv (Fixed over a grid, column α)")
    parser.add_argument("--out", required=True, help="directory for gaps.md and gaps.csv")
    args = parser.parse_args(argv)
    gaps = skyline_gaps(pd.read_csv(args.tuned), pd.read_csv(args.fixed))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gaps.to_csv(out / "gaps.csv", index=False)
    seeds = sorted(set(gaps["seeds"])) if len(gaps) else []
    (out / "gaps.md").write_text(
        "# Each tuner's gap to the best fixed value in hindsight\n\n"
        "Per (algorithm, dataset): the fixed value with the lowest mean final regret over the "
        "seeds both experiments ran (an optimistic skyline: the minimum of the grid's means), "
        "its mean, and each tuner's mean with (gap to the skyline ± its paired standard error, "
        f"gap relative to the skyline). Seeds per cell: {seeds}. Made by `python -m "
        "sweeper_tasks.bandit_tuning.skyline` from main's and the skyline's cells.csv.\n\n"
        + to_markdown(gaps)
    )


if __name__ == "__main__":
    main()
