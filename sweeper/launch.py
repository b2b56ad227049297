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
iterating) every cell still in flight is cancelled; once a stop is asked
(:data:`sweeper.signals.STOP`, the first Ctrl-C or SIGTERM) no cell more is submitted,
and after the cells in flight are cancelled the driver leaves Ray (:func:`_leave_ray`).

``local`` runs the cells one by one in this process, for debugging; its time limit is a
``SIGALRM`` timer (main thread only), which interrupts Python code but not a long C call.

**Batches of seeds.** Cells whose configs differ only in their seed form a group; when the
cell function declares a batched form (``function.batch``, a list of configs -> their
results), the launcher sends up to ``launcher.batch`` of a group's pending cells as one task
(:func:`batch_size`: by default the most cells, up to :data:`MAX_BATCH`, that leave at
least two tasks per CPU for the cells still to run, so smaller batches at the end). The
task returns one outcome per cell, each recorded as its own run. A batch whose worker dies
is not retried whole: its cells not yet returned run again one at a time (each with
``launcher.max_retries``). A batch over the time limit is cancelled, its cells run again
one at a time, each under the limit, and the sweep sends no more batches (a limit that a
batch exceeds is too tight for batches).

Either way the driver, not the workers, writes to MLflow.
"""

from __future__ import annotations

import copy
import os
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

from sweeper import signals
from sweeper.cells import Cell, canonical_json
from sweeper.errors import SweepError, at_least
from sweeper.execute import Outcome, cell_function, execute, execute_batch, node_label
from sweeper.outcome import Declared
from sweeper.signals import STOP

POLL_S = 0.5
"""How often the Ray loop wakes up without a result, to refresh progress and check limits."""

MAX_BATCH = 20
"""The most cells of one group an automatic batch holds: past about 20 seeds a batch saves
no more time per cell (bench/results/batch.md) while its memory still grows."""

MIN_IN_FLIGHT = 64
"""Tasks submitted at once when ``launcher.max_in_flight`` is null: twice the CPUs, at
least this many (more than the CPUs, so that an autoscaler sees demand)."""


@dataclass
class Event:
    """What the launcher reports: a cell ``started`` or ``finished`` (with its outcome), or
    a ``tick`` (nothing new; a chance to refresh the progress bar)."""

    kind: str
    cell: Cell | None = None
    outcome: Outcome | None = None
    node: str | None = None


def timeout_of(launcher: Mapping[str, Any]) -> float | None:
    """``launcher.timeout_s`` as seconds, or None for no limit; a clear error on a bad value
    (its type, a number or null, is sweeper/schema.py's)."""
    value = launcher.get("timeout_s")
    if value is None:
        return None
    if not 0 < float(value) < float("inf"):
        raise SweepError(
            f"launcher.timeout_s must be a positive number of seconds or null (no limit), got "
            f"{value!r}: set launcher.timeout_s=1800 (half an hour per cell) or "
            "launcher.timeout_s=null"
        )
    return float(value)


def check_launcher(launcher: Mapping[str, Any]) -> None:
    """Refuse a launcher config that cannot work, before anything runs: the ranges and
    shapes its types (sweeper/schema.py, checked at composition) cannot say."""
    timeout_of(launcher)
    for key, minimum in (("num_cpus", 1), ("max_in_flight", 1), ("max_retries", 0)):
        if launcher.get(key) is not None:
            at_least(launcher[key], f"launcher.{key}", minimum)
    if not launcher.get("cpus_per_cell", 1) > 0:
        raise SweepError(
            f"launcher.cpus_per_cell must be a positive number of CPUs, got "
            f"{launcher.get('cpus_per_cell')!r}"
        )
    batch = launcher.get("batch")
    if (isinstance(batch, str) and batch != "auto") or (isinstance(batch, int) and batch < 1):
        raise SweepError(
            f"launcher.batch={batch!r}: seeds per Ray task are null or auto (chosen from the "
            "cells' runtime), or a whole number of at least 1 (launcher.batch=4)"
        )
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


def group_of(cell: Cell) -> str:
    """Everything of a cell's config but its seed: the cells that share it form a group."""
    return canonical_json({k: v for k, v in cell.config.items() if k != "seed"})


@cache
def batches(function: str) -> bool:
    """Whether the cell function at ``function`` declares a batched form (``.batch``)."""
    return callable(getattr(cell_function(function), "batch", None))


def batch_size(setting: int | None, pending: int | None, cpus: float) -> int:
    """Cells per task: ``launcher.batch`` when set; else the most cells, up to
    :data:`MAX_BATCH`, that leave at least two tasks per CPU for the ``pending`` cells
    (all of them when unknown), and one cell per task once fewer are left."""
    if setting is not None:
        return int(setting)
    if pending is None:
        return MAX_BATCH
    return max(1, min(MAX_BATCH, int(pending // (2 * max(cpus, 1.0)))))


def in_flight_cap(launcher: Mapping[str, Any], cpus: float) -> int:
    """Tasks submitted at once: ``launcher.max_in_flight``, or when null twice the CPUs
    (at least :data:`MIN_IN_FLIGHT`)."""
    if launcher.get("max_in_flight") is not None:
        return max(1, int(launcher["max_in_flight"]))
    return max(MIN_IN_FLIGHT, int(2 * cpus))


class Batcher:
    """Hands out a source's cells in batches: consecutive cells of one group, in the
    source's order (a grid lists a group's seeds one after the other). Cells given back
    (:meth:`again`: of a batch that crashed or ran over its time limit) come first, one at
    a time, and are not announced as started twice."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.held: deque[Cell] = deque()  # taken from the source, not handed out yet
        self.retry: deque[Cell] = deque()
        self.announced: set[str] = set()  # keys of the cells whose start was reported
        self.batching = True  # off once a batch ran over the time limit

    def pending(self) -> int | None:
        """Cells still to hand out, when the source knows its size."""
        left = getattr(self.source, "left", None)
        return None if left is None else left + len(self.held) + len(self.retry)

    def take(self, size: int) -> list[Cell]:
        """Up to ``size`` cells of one group (one when the cell function has no batched
        form); none when the source has nothing ready."""
        if self.retry:
            return [self.retry.popleft()]
        if not self.held:
            self.held.extend(self.source.take(size if self.batching else 1))
        if not self.held:
            return []
        batch = [self.held.popleft()]
        if not (self.batching and batches(batch[0].function)):
            return batch
        group = group_of(batch[0])
        while len(batch) < size:
            if not self.held:
                self.held.extend(self.source.take(size - len(batch)))
                if not self.held:
                    break
            if group_of(self.held[0]) != group:
                break
            batch.append(self.held.popleft())
        return batch

    def again(self, cells: Sequence[Cell]) -> None:
        """Cells of a batch that did not finish: they run again, one at a time."""
        self.retry.extend(cells)

    def more(self) -> bool:
        return bool(self.retry or self.held) or self.source.more()

    def starts(self, cells: Sequence[Cell]) -> list[Cell]:
        """Of ``cells`` that just started, those whose start is news to the driver."""
        new = [cell for cell in cells if cell.key not in self.announced]
        self.announced.update(cell.key for cell in new)
        return new

    def done(self, cell: Cell) -> None:
        self.announced.discard(cell.key)


def launch(
    cells: Sequence[Cell] | Source, launcher: Mapping[str, Any], declared: Declared | None = None
) -> Iterator[Event]:
    """Run ``cells`` (a sequence, or a :class:`Source` fed by the outcomes the consumer
    sees) and yield their events as they happen (see the module docstring); each result is
    checked where it ran against the family's ``declared`` metrics and curves."""
    check_launcher(launcher)
    source = cells if hasattr(cells, "take") else Fixed(cells)
    if not source.more():  # nothing to run: no Ray to start (a resume of a finished sweep)
        return
    setting = launcher.get("batch")
    setting = None if setting in (None, "auto") else int(setting)  # null, auto: chosen
    if launcher.get("name", "ray") == "local":
        yield from _launch_local(Batcher(source), setting, timeout_of(launcher), declared)
    else:
        yield from _launch_ray(Batcher(source), setting, launcher, declared)


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


def _launch_local(
    batcher: Batcher, setting: int | None, seconds: float | None, declared: Declared | None
) -> Iterator[Event]:
    node = node_label(None, None)
    while not STOP.requested and (
        cells := batcher.take(batch_size(setting, batcher.pending(), 1.0))
    ):
        for cell in batcher.starts(cells):
            yield Event("started", cell, node=node)
        started = time.perf_counter()
        try:
            with _alarm(seconds):
                outcomes = _run(cells, declared)
        except _CellTimeout:
            if len(cells) > 1:  # too slow as a batch: each cell again, alone
                batcher.again(cells)
                batcher.batching = False
                continue
            outcomes = [timed_out_outcome(seconds, time.perf_counter() - started)]
        for cell, outcome in zip(cells, outcomes, strict=True):
            batcher.done(cell)
            yield Event("finished", cell, outcome)


def _run(cells: Sequence[Cell], declared: Declared | None) -> list[Outcome]:
    """The outcomes of a batch (one cell: ``execute``, several: ``execute_batch``)."""
    if len(cells) == 1:
        return [execute(cells[0].function, cells[0].config, declared)]
    return execute_batch(cells[0].function, [cell.config for cell in cells], declared)


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


def init_ray(launcher: Mapping[str, Any]) -> bool:
    """Join the cluster at ``launcher.address`` (or $RAY_ADDRESS), else start an embedded one;
    False when this process was connected to a Ray already (the caller's: it stays).

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
        return False
    kwargs: dict[str, Any] = {"address": address, "log_to_driver": False}
    if address == "local":
        kwargs["include_dashboard"] = False
        if launcher.get("num_cpus") is not None:
            kwargs["num_cpus"] = int(launcher["num_cpus"])
    with signals.starting("Ray's start"), _ray_sets_no_sigterm_handler():
        ray.init(**kwargs)
    check_fits(float(launcher.get("cpus_per_cell") or 1), embedded=address == "local")
    return True


RAY_SETS_SIGTERM = ("ray._private.utils", "set_sigterm_handler")
"""Where ``ray.init`` sets its own SIGTERM handler (``sys.exit(15)``, which would raise
inside Ray's start: sweeper/signals.py says why that must not happen). A private name,
checked against the installed Ray by tests/test_signals.py."""


@contextmanager
def _ray_sets_no_sigterm_handler() -> Iterator[None]:
    """For the block, ``ray.init`` sets no SIGTERM handler: the driver's stays in force (a
    Ray without the name sets its own; :func:`sweeper.signals.starting` puts the driver's
    back once the block ends)."""
    import importlib

    module = importlib.import_module(RAY_SETS_SIGTERM[0])
    original = getattr(module, RAY_SETS_SIGTERM[1], None)
    if original is None:
        yield
        return
    setattr(module, RAY_SETS_SIGTERM[1], lambda handler: None)
    try:
        yield
    finally:
        setattr(module, RAY_SETS_SIGTERM[1], original)


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


def _ray_cell(
    function: str, config: dict[str, Any], declared: Declared | None = None
) -> Iterator[Any]:
    """The Ray task of one cell: announce where and when it starts, then run the cell."""
    import ray

    context = ray.get_runtime_context()
    node_id = context.get_node_id()
    node_ip = ray.util.get_node_ip_address()
    yield {"node_id": node_id, "node_ip": node_ip, "started": time.time()}
    outcome = execute(function, config, declared)
    outcome.node_id = node_id
    outcome.node_ip = node_ip
    yield outcome


def _ray_cells(
    function: str, configs: list[dict[str, Any]], declared: Declared | None = None
) -> Iterator[Any]:
    """The Ray task of a batch: announce where and when it starts, run the cells as one
    call of the function's batched form, then yield each cell's outcome in order."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    node_ip = ray.util.get_node_ip_address()
    yield {"node_id": node_id, "node_ip": node_ip, "started": time.time()}
    for outcome in execute_batch(function, configs, declared):
        outcome.node_id = node_id
        outcome.node_ip = node_ip
        yield outcome


@dataclass
class _Slot:
    cells: list[Cell]
    started: float | None = None  # when the driver heard of the first start (time.time())
    node_ip: str | None = None
    node_id: str | None = None
    received: int = 0  # the outcomes received so far, in the order of ``cells``
    retry: Callable[[Sequence[Cell]], None] | None = field(default=None, repr=False)

    @property
    def where(self) -> dict[str, Any]:
        return {"node_ip": self.node_ip, "node_id": self.node_id}

    @property
    def rest(self) -> list[Cell]:
        """The cells without an outcome yet."""
        return self.cells[self.received :]


def _launch_ray(
    batcher: Batcher, setting: int | None, launcher: Mapping[str, Any], declared: Declared | None
) -> Iterator[Event]:
    import ray

    joined = init_ray(launcher)
    max_retries = int(launcher.get("max_retries", 2))
    cpus_per_cell = float(launcher.get("cpus_per_cell") or 1)
    options = {
        "retry_exceptions": False,  # a cell's own exception is an outcome, not a retry
        "num_cpus": cpus_per_cell,
        "scheduling_strategy": str(launcher.get("scheduling_strategy") or "DEFAULT"),
    }
    one = ray.remote(_ray_cell).options(max_retries=max_retries, **options)
    many = ray.remote(_ray_cells).options(max_retries=0, **options)  # the driver retries
    limit = timeout_of(launcher)
    cpus = _Cpus(cpus_per_cell)

    def submit(cells: Sequence[Cell]) -> Any:
        return _submit(one, many, cells, declared)

    in_flight: dict[Any, _Slot] = {}
    try:
        while not STOP.requested:  # a stop hands out nothing more: a submission (or a
            # question to the cluster) may wait a minute on a head that is going down too
            cap, starved = in_flight_cap(launcher, cpus()), False
            while len(in_flight) < cap and not STOP.requested:
                cells = batcher.take(batch_size(setting, batcher.pending(), cpus()))
                if not cells:
                    starved = True
                    break
                in_flight[submit(cells)] = _Slot(cells, retry=batcher.again)
            if starved and not STOP.requested:  # nothing ready: fill CPUs that would idle
                for cells in _by_group(batcher.source.speculate(int(cpus()) - len(in_flight))):
                    in_flight[submit(cells)] = _Slot(cells, retry=batcher.again)
            if not in_flight:
                break  # nothing running and nothing handed out: the source is done
            refs = list(in_flight)  # every one ready now (one wait per event is slow), else
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)  # the first to be
            if not ready:
                ready, _ = ray.wait(refs, num_returns=1, timeout=_wait_s(in_flight, limit))
            for generator in ready:
                yield from _receive(generator, in_flight, max_retries, batcher)
            if limit is not None:
                yield from _expire(in_flight, limit, batcher)
            if not ready:
                yield Event("tick")
    finally:
        for generator in in_flight:
            ray.cancel(generator, force=True)
        if STOP.requested and joined:
            _leave_ray()


def _leave_ray() -> None:
    """Disconnect from the Ray this launch joined, after a stop: the driver needs nothing
    more from it (every finished cell's result is in hand), and a node signalled with the
    driver ends soon (a Ray the caller started stays).

    Slurm's ``scancel`` signals Ray's processes with the driver's, and the node may go at
    any moment after: a driver still in Ray makes calls into it until it exits (waits of
    up to a minute on a dead GCS, a disconnect). A driver that has left makes none, and
    what it recorded never depended on the node (:func:`_owned`)."""
    import ray

    ray.shutdown()


def _submit(one: Any, many: Any, cells: Sequence[Cell], declared: Declared | None) -> Any:
    if len(cells) == 1:
        return one.remote(cells[0].function, cells[0].config, declared)
    return many.remote(cells[0].function, [cell.config for cell in cells], declared)


def _by_group(cells: Sequence[Cell]) -> list[list[Cell]]:
    """Speculative cells in batches: consecutive cells of one group together."""
    out: list[list[Cell]] = []
    for cell in cells:
        if out and batches(cell.function) and group_of(out[-1][0]) == group_of(cell):
            out[-1].append(cell)
        else:
            out.append([cell])
    return out


class _Cpus:
    """The cluster's CPUs in cells (``cpus_per_cell`` each), asked of Ray at most once a
    second: an autoscaler may add nodes while the sweep runs."""

    def __init__(self, cpus_per_cell: float) -> None:
        self.cpus_per_cell = cpus_per_cell
        self.value, self.asked = 1.0, -1.0

    def __call__(self) -> float:
        import ray

        now = time.monotonic()
        if now - self.asked >= 1.0:
            self.value = max(1.0, ray.cluster_resources().get("CPU", 0.0) // self.cpus_per_cell)
            self.asked = now
        return self.value


def _wait_s(in_flight: Mapping[Any, _Slot], limit: float | None) -> float:
    if limit is None:
        return POLL_S
    now = time.time()
    deadlines = [s.started + limit - now for s in in_flight.values() if s.started is not None]
    return max(0.0, min([POLL_S, *deadlines]))


def _receive(
    generator: Any,
    in_flight: dict[Any, _Slot],
    max_retries: int,
    batcher: Batcher | None = None,
) -> Iterator[Event]:
    import ray

    slot = in_flight[generator]
    try:
        value = _owned(ray.get(next(generator)))
    except ray.exceptions.RayError as err:  # the worker died more often than max_retries,
        # a lost node or object, out of memory, a cancelled task
        del in_flight[generator]
        if len(slot.cells) > 1 and slot.retry is not None:  # a batch: its cells again, alone
            slot.retry(slot.rest)
            return
        if slot.started is None:  # e.g. the raylet died with the cell still queued
            how = "the cell never started"
        else:
            how = f"after up to {max_retries + 1} attempt(s)"
        outcome = Outcome(
            "FAILED", error=f"{type(err).__name__} ({how}): {err}"[:2000], **slot.where
        )
        yield _finished(slot, outcome, batcher)
        return
    if isinstance(value, Outcome):
        if slot.received + 1 == len(slot.cells):
            del in_flight[generator]
        yield _finished(slot, value, batcher)
    else:
        slot.started = time.time()  # the driver's clock: no skew between nodes
        slot.node_ip, slot.node_id = value.get("node_ip"), value.get("node_id")
        node = node_label(slot.node_ip, slot.node_id)
        for cell in batcher.starts(slot.cells) if batcher else slot.cells:
            yield Event("started", cell, node=node)


def _owned(value: Any) -> Any:
    """``value`` in the driver's own memory. ``ray.get`` gives a result larger than Ray's
    inline limit (100 KB: a cell's curves) as arrays that view the node's object store, and
    dropping them later (once recorded) is a call into that store. When the store has gone
    meanwhile (a plain ``scancel`` signals every Ray process of the job at once), Ray ends
    the driver at that call: status 1, no word, its last cells unrecorded, the parent run
    left RUNNING (CI's Slurm trial; 3 of 5 plain ``scancel`` trials here). A copy taken now
    releases the store's buffer before this returns."""
    return copy.deepcopy(value)


def _finished(slot: _Slot, outcome: Outcome, batcher: Batcher | None) -> Event:
    """The event of the slot's next cell, which ``outcome`` is."""
    cell = slot.cells[slot.received]
    slot.received += 1
    if batcher is not None:
        batcher.done(cell)
    return Event("finished", cell, outcome)


def _expire(in_flight: dict[Any, _Slot], limit: float, batcher: Batcher) -> Iterator[Event]:
    import ray

    now = time.time()
    for generator, slot in list(in_flight.items()):
        if slot.started is not None and now - slot.started >= limit:
            ray.cancel(generator, force=True)
            del in_flight[generator]
            if len(slot.cells) > 1:  # too slow as a batch: each cell again, alone
                batcher.again(slot.rest)
                batcher.batching = False
                continue
            yield _finished(
                slot, timed_out_outcome(limit, now - slot.started, **slot.where), batcher
            )
