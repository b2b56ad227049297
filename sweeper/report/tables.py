"""Tables laid out like the papers': one row per combination of the shown axes (e.g.
algorithm and dataset), one column per value of the family's compare axis (e.g. tuner) and
of the pivoted axes (e.g. C1 / C2 side by side), each cell the mean +- standard deviation
over seeds, with the published number for the same cell in an adjacent column labelled
with its table.

FAILED cells are never averaged in: a cell's statistics use its FINISHED seeds and its
text says how many seeds failed; the failures table lists each one with its error.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sweeper.report.axes import Axis, canon, raw_values
from sweeper.report.load import MARKS, ReportError
from sweeper.report.spec import PublishedChoice, TableSpec
from sweeper.task import Task
from sweeper.tree import flatten

DAGGER = "†"


@dataclass
class Table:
    """A rendered table: display text (header, rows, bold cells), footnotes, tidy data."""

    name: str
    title: str
    caption: str
    header: list[str]
    rows: list[list[str]]
    bold: set[tuple[int, int]] = field(default_factory=set)
    footnotes: list[str] = field(default_factory=list)
    tidy: pd.DataFrame = field(default_factory=pd.DataFrame)


def fmt(value: Any, like: Any = None) -> str:
    """Two decimals as the papers print them; three significant digits below 1.

    ``like``: format ``value`` with the precision chosen for ``like`` (a standard deviation
    printed as its mean is).
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    value = float(value)
    scale = abs(float(like)) if like is not None and math.isfinite(float(like)) else abs(value)
    if scale >= 1 or scale == 0:
        return f"{value:.2f}"
    digits = max(2, 2 - int(math.floor(math.log10(scale))))
    return f"{value:.{digits}f}"


def fmt_p(value: float) -> str:
    return "—" if not math.isfinite(value) else f"{value:.3g}"


def find_axis(axes: Sequence[Axis], key: str) -> Axis | None:
    for axis in axes:
        if key in (axis.key, axis.name):
            return axis
    return None


def require_axis(axes: Sequence[Axis], key: str, where: str) -> Axis:
    axis = find_axis(axes, key)
    if axis is None:
        raise ReportError(
            f"{where}: '{key}' is not an axis of this experiment; its axes are "
            f"{', '.join(a.key for a in axes)}"
        )
    return axis


def filter_cells(
    cells: pd.DataFrame, axes: Sequence[Axis], where: Mapping[str, Any]
) -> pd.DataFrame:
    """Cells whose axis ``key`` equals ``value`` (a value or its label) for every item."""
    keep = np.ones(len(cells), dtype=bool)
    for key, wanted in where.items():
        axis = require_axis(axes, str(key), "where")
        keep &= np.array([axis.accepts(v, wanted) for v in cells[axis.column]], dtype=bool)
    return cells[keep]


def group_stats(cells: pd.DataFrame, metric: str) -> dict[str, Any]:
    """Statistics of ``metric`` over the FINISHED cells; FAILED ones are only counted."""
    finished = cells[cells["status"] == "FINISHED"]
    values = pd.to_numeric(finished[metric], errors="coerce") if metric in finished else None
    values = values.dropna() if values is not None else pd.Series(dtype=float)
    failed = cells[cells["status"] == "FAILED"]
    return {
        "n": int(len(values)),
        "n_failed": int(len(failed)),
        "mean": float(values.mean()) if len(values) else float("nan"),
        "std": float(values.std(ddof=1)) if len(values) > 1 else float("nan"),
        "min": float(values.min()) if len(values) else float("nan"),
        "max": float(values.max()) if len(values) else float("nan"),
        "failed_seeds": ",".join(str(s) for s in sorted(failed["seed"].dropna().tolist())),
    }


def _combos(cells: pd.DataFrame, axes: Sequence[Axis]) -> list[tuple[str, ...]]:
    """Value combinations of ``axes`` present in ``cells``, in the axes' display order."""
    if not axes:
        return [()]
    present = set(map(tuple, cells[[a.column for a in axes]].astype(str).to_numpy()))
    return [c for c in itertools.product(*(a.values for a in axes)) if c in present]


def _label(axes: Sequence[Axis], combo: Sequence[str], sep: str = ", ") -> str:
    """A column header: 'TL', or 'candidates=C1, TL' (other axes say their name)."""
    return sep.join(
        a.label(v) if a.group else f"{a.name}={a.label(v)}"
        for a, v in zip(axes, combo, strict=True)
    )


