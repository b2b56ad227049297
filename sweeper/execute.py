"""Run one cell and capture its outcome; the same code runs in a Ray worker or in-process."""

from __future__ import annotations

import math
import socket
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from tasks.building import locate


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


def _non_finite(summary: dict[str, Any]) -> list[str]:
    return [k for k, v in summary.items() if isinstance(v, float) and not math.isfinite(v)]


def execute(function: str, config: dict[str, Any]) -> Outcome:
    """Call ``function(config)``; exceptions and non-finite summaries become FAILED outcomes."""
    started = time.perf_counter()
    try:
        result = locate(function)(config)
        bad = _non_finite(result.get("summary", {}))
        if bad:
            raise FloatingPointError(f"the cell's summary is not finite: {bad}")
        outcome = Outcome("FINISHED", result=result)
    except Exception as err:  # a failing cell never kills a sweep
        outcome = Outcome(
            "FAILED", error=f"{type(err).__name__}: {err}", traceback=traceback.format_exc()
        )
    outcome.wall_s = time.perf_counter() - started
    try:
        import ray

        if ray.is_initialized():
            outcome.node_ip = ray.util.get_node_ip_address()
    except Exception:  # pragma: no cover - only informational
        pass
    return outcome
