"""The statistics of paired comparisons, and the report's table of them.

A family's cells with the same seed share their random inputs (common random numbers: in
the bandit family every tuner faces the same contexts and noise), so each option of the
compared axis is compared with the baseline through the per-seed differences of a metric
(:meth:`sweeper.report.results.Results.compare` computes them): their mean, a t-based
confidence interval, the Wilcoxon signed-rank test, Holm's adjustment of its p-values over
the comparisons of one table, and the floor below which that test cannot go with few seeds.
:func:`paired_table` renders a ``compare()`` frame as the report's table.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from sweeper.report.axes import Axis, canon
from sweeper.report.tables import Table, fmt, fmt_p


@dataclass(frozen=True)
class Paired:
    """Differences ``other - reference`` on matched seeds."""

    n: int
    mean: float
    ci_low: float
    ci_high: float
    p_value: float


def paired_difference(differences: Sequence[float], level: float = 0.95) -> Paired:
    """Mean of the paired differences, its t interval and the Wilcoxon signed-rank p-value."""
    d = np.asarray(differences, dtype=float)
    n = len(d)
    if n == 0:
        return Paired(0, math.nan, math.nan, math.nan, math.nan)
    mean = float(d.mean())
    if n < 2:
        return Paired(n, mean, math.nan, math.nan, math.nan)
    half = float(sps.t.ppf(0.5 + level / 2, n - 1) * d.std(ddof=1) / math.sqrt(n))
    if np.all(d == 0):
        p_value = 1.0
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p_value = float(sps.wilcoxon(d).pvalue)
    return Paired(n, mean, mean - half, mean + half, p_value)


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjustment of ``p_values`` (Holm 1979): the family-wise error rate
    of rejecting every adjusted p below alpha is at most alpha. NaN stays NaN and is not
    counted in the family."""
    p = np.asarray(p_values, dtype=float)
    out = np.full_like(p, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    m = len(finite)
    if not m:
        return out
    order = finite[np.argsort(p[finite], kind="stable")]
    stepped = (m - np.arange(m)) * p[order]
    out[order] = np.minimum(1.0, np.maximum.accumulate(stepped))
    return out


def wilcoxon_floor(n: int) -> float:
    """The smallest two-sided p-value the exact Wilcoxon signed-rank test can give with
    ``n`` pairs: every difference of one sign, 2 / 2**n (0.0625 at 5 seeds)."""
    return 2.0 ** (1 - n) if n > 0 else math.nan


FLOOR_NOTE = (
    "with {n} seeds the two-sided Wilcoxon p-value cannot go below {floor:.3g} (every "
    "difference of one sign): these rows cannot reach p < 0.05 however large the difference"
)


def display(axis: Axis, raw: Any) -> str:
    """A raw value of ``axis`` as the report shows it: the label of the merged column it
    belongs to (``tl`` -> TL/Syndicated in ``main``), else its own label."""
    text = raw if isinstance(raw, str) else canon(raw)
    token = next((t for t, members in axis.members.items() if text in members), text)
    return axis.label(token)


def paired_table(
    compared: pd.DataFrame, axes: Sequence[Axis], by: Axis, adaptive: bool
) -> tuple[Table, list[str]]:
    """The report's table of a ``Results.compare()`` frame: display labels beside the raw
    names (its CSV joins with ``cells.csv``), the sign in the title and the heading."""
    groups = [a for a in axes if a.key in compared.columns and a is not by]
    metric = str(compared["metric"].iloc[0])
    baseline = display(by, compared["baseline"].iloc[0])
    option_first = compared["sign"].iloc[0].endswith("- baseline")
    sign = f"{by.key} − {baseline}" if option_first else f"{baseline} − {by.key}"
    header = [a.header for a in groups] + [by.header, "baseline",
              f"{sign}: mean {metric} difference (95% t CI)", "Wilcoxon p", "Holm p"]  # fmt: skip
    if adaptive:
        header += ["confidence sequence (decided)"]
    header += ["seeds paired", "seeds excluded"]
    rows, tidy = [], compared.copy()
    for record in compared.to_dict("records"):
        scale = max(abs(record["ci_low"]), abs(record["ci_high"]), abs(record["difference"]))
        scale = scale if np.isfinite(scale) else record["difference"]
        interval = (
            f"{fmt(record['difference'], like=scale)} [{fmt(record['ci_low'], like=scale)}, "
            f"{fmt(record['ci_high'], like=scale)}]"
            if record["n_pairs"]
            else "no matched seeds"
        )
        line = [display(a, record[a.key]) for a in groups]
        line += [display(by, record[by.key]), baseline, interval, fmt_p(record["p_wilcoxon"]),
                 fmt_p(record["p_holm"])]  # fmt: skip
        if adaptive:
            line.append(f"[{fmt(record['cs_low'], like=scale)}, "
                        f"{fmt(record['cs_high'], like=scale)}] {record['decided']}")  # fmt: skip
        line += [str(record["n_pairs"]), _excluded_text(record)]
        rows.append(line)
    for a in [*groups, by]:  # the display label beside the raw name
        column = a.header if a.header != a.key else f"{a.key}_label"
        tidy.insert(tidy.columns.get_loc(a.key) + 1, column, [display(a, v) for v in tidy[a.key]])
    tidy.insert(tidy.columns.get_loc("baseline") + 1, "baseline_label", baseline)
    title = (
        f"Paired differences: each {by.key} minus {baseline}"
        if option_first
        else f"Paired differences: {baseline} minus each {by.key}"
    )
    table = Table("paired", title, _caption(metric, sign, len(compared), adaptive), header, rows,
                  tidy=tidy)  # fmt: skip
    return table, _notes(compared)


def _caption(metric: str, sign: str, count: int, adaptive: bool) -> str:
    text = (
        f"Per-seed difference of {metric}, {sign}, on the seeds both finished, within the "
        "same other axes (the same environment draws). Mean difference with a t-based 95% "
        "confidence interval, the two-sided Wilcoxon signed-rank p-value, and that p-value "
        f"Holm-adjusted over the {count} comparisons of this table (the family: every row); "
        "seeds that one side lacks (failed or not run) are excluded and counted."
    )
    if adaptive:
        text += (
            " Seeds until decided stopped adding seeds as comparisons were decided, so the t "
            "interval and the p-values (which assume a number of seeds fixed in advance) are "
            "not valid here: the confidence sequence, anytime-valid, is the interval that "
            "decided (docs/seeds.md)."
        )
    return text


def _notes(compared: pd.DataFrame) -> list[str]:
    floors = compared[compared["p_floor"] > 0.05]
    if not len(floors):
        return []
    n = int(floors["n_pairs"].max())
    return [f"paired statistics: {len(floors)} comparison(s) " + FLOOR_NOTE.format(
        n=n, floor=wilcoxon_floor(n))]  # fmt: skip


def _excluded_text(record: Mapping[str, Any]) -> str:
    if not record["n_excluded"]:
        return "0"
    parts = []
    if record["missing_option"]:
        parts.append(f"seed {record['missing_option'].replace(',', ', ')} missing here")
    if record["missing_baseline"]:
        parts.append(f"seed {record['missing_baseline'].replace(',', ', ')} missing for the "
                     "baseline")  # fmt: skip
    return f"{record['n_excluded']} ({'; '.join(parts)})"
