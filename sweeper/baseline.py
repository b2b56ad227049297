"""The baseline: the one option every paired comparison is against (docs/reports.md,
"Paired comparisons and the baseline").

An experiment sets it (``baseline: cdt``) and the command line overrides it
(``baseline=ucb1``); the report, the seed budget (seeds until decided, sweeper/adaptive.py)
and ``sweeper.load(...).compare()`` all use this one value. It is a value of the *compared
axis*: the experiment's ``report.paired.axis``, else the family's ``task.compare`` (the
tuner, for the bandit family). A value is named by its option name (``cdt``), its text
(``6``, ``[0.1, 1]``) or the label ``report.axes`` gives it (``C1``).

Sweeps recorded before the baseline existed named it ``report.paired.reference`` (and the
family's task block had a ``reference``): :func:`baseline_of` reads those too, so that old
stores report as they did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from sweeper.cells import canonical_json
from sweeper.errors import SweepError

KEY = "baseline"
"""The root config key (conf/config.yaml)."""


def compared_axis(config: Mapping[str, Any], compare: str | None) -> str | None:
    """The axis paired comparisons run along: ``report.paired.axis``, else ``compare`` (the
    family's ``task.compare``)."""
    paired = _paired(config)
    axis = paired.get("axis") if isinstance(paired, Mapping) else None
    return str(axis) if axis else compare


def baseline_of(config: Mapping[str, Any], legacy_task: Mapping[str, Any] | None = None) -> Any:
    """The baseline a composed or recorded config sets, or None.

    ``baseline``, else (a sweep recorded before it existed) ``report.paired.reference``,
    else that recording's ``task.reference``."""
    value = config.get(KEY)
    if value is not None:
        return value
    paired = _paired(config)
    if isinstance(paired, Mapping) and paired.get("reference") is not None:
        return paired["reference"]
    task = legacy_task if legacy_task is not None else config.get("task")
    return task.get("reference") if isinstance(task, Mapping) else None


def _paired(config: Mapping[str, Any]) -> Any:
    report = config.get("report")
    return report.get("paired") if isinstance(report, Mapping) else None


def _parsed(text: Any) -> Any:
    """A command-line spelling as a value (``6`` -> 6, ``[0.1, 1]`` -> a list)."""
    if not isinstance(text, str):
        return text
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold()
    return canonical_json({"v": a}) == canonical_json({"v": b})


def names(value: Any, labels: Mapping[str, Any] | None = None) -> list[str]:
    """How a user may name the axis value ``value``: its labels, then its text."""
    found = [str(label) for label, v in (labels or {}).items() if _same(_parsed(v), value)]
    return [*found, value if isinstance(value, str) else canonical_json({"v": value})[5:-1]]


def matches(wanted: Any, value: Any, labels: Mapping[str, Any] | None = None) -> bool:
    """Whether ``wanted`` (a baseline as given) names the axis value ``value``."""
    if _same(_parsed(wanted), value) or _same(wanted, value):
        return True
    return any(_same(str(wanted), name) for name in names(value, labels))


def check_in_grid(
    baseline: Any, axis: str, values: Iterable[Any], labels: Mapping[str, Any] | None = None
) -> Any:
    """The grid's value ``baseline`` names; a one-paragraph :class:`SweepError` (exit 2)
    naming the grid's values of ``axis`` when it names none."""
    values = list(values)
    for value in values:
        if matches(baseline, value, labels):
            return value
    shown = ", ".join(names(v, labels)[0] for v in values) or "none"
    raise SweepError(
        f"baseline={baseline} is not a {axis} of this sweep: its grid has {shown}. Every "
        f"paired comparison (the report, seeds until decided, sweeper.load().compare) is "
        f"against the baseline, so it must be one of them: set baseline=<one of them> on the "
        "command line or in the experiment file (docs/reports.md)"
    )


def required(axis: str | None, values: Iterable[Any], why: str) -> SweepError:
    """The error for a sweep that needs a baseline and has none."""
    shown = ", ".join(str(v) for v in values) or "none"
    return SweepError(
        f"{why} pairs every {axis} with the baseline, and this sweep sets none: add "
        f"baseline=<one of {shown}> to the command line or `baseline:` to the experiment file "
        "(docs/reports.md)"
    )
