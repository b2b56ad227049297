"""What a report shows: the optional ``report:`` section of an experiment's YAML, every key
optional (the reference, with an example of each key: docs/reports.md). The section used is
the one recorded in the newest sweep's ``config.yaml``, updated by the one in
``conf/exp/NAME.yaml`` as it is now (so layout edits need no rerun).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from sweeper.configs import ConfigSearch
from sweeper.report.load import ReportError
from sweeper.task import GENERIC, Task

RUNTIME = "runtime_s"
"""The summary metric a cell's own runtime goes by (a default table when cells record it)."""
SECTION_KEYS = {"title", "axes", "pivot", "tables", "paired", "optimum", "figures", "reference"}
TABLE_KEYS = {"name", "metric", "title", "pivot", "where", "published", "stat", "transpose"}


@dataclass
class PublishedChoice:
    table: str
    where: dict[str, Any] = field(default_factory=dict)


@dataclass
class TableSpec:
    name: str
    metric: str
    title: str
    pivot: list[str]
    where: dict[str, Any]
    published: list[PublishedChoice] | None  # None: every table whose cells are all axes
    stat: str = "mean_sd"
    better: str | None = None  # 'min', 'max' or None (from the family's metrics)
    transpose: bool = False  # the compare axis makes rows, not columns (e.g. 004 Table 1)


@dataclass
class ReportSpec:
    title: str = ""
    axes: dict[str, dict[str, Any]] = field(default_factory=dict)
    pivot: list[str] = field(default_factory=list)
    tables: list[TableSpec] = field(default_factory=list)
    paired_axis: str | None = None
    reference: str | None = None
    paired_metric: str | None = None
    paired: bool = True
    paired_where: dict[str, Any] = field(default_factory=dict)
    sign: str = "option - baseline"  # or "baseline - option": which side comes first
    optimum_axis: str | None = None
    optimum_metric: str | None = None
    optimum_published: list[PublishedChoice] | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    task: Task = GENERIC

    @property
    def compare(self) -> str | None:
        """The axis drawn as lines and spread into columns (the family's compare axis)."""
        return self.task.compare


def file_config(name: str, configs: ConfigSearch) -> dict[str, Any]:
    """The experiment file ``exp/NAME.yaml`` on the config search path (a
    ``--config-dir``'s first) as it is now, or {} when there is none."""
    path = configs.find("exp", name)
    if path is None:
        return {}
    try:
        loaded = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ReportError(f"{path} is not valid YAML: {err}") from err
    return dict(loaded) if isinstance(loaded, Mapping) else {}


def section_from_file(name: str, configs: ConfigSearch) -> dict[str, Any]:
    """The ``report:`` section of the experiment file ``exp/NAME.yaml``, or {}."""
    return dict(file_config(name, configs).get("report") or {})


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str) or not isinstance(value, Sequence):
        return [value]
    return list(value)


def _published(value: Any, where: str) -> list[PublishedChoice] | None:
    if value is None:
        return None
    if value is False:
        return []
    choices = []
    for item in _as_list(value):
        if isinstance(item, str):
            choices.append(PublishedChoice(item))
        elif isinstance(item, Mapping) and "table" in item:
            choices.append(PublishedChoice(str(item["table"]), dict(item.get("where") or {})))
        else:
            raise ReportError(
                f"report {where}: published entries are table names or "
                f"{{table: NAME, where: {{...}}}}, got {item!r}"
            )
    return choices


def default_tables(task: Task) -> list[dict[str, Any]]:
    """The lead metric (mean +- sd) and, when the family declares it, the runtime (mean)."""
    tables = [{"name": task.metric(task.lead).table_name, "metric": task.lead}] if task.lead else []
    if RUNTIME in task.metrics and task.lead != RUNTIME:
        tables.append({"name": "runtime", "metric": RUNTIME, "stat": "mean"})
    return tables


