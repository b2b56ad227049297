"""A sweep's results as DataFrames: what ``sweeper.load`` returns and the report renders.

:class:`Results` reads an experiment from a live store or a published folder (the same
cells either way) and answers in tidy DataFrames under the raw option names (``op``,
``linucb``), so its tables join with one another and with the report's CSVs:

- ``.cells``: one row per cell (axes, seed, status, the lead and every summary metric);
- ``.curves(name)``: a declared curve or a traced setting, long (one row per cell and step);
- ``.compare()``: paired differences by seed against the baseline (sweeper/baseline.py),
  with t intervals, Wilcoxon p-values, Holm-adjusted p-values and, for a seeds-until-decided
  sweep, the confidence sequence that decided (docs/reports.md, "Paired statistics");
- ``.best()``: the best setting of the compared axis per group;
- ``.decisions``: the seeds-until-decided decisions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from sweeper.baseline import baseline_of, compared_axis
from sweeper.configs import ConfigSearch
from sweeper.confseq import decide, interval
from sweeper.report.axes import Axis, build_axes, canon, native, raw_values
from sweeper.report.load import Loaded, ReportError
from sweeper.report.spec import ReportSpec, file_config, parse
from sweeper.report.stats import holm, paired_difference, wilcoxon_floor
from sweeper.report.tables import filter_cells, require_axis

SIGNS = ("option - baseline", "baseline - option")
"""Which side of a paired difference comes first: the option's (the default, so a negative
regret difference says the option is better) or the baseline's (your method as the
baseline: every row reads "yours minus that option")."""
SKIP = {"cell_key", "run_id", "status", "seed", "error", "config", "start_time", "source",
        "marks", "node", "libraries"}  # fmt: skip


class Results:
    """The cells of one experiment and the comparisons between them (module docstring).

    Build it with ``sweeper.load`` (a live store or a published folder).

    Parameters
    ----------
    loaded : Loaded
        The experiment as :func:`sweeper.report.load.load_experiment` or
        :func:`sweeper.report.publish.read_table` read it.
    configs : ConfigSearch
        The config search path (the shipped configs and any ``--config-dir``): where the
        experiment file's report section, labels and baseline are read.
    baseline : str, optional
        The baseline (``--baseline``); default: the one the sweep ran with, else the
        experiment file's.
    """

    def __init__(self, loaded: Loaded, configs: ConfigSearch, baseline: Any = None) -> None:
        from sweeper.report import find_published, report_section

        self.loaded, self.configs = loaded, configs
        self.baseline, self.explicit = _baseline(loaded, configs, baseline)
        self.spec: ReportSpec = parse(report_section(loaded, configs), self.baseline, loaded.task)
        self.published = find_published(_dotted_paths(loaded))
        labels = {**self.published.display_names, **option_labels(loaded, configs)}
        self.frame, self.axes = build_axes(loaded, self.spec, labels, self.published.axis_names)

    # --- what it is -------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.loaded.name

    @property
    def task(self) -> Any:
        return self.loaded.task

    @property
    def lead(self) -> str | None:
        """The family's lead metric (e.g. ``final_regret``)."""
        return self.task.lead

    @property
    def compared_axis(self) -> str | None:
        """The axis paired comparisons run along (``report.paired.axis``, else the family's
        ``task.compare``)."""
        return compared_axis(self.loaded.config, self.task.compare) or self.spec.paired_axis

    def __repr__(self) -> str:
        cells = self.frame
        return (
            f"<Results '{self.name}': {len(cells)} cells "
            f"({int((cells['status'] == 'FINISHED').sum())} finished), baseline "
            f"{self.baseline!r}, lead {self.lead!r}>"
        )

    # --- the cells --------------------------------------------------------------------
    @cached_property
    def cells(self) -> pd.DataFrame:
        """One row per cell: ``cell_key``, ``run_id``, ``status``, ``seed``, a column per
        axis (its key; raw option names, config values), the lead metric, every other
        summary metric, ``error``."""
        out = pd.DataFrame(
            {
                "cell_key": self.frame["cell_key"],
                "run_id": self.frame["run_id"],
                "status": self.frame["status"],
                "seed": self.frame["seed"],
                **{a.key: self._raw(a) for a in self._axes_shown()},
            }
        )
        metrics = [m for m in self._metrics() if m != self.lead]
        for name in ([self.lead] if self.lead in self.frame else []) + metrics:
            out[name] = pd.to_numeric(self.frame[name], errors="coerce")
        out["error"] = self.frame.get("error")
        return out.reset_index(drop=True)

    def curves(self, name: str | None = None) -> pd.DataFrame:
        """A curve the family declares (``regret``), or a traced setting
        (``exploration_rate``, or ``hp_exploration_rate``), long: one row per cell and step
        (``cell_key``, ``seed``, the axes, ``step``, ``value``), as the sweep's table keeps
        it (at most a few hundred steps per cell; ``cell.npz`` holds every round)."""
        column = self._curve_column(name)
        rows = []
        axes = self._axes_shown()
        for index, row in self.frame.iterrows():
            values, steps = row.get(column), row.get("curve_step")
            if not hasattr(values, "__len__") or not hasattr(steps, "__len__"):
                continue
            if len(values) != len(steps):
                continue
            frame = pd.DataFrame({"step": np.asarray(steps), "value": np.asarray(values)})
            frame.insert(0, "cell_key", row["cell_key"])
            frame.insert(1, "seed", row["seed"])
            for position, axis in enumerate(axes, start=2):
                frame.insert(position, axis.key, self._raw(axis).loc[index])
            rows.append(frame)
        if not rows:
            return pd.DataFrame(columns=["cell_key", "seed", *[a.key for a in axes], "step",
                                         "value"])  # fmt: skip
        return pd.concat(rows, ignore_index=True)

    @property
    def decisions(self) -> pd.DataFrame:
        """Seeds until decided: one row per comparison (group, option, baseline, seeds, mean
        difference, the confidence sequence's low and high, state); empty otherwise."""
        rows = [{k: v for k, v in d.items() if k not in ("path", "keys")}
                for d in self.loaded.decisions]  # fmt: skip
        frame = pd.DataFrame(rows)
        return frame.rename(columns={"reference": "baseline"})

    # --- comparisons ------------------------------------------------------------------
    def compare(
        self,
        metric: str | None = None,
        by: str | None = None,
        baseline: Any = None,
        within: Mapping[str, Any] | None = None,
        sign: str | None = None,
        level: float = 0.95,
    ) -> pd.DataFrame:
        """Paired differences by seed: every option of axis ``by`` against ``baseline``.

        Cells with the same seed share their random inputs (common random numbers), so
        each option is compared with the baseline through the per-seed differences of
        ``metric`` within the same values of every other axis (a group).

        Parameters
        ----------
        metric : str, optional
            A summary metric; default the experiment's paired metric (the family's lead).
        by : str, optional
            The compared axis; default ``report.paired.axis``, else the family's
            ``task.compare``.
        baseline : str, optional
            A value of ``by`` (its option name, text or label); default :attr:`baseline`.
        within : mapping, optional
            Only the cells with these axis values (``{"dataset": "movielens"}``), on top of
            the experiment's ``report.paired.where``.
        sign : {"option - baseline", "baseline - option"}, optional
            Which side comes first in ``difference`` and its interval; default the
            experiment's ``report.paired.sign``, else "option - baseline".
        level : float
            The t interval's confidence level.

        Returns
        -------
        pandas.DataFrame
            One row per group and option: the group's axes, ``by`` (the option), ``baseline``,
            ``metric``, ``sign``, ``n_pairs``, ``n_excluded``, ``excluded_seeds``, ``mean``
            and ``mean_baseline`` (over the paired seeds), ``difference`` (the mean paired
            difference in the stated sign), ``ci_low``, ``ci_high`` (t interval),
            ``p_wilcoxon`` (two-sided signed-rank), ``p_floor`` (the smallest p that test
            can give with these seeds), ``p_holm`` (Holm-adjusted over every row), and for
            a seeds-until-decided sweep ``cs_low``, ``cs_high`` and ``decided`` (the
            anytime-valid confidence sequence and its decision: the t interval and the
            p-values assume a fixed number of seeds, which adaptive stopping breaks).
        """
        sign = _sign(sign or self.spec.sign)
        metric = metric or self.spec.paired_metric or self.lead
        if metric is None or metric not in self.frame:
            raise ReportError(f"no cell of '{self.name}' recorded the metric {metric!r}")
        axis = require_axis(self.axes, by or self.compared_axis or "", "compare(by=...)")
        explicit = baseline is not None or self.explicit
        wanted = baseline if baseline is not None else self.baseline
        where = {**self.spec.paired_where, **dict(within or {})}
        cells = filter_cells(self.frame, self.axes, where)
        raw = self._raw(axis).loc[cells.index].map(_key)
        reference, note = self._match(axis, raw, wanted, explicit)
        notes = [note] if note else []
        unmatched = 0
        groups = [a for a in self._axes_shown() if a is not axis
                  and (a.group or cells[a.column].nunique() > 1)]  # fmt: skip
        keys = {a.key: self._raw(a).loc[cells.index].map(_key) for a in groups}
        base = raw == reference
        ignored = {k for k, v in keys.items() if not set(v[base]) & set(v[~base])}
        rows = []
        budget = _budget(self.loaded.config) if self.loaded.decisions else None
        for combo, frame in cells[~base].groupby([*keys.values(), raw][:len(keys) + 1],
                                                 sort=False):  # fmt: skip
            combo = combo if isinstance(combo, tuple) else (combo,)
            match = base.copy()
            for (k, v), value in zip(keys.items(), combo[:-1], strict=True):
                if k not in ignored:
                    match &= v == value
            theirs = cells[match & base]
            if not len(theirs):
                unmatched += 1
                continue
            row = {k: native(v) for k, v in zip(keys, combo[:-1], strict=True)}
            row[axis.key] = native(combo[-1])
            row.update(_paired(frame, theirs, metric, sign, level))
            row.update({"baseline": native(reference), "metric": metric})
            if budget is not None:
                row.update(_sequence(frame, theirs, metric, sign, budget, self.task, metric))
            rows.append(row)
        if unmatched:
            notes.append(
                f"paired statistics: {unmatched} group(s) have no {axis.key} {reference} cells "
                "with the same other axes and are left out (report.paired.where, or "
                "compare(within=...), selects comparable cells)"
            )
        out = pd.DataFrame(rows)
        out.attrs["notes"] = notes
        if not len(out):
            return out
        out["sign"] = f"{axis.key} - baseline" if sign == SIGNS[0] else f"baseline - {axis.key}"
        out["p_holm"] = holm(out["p_wilcoxon"].to_numpy())
        first = [*keys, axis.key, "baseline", "metric", "sign"]
        return out[first + [c for c in out.columns if c not in first]]

    def best(
        self, by: str | Sequence[str] | None = None, metric: str | None = None
    ) -> pd.DataFrame:
        """The best setting per group: for each combination of the ``by`` axes (default:
        every axis but the compared one), the other axes' values with the best mean of
        ``metric`` (default the lead; lower or higher as the family declares), with its
        mean, sd and seeds."""
        metric = metric or self.lead
        better = self.task.better(metric) or "min"
        shown = [a.key for a in self._axes_shown()]
        if by is None:
            by = [k for k in shown if k != self.compared_axis]
        by = [by] if isinstance(by, str) else list(by)
        other = [k for k in shown if k not in by]
        finished = self.cells[self.cells["status"] == "FINISHED"]
        keyed = finished.assign(**{k: finished[k].map(_key) for k in shown})
        stats = keyed.groupby(by + other, sort=False)[metric].agg(["mean", "std", "count"])
        stats = stats.reset_index()
        pick = stats.groupby(by, sort=False)["mean"].idxmin if better == "min" else \
            stats.groupby(by, sort=False)["mean"].idxmax  # fmt: skip
        chosen = stats.loc[pick()].reset_index(drop=True)
        for k in shown:
            chosen[k] = chosen[k].map(native)
        return chosen.rename(columns={"std": "sd", "count": "seeds"})

    # --- internals --------------------------------------------------------------------
    def _axes_shown(self) -> list[Axis]:
        return [a for a in self.axes if a.shown]

    def _metrics(self) -> list[str]:
        names = []
        for name in self.frame.columns:
            if name in SKIP or name.startswith(("@", "curve_", "hp_")) or name in self.task.groups:
                continue
            if pd.to_numeric(self.frame[name], errors="coerce").notna().any():
                names.append(name)
        return names

    def _raw(self, axis: Axis) -> pd.Series:
        return raw_values(self.frame, axis)

    def _match(self, axis: Axis, raw: pd.Series, wanted: Any, explicit: bool) -> tuple[str, str]:
        """The raw value of the baseline among ``raw`` (by option, text or label), and a note
        when it had to be chosen here: an explicit baseline that matches no cell is an
        error; none, or a default that matches none (a family's ``task.reference`` in a
        sweep recorded before baselines existed), falls back to the first value."""
        present = list(dict.fromkeys(raw))
        for value in present:
            if wanted is not None and (axis.accepts(value, wanted) or _key(wanted) == value):
                return value, ""
        shown = ", ".join(str(v) for v in present)
        if explicit:
            raise ReportError(
                f"baseline {axis.key} '{wanted}' has no cells here; choose one of {shown} "
                "(--baseline, compare(baseline=...), or baseline= when sweeping)"
            )
        why = "no baseline is set" if wanted is None else f"no {axis.key} '{wanted}' is here"
        return present[0], (
            f"paired statistics: {why}, so {present[0]} is the baseline, the first {axis.key} "
            "(set baseline: in the experiment, baseline= on the command line, or pass "
            "--baseline)"
        )

    def _curve_column(self, name: str | None) -> str:
        curves = list(self.task.curves)
        if name is None:
            if not curves:
                raise ReportError(f"the family of '{self.name}' declares no curve")
            name = curves[0]
        for column in (f"curve_{name}", f"hp_{name}", name):
            if column in self.frame and column != "curve_step":
                return column
        traced = [c.removeprefix("hp_") for c in self.frame.columns if c.startswith("hp_")]
        raise ReportError(
            f"no curve or traced setting {name!r} in '{self.name}': curves "
            f"{', '.join(curves) or 'none'}; traced {', '.join(traced) or 'none'}"
        )


