"""``python -m sweeper.report NAME [--out DIR]``: an experiment's tables and figures.

``build_report`` reads experiment NAME back from MLflow (``load``), groups its cells by
the sweeps' axes (``axes``) as the experiment's ``report:`` section asks (``spec``), and
writes into DIR (default ``reports/NAME/``):

- ``tables/NAME.md`` and ``.csv`` (tidy, one row per cell group) and ``NAME_wide.csv``
  (the displayed layout) for each table: mean +- sd of the family's lead metric, the mean
  runtime, the tables an experiment adds (pivoted axes, other metrics, best grid value),
  each beside the published numbers for the same cells (``published`` module of the
  task); ``paired`` (differences against a reference value of the family's compare axis
  on matched seeds) and ``failed`` (every FAILED cell with its error);
- ``figures/<curve>.png``: each curve the family declares (+-1 sd), and
  ``figures/hp_<name>.png``: each traced setting over time (its numbers in
  ``hp_<name>.csv``);
- ``cells.csv`` (every cell used), ``report.md`` (all tables) and ``index.html``;
- ``sweep/cells.parquet`` and ``sweep/experiment.json``: what the report read, curves
  downsampled, from which ``--from DIR`` rebuilds it without the store (``publish``).
"""

from __future__ import annotations

import datetime as _dt
import importlib
import importlib.util
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd

from sweeper.configs import ConfigSearch
from sweeper.report import decisions, figures, html, publish, stats, tables
from sweeper.report.axes import Axis, restrict
from sweeper.report.load import Loaded, ReportError, load_experiment
from sweeper.report.results import Results
from sweeper.report.spec import ReportSpec, section_from_file
from sweeper.store.reader import resolve_uri
from sweeper.ui import browse_hint

__all__ = ["Report", "ReportError", "Results", "build_report", "read_experiment"]


@dataclass
class Report:
    """What a report wrote and what it found."""

    name: str
    out: Path
    cells: pd.DataFrame
    axes: list[Axis]
    tables: dict[str, tables.Table]
    figures: list[tuple[str, str]]
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return int((self.cells["status"] == "FAILED").sum())


@dataclass
class Published:
    entries: list[Any] = field(default_factory=list)
    captions: dict[str, str] = field(default_factory=dict)
    display_names: dict[str, str] = field(default_factory=dict)
    axis_names: dict[str, str] = field(default_factory=dict)
    module: str = ""


def find_published(paths: Iterable[str]) -> Published:
    """The task's ``published`` module: the first ``<package>.published`` found by walking
    up the packages of the dotted paths in the cells' configs (the cell function, the
    ``_target_`` classes). It may define PUBLISHED, TABLES, DISPLAY_NAMES and AXIS_NAMES."""
    tried: set[str] = set()
    for path in paths:
        parts = str(path).split(".")
        for depth in range(len(parts) - 1, 0, -1):
            candidate = ".".join(parts[:depth] + ["published"])
            if candidate in tried:
                continue
            tried.add(candidate)
            module = _published_module(candidate)
            if module is None:
                continue
            return Published(
                list(getattr(module, "PUBLISHED", [])),
                dict(getattr(module, "TABLES", {})),
                dict(getattr(module, "DISPLAY_NAMES", {})),
                dict(getattr(module, "AXIS_NAMES", {})),
                candidate,
            )
    return Published()


def _published_module(name: str) -> ModuleType | None:
    """Module ``name`` (a ``published`` candidate), or None when there is none: no such
    module, or a package above it that does not exist or is a plain module. Any other
    failure to import it (a typo in the family's ``published.py``, an import inside it
    that fails) is a :class:`ReportError` naming the file, not a report without the
    published numbers."""
    try:
        if importlib.util.find_spec(name) is None:
            return None
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name is not None and (name == err.name or name.startswith(err.name + ".")):
            return None
        raise ReportError(_unimportable(name, err)) from None
    except Exception as err:  # whatever a module raises as it runs: said below, naming it
        raise ReportError(_unimportable(name, err)) from None


def _unimportable(name: str, err: BaseException) -> str:
    """One paragraph: which module failed, where (file and line) and why."""
    where = ""
    if isinstance(err, SyntaxError) and err.filename:
        where = f" at {err.filename}:{err.lineno}"
    elif err.__traceback__ is not None:
        frame = traceback.extract_tb(err.__traceback__)[-1]
        where = f" at {frame.filename}:{frame.lineno}"
    return (
        f"cannot read the published numbers: importing {name} failed{where}: "
        f"{type(err).__name__}: {err}. Fix that module (a family without published numbers "
        "has no published.py at all)"
    )


def report_section(loaded: Loaded, configs: ConfigSearch) -> dict[str, Any]:
    """The recorded ``report:`` section, updated key by key by exp/NAME.yaml's."""
    section = dict(loaded.config.get("report") or {})
    section.update(section_from_file(loaded.name, configs))
    return section


