"""Dispatch cells and stream their outcomes back as they finish (DESIGN.md, Data flow 3-4).

``ray`` submits every cell as a Ray task, with a bounded number in flight, and yields
outcomes in completion order (``ray.wait``); ``local`` runs them one by one in this
process, for debugging. Either way the driver, not the workers, writes to MLflow.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sweeper.cells import Cell
from sweeper.execute import Outcome, execute


def launch(cells: Sequence[Cell], launcher: Mapping[str, Any]) -> Iterator[tuple[Cell, Outcome]]:
    name = launcher.get("name", "ray")
    if name == "local":
        yield from _launch_local(cells)
    elif name == "ray":
        yield from _launch_ray(cells, launcher)
    else:
        raise ValueError(f"unknown launcher '{name}'; valid launchers are: ray, local")


def _launch_local(cells: Sequence[Cell]) -> Iterator[tuple[Cell, Outcome]]:
    for cell in cells:
        yield cell, execute(cell.function, cell.config)


def init_ray(launcher: Mapping[str, Any]) -> None:
    """Join the cluster at ``launcher.address`` (or $RAY_ADDRESS), else start an embedded one."""
    import ray

    if ray.is_initialized():
        return
    address = launcher.get("address") or os.environ.get("RAY_ADDRESS") or "local"
    kwargs: dict[str, Any] = {"address": address, "log_to_driver": False}
    if address == "local":
        kwargs["include_dashboard"] = False
        if launcher.get("num_cpus"):
            kwargs["num_cpus"] = int(launcher["num_cpus"])
    ray.init(**kwargs)


def _launch_ray(
    cells: Sequence[Cell], launcher: Mapping[str, Any]
) -> Iterator[tuple[Cell, Outcome]]:
    import ray

    init_ray(launcher)
    remote = ray.remote(execute).options(
        max_retries=int(launcher.get("max_retries", 2)), num_cpus=1
    )
    max_in_flight = max(1, int(launcher.get("max_in_flight", 64)))
    pending = list(reversed(cells))
    in_flight: dict[Any, Cell] = {}
    while pending or in_flight:
        while pending and len(in_flight) < max_in_flight:
            cell = pending.pop()
            in_flight[remote.remote(cell.function, cell.config)] = cell
        done, _ = ray.wait(list(in_flight), num_returns=1)
        for ref in done:
            cell = in_flight.pop(ref)
            try:
                outcome = ray.get(ref)
            except Exception as err:  # the worker died more often than max_retries
                outcome = Outcome("FAILED", error=f"{type(err).__name__}: {err}")
            yield cell, outcome
