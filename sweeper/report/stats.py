"""Paired comparisons with a reference value of one axis (the family's ``task.compare``).

A family's cells with the same seed share their random inputs (common random numbers: in
the bandit family every tuner faces the same contexts and noise), so each value of the
axis is compared with the reference through the per-seed differences of the metric within
the same values of every other axis: their mean, a t-based 95% confidence interval and the
Wilcoxon signed-rank test. Seeds where either side has no FINISHED run are excluded and
counted.
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

from sweeper.report.axes import Axis
from sweeper.report.load import ReportError
from sweeper.report.tables import Table, filter_cells, fmt, fmt_p, require_axis


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


def choose_reference(axis: Axis, wanted: str | None, explicit: bool) -> tuple[str, str]:
    """The baseline value (canonical) and a note when it had to be chosen here.

    An explicit baseline that matches no cell is an error; a default (a family's
    ``task.reference`` in a sweep recorded before baselines existed) that matches none, or
    no baseline at all, falls back to the axis' first value, said in the note.
    """
    for value in axis.values:
        if wanted is None:
            break
        if axis.accepts(value, wanted):
            return value, ""
    if explicit:
        raise ReportError(
            f"baseline {axis.key} '{wanted}' has no cells in this experiment; choose one of "
            f"{', '.join(axis.values)} (--baseline)"
        )
    first = axis.values[0]
    if wanted is None:
        return first, (
            f"paired statistics: {axis.label(first)} is the baseline, the first {axis.key} "
            "(set baseline: in the experiment, baseline= on the command line, or pass "
            "--baseline)"
        )
    return first, (
        f"paired statistics: no {axis.key} '{wanted}' here, so {axis.label(first)} is the "
        "baseline (set baseline: in the experiment, baseline= on the command line, or pass "
        "--baseline)"
    )


def paired_table(
    cells: pd.DataFrame,
    axes: Sequence[Axis],
    axis_key: str,
    reference: str | None,
    metric: str,
    explicit: bool = False,
    where: Mapping[str, Any] | None = None,
) -> tuple[Table, list[str]]:
    """Each value of ``axis_key`` against the reference, within every other-axes group
    (of the cells ``where`` selects)."""
    axis = require_axis(axes, axis_key, "report.paired")
    cells = filter_cells(cells, axes, where or {})
    ref, note = choose_reference(axis, reference, explicit)
    notes = [note] if note else []
    keys = [
        a for a in axes if a.shown and a is not axis and (a.group or cells[a.column].nunique() > 1)
    ]
    ref_cells = cells[cells[axis.column] == ref]
    others = cells[cells[axis.column] != ref]
    # The reference may not take part in an axis the others vary (e.g. CDT has no candidate
    # set): when it shares none of their values there, that axis is not matched on.
    ignored = {a.key for a in keys if not set(ref_cells[a.column]) & set(others[a.column])}

    header = [a.header for a in keys] + [
        axis.header,
        "reference",
        f"mean {metric} difference (95% CI)",
        "Wilcoxon p",
        "seeds paired",
        "seeds excluded",
    ]
    rows, tidy = [], []
    by = [a.column for a in keys]
    unmatched = 0
    groups = others.groupby(by + [axis.column], sort=False) if by else others.groupby(axis.column)
    ordered = sorted(
        groups,
        key=lambda kv: tuple(
            a.values.index(v) if v in a.values else 0
            for a, v in zip(keys + [axis], _tuple(kv[0]), strict=True)
        ),
    )
    for key, frame in ordered:
        key = _tuple(key)
        group_values, value = key[:-1], key[-1]
        mask = np.ones(len(ref_cells), dtype=bool)
        for a, v in zip(keys, group_values, strict=True):
            if a.key not in ignored:
                mask &= (ref_cells[a.column] == v).to_numpy()
        base = ref_cells[mask]
        if not len(base):
            unmatched += 1
            continue
        mine = _finished(frame, metric)
        theirs = _finished(base, metric)
        seeds = sorted(set(frame["seed"].dropna()) | set(base["seed"].dropna()))
        matched = sorted(set(mine) & set(theirs))
        excluded = [s for s in seeds if s not in matched]
        result = paired_difference([mine[s] - theirs[s] for s in matched])
        line = [a.label(v) for a, v in zip(keys, group_values, strict=True)]
        scale = max(abs(result.ci_low), abs(result.ci_high), abs(result.mean))
        scale = scale if np.isfinite(scale) else result.mean
        interval = (
            f"{fmt(result.mean, like=scale)} [{fmt(result.ci_low, like=scale)}, "
            f"{fmt(result.ci_high, like=scale)}]"
            if result.n
            else "no matched seeds"
        )
        line += [
            axis.label(value),
            axis.label(ref),
            interval,
            fmt_p(result.p_value),
            str(result.n),
            _excluded_text(excluded, mine, theirs),
        ]
        rows.append(line)
        record: dict[str, Any] = {
            a.header: a.label(v) for a, v in zip(keys, group_values, strict=True)
        }
        record.update(
            {
                axis.header: axis.label(value),
                "reference": axis.label(ref),
                "metric": metric,
                "n_pairs": result.n,
                "n_excluded": len(excluded),
                "excluded_seeds": ",".join(str(s) for s in excluded),
                "mean": float(np.mean([mine[s] for s in matched])) if matched else math.nan,
                "mean_reference": float(np.mean([theirs[s] for s in matched]))
                if matched
                else math.nan,
                "mean_difference": result.mean,
                "ci95_low": result.ci_low,
                "ci95_high": result.ci_high,
                "wilcoxon_p": result.p_value,
            }
        )
        tidy.append(record)
    caption = (
        f"Paired comparison with {axis.label(ref)}: per-seed difference of {metric} "
        f"({axis.key} minus {axis.label(ref)}) on the seeds both finished, within the same "
        "other axes (the same environment draws). Mean difference with a t-based 95% "
        "confidence interval and the two-sided Wilcoxon signed-rank p-value; seeds that "
        "one side lacks (failed or not run) are excluded and counted."
    )
    if unmatched:
        notes.append(
            f"paired statistics: {unmatched} group(s) have no {axis.label(ref)} cells with the "
            "same other axes and are left out (report.paired.where can select comparable cells)"
        )
    table = Table("paired", f"Paired differences against {axis.label(ref)}", caption, header, rows)
    table.tidy = pd.DataFrame(tidy)
    return table, notes


def _tuple(key: Any) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def _finished(frame: pd.DataFrame, metric: str) -> dict[int, float]:
    finished = frame[frame["status"] == "FINISHED"]
    if metric not in finished:
        return {}
    values = pd.to_numeric(finished[metric], errors="coerce")
    return {int(s): float(v) for s, v in zip(finished["seed"], values, strict=True) if pd.notna(v)}


def _excluded_text(excluded: list[int], mine: dict, theirs: dict) -> str:
    if not excluded:
        return "0"
    missing_mine = [s for s in excluded if s not in mine]
    missing_ref = [s for s in excluded if s not in theirs]
    parts = []
    if missing_mine:
        parts.append(f"seed {', '.join(map(str, missing_mine))} missing here")
    if missing_ref:
        parts.append(f"seed {', '.join(map(str, missing_ref))} missing for the reference")
    return f"{len(excluded)} ({'; '.join(parts)})"
