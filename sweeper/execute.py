"""Run one cell and capture its outcome; the same code runs in a Ray worker or in-process."""

from __future__ import annotations

import logging
import socket
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from hydra.utils import get_method

from sweeper.cellnpz import pack
from sweeper.outcome import Declared, check_result
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


def execute(function: str, config: dict[str, Any], declared: Declared | None = None) -> Outcome:
    """Call ``function(config)``; exceptions and results that cannot be recorded become
    FAILED outcomes.

    The result must be a mapping with at least ``summary`` (name -> finite number), checked
    here against the family's ``declared`` metrics and curves (:mod:`sweeper.outcome`): a
    cell that returns anything else is FAILED with a message naming the key and the value.
    """
    started = time.perf_counter()
    try:
        outcome = finished(function, cell_function(function)(config), config, declared)
    except Exception as err:  # a failing cell never kills a sweep
        outcome = failed(err)
    outcome.wall_s = time.perf_counter() - started
    outcome.libraries = loaded_libraries()
    return outcome


def execute_batch(
    function: str, configs: list[dict[str, Any]], declared: Declared | None = None
) -> list[Outcome]:
    """Run cells whose configs differ only in their seed as one call of the cell function's
    batched form, ``function.batch(configs)`` (their results, in order); each result is
    checked and becomes its own outcome as in :func:`execute`, with an equal share of the
    batch's wall time. When the batched call raises, every cell runs again alone
    (:func:`execute`), so that a seed that fails or diverges fails its own cell only.
    """
    started = time.perf_counter()
    try:
        results = list(cell_function(function).batch(configs))
        if len(results) != len(configs):
            raise TypeError(
                f"{function}.batch returned {len(results)} results for {len(configs)} configs"
            )
    except Exception:  # one seed's failure: each cell alone says whose it is
        return [execute(function, config, declared) for config in configs]
    wall_s = (time.perf_counter() - started) / len(configs)
    outcomes = []
    for result, config in zip(results, configs, strict=True):
        try:
            outcome = finished(function, result, config, declared)
        except Exception as err:  # this cell's result is bad, not the others'
            outcome = failed(err)
        outcome.wall_s = wall_s
        outcomes.append(outcome)
    libraries = loaded_libraries()
    for outcome in outcomes:
        outcome.libraries = libraries
    return outcomes


def finished(
    function: str, result: Any, config: dict[str, Any], declared: Declared | None = None
) -> Outcome:
    """The outcome of a cell that returned ``result``; raises when the result cannot be
    recorded (:func:`sweeper.outcome.check_result`)."""
    check_result(result, function, declared)
    outcome = Outcome("FINISHED", result=dict(result))
    outcome.artifact = pack(result, config)
    return outcome


def failed(err: BaseException) -> Outcome:
    return Outcome("FAILED", error=f"{type(err).__name__}: {err}", traceback=traceback.format_exc())