def _sign(sign: str) -> str:
    """One of :data:`SIGNS`, however it is spaced (``baseline-option`` on a command line)."""
    for known in SIGNS:
        if str(sign).replace(" ", "") == known.replace(" ", ""):
            return known
    raise ReportError(f"sign is one of {', '.join(map(repr, SIGNS))}, got {sign!r}")


def _key(value: Any) -> str:
    """A value as the text cells are grouped and matched by."""
    return value if isinstance(value, str) else canon(value)


def _finished(frame: pd.DataFrame, metric: str) -> dict[int, float]:
    finished = frame[frame["status"] == "FINISHED"]
    values = pd.to_numeric(finished[metric], errors="coerce")
    return {int(s): float(v) for s, v in zip(finished["seed"], values, strict=True) if pd.notna(v)}


def _paired(mine_cells: pd.DataFrame, base_cells: pd.DataFrame, metric: str, sign: str,
            level: float) -> dict[str, Any]:  # fmt: skip
    """The paired statistics of one option against the baseline (see ``compare``)."""
    mine, theirs = _finished(mine_cells, metric), _finished(base_cells, metric)
    seeds = set(mine_cells["seed"].dropna().astype(int)) | set(
        base_cells["seed"].dropna().astype(int)
    )
    matched = sorted(set(mine) & set(theirs))
    excluded = sorted(seeds - set(matched))
    flip = -1.0 if sign == SIGNS[1] else 1.0
    result = paired_difference([flip * (mine[s] - theirs[s]) for s in matched], level)
    return {
        "n_pairs": result.n,
        "n_excluded": len(excluded),
        "excluded_seeds": ",".join(map(str, excluded)),
        "missing_option": ",".join(str(s) for s in excluded if s not in mine),
        "missing_baseline": ",".join(str(s) for s in excluded if s not in theirs),
        "mean": float(np.mean([mine[s] for s in matched])) if matched else math.nan,
        "mean_baseline": float(np.mean([theirs[s] for s in matched])) if matched else math.nan,
        "difference": result.mean,
        "ci_low": result.ci_low,
        "ci_high": result.ci_high,
        "p_wilcoxon": result.p_value,
        "p_floor": wilcoxon_floor(result.n),
    }


