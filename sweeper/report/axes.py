"""The axes a report groups cells by: the sweeps' grid keys, plus any other config key that
varies between cells that the grid keys do not tell apart (e.g. two sweeps run with
different horizons), so cells of different settings are never averaged together.

Each cell gets one column per axis, ``@KEY``, holding the canonical text of its value
(``canon``): group axes (the family's ``task.groups``, e.g. algorithm, tuner, dataset)
hold option names, others the value at that dotted key of the cell config.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from sweeper.report.load import Loaded, ReportError
from sweeper.report.spec import ReportSpec
from sweeper.tree import flatten, select

NULL = "null"


def canon(value: Any) -> str:
    """Canonical text of a config value: 1.0 -> '1', [0.1, 1.0] -> '[0.1, 1]', None -> 'null'."""
    if value is None:
        return NULL
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return str(int(value))
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {canon(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(canon(v) for v in value) + "]"
    if hasattr(value, "tolist"):
        return canon(value.tolist())
    return str(value)


def column(key: str) -> str:
    return f"@{key}"


@dataclass
class Axis:
    key: str
    name: str
    group: bool
    values: list[str] = field(default_factory=list)  # canonical, in display order
    labels: dict[str, str] = field(default_factory=dict)  # canonical -> label
    shown: bool = True
    members: dict[str, set[str]] = field(default_factory=dict)  # merged value -> its values

    @property
    def column(self) -> str:
        return column(self.key)

    @property
    def header(self) -> str:
        return self.name.capitalize() if self.group else self.name

    def label(self, value: str) -> str:
        return self.labels.get(value, "default" if value == NULL else value)

    def accepts(self, value: Any, wanted: Any) -> bool:
        """Does the cell value ``value`` (canonical) equal ``wanted`` (a value or a label)?"""
        text = canon(wanted).casefold()
        own = {value, self.label(value), *self.members.get(value, ())}
        return text in {v.casefold() for v in own}


def _sort_key(text: str) -> tuple[int, float, str]:
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)


def build_axes(
    loaded: Loaded,
    spec: ReportSpec,
    display_names: Mapping[str, str] | None = None,
    axis_names: Mapping[str, str] | None = None,
) -> tuple[pd.DataFrame, list[Axis]]:
    """The cells with an ``@KEY`` column per axis, and the axes in display order.

    Shown (grouped by) are: the axes a report section names (pivot, where, optimum, paired);
    the family's groups when the grid lists them or they vary; any other axis that
    varies and is not fixed by the other shown axes (a tuner's own setting, such as CDT's
    restart_multiplier in an experiment where only CDT sets it, is not a row of its own).
    """
    cells = loaded.cells.copy()
    display_names = dict(display_names or {})
    axis_names = dict(axis_names or {})
    configs = [c if isinstance(c, Mapping) else {} for c in cells.get("config", [])]
    names = {str(s.get("name")) for s in spec.axes.values() if s.get("name")}
    names |= set(axis_names.values())

    requested = list(spec.pivot)
    for table in spec.tables:
        requested += table.pivot + [str(k) for k in table.where]
    requested += [str(k) for k in spec.paired_where]
    requested += [spec.paired_axis] if spec.paired_axis else []
    requested += [spec.optimum_axis] if spec.optimum_axis else []
    requested = [k for k in dict.fromkeys(requested) if k not in names]

    groups = loaded.task.groups
    keys = [g for g in groups if g in cells and cells[g].notna().any()]
    keys += [k for k in loaded.grid if k not in keys and k not in ("seed", "seeds")]
    keys += [k for k in requested if k not in keys]

    for key in keys:
        if key in groups:
            cells[column(key)] = cells[key].fillna("").astype(str)
        else:
            cells[column(key)] = [canon(select(c, key)) for c in configs]
    for key in _implicit_axes(cells, configs, keys, groups):
        keys.append(key)
        cells[column(key)] = [canon(select(c, key)) for c in configs]

    axes = []
    for key in keys:
        settings = spec.axes.get(key, {})
        group = key in groups
        labels = {}
        if group:
            labels = {v: display_names.get(v, v) for v in cells[column(key)].unique()}
        for label, value in (settings.get("labels") or {}).items():
            labels[canon(value)] = str(label)
        order = [canon(v) for v in loaded.grid.get(key, [])]
        order += [canon(v) for v in (settings.get("labels") or {}).values()]
        members: dict[str, set[str]] = {}
        for label, values in (settings.get("merge") or {}).items():
            merged = {canon(v) for v in (values if isinstance(values, list) else [values])}
            token = str(label)
            members[token] = merged
            labels[token] = token
            cells[column(key)] = cells[column(key)].map(
                lambda v, m=merged, t=token: t if v in m else v
            )
            order = [token if v in merged else v for v in order]
        present = list(dict.fromkeys(cells[column(key)]))
        if not group and all(_sort_key(v)[0] == 0 for v in present):
            order = []  # numbers (k, K, a grid of values): ascending, whatever the grid's order
        values = [v for v in dict.fromkeys(order) if v in present]
        values += sorted((v for v in present if v not in values), key=_sort_key)
        name = str(settings.get("name") or axis_names.get(key) or key)
        wanted = key in requested or (group and key in loaded.grid)
        axes.append(Axis(key, name, group, values, labels, wanted or len(values) > 1, members))
    _hide_redundant(cells, axes, requested)
    return cells, axes


def _hide_redundant(cells: pd.DataFrame, axes: list[Axis], requested: list[str]) -> None:
    """Hide each unrequested non-group axis whose value the other shown axes determine."""
    for axis in reversed(axes):
        if not axis.shown or axis.group or axis.key in requested:
            continue
        others = [a.column for a in axes if a.shown and a is not axis]
        if not others:
            continue
        if cells.groupby(others, sort=False)[axis.column].nunique().max() <= 1:
            axis.shown = False


def _implicit_axes(
    cells: pd.DataFrame, configs: list[Mapping[str, Any]], keys: list[str], groups: Sequence[str]
) -> list[str]:
    """Config keys (not the seed) that differ between cells the declared axes do not separate."""
    if len(cells) < 2:
        return []
    flat = pd.DataFrame([{k: canon(v) for k, v in flatten(c).items()} for c in configs])
    flat = flat.drop(columns=[c for c in flat if c == "seed"], errors="ignore").fillna(NULL)
    declared = [column(k) for k in keys]
    groups = cells[declared].astype(str).agg("\x1f".join, axis=1).to_numpy()
    flat["__group"] = groups
    extra = []
    counts = flat.groupby("__group").nunique()
    for key in counts.columns:
        if key in keys or any(key.startswith(f"{k}.") for k in keys if k not in groups):
            continue
        if (counts[key] > 1).any():
            extra.append(key)
    return extra


def native(text: Any) -> Any:
    """Canonical text back to a number where it is one ('2' -> 2, '0.5' -> 0.5, 'null' ->
    None); other text as it is."""
    if not isinstance(text, str):
        return text
    if text == NULL:
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            continue
    return text


def raw_values(cells: pd.DataFrame, axis: Axis) -> pd.Series:
    """The axis' value per cell under its raw name: a group's option (``op``), else the
    config value (a number, or a list or mapping as its canonical text), never merged or
    labelled: what a user filters and joins on."""
    if axis.group:
        return cells[axis.key].astype(str)
    configs = cells["config"] if "config" in cells else pd.Series([{}] * len(cells))
    values = [native(canon(select(c if isinstance(c, Mapping) else {}, axis.key)))
              for c in configs]  # fmt: skip
    return pd.Series(values, index=cells.index, dtype=object)


def restrict(loaded: Loaded, where: Mapping[str, Sequence[str]]) -> Loaded:
    """Only the cells whose ``key`` is one of its listed values, for every key: a column of
    the cells table (``seed``, a group) or a dotted path into the cell config
    (``logged_data.beta0``); values compare as their canonical text (``3`` = ``3.0``)."""
    cells = loaded.cells
    keep = pd.Series(True, index=cells.index)
    for key, values in where.items():
        wanted = {canon(_number_or_text(v)) for v in values}
        if key in cells:
            have = cells[key].map(lambda v: canon(v) if pd.notna(v) else "")
        else:
            configs = [c if isinstance(c, Mapping) else {} for c in cells["config"]]
            have = pd.Series([canon(select(c, key)) for c in configs], index=cells.index)
        if not have.isin(wanted).any():
            raise ReportError(
                f"--where {key}={','.join(values)} keeps no cell: {key} takes the values "
                f"{sorted(set(have) - {''})[:20]} in experiment '{loaded.name}'"
            )
        keep &= have.isin(wanted)
    loaded.cells = cells[keep].reset_index(drop=True)
    loaded.notes.append(
        "cells restricted to "
        + "; ".join(f"{k} in {{{', '.join(v)}}}" for k, v in where.items())
        + f" ({int(keep.sum())} of {len(keep)})"
    )
    return loaded


def _number_or_text(text: str) -> Any:
    try:
        return float(text) if "." in text or "e" in text.lower() else int(text)
    except ValueError:
        return text