def read_experiment(
    name: str,
    tracking_uri: str | None = None,
    configs: ConfigSearch | None = None,
    source: str | Path | None = None,
    where: Mapping[str, list[str]] | None = None,
) -> Loaded:
    """Experiment ``name`` from the store (``tracking_uri``, else $MLFLOW_TRACKING_URI, else
    ./mlflow.db) or, with ``source``, from the table a report folder published; ``where``
    keeps only the cells with the listed values."""
    configs = configs or ConfigSearch.with_dirs()
    if source is not None:
        loaded = publish.read_table(Path(source), configs)
    else:
        loaded = load_experiment(name, resolve_uri(tracking_uri), configs)
    if where:
        loaded = restrict(loaded, where)
    if not len(loaded.cells):
        raise ReportError(f"experiment '{loaded.name}' at {loaded.uri} has no cell runs yet")
    return loaded


def build_report(
    name: str,
    out: str | Path | None = None,
    tracking_uri: str | None = None,
    reference: str | None = None,
    configs: ConfigSearch | None = None,
    where: Mapping[str, list[str]] | None = None,
    source: str | Path | None = None,
    sign: str | None = None,
) -> Report:
    """Read experiment ``name`` from MLflow (or, with ``source``, from the table a report
    folder published: ``publish``) and write its report into ``out``; ``where`` keeps only
    the cells with the listed values (``{"seed": ["0", "1"]}``); ``configs`` is the config
    search path (the shipped configs, plus ``--config-dir`` directories); ``reference`` the
    baseline (``--baseline``) and ``sign`` which side of a paired difference comes first.
    The tables are renderings of :class:`~sweeper.report.results.Results`' DataFrames."""
    configs = configs or ConfigSearch.with_dirs()
    loaded = read_experiment(name, tracking_uri, configs, source, where)
    results = Results(loaded, configs, reference)
    spec, cells, axes, published = results.spec, results.frame, results.axes, results.published
    notes = list(loaded.notes)
    out = Path(out) if out is not None else Path("reports") / loaded.name

    built: dict[str, tables.Table] = {}
    for table_spec in spec.tables:
        finished = cells[cells["status"] == "FINISHED"]
        has_metric = table_spec.metric in cells and finished[table_spec.metric].notna().any()
        if len(finished) and not has_metric:
            notes.append(f"table '{table_spec.name}': no cell recorded {table_spec.metric}")
            continue
        built[table_spec.name] = tables.metric_table(
            cells, axes, table_spec, published.entries, published.captions, spec.compare
        )
    if spec.optimum_axis and spec.optimum_metric:
        built["optimum"] = tables.optimum_table(
            cells,
            axes,
            spec.optimum_axis,
            spec.optimum_metric,
            published.entries,
            spec.optimum_published,
            published.captions,
            loaded.task,
        )
    paired_axis = tables.find_axis(axes, spec.paired_axis) if spec.paired_axis else None
    if spec.paired and spec.paired_metric and paired_axis and len(paired_axis.values) > 1:
        compared = results.compare(by=paired_axis.key, sign=sign or spec.sign)
        notes += compared.attrs.get("notes", [])
        if len(compared):
            table, paired_notes = stats.paired_table(
                compared, axes, paired_axis, adaptive=bool(loaded.decisions)
            )
            built["paired"] = table
            notes += paired_notes
    if loaded.decisions:
        built["decisions"] = decisions.decisions_table(loaded.decisions)
    built["failed"] = tables.failures_table(cells, axes, loaded.unfinished)

    written = _write(out, loaded, spec, cells, axes, built, notes)
    return Report(loaded.name, out, cells, axes, built, written[1], written[0], notes)


def _line_axes(spec: ReportSpec, axes: list[Axis], chosen: Any = None) -> list[Axis]:
    """The axes whose values are the figures' lines: ``chosen``, else ``figures.lines_by``
    when the section names them, else the pivoted axes and the family's compare axis; the
    other shown axes make the panels."""
    chosen = chosen or spec.figures.get("lines_by")
    if chosen:
        keys = [chosen] if isinstance(chosen, str) else list(chosen)
        return [tables.require_axis(axes, str(k), "report.figures.lines_by") for k in keys]
    line = [a for k in spec.pivot if (a := tables.find_axis(axes, k)) is not None]
    compare = tables.find_axis(axes, spec.compare) if spec.compare else None
    if compare is not None and compare not in line:
        line.append(compare)
    return line