def select_published(
    published: Iterable[Any],
    choices: list[PublishedChoice] | None,
    metric: str,
    axes: Sequence[Axis],
    varying: Sequence[Axis] = (),
) -> list[tuple[str, list[Any], dict[str, Any]]]:
    """The published tables to show for ``metric``: (table, its entries, where).

    Without explicit ``choices``, a table is shown when each of its cells names only axes of
    this experiment and names every axis in ``varying`` (the non-group axes the report's
    table varies): 003 Table 1's runtimes describe default CDT, not every warm-up length.
    """
    entries = [p for p in published if p.metric == metric]
    if choices is None:

        def fits(entry: Any) -> bool:
            named = [find_axis(axes, k) for k in entry.cell]
            return None not in named and all(a in named for a in varying)

        tables = dict.fromkeys(p.table for p in entries)
        choices = [
            PublishedChoice(t) for t in tables if all(fits(p) for p in entries if p.table == t)
        ]
    out = []
    for choice in choices:
        chosen = [
            p
            for p in entries
            if p.table == choice.table
            and all(
                k in p.cell and canon(p.cell[k]).casefold() == canon(v).casefold()
                for k, v in choice.where.items()
            )
        ]
        if chosen:
            out.append((choice.table, chosen, dict(choice.where)))
    return out


def match(entry: Any, values: Mapping[str, str], axes: Sequence[Axis], where: Mapping) -> bool:
    """Does the published ``entry`` describe the cell whose axis values are ``values``?"""
    for key, wanted in entry.cell.items():
        if key in where:
            continue
        axis = find_axis(axes, key)
        if axis is None:
            return False
        value = values.get(axis.key)
        if value is None:
            if len(axis.values) != 1:
                return False
            value = axis.values[0]
        if not axis.accepts(value, wanted):
            return False
    return True


def condition_mismatch(entry: Any, cells: pd.DataFrame) -> list[str]:
    """Settings of the paper's run (``entry.conditions``) that these cells do not share."""
    if not len(cells) or not getattr(entry, "conditions", None):
        return []
    config = cells["config"].iloc[0]
    flat = flatten(config) if isinstance(config, Mapping) else {}
    return [
        f"{key}={canon(want)} (here {canon(flat[key])})"
        for key, want in entry.conditions.items()
        if key in flat and canon(flat[key]) != canon(want)
    ]


