"""Run one cell and capture its outcome; the same code runs in a Ray worker or in-process."""

from __future__ import annotations

import logging
import math
import socket
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hydra.utils import get_method

from sweeper.cellnpz import pack
from sweeper.provenance import loaded_libraries


class _Quiet(logging.Filter):
    """``hydra.utils.get_method`` logs its error before raising it; the caller says it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Error getting callable")


def cell_function(path: str) -> Any:
    """The cell function at the dotted ``path`` (the config key ``cell``), found by Hydra's
    own lookup; ``ImportError``/``ValueError`` naming it when there is none."""
    quiet = logging.getLogger("hydra.utils")
    if not any(isinstance(f, _Quiet) for f in quiet.filters):
        quiet.addFilter(_Quiet())
    return get_method(path)


def node_label(node_ip: str | None, node_id: str | None) -> str:
    """``<ip or host>/<first 12 hex digits of the Ray node id>``.

    The Ray node id tells apart two nodes on one host (as in a test cluster), where the IP
    and host name are the same.
    """
    host = node_ip or socket.gethostname()
    return f"{host}/{node_id[:12]}" if node_id else host


@dataclass
class Outcome:
    """What a cell produced: its result on success, the error and traceback on failure."""

    status: str  # "FINISHED" or "FAILED"
    result: dict[str, Any] | None = None
    error: str | None = None
    traceback: str | None = None
    wall_s: float = 0.0
    node: str = field(default_factory=socket.gethostname)
    node_ip: str | None = None
    node_id: str | None = None  # the Ray node id, when the cell ran on Ray
    artifact: bytes | None = None  # ``cell.npz`` (curves and trace), packed where it ran
    libraries: str = ""  # versions of the numerical libraries loaded where it ran

    @property
    def where(self) -> str:
        """The node, as recorded in the run tag ``node``."""
        return node_label(self.node_ip or self.node, self.node_id)


def _non_finite(summary: Mapping[str, Any]) -> list[str]:
    return [k for k, v in summary.items() if isinstance(v, float) and not math.isfinite(v)]


def execute(function: str, config: dict[str, Any]) -> Outcome:
    """Call ``function(config)``; exceptions and non-finite summaries become FAILED outcomes.

    The result must be a mapping with at least ``summary`` (name -> number); a cell that
    returns anything else is FAILED with a message saying so.
    """
    started = time.perf_counter()
    try:
        result = cell_function(function)(config)
        if not isinstance(result, Mapping) or not isinstance(result.get("summary"), Mapping):
            raise TypeError(
                f"cell function '{function}' returned {type(result).__name__}; it must return "
                "a mapping with a 'summary' mapping (and optionally 'curves', 'trace', 'params')"
            )
        bad = _non_finite(result["summary"])
        if bad:
            raise FloatingPointError(f"the cell diverged: its summary is not finite: {bad}")
        outcome = Outcome("FINISHED", result=dict(result))
        outcome.artifact = pack(result, config)
    except Exception as err:  # a failing cell never kills a sweep
        outcome = Outcome(
            "FAILED", error=f"{type(err).__name__}: {err}", traceback=traceback.format_exc()
        )
    outcome.wall_s = time.perf_counter() - started
    outcome.libraries = loaded_libraries()
    return outcome
