"""A cell's result checked where it ran, before it leaves the worker (issue #41, item 2).

The driver records a cell's summary as MLflow metrics, its declared curves as step metrics
and its params as MLflow params (:mod:`sweeper.store.cellruns`). A value that is not a
number there (``"abc"``, ``None``, a nested dict) or a key MLflow refuses used to stop the
whole sweep in the driver's writer thread, and a NaN that is not a Python float
(``np.float32("nan")``, the string ``"nan"``) was recorded as a FINISHED run. Checked here,
in the worker, against what the family declares (its ``task.metrics`` and ``task.curves``),
such a result makes its cell FAILED with a message naming the key and the value, and the
other cells are recorded as usual.

A result is recordable when

- every summary value is a real number (``int``, ``float``, NumPy's integers and floats;
  not a ``bool``, a string or an array) and finite (NaN or infinity: the cell diverged);
- every summary key and param key is a name MLflow's API accepts (:func:`key_problem`:
  letters, digits, ``_ - . / :`` and spaces, at most 250 characters, not a path that
  resolves to another name such as ``a/../b``);
- every curve the family declares, when the result has it, is a non-empty 1-D array of
  real numbers.

This module imports neither MLflow nor Ray (a worker would pay seconds for MLflow's import
to check a few names); :func:`key_problem` follows MLflow's own rule, and
tests/test_outcome.py checks it against MLflow's validator key by key.
"""

from __future__ import annotations

import numbers
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

KEY_CHARACTERS = re.compile(r"^[/\w.\- :]*$")
"""The characters MLflow allows in a metric or param key (mlflow.utils.validation, POSIX)."""
MAX_KEY_LENGTH = 250
"""MLflow's longest metric or param key."""
SHOWN = 60
"""Characters of a bad value shown in the message."""


class BadResult(ValueError):
    """A cell's result that cannot be recorded: the message names each bad key and value."""


@dataclass(frozen=True)
class Declared:
    """What a family declares of its cells' results (its task block's ``metrics`` and
    ``curves``): the summary metrics it reports on and the curves the store reads."""

    metrics: tuple[str, ...] = ()
    curves: tuple[str, ...] = ()

    @classmethod
    def of(cls, task: Any) -> Declared:
        """The declarations of a :class:`sweeper.task.Task`."""
        return cls(tuple(task.metrics), tuple(task.curves))


def key_problem(key: Any) -> str | None:
    """Why MLflow's API would refuse ``key`` as a metric or param key, or None."""
    if not isinstance(key, str):
        return f"a key must be a string, not {type(key).__name__}"
    if len(key) > MAX_KEY_LENGTH:
        return f"a key has at most {MAX_KEY_LENGTH} characters, this one {len(key)}"
    if not KEY_CHARACTERS.match(key):
        return "a key holds only letters, digits, _ - . / : and spaces"
    normal = posixpath.normpath(key)
    if normal != key or normal == "." or normal.startswith(("..", "/")):
        return f"a key must not read as a path that resolves to another name ({normal!r})"
    return None


def check_result(result: Any, function: str, declared: Declared | None = None) -> None:
    """Raise :class:`BadResult` (or ``FloatingPointError`` for a summary that diverged)
    unless the cell function ``function``'s ``result`` can be recorded (see the module
    docstring); ``declared`` names the family's metrics and curves."""
    declared = declared or Declared()
    if not isinstance(result, Mapping) or not isinstance(result.get("summary"), Mapping):
        raise TypeError(
            f"cell function '{function}' returned {type(result).__name__}; it must return "
            "a mapping with a 'summary' mapping (and optionally 'curves', 'trace', 'params')"
        )
    summary = result["summary"]
    problems = [_summary_problem(k, v, declared) for k, v in summary.items()]
    problems += [_curve_problem(name, result.get("curves"), declared) for name in declared.curves]
    params = result.get("params") or {}
    if not isinstance(params, Mapping):
        problems.append(f"params is {_shown(params)}, not a mapping of names to values")
    else:
        problems += [_key_message("params", k) for k in params if key_problem(k)]
    problems = [p for p in problems if p]
    if problems:
        raise BadResult(
            f"cell function '{function}' returned a result that cannot be recorded: "
            + "; ".join(problems)
        )
    diverged = [k for k, v in summary.items() if not np.isfinite(float(v))]
    if diverged:
        values = ", ".join(f"{k} = {summary[k]!r}" for k in diverged)
        raise FloatingPointError(f"the cell diverged: its summary is not finite: {values}")


def _summary_problem(key: Any, value: Any, declared: Declared) -> str | None:
    if key_problem(key):
        return _key_message("summary", key)
    if _real(value):
        return None
    which = "a metric the family declares" if key in declared.metrics else "a summary metric"
    return f"summary[{key!r}] is {_shown(value)}, not a number ({which})"


def _curve_problem(name: str, curves: Any, declared: Declared) -> str | None:
    """The problem of declared curve ``name`` of ``curves`` (absent: none)."""
    if not isinstance(curves, Mapping) or name not in curves:
        return None
    try:
        values = np.asarray(curves[name])
    except (TypeError, ValueError):
        values = np.asarray(None)
    if values.ndim == 1 and len(values) and values.dtype.kind in "iuf":
        return None
    return (
        f"curves[{name!r}] is {_shown(curves[name])}, not a non-empty 1-D array of numbers "
        f"(the family declares the curves {list(declared.curves)})"
    )


def _key_message(where: str, key: Any) -> str:
    return f"{where} key {key!r} is one MLflow refuses: {key_problem(key)}"


def _real(value: Any) -> bool:
    """A real number MLflow records as a metric (not a bool, a string or an array)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_)


def _shown(value: Any) -> str:
    text = repr(value)
    text = text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."
    return f"{text} ({type(value).__name__})"