def metric_table(
    cells: pd.DataFrame,
    axes: Sequence[Axis],
    spec: TableSpec,
    published: Iterable[Any],
    captions: Mapping[str, str],
    compare: str | None = None,
) -> Table:
    """Mean (+- sd) of ``spec.metric`` per row and column combination of the axes; the
    ``compare`` axis (the family's) joins the pivoted ones as columns."""
    cells = filter_cells(cells, axes, spec.where)
    col_axes = [require_axis(axes, k, f"table '{spec.name}' pivot") for k in spec.pivot]
    lines = find_axis(axes, compare) if compare and not spec.transpose else None
    if lines is not None and lines not in col_axes and (len(lines.values) > 1 or not col_axes):
        col_axes.append(lines)
    # Rows: the shown axes left, except those this table's cells hold one value of (an
    # axis its ``where`` fixed), group axes aside.
    row_axes = [
        a
        for a in axes
        if a.shown and a not in col_axes and (a.group or cells[a.column].nunique() > 1)
    ]
    rows = _combos(cells, row_axes)
    cols = _combos(cells, col_axes)
    varying = [a for a in row_axes + col_axes if not a.group and cells[a.column].nunique() > 1]
    sources = select_published(published, spec.published, spec.metric, axes, varying)
    by = [a.column for a in row_axes + col_axes]
    groups = dict(iter(cells.groupby(by, sort=False))) if by else {(): cells}

    stats: dict[tuple[int, int], dict[str, Any]] = {}
    found: dict[tuple[int, int, str], tuple[float, list[str]]] = {}
    notes: dict[str, None] = {}  # the matched entries' own notes, in order, once each
    for i, row in enumerate(rows):
        for j, col in enumerate(cols):
            key = tuple(row) + tuple(col)
            frame = groups.get(key)
            if frame is None:
                continue
            stats[i, j] = group_stats(frame, spec.metric)
            values = {a.key: v for a, v in zip(row_axes + col_axes, key, strict=True)}
            for table, entries, where in sources:
                for entry in entries:
                    if match(entry, values, axes, where):
                        found[i, j, table] = (entry.value, condition_mismatch(entry, frame))
                        if getattr(entry, "note", ""):
                            notes[f"{table}: {entry.note}."] = None
                        break
    tables_per_col = {
        j: [t for t, _, _ in sources if any((i, j, t) in found for i in range(len(rows)))]
        for j in range(len(cols))
    }

    header = [a.header for a in row_axes]
    layout: list[tuple[int, str | None]] = []
    for j, col in enumerate(cols):
        header.append(_label(col_axes, col) or spec.title)
        layout.append((j, None))
        for table in tables_per_col[j]:
            header.append(f"{_label(col_axes, col) or 'published'} [{table}]")
            layout.append((j, table))
    full = max((s["n"] + s["n_failed"] for s in stats.values()), default=0)
    text_rows, bold, tidy, mismatches = [], set(), [], {}
    column_means: list[dict[int, float]] = []
    for i, row in enumerate(rows):
        line = [a.label(v) for a, v in zip(row_axes, row, strict=True)]
        means = {}
        for j, table in layout:
            if table is None:
                s = stats.get((i, j))
                line.append(_cell_text(s, spec.stat, full) if s else "")
                if s and s["n"]:
                    means[len(line) - 1] = s["mean"]
            else:
                value, differs = found.get((i, j, table), (None, []))
                line.append("" if value is None else fmt(value) + (DAGGER if differs else ""))
                if differs:
                    mismatches.setdefault(table, set()).update(differs)
        if spec.better and len(means) > 1 and not spec.transpose:
            pick = min if spec.better == "min" else max
            best = pick(means.values())
            bold |= {(i, c) for c, m in means.items() if m == best}
        column_means.append(means)
        text_rows.append(line)
        for j, col in enumerate(cols):
            s = stats.get((i, j))
            if s is None:
                continue
            record = {
                a.header: a.label(v) for a, v in zip(row_axes + col_axes, row + col, strict=True)
            }
            record.update({"metric": spec.metric, **s})
            for table in tables_per_col[j]:
                value, differs = found.get((i, j, table), (None, []))
                record[f"published [{table}]"] = value
                record[f"published [{table}] settings differ"] = "; ".join(differs)
            tidy.append(record)

    if spec.transpose and spec.better:  # the compared values are rows: best per column
        pick = min if spec.better == "min" else max
        for column in {c for means in column_means for c in means}:
            values = {i: m[column] for i, m in enumerate(column_means) if column in m}
            best = pick(values.values())
            bold |= {(i, column) for i, v in values.items() if v == best}
    footnotes = [
        f"{captions.get(t, t)}."
        for t, _, _ in sources
        if any(t in v for v in tables_per_col.values())
    ]
    footnotes += list(notes)
    for table, differs in mismatches.items():
        footnotes.append(
            f"{DAGGER} {table} was computed with other settings than these runs: "
            + ", ".join(sorted(differs))
            + "; compare with care."
        )
    caption = _caption(spec, full)
    if spec.transpose:
        caption = caption.replace("the best in each row is bold", "the best in each column is bold")
    return Table(
        spec.name, spec.title, caption, header, text_rows, bold, footnotes, pd.DataFrame(tidy)
    )


def _cell_text(s: Mapping[str, Any], stat: str, full: int) -> str:
    if not s["n"]:
        n = s["n_failed"]
        return f"failed ({n} seed{'s' if n != 1 else ''})" if n else ""
    text = fmt(s["mean"])
    if stat == "mean_sd" and s["n"] > 1:
        text += f" ± {fmt(s['std'], like=s['mean'])}"
    seeds = f"{s['n']} seed{'s' if s['n'] != 1 else ''}"
    if s["n_failed"]:
        text += f" ({seeds}; {s['n_failed']} failed)"
    elif s["n"] < full:
        text += f" ({seeds})"
    return text


def _caption(spec: TableSpec, full: int) -> str:
    what = "mean ± standard deviation" if spec.stat == "mean_sd" else "mean"
    better = {
        "min": " Lower is better; the best in each row is bold.",
        "max": " Higher is better; the best in each row is bold.",
    }.get(spec.better or "", "")
    seeds = f"{full} seed{'s' if full != 1 else ''}"
    return (
        f"{spec.title}: {what} over the FINISHED seeds of each cell (up to {seeds}); "
        f"failed seeds are counted, not averaged.{better}"
    )