def _budget(config: Mapping[str, Any]) -> dict[str, float] | None:
    """The seed budget a sweep ran with (alpha, max, precision), or None."""
    seeds = config.get("seeds")
    if not isinstance(seeds, Mapping) or seeds.get("until") != "decided":
        return None
    return {
        "alpha": float(seeds.get("alpha", 0.05)),
        "max": float(seeds.get("max", 40)),
        "precision": float(seeds.get("precision", 0.02)),
    }


def _sequence(mine_cells: pd.DataFrame, base_cells: pd.DataFrame, metric: str, sign: str,
              budget: Mapping[str, float], task: Any, lead: str) -> dict[str, Any]:  # fmt: skip
    """The confidence sequence of seeds until decided (sweeper/confseq.py) over the
    paired seeds in seed order, as the sweep computed it, and the decision it makes."""
    mine, theirs = _finished(mine_cells, metric), _finished(base_cells, metric)
    matched = sorted(set(mine) & set(theirs))
    differences = np.asarray([mine[s] - theirs[s] for s in matched], dtype=float)
    if len(differences) < 2:
        return {"cs_low": math.nan, "cs_high": math.nan, "decided": "undecided"}
    found = interval(differences, budget["alpha"], n_star=budget["max"])
    scale = abs(float(np.mean([theirs[s] for s in matched])))
    state = decide(found, budget["precision"] * scale, task.better(lead) != "max")
    low, high = (found.low, found.high) if sign == SIGNS[0] else (-found.high, -found.low)
    return {"cs_low": low, "cs_high": high, "decided": state}


