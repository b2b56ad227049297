"""sweeper: distributed, resumable experiment sweeps (Hydra composes, Ray runs, MLflow records).

The public Python API (docs/python.md)::

    import sweeper
    result = sweeper.run("smoke", ["seeds=3"])      # as `python -m sweeper +exp=smoke seeds=3`
    results = sweeper.load("smoke")                 # or a published folder: docs/results/main
    results.cells                                   # one row per cell (a pandas DataFrame)
    results.compare()                               # paired differences against the baseline

The orchestrator is generic: it knows cells (a config and a function to run it on), axes,
curves and summary metrics; each task family (``tasks/<family>/``, ``conf/task/<family>.yaml``)
tells it its vocabulary. docs/architecture.md walks through the layers. Every name not in
``__all__`` is internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Results", "SweepError", "SweepResult", "load", "run"]

if TYPE_CHECKING:  # pragma: no cover
    from sweeper.api import load, run
    from sweeper.errors import SweepError
    from sweeper.report.results import Results
    from sweeper.sweep import SweepResult

_WHERE = {
    "run": "sweeper.api",
    "load": "sweeper.api",
    "Results": "sweeper.report.results",
    "SweepError": "sweeper.errors",
    "SweepResult": "sweeper.sweep",
}


def __getattr__(name: str) -> Any:
    """The public names, imported when first used: ``import sweeper`` stays light (a Ray
    worker, the research code, a console script's missing-package message need none)."""
    if name not in _WHERE:
        raise AttributeError(f"module 'sweeper' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_WHERE[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