def optimum_table(
    cells: pd.DataFrame,
    axes: Sequence[Axis],
    axis_key: str,
    metric: str,
    published: Iterable[Any],
    choices: list[PublishedChoice] | None,
    captions: Mapping[str, str],
    task: Task,
) -> Table:
    """The value of ``axis_key`` with the best mean ``metric`` per combination of the other
    axes (a grid search's optimum, e.g. 003 Table 3's per algorithm and K).

    Published entries with metric ``optimum`` give the paper's best value, those with
    metric ``at_optimum`` the paper's ``metric`` there."""
    target = require_axis(axes, axis_key, "report.optimum")
    better = task.better(metric) or "min"
    group_axes = [a for a in axes if a.shown and a is not target]
    sources = select_published(published, choices, "optimum", axes)
    at_best_sources = select_published(published, choices, "at_optimum", axes)
    header = [a.header for a in group_axes] + [
        f"best {target.header}",
        f"{task.metric(metric).title} at best",
        "values tried",
    ]
    header += [f"best {target.header} [{t}]" for t, _, _ in sources]
    header += [f"at best [{t}]" for t, _, _ in at_best_sources]
    rows, tidy, mismatches = [], [], {}
    for combo in _combos(cells, group_axes):
        mask = np.ones(len(cells), dtype=bool)
        for a, v in zip(group_axes, combo, strict=True):
            mask &= (cells[a.column] == v).to_numpy()
        frame = cells[mask]
        per_value = {v: group_stats(f, metric) for v, f in frame.groupby(target.column)}
        scored = {v: s for v, s in per_value.items() if s["n"]}
        values = {a.key: v for a, v in zip(group_axes, combo, strict=True)}
        line = [a.label(v) for a, v in zip(group_axes, combo, strict=True)]
        if scored:
            pick = min if better == "min" else max
            best = pick(scored, key=lambda v: scored[v]["mean"])
            s = scored[best]
            line += [
                target.label(best),
                f"{fmt(s['mean'])} ± {fmt(s['std'], like=s['mean'])}",
                str(len(per_value)),
            ]
        else:
            best, s = None, {}
            line += ["", "all failed", str(len(per_value))]
        record = {a.header: a.label(v) for a, v in zip(group_axes, combo, strict=True)}
        record.update({f"best {target.header}": target.label(best) if best else None})
        record.update({f"{metric} mean": s.get("mean"), f"{metric} std": s.get("std")})
        record["values tried"] = len(per_value)
        for group_sources in (sources, at_best_sources):
            for table, entries, where in group_sources:
                hit = next((e for e in entries if match(e, values, axes, where)), None)
                differs = condition_mismatch(hit, frame) if hit else []
                if differs:
                    mismatches.setdefault(table, set()).update(differs)
                line.append("" if hit is None else fmt(hit.value) + (DAGGER if differs else ""))
                record[f"{hit.metric if hit else 'published'} [{table}]"] = (
                    hit.value if hit else None
                )
        rows.append(line)
        tidy.append(record)
    footnotes = [
        f"{captions.get(t, t)}." for t in dict.fromkeys(t for t, _, _ in sources + at_best_sources)
    ]
    for table, differs in mismatches.items():
        footnotes.append(
            f"{DAGGER} {table} was computed with other settings than these runs: "
            + ", ".join(sorted(differs))
            + "; compare with care."
        )
    word = "lowest" if better == "min" else "highest"
    caption = (
        f"The {target.header} with the {word} mean {metric} over FINISHED seeds, per "
        f"combination of the other axes (a grid search)."
    )
    return Table(
        "optimum",
        f"Best {target.header}",
        caption,
        header,
        rows,
        set(),
        footnotes,
        pd.DataFrame(tidy),
    )