def _write(
    out: Path,
    loaded: Loaded,
    spec: ReportSpec,
    cells: pd.DataFrame,
    axes: list[Axis],
    built: dict[str, tables.Table],
    notes: list[str],
) -> tuple[list[Path], list[tuple[str, str]]]:
    table_dir, figure_dir = out / "tables", out / "figures"
    for directory, patterns in ((table_dir, ("*.md", "*.csv")), (figure_dir, ("*.png", "*.csv"))):
        directory.mkdir(parents=True, exist_ok=True)
        for stale in (p for pattern in patterns for p in directory.glob(pattern)):
            stale.unlink()
    files: list[Path] = []
    linked: list[tuple[tables.Table, list[str]]] = []
    for name, table in built.items():
        md, tidy, wide = (
            table_dir / f"{name}.md",
            table_dir / f"{name}.csv",
            table_dir / f"{name}_wide.csv",
        )
        md.write_text(tables.to_markdown(table))
        table.tidy.to_csv(tidy, index=False)
        tables.wide_frame(table).to_csv(wide, index=False)
        files += [md, tidy, wide]
        linked.append((table, [f"tables/{p.name}" for p in (md, tidy, wide)]))
    cells_csv = out / "cells.csv"
    tables.cells_table(cells, axes).to_csv(cells_csv, index=False)
    files.append(cells_csv)

    drawn: list[tuple[str, str]] = []
    line_axes = _line_axes(spec, axes)
    options = spec.figures
    only = options.get("lines")
    task = loaded.task
    marks = (task.markers or "marked step").replace("_", " ")
    if options.get("curves", True):
        for curve in task.curves.values():
            path = figure_dir / f"{curve.name}.png"
            caption = figures.curves_figure(
                cells, axes, line_axes, path, curve, only, spec.compare, marks=marks
            )
            if caption:
                drawn.append((f"figures/{path.name}", caption))
    for entry in options.get("distributions") or []:
        entry = entry if isinstance(entry, dict) else {"metric": entry}
        name = str(entry["metric"])
        by = _line_axes(spec, axes, entry.get("lines_by"))
        panels = entry.get("panels_by")
        panels = None if panels is None else [tables.require_axis(axes, str(k), "panels_by")
                                              for k in panels]  # fmt: skip
        path = figure_dir / f"distribution_{name}.png"
        caption = figures.distribution_figure(
            cells, axes, by, path, task.metric(name), None, spec.compare, panels
        )
        if caption:
            drawn.append((f"figures/{path.name}", caption))
    for entry in options.get("against") or []:
        x_axis = tables.require_axis(axes, str(entry["axis"]), "report.figures.against")
        name = str(entry.get("metric") or task.lead)
        by = _line_axes(spec, axes, entry.get("lines_by"))
        path = figure_dir / f"against_{x_axis.name}_{name}.png".replace("/", "_")
        caption = figures.against_figure(
            cells, axes, x_axis, by, path, task.metric(name), only, spec.compare
        )
        if caption:
            drawn.append((f"figures/{path.name}", caption))
    if options.get("hyperparameters", True):
        x_label = next((c.x for c in task.curves.values()), "step")
        for filename, caption in figures.hyperparameter_figures(
            cells, axes, line_axes, figure_dir, only, spec.compare, x_label, task.trace
        ):
            drawn.append((f"figures/{filename}", caption))
    if loaded.decisions:
        path = figure_dir / "decisions.png"
        drawn.append((f"figures/{path.name}", decisions.decisions_figure(loaded.decisions, path)))
    files += [out / path for path, _ in drawn]

    title = spec.title or f"Report: {loaded.name}"
    finished = int((cells["status"] == "FINISHED").sum())
    failed = int((cells["status"] == "FAILED").sum())
    meta = [  # the description is the experiment file's; the line after it says what ran
        f"As the experiment defines it: {loaded.description}" if loaded.description else "",
        f"MLflow experiment '{loaded.name}' at {loaded.uri}: {len(cells)} cells from "
        f"{loaded.sweeps} sweep(s), {finished} FINISHED, {failed} FAILED"
        + (f", {len(loaded.unfinished)} unfinished" if loaded.unfinished else "")
        + f". Seeds: {_seeds(cells)}.",
        f"Browse its runs: {browse_hint(loaded.uri, loaded.experiment_id)}"
        if loaded.experiment_id
        else "",
        f"Generated {_dt.datetime.now().isoformat(timespec='seconds')} by "
        f"python -m sweeper.report {loaded.name}.",
    ]
    meta = [m for m in meta if m]
    summary = "\n".join(tables.to_markdown(t) for t in built.values())
    report_md = out / "report.md"
    report_md.write_text(
        f"# {title}\n\n"
        + "\n\n".join(meta)
        + "\n\n"
        + "".join(f"> {note}\n\n" for note in notes)
        + summary
        + "\n## Figures\n\n"
        + "".join(f"![{caption}]({path})\n\n" for path, caption in drawn)
    )
    index = out / "index.html"
    index.write_text(html.page(title, meta, notes, linked, drawn))
    files += [report_md, index]
    files += publish.write_table(out, loaded)
    return files, drawn


def _seeds(cells: pd.DataFrame) -> str:
    seeds = sorted(int(s) for s in cells["seed"].dropna().unique())
    if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}..{seeds[-1]} ({len(seeds)})"
    return ", ".join(map(str, seeds)) or "none"
