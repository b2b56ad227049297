"""Figures (PNG, matplotlib's Agg backend), drawn from the downsampled curves of the cells
tables: each curve the family declares (e.g. cumulative regret), mean with a +-1 standard
deviation band per value of the line axes, one panel per combination of the other shown
axes (e.g. 003 Figure 2's algorithm x dataset grid), with marked steps (e.g. a switching
environment's change points) when the cells recorded them; and each traced setting (e.g.
the hyperparameter a tuner chose) over time, median and interquartile band per window of
T/50 rounds. Legends are titled by the axes their entries are values of.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from sweeper.report.axes import NULL, Axis  # noqa: E402
from sweeper.report.load import MARKS  # noqa: E402
from sweeper.task import Curve, Metric  # noqa: E402

PANEL = (4.2, 3.0)
MAX_COLUMNS = 3  # 3 panels of 420 px fit a report page (sweeper/report/pagecheck.py)
WINDOWS = 50
LINE_PANEL = (3.3, 2.3)
MAX_LINE_COLUMNS = 4  # a hyperparameter figure's lines side by side, then wrapped
"""Hyperparameter figures pool each line's trace over windows of T/WINDOWS rounds."""


def _layout(cells: pd.DataFrame, axes: Sequence[Axis], line_axes: Sequence[Axis]):
    panel_axes = [a for a in axes if a.shown and a not in line_axes]
    present = set(map(tuple, cells[[a.column for a in panel_axes]].astype(str).to_numpy()))
    panels = [c for c in itertools.product(*(a.values for a in panel_axes)) if c in present] or [()]
    return panel_axes, panels


def _lines(
    cells: pd.DataFrame,
    line_axes: Sequence[Axis],
    only: Sequence[Any] | None,
    compare: str | None = None,
) -> list[tuple[tuple[str, ...], str]]:
    """Line identities (axis values) and legend labels, in display order: with ``only``,
    just the lines whose ``compare`` axis value (else the first line axis') it lists, in
    its order."""
    present = set(map(tuple, cells[[a.column for a in line_axes]].astype(str).to_numpy()))
    combos = [c for c in itertools.product(*(a.values for a in line_axes)) if c in present]
    if only and line_axes:
        index = next((i for i, a in enumerate(line_axes) if a.key == compare), 0)
        axis = line_axes[index]
        ranked = []
        for wanted in only:
            ranked += [c for c in combos if axis.accepts(c[index], wanted) and c not in ranked]
        combos = ranked
    return [(c, " / ".join(a.label(v) for a, v in zip(line_axes, c, strict=True))) for c in combos]


def _colors(labels: Sequence[str]) -> dict[str, Any]:
    """Distinct colours for up to ten lines, else a sequential map (e.g. a grid of values)."""
    if len(labels) <= 10:
        return {label: f"C{i}" for i, label in enumerate(labels)}
    cmap = matplotlib.colormaps["viridis"]
    return {label: cmap(i / (len(labels) - 1)) for i, label in enumerate(labels)}