def parse(
    section: Mapping[str, Any] | None, reference: str | None = None, task: Task = GENERIC
) -> ReportSpec:
    """Validate a ``report:`` section; ``reference`` (from the command line) wins. Unset
    defaults (tables, paired axis, reference and metric) come from the family's ``task``."""
    section = dict(section or {})
    unknown = set(section) - SECTION_KEYS
    if unknown:
        raise ReportError(
            f"report section: unknown key(s) {sorted(unknown)}; valid keys are "
            f"{sorted(SECTION_KEYS)}"
        )
    spec = ReportSpec(title=str(section.get("title") or ""), task=task)
    spec.paired_axis, spec.paired_metric = task.compare, task.lead
    spec.optimum_metric = task.lead
    axes = section.get("axes") or {}
    if not isinstance(axes, Mapping):
        raise ReportError(f"report.axes maps config keys to {{name, labels}}, got {axes!r}")
    for key, settings in axes.items():
        settings = dict(settings or {})
        bad = set(settings) - {"name", "labels", "merge"}
        if bad:
            raise ReportError(
                f"report.axes.{key}: unknown setting(s) {sorted(bad)}; use name, labels, merge"
            )
        if not isinstance(settings.get("merge") or {}, Mapping):
            raise ReportError(f"report.axes.{key}.merge maps a label to the values it joins")
        if not isinstance(settings.get("labels") or {}, Mapping):
            raise ReportError(f"report.axes.{key}.labels maps a label to a value")
        spec.axes[str(key)] = settings
    spec.pivot = [str(p) for p in _as_list(section.get("pivot"))]

    tables = section.get("tables")
    for index, table in enumerate(tables if tables is not None else default_tables(task)):
        if not isinstance(table, Mapping) or "metric" not in table:
            raise ReportError(f"report.tables[{index}] needs at least a metric, got {table!r}")
        bad = set(table) - TABLE_KEYS
        if bad:
            raise ReportError(
                f"report.tables[{index}]: unknown key(s) {sorted(bad)}; valid keys are "
                f"{sorted(TABLE_KEYS)}"
            )
        metric = str(table["metric"])
        stat = str(table.get("stat", "mean_sd"))
        if stat not in ("mean_sd", "mean"):
            raise ReportError(f"report.tables[{index}].stat is mean_sd or mean, got {stat!r}")
        spec.tables.append(
            TableSpec(
                name=str(table.get("name") or metric),
                metric=metric,
                title=str(table.get("title") or task.metric(metric).title),
                pivot=[str(p) for p in _as_list(table.get("pivot", spec.pivot))],
                where=dict(table.get("where") or {}),
                published=_published(table.get("published"), f"tables[{index}]"),
                stat=stat,
                better=task.better(metric),
                transpose=bool(table.get("transpose", False)),
            )
        )
    names = [t.name for t in spec.tables]
    if len(set(names)) != len(names):
        raise ReportError(f"report.tables: names must be distinct, got {names}")

    paired = section.get("paired", {})
    if paired is False:
        spec.paired = False
    elif isinstance(paired, Mapping):
        spec.paired_axis = _optional(paired.get("axis", spec.paired_axis))
        spec.reference = paired.get("reference")
        spec.paired_metric = _optional(paired.get("metric", spec.paired_metric))
        spec.paired_where = dict(paired.get("where") or {})
        spec.sign = str(paired.get("sign", spec.sign))
        bad = set(paired) - {"axis", "reference", "metric", "where", "sign"}
        if bad:
            raise ReportError(
                f"report.paired: unknown key(s) {sorted(bad)}; use axis, metric, where, sign "
                "(the baseline is the top-level baseline: key)"
            )
    else:
        raise ReportError(
            f"report.paired is false or {{axis, metric, where, sign}}, got {paired!r}"
        )
    if section.get("reference") is not None:
        spec.reference = section["reference"]
    if reference is not None:
        spec.reference = reference

    optimum = section.get("optimum")
    if optimum is not None:
        optimum = {"axis": optimum} if isinstance(optimum, str) else dict(optimum)
        if "axis" not in optimum:
            raise ReportError("report.optimum needs the axis whose best value to report")
        spec.optimum_axis = str(optimum["axis"])
        spec.optimum_metric = _optional(optimum.get("metric", spec.optimum_metric))
        spec.optimum_published = _published(optimum.get("published"), "optimum")
    figures = section.get("figures") or {}
    if not isinstance(figures, Mapping):
        raise ReportError(f"report.figures maps figure options, got {figures!r}")
    spec.figures = dict(figures)
    return spec


def _optional(value: Any) -> str | None:
    return None if value is None else str(value)