def _baseline(loaded: Loaded, configs: ConfigSearch, requested: Any) -> tuple[Any, bool]:
    """The baseline and whether it was asked for: ``requested``, else the one the sweep ran
    with, else the experiment file's, else what a sweep recorded before baselines existed
    (``report.paired.reference``; its family's ``task.reference`` only as a default)."""
    if requested is not None:
        return requested, True
    for config in (loaded.config, file_config(loaded.name, configs)):
        found = baseline_of(config, legacy_task={})
        if found is not None:
            return found, True
    return baseline_of(loaded.config), False


def _dotted_paths(loaded: Loaded) -> list[str]:
    """The ``cell`` and ``_target_`` paths of the experiment's configs (where its family's
    ``published`` module is looked for)."""
    paths: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in ("cell", "_target_") and isinstance(value, str):
                    paths.append(value)
                else:
                    walk(value)

    walk(loaded.config)
    for config in loaded.cells.get("config", [])[:50]:
        walk(config)
    return list(dict.fromkeys(paths))


def option_labels(loaded: Loaded, configs: ConfigSearch) -> dict[str, str]:
    """Option name -> the display label its YAML gives (``label: UCB1``), for the options
    of the family's groups the cells use, found on the config search path (the shipped
    ``conf/`` and any ``--config-dir``). An option without one keeps its family's display
    name (its ``published`` module), else its own name."""
    labels: dict[str, str] = {}
    for group in loaded.task.groups:
        if group not in loaded.cells:
            continue
        for option in loaded.cells[group].dropna().unique():
            path = configs.find(group, str(option))
            if path is None:
                continue
            try:
                found = yaml.safe_load(path.read_text()) or {}
            except yaml.YAMLError:
                continue  # the sweep said it when it composed the file
            if isinstance(found, Mapping) and found.get("label"):
                labels[str(option)] = str(found["label"])
    return labels


def is_folder(source: str | Path) -> bool:
    """Whether ``source`` is a published report folder (``sweep/experiment.json``)."""
    path = Path(source)
    return path.is_dir() and ((path / "sweep" / "experiment.json").exists()
                              or (path / "experiment.json").exists())  # fmt: skip
