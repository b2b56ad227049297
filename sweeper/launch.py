"""Dispatch cells and stream their outcomes back as they finish (docs/architecture.md, steps 4-5).

``ray`` submits every cell as a Ray task with at most ``launcher.max_in_flight`` submitted at
once and yields events in completion order (``ray.wait``), never in submission order as
Hydra's Ray launcher does. Each task is a Ray generator that first yields a start marker
(which node, when) and then the cell's :class:`~sweeper.execute.Outcome`, so the driver
knows which cells are running and when each one's time limit (``launcher.timeout_s``,
counted from the cell's first start, retries included) is up; a cell over its limit is
cancelled with ``ray.cancel(force=True)`` and becomes a FAILED outcome. A worker that dies
(segfault, OOM kill, lost node) is retried by Ray up to ``launcher.max_retries`` times,
after which the cell is FAILED with Ray's error. On Ctrl-C (or when the consumer stops
iterating) every cell still in flight is cancelled.

``local`` runs the cells one by one in this process, for debugging; its time limit is a
``SIGALRM`` timer (main thread only), which interrupts Python code but not a long C call.

Either way the driver, not the workers, writes to MLflow.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from sweeper.cells import Cell
from sweeper.errors import SweepError, whole_number
from sweeper.execute import Outcome, execute, node_label

POLL_S = 0.5
"""How often the Ray loop wakes up without a result, to refresh progress and check limits."""

LAUNCHERS = ("ray", "local")


@dataclass
class Event:
    """What the launcher reports: a cell ``started`` or ``finished`` (with its outcome), or
    a ``tick`` (nothing new; a chance to refresh the progress bar)."""

    kind: str
    cell: Cell | None = None
    outcome: Outcome | None = None
    node: str | None = None


def timeout_of(launcher: Mapping[str, Any]) -> float | None:
    """``launcher.timeout_s`` as seconds, or None for no limit; a clear error on a bad value."""
    value = launcher.get("timeout_s")
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise SweepError(
            f"launcher.timeout_s must be a positive number of seconds or null (no limit), got "
            f"{value!r}: set launcher.timeout_s=1800 (half an hour per cell) or "
            "launcher.timeout_s=null"
        )
    return seconds


def check_launcher(launcher: Mapping[str, Any]) -> None:
    """Refuse a launcher config that cannot work, before anything runs."""
    name = launcher.get("name", "ray")
    if name not in LAUNCHERS:
        raise ValueError(f"unknown launcher '{name}'; valid launchers are: {', '.join(LAUNCHERS)}")
    timeout_of(launcher)
    strategy = launcher.get("scheduling_strategy")
    if strategy is not None and str(strategy) not in ("DEFAULT", "SPREAD"):
        raise ValueError(f"launcher.scheduling_strategy must be DEFAULT or SPREAD, got {strategy}")
    if launcher.get("num_cpus") is not None:
        whole_number(
            launcher.get("num_cpus"), "launcher.num_cpus", 1, "CPUs of an embedded Ray; null: all"
        )
    for key, minimum in (("max_in_flight", 1), ("max_retries", 0)):
        if launcher.get(key) is not None:
            whole_number(launcher.get(key), f"launcher.{key}", minimum)
    cpus = launcher.get("cpus_per_cell")
    if cpus is not None and not (isinstance(cpus, int | float) and cpus > 0):
        raise SweepError(f"launcher.cpus_per_cell must be a positive number of CPUs, got {cpus!r}")
    address = launcher.get("address")
    if address:
        split_address(str(address))


class Source(Protocol):
    """Where the cells to run come from while the sweep runs: a fixed grid
    (:class:`Fixed`), or seeds until decided (:class:`sweeper.adaptive.AdaptiveSeeds`),
    which hands out more cells as outcomes arrive."""

    def take(self, n: int) -> list[Cell]:
        """Up to ``n`` cells to dispatch now (none may be ready while cells run)."""
        ...

    def more(self) -> bool:
        """Whether any cell may still be handed out."""
        ...

    def speculate(self, n: int) -> list[Cell]:
        """Up to ``n`` cells to run ahead of need on CPUs that ``take`` leaves idle."""
        ...


class Fixed:
    """Every cell of ``cells``, in order, each built when it is taken (sweeper/grid.Grid)."""

    def __init__(self, cells: Sequence[Cell]) -> None:
        self.pending, self.left = iter(cells), len(cells)

    def take(self, n: int) -> list[Cell]:
        taken = [next(self.pending) for _ in range(min(n, self.left))]
        self.left -= len(taken)
        return taken

    def more(self) -> bool:
        return self.left > 0

    def speculate(self, n: int) -> list[Cell]:  # noqa: ARG002 - a fixed grid has no ahead
        return []


def launch(cells: Sequence[Cell] | Source, launcher: Mapping[str, Any]) -> Iterator[Event]:
    """Run ``cells`` (a sequence, or a :class:`Source` fed by the outcomes the consumer
    sees) and yield their events as they happen (see the module docstring)."""
    check_launcher(launcher)
    source = cells if hasattr(cells, "take") else Fixed(cells)
    if not source.more():  # nothing to run: no Ray to start (a resume of a finished sweep)
        return
    if launcher.get("name", "ray") == "local":
        yield from _launch_local(source, timeout_of(launcher))
    else:
        yield from _launch_ray(source, launcher)


def timed_out_outcome(seconds: float, elapsed: float, **where: Any) -> Outcome:
    return Outcome(
        "FAILED",
        error=(
            f"TimeoutError: the cell ran {elapsed:.1f}s, over its time limit of {seconds:g}s "
            "(launcher.timeout_s), and was cancelled"
        ),
        wall_s=elapsed,
        **where,
    )


# --- local ------------------------------------------------------------------------------


class _CellTimeout(BaseException):
    """Raised by the alarm; a BaseException so that the cell's own handlers let it pass."""