def failures_table(
    cells: pd.DataFrame, axes: Sequence[Axis], unfinished: Sequence[Mapping]
) -> Table:
    """Every FAILED cell (its newest run failed and no run of it finished), with its error."""
    failed = cells[cells["status"] == "FAILED"] if len(cells) else cells
    header = ["cell", "seed", "run_id", "error"]
    rows, tidy = [], []
    for _, cell in failed.iterrows():
        label = cell_label(cell, axes)
        error = str(cell.get("error") or "unknown error").strip()
        first = error.splitlines()[0] if error else ""
        rows.append([label, str(cell["seed"]), str(cell["run_id"]), first[:300]])
        tidy.append(
            {
                "cell": label,
                "seed": cell["seed"],
                "run_id": cell["run_id"],
                "cell_key": cell["cell_key"],
                "error": error,
            }
        )
    for run in unfinished:
        rows.append(
            [
                str(run.get("label")),
                "",
                str(run["run_id"]),
                f"run left {run['status']} (sweep interrupted?)",
            ]
        )
        tidy.append(
            {
                "cell": run.get("label"),
                "seed": None,
                "run_id": run["run_id"],
                "cell_key": run["cell_key"],
                "error": f"run left {run['status']}",
            }
        )
    caption = (
        f"{len(failed)} FAILED cell(s): none of their seeds' numbers enter the tables above"
        + (f"; {len(unfinished)} cell(s) have only unfinished runs" if unfinished else "")
        + ". Rerun the sweep to retry them (finished cells are skipped)."
    )
    return Table(
        "failed",
        "Failed cells",
        caption,
        header,
        rows,
        set(),
        [],
        pd.DataFrame(tidy, columns=["cell", "seed", "run_id", "cell_key", "error"]),
    )


def cell_label(cell: Mapping[str, Any], axes: Sequence[Axis]) -> str:
    """'linucb/tl/simulation candidates=C1': the group axes, then the other shown axes."""
    groups = [a.label(str(cell[a.key])) for a in axes if a.group and a.shown and cell[a.key]]
    others = [f"{a.name}={a.label(str(cell[a.column]))}" for a in axes if not a.group and a.shown]
    return " ".join(["/".join(groups), *others])


def cells_table(cells: pd.DataFrame, axes: Sequence[Axis]) -> pd.DataFrame:
    """One row per cell: identity, axes (labels), status, summary metrics and error."""
    out = pd.DataFrame(
        {
            "cell_key": cells["cell_key"],
            "run_id": cells["run_id"],
            "status": cells["status"],
            "seed": cells["seed"],
            **{a.key: cells[a.key] for a in axes if a.group},
            **{
                name: values
                for a in axes
                if not a.group
                for name, values in (
                    (a.key, raw_values(cells, a)),
                    (
                        a.header if a.header != a.key else f"{a.key}_label",
                        [a.label(str(v)) for v in cells[a.column]],
                    ),
                )
            },
        }
    )
    skip = {"cell_key", "run_id", "status", "seed", "error", "config", "start_time", "source"}
    skip |= {MARKS} | {a.key for a in axes if a.group}
    for name in cells.columns:
        if name in skip or name.startswith(("@", "curve_", "hp_")):
            continue
        values = pd.to_numeric(cells[name], errors="coerce")
        if values.notna().any():
            out[name] = values
    out["error"] = cells.get("error")
    order = [a.column for a in axes] + ["seed"]
    rank = cells[order].apply(lambda c: c.map(_rank_of(axes, c.name)))
    return out.iloc[np.lexsort(rank.to_numpy().T[::-1])].reset_index(drop=True)


def _rank_of(axes: Sequence[Axis], name: str):
    axis = next((a for a in axes if a.column == name), None)
    if axis is None:
        return lambda v: -1 if pd.isna(v) else int(v)
    return lambda v: axis.values.index(v) if v in axis.values else len(axis.values)


def to_markdown(table: Table, level: int = 2) -> str:
    """The table as GitHub Markdown: heading, caption, pipe table, footnotes."""
    lines = [f"{'#' * level} {table.title}", "", table.caption, ""]
    if table.rows:

        def cell(text: str, bold: bool) -> str:
            text = text.replace("|", "\\|")
            return f"**{text}**" if bold and text else text

        lines.append("| " + " | ".join(cell(h, False) for h in table.header) + " |")
        lines.append("|" + "|".join("---" for _ in table.header) + "|")
        for i, row in enumerate(table.rows):
            lines.append(
                "| " + " | ".join(cell(t, (i, j) in table.bold) for j, t in enumerate(row)) + " |"
            )
    else:
        lines.append("_(none)_")
    if table.footnotes:
        lines.append("")
        lines += [f"- {note}" for note in table.footnotes]
    return "\n".join(lines) + "\n"


def wide_frame(table: Table) -> pd.DataFrame:
    """The displayed layout as a frame of text (the wide CSV)."""
    return pd.DataFrame(table.rows, columns=pd.Index(table.header))
