"""Settling what earlier drivers left: runs left RUNNING by a killed driver, the
``superseded_by`` tags of a rerun that did not end, and the artifact directories of runs
that were never committed (docs/architecture.md, "Resume and reruns").

A run left RUNNING by a killed driver (cell or sweep) is set to KILLED (tag
``sweeper.reaped``) when a sweep next starts in the experiment: they are searched for by
status, whatever the tables say. A rerun marks its parent ``sweeper.rerun_open`` until it
ends; a start that finds the mark re-tags every older FINISHED run of each cell, so exactly
one FINISHED run per cell is untagged: the one :func:`sweeper.store.result.result_of` picks.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mlflow.exceptions import MlflowException

from sweeper.process import driver_alive, now_ms
from sweeper.store.failures import STORE_ERRORS
from sweeper.store.index import IndexEntry, ResumeIndex
from sweeper.store.result import result_of
from sweeper.store.tracking import Tracker

ORPHAN_AFTER_MS = 120_000
"""A cell run is RUNNING only while the driver logs it (well under a second): one RUNNING
for longer than this, or whose driver process is gone, was left by a killed driver."""


def leftovers(tracker: Tracker, parent_id: str | None = None) -> list[Any]:
    """The RUNNING cell runs and sweep parents (but ``parent_id``) of the experiment,
    found by status: a run created after a table's last flush but before its
    ``table_until`` mark (a driver aborted while logging) is found too."""
    running = tracker.runs("attributes.status = 'RUNNING'")
    return [
        r
        for r in running
        if r.info.run_id != parent_id
        and ("cell_key" in r.data.tags or r.data.tags.get("role") == "sweep")
    ]


def reap(tracker: Tracker, running: Iterable[Any], parent_id: str | None = None) -> list[str]:
    """Set KILLED the RUNNING runs left by killed drivers; return their run ids.

    A run is left over when it belongs to ``parent_id`` (this sweep, now driven by this
    process), or was made by this process (an earlier sweep it aborted), or its driver
    process is not known to be alive (gone, or on another host: the caller holds the
    store's lock or the experiment's lease, so no other driver writes here), or it has
    been RUNNING for longer than :data:`ORPHAN_AFTER_MS`. A RUNNING run of a live
    driver on this host that holds no lock (an older sweeper) is left alone.
    """
    reaped = []
    for run in running:
        tags = run.data.tags
        driver = tags.get("sweeper.driver")
        stale = now_ms() - int(run.info.start_time) > ORPHAN_AFTER_MS
        mine = tags.get("mlflow.parentRunId") == parent_id or driver == tracker.driver
        if mine or driver_alive(driver) is not True or stale:
            tracker.client.set_tag(
                run.info.run_id, "sweeper.reaped", "left RUNNING by a killed driver"
            )
            tracker.client.set_terminated(run.info.run_id, "KILLED")
            reaped.append(run.info.run_id)
    return reaped


def retract(tracker: Tracker) -> list[str]:
    """Delete the runs that drivers on other hosts left uncommitted (RUNNING cell runs:
    through MLflow's API a run is committed by its status, :mod:`sweeper.store.record`);
    returns their run ids.

    Called by a driver that has just taken the experiment (its lease and fencing token)
    and before it reads what is done: such a driver lost its lease without being known
    dead (another host's is told only by its heartbeat), may be merely paused, and would
    commit its runs when it wakes. MLflow refuses to change a deleted run, so a commit that
    comes later fails (and that driver stops) or lands on a deleted run; either way the
    cell is run again by this driver, once. A run of a driver on this host is left to
    :func:`reap` (a dead one's cannot be committed any more; a live one holds its lease).
    """
    running = tracker.runs("attributes.status = 'RUNNING'")
    taken = [
        r
        for r in running
        if "cell_key" in r.data.tags
        and r.data.tags.get("sweeper.driver") != tracker.driver
        and driver_alive(r.data.tags.get("sweeper.driver")) is None
    ]
    for run in taken:
        tracker.client.set_tag(
            run.info.run_id, "sweeper.reaped", "retracted: its driver lost the experiment"
        )
        tracker.client.set_terminated(run.info.run_id, "KILLED")
        tracker.client.delete_run(run.info.run_id)
    return [r.info.run_id for r in taken]


def settle_own(tracker: Tracker, parent_id: str | None = None) -> int:
    """Set KILLED the cell runs this process left RUNNING (a second Ctrl-C cut one off
    while it was being logged); best effort. Returns how many."""
    try:
        mine = tracker.runs(
            f"tags.`sweeper.driver` = '{tracker.driver}' and attributes.status = 'RUNNING'"
        )
        own = [r for r in mine if r.info.run_id != parent_id and "cell_key" in r.data.tags]
        for run in own:
            tracker.client.set_tag(run.info.run_id, "sweeper.reaped", "its driver was stopped")
            tracker.client.set_terminated(run.info.run_id, "KILLED")
        return len(own)
    except STORE_ERRORS:  # the store is what failed: the next start settles them
        return 0


def settle_supersession(tracker: Tracker, parents: Iterable[Any], index: ResumeIndex) -> int:
    """After a rerun that did not end (a parent tagged ``sweeper.rerun_open``): tag every
    FINISHED run of each cell but the newest ``superseded_by`` the newest, untag the
    newest, make the newest each cell's entry in ``index``, and clear the marks.
    Returns how many runs were re-tagged."""
    marked = [p for p in parents if p.data.tags.get("sweeper.rerun_open")]
    if not marked:
        return 0
    finished = tracker.runs("tags.cell_key != '' and attributes.status = 'FINISHED'")
    by_key: dict[str, list[Any]] = {}
    for run in finished:
        by_key.setdefault(run.data.tags["cell_key"], []).append(run)
    newest = {
        key: result_of(runs, lambda r: (r.info.status, r.info.start_time))
        for key, runs in by_key.items()
    }
    for key, run in newest.items():
        index.add(key, IndexEntry(run.info.run_id, int(run.info.start_time), run=run))
    fixed = 0
    for run in finished:
        current = newest[run.data.tags["cell_key"]].info.run_id
        tag = run.data.tags.get("superseded_by")
        if run.info.run_id == current and tag is not None:
            tracker.client.delete_tag(run.info.run_id, "superseded_by")
            fixed += 1
        elif run.info.run_id != current and tag != current:
            tracker.client.set_tag(run.info.run_id, "superseded_by", current)
            fixed += 1
    for parent in marked:
        tracker.client.delete_tag(parent.info.run_id, "sweeper.rerun_open")
    return fixed


# --- parent run -----------------------------------------------------------------


PENDING = ".sweeper-pending-{}.json"
"""A batch's manifest of the run directories it writes before its runs commit."""


@contextmanager
def pending(directories: list[Path]) -> Iterator[None]:
    """Name in a manifest beside them the run directories (``<root>/<run id>``) a batch
    writes its artifacts into before its runs are committed (direct writes: a run is never
    without its files); the manifest is removed once the block ends, kept when it fails, so
    the next start removes what it can prove was never committed (:func:`clear_orphans`)."""
    if not directories:
        yield
        return
    root = directories[0].parent
    root.mkdir(parents=True, exist_ok=True)
    manifest = root / PENDING.format(uuid.uuid4().hex)
    manifest.write_text(json.dumps([str(d) for d in directories]))
    yield
    manifest.unlink(missing_ok=True)


def clear_orphans(tracker: Tracker, root: Path | None) -> int:
    """Remove the run directories under ``root`` (the experiment's artifact directory on
    this file system) that a failed batch's manifest names and whose run does not exist in
    the store: artifacts of runs never committed. Returns how many were removed."""
    removed = 0
    if root is None or not root.is_dir():
        return 0
    for manifest in root.glob(PENDING.format("*")):
        try:
            directories = [Path(d) for d in json.loads(manifest.read_text())]
        except (OSError, ValueError):
            directories = []
        for directory in directories:
            if directory.parent == root and not _exists(tracker, directory.name):
                shutil.rmtree(directory, ignore_errors=True)
                removed += 1
        manifest.unlink(missing_ok=True)
    return removed


def _exists(tracker: Tracker, run_id: str) -> bool:
    try:
        tracker.client.get_run(run_id)
    except MlflowException as err:
        if err.error_code == "RESOURCE_DOES_NOT_EXIST":
            return False
        raise
    return True
