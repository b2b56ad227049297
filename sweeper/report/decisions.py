"""Seeds until decided, reported (docs/seeds.md): each comparison's state, seeds and
confidence sequence at the end (a table), and its half-width against seeds (a figure), from
the ``decisions.json`` the sweep's parent run carries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from sweeper.report.tables import Table, fmt  # noqa: E402

COLOURS = {"better": "tab:green", "worse": "tab:red", "equivalent": "tab:blue",
           "undecided": "tab:gray"}  # fmt: skip


def decisions_table(rows: list[dict[str, Any]]) -> Table:
    """One row per comparison: group, option, seeds, mean difference, interval, state."""
    tidy = pd.DataFrame([{k: v for k, v in r.items() if k != "path"} for r in rows])
    states = tidy["state"].value_counts()
    caption = (
        "Seeds until decided: each option against the reference, paired by seed, with its "
        "anytime-valid confidence sequence at the end (docs/seeds.md). "
        + ", ".join(f"{n} {state}" for state, n in states.items())
        + f"; {int(tidy['seeds'].sum())} paired seeds in all."
    )
    body = [
        [str(r.group), str(r.option), str(r.reference), str(r.seeds), fmt(r.mean_difference),
         f"[{fmt(r.low)}, {fmt(r.high)}]", str(r.state)]
        for r in tidy.itertuples()
    ]  # fmt: skip
    header = ["group", "option", "reference", "seeds", "mean difference", "interval", "state"]
    return Table("decisions", "Seeds until decided", caption, header, body, tidy=tidy)


def decisions_figure(rows: list[dict[str, Any]], path: Path) -> str:
    """Each comparison's half-width against seeds, coloured by its final state."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for row in rows:
        steps = row.get("path") or []
        if steps:
            n = [s[0] for s in steps]
            half = [(s[3] - s[2]) / 2 for s in steps]
            ax.plot(n, half, color=COLOURS.get(row["state"], "black"), alpha=0.5, lw=1)
    for state, colour in COLOURS.items():
        ax.plot([], [], color=colour, label=state)
    ax.set_xlabel("seeds")
    ax.set_ylabel("half-width of the confidence sequence")
    ax.set_yscale("log")
    ax.legend(title="final state")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return (
        "Seeds until decided: each comparison's confidence-sequence half-width (on the lead "
        "metric's difference to the reference) after each seed, coloured by its final state"
    )