@contextmanager
def _alarm(seconds: float | None) -> Iterator[None]:
    usable = seconds is not None and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def _raise(signum, frame):  # noqa: ARG001
        raise _CellTimeout

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _launch_local(source: Source, seconds: float | None) -> Iterator[Event]:
    node = node_label(None, None)
    while cells := source.take(1):
        cell = cells[0]
        yield Event("started", cell, node=node)
        started = time.perf_counter()
        try:
            with _alarm(seconds):
                outcome = execute(cell.function, cell.config)
        except _CellTimeout:
            outcome = timed_out_outcome(seconds, time.perf_counter() - started)
        yield Event("finished", cell, outcome)


# --- ray --------------------------------------------------------------------------------


CONNECT_S = 3.0
"""How long a cluster's address may take to accept a connection before the sweep gives up."""


def split_address(address: str) -> tuple[str, int] | None:
    """``host:port`` (optionally ``ray://host:port``) as a pair; None for ``local``/``auto``."""
    if address in ("local", "auto"):
        return None
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise SweepError(
            f"launcher.address must be a Ray cluster's host:port (e.g. 127.0.0.1:6379, what "
            f"`ray start --head` prints), or null for an embedded Ray; got {address!r}"
        )
    return host, int(port)


def _check_reachable(address: str) -> None:
    """Fail in seconds, not minutes of GCS retries, when nothing listens at ``address``."""
    pair = split_address(address)
    if pair is None:
        return
    try:
        socket.create_connection(pair, timeout=CONNECT_S).close()
    except OSError as err:
        raise SweepError(
            f"no Ray cluster answers at {address} (launcher.address or $RAY_ADDRESS): {err}. "
            f"Start one there (ray start --head --port={pair[1]}), fix the address, or leave "
            "launcher.address null (and unset RAY_ADDRESS) to run on an embedded Ray"
        ) from None


def init_ray(launcher: Mapping[str, Any]) -> None:
    """Join the cluster at ``launcher.address`` (or $RAY_ADDRESS), else start an embedded one.

    ``address="local"`` always starts a new instance, so a stale ``/tmp/ray`` session file
    of a dead cluster is never joined by accident, listening on 127.0.0.1 only (its GCS,
    raylet, workers and agents: no other machine can reach an embedded Ray). A cluster that
    does not answer, or one where no node has ``launcher.cpus_per_cell`` CPUs, is refused in
    seconds.
    """
    address = launcher.get("address") or os.environ.get("RAY_ADDRESS") or "local"
    if address == "local":  # Ray's single-machine mode (its default on macOS): loopback
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # read when ray is imported
    import ray

    _check_reachable(str(address))
    if ray.is_initialized():
        return
    kwargs: dict[str, Any] = {"address": address, "log_to_driver": False}
    if address == "local":
        kwargs["include_dashboard"] = False
        if launcher.get("num_cpus") is not None:
            kwargs["num_cpus"] = int(launcher["num_cpus"])
    ray.init(**kwargs)
    check_fits(float(launcher.get("cpus_per_cell") or 1), embedded=address == "local")


def check_fits(cpus_per_cell: float, embedded: bool) -> None:
    """An embedded Ray never grows: refuse a cell no node of it can hold (it would wait for
    ever). On a cluster an autoscaler may add bigger nodes, so this is only said."""
    import ray

    largest = max((n["Resources"].get("CPU", 0.0) for n in ray.nodes() if n["Alive"]), default=0)
    if cpus_per_cell <= largest:
        return
    message = (
        f"launcher.cpus_per_cell={cpus_per_cell:g} but the largest node has {largest:g} CPUs, "
        "so no cell can start"
    )
    if embedded:
        ray.shutdown()
        raise SweepError(
            f"{message}. Lower launcher.cpus_per_cell, or give the embedded Ray more CPUs "
            "(launcher.num_cpus), or run on a cluster with bigger nodes (launcher.address)"
        )
    print(f"warning: {message} until the cluster adds a bigger node", file=sys.stderr)