def _stack(frame: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Rows of ``column`` (arrays at the rows' ``curve_step``) on one grid of rounds."""
    pairs = []
    for steps, values in zip(frame["curve_step"], frame[column], strict=True):
        if steps is None or values is None or not hasattr(values, "__len__"):
            continue
        steps = np.asarray(steps, dtype=float)
        values = np.asarray(values, dtype=float)
        if len(steps) and len(steps) == len(values):
            pairs.append((steps, values))
    if not pairs:
        return None
    grid = max((s for s, _ in pairs), key=lambda s: (s[-1], len(s)))
    rows = [v if np.array_equal(s, grid) else np.interp(grid, s, v) for s, v in pairs]
    return grid, np.vstack(rows)


def _grid(n: int, rows_hint: int) -> tuple[int, int]:
    """Rows x columns: one row per value of the first panel axis when the rest fit in a
    row of at least two panels, else panels wrapped MAX_COLUMNS to a row."""
    if rows_hint > 1 and n % rows_hint == 0 and 2 <= n // rows_hint <= MAX_COLUMNS:
        return rows_hint, n // rows_hint
    columns = min(n, MAX_COLUMNS)
    return int(np.ceil(n / columns)), columns


def _figure(panels: int, rows_hint: int):
    rows, columns = _grid(panels, rows_hint)
    fig, grid = plt.subplots(
        rows,
        columns,
        figsize=(PANEL[0] * columns, PANEL[1] * rows + 0.8),
        squeeze=False,
        constrained_layout=True,
    )
    flat = list(grid.ravel())
    for ax in flat:  # round-number ticks that do not run into each other (14000 rounds)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
    for extra in flat[panels:]:
        extra.set_visible(False)
    return fig, flat[:panels], columns


def _panel_title(panel_axes: Sequence[Axis], combo: Sequence[str]) -> str:
    parts = [
        a.label(v) if a.group else f"{a.name}={a.label(v)}"
        for a, v in zip(panel_axes, combo, strict=True)
    ]
    return ", ".join(p for p in parts if p)


def _select(cells: pd.DataFrame, axes: Sequence[Axis], combo: Sequence[str]) -> pd.DataFrame:
    mask = np.ones(len(cells), dtype=bool)
    for a, v in zip(axes, combo, strict=True):
        mask &= (cells[a.column] == v).to_numpy()
    return cells[mask]


def _legend_title(line_axes: Sequence[Axis]) -> str:
    """What the legend's entries are values of: "T1 / k" for lines labelled "0 / 3"."""
    return " / ".join(a.name for a in line_axes)


def _legend(fig, ax_list, columns: int, title: str = "") -> None:
    handles, labels = {}, []
    for ax in ax_list:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in handles:
                handles[label] = handle
                labels.append(label)
    if labels:
        fig.legend(
            [handles[label] for label in labels],
            labels,
            loc="outside lower center",
            ncol=min(len(labels), 2 * columns),
            frameon=False,
            title=title or None,
        )


def curves_figure(
    cells: pd.DataFrame,
    axes: Sequence[Axis],
    line_axes: Sequence[Axis],
    path: Path,
    curve: Curve,
    only: Sequence[Any] | None = None,
    compare: str | None = None,
    title: str = "",
    marks: str = "marked step",
) -> str | None:
    """Mean of ``curve`` +- 1 sd over seeds, one line per ``line_axes`` value.

    Returns the figure's caption, or None when no cell has that curve.
    """
    finished = cells[cells["status"] == "FINISHED"]
    column = f"curve_{curve.name}"
    if column not in finished or not len(finished):
        return None
    panel_axes, panels = _layout(finished, axes, line_axes)
    points_seen = False
    lines = _lines(finished, line_axes, only, compare)
    colors = _colors([label for _, label in lines])
    rows_hint = len(panel_axes[0].values) if len(panel_axes) > 1 else 1
    fig, ax_list, columns = _figure(len(panels), rows_hint)
    for ax, combo in zip(ax_list, panels, strict=True):
        frame = _select(finished, panel_axes, combo)
        for line, label in lines:
            stacked = _stack(_select(frame, line_axes, line), column)
            if stacked is None:
                continue
            steps, values = stacked
            mean = values.mean(axis=0)
            sd = values.std(axis=0, ddof=1) if len(values) > 1 else np.zeros_like(mean)
            ax.plot(steps, mean, color=colors[label], label=f"{label}", lw=1.4)
            ax.fill_between(steps, mean - sd, mean + sd, color=colors[label], alpha=0.18, lw=0)
        points = sorted({p for ps in frame.get(MARKS, []) for p in _points(ps)})
        for i, point in enumerate(points):
            ax.axvline(point, color="0.35", ls="--", lw=0.9, label=marks if i == 0 else None)
            points_seen = True
        ax.set_title(_panel_title(panel_axes, combo), fontsize=10)
        ax.set_xlabel(curve.x)
        ax.set_ylabel(curve.title)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    _legend(fig, ax_list, columns, _legend_title(line_axes))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    per = " and ".join(a.header.lower() for a in panel_axes) or "experiment"
    lines_by = " and ".join(a.header.lower() for a in line_axes) or "cell"
    better = {"lower": " (lower is better)", "higher": " (higher is better)"}.get(
        curve.better or "", ""
    )
    return (
        f"{curve.title.capitalize()}{better}, mean over seeds with a ±1 standard deviation "
        f"band, one line per {lines_by}, one panel per {per}"
        + (f"; dashed lines mark each {marks}." if points_seen else ".")
    )


def _points(values: Any) -> list[float]:
    return [] if values is None else [float(v) for v in values]


def hyperparameter_figures(
    cells: pd.DataFrame,
    axes: Sequence[Axis],
    line_axes: Sequence[Axis],
    directory: Path,
    only: Sequence[Any] | None = None,
    compare: str | None = None,
    x_label: str = "step",
    traced: str = "setting",
) -> list[tuple[str, str]]:
    """One figure per traced setting (``hp_<name>`` columns; ``traced`` says what they
    are, e.g. the hyperparameter a tuner chose): per line, the median over windows of T/50
    rounds with the interquartile band, pooling seeds and the window's rounds
    (:func:`windowed_quantiles`), on a log scale when the values span a decade or more.
    Beside each figure, ``hp_<name>.csv`` holds the plotted numbers.
    """
    finished = cells[cells["status"] == "FINISHED"]
    written = []
    for column in sorted(c for c in finished.columns if c.startswith("hp_")):
        with_trace = finished[finished[column].map(lambda v: hasattr(v, "__len__"))]
        if not len(with_trace):
            continue
        name = column.removeprefix("hp_")
        panel_axes, panels = _layout(with_trace, axes, line_axes)
        lines = _lines(finished, line_axes, only, compare)
        colors = _colors([label for _, label in lines])
        fig, cells_of, columns = _hyperparameter_grid(panels, panel_axes, lines)
        plotted = []
        for ax, combo, line, label in cells_of:
            title = _panel_title(panel_axes, combo)
            stacked = _stack(_select(_select(with_trace, panel_axes, combo), line_axes, line),
                             column)  # fmt: skip
            windows = windowed_quantiles(*stacked) if stacked is not None else []
            if len(windows):
                middle = (windows["start"] + windows["end"]) / 2
                ax.plot(middle, windows["median"], color=colors[label], label=label, lw=1.4)
                ax.fill_between(middle, windows["q25"], windows["q75"], color=colors[label],
                                alpha=0.25, lw=0)  # fmt: skip
                plotted.append(windows.assign(panel=title, line=label))
            ax.set_title(title if len(lines) == 1 else f"{label}\n{title}", fontsize=9)
            ax.set_xlabel(x_label)
            ax.set_ylabel(name)
            ax.grid(alpha=0.3)
        ax_list = [ax for ax, *_ in cells_of]
        if len(lines) > 1:  # one axis for all: its labels on the outer panels only
            for ax in ax_list:
                ax.label_outer()
        if plotted:
            data = pd.concat(plotted, ignore_index=True)
            low, high = data["q25"].min(), data["q75"].max()
            if low > 0 and high / low >= 10:
                for ax in ax_list:
                    ax.set_yscale("log")
            fig.suptitle(
                f"{name}: median over windows of T/{WINDOWS} rounds, interquartile band",
                fontsize=10,
            )
            _legend(fig, ax_list, columns, _legend_title(line_axes))
            fig.savefig(directory / f"hp_{name}.png", dpi=100)
            data[["panel", "line", "start", "end", "q25", "median", "q75", "n"]].to_csv(
                directory / f"hp_{name}.csv", index=False
            )
            written.append(
                (
                    f"hp_{name}.png",
                    f"The {traced} {name} a line spends its rounds at: the median over "
                    f"windows of T/{WINDOWS} rounds, pooling seeds and the window's rounds, "
                    "with the interquartile band (windows where no seed records one, e.g. "
                    f"a warm-up, are blank; numbers in hp_{name}.csv).",
                )
            )
        plt.close(fig)
    return written


def _hyperparameter_grid(panels: list, panel_axes: Sequence[Axis], lines: list):
    """The subplots of a hyperparameter figure: with one line, the panels as the other
    figures lay them out; with several, each line in a subplot of its own (a row of up to
    :data:`MAX_LINE_COLUMNS` lines per panel, wrapped), one y-axis for all, so that no
    line's band hides another's (four or eight tuners' interquartile bands on one log axis
    cannot be read apart). Returns the figure, (axes, panel, line, label) per subplot, and
    the number of columns."""
    if len(lines) <= 1:
        rows_hint = len(panel_axes[0].values) if len(panel_axes) > 1 else 1
        fig, ax_list, columns = _figure(len(panels), rows_hint)
        line, label = lines[0] if lines else ((), "")
        return fig, [(ax, p, line, label) for ax, p in zip(ax_list, panels, strict=True)], columns
    columns = min(len(lines), MAX_LINE_COLUMNS)
    per_panel = -(-len(lines) // columns)
    rows = len(panels) * per_panel
    fig, grid = plt.subplots(
        rows,
        columns,
        figsize=(LINE_PANEL[0] * columns, LINE_PANEL[1] * rows + 0.8),
        squeeze=False,
        sharex=True,
        sharey=True,
        constrained_layout=True,
    )
    cells, used = [], set()
    for i, panel in enumerate(panels):
        for j, (line, label) in enumerate(lines):
            ax = grid[i * per_panel + j // columns, j % columns]
            ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
            cells.append((ax, panel, line, label))
            used.add(id(ax))
    for ax in grid.ravel():
        if id(ax) not in used:
            ax.set_visible(False)
    return fig, cells, columns


def windowed_quantiles(
    steps: np.ndarray, values: np.ndarray, windows: int = WINDOWS
) -> pd.DataFrame:
    """The 25th, 50th and 75th percentiles of a setting per window of rounds, pooling seeds
    and the rounds of the window: where a tuner spends its rounds, without drawing the
    per-round value (a proposal that jumps between two values draws a solid band).

    Parameters
    ----------
    steps : ndarray, shape (n_points,)
        The rounds the trace was sampled at (increasing; the last is the horizon T).
    values : ndarray, shape (n_seeds, n_points)
        The setting of each seed at those rounds; NaN where a seed records none (a warm-up).
    windows : int
        How many windows of equal length split [0, T]: each holds T / ``windows`` rounds.

    Returns
    -------
    DataFrame with one row per window that holds a value: ``start``, ``end`` (rounds,
    start excluded), ``q25``, ``median``, ``q75`` and ``n`` (the values pooled).
    """
    steps = np.asarray(steps, dtype=float)
    values = np.atleast_2d(np.asarray(values, dtype=float))
    edges = np.linspace(min(0.0, steps[0]), steps[-1], windows + 1)
    which = np.clip(np.searchsorted(edges, steps, side="left") - 1, 0, windows - 1)
    rows = []
    for window in np.unique(which):
        pooled = values[:, which == window].ravel()
        pooled = pooled[np.isfinite(pooled)]
        if len(pooled):
            low, median, high = np.percentile(pooled, [25, 50, 75])
            rows.append((edges[window], edges[window + 1], low, median, high, len(pooled)))
    return pd.DataFrame(rows, columns=["start", "end", "q25", "median", "q75", "n"])


def distribution_figure(
    cells: pd.DataFrame,
    axes: Sequence[Axis],
    line_axes: Sequence[Axis],
    path: Path,
    metric: Metric,
    only: Sequence[Any] | None = None,
    compare: str | None = None,
    panels_by: Sequence[Axis] | None = None,
) -> str | None:
    """The distribution of a summary ``metric`` over cells (seeds, and every axis that is
    neither a line nor a panel), one outlined histogram (density) per ``line_axes`` value
    and panel (e.g. 001 Figure 2: the overestimation bias of TPE against random search).
    ``panels_by`` (default: every other shown axis) chooses the panels; [] pools all.

    Returns the figure's caption, or None when no FINISHED cell recorded the metric.
    """
    finished = cells[cells["status"] == "FINISHED"]
    if metric.name not in finished or not finished[metric.name].notna().any():
        return None
    if panels_by is None:
        panel_axes, panels = _layout(finished, axes, line_axes)
    else:
        panel_axes = list(panels_by)
        panels = _layout(finished, panel_axes, [])[1]
    lines = _lines(finished, line_axes, only, compare)
    colors = _colors([label for _, label in lines])
    values = pd.to_numeric(finished[metric.name], errors="coerce")
    edges = np.histogram_bin_edges(values.dropna(), bins=30)
    rows_hint = len(panel_axes[0].values) if len(panel_axes) > 1 else 1
    fig, ax_list, columns = _figure(len(panels), rows_hint)
    for ax, combo in zip(ax_list, panels, strict=True):
        frame = _select(finished, panel_axes, combo)
        for line, label in lines:
            data = pd.to_numeric(_select(frame, line_axes, line)[metric.name], errors="coerce")
            data = data.dropna()
            if len(data):
                ax.hist(data, bins=edges, density=True, histtype="step", lw=1.4,
                        color=colors[label], label=f"{label} (n={len(data)})")  # fmt: skip
        ax.set_title(_panel_title(panel_axes, combo), fontsize=10)
        ax.set_xlabel(metric.title)
        ax.set_ylabel("density")
        ax.grid(alpha=0.3)
    _legend(fig, ax_list, columns, _legend_title(line_axes))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    lines_by = " and ".join(a.header.lower() for a in line_axes) or "cell"
    pooled = [a.header.lower() for a in axes if a.shown and a not in [*line_axes, *panel_axes]]
    return f"Distribution of {metric.title} over cells, one histogram (density) per {lines_by}" + (
        f", pooling seeds and {', '.join(pooled)}." if pooled else ", over seeds."
    )


def against_figure(
    cells: pd.DataFrame,
    axes: Sequence[Axis],
    x_axis: Axis,
    line_axes: Sequence[Axis],
    path: Path,
    metric: Metric,
    only: Sequence[Any] | None = None,
    compare: str | None = None,
) -> str | None:
    """A summary ``metric`` (mean +- 1 sd over seeds) against the values of ``x_axis``, one
    line per ``line_axes`` value, one panel per combination of the other shown axes (e.g.
    004 Figure 1: cumulative F against the estimated number of changes). A line whose cells
    leave ``x_axis`` unset (e.g. CDT, which has no candidate set, beside OP and TL against
    the set's size) is drawn as a horizontal reference: its mean, dashed, with its ±1 sd band.

    Returns the figure's caption, or None when no FINISHED cell recorded the metric.
    """
    finished = cells[cells["status"] == "FINISHED"]
    if metric.name not in finished or not finished[metric.name].notna().any():
        return None
    line_axes = [a for a in line_axes if a is not x_axis]
    panel_axes, panels = _layout(finished, [a for a in axes if a is not x_axis], line_axes)
    lines = _lines(finished, line_axes, only, compare)
    colors = _colors([label for _, label in lines])
    numeric = all(_is_number(v) for v in x_axis.values if v != NULL)
    xs_all = [float(v) for v in x_axis.values if v != NULL] if numeric else []
    references = False
    rows_hint = len(panel_axes[0].values) if len(panel_axes) > 1 else 1
    fig, ax_list, columns = _figure(len(panels), rows_hint)
    for ax, combo in zip(ax_list, panels, strict=True):
        frame = _select(finished, panel_axes, combo)
        for line, label in lines:
            own = _select(frame, line_axes, line)
            values = pd.to_numeric(own[metric.name], errors="coerce")
            unset = (own[x_axis.column] == NULL).to_numpy()
            if unset.all() and values.notna().any():
                mean, sd = float(values.mean()), float(np.nan_to_num(values.std()))
                ax.axhline(mean, color=colors[label], ls="--", lw=1.4, label=label)
                ax.axhspan(mean - sd, mean + sd, color=colors[label], alpha=0.12, lw=0)
                references = True
                continue
            stats = values.groupby(own[x_axis.column]).agg(["mean", "std"])
            stats = stats.reindex([v for v in x_axis.values if v in stats.index and v != NULL])
            if not len(stats):
                continue
            xs = [float(v) for v in stats.index] if numeric else list(range(len(stats)))
            sd = stats["std"].fillna(0.0).to_numpy()
            ax.errorbar(xs, stats["mean"], yerr=sd, marker="o", ms=4, capsize=3, lw=1.4,
                        color=colors[label], label=label)  # fmt: skip
            if not numeric:
                ax.set_xticks(xs, [x_axis.label(v) for v in stats.index])
        if numeric:
            _whole_ticks(ax, xs_all)
        ax.set_title(_panel_title(panel_axes, combo), fontsize=10)
        ax.set_xlabel(x_axis.name)
        ax.set_ylabel(metric.title)
        ax.grid(alpha=0.3)
    _legend(fig, ax_list, columns, _legend_title(line_axes))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    lines_by = " and ".join(a.header.lower() for a in line_axes) or "cell"
    return (
        f"{metric.title} against {x_axis.name}: mean over seeds with ±1 standard deviation, "
        f"one line per {lines_by}"
        + (
            f"; dashed: a line without {x_axis.name} (its mean and ±1 sd band)."
            if references
            else "."
        )
    )


def _whole_ticks(ax: plt.Axes, values: Sequence[float]) -> None:
    """Ticks at whole numbers when the axis's values are whole (k = 2, 3, 6, ...: no 2.5)."""
    if values and all(v.is_integer() for v in values):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