def _ray_cell(function: str, config: dict[str, Any]) -> Iterator[Any]:
    """The Ray task: announce where and when it starts, then run the cell."""
    import ray

    context = ray.get_runtime_context()
    node_id = context.get_node_id()
    node_ip = ray.util.get_node_ip_address()
    yield {"node_id": node_id, "node_ip": node_ip, "started": time.time()}
    outcome = execute(function, config)
    outcome.node_id = node_id
    outcome.node_ip = node_ip
    yield outcome


@dataclass
class _Slot:
    cell: Cell
    started: float | None = None  # when the driver heard of the first start (time.time())
    node_ip: str | None = None
    node_id: str | None = None

    @property
    def where(self) -> dict[str, Any]:
        return {"node_ip": self.node_ip, "node_id": self.node_id}


def _launch_ray(source: Source, launcher: Mapping[str, Any]) -> Iterator[Event]:
    import ray

    init_ray(launcher)
    max_retries = int(launcher.get("max_retries", 2))
    remote = ray.remote(_ray_cell).options(
        max_retries=max_retries,
        retry_exceptions=False,  # a cell's own exception is an outcome, not a retry
        num_cpus=float(launcher.get("cpus_per_cell") or 1),
        scheduling_strategy=str(launcher.get("scheduling_strategy") or "DEFAULT"),
    )
    limit = timeout_of(launcher)
    max_in_flight = max(1, int(launcher.get("max_in_flight") or 64))
    cpus_per_cell = float(launcher.get("cpus_per_cell") or 1)
    in_flight: dict[Any, _Slot] = {}
    try:
        while True:
            free = max_in_flight - len(in_flight)
            cells = source.take(free)
            if len(cells) < free:  # the source is starved: fill CPUs that would idle
                cells += source.speculate(_idle(len(in_flight) + len(cells), cpus_per_cell))
            for cell in cells:
                in_flight[remote.remote(cell.function, cell.config)] = _Slot(cell)
            if not in_flight:
                break  # nothing running and nothing handed out: the source is done
            refs = list(in_flight)  # every one ready now (one wait per event is slow), else
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)  # the first to be
            if not ready:
                ready, _ = ray.wait(refs, num_returns=1, timeout=_wait_s(in_flight, limit))
            for generator in ready:
                yield from _receive(generator, in_flight, max_retries)
            if limit is not None:
                yield from _expire(in_flight, limit)
            if not ready:
                yield Event("tick")
    finally:
        for generator in in_flight:
            ray.cancel(generator, force=True)


def _idle(running: int, cpus_per_cell: float) -> int:
    """How many more cells the cluster's CPUs hold now, beyond ``running``."""
    import ray

    return int(ray.cluster_resources().get("CPU", 0.0) // cpus_per_cell) - running


def _wait_s(in_flight: Mapping[Any, _Slot], limit: float | None) -> float:
    if limit is None:
        return POLL_S
    now = time.time()
    deadlines = [s.started + limit - now for s in in_flight.values() if s.started is not None]
    return max(0.0, min([POLL_S, *deadlines]))


def _receive(generator: Any, in_flight: dict[Any, _Slot], max_retries: int) -> Iterator[Event]:
    import ray

    slot = in_flight[generator]
    try:
        value = ray.get(next(generator))
    except ray.exceptions.RayError as err:  # the worker died more often than max_retries,
        # a lost node or object, out of memory, a cancelled task
        del in_flight[generator]
        if slot.started is None:  # e.g. the raylet died with the cell still queued
            how = "the cell never started"
        else:
            how = f"after up to {max_retries + 1} attempt(s)"
        yield Event(
            "finished",
            slot.cell,
            Outcome("FAILED", error=f"{type(err).__name__} ({how}): {err}"[:2000], **slot.where),
        )
        return
    if isinstance(value, Outcome):
        del in_flight[generator]
        yield Event("finished", slot.cell, value)
    else:
        slot.started = time.time()  # the driver's clock: no skew between nodes
        slot.node_ip, slot.node_id = value.get("node_ip"), value.get("node_id")
        yield Event("started", slot.cell, node=node_label(slot.node_ip, slot.node_id))


def _expire(in_flight: dict[Any, _Slot], limit: float) -> Iterator[Event]:
    import ray

    now = time.time()
    for generator, slot in list(in_flight.items()):
        if slot.started is not None and now - slot.started >= limit:
            ray.cancel(generator, force=True)
            del in_flight[generator]
            outcome = timed_out_outcome(limit, now - slot.started, **slot.where)
            yield Event("finished", slot.cell, outcome)
